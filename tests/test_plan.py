"""The fit plans (fmlearn._plan, fmlearn._fm_plan): one hand-off from the estimators to the
solvers, read by every entry point.

Properties: the solver settings are built in one place each, by keyword; no entry point around
the estimators (streaming, evaluation, the Dask backend, model files, the CLI) calls a private
method of an estimator; a fit leaves nothing run-time (clock,
callback, live state) on the estimator; the resolved ``init_stdev`` is recorded, saved and
loaded, and the same for every entry point; the shared pieces behave as documented (a data
summary merged from parts equals the summary of the whole, a callback stops a run only where
the family allows it).
"""

import ast
import dataclasses
import math
import pathlib

import numpy as np
import pytest
import scipy.sparse as sp

import fmlearn
from fmlearn import FMClassifier, FMRegressor
from fmlearn._plan import DataSummary, RunContext
from fmlearn.fm._plan import ClassicFMPlan
from fmlearn.solvers._fm_common import auto_init_stdev
from fmlearn.solvers.sgd import sgd_init_stdev

SRC = pathlib.Path(fmlearn.__file__).parent

#: Hooks of the shared estimator base (fmlearn._base.BaseFM and scikit-learn's BaseEstimator)
#: that shared infrastructure calls on any estimator.
SHARED_HOOKS = {"_validate_params", "_check_loaded_state", "_validate_X_predict"}


def _sources():
    for p in sorted(SRC.rglob("*.py")):
        yield p.relative_to(SRC).as_posix(), ast.parse(p.read_text())


#: The entry points around the estimators (ARCHITECTURE.md, "Layers"): the modules that must
#: reach a family through its public methods or its functions.
ENTRY_POINTS = ("stream.py", "evaluate.py", "distributed", "io.py", "_skops_io.py",
                "recommender.py", "cli", "reproduce")


def _entry_point(rel):
    return any(rel == m or rel.startswith(m + "/") for m in ENTRY_POINTS)


def test_solver_settings_are_built_once_each_by_keyword():
    calls = {"SGDSettings": [], "ALSSettings": [], "MCMCSettings": []}
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", None))
                if name in calls:
                    calls[name].append((rel, node.lineno, len(node.args)))
    for name, where in calls.items():
        assert len(where) == 1, (name, where)
        assert where[0][2] == 0, f"{name} built by position at {where[0][:2]}"


def test_no_entry_point_calls_a_private_method_of_an_estimator():
    found = []
    for rel, tree in _sources():
        if not _entry_point(rel):
            continue
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules |= {(a.asname or a.name).split(".")[0] for a in node.names}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            attr, owner = node.func.attr, ast.unparse(node.func.value)
            if (not attr.startswith("_") or attr.startswith("__") or attr in SHARED_HOOKS
                    or attr in ("_replace", "_asdict", "_make")
                    or owner.split(".")[0] in {"self", "cls", "super()"} | modules):
                continue
            found.append(f"{rel}:{node.lineno}: {owner}.{attr}()")
    assert not found, found


def _data(n=300, d=12, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.4, random_state=seed, format="csr") * scale
    y = rng.normal(size=n) + np.asarray(X.sum(axis=1)).ravel()
    return X, y


@pytest.mark.parametrize("solver", ["sgd", "als", "mcmc"])
def test_a_fit_leaves_nothing_run_time_on_the_estimator(solver):
    X, y = _data()
    C = (sp.eye(299, 300) - sp.eye(299, 300, k=1)).tocsr()
    fits = [FMRegressor(2, solver=solver, n_iter=3, random_state=0).fit(
                X, y, eval_set=(X, y), callback=lambda i, h: None),
            FMRegressor(2, solver=solver, n_iter=3, random_state=0).fit(X, C @ y, contrasts=C),
            FMClassifier(2, solver=solver, n_iter=3, random_state=0).fit(X, y > 0)]
    if solver == "sgd":
        fits.append(FMRegressor(2, solver="sgd", random_state=0).partial_fit(X, y))
    for est in fits:
        assert [k for k in vars(est) if k.startswith("_")] == []
        assert isinstance(est.init_stdev_, float)


def _auto_oracle(X, y, k):
    """init_stdev="auto" from its definition, by slow loops: min(0.1 / r, sqrt(0.5 s) /
    (k q)^(1/4)), r the root mean square of the non-zero values, q the mean over the rows of
    sum_{j<l} x_j^2 x_l^2, s the targets' standard deviation."""
    X = np.asarray(X.toarray() if sp.issparse(X) else X)
    r = math.sqrt(np.mean(X[X != 0] ** 2))
    q = np.mean([sum(row[j] ** 2 * row[m] ** 2 for j in range(len(row))
                     for m in range(j + 1, len(row))) for row in X])
    return min(0.1 / r, math.sqrt(0.5 * np.std(y)) / (k * q) ** 0.25)


