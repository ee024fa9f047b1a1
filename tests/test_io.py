"""Model files (fmlearn.io): exact round trips, refusal of corrupt or tampered files, no
unpickling, atomic saves."""

import hashlib
import io
import json
import os
import pickle
import stat
import zipfile
import zlib

import numpy as np
import pytest
import scipy.sparse as sp

import fmlearn
import fmlearn.io as fio
from fmlearn import FMClassifier, FMRegressor
from fmlearn.exceptions import ModelFileError, NotFittedError

SOLVERS = {
    "mcmc": {"n_iter": 12, "n_burn_in": 2},
    "als": {"n_iter": 8, "reg_linear": 0.1, "reg_pairwise": 0.1},
    "sgd": {"n_iter": 8, "learning_rate": 0.05},
}


def _data(seed=0, n=80, d=7, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.6)
    y = X[:, 0] * X[:, 1] + X[:, 2] + 0.1 * rng.normal(size=n)
    return X.astype(dtype), y


def _fit(cls, solver, X, y, **kw):
    if cls is FMClassifier:
        y = np.where(y > np.median(y), "up", "down")
    return cls(n_factors=3, solver=solver, random_state=0, **SOLVERS[solver], **kw).fit(X, y)


def _outputs(model, X):
    out = {"predict": model.predict(X)}
    if hasattr(model, "classes_"):
        out["decision"] = model.decision_function(X)
        out["proba"] = model.predict_proba(X)
    return out


def _same_attributes(a, b):
    names = {n for n in vars(a) if n.endswith("_") and not n.startswith("_")}
    assert names == {n for n in vars(b) if n.endswith("_") and not n.startswith("_")}
    for name in names:
        va, vb = getattr(a, name), getattr(b, name)
        if isinstance(va, np.ndarray):
            assert isinstance(vb, np.ndarray) and va.dtype == vb.dtype, name
            assert np.array_equal(va, vb), name
        else:
            assert va == vb, name


@pytest.mark.parametrize("fit_input", ["dense", "csr"])
@pytest.mark.parametrize("solver", sorted(SOLVERS))
@pytest.mark.parametrize("cls", [FMRegressor, FMClassifier])
def test_round_trip_is_bit_identical(tmp_path, cls, solver, fit_input):
    X, y = _data()
    model = _fit(cls, solver, sp.csr_matrix(X) if fit_input == "csr" else X, y)
    path = model.save(tmp_path / "m.fmz")
    loaded = fmlearn.load(path)
    assert type(loaded) is cls
    assert loaded.get_params() == model.get_params()
    _same_attributes(model, loaded)
    X_new, _ = _data(seed=1)
    for data in (X_new, sp.csr_matrix(X_new), sp.csc_matrix(X_new)):
        expected, got = _outputs(model, data), _outputs(loaded, data)
        for key in expected:
            assert np.array_equal(expected[key], got[key]), key
    if solver == "mcmc":
        # the prediction averages the kept samples, and all of them were saved
        assert loaded.samples_V_.shape[0] > 1
        assert np.array_equal(loaded.samples_V_, model.samples_V_)


def test_float32_model_keeps_its_dtype(tmp_path):
    X, y = _data(dtype=np.float32)
    model = _fit(FMRegressor, "als", X, y)
    loaded = fmlearn.load(model.save(tmp_path / "m.fmz"))
    assert loaded.V_.dtype == np.float32 and loaded.w_.dtype == np.float32
    assert np.array_equal(loaded.predict(X), model.predict(X))


def test_feature_names_round_trip_without_warnings(tmp_path, recwarn):
    pd = pytest.importorskip("pandas")
    X, y = _data()
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    model = _fit(FMClassifier, "sgd", frame, y)
    loaded = fmlearn.load(model.save(tmp_path / "m.fmz"))
    assert list(loaded.feature_names_in_) == list(frame.columns)
    assert np.array_equal(loaded.predict_proba(frame), model.predict_proba(frame))
    assert not [w for w in recwarn if "feature names" in str(w.message)]


