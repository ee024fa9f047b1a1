"""Out-of-core streaming (fmlearn.stream): rebatching, exact equality with in-memory
partial_fit on the same batches, bounded memory, errors."""

import os
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.linear_model import SGDRegressor

from fmlearn import FMClassifier, FMRegressor, GFMRegressor, IFMRegressor
from fmlearn.datasets import load_svmlight, make_gfm, save_svmlight
from fmlearn.stream import fit_stream, rebatch


def _chunks(X, y, sizes, sw=None):
    out, a = [], 0
    for s in sizes:
        item = (X[a:a + s], y[a:a + s]) if sw is None else (X[a:a + s], y[a:a + s], sw[a:a + s])
        out.append(item)
        a += s
    assert a == X.shape[0]
    return out


def _dense(X):
    return X.toarray() if sp.issparse(X) else X


# -- rebatch ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("last_batch", ["merge", "keep", "drop"])
@pytest.mark.parametrize("size", [1, 7, 50, 400])
def test_rebatch_keeps_rows_and_cuts_as_documented(sparse, last_batch, size):
    rng = np.random.default_rng(size)
    sizes = list(rng.integers(0, 60, size=12))
    n = int(sum(sizes))
    X = rng.normal(size=(n, 3))
    X = sp.csr_matrix(X) if sparse else X
    y = np.arange(n, dtype=np.float64)
    out = list(rebatch(_chunks(X, y, sizes), size, last_batch))
    lens = [b[0].shape[0] for b in out]
    full, rest = divmod(n, size)
    if last_batch == "keep":
        assert lens == [size] * full + ([rest] if rest else [])
    elif last_batch == "drop":
        assert lens == [size] * full
    elif full == 0:
        assert lens == ([rest] if rest else [])
    else:
        assert lens == [size] * (full - 1) + [size + rest]
    kept = sum(lens)
    if kept:
        Xo = np.concatenate([_dense(b[0]) for b in out])
        np.testing.assert_array_equal(Xo, _dense(X)[:kept])
        np.testing.assert_array_equal(np.concatenate([b[1] for b in out]), y[:kept])
        assert all(sp.issparse(b[0]) == sparse for b in out)
    assert all(b[2] is None for b in out)


def test_rebatch_weights_and_passthrough():
    X = np.arange(20.0).reshape(10, 2)
    y = np.arange(10.0)
    chunks = [(X[:3], y[:3]), (X[3:7], y[3:7], np.full(4, 2.0)), (X[7:], y[7:])]
    out = list(rebatch(chunks, 4, "keep"))
    np.testing.assert_array_equal(np.concatenate([b[2] for b in out]),
                                  [1, 1, 1, 2, 2, 2, 2, 1, 1, 1])
    # batch_size=None passes the chunks through, weights as given
    through = list(rebatch(chunks, None))
    assert [b[0].shape[0] for b in through] == [3, 4, 3]
    assert through[0][2] is None and through[1][2] is not None


@pytest.mark.parametrize("bad, err, match", [
    ([(np.zeros((2, 3)),)], TypeError, "tuples"),
    ([(np.zeros(3), np.zeros(3))], TypeError, "2-D"),
    ([(np.zeros((2, 3)), np.zeros(3))], ValueError, "y has shape"),
    ([(np.zeros((2, 3)), np.zeros(2)), (np.zeros((2, 4)), np.zeros(2))], ValueError,
     "columns"),
    ([(np.zeros((2, 3)), np.zeros(2), np.ones(3))], ValueError, "sample_weight"),
])
def test_rebatch_bad_chunks(bad, err, match):
    with pytest.raises(err, match=match):
        list(rebatch(bad, 2))


@pytest.mark.parametrize("kw, err", [({"batch_size": 0}, ValueError),
                                     ({"batch_size": 2.5}, TypeError),
                                     ({"batch_size": 3, "last_batch": "pad"}, ValueError)])
def test_rebatch_bad_arguments(kw, err):
    with pytest.raises(err):
        rebatch([], **kw)