def test_auto_init_stdev_is_libfms_on_one_hot_pairs_and_follows_the_pairs_of_dense_rows():
    # one-hot user x item rows (libFM's reference design): libFM's 0.1, at any scale of the
    # values (0.1 / c for c times the one-hot); dense rows: the cap that keeps the initial
    # pairwise term's spread under half the targets' (the oracle), whatever the number of pairs
    rng = np.random.default_rng(0)
    n, d = 200, 30
    users, items = rng.integers(0, 10, n), rng.integers(10, d, n)
    onehot = sp.csr_matrix((np.ones(2 * n), np.column_stack([users, items]).ravel(),
                            np.arange(0, 2 * n + 1, 2)), shape=(n, d))
    y = rng.normal(size=n)
    for scale in (1.0, 40.0):
        est = FMRegressor(2, solver="als", n_iter=1, random_state=0).fit(onehot * scale, y)
        assert est.init_stdev_ == pytest.approx(0.1 / scale, rel=1e-12)
    for width, sd, y_scale in ((10, 1.0, 1.0), (40, 0.1, 1.0), (40, 0.1, 0.01)):
        Xd = rng.normal(scale=sd, size=(n, width))
        est = FMRegressor(3, solver="als", n_iter=1, random_state=0).fit(Xd, y * y_scale)
        assert est.init_stdev_ == pytest.approx(_auto_oracle(Xd, y * y_scale, 3), rel=1e-10)
    assert est.init_stdev_ < 0.1 / 0.1 / 2  # the cap acts on the small-valued dense rows


def test_resolved_init_stdev_is_recorded_saved_and_loaded(tmp_path):
    X, y = _data(scale=30.0)
    sq = X.multiply(X).sum() / X.nnz  # unit weights: the mean squared non-zero value
    mcmc = FMRegressor(2, n_iter=2, random_state=0).fit(X, y)
    assert mcmc.init_stdev_ == pytest.approx(min(0.1 / math.sqrt(sq), _auto_oracle(X, y, 2)),
                                             rel=1e-12)
    assert mcmc.init_stdev_ == pytest.approx(0.1 / math.sqrt(sq), rel=1e-12)
    assert mcmc.init_stdev_ == pytest.approx(
        auto_init_stdev(float(X.multiply(X).sum()), float(X.nnz)), rel=1e-12)
    sgd = FMRegressor(2, solver="sgd", n_iter=2, learning_rate=0.005, random_state=0).fit(X, y)
    assert sgd.init_stdev_ == sgd_init_stdev(0.005) == pytest.approx(0.05)
    fixed = FMRegressor(2, solver="als", n_iter=2, init_stdev=0.03, random_state=0).fit(X, y)
    assert fixed.init_stdev_ == 0.03
    for est in (mcmc, sgd, fixed):
        back = fmlearn.load(est.save(tmp_path / "m.fmz"))
        assert back.init_stdev_ == est.init_stdev_
        np.testing.assert_array_equal(back.predict(X), est.predict(X))


def test_a_crafted_init_stdev_is_refused(tmp_path):
    X, y = _data()
    est = FMRegressor(2, solver="als", n_iter=2, random_state=0).fit(X, y)
    est.init_stdev_ = -1.0
    with pytest.raises(fmlearn.exceptions.ModelFileError, match="init_stdev_"):
        fmlearn.load(est.save(tmp_path / "m.fmz"))


def test_dask_and_in_memory_fits_build_the_same_plan():
    dask = pytest.importorskip("dask")
    da = pytest.importorskip("dask.array")
    from fmlearn import distributed as fd

    X, y = _data(scale=3.0)
    kw = dict(n_factors=2, solver="als", n_iter=2, reg_pairwise=0.1, random_state=0)
    ref = FMRegressor(**kw).fit(X, y)
    with dask.config.set(scheduler="synchronous"):
        m = fd.fit(FMRegressor(**kw), da.from_array(X, chunks=(100, 12), asarray=False),
                   da.from_array(y, chunks=100))
    assert m.init_stdev_ == pytest.approx(ref.init_stdev_, rel=1e-12)
    assert m.y_range_ == ref.y_range_ and m.dtype_ == ref.dtype_