def test_saved_model_can_warm_start(tmp_path):
    X, y = _data()
    model = _fit(FMRegressor, "mcmc", X, y, warm_start=True)
    loaded = fmlearn.load(model.save(tmp_path / "m.fmz"))
    model.fit(X, y)
    loaded.fit(X, y)
    assert np.array_equal(model.predict(X), loaded.predict(X))


def test_unfitted_and_foreign_estimators_are_not_saved(tmp_path):
    with pytest.raises(NotFittedError):
        FMRegressor().save(tmp_path / "m.fmz")
    from sklearn.linear_model import Ridge

    X, y = _data()
    with pytest.raises(TypeError, match="not a public fmlearn estimator"):
        fio.save_model(Ridge().fit(X, y), tmp_path / "r.fmz")
    assert os.listdir(tmp_path) == []


# -- corrupt and tampered files -------------------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A saved MCMC regressor and a saved classifier (bytes) with the models themselves."""
    folder = tmp_path_factory.mktemp("saved")
    X, y = _data()
    out = {}
    for key, model in (("reg", _fit(FMRegressor, "mcmc", X, y)),
                       ("clf", _fit(FMClassifier, "als", X, y))):
        out[key] = (model, open(model.save(folder / f"{key}.fmz"), "rb").read())
    return out


def _members(blob):
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _rebuild(blob, path, edit, redigest=True, compression=zipfile.ZIP_STORED):
    """Write to ``path`` a well-formed archive whose metadata / members went through ``edit``.

    ``edit(meta, members)`` mutates the parsed metadata and the member dict in place. With
    ``redigest`` the metadata digest is recomputed, so only deeper checks can catch the edit.
    """
    members = _members(blob)
    meta = json.loads(members.pop(fio._META))
    edit(meta, members)
    if redigest:
        meta["digest"] = fio.manifest_digest(meta)
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        zf.writestr(fio._META, json.dumps(meta))
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _set_array(meta, members, name, blob):
    spec = meta["arrays"][name]
    members[spec["file"]] = blob
    spec["sha256"] = hashlib.sha256(blob).hexdigest()


def test_untouched_rebuild_loads(saved, tmp_path):
    # the helper itself produces loadable files, so the refusals below are due to the edits
    model, blob = saved["reg"]
    loaded = fmlearn.load(_rebuild(blob, tmp_path / "m.fmz", lambda meta, members: None))
    X, _ = _data(seed=2)
    assert np.array_equal(loaded.predict(X), model.predict(X))


@pytest.mark.parametrize("keep", [0.02, 0.5, 0.9, 0.999])
def test_truncated_file_is_refused(saved, tmp_path, keep):
    _, blob = saved["reg"]
    path = tmp_path / "t.fmz"
    path.write_bytes(blob[: int(len(blob) * keep)])
    with pytest.raises(ModelFileError):
        fmlearn.load(path)


def test_flipped_byte_in_array_is_refused(saved, tmp_path):
    _, blob = saved["reg"]
    data = _members(blob)["arrays/samples_V_.npy"]
    start = blob.find(data)
    assert start > 0
    pos = start + len(data) - 5  # inside the array values, past the .npy header
    corrupt = bytearray(blob)
    corrupt[pos] ^= 0x10
    path = tmp_path / "flip.fmz"
    path.write_bytes(bytes(corrupt))
    with pytest.raises(ModelFileError):
        fmlearn.load(path)


def test_flipped_byte_with_valid_zip_crc_fails_the_array_checksum(saved, tmp_path):
    _, blob = saved["reg"]

    def flip(meta, members):
        data = bytearray(members["arrays/samples_V_.npy"])
        data[-5] ^= 0x10
        members["arrays/samples_V_.npy"] = bytes(data)

    with pytest.raises(ModelFileError, match="checksum"):
        fmlearn.load(_rebuild(blob, tmp_path / "f.fmz", flip))


