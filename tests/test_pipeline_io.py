"""Safe files for whole pipelines: fmlearn.save / fmlearn.load through skops, fmlearn's types
trusted, untrusted types and crafted state refused, predictions identical after a round trip."""

import os
import zipfile

import numpy as np
import pytest
from sklearn.base import BaseEstimator, TransformerMixin, is_classifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import fmlearn
from fmlearn.encoders import TabularEncoder
from fmlearn.exceptions import ModelFileError

sio = pytest.importorskip("skops.io")
pd = pytest.importorskip("pandas")


class Shady(TransformerMixin, BaseEstimator):
    """A transformer fmlearn does not know: its type must not be built from a file."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return X


def _ratings(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    U, V = rng.normal(size=(30, 2)), rng.normal(size=(20, 2))
    u, i = rng.integers(0, 30, n), rng.integers(0, 20, n)
    df = pd.DataFrame({"user": [f"u{k}" for k in u], "item": i, "price": rng.uniform(1, 9, n)})
    return df, (U[u] * V[i]).sum(axis=1) + 0.1 * df["price"].to_numpy()


def _dense(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)) * [1, 10, 100, 1, 1, 1]
    return X, X[:, 0] * X[:, 1] / 10 + X[:, 2] / 100


def test_encoder_and_grouped_fm_round_trip(tmp_path):
    df, y = _ratings()
    enc = TabularEncoder({"item": "categorical"}, handle_unknown="bucket", min_frequency=2,
                         standardize=True).fit(df)
    pipe = make_pipeline(enc, fmlearn.FMRegressor(2, solver="mcmc", n_iter=30, random_state=0,
                                                  groups=enc.groups_)).fit(df, y)
    path = fmlearn.save(pipe, tmp_path / "pipe.skops")
    with zipfile.ZipFile(path) as zf:
        assert "schema.json" in zf.namelist() and "fmlearn.json" not in zf.namelist()
    back = fmlearn.load(path)
    new = df.iloc[:50].copy()
    new.loc[new.index[:5], "user"] = "someone new"          # unknowns go to the bucket
    np.testing.assert_array_equal(back.predict(new), pipe.predict(new))
    np.testing.assert_array_equal(back[0].transform(new).toarray(),
                                  pipe[0].transform(new).toarray())
    assert back[-1].get_params().keys() == pipe[-1].get_params().keys()
    np.testing.assert_array_equal(back[-1].groups, enc.groups_)
    # the saved FM holds only its public state (no compiled-solver cache)
    assert not [k for k in vars(back[-1]) if k.startswith("_") and k != "_sklearn_version"]


@pytest.mark.parametrize("make", [
    lambda: fmlearn.CCFMRegressor(random_state=0),
    lambda: fmlearn.OnlineFMRegressor(random_state=0),
    lambda: fmlearn.OnlineFMClassifier(random_state=0),
])
def test_scaler_and_online_model_round_trip_and_continue(tmp_path, make):
    X, y = _dense()
    est = make()
    if is_classifier(est):
        y = np.where(y > np.median(y), "yes", "no")
    pipe = make_pipeline(StandardScaler(), est).fit(X[:300], y[:300])
    back = fmlearn.load(fmlearn.save(pipe, tmp_path / "p.skops"))
    np.testing.assert_array_equal(back.predict(X), pipe.predict(X))
    if hasattr(pipe, "predict_proba"):
        np.testing.assert_array_equal(back.predict_proba(X), pipe.predict_proba(X))
    # the learner state travels too: one more online step gives the same model
    Z = pipe[0].transform(X[300:])
    pipe[-1].partial_fit(Z, y[300:])
    back[-1].partial_fit(Z, y[300:])
    np.testing.assert_array_equal(back.predict(X), pipe.predict(X))


def test_an_fmlearn_estimator_is_saved_as_a_model_file(tmp_path):
    X, y = _dense()
    m = fmlearn.FMRegressor(solver="als", n_iter=3, random_state=0).fit(X, y)
    path = fmlearn.save(m, tmp_path / "m.fmz")
    assert "fmlearn.json" in zipfile.ZipFile(path).namelist()
    np.testing.assert_array_equal(fmlearn.load(path).predict(X), m.predict(X))


def test_untrusted_type_is_refused_unless_trusted(tmp_path):
    X, y = _dense()
    pipe = make_pipeline(Shady(), fmlearn.FMRegressor(solver="als", n_iter=2)).fit(X, y)
    path = fmlearn.save(pipe, tmp_path / "shady.skops")
    name = f"{Shady.__module__}.Shady"
    with pytest.raises(ModelFileError, match=f"not trusted: \\['{name}'\\]"):
        fmlearn.load(path)
    back = fmlearn.load(path, trusted=[name])
    np.testing.assert_array_equal(back.predict(X), pipe.predict(X))


def _rewrite(path, edit):
    """Copy of a skops file with its schema edited by ``edit`` (stored members)."""
    import json

    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    schema = json.loads(members["schema.json"])
    edit(schema)
    members["schema.json"] = json.dumps(schema).encode()
    out = os.path.join(os.path.dirname(path), "edited.skops")
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    return out


def test_crafted_files_are_refused(tmp_path):
    X, y = _dense()
    pipe = make_pipeline(StandardScaler(), fmlearn.FMRegressor(solver="als", n_iter=2))
    pipe.fit(X, y)
    path = fmlearn.save(pipe, tmp_path / "p.skops")

    def to_eval(schema):     # the scaler step's type replaced by a builtin function
        step = schema["content"]["content"]["steps"]["content"][0]["content"][1]
        step["__module__"], step["__class__"] = "builtins", "eval"

    with pytest.raises(ModelFileError, match="not trusted.*builtins.eval"):
        fmlearn.load(_rewrite(path, to_eval))

    # fmlearn state that fmlearn.load would refuse (save writes what it is given)
    bad = make_pipeline(StandardScaler(), fmlearn.FMRegressor(solver="als", n_iter=2)).fit(X, y)
    bad[-1].w_[0] = np.nan
    fmlearn.save(bad, tmp_path / "nan.skops")
    with pytest.raises(ModelFileError, match="w_ contains NaN"):
        fmlearn.load(tmp_path / "nan.skops")
    bad[-1].w_[0] = 0.0
    bad[-1].V_ = bad[-1].V_[:2]
    fmlearn.save(bad, tmp_path / "shape.skops")
    with pytest.raises(ModelFileError, match="inconsistent model state|cannot predict"):
        fmlearn.load(tmp_path / "shape.skops")
    # written with skops directly: a private attribute (fmlearn never writes one)
    cached = fmlearn.FMRegressor(solver="als", n_iter=2).fit(X, y)
    for key in [k for k in vars(cached) if k.startswith("_")]:
        delattr(cached, key)
    cached._anything = 1
    (tmp_path / "private.skops").write_bytes(sio.dumps(make_pipeline(cached)))
    with pytest.raises(ModelFileError, match="private attribute '_"):
        fmlearn.load(tmp_path / "private.skops")
    with pytest.raises(ModelFileError, match="invalid parameters"):
        odd = fmlearn.FMRegressor(solver="als", n_iter=2).fit(X, y)
        odd.solver = "magic"
        fmlearn.save(make_pipeline(odd), tmp_path / "param.skops")
        fmlearn.load(tmp_path / "param.skops")
    # compressed members (a decompression bomb's shape) are refused before reading
    (tmp_path / "zip.skops").write_bytes(sio.dumps(pipe, compression=zipfile.ZIP_DEFLATED))
    with pytest.raises(ModelFileError, match="compressed"):
        fmlearn.load(tmp_path / "zip.skops")
    # every truncation is a clear error, never a crash
    blob = open(path, "rb").read()
    for cut in np.linspace(1, len(blob) - 1, 12).astype(int):
        (tmp_path / "cut.skops").write_bytes(blob[:cut])
        with pytest.raises(ModelFileError):
            fmlearn.load(tmp_path / "cut.skops")


def test_a_failed_save_leaves_the_old_file(tmp_path):
    class Private(fmlearn.FMRegressor):
        pass

    X, y = _dense()
    path = fmlearn.save(make_pipeline(StandardScaler(), fmlearn.FMRegressor(
        solver="als", n_iter=2)).fit(X, y), tmp_path / "p.skops")
    before = open(path, "rb").read()
    with pytest.raises(TypeError, match="not a public fmlearn estimator"):
        fmlearn.save(make_pipeline(Private(solver="als", n_iter=2)).fit(X, y), path)
    assert open(path, "rb").read() == before
    assert os.listdir(tmp_path) == ["p.skops"]


def _npy_claiming(blob, shape):
    """The .npy ``blob`` with its header rewritten to claim ``shape`` (same data bytes)."""
    import io

    fh = io.BytesIO(blob)
    np.lib.format.read_magic(fh)
    _, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
    data = blob[fh.tell():]
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": fortran,
              "shape": shape})
    return out.getvalue() + data


def _with_members(path, out, edit):
    """Copy of the archive ``path`` at ``out`` with ``edit(name, bytes) -> bytes`` applied to
    every member (all stored)."""
    with zipfile.ZipFile(path) as zf:
        members = {n: edit(n, zf.read(n)) for n in zf.namelist()}
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    return out


def test_array_members_are_sized_from_their_header_before_reading(tmp_path):
    # A .npy member whose header claims shape (3e9,) made load allocate 22 GiB before skops
    # refused it; it is now refused from the header, as the .fmz loader does.
    X, y = _dense()
    pipe = make_pipeline(StandardScaler(), fmlearn.FMRegressor(solver="als", n_iter=2)).fit(X, y)
    path = fmlearn.save(pipe, tmp_path / "p.skops")
    big = _with_members(path, tmp_path / "big.skops", lambda n, b: _npy_claiming(
        b, (3_000_000_000,)) if n.endswith(".npy") else b)
    with pytest.raises(ModelFileError, match=r"declares shape \(3000000000,\) of float64 "
                                             r"\(24000000000 bytes\) but holds \d+$"):
        fmlearn.load(big)
    # the same inside the .npz of a SciPy sparse matrix (deflated members, as save_npz writes)
    import io

    import scipy.sparse as sp

    A = sp.random(5, 5, density=0.4, format="csr", random_state=0)
    spath = fmlearn.save({"A": A}, tmp_path / "sparse.skops")
    trusted = ["scipy.sparse._csr.csr_matrix"]
    assert (fmlearn.load(spath, trusted=trusted)["A"] != A).nnz == 0

    def inflate(name, blob):
        if not name.endswith(".npz"):
            return blob
        src, dst = zipfile.ZipFile(io.BytesIO(blob)), io.BytesIO()
        with zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for n in src.namelist():
                b = src.read(n)
                zf.writestr(n, _npy_claiming(b, (3_000_000_000,)) if n == "data.npy" else b)
        return dst.getvalue()

    bomb = _with_members(spath, tmp_path / "bomb.skops", inflate)
    with pytest.raises(ModelFileError, match=r"data.npy' declares shape \(3000000000,\)"):
        fmlearn.load(bomb, trusted=trusted)


def test_fmlearn_encoders_in_a_pipeline_file_are_validated(tmp_path):
    # A hashed encoder with 10^12 buckets loaded and transformed into an (n, 10^12) matrix:
    # encoders are now checked as estimators are (parameters, then the state they imply).
    from fmlearn.encoders import MultiViewEncoder, TensorEncoder

    df, y = _ratings(300)
    enc = TabularEncoder({"user": "hashed"}, n_hash_buckets=64).fit(df)
    assert fmlearn.load(fmlearn.save(enc, tmp_path / "ok.skops")).n_features_out_ == 64 + 2

    def crafted(name, change, make=lambda: TabularEncoder({"user": "hashed"},
                                                          n_hash_buckets=64).fit(df)):
        est = make()
        change(est)
        return fmlearn.save(make_pipeline(est), tmp_path / f"{name}.skops")

    with pytest.raises(ModelFileError, match="invalid parameters for TabularEncoder.*"
                                             "n_hash_buckets"):
        fmlearn.load(crafted("huge", lambda e: setattr(e, "n_hash_buckets", 10**12)))
    with pytest.raises(ModelFileError, match="inconsistent TabularEncoder state.*groups_"):
        fmlearn.load(crafted("groups", lambda e: setattr(e, "groups_", e.groups_[::-1].copy())))
    with pytest.raises(ModelFileError, match="inconsistent TabularEncoder state.*blocks_"):
        fmlearn.load(crafted("width", lambda e: setattr(e, "n_features_out_", 10**12)))
    with pytest.raises(ModelFileError, match="inconsistent TabularEncoder state.*column_types_"):
        fmlearn.load(crafted("types", lambda e: e.column_types_.update(user="weird")))
    with pytest.raises(ModelFileError, match="inconsistent TensorEncoder state.*blocks_"):
        fmlearn.load(crafted("tensor", lambda e: setattr(e, "blocks_", [(0, 10**12)] * 6),
                             lambda: TensorEncoder((2, 3, 4)).fit(np.zeros((1, 3), int))))
    with pytest.raises(ModelFileError, match="inconsistent TensorEncoder state.*feature columns"):
        fmlearn.load(crafted("modes", lambda e: setattr(e, "shape_", (10**6,) * 3),
                             lambda: TensorEncoder().fit(np.zeros((1, 3), int))))
    with pytest.raises(ModelFileError, match="inconsistent MultiViewEncoder state.*n_features"):
        fmlearn.load(crafted("views", lambda e: setattr(e, "n_features_out_", 10**12),
                             lambda: MultiViewEncoder((3, 2), 4).fit()))


def test_an_fmlearn_pipeline_fitted_with_an_eval_set_round_trips(tmp_path):
    from fmlearn.pipeline import make_pipeline as fm_pipeline

    df, y = _ratings()
    pipe = fm_pipeline(TabularEncoder(), fmlearn.FMRegressor(2, solver="als", n_iter=20,
                                                              random_state=0))
    pipe.fit(df[:1200], y[:1200], fmregressor__eval_set=(df[1200:], y[1200:]))
    back = fmlearn.load(fmlearn.save(pipe, tmp_path / "pipe.skops"))
    assert type(back) is type(pipe)
    np.testing.assert_array_equal(back.predict(df), pipe.predict(df))
