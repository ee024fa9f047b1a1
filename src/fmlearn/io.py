"""Model files: arrays plus JSON metadata, versioned, validated, written atomically.

Format (``.fmz``, version 1)
----------------------------
A ZIP archive whose members are all stored uncompressed, holding exactly

``fmlearn.json``
    ``{"format": "fmlearn-model", "format_version": 1, "fmlearn_version": "...",
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

Loading never runs code from the file: the class is looked up by name among fmlearn's public
estimators, arrays are read without pickle, the member list must be exactly the manifest's, and
every digest, shape and dtype is compared with the manifest. The estimator then checks its own
state (``_check_loaded_state``, for example that ``w_`` has ``n_features_in_`` entries), a
classifier must carry ``classes_`` (and a regressor must not), and the model must predict one
all-zero row to finite values. Any failure raises :class:`fmlearn.exceptions.ModelFileError`.
The digests detect corruption and edits; they are not a signature, so a file from an untrusted
source is safe to load (no code runs) but predicts whatever its author put in it.

Saving writes a temporary file in the destination folder, flushes it to disk and renames it
over the destination, so a crash never leaves a truncated file in place of a good one and never
leaves the temporary file behind. The new file gets the permissions of an ordinary new file
(``0o666`` minus the umask).
"""

import hashlib
import io as _io
import json
import numbers
import os
import tempfile
import warnings
import zipfile

import numpy as np

from .exceptions import ModelFileError

__all__ = ["save_model", "load", "FORMAT", "FORMAT_VERSION"]

FORMAT = "fmlearn-model"
FORMAT_VERSION = 1
_META = "fmlearn.json"
_STR_ARRAY = "__str_array__"
_DIGEST = "digest"
# dtype kinds an array member may have: no objects, structured records or time types.
_ARRAY_KINDS = frozenset("biufcUS")


def _estimator_class(name):
    """The public fmlearn estimator class called ``name`` (importing its module only, so that
    loading a model does not import the other families), or None."""
    import fmlearn
    from fmlearn._base import BaseFM

    if not isinstance(name, str) or name not in fmlearn._LAZY:
        return None
    obj = getattr(fmlearn, name)
    return obj if isinstance(obj, type) and issubclass(obj, BaseFM) else None


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


def _new_file_mode():
    """0o666 minus the process umask, read without changing it where the OS allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def save_model(estimator, path):
    """Save a fitted fmlearn estimator to ``path`` atomically (see module docstring)."""
    from sklearn.utils.validation import check_is_fitted

    from . import __version__

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
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".fmlearn-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
                zf.writestr(_META, meta_bytes)
                for member, blob in members.items():
                    zf.writestr(member, blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _new_file_mode())  # mkstemp creates 0o600
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:  # make the rename itself durable; not every platform allows fsync on a folder
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
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


def load(path):
    """Load a model saved by :meth:`save`; raises ``ModelFileError`` on any inconsistency.

    ``FileNotFoundError`` is raised when there is no file at ``path``.

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
    if not os.path.exists(path):
        raise FileNotFoundError(f"no model file at {path!r}")
    try:
        zf = zipfile.ZipFile(path, "r")
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ModelFileError(
            f"{path!r} is not an fmlearn model file (not a valid archive: {exc})") from None
    with zf:
        meta = _read_meta(zf, path)
        specs = _check_members(zf, meta, path)
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
    _check_usable(est, path)
    return est


def _read_meta(zf, path):
    try:
        raw = zf.read(_META)
    except KeyError:
        raise ModelFileError(f"{path!r} has no {_META}: not an fmlearn model file") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ModelFileError(f"{path!r}: corrupt metadata ({exc})") from None
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
            f"{FORMAT_VERSION}"
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


def _check_members(zf, meta, path):
    """The archive must hold exactly the manifest's members, uncompressed."""
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
    infos = zf.infolist()
    names = [info.filename for info in infos]
    expected = {_META} | {spec["file"] for spec in specs.values()}
    if len(names) != len(set(names)) or len(expected) != len(specs) + 1:
        raise ModelFileError(f"{path!r}: duplicate archive members")
    if set(names) != expected:
        extra = sorted(set(names) - expected)
        missing = sorted(expected - set(names))
        raise ModelFileError(f"{path!r}: archive members do not match the manifest "
                             f"(unexpected: {extra}, missing: {missing})")
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED:
            raise ModelFileError(f"{path!r}: member {info.filename!r} is compressed; model "
                                 f"files store their members uncompressed")
    return specs


def _construct(meta, path):
    cls = _estimator_class(meta["class"])
    if cls is None:
        raise ModelFileError(f"{path!r}: unknown estimator class {meta['class']!r}")
    try:
        est = cls(**meta["params"])
        est._validate_params()
    except Exception as exc:  # unknown or invalid constructor arguments
        raise ModelFileError(f"{path!r}: invalid parameters for {cls.__name__}: {exc}") from None
    return est


def _read_array(zf, name, spec, path):
    try:
        dtype = np.dtype(spec["dtype"])
    except (TypeError, ValueError):
        raise ModelFileError(f"{path!r}: array {name!r} has an invalid dtype") from None
    if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None:
        raise ModelFileError(f"{path!r}: array {name!r} has a disallowed dtype {dtype}")
    try:
        blob = zf.read(spec["file"])
    except (KeyError, zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ModelFileError(f"{path!r}: array {name!r} is missing or corrupt ({exc})") from None
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


def _check_usable(est, path):
    """Generic checks, the estimator's own, then a one-row prediction every model must survive."""
    import scipy.sparse as sp
    from sklearn.base import is_classifier

    if is_classifier(est) != hasattr(est, "classes_"):
        what = "lacks classes_" if is_classifier(est) else "has classes_"
        raise ModelFileError(f"{path!r}: inconsistent model state: a {type(est).__name__} "
                             f"that {what}")
    d = getattr(est, "n_features_in_", None)
    if not isinstance(d, int) or isinstance(d, bool) or d < 1:
        raise ModelFileError(f"{path!r}: inconsistent model state: n_features_in_={d!r}")
    try:
        est._check_loaded_state()
    except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
        raise ModelFileError(f"{path!r}: inconsistent model state: {exc}") from None
    row = sp.csr_matrix((1, d), dtype=np.float64)
    try:
        with warnings.catch_warnings():  # e.g. "fitted with feature names": irrelevant here
            warnings.simplefilter("ignore")
            out = est.predict_proba(row) if is_classifier(est) else est.predict(row)
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