def test_edited_manifest_bytes_are_refused(saved, tmp_path):
    # an in-place edit of the JSON text (same length) breaks the archive's CRC
    _, blob = saved["reg"]
    assert b'"class": "FMRegressor"' in blob
    path = tmp_path / "e.fmz"
    path.write_bytes(blob.replace(b'"class": "FMRegressor"', b'"class": "FMRegresso1"'))
    with pytest.raises(ModelFileError):
        fmlearn.load(path)


def _edit_shape(meta, members):
    meta["arrays"]["w_"]["shape"] = [meta["arrays"]["w_"]["shape"][0] + 1]


def _edit_class(meta, members):
    meta["class"] = "FMClassifier"
    del meta["params"]["clip_predictions"]  # so that only the learned state is inconsistent


def _edit_factors(meta, members):
    meta["params"]["n_factors"] = 2


def _edit_attribute(meta, members):
    meta["attributes"]["n_features_in_"] = 3


@pytest.mark.parametrize("edit", [_edit_shape, _edit_class, _edit_factors, _edit_attribute])
def test_edited_manifest_fails_its_digest(saved, tmp_path, edit):
    _, blob = saved["reg"]
    with pytest.raises(ModelFileError, match="metadata fails its checksum"):
        fmlearn.load(_rebuild(blob, tmp_path / "e.fmz", edit, redigest=False))


@pytest.mark.parametrize("edit, match", [
    (_edit_shape, "does not match its manifest"),
    (_edit_class, "lacks classes_"),
    (_edit_factors, "inconsistent model state"),
    (_edit_attribute, "inconsistent model state"),
])
def test_consistently_edited_manifest_is_refused(saved, tmp_path, edit, match):
    # even with a recomputed digest, the state must be coherent
    _, blob = saved["reg"]
    with pytest.raises(ModelFileError, match=match):
        fmlearn.load(_rebuild(blob, tmp_path / "e.fmz", edit))


@pytest.mark.parametrize("which, new_class, match", [
    ("clf", "FMRegressor", "has classes_"),
    ("reg", "Ridge", "unknown estimator class"),
    # public names of fmlearn that are not estimators, and names that are not names
    ("reg", "load", "unknown estimator class"),
    ("reg", "evaluate_prequential", "unknown estimator class"),
    ("reg", "__getattr__", "unknown estimator class"),
    ("reg", ["FMRegressor"], "field .class. is missing or malformed"),
])
def test_renamed_class_is_refused(saved, tmp_path, which, new_class, match):
    _, blob = saved[which]

    def edit(meta, members):
        meta["class"] = new_class

    with pytest.raises(ModelFileError, match=match):
        fmlearn.load(_rebuild(blob, tmp_path / "e.fmz", edit))


@pytest.mark.parametrize("version", [0, 1, 3, "2", None])
def test_wrong_format_version_is_refused(saved, tmp_path, version):
    _, blob = saved["reg"]

    def edit(meta, members):
        meta["format_version"] = version

    with pytest.raises(ModelFileError, match="format version"):
        fmlearn.load(_rebuild(blob, tmp_path / "v.fmz", edit))


class _Boom:
    pass


def test_extra_pickle_member_is_refused(saved, tmp_path):
    _, blob = saved["reg"]

    def edit(meta, members):
        members["arrays/evil.pkl"] = pickle.dumps(_Boom())

    with pytest.raises(ModelFileError, match="unexpected"):
        fmlearn.load(_rebuild(blob, tmp_path / "p.fmz", edit))


def test_array_member_holding_a_pickle_is_refused(saved, tmp_path):
    _, blob = saved["reg"]

    def edit(meta, members):
        _set_array(meta, members, "w_", pickle.dumps(np.zeros(7)))

    with pytest.raises(ModelFileError, match="cannot be read"):
        fmlearn.load(_rebuild(blob, tmp_path / "p.fmz", edit))


