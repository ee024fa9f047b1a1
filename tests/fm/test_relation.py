"""Relation blocks (Rendle 2013): the block-aware sweep against a slow oracle and against the
flat sweep on the expanded matrix, prediction, the estimators on RelationData, bad input."""

import numpy as np
import pytest
import scipy.sparse as sp

import reference as ref
from fmlearn import FMClassifier, FMRegressor, RelationBlock, RelationData
from fmlearn.kernels.cd import Config, Model, Prior
from fmlearn.kernels.cd_relation import (
    N_CACHE,
    block_caches,
    relation_predict,
    relation_predict_samples,
    relation_sweep,
)
from fmlearn.losses import LOGISTIC, SQUARED
from fmlearn.relation import check_relation_data, merge_relation_rows
from fmlearn.solvers import _fm_common as fm_common
from fmlearn.solvers._fm_common import FMState, column_data, group_index
from fmlearn.solvers.als import ALSSettings, als_solver
from fmlearn.solvers.mcmc import Chain, MCMCSettings, mcmc_solver
from fmlearn.solvers.relation import (
    relation_als_solver,
    relation_column_data,
    relation_mcmc_solver,
    relation_rows,
)

# Rounding: every quantity is a sum of at most a few hundred products of O(1) numbers, in
# another order than the flat sweep's (per block row, then over block rows), so each differs
# by a few hundred ulps of its terms (~1e-13); a handful of sweeps of a chain whose conditional
# means are contractions carry that forward without growth beyond a factor of ~10.
TOL = 1e-9


def _case(seed=0, n=60, d0=3, sizes=((9, 5), (7, 4)), weights=True, values="normal"):
    """Relational data: row-level features and two blocks (block rows x features), random
    sample -> block row maps (some block rows unused), targets and weights."""
    rng = np.random.default_rng(seed)

    def mat(r, c, density):
        M = sp.random(r, c, density=density, random_state=rng, format="csr")
        M.data = rng.normal(size=M.nnz) if values == "normal" else np.ones(M.nnz)
        return M

    X = mat(n, d0, 0.4)
    blocks = [RelationBlock(rng.integers(0, r - 1, size=n), mat(r, c, 0.5)) for r, c in sizes]
    Xr = RelationData(X, blocks)
    y = rng.normal(size=n)
    sw = rng.uniform(0.5, 2.0, size=n) if weights else np.ones(n)
    return rng, Xr, y, sw


def _parts(Xr):
    Xr = check_relation_data(Xr)
    return Xr, [(b.indices, b.X) for b in Xr.blocks]


def _relational_order(data, d):
    """The relational sweep's visiting order: the row-level features in their plan's order,
    then every block feature in index order."""
    return np.concatenate([data.plan.order, np.arange(data.plan.order.shape[0], d)])


def _relational_classes(data, d):
    """``(order, color_ptr, color)`` of the relational sweep (the classes of
    ``fm_common._colour_classes``): the row-level plan's colour classes, then every block
    feature as a class of its own, in index order."""
    order = _relational_order(data, d)
    d0 = data.plan.order.shape[0]
    row_ptr = data.plan.color_ptr
    color_ptr = np.concatenate([row_ptr, row_ptr[-1] + np.arange(1, d - d0 + 1)])
    color = np.empty(d, dtype=np.int64)
    color[order] = np.repeat(np.arange(color_ptr.shape[0] - 1), np.diff(color_ptr))
    return order, color_ptr.astype(np.int64), color


# -- the sweep against the oracle ----------------------------------------------------------------

@pytest.mark.parametrize("sample, relax, unit", [(False, 0.0, False), (True, 0.0, False),
                                                 (True, -0.9, False), (True, 0.0, True),
                                                 (True, 0.0, "onehot")])
