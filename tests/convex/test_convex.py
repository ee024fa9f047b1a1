"""Convex FM (seed 004): the solver's pieces against dense oracles, Frank-Wolfe properties,
the paper's synthetic experiment (§4.1) and estimator behaviour."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import Ridge, RidgeCV
from sklearn.preprocessing import PolynomialFeatures

from fmlearn import ConvexFMClassifier, ConvexFMRegressor, FMRegressor, load
from fmlearn.datasets import make_cfm_regression
from fmlearn.exceptions import ConvergenceWarning, DivergenceError
from fmlearn.solvers._hazan_face import project_spectahedron
from fmlearn.solvers._hazan_rows import (
    blk_face_basis,
    blk_face_direction,
    blk_face_gradient,
    blk_logistic_gain,
)
from fmlearn.solvers.hazan import (
    CFMData,
    CFMState,
    HazanSettings,
    LocalRows,
    RidgeSystem,
    atom_quadratic,
    cfm_data,
    compress_atoms,
    hazan_solver,
    logistic_line_search,
    zero_diag_operator,
)


def rmse(a, b):
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def small_problem(n=60, d=7, seed=0, sparse_frac=0.6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < sparse_frac)
    U = rng.normal(size=(d, 2))
    W = U @ U.T
    y = 0.5 + X @ rng.normal(size=d) + 0.5 * (np.einsum("ij,jk,ik->i", X, W, X)
                                              - (X * X) @ np.diag(W))
    y += 0.1 * rng.normal(size=n)
    sw = rng.uniform(0.5, 2.0, size=n)
    return sp.csr_matrix(X), y, sw


# -- dense oracles ------------------------------------------------------------------------------
def dense_q(X, W):
    """q_i = 1/2 tr(W (x x^T - diag(x o x))) by the definition (seed 004 Eq. 1)."""
    X = X.toarray() if sp.issparse(X) else X
    return np.array([0.5 * np.sum(W * (np.outer(x, x) - np.diag(x * x))) for x in X])


def dense_J(X, y, sw, W, lam1):
    """J(W) = min_w sum s (y - Zw - q)^2 + lam1 ||w_1:||^2 by a dense solve (Eq. 3)."""
    Xd = X.toarray()
    Z = np.column_stack([np.ones(Xd.shape[0]), Xd])
    v = y - dense_q(X, W)
    reg = lam1 * np.eye(Z.shape[1])
    reg[0, 0] = 0.0
    w = np.linalg.lstsq(Z.T @ (sw[:, None] * Z) + reg, Z.T @ (sw * v), rcond=None)[0]
    r = v - Z @ w
    return float(sw @ (r * r) + lam1 * w[1:] @ w[1:]), w


@pytest.mark.parametrize("lam1", [0.0, 0.7])
def test_operator_is_the_negative_gradient(lam1):
    # The matrix-free M(g) equals -grad J by central finite differences of the eliminated
    # objective: the sign (the paper's "D = diag(y - f)" is -grad) and the zero diagonal.
    X, y, sw = small_problem()
    d = X.shape[1]
    rng = np.random.default_rng(1)
    B = rng.normal(size=(d, 3))
    W = B @ B.T
    data = cfm_data(X, y, sw)
    J0, w = dense_J(X, y, sw, W, lam1)
    Z = np.column_stack([np.ones(X.shape[0]), X.toarray()])
    g = sw * (y - Z @ w - dense_q(X, W))
    M = zero_diag_operator(data, g).matmat(np.eye(d))
    Xd = X.toarray()
    dense = sum(gi * (np.outer(x, x) - np.diag(x * x)) for gi, x in zip(g, Xd, strict=True))
    np.testing.assert_allclose(M, dense, atol=1e-10 * np.abs(dense).max())
    np.testing.assert_allclose(np.diag(M), 0.0, atol=1e-12 * np.abs(dense).max())
    eps = 1e-5
    for _ in range(3):
        E = rng.normal(size=(d, d))
        E = E + E.T
        fd = (dense_J(X, y, sw, W + eps * E, lam1)[0]
              - dense_J(X, y, sw, W - eps * E, lam1)[0]) / (2 * eps)
        assert fd == pytest.approx(-np.sum(M * E), rel=1e-5)


def test_literal_paper_direction_is_ascent():
    # Reading "D = diag(y - f)" literally makes X D X^T the gradient itself; its top
    # eigenvector then increases J and the exact line search refuses to move (a = 0).
    X, y, sw = small_problem(seed=3)
    data = cfm_data(X, y, sw)
    ridge = RidgeSystem(data, 0.0, 1e-12)
    w = ridge.solve(((1.0, "y"),))
    g = sw * (y - (X @ w[1:] + w[0]))
    M = zero_diag_operator(data, g).matmat(np.eye(X.shape[1]))
    literal = -(M + np.diag(data.X2T @ g))  # -(X D X^T) with D = diag(y - f)
    p = np.linalg.eigh(literal)[1][:, -1]
    eta = 5.0
    J0 = dense_J(X, y, sw, np.zeros((7, 7)), 0.0)[0]
    Jp = [dense_J(X, y, sw, a * eta * np.outer(p, p), 0.0)[0] for a in (0.05, 0.2, 1.0)]
    assert min(Jp) > J0
    p_right = np.linalg.eigh(M)[1][:, -1]
    assert dense_J(X, y, sw, 0.2 * eta * np.outer(p_right, p_right), 0.0)[0] < J0


def test_ridge_system_matches_dense_solution():
    X, y, sw = small_problem(seed=2)
    for lam1 in (0.0, 2.0):
        ridge = RidgeSystem(cfm_data(X, y, sw), lam1, 1e-12)
        _, w = dense_J(X, y, sw, np.zeros((7, 7)), lam1)
        np.testing.assert_allclose(ridge.solve(((1.0, "y"),)), w, rtol=1e-7, atol=1e-9)
    # sklearn's Ridge minimizes the same objective (intercept not penalized).
    ref = Ridge(alpha=2.0).fit(X.toarray(), y, sample_weight=sw)
    w = RidgeSystem(cfm_data(X, y, sw), 2.0, 1e-12).solve(((1.0, "y"),))
    np.testing.assert_allclose(w[1:], ref.coef_, rtol=1e-6)
    assert w[0] == pytest.approx(ref.intercept_, rel=1e-6)


def test_exact_step_minimizes_along_the_segment():
    # One iteration of the solver against a brute-force scan of J((1 - a) W + a eta p p^T).
    X, y, sw = small_problem(seed=4)
    d = X.shape[1]
    eta, lam1 = 3.0, 0.3
    data = cfm_data(X, y, sw)
    rng = np.random.default_rng(0)
    settings = HazanSettings(trace_bound=eta, max_iter=3, reg_linear=lam1)
    cold = CFMState(0.0, np.zeros(d), np.zeros((d, 0)), np.zeros(0))
    state, _, _ = hazan_solver(data, cold, settings, rng)
    recs = []
    settings.max_iter = 1
    new, n, info = hazan_solver(data, state, settings, rng,
                                callback=lambda it, rec: recs.append(rec))
    a = recs[0]["step"]
    assert 0 < a < 1
    W0 = (state.P * state.lam) @ state.P.T
    p = new.P[:, -1]
    grid = np.linspace(0, 1, 401)
    Js = [dense_J(X, y, sw, (1 - t) * W0 + t * eta * np.outer(p, p), lam1)[0] for t in grid]
    assert a == pytest.approx(grid[int(np.argmin(Js))], abs=2.5e-3)
    assert recs[0]["objective"] == pytest.approx(dense_J(X, y, sw, W0, lam1)[0], rel=1e-9)
    assert info["objective"] <= min(Js) * (1 + 1e-9)
    # The stored atoms reproduce W_1 = (1 - a) W_0 + a eta p p^T.
    W1 = (new.P * new.lam) @ new.P.T
    np.testing.assert_allclose(W1, (1 - a) * W0 + a * eta * np.outer(p, p), atol=1e-12)


@pytest.mark.parametrize("start", ["exact", "pairwise"])
def test_auto_step_takes_frank_wolfe_only_for_a_better_drop_step(start):
    # step="auto" from any iterate, against the dense oracle J of each resulting W: never
    # above the pairwise step; where the pairwise step is a drop step (a = 1) the lower of
    # the two, else the pairwise step itself. From exact iterates (many atoms carrying mass:
    # drop steps) and pairwise ones; both kinds of step are taken over the 12 starts.
    X, y, sw = small_problem(n=150, d=9, seed=6)
    d = X.shape[1]
    eta, lam1 = 4.0, 0.2
    data = cfm_data(X, y, sw)
    cold = CFMState(0.0, np.zeros(d), np.zeros((d, 0)), np.zeros(0))
    kinds = set()
    for k in range(2, 14):
        settings = HazanSettings(trace_bound=eta, max_iter=k, reg_linear=lam1, step=start)
        state, _, _ = hazan_solver(data, cold, settings, np.random.default_rng(0))
        J, W, a = {}, {}, {}
        for step in ("exact", "pairwise", "auto"):
            settings = HazanSettings(trace_bound=eta, max_iter=1, reg_linear=lam1, step=step)
            recs = []
            new = hazan_solver(data, state, settings, np.random.default_rng(0),
                               callback=lambda it, rec, out=recs: out.append(rec))[0]
            a[step] = recs[0]["step"]
            W[step] = (new.P * new.lam) @ new.P.T
            J[step] = dense_J(X, y, sw, W[step], lam1)[0]
        best = min(J["exact"], J["pairwise"]) if a["pairwise"] == 1.0 else J["pairwise"]
        assert J["auto"] <= best * (1 + 1e-9), (k, a, J)
        kind = "exact" if a["pairwise"] == 1.0 and J["exact"] < J["pairwise"] else "pairwise"
        np.testing.assert_allclose(W["auto"], W[kind], atol=1e-10 * eta)
        kinds.add(kind)
    assert kinds == {"exact", "pairwise"}


def test_objective_monotone_and_gap_bounds_suboptimality():
    X, y, sw = small_problem(n=200, d=12, seed=5)
    m = ConvexFMRegressor(trace_bound=4.0, max_iter=60, tol=0, random_state=0).fit(X, y, sw)
    obj = np.array(m.history_["objective"])
    assert np.all(np.diff(obj) <= 1e-10 * obj[0])
    best = ConvexFMRegressor(trace_bound=4.0, max_iter=300, tol=0, random_state=0).fit(X, y, sw)
    j_star = min(best.objective_, m.objective_)  # an upper bound on the optimum J*
    gaps = np.array(m.history_["gap"])
    # Frank-Wolfe duality: J(W_t) - J* <= gap_t, and the gap closes.
    assert np.all(obj - j_star <= gaps + 1e-9 * obj[0])
    assert gaps[-1] < 0.05 * gaps[0]


def test_gap_falls_below_tolerance():
    X, y, sw = small_problem(n=150, d=8, seed=6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = ConvexFMRegressor(trace_bound=3.0, max_iter=500, tol=1e-4, random_state=0).fit(X, y, sw)
    assert m.n_iter_ < 500
    # The certified gap (objective minus the best lower bound J(W_t) - gap_t) against the
    # constant model's loss.
    obj, gap = np.array(m.history_["objective"]), np.array(m.history_["gap"])
    baseline = np.sum(sw * (y - np.average(y, weights=sw)) ** 2)
    assert obj[-1] - np.max(obj - gap) <= 1e-4 * baseline
    assert m.objective_ - m.gap_ == pytest.approx(np.max(obj - gap), rel=1e-12)
    with pytest.warns(ConvergenceWarning, match="duality gap"):
        ConvexFMRegressor(trace_bound=3.0, max_iter=2, tol=1e-8, random_state=0).fit(X, y, sw)


def test_certified_gap_bounds_the_optimum_and_follows_the_units():
    # gap_ certifies J* >= objective_ - gap_ (checked against a 6x longer run), is at most the
    # last Frank-Wolfe gap, and tol is measured against the constant model's loss: rescaling
    # X and y leaves the verdict and the relative gap unchanged.
    X, y, sw = small_problem(n=200, d=12, seed=5)
    fits, rel = [], []
    for a, b in [(1.0, 1.0), (1e3, 1e-2), (1e-3, 1e2)]:
        with pytest.warns(ConvergenceWarning, match="certified") as rec:
            m = ConvexFMRegressor(max_iter=20, tol=1e-6, random_state=0).fit(a * X, b * y, sw)
        fits.append(m)
        mean = np.average(b * y, weights=sw)
        rel.append(m.gap_ / np.sum(sw * (b * y - mean) ** 2))
        assert f"{rel[-1]:.3g} x the constant model's loss" in str(rec[0].message)
    m = fits[0]
    long = ConvexFMRegressor(max_iter=120, tol=0, random_state=0).fit(X, y, sw)
    assert m.objective_ - m.gap_ <= long.objective_ <= m.objective_
    assert 0 < m.gap_ <= m.history_["gap"][-1]
    np.testing.assert_allclose(rel, rel[0], rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        loose = ConvexFMRegressor(max_iter=20, tol=1.01 * rel[0], random_state=0).fit(X, y, sw)
    assert loose.gap_ <= 1.01 * rel[0] * np.sum(sw * (y - np.average(y, weights=sw)) ** 2)


@pytest.mark.parametrize("cls", [ConvexFMRegressor, ConvexFMClassifier])
def test_pairwise_steps_close_the_gap_faster_to_the_same_optimum(cls):
    # Pairwise steps (the default) against Frank-Wolfe's exact steps, 60 of each: the objective
    # never increases, W stays feasible, each run's certificate holds for the other's objective
    # (one optimum), and the pairwise run ends lower with a smaller certified gap (here 0.33x
    # and 0.54x; on test_defaults.py's data 100 pairwise steps meet tol=1e-3, exact ones not).
    X, y, sw = small_problem(n=300, d=10, seed=8)
    if cls is ConvexFMClassifier:
        y = y > np.median(y)
    # (the steps alone: the classifier's default corrective steps reach the optimum with each)
    fits = {step: cls(max_iter=60, tol=0, step=step, corrective_steps=0,
                      random_state=0).fit(X, y, sw)
            for step in ("exact", "pairwise", "auto")}
    pw, ex = fits["pairwise"], fits["exact"]
    for m in (pw, fits["auto"]):
        obj = np.array(m.history_["objective"])
        assert np.all(np.diff(obj) <= 1e-10 * obj[0])
    # The default ("auto") leaves the pairwise run only for better drop steps: never above it.
    assert fits["auto"].objective_ <= pw.objective_ * (1 + 1e-9)
    assert np.all(pw.atom_weights_ >= 0) and pw.atom_weights_.sum() <= pw.trace_bound_ * (1 + 1e-9)
    assert pw.objective_ - pw.gap_ <= ex.objective_ and ex.objective_ - ex.gap_ <= pw.objective_
    assert pw.objective_ <= ex.objective_
    assert pw.gap_ < ex.gap_, (pw.gap_, ex.gap_)


@pytest.mark.parametrize("cls", [ConvexFMRegressor, ConvexFMClassifier])
def test_blas_thread_count_does_not_change_the_fit(cls):
    # The solver's n-vector dot products run on one BLAS thread: OpenBLAS splits long ones by
    # thread count (W differed by 1e-8 between limits 1 and 2 before).
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(3)
    n, d = 24000, 16
    X = sp.random(n, d, density=0.3, random_state=4, format="csr")
    score = X @ rng.normal(size=d) + (X @ rng.normal(size=d)) * (X @ rng.normal(size=d))
    y = score > np.median(score) if cls is ConvexFMClassifier else score
    fits = []
    for k in (1, 2):
        with threadpool_limits(k, user_api="blas"), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fits.append(cls(max_iter=6, random_state=0).fit(X, y))
    a, b = fits
    assert a.w0_ == b.w0_
    np.testing.assert_array_equal(a.w_, b.w_)
    np.testing.assert_array_equal(a.interaction_matrix(), b.interaction_matrix())


def test_planted_psd_model_is_recovered():
    # Noise-free data from a psd rank-2 W: with eta = tr(W) the global optimum fits exactly.
    rng = np.random.default_rng(7)
    n, d = 600, 15
    X = rng.normal(size=(n, d))
    U = rng.normal(size=(d, 2))
    W = U @ U.T
    y = 1.0 + X @ rng.normal(size=d) + dense_q(X, W)
    m = ConvexFMRegressor(trace_bound=np.trace(W), max_iter=300, tol=0, random_state=0,
                          clip_predictions=False).fit(X[:500], y[:500])
    assert rmse(m.predict(X[500:]), y[500:]) < 0.05 * y.std()
    Wd = m.interaction_matrix()
    off = ~np.eye(d, dtype=bool)
    assert np.abs(Wd - W)[off].max() < 0.1 * np.abs(W[off]).max()


def test_zero_trace_bound_is_ridge():
    X, y, sw = small_problem(seed=8)
    m = ConvexFMRegressor(trace_bound=0.0, reg_linear=0.5, max_iter=5,
                          clip_predictions=False).fit(X, y, sw)
    ref = Ridge(alpha=0.5).fit(X.toarray(), y, sample_weight=sw)
    np.testing.assert_allclose(m.predict(X), ref.predict(X.toarray()), rtol=1e-6, atol=1e-8)
    assert m.n_atoms_ == 0


def test_synthetic_4_1_beats_ridge_and_fm_als():
    # Seed 004 §4.1: eta chosen on the training data (a held-out fifth of it), 100 iterations.
    X, y, _ = make_cfm_regression(1000, 100, random_state=0)
    Xtr, ytr, Xte, yte = X[:900], y[:900], X[900:], y[900:]
    scores = {}
    for eta in (30.0, 60.0, 120.0):
        m = ConvexFMRegressor(trace_bound=eta, max_iter=40, tol=0, random_state=0)
        scores[eta] = rmse(m.fit(Xtr[:720], ytr[:720]).predict(Xtr[720:]), ytr[720:])
    eta = min(scores, key=scores.get)
    cfm = ConvexFMRegressor(trace_bound=eta, max_iter=100, tol=0, random_state=0).fit(Xtr, ytr)
    cfm_rmse = rmse(cfm.predict(Xte), yte)
    poly = PolynomialFeatures(2, interaction_only=True, include_bias=False)
    ridge = RidgeCV(alphas=np.logspace(0, 4, 5)).fit(poly.fit_transform(Xtr), ytr)
    ridge_rmse = rmse(ridge.predict(poly.transform(Xte)), yte)
    als = FMRegressor(20, solver="als", n_iter=30, reg_pairwise=0.01, random_state=0)
    als_rmse = rmse(als.fit(Xtr, ytr).predict(Xte), yte)
    # The paper's Fig. 1 ordering; margins measured: CFM ~25, ridge ~35, ALS ~38-41.
    assert cfm_rmse < 0.85 * ridge_rmse
    assert cfm_rmse < 0.85 * als_rmse
    assert cfm_rmse < 0.75 * yte.std()


def test_standard_step_also_converges():
    X, y, sw = small_problem(n=200, d=10, seed=9)
    exact = ConvexFMRegressor(trace_bound=3.0, max_iter=80, tol=0, random_state=0).fit(X, y, sw)
    std = ConvexFMRegressor(trace_bound=3.0, max_iter=80, tol=0, step="standard",
                            random_state=0).fit(X, y, sw)
    assert std.history_["step"][:3] == pytest.approx([1.0, 2 / 3, 0.5])
    assert std.objective_ < std.history_["objective"][0]
    assert exact.objective_ <= std.objective_ * (1 + 1e-9)


def test_compression_keeps_W():
    rng = np.random.default_rng(10)
    P = rng.normal(size=(30, 12))
    P[:, 6:] = P[:, :6]  # repeated atoms
    P /= np.linalg.norm(P, axis=0)
    lam = rng.uniform(0.1, 1.0, 12)
    Q, vals = compress_atoms(P, lam)
    assert vals.shape[0] == 6
    np.testing.assert_allclose((Q * vals) @ Q.T, (P * lam) @ P.T, atol=1e-12)
    np.testing.assert_allclose(Q.T @ Q, np.eye(6), atol=1e-12)
    X, y, sw = small_problem(n=150, d=10, seed=11)
    kw = dict(trace_bound=3.0, max_iter=40, tol=0, random_state=0)
    a = ConvexFMRegressor(compress=False, **kw).fit(X, y)
    b = ConvexFMRegressor(compress=True, **kw).fit(X, y)
    assert b.n_atoms_ <= min(a.n_atoms_, 10)
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-9, atol=1e-9)


def test_warm_start_continues_and_trace_bound_path():
    X, y, sw = small_problem(n=150, d=10, seed=12)
    full = ConvexFMRegressor(trace_bound=3.0, max_iter=10, tol=0, random_state=0, compress=False)
    full.fit(X, y)
    half = ConvexFMRegressor(trace_bound=3.0, max_iter=5, tol=0, random_state=0, compress=False,
                             warm_start=True)
    half.fit(X, y).fit(X, y)
    assert half.t_ == full.t_ == 10
    np.testing.assert_allclose(half.predict(X), full.predict(X), rtol=1e-6, atol=1e-8)
    # A path over eta: the previous W is rescaled onto the new budget and improved from there.
    half.set_params(trace_bound=6.0, max_iter=5).fit(X, y)
    assert np.sum(half.atom_weights_) <= 6.0 * (1 + 1e-12)
    assert half.history_["objective"][-1] < full.objective_


def test_sparse_dense_float32_and_eval_set():
    X, y, sw = small_problem(n=120, d=9, seed=13)
    kw = dict(trace_bound=3.0, max_iter=15, tol=0, random_state=0)
    a = ConvexFMRegressor(**kw).fit(X, y)
    b = ConvexFMRegressor(**kw).fit(X.toarray(), y)
    np.testing.assert_allclose(a.predict(X), b.predict(X.toarray()), rtol=1e-10, atol=1e-10)
    c = ConvexFMRegressor(**kw).fit(X.astype(np.float32), y)
    assert c.atoms_.dtype == np.float32
    np.testing.assert_allclose(c.predict(X.astype(np.float32)), a.predict(X), rtol=1e-4,
                               atol=1e-4 * np.abs(y).max())
    d = ConvexFMRegressor(**kw).fit(X[:80], y[:80], eval_set=(X[80:], y[80:]))
    assert len(d.history_["val"]) == len(d.history_["train"]) == 15
    # history_ is recorded before each step; after the last step predict() gives the rest.
    assert d.history_["val"][0] == pytest.approx(
        rmse(ConvexFMRegressor(trace_bound=0.0).fit(X[:80], y[:80]).predict(X[80:]), y[80:]),
        rel=1e-6)


def test_linear_features_mask():
    X, y, sw = small_problem(seed=14)
    m = ConvexFMRegressor(trace_bound=2.0, max_iter=10, tol=0, linear_features=[0, 2],
                          random_state=0).fit(X, y)
    assert np.all(m.w_[[1, 3, 4, 5, 6]] == 0) and np.any(m.w_[[0, 2]] != 0)
    with pytest.raises(ValueError, match="outside"):
        ConvexFMRegressor(linear_features=[0, 99]).fit(X, y)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the overflow that the error reports
def test_bad_input_and_divergence():
    X, y, sw = small_problem(seed=15)
    with pytest.raises(ValueError):
        ConvexFMRegressor(trace_bound=-1.0).fit(X, y)
    with pytest.raises(ValueError):
        ConvexFMRegressor(step="fast").fit(X, y)
    with pytest.raises(ValueError, match="NaN|infinity"):
        ConvexFMRegressor().fit(X, np.full_like(y, np.nan))
    with pytest.raises(DivergenceError, match="non-finite"):
        ConvexFMRegressor(trace_bound=1.0).fit(X, y * 1e200)


def test_save_load_roundtrip(tmp_path):
    X, y, sw = small_problem(seed=16)
    m = ConvexFMRegressor(trace_bound=2.0, max_iter=8, tol=0, random_state=0).fit(X, y)
    m2 = load(m.save(tmp_path / "cfm.fmlearn"))
    np.testing.assert_array_equal(m2.predict(X), m.predict(X))


# -- classifier (extension) ---------------------------------------------------------------------
def test_logistic_line_search_is_the_1d_minimizer():
    rng = np.random.default_rng(17)
    y = np.where(rng.random(50) < 0.5, -1.0, 1.0)
    base, delta, sw = rng.normal(size=50), rng.normal(size=50) * 3, rng.uniform(0.5, 2, 50)
    a = logistic_line_search(y, sw, base, delta)
    grid = np.linspace(0, 1, 20001)
    vals = np.logaddexp(0, -y * (base + grid[:, None] * delta)) @ sw
    assert a == pytest.approx(grid[int(np.argmin(vals))], abs=1e-4)
    # step="auto" compares the loss's decrease along two segments: sum s (l(f) - l(f + a d))
    # against the loss written as log(1 + exp(-margin)).
    data = CFMData(None, None, None, None, y, sw)
    loss = [sw @ np.log1p(np.exp(-y * (base + t * delta))) for t in (0.0, 0.3, a, 1.0)]
    for t, val in zip((0.3, a, 1.0), loss[1:], strict=True):
        gain = blk_logistic_gain(data, {"f": base, "delta": delta}, t)[0]
        assert gain == pytest.approx(loss[0] - val, rel=1e-10, abs=1e-12)


def test_classifier_learns_interactions_and_descends():
    rng = np.random.default_rng(18)
    X = rng.normal(size=(600, 5))
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0, "pos", "neg")
    clf = ConvexFMClassifier(trace_bound=20.0, max_iter=40, tol=0, random_state=0)
    clf.fit(X[:400], y[:400])
    obj = np.array(clf.history_["objective"])
    assert np.all(np.diff(obj) <= 1e-7 * obj[0])
    acc = (clf.predict(X[400:]) == y[400:]).mean()
    lin = ConvexFMClassifier(trace_bound=0.0, max_iter=1).fit(X[:400], y[:400])
    assert acc > 0.85 and acc > (lin.predict(X[400:]) == y[400:]).mean() + 0.2
    proba = clf.predict_proba(X[400:])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_atom_quadratic_of_the_leading_eigenvector():
    rng = np.random.default_rng(19)
    A = rng.normal(size=(80, 80))
    A = A + A.T
    from scipy.sparse.linalg import aslinearoperator

    from fmlearn.linalg import leading_eigenpair

    p, rho, ok = leading_eigenpair(aslinearoperator(A), v0=rng.normal(size=80), tol=1e-10)
    assert ok and rho == pytest.approx(np.linalg.eigvalsh(A)[-1], rel=1e-8)
    q = atom_quadratic((sp.csr_matrix(A[:5]), sp.csr_matrix(A[:5] ** 2)), p)
    np.testing.assert_allclose(q, dense_q(A[:5], np.outer(p, p)), rtol=1e-10)


# -- corrective steps on the atoms' face --------------------------------------------------------
def test_spectahedron_projection_is_the_euclidean_projection():
    # The projection Pi(S) on C = {psd, tr <= eta} is the unique feasible point with
    # <S - Pi(S), Z - Pi(S)> <= 0 for every Z in C; C is the convex hull of 0 and eta z z^T, so
    # checking those extreme points (and random mixtures) checks all of C.
    rng = np.random.default_rng(30)
    for eta, scale in [(1.0, 1.0), (5.0, 0.3), (2.0, 10.0)]:
        A = scale * rng.normal(size=(6, 6))
        S = A + A.T
        P = project_spectahedron(S, eta)
        vals = np.linalg.eigvalsh(P)
        assert vals.min() >= -1e-12 and vals.sum() <= eta * (1 + 1e-12)
        Z = [np.zeros((6, 6))]
        for _ in range(300):
            z = rng.normal(size=6)
            Z.append(eta * np.outer(z, z) / (z @ z))
        Z += [0.5 * (Z[k] + Z[k + 1]) for k in range(1, 100)]
        assert max(np.sum((S - P) * (Zk - P)) for Zk in Z) <= 1e-9 * np.sum(S * S)
    # inside the simplex after clipping: only the negative eigenvalue goes
    np.testing.assert_allclose(project_spectahedron(np.diag([0.2, -1.0, 0.3]), 1.0),
                               np.diag([0.2, 0.0, 0.3]), atol=1e-15)


def test_face_gradient_and_direction_match_dense_oracles():
    # On the face W = Q S Q^T, the block sums give Q^T M(g) Q (M(g) = -grad J, dense oracle
    # X^T diag(g) X - diag((X o X)^T g)) and delta = q(Q D Q^T) (dense_q, seed 004 Eq. 1).
    X, y, sw = small_problem(n=90, d=7, seed=31)
    rng = np.random.default_rng(31)
    rows = LocalRows(cfm_data(X, y, sw))
    g = rng.normal(size=90)
    rows.vectors["g"] = g
    Q, _ = np.linalg.qr(rng.normal(size=(7, 3)))
    rows.update(blk_face_basis, Q)
    Xd = X.toarray()
    M = Xd.T @ (g[:, None] * Xd) - np.diag((Xd * Xd).T @ g)
    c = (Xd * Xd).T @ g
    face = rows.reduce(blk_face_gradient)[0] - (Q * c[:, None]).T @ Q
    np.testing.assert_allclose(face, Q.T @ M @ Q, rtol=1e-10, atol=1e-10)
    D = rng.normal(size=(3, 3))
    D = D + D.T
    rhs = rows.update(blk_face_direction, D, np.diag(Q @ D @ Q.T), True)
    delta = dense_q(Xd, Q @ D @ Q.T)
    np.testing.assert_allclose(rows.vectors["delta"], delta, rtol=1e-10, atol=1e-12)
    assert rhs[0] == pytest.approx(sw @ delta, rel=1e-10)
    np.testing.assert_allclose(rhs[1], Xd.T @ (sw * delta), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("cls", [ConvexFMRegressor, ConvexFMClassifier])
def test_corrective_steps_descend_feasibly_to_the_same_optimum(cls):
    # With corrective steps the objective never increases, W stays in the feasible set, the
    # objective reported is the loss of the model's own predictions (the rows' q followed the
    # rewritten atoms), each run's certificate bounds the other's objective (one optimum),
    # and 20 steps with them end lower than 20 without.
    X, y, sw = small_problem(n=300, d=10, seed=8)
    if cls is ConvexFMClassifier:
        y = y > np.median(y)
    fits = {k: cls(max_iter=20, tol=0, corrective_steps=k, random_state=0).fit(X, y, sw)
            for k in (0, 3)}
    m, plain = fits[3], fits[0]
    obj = np.array(m.history_["objective"])
    assert np.all(np.diff(obj) <= 1e-10 * obj[0])
    assert np.all(m.atom_weights_ >= 0) and m.atom_weights_.sum() <= m.trace_bound_ * (1 + 1e-9)
    f = m.decision_function(X) if cls is ConvexFMClassifier else m.predict(X)
    if cls is ConvexFMClassifier:
        s = np.where(y, 1.0, -1.0)
        own = sw @ np.logaddexp(0.0, -s * f) + 0.5 * m.reg_linear * m.w_ @ m.w_
    else:
        own = sw @ (y - f) ** 2
    assert m.objective_ == pytest.approx(own, rel=1e-8)
    assert m.objective_ - m.gap_ <= plain.objective_
    assert plain.objective_ - plain.gap_ <= m.objective_
    assert m.objective_ < plain.objective_ and m.gap_ < plain.gap_


def test_default_classifier_meets_tol_on_logistic_data():
    # Logistic labels from a linear + rank-3 pairwise score: the default classifier stops at
    # tol without a ConvergenceWarning (with the pairwise steps alone, 100 steps do not: it
    # warns), and its held-out accuracy is within 0.03 of the Bayes classifier's.
    rng = np.random.default_rng(2)
    n, d = 4000, 12
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.5)
    U = rng.normal(size=(d, 3)) / np.sqrt(d)
    score = 0.3 + 0.5 * X @ rng.normal(size=d) + dense_q(X, 2.0 * U @ U.T)
    p = 1.0 / (1.0 + np.exp(-2.0 * score))
    y = (rng.random(n) < p).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = ConvexFMClassifier(random_state=0).fit(X[:3000], y[:3000])
    assert m.n_iter_ < m.max_iter
    base = np.sum(np.where(y[:3000] == 1, 1.0, -1.0))  # the class entropy (nats) as in tol
    share = 0.5 * (1 + base / 3000)
    entropy = -3000 * (share * np.log(share) + (1 - share) * np.log1p(-share))
    assert m.gap_ <= 1e-3 * entropy
    bayes = np.mean(np.maximum(p[3000:], 1 - p[3000:]))
    acc = np.mean(m.predict(X[3000:]) == y[3000:])
    assert acc >= bayes - 0.03 and acc > np.mean(y[3000:] == 1) + 0.2
    with pytest.warns(ConvergenceWarning, match="certified"):
        ConvexFMClassifier(corrective_steps=0, random_state=0).fit(X[:3000], y[:3000])


def test_corrective_steps_keep_interaction_groups_apart():
    # With interaction_groups the corrective steps work group by group: W stays exactly
    # block-diagonal and within the budget, the objective never increases, and it ends below
    # the run without them.
    X, y, sw = small_problem(n=300, d=10, seed=9)
    y = y > np.median(y)
    groups = [np.arange(0, 4), np.arange(4, 10)]
    fits = [ConvexFMClassifier(max_iter=15, tol=0, corrective_steps=k, interaction_groups=groups,
                               random_state=0).fit(X, y, sw) for k in (0, 2)]
    m = fits[1]
    W = m.interaction_matrix()
    assert np.all(W[:4, 4:] == 0.0) and np.abs(W[:4, :4]).max() > 0 and np.abs(W[4:, 4:]).max() > 0
    assert np.trace(W) <= m.trace_bound_ * (1 + 1e-9)
    obj = np.array(m.history_["objective"])
    assert np.all(np.diff(obj) <= 1e-10 * obj[0])
    assert m.objective_ < fits[0].objective_
