"""Model files: arrays plus JSON metadata, versioned, validated, written atomically.

Format (``.fmz``, version 1)
----------------------------
A ZIP archive (members stored uncompressed) holding

``fmlearn.json``
    ``{"format": "fmlearn-model", "format_version": 1, "fmlearn_version": "...",
    "class": "FMRegressor", "params": {...}, "attributes": {...}, "arrays": {...}}``.
    ``params`` are the constructor arguments (``get_params(deep=False)``); ``attributes`` are
    the learned scalars, strings and lists; ``arrays`` maps each learned array to its member
    name, shape, dtype and SHA-256 digest.
``arrays/<name>.npy``
    One NumPy ``.npy`` file per learned array, read with ``allow_pickle=False``.

Loading never runs code from the file: the class is looked up by name among fmlearn's public
estimators, arrays are read without pickle, every digest, shape and dtype is compared with the
manifest and the estimator checks its own state (for example that ``w_`` has
``n_features_in_`` entries). Any mismatch raises :class:`fmlearn.exceptions.ModelFileError`.

Saving writes a temporary file in the destination folder, flushes it to disk and renames it
over the destination, so a crash never leaves a truncated file in place of a good one.
"""

import hashlib
import io as _io
import json
import numbers
import os
import tempfile
import zipfile

import numpy as np

from .exceptions import ModelFileError

FORMAT = "fmlearn-model"
FORMAT_VERSION = 1
_META = "fmlearn.json"
_STR_ARRAY = "__str_array__"


def _estimator_classes():
    import fmlearn
    from fmlearn._base import BaseFM

    out = {}
    for name in fmlearn.__all__:
        obj = getattr(fmlearn, name)
        if isinstance(obj, type) and issubclass(obj, BaseFM):
            out[name] = obj
    return out


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
            arrays[name] = value
        else:
            attributes[name] = _json_value(value, f"attribute {name}")
    return arrays, attributes


def _npy_bytes(arr):
    buf = _io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def save_model(estimator, path):
    """Save a fitted fmlearn estimator to ``path`` atomically (see module docstring)."""
    from sklearn.utils.validation import check_is_fitted

    from . import __version__

    check_is_fitted(estimator)
    cls_name = type(estimator).__name__
    if _estimator_classes().get(cls_name) is not type(estimator):
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
            return np.array(value[_STR_ARRAY], dtype=object)
        return {k: _restore_json(v) for k, v in value.items()}
    return value


def load(path):
    """Load a model saved by :meth:`save`; raises ``ModelFileError`` on any inconsistency.

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
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelFileError(f"{path!r} is not an fmlearn model file (not a valid archive: {exc})")
    with zf:
        try:
            meta = json.loads(zf.read(_META).decode("utf-8"))
        except KeyError:
            raise ModelFileError(f"{path!r} has no {_META}: not an fmlearn model file") from None
        except (zipfile.BadZipFile, ValueError, UnicodeDecodeError, OSError) as exc:
            raise ModelFileError(f"{path!r}: corrupt metadata ({exc})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ModelFileError(f"{path!r} is not an fmlearn model file")
        version = meta.get("format_version")
        if version != FORMAT_VERSION:
            raise ModelFileError(
                f"{path!r} has model format version {version!r}; this fmlearn reads version "
                f"{FORMAT_VERSION}"
            )
        classes = _estimator_classes()
        cls = classes.get(meta.get("class"))
        if cls is None:
            raise ModelFileError(f"{path!r}: unknown estimator class {meta.get('class')!r}")
        try:
            est = cls(**meta["params"])
            est._validate_params()
        except Exception as exc:  # unknown or invalid constructor arguments
            raise ModelFileError(f"{path!r}: invalid parameters for {cls.__name__}: {exc}") from None
        for name, value in meta.get("attributes", {}).items():
            _check_attr_name(name, path)
            setattr(est, name, _restore_json(value))
        for name, spec in meta.get("arrays", {}).items():
            _check_attr_name(name, path)
            try:
                blob = zf.read(spec["file"])
            except (KeyError, zipfile.BadZipFile, OSError, TypeError) as exc:
                raise ModelFileError(f"{path!r}: array {name!r} is missing or corrupt ({exc})")
            if hashlib.sha256(blob).hexdigest() != spec.get("sha256"):
                raise ModelFileError(f"{path!r}: array {name!r} fails its checksum (corrupt or edited)")
            try:
                arr = np.lib.format.read_array(_io.BytesIO(blob), allow_pickle=False)
            except ValueError as exc:
                raise ModelFileError(f"{path!r}: array {name!r} cannot be read ({exc})") from None
            if list(arr.shape) != list(spec.get("shape", [])) or arr.dtype.str != spec.get("dtype"):
                raise ModelFileError(f"{path!r}: array {name!r} does not match its manifest")
            setattr(est, name, arr)
    try:
        est._check_loaded_state()
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise ModelFileError(f"{path!r}: inconsistent model state: {exc}") from None
    return est


def _check_attr_name(name, path):
    if not (isinstance(name, str) and name.isidentifier() and name.endswith("_")
            and not name.startswith("_")):
        raise ModelFileError(f"{path!r}: invalid attribute name {name!r}")