def _object_npy(values):
    buf = io.BytesIO()
    np.save(buf, np.array(values, dtype=object), allow_pickle=True)
    return buf.getvalue()


@pytest.mark.parametrize("declared", ["|O", "<f8"])
def test_object_dtype_array_is_refused(saved, tmp_path, declared):
    _, blob = saved["reg"]

    def edit(meta, members):
        _set_array(meta, members, "w_", _object_npy([_Boom()] * 7))
        meta["arrays"]["w_"]["dtype"] = declared

    with pytest.raises(ModelFileError, match="disallowed dtype|does not match"):
        fmlearn.load(_rebuild(blob, tmp_path / "o.fmz", edit))


def test_header_claiming_a_huge_array_is_refused_before_allocation(saved, tmp_path):
    _, blob = saved["reg"]
    huge = 10**13  # 80 TB of float64: reading it would fail with MemoryError or worse

    def edit(meta, members):
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            buf, {"descr": "<f8", "fortran_order": False, "shape": (huge,)})
        _set_array(meta, members, "w_", buf.getvalue() + b"\0" * 56)
        meta["arrays"]["w_"]["shape"] = [huge]

    with pytest.raises(ModelFileError, match="needs 80000000000000 plus a header"):
        fmlearn.load(_rebuild(blob, tmp_path / "h.fmz", edit))


def test_compressed_member_is_refused(saved, tmp_path):
    _, blob = saved["reg"]
    path = _rebuild(blob, tmp_path / "c.fmz", lambda meta, members: None,
                    compression=zipfile.ZIP_DEFLATED)
    with pytest.raises(ModelFileError, match="compressed"):
        fmlearn.load(path)


@pytest.mark.parametrize("content", [b"", b"not a zip file\n", b"PK\x03\x04garbage",
                                     b"\x93NUMPY"])
def test_non_zip_file_is_refused(tmp_path, content):
    path = tmp_path / "x.fmz"
    path.write_bytes(content)
    with pytest.raises(ModelFileError):
        fmlearn.load(path)


def test_zip_without_manifest_and_directory_are_refused(tmp_path):
    path = tmp_path / "z.fmz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("hello.txt", "hi")
    with pytest.raises(ModelFileError, match="no fmlearn.json"):
        fmlearn.load(path)
    with pytest.raises(ModelFileError):
        fmlearn.load(tmp_path)


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        fmlearn.load(tmp_path / "nope.fmz")


def test_loading_never_unpickles(saved, tmp_path, monkeypatch):
    model, blob = saved["reg"]
    good = tmp_path / "good.fmz"
    good.write_bytes(blob)

    def edit(meta, members):
        _set_array(meta, members, "w_", _object_npy([_Boom()] * 7))

    bad = _rebuild(blob, tmp_path / "bad.fmz", edit)

    def forbidden(*args, **kwargs):
        raise AssertionError("model loading must not unpickle")

    # numba loads compiled kernels from its on-disk cache with pickle: load the prediction
    # kernels this test will use before forbidding pickle, so only the loader is on trial.
    X, _ = _data(seed=3)
    model.predict(X)
    model.predict(sp.csr_matrix((1, model.n_features_in_)))
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    calls = []
    real_read_array = np.lib.format.read_array

    def spy(fp, allow_pickle=False, **kwargs):
        calls.append(allow_pickle)
        return real_read_array(fp, allow_pickle=allow_pickle, **kwargs)

    monkeypatch.setattr(np.lib.format, "read_array", spy)
    loaded = fmlearn.load(good)
    assert np.array_equal(loaded.predict(X), model.predict(X))
    assert calls and not any(calls)
    with pytest.raises(ModelFileError):
        fmlearn.load(bad)
    assert not any(calls)


