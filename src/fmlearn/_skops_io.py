"""``fmlearn.save`` / ``fmlearn.load``: model files, and safe files for whole pipelines
(scikit-learn objects holding fmlearn estimators) via skops.

:func:`save` writes any object that is not itself an fmlearn estimator (a
``Pipeline``, a ``GridSearchCV``, a ``ColumnTransformer``, ...) with ``skops.io``, which
stores objects as JSON plus ``.npy`` arrays and, on loading, builds only types the caller
trusts: no pickle, no code from the file. fmlearn adds three things:

- every fmlearn estimator in the object is written as :func:`fmlearn.io.save_model` would
  write it: its constructor arguments and its public learned state only (attributes ending in
  ``_``), never the caches and compiled-solver states it keeps privately;
- :func:`fmlearn.io.trusted_types` lists fmlearn's estimators and encoders, trusted on loading
  besides what skops trusts by default (scikit-learn's estimators, NumPy, builtins);
- on loading, the ZIP directory is checked before skops reads anything (every member stored
  uncompressed, sizes inside the file: no decompression bomb), and every fmlearn estimator
  is rebuilt from its class and parameters and passes the checks of :func:`fmlearn.io.load`
  (finite state, consistent shapes, a probe prediction); any failure is a
  :class:`~fmlearn.exceptions.ModelFileError`.
"""

import copy
import io as _io
import numbers
import os
import zipfile

import numpy as np

from .exceptions import ModelFileError

_MISSING = ("saving or loading a pipeline needs skops (the optional extra): "
            "pip install 'fmlearn[skops]'")
_SKOPS_SCHEMA = "schema.json"


def _skops():
    try:
        import skops.io as sio
    except ImportError:
        raise ImportError(_MISSING) from None
    return sio


def _is_fmlearn_estimator(obj):
    """``isinstance(obj, fmlearn._base.BaseFM)`` without importing ``_base`` (which imports
    :mod:`fmlearn.io`, which imports this module: an import circle)."""
    return any(c.__module__ == "fmlearn._base" and c.__qualname__ == "BaseFM"
               for c in type(obj).__mro__)


def _is_fmlearn_encoder(obj):
    """An instance of one of :mod:`fmlearn.encoders`' classes (TabularEncoder, ...)."""
    module = type(obj).__module__
    return module == "fmlearn.encoders" or module.startswith("fmlearn.encoders.")


def _fmlearn_estimators(obj, match=_is_fmlearn_estimator):
    """Every fmlearn estimator (or object for which ``match`` is true) reachable from ``obj``
    through attributes, lists, tuples, dicts, sets and object arrays (each once), by id."""
    found, seen, stack = {}, set(), [obj]
    while stack:
        item = stack.pop()
        if id(item) in seen or item is None or isinstance(item, (str, bytes, numbers.Number)):
            continue
        seen.add(id(item))
        if match(item):
            found[id(item)] = item
        elif isinstance(item, np.ndarray):
            if item.dtype == object:
                stack.extend(item.ravel().tolist())
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        elif hasattr(item, "__dict__") and not isinstance(item, type):
            stack.extend(vars(item).values())
    return found


def _public_copy(est):
    """A new estimator of the same class holding what :func:`fmlearn.io.save_model` writes:
    the constructor arguments and the public learned state, as ``fmlearn.io.load`` returns
    them (JSON values restored), so that predictions after loading are identical."""
    from .io import _estimator_class, _json_value, _restore_json, _split_state

    cls = type(est)
    if _estimator_class(cls.__name__) is not cls:
        raise TypeError(f"{cls.__name__} is not a public fmlearn estimator and cannot be saved")
    params = {}
    for key, value in est.get_params(deep=False).items():
        if isinstance(value, np.random.RandomState):
            value = None  # as in save_model: a generator's state is not a constructor value
        params[key] = copy.deepcopy(value)
    new = cls(**params)
    arrays, attributes = _split_state(est)
    for name, arr in arrays.items():
        setattr(new, name, arr.copy())
    for name, value in attributes.items():
        setattr(new, name, _restore_json(_json_value(value, f"attribute {name}")))
    return new


def save(obj, path):
    """Write ``obj`` to ``path``: an fmlearn estimator as a model file (``.fmz``,
    :func:`fmlearn.io.save_model`), anything else (a ``Pipeline`` of scikit-learn
    transformers and fmlearn estimators, ...) as a skops file (``.skops``).

    The file is written atomically (a temporary file renamed over ``path``). Load it with
    :func:`load`. Needs the optional dependency ``skops`` for a non-fmlearn object.

    Examples
    --------
    >>> import numpy as np, os, tempfile, fmlearn
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> X = np.random.default_rng(0).normal(size=(60, 4)); y = X[:, 0] * X[:, 1]
    >>> pipe = make_pipeline(StandardScaler(),
    ...                      fmlearn.FMRegressor(solver="als", n_iter=5, random_state=0))
    >>> path = os.path.join(tempfile.mkdtemp(), "pipe.skops")
    >>> _ = fmlearn.save(pipe.fit(X, y), path)
    >>> bool(np.array_equal(fmlearn.load(path).predict(X), pipe.predict(X)))
    True
    """
    from ._files import atomic_write
    from .io import save_model

    if _is_fmlearn_estimator(obj):
        return save_model(obj, path)
    sio = _skops()
    found = _fmlearn_estimators(obj)
    memo = {key: _public_copy(est) for key, est in found.items()}
    clean = copy.deepcopy(obj, memo)
    blob = sio.dumps(clean, compression=zipfile.ZIP_STORED)
    path = os.fspath(path)
    with atomic_write(path) as fh:
        fh.write(blob)
    return path


