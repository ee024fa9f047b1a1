"""Classic FM: kernels against slow oracles, solver properties, estimator behaviour, bad input."""

import subprocess
import sys

import numba
import numpy as np
import pytest
import scipy.sparse as sp

import reference as ref
from fmlearn import FMClassifier, FMRegressor
from fmlearn._data import merge_duplicate_rows, raw, to_csr
from fmlearn.datasets import make_fm
from fmlearn.exceptions import DivergenceError
from fmlearn.kernels.cd import Config, Model, Prior, coordinate_sweep, draw_group_hyper
from fmlearn.kernels.predict import fm_predict_csr, fm_predict_dense
from fmlearn.kernels.sgd import Params, Rows, SGDConfig, row_facts, sgd_epoch, sgd_work
from fmlearn.losses import LOGISTIC, SQUARED
from fmlearn.solvers import _fm_common as fm_common
from fmlearn.solvers._fm_common import FMState, column_data, group_index
from fmlearn.solvers.als import ALSSettings, als_solver, objective
from fmlearn.solvers.mcmc import draw_latent


def _random_model(d, k, rng, dtype=np.float64):
    return (float(rng.normal()), rng.normal(size=d).astype(dtype),
            (0.5 * rng.normal(size=(d, k))).astype(dtype))


def _sparse_X(n, d, density, rng, dtype=np.float64):
    X = sp.random(n, d, density=density, random_state=rng, format="csr", dtype=dtype)
    X.data = rng.normal(size=X.nnz).astype(dtype)
    return X


# -- kernels against oracles ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_predict_kernels_match_pairwise_oracle(dtype):
    rng = np.random.default_rng(0)
    X = _sparse_X(40, 12, 0.3, rng, dtype).toarray()
    X[3] = 0  # an empty row predicts w0
    X = to_csr(sp.csr_matrix(X))
    w0, w, V = _random_model(12, 3, rng, dtype)
    expected = ref.fm_predict(X, w0, w, V)
    out = np.empty(40)
    fm_predict_csr(*raw(X), w0, w, V, out)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)
    assert out[3] == pytest.approx(w0)
    dense = np.ascontiguousarray(X.toarray())
    np.testing.assert_allclose(fm_predict_dense(dense, w0, w, V, np.empty(40)), expected,
                               rtol=tol, atol=tol)


def test_parallel_csr_prediction_equals_serial_and_oracle():
    # at least PARALLEL_MIN_ROWS rows take the chunked parallel loop
    import numba

    from fmlearn.kernels.predict import PARALLEL_MIN_ROWS

    rng = np.random.default_rng(5)
    n, d = PARALLEL_MIN_ROWS + 777, 50
    X = to_csr(sp.random(n, d, density=0.06, format="csr", random_state=5))
    w0, w, V = _random_model(d, 4, rng)
    outs = []
    old = numba.get_num_threads()
    try:
        for t in (1, numba.config.NUMBA_NUM_THREADS):
            numba.set_num_threads(t)
            outs.append(fm_predict_csr(*raw(X), w0, w, V, np.empty(n)))
    finally:
        numba.set_num_threads(old)
    np.testing.assert_array_equal(outs[0], outs[1])
    rows = rng.choice(n, 300, replace=False)
    np.testing.assert_allclose(outs[1][rows], ref.fm_predict(X[rows], w0, w, V), rtol=1e-12,
                               atol=1e-12)


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    x = rng.normal(size=7)
    w0, w, V = _random_model(7, 3, rng)
    _, gw, gV = ref.fm_gradient(x, w0, w, V)
    eps = 1e-6
    f = lambda w_, V_: ref.fm_predict(x[None, :], w0, w_, V_)[0]  # noqa: E731
    for j in range(7):
        e = np.zeros(7)
        e[j] = eps
        assert (f(w + e, V) - f(w - e, V)) / (2 * eps) == pytest.approx(gw[j], rel=1e-6)
        for c in range(3):
            E = np.zeros_like(V)
            E[j, c] = eps
            assert (f(w, V + E) - f(w, V - E)) / (2 * eps) == pytest.approx(gV[j, c], rel=1e-5,
                                                                            abs=1e-8)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("implicit", [True, False])