# -- atomic save ----------------------------------------------------------------------------
@pytest.mark.parametrize("exc", [OSError("disk full"), KeyboardInterrupt()])
def test_interrupted_save_keeps_the_previous_file(tmp_path, monkeypatch, exc):
    X, y = _data()
    old = _fit(FMRegressor, "als", X, y)
    new = _fit(FMRegressor, "sgd", X, y)
    path = tmp_path / "m.fmz"
    old.save(path)
    before = path.read_bytes()
    real_writestr = zipfile.ZipFile.writestr
    count = {"n": 0}

    def failing_writestr(self, *args, **kwargs):
        count["n"] += 1
        if count["n"] == 2:  # after the manifest, in the middle of the arrays
            raise exc
        return real_writestr(self, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "writestr", failing_writestr)
    with pytest.raises(type(exc)):
        new.save(path)
    monkeypatch.undo()
    assert count["n"] == 2
    assert sorted(os.listdir(tmp_path)) == ["m.fmz"]  # no temporary file left behind
    assert path.read_bytes() == before
    assert np.array_equal(fmlearn.load(path).predict(X), old.predict(X))


def test_failed_rename_leaves_nothing_behind(tmp_path, monkeypatch):
    X, y = _data()
    model = _fit(FMRegressor, "als", X, y)

    def failing_replace(src, dst):
        raise OSError("rename failed")

    monkeypatch.setattr(fio.os, "replace", failing_replace)
    with pytest.raises(OSError, match="rename failed"):
        model.save(tmp_path / "m.fmz")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []


def test_saved_file_has_ordinary_permissions(tmp_path):
    X, y = _data()
    model = _fit(FMRegressor, "als", X, y)
    old = os.umask(0o027)
    try:
        path = model.save(tmp_path / "m.fmz")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


# -- files from anyone: refused before they are read ----------------------------------------
def _count_member_reads(monkeypatch):
    calls = []
    real_open = zipfile.ZipFile.open

    def spy(self, name, *args, **kwargs):
        calls.append(getattr(name, "filename", name))
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    return calls


class _RepeatedChunkDeflate:
    """Raw deflate of a member written as one chunk repeated: each chunk ends with a full
    flush (no back-reference crosses it), so its compressed bytes are computed once and
    repeated. The stream is valid deflate of the whole member (zipfile reads it back, CRC
    checked), at a tenth of the CPU of compressing 2 GB."""

    def __init__(self):
        self._z = zlib.compressobj(9, zlib.DEFLATED, -15)
        self._memo = {}

    def compress(self, data):
        if data not in self._memo:
            self._memo[data] = self._z.compress(data) + self._z.flush(zlib.Z_FULL_FLUSH)
        return self._memo[data]

    def flush(self):
        return self._z.flush()


def test_deflated_manifest_bomb_is_refused_without_reading_it(tmp_path, monkeypatch):
    # 2 MB of deflate that would expand to 2 GB: the directory says "compressed", so the
    # member is never opened (issue 10: it cost 2.3 GB and 96 s, then MemoryError)
    path = tmp_path / "bomb.fmz"
    with monkeypatch.context() as m:
        m.setattr(zipfile, "_get_compressor", lambda *args: _RepeatedChunkDeflate())
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            with zf.open(fio._META, "w", force_zip64=True) as member:
                chunk = b" " * 2**24
                for _ in range(128):
                    member.write(chunk)
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo(fio._META).file_size == 2**31
    assert os.path.getsize(path) < 4 * 2**20
    calls = _count_member_reads(monkeypatch)
    with pytest.raises(ModelFileError, match="compressed"):
        fmlearn.load(path)
    assert calls == []


def test_oversized_stored_manifest_is_refused_from_the_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(fio, "MAX_MANIFEST_BYTES", 1000)
    path = tmp_path / "big.fmz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(fio._META, b"{" + b" " * 5000 + b"}")
    calls = _count_member_reads(monkeypatch)
    with pytest.raises(ModelFileError, match="more than the 1000"):
        fmlearn.load(path)
    assert calls == []