def is_skops_file(path):
    """True when ``path`` (a path or an open binary file) is a ZIP archive holding skops'
    schema and no fmlearn manifest."""
    try:
        if hasattr(path, "seek"):
            path.seek(0)
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
    except Exception:  # not a ZIP, unreadable, ...: the model-file loader reports it
        return False
    return _SKOPS_SCHEMA in names and "fmlearn.json" not in names


#: Bytes a deflated member inside a ``.npz`` member (skops writes SciPy sparse matrices with
#: ``save_npz``, compressed) may claim per stored byte: deflate's largest ratio is about 1032.
_DEFLATE_MAX_RATIO = 1032


def _npy_header(raw, where, path):
    """``(shape, dtype, header bytes)`` of the ``.npy`` text starting ``raw``."""
    from .io import NPY_HEADER_MAX

    try:
        fh = _io.BytesIO(raw)
        fmt = np.lib.format
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, _, dtype = fmt.read_array_header_1_0(fh, max_header_size=NPY_HEADER_MAX)
        elif version == (2, 0):
            shape, _, dtype = fmt.read_array_header_2_0(fh, max_header_size=NPY_HEADER_MAX)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except Exception as exc:
        raise ModelFileError(f"{path!r}: member {where!r} is not a readable .npy array "
                             f"({type(exc).__name__}: {exc})") from None
    if dtype.hasobject:
        raise ModelFileError(f"{path!r}: member {where!r} holds Python objects (pickled); "
                             "pipeline files store plain arrays only")
    return shape, dtype, fh.tell()


def _check_npy(member_open, declared, where, path):
    """A ``.npy`` member must hold exactly the bytes its header's shape and dtype need: the
    size is checked from the header before NumPy allocates the array (a header may claim any
    shape)."""
    from .io import NPY_HEADER_MAX

    with member_open() as f:
        raw = f.read(min(declared, NPY_HEADER_MAX + 256))
    shape, dtype, header = _npy_header(raw, where, path)
    need = dtype.itemsize
    for n in shape:
        need *= int(n)
    if declared - header != need:
        raise ModelFileError(f"{path!r}: member {where!r} declares shape {shape} of {dtype} "
                             f"({need} bytes) but holds {declared - header}")


def check_pipeline_members(zf, path, size):
    """Every member of the pipeline archive ``zf`` sized before skops reads it: the ZIP
    directory (:func:`fmlearn.io.check_stored_members`: stored, inside the file), each
    ``.npy`` array against its header, and each ``.npz`` (a SciPy sparse matrix) the same
    way, member by member, its deflated members claiming at most deflate's largest ratio.
    Raises ``ModelFileError``."""
    from .io import check_stored_members

    infos = check_stored_members(zf, path, size)
    for name, info in infos.items():
        if name.endswith(".npy"):
            _check_npy(lambda info=info: zf.open(info), info.file_size, name, path)
        elif name.endswith(".npz"):
            with zf.open(info) as member, zipfile.ZipFile(member) as inner:
                for sub in inner.infolist():
                    where = f"{name}/{sub.filename}"
                    if sub.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) \
                            or sub.flag_bits & 0x1:
                        raise ModelFileError(f"{path!r}: member {where!r} is encrypted or "
                                             "compressed with an unsupported method")
                    if sub.file_size > max(sub.compress_size, 1) * _DEFLATE_MAX_RATIO:
                        raise ModelFileError(f"{path!r}: member {where!r} claims "
                                             f"{sub.file_size} bytes from {sub.compress_size}")
                    _check_npy(lambda sub=sub: inner.open(sub), sub.file_size, where, path)
    return infos


def _rebuild(est, path):
    """Put ``est`` back together as ``fmlearn.io.load`` would: its class's constructor on its
    parameters (validated), then its public learned state; nothing else from the file."""
    from .io import _check_attr_name, _check_usable, _estimator_class

    cls = type(est)
    if _estimator_class(cls.__name__) is not cls:
        raise ModelFileError(f"{path!r}: {cls.__name__} is not a public fmlearn estimator")
    state = dict(vars(est))
    names = cls._get_param_names()
    try:
        new = cls(**{k: state[k] for k in names if k in state})
        new._validate_params()
    except Exception as exc:
        raise ModelFileError(f"{path!r}: invalid parameters for {cls.__name__}: {exc}") from None
    learned = {}
    for name, value in state.items():
        if name in names or name == "_sklearn_version":
            continue
        if name.startswith("_"):  # a cache: fmlearn never writes one
            raise ModelFileError(f"{path!r}: {cls.__name__} carries a private attribute "
                                 f"{name!r}; fmlearn writes only public learned state")
        _check_attr_name(name, path)
        learned[name] = value
    est.__dict__.clear()
    est.__dict__.update(vars(new))
    est.__dict__.update(learned)
    if learned:
        _check_usable(est, path)