# -- streaming equals in-memory partial_fit --------------------------------------------------------
@pytest.fixture(scope="module")
def gfm_file(tmp_path_factory):
    X, y, truth = make_gfm(7300, 20, 2, random_state=1)
    path = str(tmp_path_factory.mktemp("stream") / "gfm.libfm.gz")
    save_svmlight(X, y + 2.0, path)
    return path, truth


def _assert_same_onepass(a, b):
    for name in ("working_U_", "working_V_", "working_w_", "mean_", "scale_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.working_intercept_ == b.working_intercept_
    assert a.n_batches_ == b.n_batches_
    assert a.history_["rmse"] == b.history_["rmse"]


@pytest.mark.parametrize("Est", [GFMRegressor, IFMRegressor])
def test_file_stream_equals_in_memory_partial_fit(gfm_file, Est):
    """Chunks of ~40 KB of text (a few hundred rows) re-cut into batches of 1000 rows: the
    model is bit-identical to partial_fit on the same 1000-row batches of the loaded file."""
    path, truth = gfm_file
    est = Est(n_factors=2, batch_size=1000, random_state=0)
    streamed = fit_stream(clone(est), path, chunk_size_bytes=40_000, n_features=20,
                          zero_based=True)
    X, y = load_svmlight(path, n_features=20, zero_based=True)
    ref = clone(est)
    for Xb, yb, _ in rebatch([(X, y)], 1000):
        ref.partial_fit(Xb, yb)
    _assert_same_onepass(streamed, ref)
    assert streamed.n_batches_ == 7  # 7300 rows: six batches of 1000 and a merged 1300
    assert streamed.batch_size_ == 1300
    assert streamed.stream_history_["rows"] == [7300]
    if Est is GFMRegressor:  # planted noise-free model: the stream recovers it
        assert streamed.score(X, y) > 1 - 1e-5


def test_stream_uses_the_estimators_auto_batch_size(gfm_file):
    path, _ = gfm_file
    est = fit_stream(GFMRegressor(n_factors=2, random_state=0), path, chunk_size_bytes=100_000)
    # batch_size="auto" is 10 k d = 400 rows for d = 20, k = 2; the last one absorbs the rest
    assert est.n_batches_ == 7300 // 400
    assert est.stream_history_["batches"] == [7300 // 400]


def test_sgd_fm_stream_epochs_equal_in_memory_fit(tmp_path):
    """Classic FM, solver="sgd", shuffle=False: partial_fit is one SGD epoch in row order, so
    n_epochs of the stream equal fit(n_iter=n_epochs) on the loaded file, whatever the chunks
    (without clipping: partial_fit clips to the target range seen so far, fit to the whole)."""
    rng = np.random.default_rng(0)
    X = sp.random(3000, 60, density=0.1, format="csr", random_state=rng)
    X.data = np.round(X.data, 4)
    y = np.round(rng.normal(size=3000), 4)
    path = str(tmp_path / "fm.libfm.bz2")
    save_svmlight(X, y, path)
    est = FMRegressor(4, solver="sgd", n_iter=3, shuffle=False, clip_predictions=False,
                      random_state=0)
    Xl, yl = load_svmlight(path, n_features=60, zero_based=True)
    ref = clone(est).fit(Xl, yl)
    eval_set = (Xl[:500], yl[:500])
    got = fit_stream(clone(est), path, n_epochs=3, chunk_size_bytes=5000, n_features=60,
                     zero_based=True, eval_set=eval_set)
    np.testing.assert_array_equal(got.V_, ref.V_)
    np.testing.assert_array_equal(got.w_, ref.w_)
    assert got.w0_ == ref.w0_ and got.t_ == ref.t_ == 9000
    h = got.stream_history_
    assert h["rows"] == [3000] * 3 and len(h["val"]) == 3
    rmse = float(np.sqrt(np.mean((got.predict(eval_set[0]) - eval_set[1]) ** 2)))
    assert h["val"][-1] == pytest.approx(rmse, rel=1e-12)


def test_iterable_source_with_weights_and_epochs():
    X, y, _ = make_gfm(3000, 10, 2, random_state=2)
    sw = np.random.default_rng(0).uniform(0.5, 2.0, size=3000)
    chunks = _chunks(X, y, [700, 900, 300, 1100], sw)
    est = GFMRegressor(n_factors=2, batch_size=600, random_state=0)
    got = fit_stream(clone(est), chunks, n_epochs=2)  # a list is re-iterable
    ref = clone(est)
    for _ in range(2):
        for Xb, yb, wb in rebatch(chunks, 600):
            ref.partial_fit(Xb, yb, sample_weight=wb)
    _assert_same_onepass(got, ref)
    assert got.n_batches_ == 10
    # a callable is called once per epoch
    calls = []

    def source():
        calls.append(1)
        return iter(chunks)

    fit_stream(clone(est), source, n_epochs=3)
    assert len(calls) == 3


def test_classifier_stream_passes_classes_once():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 5))
    y = np.where(X[:, 0] * X[:, 1] > 0, "yes", "no")
    order = np.argsort(y, kind="stable")  # first batches hold one label only
    X, y = X[order], y[order]
    chunks = _chunks(X, y, [500] * 4)
    est = FMClassifier(2, solver="sgd", shuffle=False, random_state=0)
    with pytest.raises(ValueError, match="two classes"):
        fit_stream(clone(est), chunks)
    got = fit_stream(clone(est), chunks, classes=["no", "yes"])
    ref = clone(est)
    ref.partial_fit(X, y, classes=["no", "yes"])
    np.testing.assert_array_equal(got.V_, ref.V_)
    assert list(got.classes_) == ["no", "yes"]