def _patch_central_directory(blob, offset_in_entry, value, which=0):
    entries = [i for i in range(len(blob)) if blob.startswith(b"PK\x01\x02", i)]
    out = bytearray(blob)
    out[entries[which] + offset_in_entry] = value
    return bytes(out)


@pytest.mark.parametrize("edit, what", [
    ((6, 0x7F), "version byte of the central directory: NotImplementedError in zipfile"),
    ((8, 1), "encrypted flag: RuntimeError in zipfile"),
    ((24, 0xFF), "compressed size != size"),
    ((30, 0xFF), "name length past the directory"),
])
def test_container_errors_are_model_file_errors(saved, tmp_path, edit, what):
    _, blob = saved["reg"]
    path = tmp_path / "v.fmz"
    path.write_bytes(_patch_central_directory(blob, *edit))
    with pytest.raises(ModelFileError):
        fmlearn.load(path)


def test_member_claiming_more_bytes_than_its_shape_is_refused_before_reading(saved, tmp_path,
                                                                              monkeypatch):
    _, blob = saved["reg"]

    def edit(meta, members):
        spec = meta["arrays"]["w_"]
        _set_array(meta, members, "w_", members[spec["file"]] + b"\0" * 10**6)

    path = _rebuild(blob, tmp_path / "pad.fmz", edit)
    calls = _count_member_reads(monkeypatch)
    with pytest.raises(ModelFileError, match="member has"):
        fmlearn.load(path)
    assert calls == [fio._META]


@pytest.mark.parametrize("kind", ["device", "directory", "fifo"])
def test_non_regular_paths_are_refused_without_reading(tmp_path, kind):
    if kind == "device":
        path = "/dev/zero"  # reading it would never end
        if not os.path.exists(path):
            pytest.skip("no /dev/zero")
    elif kind == "directory":
        path = tmp_path
    else:
        path = tmp_path / "fifo"
        os.mkfifo(path)  # opening it for reading would block forever
    with pytest.raises(ModelFileError, match="not a regular file"):
        fmlearn.load(path)


def _edited_model(saved, tmp_path, key, name, change):
    model, blob = saved[key]

    def edit(meta, members):
        arr = np.array(getattr(model, name))
        change(arr)
        _set_array(meta, members, name, fio._npy_bytes(arr))

    return _rebuild(blob, tmp_path / f"{name}.fmz", edit)


@pytest.mark.parametrize("key, name, change, match", [
    ("reg", "samples_V_", lambda a: a.__setitem__((0, 0, 0), np.nan), "samples_V_ contains NaN"),
    ("reg", "samples_w_", lambda a: a.__setitem__((-1, -1), np.inf), "samples_w_ contains NaN"),
    ("reg", "samples_V_", lambda a: a.__imul__(1e200), "predict"),
    ("clf", "V_", lambda a: a.__imul__(1e200), "predict"),
])
def test_non_finite_or_overflowing_state_is_refused(saved, tmp_path, key, name, change, match):
    # MCMC predicts from its samples: NaN or huge samples made every prediction NaN before
    path = _edited_model(saved, tmp_path, key, name, change)
    with pytest.raises(ModelFileError, match=match):
        fmlearn.load(path)


def test_probe_touches_every_feature(saved, tmp_path):
    # a huge weight on the last feature only: an all-zero probe row would not see it
    model, blob = saved["reg"]
    d = model.n_features_in_

    def change(a):
        a[:, d - 1, :] = 1e300

    with pytest.raises(ModelFileError, match="predict"):
        fmlearn.load(_edited_model(saved, tmp_path, "reg", "samples_V_", change))


# -- saving: what is replaced, what is left behind -------------------------------------------
@pytest.fixture(scope="module")
def small_model():
    X, y = _data()
    return _fit(FMRegressor, "als", X, y)