def test_plan_is_frozen_and_owns_the_resolved_settings():
    summary = DataSummary(n_samples=10, n_features=6, dtype="float32", y_min=-1.0, y_max=2.0)
    plan = ClassicFMPlan.build(FMRegressor(3, solver="sgd", n_iter=25, random_state=0), summary)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.n_iter = 3
    assert plan.sgd.n_iter == 25 and plan.sgd.average == 3 == plan.average_epochs
    assert (plan.sgd.clip_lo, plan.sgd.clip_hi) == (-1.0, 2.0) == plan.clip
    assert plan.state.V.dtype == np.float32 and plan.state.V.shape == (6, 3)
    partial = ClassicFMPlan.build(FMRegressor(3, solver="sgd", n_iter=25, random_state=0),
                                  summary, mode="partial_fit")
    assert partial.sgd.n_iter == 1 and not partial.sgd.shuffle and partial.sgd.average == 1
    assert partial.seed == plan.seed  # the same first draw of random_state
    mcmc = ClassicFMPlan.build(FMClassifier(3, n_iter=25, random_state=0), summary)
    assert mcmc.probit and mcmc.mcmc.probit and mcmc.mcmc.relax == 0.0 and mcmc.chain.t == 0
    assert mcmc.clip == (-np.inf, np.inf) and mcmc.y_range is None


def test_merged_summaries_equal_the_summary_of_all_rows():
    X, y = _data(n=200)
    sw = np.random.default_rng(1).uniform(0.0, 2.0, 200)
    whole = DataSummary.of_rows(X, y, sw)
    parts = [DataSummary.of_rows(X[a:b], y[a:b], sw[a:b]) for a, b in ((0, 70), (70, 70),
                                                                      (70, 200))]
    merged = DataSummary.merge(parts, X.shape[1], X.dtype)
    assert (merged.n_samples, merged.n_features, merged.dtype) == (200, 12, "float64")
    assert merged.y_range == whole.y_range
    assert merged.n_nonzero == pytest.approx(whole.n_nonzero, rel=1e-14)
    assert merged.sum_sq == pytest.approx(whole.sum_sq, rel=1e-14)
    assert merged.weight == pytest.approx(whole.weight, rel=1e-14)
    assert math.isnan(DataSummary.of_rows(X, None, sw).y_min)


def test_run_context_stops_only_when_the_family_allows_it():
    seen = []
    ctx = RunContext(lambda i, h: seen.append(i) or True)
    assert ctx.notify(0, {}) is False and seen == [0]
    assert RunContext(lambda i, h: True, may_stop=True).notify(1, {}) is True
    assert RunContext(None, may_stop=True).notify(1, {}) is False
    with pytest.raises(TypeError, match="callback must be callable"):
        RunContext(3)
    ctx.start_clock()
    assert 0.0 <= ctx.lap() < 60.0


def test_summary_squares_are_numpys_exactly_on_integer_data_and_numpys_otherwise():
    # The one-pass compiled sums are taken only when exact (integer values and weights), so
    # they equal NumPy's square_stats / pair_stats to the bit; other data take NumPy's route.
    from fmlearn._plan import pair_stats, square_stats
    from fmlearn.kernels.dedup import exact_square_sums

    rng = np.random.default_rng(5)
    n, d = 3000, 60
    X = sp.random(n, d, density=0.1, random_state=6, format="csr")
    counts = X.copy()
    counts.data = rng.integers(1, 6, counts.nnz).astype(np.float64)  # count data
    onehot = X.copy()
    onehot.data[:] = 1.0
    for M, sw in ((onehot, np.ones(n)), (counts, rng.integers(0, 4, n).astype(np.float64))):
        ok, *sums = exact_square_sums(M.indptr, M.data, sw)
        assert ok
        assert tuple(sums) == (*square_stats(M.indptr, M.data, sw),
                               pair_stats(M.indptr, M.data, sw))
        s = DataSummary.of_rows(M, None, sw)
        assert (s.sum_sq, s.n_nonzero, s.sum_pairs) == tuple(sums)
    for M, sw in ((X, np.ones(n)), (counts, np.full(n, 0.5)), (counts * 1e8, np.ones(n))):
        assert not exact_square_sums(M.indptr, M.data, sw)[0]  # not exact: NumPy's route
        s = DataSummary.of_rows(M, None, sw)
        assert (s.sum_sq, s.n_nonzero) == square_stats(M.indptr, M.data, sw)
        assert s.sum_pairs == pair_stats(M.indptr, M.data, sw)


