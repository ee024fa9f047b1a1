"""Model files: arrays plus JSON metadata, versioned, validated, written atomically.

Format (``.fmz``, version 2)
----------------------------
A ZIP archive whose members are all stored uncompressed, holding exactly

``fmlearn.json``
    ``{"format": "fmlearn-model", "format_version": 2, "fmlearn_version": "...",
    "class": "FMRegressor", "params": {...}, "attributes": {...}, "arrays": {...},
    "digest": "..."}``.
    ``params`` are the constructor arguments (``get_params(deep=False)``); ``attributes`` are
    the learned scalars, strings, lists and dicts (an array of strings is stored as
    ``{"__str_array__": [...]}``); ``arrays`` maps each learned array to its member name,
    shape, dtype and SHA-256 digest; ``digest`` is the SHA-256 of the canonical JSON text
    (``sort_keys=True, separators=(",", ":")``) of all the other keys, so that every byte of
    the file is covered by a checksum.
``arrays/<name>.npy``
    One NumPy ``.npy`` file per learned array (numeric, boolean or fixed-width string dtype),
    read with ``allow_pickle=False``.

Loading reads nothing before it has checked what it will read, and never runs code from the
file. The path must be a regular file (not a device such as ``/dev/zero``, a directory or a
FIFO). The ZIP directory is checked first: every member stored (a compressed or encrypted one
is refused without being read), sizes consistent with the file, the manifest at most
:data:`MAX_MANIFEST_BYTES`. Then the manifest's digest, the member list (exactly the
manifest's), each member's size against its manifest shape and dtype (before it is read), each
array's digest, ``.npy`` header, shape and dtype; arrays are read without pickle and the class
is looked up by name among fmlearn's public estimators. The loaded state is then checked:
every float array and scalar finite (MCMC samples included), counters non-negative, the
estimator's own consistency checks (``_check_loaded_state``: shapes against each other,
indices against their bounds), a classifier carries ``classes_`` (and a regressor does not),
and the model must predict an all-zero row and a row of ones on every feature to finite
values (a huge parameter that overflows a prediction is refused). Every failure, including any
error of the ZIP layer, raises :class:`fmlearn.exceptions.ModelFileError`. The digests detect
corruption and careless edits; they are not a signature: anyone can write a file with valid
digests, so a file from an untrusted source is safe to load (no code runs, no crash, no
unbounded allocation) but predicts whatever its author put in it.

Saving goes through :func:`fmlearn._files.atomic_write`: a temporary file in the destination
folder, flushed to disk and renamed over the destination, so an interrupted or killed save
never leaves a truncated file in place of a good one; only a regular file is replaced (a
symbolic link is followed and its target replaced); a killed save's temporary file is removed
by the next save into that folder. The new file gets the permissions of an ordinary new file
(``0o666`` minus the umask). See docs/reliability.md for the exact guarantees.
"""

import hashlib
import io as _io
import json
import math
import numbers
import os
import stat
import struct
import warnings
import zipfile
import zlib

import numpy as np

from ._files import atomic_write
from .exceptions import ModelFileError

__all__ = ["save_model", "load", "trusted_types", "FORMAT", "FORMAT_VERSION"]

FORMAT = "fmlearn-model"
FORMAT_VERSION = 2
_META = "fmlearn.json"
_STR_ARRAY = "__str_array__"
_DIGEST = "digest"
# dtype kinds an array member may have: no objects, structured records or time types.
_ARRAY_KINDS = frozenset("biufcUS")


def _estimator_class(name):
    """The public fmlearn estimator class called ``name`` (importing its module only, so that
    loading a model does not import the other families), or None."""
    from ._registry import estimator_classes

    classes = estimator_classes()
    if not isinstance(name, str) or name not in classes:
        return None
    return classes[name]