def test_save_refuses_a_directory_and_a_fifo(small_model, tmp_path):
    folder = tmp_path / "d.fmz"
    folder.mkdir()
    with pytest.raises(ValueError, match="directory, not a regular file"):
        small_model.save(folder)
    fifo = tmp_path / "f.fmz"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="FIFO, not a regular file"):
        small_model.save(fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["d.fmz", "f.fmz"]


def test_save_refuses_a_device_node(small_model, tmp_path):
    # the issue: as root, save replaced /dev/full with a regular file. A private twin of
    # /dev/full (char 1, 7) is made here, which needs root; never touch the real one.
    dev = tmp_path / "full"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o600, os.makedev(1, 7))
    except (PermissionError, AttributeError, OSError):
        pytest.skip("cannot create a device node here (not root)")
    with pytest.raises(ValueError, match="character device"):
        small_model.save(dev)
    assert stat.S_ISCHR(os.lstat(dev).st_mode)
    link = tmp_path / "link.fmz"
    os.symlink(dev, link)
    with pytest.raises(ValueError, match="character device"):
        small_model.save(link)
    assert stat.S_ISCHR(os.lstat(dev).st_mode)


def test_save_writes_through_a_symlink_atomically(small_model, tmp_path):
    X, _ = _data()
    target = tmp_path / "models" / "v1.fmz"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "current.fmz"
    os.symlink(target, link)
    small_model.save(link)
    assert os.path.islink(link) and os.readlink(link) == str(target)
    assert np.array_equal(fmlearn.load(target).predict(X), small_model.predict(X))
    assert sorted(os.listdir(target.parent)) == ["v1.fmz"]
    # a dangling link: the target is created
    os.unlink(target)
    small_model.save(link)
    assert os.path.isfile(target) and os.path.islink(link)


def test_error_names_the_users_path_not_the_temporary_file(small_model, tmp_path):
    path = tmp_path / "missing-folder" / "m.fmz"
    with pytest.raises(FileNotFoundError) as info:
        small_model.save(path)
    assert str(path) in str(info.value) and ".fmlearn-" not in str(info.value)


def _stale(folder, name, age):
    p = folder / name
    p.write_bytes(b"partial")
    t = os.path.getmtime(p) - age
    os.utime(p, (t, t))
    return p