@pytest.mark.parametrize("values", ["real", "signs"])
def test_sgd_epoch_matches_oracle(loss, implicit, values):
    # "signs": every x_j is +-1, the implicit step's shortcut for binary rows
    rng = np.random.default_rng(2)
    n, d, k = 30, 8, 3
    X = to_csr(_sparse_X(n, d, 0.4, rng))
    if values == "signs":
        X.data = np.sign(X.data)
    y = rng.normal(size=n) if loss == "squared" else np.sign(rng.normal(size=n))
    sw = rng.choice([0.0, 0.5, 1.0, 2.5], size=n)
    order = rng.permutation(n).astype(np.int64)
    w0, w, V = _random_model(d, k, rng)
    reg = (0.01, 0.02, 0.03)
    clip = (-1.5, 1.5)
    ew0, ew, eV = ref.sgd_epoch(X, y, sw, order, w0, w, V, 0.05, reg, loss, clip, implicit)
    p0 = np.array([w0])
    w_, V_ = w.copy(), V.copy()
    code = SQUARED if loss == "squared" else LOGISTIC
    # binary=False (general norm) is right for any rows; binary=True only for +-1 values
    for binary in {False, values == "signs"}:
        p0 = np.array([w0])
        w_, V_ = w.copy(), V.copy()
        cfg = SGDConfig(code, 0.05, 0, 0.5, *reg, clip[0], clip[1], 1e12, implicit, binary)
        work = sgd_work(k, n)
        t, bad = sgd_epoch(Rows(*raw(X), y, sw), Params(w_, V_, p0), order, 1, 0, cfg, work)
        assert bad == -1
        assert t == int(sum(max(1, np.ceil(s)) for s in sw if s > 0))
        np.testing.assert_allclose(p0[0], ew0, rtol=1e-10)
        np.testing.assert_allclose(w_, ew, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(V_, eV, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n", [256, 700])
def test_sgd_epoch_blocks_and_unit_weights_match_oracle(n):
    # order lists blocks of `block` rows (the last one short when block does not divide n);
    # unit_weights skips the weight of every row, which must then be 1
    rng = np.random.default_rng(5)
    d, k, block = 40, 3, 64
    X = to_csr(_sparse_X(n, d, 0.1, rng))
    X.data = np.sign(X.data)
    y = rng.normal(size=n)
    sw = np.ones(n)
    assert row_facts(X.data, sw) == (True, True)
    assert row_facts(X.data * 2, sw * 2) == (False, False)
    blocks = rng.permutation(-(-n // block)).astype(np.int64)
    rows_order = np.concatenate([np.arange(b * block, min(n, (b + 1) * block)) for b in blocks])
    w0, w, V = _random_model(d, k, rng)
    reg = (0.01, 0.02, 0.03)
    ew0, ew, eV = ref.sgd_epoch(X, y, sw, rows_order, w0, w, V, 0.05, reg)
    cfg = SGDConfig(SQUARED, 0.05, 0, 0.5, *reg, -np.inf, np.inf, 1e12, True, True, True)
    p0, w_, V_ = np.array([w0]), w.copy(), V.copy()
    t, bad = sgd_epoch(Rows(*raw(X), y, sw), Params(w_, V_, p0), blocks, block, 0, cfg,
                       sgd_work(k))
    assert (t, bad) == (n, -1)
    np.testing.assert_allclose(p0[0], ew0, rtol=1e-10)
    np.testing.assert_allclose(w_, ew, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(V_, eV, rtol=1e-10, atol=1e-12)


def test_sgd_prequential_predictions_and_one_row_calls():
    # The kernel's optional output holds each row's prediction before its update (what an
    # online learner's prequential evaluation needs), and one-row calls equal the epoch.
    rng = np.random.default_rng(13)
    n, d, k = 25, 7, 3
    X = to_csr(_sparse_X(n, d, 0.4, rng))
    y = rng.normal(size=n)
    sw = rng.choice([0.0, 1.0, 2.0], size=n)
    order = rng.permutation(n).astype(np.int64)
    w0, w, V = _random_model(d, k, rng)
    reg = (0.01, 0.02, 0.03)
    cfg = SGDConfig(SQUARED, 0.05, 0, 0.5, *reg, -np.inf, np.inf, 1e12, True)
    rows = Rows(*raw(X), y, sw)
    whole = Params(w.copy(), V.copy(), np.array([w0]))
    work = sgd_work(k, n)
    t_whole, _ = sgd_epoch(rows, whole, order, 1, 0, cfg, work)
    for r in range(n):
        ew0, ew, eV = ref.sgd_epoch(X, y, sw, order[:r], w0, w, V, 0.05, reg)
        expected = ref.fm_predict(X[order[r]], ew0, ew, eV)[0]
        assert work.pred[r] == pytest.approx(expected, rel=1e-10, abs=1e-12)
    single = Params(w.copy(), V.copy(), np.array([w0]))
    one = sgd_work(k, 1)
    t = 0
    for r in range(n):
        t, bad = sgd_epoch(rows, single, order[r:r + 1], 1, t, cfg, one)
        assert bad == -1 and one.pred[0] == work.pred[r]
    assert t == t_whole
    np.testing.assert_array_equal(single.V, whole.V)
    assert single.scal[0] == whole.scal[0]


def _onehot_X(n, sizes, rng):
    # one active feature per field, like users x items (the colouring gives one class per field)
    cols = np.column_stack([rng.integers(0, m, size=n) + off
                            for m, off in zip(sizes, np.cumsum([0, *sizes[:-1]]), strict=True)])
    X = sp.csr_matrix((np.ones(cols.size), cols.ravel(), np.arange(0, cols.size + 1, len(sizes))),
                      shape=(n, sum(sizes)))
    return to_csr(X)


def force_blocks(monkeypatch):
    """Make every colour class of a small problem blocked (kernels.cd: partial sums of blocks
    of rows added in block order, blocks in parallel; used on large data)."""
    monkeypatch.setattr(fm_common, "BLOCKED_MIN_ROWS", 0)
    monkeypatch.setattr(fm_common, "MIN_PARALLEL_NNZ", 0)
    monkeypatch.setattr(fm_common, "BLOCK_ALIGN", 1)


def _sweep_case(monkeypatch, layout, seed, shape, density, field_sizes, max_weight):
    """A coordinate sweep's test problem: rng, X, y and weights in [0.5, max_weight] (all 1
    when ``max_weight`` is 1). X is "sparse" (classes of real values, a row index per entry)
    or "onehot" over fields of ``field_sizes`` features (classes with one entry of value 1 in
    every row, gathered in blocks: used on large data, here forced on)."""
    if layout == "onehot":
        force_blocks(monkeypatch)
    rng = np.random.default_rng(seed)
    n, d = shape
    if layout == "sparse":
        X = to_csr(_sparse_X(n, d, density, rng))
    else:
        X = _onehot_X(n, field_sizes, rng)
    y = rng.normal(size=n)
    return rng, X, y, (np.ones(n) if max_weight == 1 else rng.uniform(0.5, max_weight, size=n))


@pytest.mark.parametrize("layout", ["sparse", "onehot"])
@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("max_weight", [1.0, 2.0])
def test_als_sweep_matches_exact_coordinate_minimizer(layout, grouped, max_weight, monkeypatch):
    # "onehot" takes the blocked sweep of classes with a 1 in every row (kernels.cd, used on
    # large one-hot data, here forced on small data), "sparse" the serial sweep of classes of
    # real values; unit weights take the kernels' squared-loss fast paths; "grouped" gives
    # three groups of features their own penalties.
    n, d, k = 40, 9, 2
    rng, X, y, sw = _sweep_case(monkeypatch, layout, 3, (n, d), 0.35, [4, 5], max_weight)
    w0, w, V = _random_model(d, k, rng)
    reg, groups, oracle_reg = (0.1, 0.2, 0.3), None, (0.1, 0.2, 0.3)
    if grouped:
        group = np.array([0, 2, 1, 0, 2, 1, 1, 0, 2])
        r1, r2 = np.array([0.1, 2.0, 0.5]), np.array([1.0, 0.05, 3.0])
        reg, groups, oracle_reg = (0.3, r1, r2), group_index(group, d), (0.3, r1[group],
                                                                          r2[group])
    data = column_data(X, y, sw)
    assert data.blocked.any() == (layout == "onehot")
    state = FMState(w0, w.copy(), V.copy())
    als_solver(data, state, ALSSettings(1, "squared", SQUARED, *reg, groups))
    ew0, ew, eV = ref.als_sweep(X, y, sw, data.order, w0, w, V, oracle_reg)
    assert state.w0 == pytest.approx(ew0, rel=1e-9)
    np.testing.assert_allclose(state.w, ew, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(state.V, eV, rtol=1e-7, atol=1e-9)


def test_als_coordinate_update_zeroes_its_partial_derivative():
    # After a sweep, the last coordinate updated is at the minimum of its 1-D objective.
    rng = np.random.default_rng(4)
    X = to_csr(_sparse_X(50, 6, 0.5, rng))
    y = rng.normal(size=50)
    sw = np.ones(50)
    reg = (0.0, 0.5, 0.5)
    data = column_data(X, y, sw)
    state = FMState(*_random_model(6, 2, rng))
    als_solver(data, state, ALSSettings(1, "squared", SQUARED, *reg))
    j, f = data.order[-1], 1
    eps = 1e-5

    def obj(t):
        V = state.V.copy()
        V[j, f] = t
        return ref.squared_objective(X, y, sw, state.w0, state.w, V, reg)

    t0 = state.V[j, f]
    assert abs(obj(t0 + eps) - obj(t0 - eps)) / (2 * eps) < 1e-6
    assert obj(t0) <= min(obj(t0 + 1e-3), obj(t0 - 1e-3))


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_als_objective_never_increases(loss):
    rng = np.random.default_rng(5)
    X, y, _ = make_fm(300, 15, 3, x="sparse", density=0.3, noise=0.3,
                task="regression" if loss == "squared" else "classification", random_state=0)
    X = to_csr(X)
    data = column_data(X, y, np.ones(300))
    code = SQUARED if loss == "squared" else LOGISTIC
    settings = ALSSettings(1, loss, code, 0.01, 0.1, 0.1)
    state = FMState(*_random_model(15, 3, rng))
    values = [objective(data, state, settings)]
    for _ in range(15):
        als_solver(data, state, settings)
        values.append(objective(data, state, settings))
    assert np.all(np.diff(values) <= 1e-9 * abs(values[0]))
    assert values[-1] < 0.8 * values[0]


@pytest.mark.parametrize("layout", ["sparse", "onehot"])
@pytest.mark.parametrize("n_groups", [1, 2])
@pytest.mark.parametrize("relax", [0.0, -0.9])
def test_mcmc_sweep_draws_from_the_gaussian_full_conditionals(layout, n_groups, relax,
                                                               monkeypatch):
    # With given hyper-parameters and noise, a sweep must set each coordinate to
    # mean + noise / sqrt(precision) of its full conditional, computed here from the
    # quadratic log-posterior along that coordinate (evaluated on the full model); with two
    # groups each feature uses its group's (lambda, mu). Over-relaxed (relax = a):
    # mean + a (old - mean) + sqrt(1 - a^2) noise / sqrt(precision).
    n, d, k = 30, 5, 2
    rng, X, y, sw = _sweep_case(monkeypatch, layout, 6, (n, d), 0.5, [2, 3], 1.5)
    data = column_data(X, y, sw)
    w0, w, V = _random_model(d, k, rng)
    group = np.array([0, 1, 1, 0, 1]) if n_groups == 2 else np.zeros(d, dtype=np.int64)
    group, size = group_index(group, d)
    alpha, reg0 = 2.0, 0.4
    lam_w, mu_w = np.array([3.0, 0.5])[:n_groups], np.array([0.1, -0.4])[:n_groups]
    lam_v = np.array([[1.5, 0.6], [0.7, 2.0]])[:, :n_groups]
    mu_v = np.array([[-0.2, 0.5], [0.3, -0.1]])[:, :n_groups]
    z = rng.normal(size=1 + n_groups + d + k * (n_groups + d))
    state = FMState(w0, w.copy(), V.copy())
    E = data.row_state(state, y)
    prior = Prior(group, size, lam_w.copy(), mu_w.copy(), lam_v.copy(), mu_v.copy())
    model = Model(state.w, state.V, np.array([w0, alpha]))
    cfg = Config(SQUARED, 1.0, True, False, False, reg0, 1.0, 1.0, 1.0, 0.0, relax)
    assert coordinate_sweep(data.cols, data.plan, prior, model, E, z, np.zeros(0), cfg)
    # oracle, in the same visiting order
    ew, eV = w.copy(), V.copy()
    ew0 = [w0]

    def neg_log_post(lam, mu, t):
        p = ref.fm_predict(X, ew0[0], ew, eV)
        return 0.5 * alpha * np.sum(sw * (p - y) ** 2) + 0.5 * lam * (t - mu) ** 2

    def draw(get, put, lam, mu, noise):
        t0 = get()
        vals = []
        for t in (t0 - 1.0, t0, t0 + 1.0):
            put(t)
            vals.append(neg_log_post(lam, mu, t))
        a = 0.5 * (vals[0] + vals[2] - 2 * vals[1])
        b = 0.5 * (vals[2] - vals[0])
        mean = t0 - b / (2 * a)
        put(mean + relax * (t0 - mean) + np.sqrt(1 - relax ** 2) * noise / np.sqrt(2 * a))

    draw(lambda: ew0[0], lambda t: ew0.__setitem__(0, t), reg0, 0.0, z[0])
    zw = 1 + n_groups
    for j in data.order:
        draw(lambda j=j: ew[j], lambda t, j=j: ew.__setitem__(j, t), lam_w[group[j]],
             mu_w[group[j]], z[zw + j])
    for f in range(k):
        zf = zw + d + k * n_groups + f * d
        for j in data.order:
            draw(lambda j=j, f=f: eV[j, f], lambda t, j=j, f=f: eV.__setitem__((j, f), t),
                 lam_v[f, group[j]], mu_v[f, group[j]], z[zf + j])
    assert model.scal[0] == pytest.approx(ew0[0], rel=1e-9)
    np.testing.assert_allclose(state.w, ew, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(state.V, eV, rtol=1e-7, atol=1e-9)
    # the row cache leaves the sweep exact: residuals and the last factor's sums
    np.testing.assert_allclose(E[:, 0], ref.fm_predict(X, ew0[0], ew, eV) - y, atol=1e-9)
    np.testing.assert_allclose(E[:, 1 + (k - 1) % 2], X @ eV[:, k - 1], atol=1e-9)


def test_overrelaxed_chain_samples_the_same_posterior():
    # Over-relaxation changes how the chain moves, not what it samples: on a Bayesian linear
    # regression (k = 0, hyper-priors drawn as usual) the posterior mean and spread of every w_j
    # agree between the plain Gibbs chain and the over-relaxed one. Without the
    # sqrt(1 - a^2) factor on the noise the over-relaxed spread would be 1 / sqrt(1 - a^2) =
    # 2.3x too wide; without the a (old - m) term it would be the plain chain itself.
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 5))
    y = X @ np.array([1.0, -0.5, 0.25, 0.0, 2.0]) + 0.7 * rng.normal(size=200)
    kw = dict(n_factors=0, n_iter=3000, n_burn_in=100, n_kept_samples=3000, init_stdev=0.1,
              random_state=0)
    plain = FMRegressor(overrelaxation=0.0, **kw).fit(X, y).samples_w_
    relaxed = FMRegressor(overrelaxation=-0.9, **kw).fit(X, y).samples_w_
    sd = plain.std(0)  # about 0.7 / sqrt(200) = 0.05
    np.testing.assert_array_less(np.abs(relaxed.mean(0) - plain.mean(0)), 0.2 * sd)
    np.testing.assert_allclose(relaxed.std(0) / sd, 1.0, atol=0.12)
    # and the chains differ (the option is not ignored)
    assert np.abs(relaxed - plain).max() > 0.01


def test_grouped_hyper_prior_draw_matches_oracle():
    rng = np.random.default_rng(11)
    d, n_groups = 12, 3
    group, size = group_index(rng.integers(0, n_groups, size=d), d)
    theta = rng.normal(size=(d, 2))
    mu_prev = rng.normal(size=n_groups)
    g = rng.standard_gamma(0.5 * (1.0 + size + 1.0))
    z = rng.normal(size=n_groups)
    cfg = Config(SQUARED, 1.0, True, True, True, 0.0, 1.0, 1.0, 1.0, 0.0)
    lam, mu = np.empty(n_groups), mu_prev.copy()
    draw_group_hyper(theta[:, 1], group, size, lam, mu, g, z, cfg)
    elam, emu = ref.group_hyper_draw(theta[:, 1], group, n_groups, mu_prev, g, z)
    np.testing.assert_allclose(lam, elam, rtol=1e-12)
    np.testing.assert_allclose(mu, emu, rtol=1e-12)


def test_probit_latent_draws_are_truncated_normals():
    rng = np.random.default_rng(7)
    m = np.array([-3.0, -0.5, 0.0, 2.0, -45.0])
    for ysign in (1.0, -1.0):
        for mu in m:
            u = 1.0 - rng.random(20000)
            z = draw_latent(np.full(20000, mu), np.full(20000, ysign), u)
            assert np.all(ysign * z > 0)
            # E[Z | Z > 0] for Z ~ N(m, 1), m = ysign * mu: m + phi(m) / Phi(m)
            from scipy.stats import norm
            mm = ysign * mu
            expected = mm + np.exp(norm.logpdf(mm) - norm.logcdf(mm))
            assert np.mean(ysign * z) == pytest.approx(expected, rel=0.03, abs=0.02)


def test_merge_duplicate_rows_is_order_invariant_and_sums_weights():
    rng = np.random.default_rng(8)
    X = to_csr(sp.csr_matrix(np.array([[1.0, 0, 2], [0, 1, 0], [1, 0, 2], [0, 1, 0], [3, 0, 0]])))
    y = np.array([1.0, 2.0, 1.0, 5.0, 1.0])
    sw = np.array([1.0, 1.0, 2.0, 1.0, 0.0])
    Xm, ym, wm = merge_duplicate_rows(X, y, sw)
    assert Xm.shape[0] == 3 and sorted(wm.tolist()) == [1.0, 1.0, 3.0]
    perm = rng.permutation(5)
    Xp, yp, wp = merge_duplicate_rows(to_csr(X[perm]), y[perm], sw[perm])
    assert (Xp != Xm).nnz == 0 and np.array_equal(yp, ym) and np.array_equal(wp, wm)


# -- solver behaviour through the estimators ------------------------------------------------

@pytest.fixture(scope="module")
def planted():
    X, y, _ = make_fm(2400, 30, 3, x="sparse", density=0.15, noise=0.3, random_state=1)
    X = to_csr(X)
    return X[:1600], y[:1600], X[1600:], y[1600:]


def _rmse(m, X, y):
    return float(np.sqrt(np.mean((m.predict(X) - y) ** 2)))


def test_mcmc_beats_unregularized_als_on_held_out_data():
    # One-hot user x item data with few ratings per feature and a rank-8 model of a rank-3
    # truth: unregularized ALS overfits, MCMC's hyper-priors do not (measured: 0.48-0.54
    # against 1.45-1.76 over four seeds).
    X, y, _ = make_fm(2500, 200, 3, x="onehot", n_fields=2, noise=0.3, random_state=0)
    Xtr, ytr, Xte, yte = X[:1500], y[:1500], X[1500:], y[1500:]
    mcmc = FMRegressor(8, solver="mcmc", n_iter=100, random_state=0).fit(Xtr, ytr)
    als = FMRegressor(8, solver="als", n_iter=100, random_state=0).fit(Xtr, ytr)
    r_mcmc, r_als = _rmse(mcmc, Xte, yte), _rmse(als, Xte, yte)
    assert r_mcmc < 0.5 * r_als
    assert r_mcmc < 0.5 * np.std(yte)


@pytest.mark.parametrize("solver", ["sgd", "als", "mcmc"])
def test_recovers_planted_model_better_than_the_mean(planted, solver):
    Xtr, ytr, Xte, yte = planted
    kw = {"sgd": dict(learning_rate=0.02, reg_linear=0.01, reg_pairwise=0.01),
          "als": dict(reg_linear=1.0, reg_pairwise=2.0), "mcmc": {}}[solver]
    m = FMRegressor(3, solver=solver, n_iter=100, random_state=0, **kw).fit(Xtr, ytr)
    assert _rmse(m, Xte, yte) < 0.7 * np.std(yte)


@pytest.mark.parametrize("solver", ["sgd", "als", "mcmc"])
def test_sparse_equals_dense(planted, solver):
    Xtr, ytr, Xte, _ = planted
    Xtr, ytr = Xtr[:300], ytr[:300]
    a = FMRegressor(3, solver=solver, n_iter=10, random_state=0).fit(Xtr, ytr)
    b = FMRegressor(3, solver=solver, n_iter=10, random_state=0).fit(Xtr.toarray(), ytr)
    np.testing.assert_array_equal(a.predict(Xte), b.predict(Xte.toarray()))


@pytest.mark.parametrize("solver", ["sgd", "als", "mcmc"])
def test_float32_close_to_float64(planted, solver):
    Xtr, ytr, Xte, _ = planted
    # SGD's shuffled order is keyed by the rows' bits, which float32 rounding changes: compare
    # the same visiting order.
    kw = dict(solver=solver, n_iter=10, random_state=0, shuffle=solver != "sgd")
    a = FMRegressor(3, **kw).fit(Xtr, ytr)
    b = FMRegressor(3, **kw).fit(Xtr.astype(np.float32), ytr)
    assert b.V_.dtype == np.float32
    np.testing.assert_allclose(a.predict(Xte), b.predict(Xte.astype(np.float32)), rtol=1e-3,
                               atol=1e-3)


@pytest.mark.parametrize("solver", ["als", "mcmc"])
@pytest.mark.parametrize("layout,blocked", [("onehot", False), ("onehot", True),
                                            ("sparse", True)])
def test_thread_count_does_not_change_results(solver, layout, blocked, monkeypatch):
    # one-hot user x item data (classes with a 1 in every row) or sparse real values (classes
    # with a row index per entry); blocked: thresholds lowered so that this small problem
    # gathers its classes in parallel blocks (kernels.cd)
    if blocked:
        force_blocks(monkeypatch)
    X, y, _ = make_fm(3000, 60, 3, x=layout, n_fields=2, density=0.05, noise=0.2,
                      random_state=2)
    X = to_csr(X)
    data = column_data(X, y, np.ones(3000))
    assert len(data.color_ptr) > 2 and data.blocked.all() == blocked
    a = FMRegressor(3, solver=solver, n_iter=20, random_state=0, n_jobs=1).fit(X, y)
    c = FMRegressor(3, solver=solver, n_iter=20, random_state=0, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(a.V_, c.V_)
    np.testing.assert_array_equal(a.predict(X), c.predict(X))


@pytest.mark.parametrize("solver", ["sgd", "als", "mcmc"])
def test_solvers_compile_before_the_first_iteration(solver, monkeypatch):
    # history_["iter_time"][0] must not include compilation: each solver compiles (or loads)
    # its kernel specialisation, then calls on_start (where the estimator starts its clock),
    # then runs iterations with exactly that specialisation.
    import fmlearn.solvers._fm_common as cd_data  # ColumnData calls the sweep kernels
    import fmlearn.solvers.sgd as sgd_mod
    from fmlearn.kernels import cd

    events = []
    mod = sgd_mod if solver == "sgd" else cd_data
    if solver == "sgd":
        kernel = sgd_mod.sgd_epoch
        real_compile = sgd_mod.compile_for

        def spy_compile(_, *args):
            # The solver passes its module's sgd_epoch, i.e. spy_run below: compile the kernel.
            real_compile(kernel, *args)
            events.append(("compile", tuple(numba.typeof(a) for a in args)))

        def spy_run(*args):
            events.append(("run", tuple(numba.typeof(a) for a in args)))
            return kernel(*args)

        monkeypatch.setattr(sgd_mod, "compile_for", spy_compile)
        monkeypatch.setattr(sgd_mod, "sgd_epoch", spy_run)
    else:
        def flagged(args):
            return tuple(numba.typeof(a) for a in args) + (
                numba.typeof(cd._parallel_flag(args[1])),)

        def spy_compile(*args):
            cd.compile_sweep(*args)
            events.append(("compile", flagged(args)))

        def spy_run(*args):
            events.append(("run", flagged(args)))
            return cd.coordinate_sweep(*args)

        monkeypatch.setattr(mod, "compile_sweep", spy_compile)
        monkeypatch.setattr(mod, "coordinate_sweep", spy_run)
    X, y, _ = make_fm(300, 20, 3, x="onehot", n_fields=2, noise=0.2, random_state=1)
    est = FMRegressor(3, solver=solver, n_iter=3, random_state=0, n_jobs=1)
    # the fit's run context restarts its clock after every iteration too: the first restart
    # must come after the compilation and before the first iteration
    from fmlearn._plan import RunContext

    real_start = RunContext.start_clock

    def spy_start(ctx):
        events.append(("start", None))
        real_start(ctx)

    monkeypatch.setattr(RunContext, "start_clock", spy_start)
    est.fit(X, y)
    kinds = [e[0] for e in events if e[0] != "start" or events.index(e) == 1]
    assert [e[0] for e in events][:3] == ["compile", "start", "run"]
    assert kinds.count("compile") == 1 and kinds.count("run") == 3
    compiled = events[0][1]
    assert all(e[1] == compiled for e in events[2:] if e[0] == "run")
    target = kernel if solver == "sgd" else cd._coordinate_sweep
    assert compiled in target.overloads


def test_small_fit_compiles_no_parallel_kernel():
    # A fresh process: a one-thread MCMC fit + predict on small data never compiles (nor
    # loads) the parallel class sweeps or the parallel posterior-mean predictor.
    code = (
        "import numpy as np\n"
        "from fmlearn import FMRegressor\n"
        "from fmlearn.datasets import make_fm\n"
        "from fmlearn.kernels import cd, predict\n"
        "X, y, _ = make_fm(500, 30, 3, x='onehot', n_fields=2, random_state=0)\n"
        "FMRegressor(3, n_iter=3, random_state=0, n_jobs=1).fit(X, y).predict(X)\n"
        "print(len(cd._fused_parallel.signatures), len(predict._samples_blocks.signatures),\n"
        "      len(cd._coordinate_sweep.signatures))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["0", "0", "1"]


def test_sgd_fit_equals_partial_fit_on_batches(planted):
    Xtr, ytr, Xte, _ = planted
    kw = dict(solver="sgd", learning_rate=0.02, reg_pairwise=0.01, random_state=0)
    whole = FMRegressor(3, n_iter=1, shuffle=False, **kw).fit(Xtr, ytr)
    stream = FMRegressor(3, **kw)
    for start in range(0, Xtr.shape[0], 250):
        stream.partial_fit(Xtr[start:start + 250], ytr[start:start + 250])
    assert stream.t_ == whole.t_ == Xtr.shape[0]
    np.testing.assert_allclose(stream.predict(Xte), whole.predict(Xte), rtol=1e-12)


@pytest.mark.parametrize("solver", ["sgd", "als", "mcmc"])
def test_warm_start_five_plus_five_equals_ten(planted, solver):
    Xtr, ytr, Xte, _ = planted
    ten = FMRegressor(3, solver=solver, n_iter=10, random_state=0, n_burn_in=0).fit(Xtr, ytr)
    warm = FMRegressor(3, solver=solver, n_iter=5, random_state=0, n_burn_in=0, warm_start=True)
    warm.fit(Xtr, ytr).fit(Xtr, ytr)
    np.testing.assert_allclose(warm.V_, ten.V_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(warm.predict(Xte), ten.predict(Xte), rtol=1e-7, atol=1e-9)


def test_stronger_regularization_raises_train_error(planted):
    Xtr, ytr, _, _ = planted
    errs = [_rmse(FMRegressor(3, solver="als", n_iter=30, reg_linear=r, reg_pairwise=r,
                              random_state=0).fit(Xtr, ytr), Xtr, ytr) for r in (0.1, 10, 1000)]
    assert errs[0] < errs[1] < errs[2]


@pytest.mark.parametrize("solver", ["sgd", "als", "mcmc"])
def test_integer_weights_equal_repeated_rows(planted, solver):
    Xtr, ytr, Xte, _ = planted
    X, y = Xtr[:200], ytr[:200]
    w = np.random.default_rng(0).integers(0, 3, size=200)
    rep = np.repeat(np.arange(200), w)
    a = FMRegressor(3, solver=solver, n_iter=10, random_state=0).fit(X, y, sample_weight=w)
    b = FMRegressor(3, solver=solver, n_iter=10, random_state=0).fit(X[rep], y[rep])
    np.testing.assert_allclose(a.predict(Xte), b.predict(Xte), rtol=1e-9)


def test_regression_predictions_are_clipped_to_training_range(planted):
    Xtr, ytr, Xte, _ = planted
    m = FMRegressor(3, solver="als", n_iter=5, random_state=0).fit(Xtr, ytr)
    p = m.predict(Xte * 10)
    assert p.min() >= ytr.min() and p.max() <= ytr.max()
    raw_m = FMRegressor(3, solver="als", n_iter=5, random_state=0, clip_predictions=False)
    assert np.ptp(raw_m.fit(Xtr, ytr).predict(Xte * 10)) > np.ptp(ytr)


@pytest.mark.parametrize("solver", ["sgd", "als", "mcmc"])
def test_classifier_any_two_labels(solver):
    X, y, _ = make_fm(1500, 20, 3, x="sparse", density=0.2, noise=0.1, task="classification",
                random_state=3)
    labels = np.where(y > 0, "spam", "ham")
    clf = FMClassifier(3, solver=solver, n_iter=60, random_state=0, reg_linear=0.01,
                       reg_pairwise=0.01).fit(X[:1000], labels[:1000])
    assert list(clf.classes_) == ["ham", "spam"]
    proba = clf.predict_proba(X[1000:])
    assert proba.shape == (500, 2) and np.allclose(proba.sum(1), 1)
    assert np.mean(clf.predict(X[1000:]) == labels[1000:]) > 0.75
    assert np.array_equal(clf.predict(X[1000:]), clf.classes_[(proba[:, 1] > 0.5).astype(int)])


def test_history_records_train_and_validation_metrics(planted):
    Xtr, ytr, Xte, yte = planted
    m = FMRegressor(3, solver="mcmc", n_iter=30, random_state=0).fit(Xtr, ytr,
                                                                    eval_set=(Xte, yte))
    h = m.history_
    assert len(h["train"]) == len(h["val"]) == len(h["val_avg"]) == 30
    # libFM's running average of all samples ends better than the first sample
    assert h["val_avg"][-1] < h["val"][0]


# -- divergence and bad input ---------------------------------------------------------------

def test_sgd_divergence_is_reported_and_leaves_previous_model(planted):
    Xtr, ytr, Xte, _ = planted
    m = FMRegressor(3, solver="sgd", n_iter=2, learning_rate=0.01, random_state=0,
                    warm_start=True).fit(Xtr, ytr)
    before = m.predict(Xte)
    m.set_params(learning_rate=1e3, implicit_sgd=False, clip_predictions=False)
    with pytest.raises(DivergenceError, match="learning_rate"):
        m.fit(Xtr * 100, ytr * 100)
    m.set_params(clip_predictions=True)
    np.testing.assert_array_equal(m.predict(Xte), before)
    assert np.all(np.isfinite(m.V_))


@pytest.mark.parametrize("bad, match", [
    (np.array([[1.0, np.nan], [0.0, 1.0]]), "NaN"),
    (np.array([[1.0, np.inf], [0.0, 1.0]]), "infinity"),
    (np.empty((0, 3)), "0 sample"),
    (np.array([1.0, 2.0]), "2D array"),
])
def test_bad_X_is_rejected_with_a_clear_message(bad, match):
    with pytest.raises(ValueError, match=match):
        FMRegressor(solver="als", n_iter=2).fit(bad, np.ones(bad.shape[0] if bad.ndim else 1))


def test_sparse_nan_is_rejected():
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0]]))
    X.data[0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        FMRegressor(solver="als", n_iter=2).fit(X, [1.0, 2.0])


def test_feature_count_change_at_predict_time():
    X = np.random.default_rng(0).normal(size=(20, 4))
    m = FMRegressor(2, solver="als", n_iter=2).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="4 features"):
        m.predict(X[:, :3])


def test_nan_target_is_rejected():
    X = np.ones((3, 2))
    with pytest.raises(ValueError, match="NaN"):
        FMRegressor(solver="als", n_iter=2).fit(X, [1.0, np.nan, 2.0])


@pytest.mark.parametrize("y, match", [
    (["a", "a", "a"], "two classes"),
    ([0.5, 1.5, 2.5], "Unknown label type"),
])
def test_classifier_label_errors(y, match):
    with pytest.raises(ValueError, match=match):
        FMClassifier(solver="als", n_iter=2).fit(np.eye(3), y)


def test_unknown_or_invalid_parameters():
    with pytest.raises(TypeError):
        FMRegressor(n_factor=3)
    with pytest.raises(ValueError, match="solver"):
        FMRegressor(solver="adam").fit(np.eye(3), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="n_factors"):
        FMRegressor(n_factors=-1).fit(np.eye(3), [1.0, 2.0, 3.0])


def test_bad_sample_weight():
    X, y = np.eye(3), [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="non-negative"):
        FMRegressor(solver="als").fit(X, y, sample_weight=[1, -1, 1])
    with pytest.raises(ValueError, match="3 samples"):
        FMRegressor(solver="als").fit(X, y, sample_weight=[1, 1])
    with pytest.raises(ValueError, match="zero"):
        FMRegressor(solver="als").fit(X, y, sample_weight=[0, 0, 0])


def test_partial_fit_only_for_sgd():
    assert not hasattr(FMRegressor(solver="als"), "partial_fit")
    assert hasattr(FMRegressor(solver="sgd"), "partial_fit")
    with pytest.raises(AttributeError, match="partial_fit"):
        FMRegressor(solver="mcmc").partial_fit(np.eye(2), [1.0, 2.0])


def test_posterior_mean_kernel_averages_sample_predictions():
    from scipy.stats import norm

    from fmlearn.kernels.predict import fm_predict_samples_csr

    rng = np.random.default_rng(9)
    X = to_csr(_sparse_X(25, 7, 0.4, rng))
    S = 4
    W0s = rng.normal(size=S)
    Ws = rng.normal(size=(S, 7))
    Vs = 0.5 * rng.normal(size=(S, 7, 3))
    per_sample = np.array([ref.fm_predict(X, W0s[s], Ws[s], Vs[s]) for s in range(S)])
    lo, hi = np.quantile(per_sample, [0.2, 0.8])
    cases = [(False, (-np.inf, np.inf), per_sample.mean(0)),
             (False, (lo, hi), np.clip(per_sample, lo, hi).mean(0)),  # libFM: clip, then sum
             (True, (lo, hi), norm.cdf(per_sample).mean(0))]  # probit ignores the range
    for probit, clip, expected in cases:
        for n_blocks in (1, 3):
            out = fm_predict_samples_csr(*raw(X), W0s, Ws, Vs, probit, clip, n_blocks,
                                         np.empty(25))
            np.testing.assert_allclose(out, expected, rtol=1e-12)
    # clipping each sample is not clipping the average
    assert not np.allclose(np.clip(per_sample, lo, hi).mean(0),
                           np.clip(per_sample.mean(0), lo, hi))


@pytest.mark.parametrize("clip", [True, False])
def test_mcmc_regressor_averages_clipped_samples(clip):
    # libFM's MCMC prediction: every sample's prediction clipped to the training range, then
    # averaged (clip_predictions=False: the plain average).
    X, y, _ = make_fm(300, 20, 3, x="onehot", n_fields=2, noise=0.5, random_state=3)
    m = FMRegressor(3, n_iter=20, random_state=0, clip_predictions=clip).fit(X, y)
    Xt, _, _ = make_fm(100, 20, 3, x="onehot", n_fields=2, random_state=4)
    Xt = 2.5 * Xt  # beyond the training rows' scale: some samples leave the target range
    per_sample = np.array([ref.fm_predict(to_csr(Xt), m.samples_w0_[s], m.samples_w_[s],
                                          m.samples_V_[s]) for s in range(len(m.samples_w0_))])
    assert np.any((per_sample < y.min()) | (per_sample > y.max()))
    lo, hi = (y.min(), y.max()) if clip else (-np.inf, np.inf)
    np.testing.assert_allclose(m.predict(Xt), np.clip(per_sample, lo, hi).mean(0), rtol=1e-10)


def test_coloring_classes_never_share_a_row():
    X, y, _ = make_fm(500, 40, 2, x="onehot", n_fields=3, random_state=4)
    X = to_csr(X)
    data = column_data(X, y, np.ones(500))
    assert data.color_ptr is not None
    Xd = X.toarray() != 0
    for c in range(len(data.color_ptr) - 1):
        feats = data.order[data.color_ptr[c]:data.color_ptr[c + 1]]
        assert Xd[:, feats].sum(axis=1).max() <= 1  # no row holds two features of a class
    assert sorted(data.order.tolist()) == list(range(40))


# -- feature groups (libFM's -meta) ---------------------------------------------------------

def _user_item(n=2000, sizes=(40, 30), seed=2):
    X, y, _ = make_fm(n, sum(sizes), 3, x="onehot", n_fields=2, noise=0.2, random_state=seed)
    return to_csr(X), y


@pytest.mark.parametrize("solver", ["als", "mcmc"])
def test_one_group_equals_no_groups(solver):
    X, y = _user_item()
    d = X.shape[1]
    kw = dict(solver=solver, n_iter=15, random_state=0, reg_linear=0.5, reg_pairwise=1.0)
    base = FMRegressor(3, **kw).fit(X, y)
    for groups in ([d], np.zeros(d, dtype=int)):
        g = FMRegressor(3, groups=groups, **kw).fit(X, y)
        np.testing.assert_array_equal(g.V_, base.V_)
        np.testing.assert_array_equal(g.predict(X), base.predict(X))


def test_sizes_and_ids_give_the_same_groups():
    X, y = _user_item()
    ids = np.repeat([0, 1], [40, 30])
    a = FMRegressor(3, n_iter=10, random_state=0, groups=[40, 30]).fit(X, y)
    b = FMRegressor(3, n_iter=10, random_state=0, groups=ids).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert np.shape(a.chain_["lambda_w"]) == (2,) and np.shape(a.chain_["mu_v"]) == (3, 2)


@pytest.mark.parametrize("solver", ["als", "mcmc"])
def test_groups_thread_count_does_not_change_results(solver, monkeypatch):
    force_blocks(monkeypatch)
    X, y = _user_item(3000)
    kw = dict(solver=solver, n_iter=20, random_state=0, groups=[40, 30])
    if solver == "als":
        kw.update(reg_linear=[0.5, 1.0], reg_pairwise=[2.0, 1.0])
    a = FMRegressor(3, n_jobs=1, **kw).fit(X, y)
    c = FMRegressor(3, n_jobs=2, **kw).fit(X, y)
    np.testing.assert_array_equal(a.V_, c.V_)
    np.testing.assert_array_equal(a.predict(X), c.predict(X))


def test_grouped_mcmc_warm_start_and_save_load(tmp_path):
    from fmlearn import load

    X, y = _user_item()
    kw = dict(n_iter=5, random_state=0, n_burn_in=0, groups=[40, 30])
    ten = FMRegressor(3, **{**kw, "n_iter": 10}).fit(X, y)
    warm = FMRegressor(3, warm_start=True, **kw).fit(X, y).fit(X, y)
    np.testing.assert_allclose(warm.predict(X), ten.predict(X), rtol=1e-7, atol=1e-9)
    path = ten.save(tmp_path / "g.fmz")
    back = load(path)
    assert back.groups == [40, 30]
    np.testing.assert_array_equal(back.predict(X), ten.predict(X))


def test_grouped_priors_learn_separate_scales():
    # users carry strong linear effects, items none: the grouped chain gives the item block a
    # much larger prior precision than the user block (one shared lambda cannot)
    rng = np.random.default_rng(0)
    n, nu, ni = 4000, 50, 40
    u, i = rng.integers(0, nu, n), rng.integers(0, ni, n)
    X = to_csr(sp.csr_matrix((np.ones(2 * n), np.column_stack([u, nu + i]).ravel(),
                              np.arange(0, 2 * n + 1, 2)), shape=(n, nu + ni)))
    y = 3.0 * rng.normal(size=nu)[u] + 0.1 * rng.normal(size=n)
    m = FMRegressor(2, n_iter=60, random_state=0, groups=[nu, ni]).fit(X, y)
    lam_users, lam_items = m.chain_["lambda_w"]
    assert lam_items > 20 * lam_users


@pytest.mark.parametrize("groups, kw, match", [
    ([30, 30], {}, "sum to n_features=70"),
    ([70, 0], {}, "positive"),
    (np.full(70, -1), {}, "negative"),
    (np.full(70, 70), {}, "must be < 70"),
    (np.full(70, 0.5), {}, "integers"),
    (np.zeros((2, 35)), {}, "1-D"),
    ([40, 30], {"solver": "als", "reg_linear": [1.0, 2.0, 3.0]}, "one value per group"),
    ([40, 30], {"solver": "als", "reg_pairwise": [1.0, -2.0]}, "non-negative"),
    ([40, 30], {"solver": "mcmc", "reg_linear": [1.0, 2.0]}, "solver='als' only"),
    ([40, 30], {"solver": "sgd"}, "no per-group settings"),
])
def test_bad_groups_are_rejected_and_leave_the_model(groups, kw, match):
    X, y = _user_item(500)
    m = FMRegressor(3, solver="als", n_iter=3, random_state=0, warm_start=True).fit(X, y)
    before = m.predict(X)
    m.set_params(groups=groups, **kw)
    with pytest.raises(ValueError, match=match):
        m.fit(X, y)
    np.testing.assert_array_equal(m.predict(X), before)


def test_feature_groups_from_movielens_style_names():
    from fmlearn.encoders import feature_groups

    names = ["user=1", "user=2", "item=10", "item=11", "item=12", "user_age=18-24",
             "item_genre=Drama", "item_genre=Comedy"]
    groups, blocks = feature_groups(names)
    assert groups.tolist() == [0, 0, 1, 1, 1, 2, 3, 3]
    assert blocks == ["user", "item", "user_age", "item_genre"]
    with pytest.raises(TypeError):
        feature_groups("user=1")


@pytest.mark.parametrize("edit", [
    lambda meta: meta["params"].__setitem__("groups", [70]),  # chain_ has two groups
    lambda meta: meta["params"].__setitem__("groups", [50, 30]),  # sizes do not sum to d
])
def test_model_file_with_inconsistent_groups_is_refused(tmp_path, edit):
    import json
    import zipfile

    from fmlearn import io as fio
    from fmlearn.exceptions import ModelFileError

    X, y = _user_item(500)
    path = FMRegressor(3, n_iter=5, random_state=0, groups=[40, 30]).fit(X, y).save(
        tmp_path / "g.fmz")
    with zipfile.ZipFile(path) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    meta = json.loads(members["fmlearn.json"])
    edit(meta)
    meta["digest"] = fio.manifest_digest(meta)
    members["fmlearn.json"] = json.dumps(meta).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, blob in members.items():
            zf.writestr(name, blob)
    with pytest.raises(ModelFileError, match="group"):
        fio.load(path)


@pytest.mark.parametrize("solver", ["sgd", "als", "mcmc"])
def test_fit_callback_sees_each_iteration_and_changes_nothing(solver):
    X, y, _ = make_fm(200, 8, 2, random_state=4)
    Xv, yv, _ = make_fm(60, 8, 2, random_state=5)
    seen = []

    def callback(i, history):
        seen.append((i, len(history["train"]), len(history["val"]), history["train"][-1]))

    kw = dict(n_factors=2, solver=solver, n_iter=4, random_state=0)
    with_cb = FMRegressor(**kw).fit(X, y, eval_set=(Xv, yv), callback=callback)
    plain = FMRegressor(**kw).fit(X, y, eval_set=(Xv, yv))
    # called as each iteration ends, with that iteration's train and val figures recorded
    assert [s[:3] for s in seen] == [(i, i + 1, i + 1) for i in range(4)]
    assert [s[3] for s in seen] == with_cb.history_["train"]
    np.testing.assert_array_equal(with_cb.V_, plain.V_)
    assert not hasattr(with_cb, "_callback")  # nothing unpicklable left on the estimator
    with pytest.raises(TypeError, match="callback must be callable"):
        FMRegressor(**kw).fit(X, y, callback=3)


def test_mcmc_starts_from_random_linear_terms_as_libfm(monkeypatch):
    # libFM's MCMC draws w ~ N(0, init_stdev^2) (libfm.cpp, method mcmc); from w = 0 the first
    # lambda_w draw is about p + 2 and pins w at 0 for many sweeps. V is the same either way.
    from fmlearn.solvers._fm_common import init_state

    a = init_state(4000, 3, 0.1, np.random.default_rng(0), np.float64)
    b = init_state(4000, 3, 0.1, np.random.default_rng(0), np.float64, random_linear=True)
    np.testing.assert_array_equal(a.V, b.V)
    assert not a.w.any() and abs(b.w.std() - 0.1) < 0.005 and abs(b.w.mean()) < 0.005
    d = 400
    X, y, _ = make_fm(2000, d, 3, x="onehot", n_fields=2, noise=0.5, random_state=5)
    m = FMRegressor(3, n_iter=1, init_stdev=0.1, random_state=0).fit(X, y)
    # one group of d features: lambda_w ~ Gamma((d + 2) / 2) / ((1 + sum_j w_j^2) / 2), about
    # (d + 2) / 5 = 80 from the random start against d + 2 = 402 from zeros
    assert m.chain_["lambda_w"][0] < 0.5 * (d + 2)
    import fmlearn.fm._plan as plan_mod
    from fmlearn._plan import DataSummary

    monkeypatch.setattr(plan_mod, "init_state",
                        lambda *a, random_linear=False: init_state(*a, random_linear=False))
    zero = FMRegressor(3, n_iter=1, init_stdev=0.1, random_state=0).fit(X, y)
    assert zero.chain_["lambda_w"][0] > 0.5 * (d + 2)
    monkeypatch.undo()
    summary = DataSummary(n_samples=1, n_features=d, dtype="float64", y_min=0.0, y_max=1.0)
    for solver in ("als", "sgd"):  # libFM's other methods start w at 0
        plan = plan_mod.ClassicFMPlan.build(FMRegressor(3, solver=solver, random_state=0),
                                            summary)
        assert not plan.state.w.any() and plan.state.V.any()


@pytest.mark.parametrize("solver", ["als", "mcmc"])
def test_regression_fits_store_no_targets_of_their_own(solver, monkeypatch):
    # ALS / MCMC regression reads the targets where the user passed them, through the fit's
    # row index (solvers._fm_common.RowTargets): the data the solver gets stores no n-long
    # copy (memory: 8 bytes per row), and the model equals the one fitted on the gathered
    # copy (the path of targets that are not a float64 vector), bit for bit
    import fmlearn.fm as fm_mod

    seen = []

    def spy(*args):
        seen.append(fm_common.column_data(*args))
        return seen[-1]

    monkeypatch.setattr(fm_mod, "column_data", spy)
    X, y, _ = make_fm(300, 12, 2, x="sparse", density=0.3, noise=0.3, random_state=4)
    X, y = sp.vstack([X, X[:40]]).tocsr(), np.r_[y, y[:40]]  # merged rows: a row index
    kw = dict(n_factors=3, solver=solver, n_iter=12, random_state=0, n_jobs=1)  # 1 refresh
    a = FMRegressor(**kw).fit(X, y)
    assert seen[-1].row_targets is not None and seen[-1].cols.y.shape == (0,)
    assert np.array_equal(seen[-1].y, np.asarray(seen[-1].row_targets))
    monkeypatch.setattr(fm_common.RowTargets, "reads", staticmethod(lambda source: False))
    b = FMRegressor(**kw).fit(X, y)
    assert seen[-1].row_targets is None and seen[-1].cols.y.shape == (X.shape[0] - 40,)
    assert a.w0_ == b.w0_ and np.array_equal(a.w_, b.w_) and np.array_equal(a.V_, b.V_)


@pytest.mark.parametrize("solver", ["als", "mcmc"])
def test_fit_without_weights_equals_unit_weights(solver):
    # ALS / MCMC carry no array of ones when sample_weight is None: the same model, bit for
    # bit, as with sample_weight=ones, with duplicate rows merged (counts) or none
    X, y, _ = make_fm(300, 12, 2, x="sparse", density=0.3, noise=0.3, random_state=4)
    for rows in (X, sp.vstack([X, X[:50]]).tocsr()):
        yy = np.r_[y, y[:50]][:rows.shape[0]]
        kw = dict(n_factors=3, solver=solver, n_iter=4, random_state=0, n_jobs=1)
        a = FMRegressor(**kw).fit(rows, yy)
        b = FMRegressor(**kw).fit(rows, yy, sample_weight=np.ones(rows.shape[0]))
        assert a.w0_ == b.w0_ and np.array_equal(a.w_, b.w_) and np.array_equal(a.V_, b.V_)
        assert a.init_stdev_ == b.init_stdev_
