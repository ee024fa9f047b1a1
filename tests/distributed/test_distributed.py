"""Dask backend (fmlearn.distributed): the data-parallel one-pass step gives the in-memory
iterates up to summation order; blocks streamed to partial_fit equal in-memory partial_fit;
bad input fails clearly; fmlearn works without Dask."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from fmlearn import FMRegressor, GFMRegressor, IFMRegressor
from fmlearn.datasets import make_gfm, make_phase_retrieval, make_symmetric_sensing
from fmlearn.exceptions import DivergenceError
from fmlearn.gfm import SmallBatchWarning
from fmlearn.sensing import PhaseRetrieval, SymmetricRankOneSensing
from fmlearn.stream import fit_stream, rebatch

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
db = pytest.importorskip("dask.bag")
pytest.importorskip("distributed")

from fmlearn.distributed import blocks, fit_one_pass  # noqa: E402

RTOL = 1e-10


@pytest.fixture
def sync():
    with dask.config.set(scheduler="synchronous"):
        yield


def _dask(X, y, rows, sw=None):
    Xd = da.from_array(X, chunks=(rows, X.shape[1]))
    out = [Xd, da.from_array(y, chunks=rows)]
    if sw is not None:
        out.append(da.from_array(sw, chunks=rows))
    return out


def _close(a, b, rtol=RTOL):
    scale = max(np.max(np.abs(b)), 1e-300)
    np.testing.assert_array_less(np.max(np.abs(np.asarray(a) - np.asarray(b))), rtol * scale)


def assert_same_iterates(m, ref, rtol=RTOL):
    """Same final state and the same per-batch trajectory (prequential RMSE, recovery)."""
    for name in ("working_U_", "working_V_", "working_w_", "mean_", "scale_"):
        _close(getattr(m, name), getattr(ref, name), rtol)
    assert m.working_intercept_ == pytest.approx(ref.working_intercept_, rel=rtol, abs=rtol)
    assert m.n_batches_ == ref.n_batches_ and m.batch_size_ == ref.batch_size_
    for key in ref.history_:
        np.testing.assert_allclose(m.history_[key], ref.history_[key], rtol=1e-8, atol=1e-14)


# -- data-parallel one-pass step -------------------------------------------------------------------
CASES = {
    "gfm": (lambda: GFMRegressor(2, batch_size=900), lambda: make_gfm(
        7200, 20, 2, intercept=1.5, random_state=0)),
    "gfm-moment": (lambda: GFMRegressor(2, solver="moment", batch_size=900), lambda: make_gfm(
        7200, 20, 2, distribution="exponential", random_state=1)),
    "ifm": (lambda: IFMRegressor(2, batch_size=900), lambda: make_gfm(
        7200, 20, 2, random_state=2)),
    "sensing": (lambda: SymmetricRankOneSensing(2, batch_size=900, safeguard=False),
                lambda: make_symmetric_sensing(7200, 20, 2, random_state=3)),
    "phase": (lambda: PhaseRetrieval(batch_size=450), lambda: make_phase_retrieval(
        3600, 20, random_state=4)),
}


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("case", list(CASES))
def test_fit_one_pass_equals_in_memory_solver(case, sparse, sync):
    """Planted problems: every batch's iterate equals the in-memory solver's to rtol 1e-10;
    the partitions (chunks of 700 rows) straddle the batches of 900 rows."""
    make_est, make_data = CASES[case]
    X, y, truth = make_data()
    Xin = sp.csr_matrix(X) if sparse else X
    est = make_est().set_params(max_iter=1, random_state=0)
    ref = clone(est).fit(Xin, y, truth=truth)
    Xd, yd = _dask(Xin, y, 700)
    m = fit_one_pass(clone(est), Xd, yd, truth=truth)
    assert_same_iterates(m, ref)
    np.testing.assert_allclose(m.predict(X[:100]), ref.predict(X[:100]), rtol=1e-9, atol=1e-12)
    if case in ("gfm", "sensing", "phase"):  # noise-free Gaussian: recovery as in memory
        assert m.history_["recovery_error"][-1] < 1e-3


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_dask_batch_rows_statistics_equal_in_memory(sparse, sync):
    """Oracle per method of the batch interface: every sum over rows of DaskBatchRows equals
    the in-memory BatchRows' (rows of weight 0 included: they are dropped on both sides)."""
    from dask import delayed

    from fmlearn.distributed import DaskBatchRows
    from fmlearn.distributed._one_pass import _prepare_part
    from fmlearn.solvers.one_pass import BatchRows, OnePassState

    rng = np.random.default_rng(0)
    n, d, k = 1500, 12, 3
    X = rng.exponential(size=(n, d)) * (rng.random((n, d)) < (0.3 if sparse else 1.0))
    X = sp.csr_matrix(X) if sparse else X
    y = rng.normal(size=n)
    sw = rng.uniform(0, 2, size=n)
    sw[::5] = 0
    keep = sw > 0
    mem = BatchRows(X[keep], y[keep], sw[keep])
    cuts = [0, 400, 401, 1100, n]
    parts = [delayed(_prepare_part)(X[a:b], y[a:b], sw[a:b], np.float64, a)
             for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    dist = DaskBatchRows(parts, d)
    assert dist.wsum == pytest.approx(mem.wsum, rel=1e-13)
    for center in (True, False):
        for a, b in zip(dist.standardization(center), mem.standardization(center), strict=True):
            _close(a, b, 1e-12)
    mean, scale = mem.standardization(True)
    for a, b in zip(dist.moments(mean, scale), mem.moments(mean, scale), strict=True):
        _close(a, b, 1e-12)
    np.testing.assert_allclose(dist.target_moments(), mem.target_moments(), rtol=1e-13)
    U, V, w = (rng.normal(size=(d, k)), rng.normal(size=(d, k)), rng.normal(size=d))
    for rows in (dist, mem):
        rows.bind(mean, scale, 1)
    for zero_diagonal in (False, True):
        a = dist.residual_pass(U, V, w, 0.3, zero_diagonal, need_q=True)
        b = mem.residual_pass(U, V, w, 0.3, zero_diagonal, need_q=True)
        for key in ("rss", "h2", "G", "q"):
            _close(a[key], b[key], 1e-12)
        B = rng.normal(size=(d, 4))
        _close(dist.gram_pass(B, a["rho"]), mem.gram_pass(B, b["rho"]), 1e-12)
        state = OnePassState(w, U, V, 0.3)
        assert dist.rss(state, zero_diagonal) == pytest.approx(mem.rss(state, zero_diagonal),
                                                               rel=1e-12)


def test_weights_randomized_init_and_safeguard(sync):
    """Sample weights (with zeros, dropped as in memory), the randomized spectral start (many
    gram passes) and the safeguard's extra rss pass all go through the map-reduce."""
    X, y, truth = make_gfm(6000, 24, 3, noise=0.05, random_state=5)
    sw = np.random.default_rng(0).uniform(0, 2, size=6000)
    sw[::7] = 0.0
    est = GFMRegressor(3, batch_size=1500, max_iter=1, init="randomized", safeguard=True,
                       random_state=0)
    ref = clone(est).fit(X, y, sample_weight=sw, truth=truth)
    m = fit_one_pass(clone(est), *_dask(X, y, 1100, sw), truth=truth)
    assert_same_iterates(m, ref)


def test_warm_start_continues_like_fit(sync):
    X, y, _ = make_gfm(6000, 20, 2, random_state=6)
    est = GFMRegressor(2, batch_size=1000, max_iter=1, warm_start=True, random_state=0)
    ref = clone(est).fit(X[:3000], y[:3000]).fit(X[3000:], y[3000:])
    m = clone(est)
    fit_one_pass(m, *_dask(X[:3000], y[:3000], 800))
    fit_one_pass(m, *_dask(X[3000:], y[3000:], 800))
    assert m.n_batches_ == 6
    assert_same_iterates(m, ref)


def test_partitioning_only_changes_summation_order(sync):
    X, y, _ = make_gfm(5000, 20, 2, random_state=7)
    est = GFMRegressor(2, batch_size=1000, random_state=0)
    one = fit_one_pass(clone(est), *_dask(X, y, 5000))
    many = fit_one_pass(clone(est), *_dask(X, y, 333))
    again = fit_one_pass(clone(est), *_dask(X, y, 333))
    assert_same_iterates(many, one, rtol=1e-12)
    np.testing.assert_array_equal(many.working_V_, again.working_V_)  # deterministic


def test_float32_and_batch_size_default(sync):
    X, y, _ = make_gfm(4800, 12, 2, random_state=8, dtype=np.float32)
    m = fit_one_pass(GFMRegressor(2, random_state=0), *_dask(X, y, 1000))
    assert m.dtype_ == "float32" and m.working_U_.dtype == np.float32
    assert m.n_batches_ == 4800 // (10 * 2 * 12)  # batch_size="auto": 10 k d rows
    ref = GFMRegressor(2, max_iter=1, random_state=0).fit(X, y)
    np.testing.assert_allclose(m.predict(X[:50]), ref.predict(X[:50]), rtol=1e-3, atol=1e-3)


def test_divergence_raises_and_keeps_previous_state(sync):
    X, y, truth = make_gfm(6000, 30, 2, random_state=9)
    m = fit_one_pass(GFMRegressor(2, batch_size=1500, random_state=0), *_dask(X, y, 1500))
    before = m.predict(X[:20])
    Xs, ys, _ = make_gfm(40 * 40, 30, 2, truth=truth, random_state=10)
    ref = GFMRegressor(2, batch_size=40, max_iter=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallBatchWarning)
        with pytest.raises(DivergenceError) as in_memory:
            ref.fit(Xs, ys)
        with pytest.raises(DivergenceError, match="keeps its previous state") as dist:
            fit_one_pass(m, *_dask(Xs, ys, 100), batch_size=40)
    assert str(dist.value).split(":")[1] == str(in_memory.value).split(":")[1]
    np.testing.assert_array_equal(m.predict(X[:20]), before)


# -- blocks streamed to partial_fit ----------------------------------------------------------------
def _partial_fit_reference(est, X, y, rows, sw=None):
    ref = clone(est)
    for Xb, yb, wb in rebatch([(X, y) if sw is None else (X, y, sw)], rows):
        ref.partial_fit(Xb, yb, **({} if wb is None else {"sample_weight": wb}))
    return ref


@pytest.mark.parametrize("kind", ["array", "sparse-array", "bag", "delayed"])
def test_blocks_stream_equals_in_memory_partial_fit(kind, sync):
    X, y, _ = make_gfm(5000, 16, 2, random_state=11)
    sw = np.random.default_rng(1).uniform(0.5, 1.5, size=5000)
    est = GFMRegressor(2, batch_size=800, random_state=0)
    cuts = [0, 900, 1700, 3100, 4000, 5000]
    pieces = [(X[a:b], y[a:b], sw[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    if kind == "array":
        src = blocks(*_dask(X, y, 900, sw))
    elif kind == "sparse-array":
        Xd, yd, wd = _dask(X, y, 900, sw)
        src = blocks(Xd.map_blocks(sp.csr_matrix), yd, wd)
    elif kind == "bag":
        src = blocks(db.from_sequence(pieces, npartitions=2))
    else:
        src = blocks([dask.delayed(p) for p in pieces])
    got = fit_stream(clone(est), src, n_epochs=2)
    ref = clone(est)
    for _ in range(2):
        for Xb, yb, wb in rebatch([(X, y, sw)], 800):
            ref.partial_fit(sp.csr_matrix(Xb) if kind == "sparse-array" else Xb, yb,
                            sample_weight=wb)
    assert got.n_batches_ == ref.n_batches_ == 12
    for name in ("working_U_", "working_V_", "working_w_"):
        np.testing.assert_array_equal(getattr(got, name), getattr(ref, name))


def test_blocks_feed_sgd_fm(sync):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 10))
    y = X[:, 0] * X[:, 1] + 0.1 * rng.normal(size=3000)
    est = FMRegressor(3, solver="sgd", shuffle=False, n_iter=2, clip_predictions=False,
                      random_state=0)
    got = fit_stream(clone(est), blocks(*_dask(X, y, 700)), n_epochs=2)
    ref = clone(est).fit(X, y)
    np.testing.assert_array_equal(got.V_, ref.V_)


# -- on a cluster ----------------------------------------------------------------------------------
def _cluster_checks(client):
    X, y, truth = make_gfm(6000, 20, 2, intercept=0.5, random_state=12)
    est = GFMRegressor(2, batch_size=1000, random_state=0)
    Xd, yd = client.persist(_dask(X, y, 700))
    ref = clone(est).set_params(max_iter=1).fit(X, y, truth=truth)
    m = fit_one_pass(clone(est), Xd, yd, truth=truth, client=client)
    assert_same_iterates(m, ref)
    with dask.config.set(scheduler="synchronous"):
        local = fit_one_pass(clone(est), *_dask(X, y, 700), truth=truth)
    # Same partial sums added in the same (partition) order, wherever they are computed.
    assert_same_iterates(m, local, rtol=1e-13)
    got = fit_stream(clone(est), blocks(Xd, yd, prefetch=2))
    pf = _partial_fit_reference(est, X, y, 1000)
    np.testing.assert_array_equal(got.working_V_, pf.working_V_)


def test_local_cluster_threads():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        _cluster_checks(client)


@pytest.mark.slow
def test_local_cluster_two_processes():
    """Two worker processes: the tasks and the persisted residuals cross process boundaries."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        _cluster_checks(client)


# -- bad input -------------------------------------------------------------------------------------
def test_bad_input(sync):
    X, y, _ = make_gfm(2000, 10, 2, random_state=13)
    Xd, yd = _dask(X, y, 500)
    with pytest.raises(TypeError, match="one-pass models"):
        fit_one_pass(FMRegressor(), Xd, yd)
    with pytest.raises(TypeError, match="Dask array"):
        fit_one_pass(GFMRegressor(), X, y)
    with pytest.raises(ValueError, match="batch_size"):
        fit_one_pass(GFMRegressor(), Xd, yd, batch_size=0)
    with pytest.raises(ValueError, match="entries"):
        fit_one_pass(GFMRegressor(), Xd, y[:-1])
    Xbad = X.copy()
    Xbad[1234, 3] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinity \(rows 1000\.\.1499\)"):
        fit_one_pass(GFMRegressor(2, batch_size=2000), *_dask(Xbad, y, 500))
    with pytest.raises(ValueError, match="non-negative"):
        fit_one_pass(GFMRegressor(2, batch_size=2000), Xd, yd, -np.ones(2000))
    with pytest.raises(ValueError, match="nothing to fit"):
        fit_one_pass(GFMRegressor(2, batch_size=2000), Xd, yd, np.zeros(2000))
    with pytest.raises(ValueError, match="y=None"):
        blocks(db.from_sequence([(X, y)]), y)
    with pytest.raises(TypeError, match="Dask collection"):
        blocks(X, y)
    with pytest.raises(ValueError, match="prefetch"):
        blocks(Xd, yd, prefetch=-1)


# -- optional dependency ---------------------------------------------------------------------------
def _run(code):
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "src")
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(src), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)


def test_fmlearn_works_without_dask():
    code = ("import sys; sys.modules['dask'] = None\n"
            "import fmlearn, fmlearn.stream\n"
            "from fmlearn.datasets import make_gfm\n"
            "X, y, _ = make_gfm(2000, 10, 2, random_state=0)\n"
            "fmlearn.stream.fit_stream(fmlearn.GFMRegressor(2, batch_size=500), [(X, y)])\n"
            "try:\n"
            "    import fmlearn.distributed\n"
            "except ImportError as exc:\n"
            "    print('IMPORT-ERROR', exc)\n")
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert "IMPORT-ERROR fmlearn.distributed needs Dask" in out.stdout
    out = _run("import sys, fmlearn, fmlearn.stream; print('dask' in sys.modules)")
    assert out.stdout.strip() == "False", out.stderr


# -- the guide's examples run and print what they say --------------------------------------------
def test_docs_examples_run(tmp_path, monkeypatch, capsys):
    """Every ```python block of docs/distributed.md, in order, in one namespace; each
    ``print(...)  # expected`` line must print ``expected``."""
    import re

    text = open(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "docs",
                             "distributed.md"),
                encoding="utf-8").read()
    blocks_ = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks_) >= 5
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for code in blocks_:
        expected = [m.group(1).strip() for m in re.finditer(r"^\s*print\(.*\)\s+#\s*(.*)$",
                                                             code, flags=re.M)]
        exec(compile(code, "docs/distributed.md", "exec"), namespace)
        printed = [line.strip() for line in capsys.readouterr().out.splitlines()]
        assert printed == expected