def _stats_oracle(t, w):
    """NumPy's min, max and weighted sums (math.fsum: exactly rounded) of targets t."""
    return (t.min(), t.max(), math.fsum(w * t), math.fsum(w * t * t))


@pytest.mark.parametrize("weights", ["unit", "given"])
@pytest.mark.parametrize("indexed", [False, True])
def test_target_statistics_equal_an_oracle(weights, indexed):
    # DataSummary.with_targets: one compiled pass (kernels.dedup.target_moments), through a
    # row index when given, weights or unit ones; sums within the sequential sum's rounding
    # (n eps relative to the sum of magnitudes), min / max exactly
    rng = np.random.default_rng(3)
    y = rng.normal(2.0, 3.0, 5000)
    rows = rng.permutation(5000)[:3000].astype(np.int32) if indexed else None
    t = y if rows is None else y[rows]
    sw = None if weights == "unit" else rng.uniform(0.1, 4.0, t.shape[0])
    w = np.ones(t.shape[0]) if sw is None else sw
    base = DataSummary(1, 1, "float64", 1.0, math.nan, math.nan, 0.0, 0.0, 0.0, math.nan,
                       math.nan)
    got = base.with_targets(y, sw, rows=rows, unit_weights=True)
    lo, hi, s, s2 = _stats_oracle(t, w)
    assert got.y_min == lo and got.y_max == hi
    eps = np.finfo(float).eps * t.shape[0]
    assert abs(got.y_sum - s) <= eps * math.fsum(np.abs(w * t))
    assert abs(got.y_sum_sq - s2) <= eps * s2
    # without weights and without unit_weights: the range only
    bare = base.with_targets(y, None, rows=rows)
    assert bare.y_min == lo and bare.y_max == hi and math.isnan(bare.y_sum)


def test_target_statistics_of_integer_targets_are_exact():
    # small integers (ratings) with integer weights: every order sums to the same doubles,
    # so the compiled pass equals NumPy's dot products bit for bit
    rng = np.random.default_rng(5)
    y = rng.integers(1, 6, 20000).astype(float)
    sw = rng.integers(1, 4, 20000).astype(float)
    base = DataSummary(1, 1, "float64", 1.0, math.nan, math.nan, 0.0, 0.0, 0.0, math.nan,
                       math.nan)
    got = base.with_targets(y, sw)
    assert (got.y_sum, got.y_sum_sq) == (float(sw @ y), float(sw @ (y * y)))
    unit = base.with_targets(y, None, unit_weights=True)
    assert (unit.y_sum, unit.y_sum_sq) == (float(y.sum()), float(y @ y))


def test_summary_with_unit_weights_equals_explicit_ones():
    # of_rows(..., unit_weights=True) with sw None: the summary of weights 1, no array of ones
    X = sp.random(400, 30, density=0.1, format="csr", random_state=2)
    X.data[:] = np.round(X.data * 5) + 1  # integers: exact square sums
    y = np.arange(400.0)
    a = DataSummary.of_rows(X, y, None, unit_weights=True)
    b = DataSummary.of_rows(X, y, np.ones(400))
    assert a == b
    X.data[:] = np.sqrt(X.data)  # not exact: the NumPy route with ones
    assert DataSummary.of_rows(X, y, None, unit_weights=True) == DataSummary.of_rows(
        X, y, np.ones(400))


def test_square_sums_of_pairs_of_ones_are_counts():
    # two entries of value 1 a row, unit weights: (2n, 2n, n), the pass's doubles; other
    # weights take the pass
    from fmlearn._data import to_csr

    rng = np.random.default_rng(14)
    n = 300
    X = to_csr(sp.csr_matrix((np.ones(2 * n), np.column_stack(
        [rng.integers(0, 10, n), 10 + rng.integers(0, 7, n)]).ravel(),
        np.arange(0, 2 * n + 1, 2)), shape=(n, 17)))
    base = DataSummary.of_rows(X, None, None, unit_weights=True, squares=False)
    for sw in (None, np.ones(n), rng.choice([0.5, 2.0], n)):
        want = DataSummary.of_rows(X, None, sw, unit_weights=True).squares
        got = base.with_squares(X, sw, pairs_of_ones=True)
        assert (got.sum_sq, got.n_nonzero, got.sum_pairs) == (
            *want, DataSummary.of_rows(X, None, sw, unit_weights=True).sum_pairs)
    assert base.with_squares(X, None, pairs_of_ones=True).squares == (2.0 * n, 2.0 * n)