def test_sklearn_estimator_with_partial_fit():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 4))
    y = X @ np.array([1.0, -2.0, 0.5, 0.0])
    got = fit_stream(SGDRegressor(random_state=0), _chunks(X, y, [300, 700]), batch_size=250)
    ref = SGDRegressor(random_state=0)
    for Xb, yb, _ in rebatch([(X, y)], 250):
        ref.partial_fit(Xb, yb)
    np.testing.assert_array_equal(got.coef_, ref.coef_)


# -- memory ----------------------------------------------------------------------------------------
def test_peak_memory_does_not_grow_with_the_file(tmp_path):
    """tracemalloc peak of streaming a file 4x longer stays the same (one chunk of 32 KB of
    text at a time), and far below the memory of the file loaded whole."""
    rng = np.random.default_rng(0)
    d, n = 200, 16000
    X = sp.random(n, d, density=0.05, format="csr", random_state=rng)
    X.data = np.round(X.data, 3)
    y = np.round(rng.normal(size=n), 3)
    paths = {}
    for m in (n // 4, n):
        paths[m] = str(tmp_path / f"f{m}.libfm")
        save_svmlight(X[:m], y[:m], paths[m])
    fit_stream(FMRegressor(4, solver="sgd", random_state=0), [(X[:50], y[:50])])  # compile
    peaks = {}
    for m, path in paths.items():
        est = FMRegressor(4, solver="sgd", random_state=0)
        tracemalloc.start()
        try:
            fit_stream(est, path, chunk_size_bytes=1 << 15, n_features=d, zero_based=True)
            peaks[m] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert est.t_ == m
    whole = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + y.nbytes
    assert os.path.getsize(paths[n]) > 30 * (1 << 15)
    assert peaks[n] < 1.25 * peaks[n // 4]
    assert peaks[n] < whole / 5


# -- errors ----------------------------------------------------------------------------------------
def test_errors():
    X, y = np.zeros((10, 3)), np.zeros(10)
    with pytest.raises(TypeError, match="solver='sgd'"):
        fit_stream(FMRegressor(solver="als"), [(X, y)])
    with pytest.raises(ValueError, match="one-shot iterator"):
        fit_stream(GFMRegressor(), iter([(X, y)]), n_epochs=2)
    with pytest.raises(ValueError, match="no rows"):
        fit_stream(GFMRegressor(), [])
    with pytest.raises(ValueError, match="n_epochs"):
        fit_stream(GFMRegressor(), [(X, y)], n_epochs=0)
    with pytest.raises(ValueError, match="eval_set"):
        fit_stream(GFMRegressor(), [(X, y)], eval_set=X)
    with pytest.raises(TypeError, match="source must be"):
        fit_stream(GFMRegressor(), 3)
    with pytest.raises(FileNotFoundError):
        fit_stream(GFMRegressor(), "/nonexistent/file.libfm")


def test_dask_collection_is_redirected():
    da = pytest.importorskip("dask.array")
    with pytest.raises(TypeError, match="fmlearn.distributed.blocks"):
        fit_stream(GFMRegressor(), da.zeros((10, 3)))


# -- `fmlearn fit --stream` ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sgd_files(tmp_path_factory):
    rng = np.random.default_rng(3)
    folder = tmp_path_factory.mktemp("cli")
    X = sp.random(2400, 30, density=0.2, format="csr", random_state=rng)
    X.data = np.round(X.data, 3)
    score = X @ rng.normal(size=30)
    out = {}
    for task, y in (("r", np.round(score, 3)), ("c", np.where(score > 0, 1.0, -1.0))):
        out[task] = str(folder / f"train_{task}.libfm")
        save_svmlight(X[:2000], y[:2000], out[task])
        out[task + "_test"] = str(folder / f"test_{task}.libfm")
        save_svmlight(X[2000:, :25], y[2000:], out[task + "_test"])  # narrower test file
    return out


@pytest.mark.parametrize("task", ["r", "c"])
def test_cli_fit_stream_equals_fit_stream(sgd_files, tmp_path, capsys, task):
    from fmlearn import load
    from fmlearn.cli import main

    model = str(tmp_path / "m.fmz")
    log = str(tmp_path / "log.tsv")
    code = main(["fit", sgd_files[task], "--test", sgd_files[task + "_test"], "--task", task,
                 "--solver", "sgd", "--stream", "--batch-size", "300", "--n-factors", "3",
                 "--n-iter", "2", "--seed", "0", "--model", model, "--log", log])
    out = capsys.readouterr().out
    assert code == 0
    assert "2000 rows, 30 features, read in chunks" in out
    got = load(model)
    Est = FMRegressor if task == "r" else FMClassifier
    # the CLI's --init-stdev defaults to the API's "auto" (libFM's flag mode keeps its 0.1)
    ref = Est(n_factors=3, solver="sgd", n_iter=2, random_state=0)
    X, y = load_svmlight(sgd_files[task], n_features=30, zero_based=True)
    Xt, yt = load_svmlight(sgd_files[task + "_test"], n_features=30, zero_based=True)
    kw = {"classes": [-1.0, 1.0]} if task == "c" else {}
    fit_stream(ref, [(X, y)], n_epochs=2, batch_size=300, **kw)
    np.testing.assert_array_equal(got.V_, ref.V_)
    metric = "error rate" if task == "c" else "rmse"
    pred = ref.predict(X)
    train = np.mean(pred != y) if task == "c" else np.sqrt(np.mean((pred - y) ** 2))
    assert f"train {metric}" in out and f"{train:.6g}" in out
    # --log holds the real train metric of every epoch (the model after 1 epoch, then 2)
    rows = [line.split("\t") for line in open(log).read().splitlines()]
    assert len(rows) == 3  # header + one row per epoch
    one = Est(n_factors=3, solver="sgd", n_iter=1, random_state=0)
    fit_stream(one, [(X, y)], n_epochs=1, batch_size=300, **kw)
    for row, m in zip(rows[1:], (one, ref), strict=True):
        pred = m.predict(X)
        want = np.mean(pred != y) if task == "c" else np.sqrt(np.mean((pred - y) ** 2))
        assert float(row[1]) == pytest.approx(want, rel=1e-12)
        assert np.isfinite(float(row[2]))  # the test metric


def test_cli_stream_option_errors(sgd_files, capsys):
    from fmlearn.cli import main

    assert main(["fit", sgd_files["r"], "--stream", "--solver", "als"]) == 2
    assert "--solver sgd" in capsys.readouterr().err
    assert main(["fit", sgd_files["r"], "--solver", "sgd", "--batch-size", "10"]) == 2
    assert "--stream" in capsys.readouterr().err