def test_stale_temporaries_are_cleaned_by_the_next_save(small_model, tmp_path):
    import fcntl

    old = _stale(tmp_path, ".fmlearn-dead1.tmp", 3600)
    young = _stale(tmp_path, ".fmlearn-young.tmp", 0)  # may be a writer that just started
    locked = _stale(tmp_path, ".fmlearn-live.tmp", 3600)  # a live writer holds the lock
    other = _stale(tmp_path, ".other-dead.tmp", 3600)  # not ours: never touched
    with open(locked, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        small_model.save(tmp_path / "m.fmz")
    assert not old.exists()
    assert young.exists() and locked.exists() and other.exists()


def test_a_killed_save_leaves_a_temporary_file_that_the_next_save_removes(small_model,
                                                                          tmp_path):
    import subprocess
    import sys

    code = ("import os, signal, sys\n"
            "from fmlearn._files import atomic_write\n"
            "with atomic_write(sys.argv[1]) as f:\n"
            "    f.write(b'half a model')\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n")
    path = tmp_path / "m.fmz"
    proc = subprocess.run([sys.executable, "-c", code, str(path)])
    assert proc.returncode == -9
    left = [n for n in os.listdir(tmp_path) if n.startswith(".fmlearn-")]
    assert len(left) == 1 and not path.exists()
    t = os.path.getmtime(tmp_path / left[0]) - 60
    os.utime(tmp_path / left[0], (t, t))  # instead of waiting STALE_AFTER seconds
    small_model.save(path)
    assert os.listdir(tmp_path) == ["m.fmz"]


# -- every estimator round-trips ------------------------------------------------------------
def _every_estimator():
    from hardening import estimators

    return sorted(estimators())


@pytest.mark.parametrize("name", _every_estimator())
def test_every_fitted_estimator_round_trips(name, tmp_path):
    from hardening import fitted

    model, X, _ = fitted(name)
    loaded = fmlearn.load(model.save(tmp_path / "m.fmz"))
    assert type(loaded) is type(model) and loaded.get_params() == model.get_params()
    X_new = np.random.default_rng(7).normal(size=(40, X.shape[1]))
    for data in (X_new, sp.csr_matrix(X_new)):
        expected, got = _outputs(model, data), _outputs(loaded, data)
        for key in expected:
            assert np.array_equal(expected[key], got[key]), key
    arrays = {k for k, v in vars(model).items()
              if k.endswith("_") and not k.startswith("_") and isinstance(v, np.ndarray)}
    for name_ in arrays:
        a, b = getattr(model, name_), getattr(loaded, name_)
        assert a.dtype == b.dtype and np.array_equal(a, b), name_


def _two_versions(kind):
    """Two fitted models of different file sizes (A, B), as model files or inside pipelines."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _data(n=60)
    a = FMRegressor(n_factors=2, solver="als", n_iter=3, random_state=0).fit(X, y)
    b = FMRegressor(n_factors=40, solver="als", n_iter=3, random_state=1).fit(X, y)
    if kind == "pipeline":
        pytest.importorskip("skops")
        a = make_pipeline(StandardScaler(), a).fit(X, y)
        b = make_pipeline(StandardScaler(), b).fit(X, y)
    return X, a, b


@pytest.mark.parametrize("kind, at", [("model", 1), ("model", 2), ("pipeline", 1),
                                      ("pipeline", 2), ("pipeline", 3), ("pipeline", 4)])
def test_load_racing_a_save_reads_the_file_it_opened(tmp_path, monkeypatch, kind, at):
    # Another process's save renames a new file over the path while load is reading: main
    # took the size from one stat and read through up to four opens of the path (8 failures
    # in 9,865 loads of a 4-reader / 1-writer run). Here the rename lands, deterministically,
    # just before load's at-th ZIP read (a model file is read twice, a pipeline file four
    # times); load reads one handle, so it returns the old model whole.
    X, a, b = _two_versions(kind)
    path = fmlearn.save(a, tmp_path / ("m.fmz" if kind == "model" else "p.skops"))
    real_init, calls = zipfile.ZipFile.__init__, []

    def racing_init(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == at:
            monkeypatch.setattr(zipfile.ZipFile, "__init__", real_init)
            fmlearn.save(b, path)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "__init__", racing_init)
    got = fmlearn.load(path)
    assert len(calls) >= at  # the rename happened inside this load
    np.testing.assert_array_equal(got.predict(X), a.predict(X))
    np.testing.assert_array_equal(fmlearn.load(path).predict(X), b.predict(X))


@pytest.mark.parametrize("kind", ["model", "pipeline"])
def test_concurrent_loads_and_saves_give_the_old_or_the_new_model(tmp_path, kind):
    # Real concurrency: one writer alternates two models on one path while three readers
    # load it; every load must return one of the two, whole. Nothing depends on timing (the
    # counts are fixed, not the duration), so a loaded machine only makes it slower.
    import threading

    X, a, b = _two_versions(kind)
    expected = [a.predict(X), b.predict(X)]
    path = fmlearn.save(a, tmp_path / ("m.fmz" if kind == "model" else "p.skops"))
    done, problems, loads = threading.Event(), [], [0, 0]

    def writer():
        try:
            for i in range(60):
                fmlearn.save((a, b)[i % 2], path)
        finally:
            done.set()

    def reader():
        while not done.is_set() or loads[0] + loads[1] < 30:
            try:
                pred = fmlearn.load(path).predict(X)
            except Exception as exc:  # noqa: BLE001 - any failure is what this test counts
                problems.append(repr(exc))
                continue
            which = [np.array_equal(pred, e) for e in expected]
            if not any(which):
                problems.append("a mixture of the two models")
            else:
                loads[which.index(True)] += 1

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader)
                                                    for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []
    assert loads[0] + loads[1] >= 30