def _rebuild_encoder(enc, path):
    """Check an fmlearn encoder as :func:`_rebuild` checks an estimator: its parameters
    through its class's constructor and constraints, its learned state public, float arrays
    finite, and the class's own ``_check_loaded_state`` (the layout its parameters imply,
    within the bounds ``fit`` enforces: a hashed column of 10^12 buckets is refused)."""
    from . import encoders

    cls = type(enc)
    if getattr(encoders, cls.__name__, None) is not cls:
        raise ModelFileError(f"{path!r}: {cls.__name__} is not a public fmlearn encoder")
    state = dict(vars(enc))
    names = cls._get_param_names()
    try:
        new = cls(**{k: state[k] for k in names if k in state})
        if hasattr(cls, "_parameter_constraints"):  # else fit checks them (the state check)
            new._validate_params()
    except Exception as exc:
        raise ModelFileError(f"{path!r}: invalid parameters for {cls.__name__}: {exc}") from None
    for name, value in state.items():
        if name in names or name == "_sklearn_version":
            continue
        if name.startswith("_") or not name.endswith("_"):
            raise ModelFileError(f"{path!r}: {cls.__name__} carries an attribute {name!r} that "
                                 "its fit does not make")
        if isinstance(value, np.ndarray) and value.dtype.kind in "fc" and not np.all(
                np.isfinite(value)):
            raise ModelFileError(f"{path!r}: inconsistent {cls.__name__} state: {name} contains "
                                 "NaN or infinity")
    if not any(n.endswith("_") for n in state):
        return  # an unfitted encoder: nothing learned to check
    check = getattr(enc, "_check_loaded_state", None)
    if check is not None:
        try:
            check()
        except Exception as exc:
            raise ModelFileError(f"{path!r}: inconsistent {cls.__name__} state: "
                                 f"{type(exc).__name__}: {exc}") from None


def load(path, *, trusted=None):
    """Load what :func:`save` wrote: a model file (:func:`fmlearn.io.load`) or a pipeline
    file (skops), refusing anything else with :class:`~fmlearn.exceptions.ModelFileError`.

    A pipeline file is loaded with skops, building only skops' default types (scikit-learn's
    estimators, NumPy, builtins), :func:`fmlearn.io.trusted_types` and the type names in
    ``trusted``; any other type is refused with a ``ModelFileError`` naming it. Every member
    is sized from the ZIP directory and its ``.npy`` header before anything is read into an
    array. Every fmlearn estimator inside is rebuilt from its class and parameters and passes
    the model-file checks; every fmlearn encoder passes its class's checks of parameters and
    state. The file is opened once and read through that handle only: a concurrent
    :func:`save` to the same path (which renames a new file over it) gives this call the old
    file or the new one, never a mixture. See docs/tabular.md.
    """
    from .io import load_open, open_regular

    path = os.fspath(path)
    fh, size = open_regular(path)  # FileNotFoundError; a FIFO or a directory: ModelFileError
    with fh:
        if is_skops_file(fh):
            return _load_skops(fh, size, path, trusted)
        return load_open(fh, size, path)


def _load_skops(fh, size, path, trusted):
    from .io import trusted_types

    sio = _skops()
    try:
        fh.seek(0)
        with zipfile.ZipFile(fh) as zf:
            check_pipeline_members(zf, path, size)
        fh.seek(0)
        untrusted = sio.get_untrusted_types(file=fh)
    except ModelFileError:
        raise
    except Exception as exc:
        raise ModelFileError(f"{path!r} is not a valid pipeline file (corrupt or crafted: "
                             f"{type(exc).__name__}: {exc})") from None
    allowed = trusted_types() + [str(t) for t in (trusted or [])]
    refused = sorted(set(untrusted) - set(allowed))
    if refused:
        raise ModelFileError(
            f"{path!r} holds types that are not trusted: {refused}. Loading would build "
            "them; if you trust the file's author and these types, pass them as "
            "fmlearn.load(path, trusted=[...])")
    try:
        fh.seek(0)
        obj = sio.load(fh, trusted=allowed)
    except Exception as exc:
        raise ModelFileError(f"{path!r} cannot be loaded: {type(exc).__name__}: {exc}") from None
    for est in _fmlearn_estimators(obj).values():
        _rebuild(est, path)
    for enc in _fmlearn_estimators(obj, _is_fmlearn_encoder).values():
        _rebuild_encoder(enc, path)
    return obj