def test_relation_sweep_matches_full_conditional_oracle(sample, relax, unit):
    # Each coordinate, in the relational order, must be set to the minimiser of its 1-D
    # objective (ALS) or to mean + a (old - mean) + sqrt(1 - a^2) noise / sqrt(precision) of
    # its full conditional (MCMC), computed here from the objective evaluated on the expanded
    # rows (three evaluations of a quadratic); two groups with their own priors. ``unit``:
    # unit weights and the samples sorted by their block-0 row (as the estimator's merge
    # orders them), the kernels' fast paths: block 0's gather summing runs of one block row,
    # the scatter of block 0 fused with the gather of block 1, each block's changes written
    # in the next pass over the samples (the last block's in the next factor's first
    # row-level gather). "onehot": besides, one row-level feature of value 1 per sample (a
    # day as a category), whose class's passes are fused with the blocks' sample by sample
    # (kernels.cd_relation._scatter_first_unit, _flush_gather_unit).
    rng, Xr, y, sw = _case(1, weights=not unit)
    if unit == "onehot":
        n = Xr.shape[0]
        day = rng.integers(0, 4, n)
        Xr = RelationData(sp.csr_matrix((np.ones(n), day, np.arange(n + 1)), shape=(n, 4)),
                          Xr.blocks)
    if unit:
        order = np.lexsort((Xr.X.indices, Xr.blocks[0].indices)) if unit == "onehot" else \
            np.argsort(Xr.blocks[0].indices, kind="stable")
        Xr = RelationData(Xr.X[order], [RelationBlock(b.indices[order], b.X)
                                        for b in Xr.blocks])
        y = y[order]
    Xr, blocks = _parts(Xr)
    X = Xr.to_csr()
    n, d = X.shape
    k = 3  # three factors: a pass whose previous and next passes are factors' too
    data = relation_column_data(Xr.X, blocks, y, sw)
    assert list(data.rel.grouped) == [bool(unit), False] and data.rel.unit == bool(unit)
    if unit == "onehot":  # one class, one entry of value 1 in every sample
        assert data.plan.color_ptr.shape[0] == 2
        assert data.plan.roff[0] < 0 and data.plan.xoff[0] < 0
    w0, w, V = float(rng.normal()), rng.normal(size=d), 0.5 * rng.normal(size=(d, k))
    group, size = group_index(rng.integers(0, 2, size=d), d)
    alpha, reg0 = 2.0, 0.4
    lam_w, mu_w = np.array([3.0, 0.5]), np.array([0.1, -0.4])
    lam_v = np.array([[1.5, 0.6], [0.7, 2.0], [1.1, 0.9]])
    mu_v = np.array([[-0.2, 0.5], [0.3, -0.1], [0.0, 0.2]])
    z = rng.normal(size=1 + 2 + d + k * (2 + d))
    state = FMState(w0, w.copy(), V.copy())
    E = data.row_state(state, y)
    prior = Prior(group, size, lam_w.copy(), mu_w.copy(), lam_v.copy(), mu_v.copy())
    model = Model(state.w, state.V, np.array([w0, alpha]))
    cfg = Config(SQUARED, 1.0, sample, False, False, reg0, 1.0, 1.0, 1.0, 0.0, relax)
    assert relation_sweep(data.rel, data.plan, prior, model, E, z, np.zeros(0), cfg)

    ew0, ew, eV = [w0], w.copy(), V.copy()
    a_scale = alpha if sample else 1.0

    def objective(lam, mu, t):
        p = ref.fm_predict(X, ew0[0], ew, eV)
        return 0.5 * a_scale * np.sum(sw * (p - y) ** 2) + 0.5 * lam * (t - mu) ** 2

    def update(get, put, lam, mu, noise):
        t0 = get()
        vals = []
        for t in (t0 - 1.0, t0, t0 + 1.0):
            put(t)
            vals.append(objective(lam, mu, t))
        a = 0.5 * (vals[0] + vals[2] - 2 * vals[1])
        b = 0.5 * (vals[2] - vals[0])
        mean = t0 - b / (2 * a)
        if not sample:
            put(mean)
            return
        put(mean + relax * (t0 - mean) + np.sqrt(1 - relax ** 2) * noise / np.sqrt(2 * a))

    order = _relational_order(data, d)
    update(lambda: ew0[0], lambda t: ew0.__setitem__(0, t), reg0, 0.0, z[0])
    zw = 1 + 2
    for j in order:
        update(lambda j=j: ew[j], lambda t, j=j: ew.__setitem__(j, t), lam_w[group[j]],
               mu_w[group[j]], z[zw + j])
    for f in range(k):
        zf = zw + d + k * 2 + f * d
        for j in order:
            update(lambda j=j, f=f: eV[j, f], lambda t, j=j, f=f: eV.__setitem__((j, f), t),
                   lam_v[f, group[j]], mu_v[f, group[j]], z[zf + j])
    assert model.scal[0] == pytest.approx(ew0[0], rel=1e-9)
    np.testing.assert_allclose(state.w, ew, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(state.V, eV, rtol=1e-7, atol=1e-9)
    # the row states leave the sweep exact: residuals and the last factor's sums
    np.testing.assert_allclose(E[:, 0], ref.fm_predict(X, ew0[0], ew, eV) - y, atol=1e-9)
    np.testing.assert_allclose(E[:, 1 + (k - 1) % 2], X @ eV[:, k - 1], atol=1e-9)


def test_prediction_kernels_match_the_expanded_rows():
    rng, Xr, _, _ = _case(2)
    Xr, blocks = _parts(Xr)
    X = Xr.to_csr()
    d, k, S = X.shape[1], 3, 4
    rows = relation_rows(Xr.X, blocks)
    w0, w, V = float(rng.normal()), rng.normal(size=d), rng.normal(size=(d, k))
    out = relation_predict(rows, w0, w, V, np.empty(X.shape[0]))
    np.testing.assert_allclose(out, ref.fm_predict(X, w0, w, V), rtol=1e-12, atol=1e-12)
    W0s, Ws, Vs = rng.normal(size=S), rng.normal(size=(S, d)), rng.normal(size=(S, d, k))
    each = np.array([ref.fm_predict(X, W0s[s], Ws[s], Vs[s]) for s in range(S)])
    for probit, expected in ((False, np.clip(each, -1.0, 2.0).mean(0)),
                             (True, ref_phi(each).mean(0))):
        got = relation_predict_samples(rows, W0s, Ws, Vs, probit, -1.0, 2.0,
                                       np.empty(X.shape[0]))
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n_rows", [1, 7, 2625])
def test_block_caches_are_zeroed_cache_lines(n_rows):
    # each block row's cache is one 64-byte cache line of its own: C starts on a line and
    # its rows are N_CACHE float64 apart; the caches and the next factor's sums start at 0
    C, qn = block_caches(n_rows)
    assert C.shape == (n_rows, N_CACHE) and qn.shape == (n_rows,)
    assert C.flags.c_contiguous and C.dtype == np.float64
    assert C.ctypes.data % 64 == 0 and C.strides == (64, 8)
    assert not np.any(C) and not np.any(qn)


def ref_phi(x):
    from scipy.special import ndtr

    return ndtr(x)


# -- against the flat solvers -------------------------------------------------------------------

@pytest.mark.parametrize("task, rows", [("regression", "sparse"), ("probit", "sparse"),
                                        ("als", "sparse"), ("regression", "onehot"),
                                        ("als", "onehot")])
def test_relational_solvers_equal_the_flat_solvers(task, rows, monkeypatch):
    # The same rows in the same order, the flat sweep visiting the features in the relational
    # order: the same chain (same random numbers) / the same ALS iterates, up to rounding.
    # (regression with unit weights: the fused pass over the samples of kernels.cd_relation;
    # "onehot": row-level fields whose colour classes hold several features, stored one entry
    # per row by kernels.cd)
    rng, Xr, y, sw = _case(3, weights=task != "regression")
    if rows == "onehot":
        n = Xr.shape[0]
        onehot = sp.csr_matrix((np.ones(2 * n), np.column_stack(
            [rng.integers(0, 6, n), 6 + rng.integers(0, 4, n)]).ravel(),
            np.arange(0, 2 * n + 1, 2)), shape=(n, 10))
        Xr = RelationData(onehot, Xr.blocks)
    Xr, blocks = _parts(Xr)
    X = Xr.to_csr()
    d, k = X.shape[1], 3
    if task == "probit":
        y = np.where(y > 0, 1.0, -1.0)
    rel = relation_column_data(Xr.X, blocks, y, sw)
    if rows == "onehot":  # the row-level plan has classes of several features
        assert rel.plan.color_ptr.shape[0] - 1 == 2
    # The flat solver on the expanded rows, its layout built (kernels.cd's class-major rows)
    # for the relational sweep's classes: the row-level plan's, then one per block feature.
    classes = _relational_classes(rel, d)
    monkeypatch.setattr(fm_common, "_colour_classes", lambda *a: classes)
    flat = column_data(X, y, sw)
    np.testing.assert_array_equal(flat.plan.order, _relational_order(rel, d))
    groups = group_index(np.repeat([0, 1, 2], [d - 9, 5, 4]), d)
    state = FMState(0.1, 0.1 * rng.normal(size=d), 0.1 * rng.normal(size=(d, k)))
    a, b = state.copy(), state.copy()
    if task == "als":
        settings = ALSSettings(n_iter=4, loss="squared", loss_code=SQUARED, reg_bias=0.1,
                               reg_linear=np.array([0.5, 0.2, 1.0]),
                               reg_pairwise=np.array([0.3, 0.4, 0.2]), groups=groups,
                               refresh_every=3)
        relation_als_solver(rel, a, settings)
        als_solver(flat, b, settings)
    else:
        settings = MCMCSettings(n_iter=6, probit=task == "probit", n_burn_in=2, n_kept=10,
                                relax=-0.5, groups=groups, refresh_every=4)
        ca, cb = Chain.start(k, 3), Chain.start(k, 3)
        relation_mcmc_solver(rel, a, ca, settings, 11)
        mcmc_solver(flat, b, cb, settings, 11)
        assert ca.alpha == pytest.approx(cb.alpha, rel=TOL)
        np.testing.assert_allclose(ca.lambda_v, cb.lambda_v, rtol=TOL)
        np.testing.assert_allclose(ca.samples[2][:ca.n_samples], cb.samples[2][:cb.n_samples],
                                   rtol=TOL, atol=TOL)
    assert a.w0 == pytest.approx(b.w0, rel=TOL, abs=TOL)
    np.testing.assert_allclose(a.w, b.w, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(a.V, b.V, rtol=TOL, atol=TOL)


def test_logistic_als_on_blocks_never_increases_the_objective():
    # The block passes of the logistic loss are majorization steps (curvature bound 1/4):
    # the penalised logistic objective of the expanded rows never goes up.
    rng, Xr, y, sw = _case(4, n=120)
    Xr, blocks = _parts(Xr)
    X = Xr.to_csr()
    y = np.where(X @ rng.normal(size=X.shape[1]) > 0, 1.0, -1.0)
    rel = relation_column_data(Xr.X, blocks, y, sw)
    settings = ALSSettings(1, "logistic", LOGISTIC, 0.01, 0.1, 0.1)
    d, k = X.shape[1], 2
    state = FMState(0.0, 0.1 * rng.normal(size=d), 0.1 * rng.normal(size=(d, k)))

    def objective():
        p = ref.fm_predict(X, state.w0, state.w, state.V)
        return (np.sum(sw * np.logaddexp(0.0, -y * p)) + 0.5 * 0.01 * state.w0 ** 2
                + 0.5 * 0.1 * (np.sum(state.w ** 2) + np.sum(state.V ** 2)))

    values = [objective()]
    for _ in range(12):
        relation_als_solver(rel, state, settings)
        values.append(objective())
    assert np.all(np.diff(values) <= 1e-10 * abs(values[0]))
    assert values[-1] < 0.8 * values[0]


@pytest.mark.parametrize("solver", ["mcmc", "als"])
def test_fit_on_relation_data_equals_fit_on_expanded_matrix(solver, monkeypatch):
    # Without the colouring (as on data whose co-occurrence graph is over budget, e.g.
    # MovieLens with implicit features) both sweeps visit the features in index order: the
    # estimators' fits agree up to rounding, whatever the order of the merged rows.
    monkeypatch.setattr(fm_common, "COLORING_BUDGET", -1)
    _, Xr, y, sw = _case(5, n=80)
    kw = dict(n_factors=3, solver=solver, n_iter=8, random_state=0, reg_linear=0.2,
              reg_pairwise=0.2) if solver == "als" else dict(n_factors=3, n_iter=8,
                                                               random_state=0)
    a = FMRegressor(**kw).fit(Xr, y, sample_weight=sw)
    b = FMRegressor(**kw).fit(Xr.to_csr(), y, sample_weight=sw)
    np.testing.assert_allclose(a.V_, b.V_, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(a.predict(Xr), b.predict(Xr.to_csr()), rtol=TOL, atol=TOL)
    # either form predicts with either model
    np.testing.assert_allclose(a.predict(Xr.to_csr()), a.predict(Xr), rtol=1e-12, atol=1e-12)
    assert a.relation_features_ == [3, 5, 4] and not hasattr(b, "relation_features_")


def test_sgd_runs_on_the_expanded_rows():
    _, Xr, y, _ = _case(6)
    kw = dict(n_factors=2, solver="sgd", n_iter=3, random_state=0)
    a = FMRegressor(**kw).fit(Xr, y)
    b = FMRegressor(**kw).fit(Xr.to_csr(), y)
    np.testing.assert_array_equal(a.V_, b.V_)
    c = FMRegressor(**kw).partial_fit(Xr, y)
    np.testing.assert_array_equal(c.V_, FMRegressor(**kw).partial_fit(Xr.to_csr(), y).V_)


def test_merged_rows_are_order_invariant_and_keep_the_weights():
    rng, Xr, y, sw = _case(7, n=40)
    Xr, _ = _parts(Xr)
    dup = np.r_[np.arange(40), [3, 3, 17]]
    Xd, yd, swd = Xr[dup], y[dup], sw[dup]
    a = merge_relation_rows(check_relation_data(Xd), yd, swd)
    perm = rng.permutation(dup.shape[0])
    b = merge_relation_rows(check_relation_data(Xd[perm]), yd[perm], swd[perm])
    assert a[0].shape[0] == 40
    np.testing.assert_array_equal(a[0].to_csr().toarray(), b[0].to_csr().toarray())
    np.testing.assert_allclose(a[2], b[2])
    assert a[2].sum() == pytest.approx(swd.sum())
    # the merged rows are the distinct expanded rows, each with its summed weight
    rows = {tuple(r) + (t,): 0.0 for r, t in zip(Xd.to_csr().toarray(), yd, strict=True)}
    for r, t, w in zip(Xd.to_csr().toarray(), yd, swd, strict=True):
        rows[tuple(r) + (t,)] += w
    got = {tuple(r) + (t,): w for r, t, w in zip(a[0].to_csr().toarray(), a[1], a[2],
                                                  strict=True)}
    assert got.keys() == rows.keys()
    for key, w in rows.items():
        assert got[key] == pytest.approx(w)
    # grouped by block 0, within it by the first row-level feature (-1: none)
    Xm = a[0].X
    lead = np.where(np.diff(Xm.indptr) > 0, Xm.indices[np.minimum(Xm.indptr[:-1],
                                                                  max(Xm.nnz - 1, 0))], -1)
    key = a[0].blocks[0].indices.astype(np.int64) * (Xm.shape[1] + 1) + lead + 1
    assert np.all(np.diff(key) >= 0)


def test_threads_do_not_change_the_chain(monkeypatch):
    # row-level one-hot fields whose colour classes are forced into blocks gathered in
    # parallel (kernels.cd); the block passes are serial: the same chain on one thread or two
    from fmlearn.kernels.cd import _parallel_flag

    monkeypatch.setattr(fm_common, "BLOCKED_MIN_ROWS", 0)
    monkeypatch.setattr(fm_common, "MIN_PARALLEL_NNZ", 0)
    monkeypatch.setattr(fm_common, "BLOCK_ALIGN", 1)
    rng, Xr, y, _ = _case(8, n=200)
    n = Xr.shape[0]
    onehot = sp.csr_matrix((np.ones(2 * n), np.column_stack(
        [rng.integers(0, 10, n), 10 + rng.integers(0, 8, n)]).ravel(), np.arange(0, 2 * n + 1, 2)),
        shape=(n, 18))
    Xr = RelationData(onehot, Xr.blocks)
    parts, blocks = _parts(Xr)
    assert _parallel_flag(relation_column_data(parts.X, blocks, y, np.ones(n)).plan)
    a = FMRegressor(3, n_iter=6, random_state=0, n_jobs=1).fit(Xr, y)
    b = FMRegressor(3, n_iter=6, random_state=0, n_jobs=2).fit(Xr, y)
    np.testing.assert_array_equal(a.V_, b.V_)
    np.testing.assert_array_equal(a.predict(Xr), b.predict(Xr))


# -- the estimators ----------------------------------------------------------------------------

def test_warm_start_five_plus_five_equals_ten():
    _, Xr, y, _ = _case(9)
    ten = FMRegressor(2, n_iter=10, n_burn_in=2, random_state=0).fit(Xr, y)
    five = FMRegressor(2, n_iter=5, n_burn_in=2, random_state=0, warm_start=True).fit(Xr, y)
    five.fit(Xr, y)
    np.testing.assert_allclose(five.V_, ten.V_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(five.predict(Xr), ten.predict(Xr), rtol=1e-12, atol=1e-12)


def test_classifier_eval_set_save_and_load(tmp_path):
    import fmlearn

    rng, Xr, y, _ = _case(10, n=150)
    X = Xr.to_csr()
    labels = np.where(X @ rng.normal(size=X.shape[1]) > 0, "yes", "no")
    clf = FMClassifier(2, n_iter=20, random_state=0).fit(Xr, labels,
                                                         eval_set=(Xr[:30], labels[:30]))
    assert (clf.predict(Xr) == labels).mean() > 0.8
    np.testing.assert_allclose(clf.predict_proba(Xr), clf.predict_proba(X), rtol=1e-10)
    assert len(clf.history_["val"]) == 20
    path = clf.save(tmp_path / "rel.fmz")
    loaded = fmlearn.load(path)
    assert loaded.relation_features_ == clf.relation_features_
    np.testing.assert_array_equal(loaded.predict_proba(Xr), clf.predict_proba(Xr))


def test_eval_history_equals_the_flat_eval(monkeypatch):
    _, Xr, y, _ = _case(11)
    m = FMRegressor(2, solver="als", n_iter=4, random_state=0, reg_linear=0.1,
                    reg_pairwise=0.1).fit(Xr, y, eval_set=(Xr, y))
    np.testing.assert_allclose(m.history_["val"], m.history_["train"], rtol=1e-10)


def test_scikit_learn_indexing_and_cross_validation():
    from sklearn.model_selection import cross_val_score, train_test_split

    _, Xr, y, _ = _case(12, n=90)
    Xa, Xb, ya, yb = train_test_split(Xr, y, random_state=0)
    assert isinstance(Xa, RelationData) and Xa.shape == (67, Xr.shape[1])
    scores = cross_val_score(FMRegressor(2, solver="als", n_iter=3, random_state=0), Xr, y,
                             cv=3, scoring="neg_root_mean_squared_error")
    assert scores.shape == (3,) and np.all(np.isfinite(scores))


def test_block_groups_give_libfm_default_grouping():
    _, Xr, _, _ = _case(13)
    g = Xr.block_groups()
    assert g.tolist() == [0] * 3 + [1] * 5 + [2] * 4
    g = Xr.block_groups(row_groups=[0, 1, 1])
    assert g.tolist() == [0, 1, 1] + [2] * 5 + [3] * 4


# -- bad input -------------------------------------------------------------------------------

def test_block_index_out_of_range_is_refused_by_name():
    with pytest.raises(ValueError, match="sample 2 has block index 5, outside"):
        RelationBlock([0, 1, 5], np.eye(3))
    with pytest.raises(ValueError, match="sample 0 has block index -1"):
        RelationBlock([-1, 1, 2], np.eye(3))
    with pytest.raises(ValueError, match="block 1 has 2 indices but X has 3"):
        RelationData(np.ones((3, 1)), [RelationBlock([0, 1, 1], np.eye(2)),
                                       RelationBlock([0, 1], np.eye(2))])
    with pytest.raises(ValueError, match="integers"):
        RelationBlock([0.5, 1.0], np.eye(2))


def test_a_failed_call_changes_nothing():
    from sklearn.base import clone

    _, Xr, y, _ = _case(14)
    m = FMRegressor(2, n_iter=4, random_state=0).fit(Xr, y)
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(m).items()}
    pred = m.predict(Xr)
    # an index changed in place after the object was made: caught before any kernel
    kept = Xr.blocks[0].indices[4]
    Xr.blocks[0].indices[4] = 10**6
    with pytest.raises(ValueError, match="block 0: sample 4 has block index 1000000"):
        m.fit(Xr, y)
    with pytest.raises(ValueError, match="block 0: sample 4"):
        m.predict(Xr)
    Xr.blocks[0].indices[4] = kept
    # blocks of other widths (same total) at predict time, and NaN in a block at fit time
    wrong = RelationData(sp.hstack([Xr.X, sp.csr_matrix((Xr.shape[0], 1))]).tocsr(),
                         [RelationBlock(Xr.blocks[0].indices, Xr.blocks[0].X[:, :4]),
                          Xr.blocks[1]])
    assert wrong.shape == Xr.shape
    with pytest.raises(ValueError, match=r"model was fitted on \(3 row-level features, "
                                         r"block 0: 5 features"):
        m.predict(wrong)
    m.set_params(warm_start=True)  # a warm start would continue from shifted features
    with pytest.raises(ValueError, match=r"warm_start=True continues .* \[3, 5, 4\]; X has "
                                         r"\[4, 4, 4\]"):
        m.fit(wrong, y)
    m.set_params(warm_start=False)
    bad = Xr.blocks[1].X.copy()
    bad.data[0] = np.nan
    with pytest.raises(ValueError, match="block 1 X contains NaN"):
        m.fit(RelationData(Xr.X, [Xr.blocks[0], RelationBlock(Xr.blocks[1].indices, bad)]), y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        m.fit(Xr, y[:-1])
    with pytest.raises(ValueError, match="relational data"):
        m.fit(Xr, y[:2], contrasts=sp.identity(Xr.shape[0], format="csr")[:2])
    for name, value in before.items():
        now = getattr(m, name)
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(now, value)
        else:
            assert now == value or name == "history_"
    np.testing.assert_array_equal(m.predict(Xr), pred)
    # a model of a matrix predicts relational data of its total width only
    flat = clone(m).fit(Xr.to_csr(), y)
    with pytest.raises(ValueError, match="expecting 12 features"):
        flat.predict(RelationData(Xr.X, [Xr.blocks[0]]))


def test_model_file_with_inconsistent_layout_is_refused(tmp_path):
    import json
    import zipfile

    import fmlearn
    from fmlearn.exceptions import ModelFileError
    from fmlearn.io import manifest_digest

    _, Xr, y, _ = _case(15)
    path = FMRegressor(2, solver="als", n_iter=2, random_state=0).fit(Xr, y).save(
        tmp_path / "m.fmz")
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    meta = json.loads(members["fmlearn.json"])
    meta["attributes"]["relation_features_"] = [3, 5, 5]
    meta["digest"] = manifest_digest(meta)
    members["fmlearn.json"] = json.dumps(meta).encode()
    bad = tmp_path / "bad.fmz"
    with zipfile.ZipFile(bad, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    with pytest.raises(ModelFileError, match="relation_features_"):
        fmlearn.load(bad)


def test_recommend_takes_relational_rows():
    from fmlearn import embed_rows, recommend

    _, Xr, y, _ = _case(16, n=80)
    m = FMRegressor(2, solver="als", n_iter=3, random_state=0, reg_linear=0.1,
                    reg_pairwise=0.1).fit(Xr, y)
    users, items = Xr[:5], Xr[5:12]
    a = recommend(m, users, items, k=3)
    b = recommend(m, users.to_csr(), items.to_csr(), k=3)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(embed_rows(m, users).part, embed_rows(m, users.to_csr()).part)



def test_relational_fit_stops_early_on_an_eval_set_and_on_a_callback():
    """Early stopping and stopping callbacks act on the relational sweeps as on the flat ones:
    the kept model is the best iteration's (its validation loss is the recorded minimum), a
    callback returning True ends the fit after that sweep, and carving validation rows out of
    relation blocks is refused by name, changing nothing."""
    _, Xr, y, _ = _case(12, n=200)
    Xv, yv = Xr[:40], y[:40] + 0.5  # a shifted validation target: the loss turns up early
    m = FMRegressor(2, solver="als", n_iter=60, random_state=0, reg_linear=0.1,
                    reg_pairwise=0.1, early_stopping=True, n_iter_no_change=3, tol=0.0)
    m.fit(Xr, y, eval_set=(Xv, yv))
    losses = m.history_["val_loss"]
    best = int(np.argmin(losses))
    assert m.best_iteration_ == best + 1 and m.n_iter_ <= best + 4
    kept = np.mean((m.predict(Xv) - yv) ** 2)
    np.testing.assert_allclose(kept, losses[best], rtol=1e-9)

    stopped = FMRegressor(2, n_iter=30, n_burn_in=2, random_state=0).fit(
        Xr, y, callback=lambda i, h: i == 3)
    four = FMRegressor(2, n_iter=4, n_burn_in=2, random_state=0).fit(Xr, y)
    assert stopped.n_iter_ == 4
    np.testing.assert_allclose(stopped.predict(Xr), four.predict(Xr), rtol=1e-12)

    carve = FMRegressor(2, solver="als", n_iter=5, early_stopping=True)
    with pytest.raises(ValueError, match="explicit eval_set"):
        carve.fit(Xr, y)
    assert not hasattr(carve, "V_")


def test_relation_summary_equals_the_expanded_rows_summary():
    # init_stdev="auto" reads the rows' pair weights sum_{j<l} x_j^2 x_l^2: computed per block
    # row, they equal those of the expanded matrix, so both fits start alike
    from fmlearn._plan import pair_stats
    from fmlearn.relation import relation_pair_stats

    _, Xr, y, sw = _case(values="normal")
    X = Xr.to_csr()
    assert relation_pair_stats(Xr, sw) == pytest.approx(pair_stats(X.indptr, X.data, sw),
                                                        rel=1e-12)
    a = FMRegressor(2, solver="als", n_iter=1, random_state=0).fit(Xr, y, sample_weight=sw)
    b = FMRegressor(2, solver="als", n_iter=1, random_state=0).fit(X, y, sample_weight=sw)
    assert a.init_stdev_ == pytest.approx(b.init_stdev_, rel=1e-12)