def _json_value(value, where):
    """Convert ``value`` to plain JSON types or raise ``TypeError`` naming ``where``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, (numbers.Real, np.floating)):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (list, tuple)):
        return [_json_value(v, where) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.dtype != object:
        return [_json_value(v, where) for v in value.tolist()]
    raise TypeError(f"cannot save {where}: unsupported type {type(value).__name__}")


def _split_state(estimator):
    """Learned state: public attributes ending in '_' (arrays apart from JSON values)."""
    arrays, attributes = {}, {}
    for name, value in vars(estimator).items():
        if not name.endswith("_") or name.startswith("_"):
            continue
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                if all(isinstance(v, str) for v in value.ravel()):
                    attributes[name] = {_STR_ARRAY: [str(v) for v in value.ravel()]}
                    continue
                raise TypeError(f"cannot save attribute {name}: object array of non-strings")
            if value.dtype.kind not in _ARRAY_KINDS:
                raise TypeError(f"cannot save attribute {name}: unsupported dtype {value.dtype}")
            arrays[name] = value
        else:
            attributes[name] = _json_value(value, f"attribute {name}")
    return arrays, attributes


def _npy_bytes(arr):
    buf = _io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def manifest_digest(meta):
    """SHA-256 of the canonical JSON text of ``meta`` without its ``digest`` key."""
    body = {k: v for k, v in meta.items() if k != _DIGEST}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def save_model(estimator, path):
    """Save a fitted fmlearn estimator to ``path`` atomically (see module docstring)."""
    from sklearn.utils.validation import check_is_fitted

    from ._version import __version__

    check_is_fitted(estimator)
    cls_name = type(estimator).__name__
    if _estimator_class(cls_name) is not type(estimator):
        raise TypeError(f"{cls_name} is not a public fmlearn estimator and cannot be saved")
    params = {}
    for key, value in estimator.get_params(deep=False).items():
        if isinstance(value, np.random.RandomState):
            value = None  # the generator's state is not a reproducible constructor argument
        params[key] = _json_value(value, f"parameter {key}")
    arrays, attributes = _split_state(estimator)
    members = {}
    manifest = {}
    for name, arr in arrays.items():
        blob = _npy_bytes(arr)
        member = f"arrays/{name}.npy"
        members[member] = blob
        manifest[name] = {
            "file": member,
            "shape": list(arr.shape),
            "dtype": arr.dtype.str,
            "sha256": hashlib.sha256(blob).hexdigest(),
        }
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fmlearn_version": __version__,
        "class": cls_name,
        "params": params,
        "attributes": attributes,
        "arrays": manifest,
    }
    meta[_DIGEST] = manifest_digest(meta)
    meta_bytes = json.dumps(meta, indent=1, sort_keys=True).encode("utf-8")

    path = os.fspath(path)
    with atomic_write(path) as fh:
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
            zf.writestr(_META, meta_bytes)
            for member, blob in members.items():
                zf.writestr(member, blob)
    return path


def _restore_json(value):
    if isinstance(value, dict):
        if set(value) == {_STR_ARRAY}:
            if not (isinstance(value[_STR_ARRAY], list)
                    and all(isinstance(v, str) for v in value[_STR_ARRAY])):
                raise ValueError(f"{_STR_ARRAY} must be a list of strings")
            return np.array(value[_STR_ARRAY], dtype=object)
        return {k: _restore_json(v) for k, v in value.items()}
    return value


#: Largest manifest (``fmlearn.json``) that is read, in bytes; a larger one is refused from
#: the ZIP directory, before any byte of it is read.
MAX_MANIFEST_BYTES = 64 * 2**20
# Bytes an array member may hold on top of its data: the .npy magic and header (the writer's
# headers are under 200 bytes; NumPy pads them to 64-byte blocks).
NPY_HEADER_MAX = _NPY_HEADER_MAX = 4096

# What the ZIP layer and the array reader can raise on a corrupt or crafted container: a
# flipped version byte raises NotImplementedError, an encrypted member RuntimeError, a bad
# length struct.error or EOFError, a ZIP64 record LargeZipFile, ...
_CONTAINER_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError,
                     RuntimeError, OSError, EOFError, ValueError, TypeError, KeyError,
                     IndexError, AttributeError, OverflowError, struct.error, zlib.error)


def trusted_types():
    """Type names (``module.Class``) of fmlearn's public estimators and encoders.

    These are what :func:`fmlearn.load` trusts in a pipeline file (a skops file written by
    :func:`fmlearn.save`) on top of skops' own defaults; pass more to
    ``fmlearn.load(path, trusted=[...])`` after reviewing them with
    ``skops.io.get_untrusted_types(file=path)``.

    Examples
    --------
    >>> from fmlearn.io import trusted_types
    >>> "fmlearn.fm.FMRegressor" in trusted_types()
    True
    >>> "fmlearn.encoders._tabular.TabularEncoder" in trusted_types()
    True
    """
    from . import encoders
    from ._registry import PUBLIC

    names = {where.replace(":", ".") for where in PUBLIC.values()}
    names.add("fmlearn.pipeline.Pipeline")  # scikit-learn's Pipeline, routing eval_set
    for name in encoders.__all__:
        obj = getattr(encoders, name)
        if isinstance(obj, type):
            names.add(f"{obj.__module__}.{obj.__qualname__}")
    return sorted(names)


def load(path):
    """Load a model saved by :meth:`save`; raises ``ModelFileError`` on any inconsistency.

    (:func:`fmlearn.load` reads these and also pipeline files written by
    :func:`fmlearn.save`.)

    ``FileNotFoundError`` is raised when there is no file at ``path``. Anything else that is
    not a valid model file (a directory, a device such as ``/dev/zero``, a FIFO, a corrupt,
    truncated, compressed, oversized or crafted archive, a state that is inconsistent or
    not finite, or one whose prediction overflows) raises
    :class:`~fmlearn.exceptions.ModelFileError`, after reading at most the file's own bytes
    (sizes are checked against the ZIP directory first). No code from the file runs.

    Examples
    --------
    >>> import numpy as np, fmlearn, tempfile, os
    >>> X = np.random.default_rng(0).normal(size=(50, 4)); y = X[:, 0] * X[:, 1]
    >>> m = fmlearn.FMRegressor(solver="als", n_iter=5, random_state=0).fit(X, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "m.fmz")
    >>> _ = m.save(path)
    >>> bool(np.array_equal(fmlearn.load(path).predict(X), m.predict(X)))
    True
    """
    path = os.fspath(path)
    fh, size = open_regular(path)
    with fh:
        return load_open(fh, size, path)


def open_regular(path):
    """``(file object, size)`` of the regular file at ``path``, opened once for reading.

    Loading reads everything through this one handle: a ``save`` that renames a new file
    over ``path`` meanwhile cannot mix two files (the handle keeps the file it opened, whole:
    a reader gets the old model or, opening later, the new one). The open does not block on a
    FIFO (``O_NONBLOCK``); anything but a regular file (directory, device, FIFO) is refused
    from ``fstat`` of the handle. ``FileNotFoundError`` when there is no file; any other
    failure a :class:`~fmlearn.exceptions.ModelFileError`.
    """
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise FileNotFoundError(f"no model file at {path!r}") from None
    except IsADirectoryError:
        raise ModelFileError(f"{path!r} is not a regular file (a directory, device or FIFO): "
                             "not an fmlearn model file") from None
    except OSError as exc:
        raise ModelFileError(f"{path!r} cannot be read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ModelFileError(f"{path!r} is not a regular file (a directory, device or "
                                 "FIFO): not an fmlearn model file")
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def load_open(fh, size, path):
    """:func:`load` of the model file open as ``fh`` (``size`` bytes, named ``path`` in the
    messages)."""
    try:
        est = _load_archive(fh, path, size)
    except ModelFileError:
        raise
    except _CONTAINER_ERRORS as exc:
        if isinstance(exc, OSError) and exc.strerror:  # EACCES, EIO, ...: not the content
            raise ModelFileError(f"{path!r} cannot be read: {exc.strerror}") from None
        raise ModelFileError(f"{path!r} is not an fmlearn model file (corrupt or crafted "
                             f"archive: {type(exc).__name__}: {exc})") from None
    _check_usable(est, path)
    return est


def _load_archive(fh, path, size):
    fh.seek(0)
    with zipfile.ZipFile(fh, "r") as zf:
        infos = _check_directory(zf, path, size)
        meta = _read_meta(zf, infos[_META], path)
        specs = _check_members(infos, meta, path)
        est = _construct(meta, path)
        for name, value in meta["attributes"].items():
            _check_attr_name(name, path)
            try:
                value = _restore_json(value)
            except ValueError as exc:
                raise ModelFileError(f"{path!r}: attribute {name!r}: {exc}") from None
            setattr(est, name, value)
        for name, spec in specs.items():
            if name in meta["attributes"]:
                raise ModelFileError(f"{path!r}: {name!r} is both an array and an attribute")
            setattr(est, name, _read_array(zf, name, spec, path))
    return est


def check_stored_members(zf, path, size):
    """{name: ZipInfo} of the open archive ``zf`` (``size`` bytes), checked before any member
    is read: unique names, every member stored (not compressed: no decompression bomb; not
    encrypted), its sizes consistent and inside the file. Raises ``ModelFileError``."""
    infos = {}
    for info in zf.infolist():
        if info.filename in infos:
            raise ModelFileError(f"{path!r}: duplicate archive members")
        if info.compress_type != zipfile.ZIP_STORED:
            raise ModelFileError(f"{path!r}: member {info.filename!r} is compressed; model "
                                 f"files store their members uncompressed")
        if info.flag_bits & 0x1:
            raise ModelFileError(f"{path!r}: member {info.filename!r} is encrypted")
        if (info.file_size != info.compress_size or info.file_size > size
                or info.header_offset + info.file_size > size):
            raise ModelFileError(f"{path!r}: member {info.filename!r} claims "
                                 f"{info.file_size} bytes, inconsistent with the archive "
                                 f"({size} bytes)")
        infos[info.filename] = info
    return infos


def _check_directory(zf, path, size):
    """The ZIP directory, checked before any member is read: unique names, every member
    stored (not compressed, not encrypted), its sizes consistent and inside the file, the
    manifest present and at most :data:`MAX_MANIFEST_BYTES`. Returns {name: ZipInfo}."""
    infos = check_stored_members(zf, path, size)
    if _META not in infos:
        raise ModelFileError(f"{path!r} has no {_META}: not an fmlearn model file")
    if infos[_META].file_size > MAX_MANIFEST_BYTES:
        raise ModelFileError(f"{path!r}: {_META} has {infos[_META].file_size} bytes, more "
                             f"than the {MAX_MANIFEST_BYTES} a model manifest may have")
    return infos


def _read_meta(zf, info, path):
    raw = zf.read(info)
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ModelFileError(f"{path!r}: corrupt metadata ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ModelFileError(f"{path!r} is not an fmlearn model file")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise ModelFileError(
            f"{path!r} has model format version {version!r}; this fmlearn reads version "
            f"{FORMAT_VERSION}: fit the model again with this fmlearn and save it"
        )
    try:
        digest_ok = meta.get(_DIGEST) == manifest_digest(meta)
    except (TypeError, ValueError, RecursionError):
        digest_ok = False
    if not digest_ok:
        raise ModelFileError(f"{path!r}: metadata fails its checksum (corrupt or edited)")
    for key, kind in (("params", dict), ("attributes", dict), ("arrays", dict), ("class", str)):
        if not isinstance(meta.get(key), kind):
            raise ModelFileError(f"{path!r}: metadata field {key!r} is missing or malformed")
    return meta


def _array_dtype(name, spec, path):
    try:
        dtype = np.dtype(spec["dtype"])
    except (TypeError, ValueError):
        raise ModelFileError(f"{path!r}: array {name!r} has an invalid dtype") from None
    if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None or dtype.itemsize == 0:
        raise ModelFileError(f"{path!r}: array {name!r} has a disallowed dtype {dtype}")
    return dtype


def _check_members(infos, meta, path):
    """The archive must hold exactly the manifest's members, each of the size its shape and
    dtype imply (checked on the ZIP directory: nothing is read yet)."""
    specs = {}
    for name, spec in meta["arrays"].items():
        _check_attr_name(name, path)
        if not (isinstance(spec, dict) and isinstance(spec.get("file"), str)
                and isinstance(spec.get("shape"), list)
                and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                        for n in spec["shape"])
                and isinstance(spec.get("dtype"), str) and isinstance(spec.get("sha256"), str)):
            raise ModelFileError(f"{path!r}: manifest entry of array {name!r} is malformed")
        specs[name] = spec
    expected = {_META} | {spec["file"] for spec in specs.values()}
    if len(expected) != len(specs) + 1:
        raise ModelFileError(f"{path!r}: duplicate archive members")
    if set(infos) != expected:
        extra = sorted(set(infos) - expected)
        missing = sorted(expected - set(infos))
        raise ModelFileError(f"{path!r}: archive members do not match the manifest "
                             f"(unexpected: {extra}, missing: {missing})")
    for name, spec in specs.items():
        need = _array_dtype(name, spec, path).itemsize
        for n in spec["shape"]:
            need *= n
        have = infos[spec["file"]].file_size
        if not need < have <= need + _NPY_HEADER_MAX:
            raise ModelFileError(f"{path!r}: array {name!r} member has {have} bytes; its "
                                 f"manifest shape {spec['shape']} needs {need} plus a header")
    return specs


def _construct(meta, path):
    cls = _estimator_class(meta["class"])
    if cls is None:
        raise ModelFileError(f"{path!r}: unknown estimator class {meta['class']!r}")
    # a parameter added after files were written: files without it load with the value
    # they were fitted with (the class's ``_params_before``), not today's default
    params = {**getattr(cls, "_params_before", {}), **meta["params"]}
    try:
        est = cls(**params)
        est._validate_params()
    except Exception as exc:  # unknown or invalid constructor arguments
        raise ModelFileError(f"{path!r}: invalid parameters for {cls.__name__}: {exc}") from None
    return est


def _read_array(zf, name, spec, path):
    dtype = _array_dtype(name, spec, path)
    blob = zf.read(spec["file"])
    if hashlib.sha256(blob).hexdigest() != spec["sha256"]:
        raise ModelFileError(f"{path!r}: array {name!r} fails its checksum (corrupt or edited)")
    try:
        fh = _io.BytesIO(blob)
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, _, header_dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, _, header_dtype = np.lib.format.read_array_header_2_0(fh)
        else:  # the writer only produces versions 1.0 and 2.0 for plain dtypes
            raise ValueError(f"unsupported .npy version {version}")
        # Size the data before numpy allocates it: a header may claim any shape.
        need = int(np.prod(shape, dtype=np.int64)) * header_dtype.itemsize
        if (list(shape) != spec["shape"] or header_dtype != dtype
                or len(blob) - fh.tell() != need):
            raise ModelFileError(f"{path!r}: array {name!r} does not match its manifest")
        arr = np.lib.format.read_array(_io.BytesIO(blob), allow_pickle=False)
    except ModelFileError:
        raise
    except (ValueError, TypeError, OverflowError, EOFError, SyntaxError) as exc:
        raise ModelFileError(f"{path!r}: array {name!r} cannot be read ({exc})") from None
    return arr


def _check_values(est, path):
    """Every learned float array and float scalar finite (MCMC samples included), every
    integer scalar (counters, sizes) non-negative, every numeric list (``y_range_``) finite.
    ``history_`` (a record of the fit, never used to predict) is exempt."""
    for name, value in vars(est).items():
        if not name.endswith("_") or name.startswith("_") or name == "history_":
            continue
        problem = None
        if isinstance(value, np.ndarray):
            if value.dtype.kind in "fc" and not np.all(np.isfinite(value)):
                problem = "contains NaN or infinity"
        elif isinstance(value, bool):
            pass
        elif isinstance(value, int):
            if value < 0:
                problem = f"is negative ({value})"
        elif isinstance(value, float):
            if not math.isfinite(value):
                problem = f"is not finite ({value})"
        elif isinstance(value, list) and value and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            if not all(math.isfinite(v) for v in value):
                problem = "contains NaN or infinity"
        if problem:
            raise ModelFileError(f"{path!r}: inconsistent model state: {name} {problem}")


def _check_usable(est, path):
    """Generic checks, the estimator's own, then a prediction every model must survive: an
    all-zero row and a row of ones, which touches every feature (a huge or non-finite
    parameter anywhere shows up as an overflow)."""
    import scipy.sparse as sp
    from sklearn.base import is_classifier

    if is_classifier(est) != hasattr(est, "classes_"):
        what = "lacks classes_" if is_classifier(est) else "has classes_"
        raise ModelFileError(f"{path!r}: inconsistent model state: a {type(est).__name__} "
                             f"that {what}")
    if is_classifier(est):
        classes = est.classes_
        multi = est.__sklearn_tags__().classifier_tags.multi_class
        if (not isinstance(classes, np.ndarray) or classes.ndim != 1
                or not (classes.shape[0] >= 2 if multi else classes.shape[0] == 2)
                or np.unique(classes).shape[0] != classes.shape[0]):
            what = "two or more" if multi else "two"
            raise ModelFileError(f"{path!r}: inconsistent model state: classes_ must hold "
                                 f"{what} distinct labels, got {classes!r}")
    d = getattr(est, "n_features_in_", None)
    if not isinstance(d, int) or isinstance(d, bool) or d < 1:
        raise ModelFileError(f"{path!r}: inconsistent model state: n_features_in_={d!r}")
    if getattr(est, "dtype_", "float64") not in ("float64", "float32"):
        raise ModelFileError(f"{path!r}: inconsistent model state: dtype_="
                             f"{getattr(est, 'dtype_', None)!r}")
    _check_values(est, path)
    try:
        est._check_loaded_state()
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, MemoryError,
            OverflowError) as exc:
        raise ModelFileError(f"{path!r}: inconsistent model state: {exc}") from None
    probe = sp.csr_matrix(np.vstack([np.zeros(d), np.ones(d)]))
    try:
        with warnings.catch_warnings():  # e.g. "fitted with feature names": irrelevant here
            warnings.simplefilter("ignore")
            if is_classifier(est):
                out = np.concatenate([np.ravel(est.decision_function(probe)),
                                      est.predict_proba(probe).ravel()])
            else:
                out = est.predict(probe)
        ok = np.all(np.isfinite(np.asarray(out, dtype=np.float64)))
    except Exception as exc:  # any failure here means the state cannot be used
        raise ModelFileError(f"{path!r}: the loaded model cannot predict: "
                             f"{type(exc).__name__}: {exc}") from None
    if not ok:
        raise ModelFileError(f"{path!r}: the loaded model predicts non-finite values")


def _check_attr_name(name, path):
    if not (isinstance(name, str) and name.isidentifier() and name.endswith("_")
            and not name.startswith("_")):
        raise ModelFileError(f"{path!r}: invalid attribute name {name!r}")
