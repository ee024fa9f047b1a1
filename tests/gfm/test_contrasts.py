"""Contrast targets (seed 001 §4.2): fit(X, y, contrasts=C) and predict_contrasts for the
generalized FM and the iFM through the batch solvers of fmlearn.solvers.contrast_ls."""

import numpy as np
import pytest
import scipy.sparse as sp

from contrast_cases import bad_contrast_cases, double_differences, snapshot
from fmlearn import FMRegressor, GFMRegressor, IFMRegressor
from fmlearn._contrasts import bias_identifiable, check_contrasts
from fmlearn.solvers.contrast_ls import (
    ContrastData,
    ContrastSettings,
    ContrastState,
    _Problem,
    contrast_ls,
)
from reference import contrast_block_oracle, gfm_value

ESTIMATORS = [(GFMRegressor, False), (IFMRegressor, True)]


def planted(d, zero_diagonal, seed):
    """w and a rank-3 M with eigenvalues of both signs (diagonal removed for the iFM)."""
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.standard_normal((d, 3)))[0]
    M = Q @ np.diag([2.0, -1.5, 1.0]) @ Q.T
    if zero_diagonal:
        M -= np.diag(np.diag(M))
    w = rng.standard_normal(d) / np.sqrt(d)
    return lambda X: 0.7 + X @ w + np.einsum("ij,jk,ik->i", X, M, X)


@pytest.mark.parametrize("Est, zd", ESTIMATORS)
def test_planted_model_recovered_from_double_differences(Est, zd):
    rng = np.random.default_rng(1)
    d = 15
    f = planted(d, zd, seed=2)
    X, Xt = rng.standard_normal((900, d)), rng.standard_normal((400, d))
    C, Ct = double_differences(900, 2500, rng), double_differences(400, 800, rng)
    m = Est(n_factors=3, tol=1e-12, random_state=0).fit(X, C @ f(X), contrasts=C)
    truth = Ct @ f(Xt)
    err = np.linalg.norm(m.predict_contrasts(Xt, Ct) - truth) / np.linalg.norm(truth)
    assert err < 1e-4
    # b is not identifiable from double differences: it is held at its start value, and f
    # itself is recovered up to that constant.
    assert m.intercept_ == 0.0 and not m.intercept_fitted_
    shift = f(Xt) - m.predict(Xt)
    assert np.std(shift) < 1e-4 * np.std(f(Xt))
    assert abs(np.mean(shift) - 0.7) < 1e-4


@pytest.mark.parametrize("Est, zd", ESTIMATORS)
def test_identity_contrasts_equal_the_plain_fit(Est, zd):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 8))
    y = planted(8, zd, seed=4)(X) + 0.1 * rng.standard_normal(300)
    for solver in ("lm", "als"):
        kw = dict(n_factors=2, solver=solver, max_iter=8, reg_linear=1e-3, reg_pairwise=1e-2,
                  random_state=0)
        plain = Est(**kw).fit(X, y)
        ident = Est(**kw).fit(X, y, contrasts=sp.identity(300, format="csr"))
        np.testing.assert_allclose(ident.predict(X), plain.predict(X), rtol=0,
                                   atol=1e-12 * np.abs(plain.predict(X)).max())
        assert plain.intercept_fitted_ and abs(plain.intercept_ - 0.7) < 0.2


@pytest.mark.parametrize("zd", [False, True])
def test_als_block_equals_numpy_oracle(zd):
    rng = np.random.default_rng(5)
    n, d, k = 60, 5, 2
    X = rng.standard_normal((n, d))
    C = double_differences(n, 40, rng)
    C = sp.vstack([C, sp.csr_matrix(np.eye(n)[:7])]).tocsr()      # some rows not summing to 0
    y = rng.standard_normal(C.shape[0])
    sw = rng.uniform(0.5, 2, C.shape[0])
    F = rng.standard_normal((d, k))
    settings = ContrastSettings(zero_diagonal=zd, reg_linear=0.3, reg_pairwise=0.7)
    for Xin in (X, sp.csr_matrix(X)):
        prob = _Problem(ContrastData(Xin, C, y, sw), [F], settings, True)
        got = prob.solve(y)
        want = contrast_block_oracle(X, C.toarray(), y, sw, F, zd, True, 0.3, 0.7)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)
        # The matrix-free products are the transpose pair of the same design.
        t, r = rng.standard_normal(prob.p), rng.standard_normal(C.shape[0])
        np.testing.assert_allclose(r @ prob.matvec(t), t @ prob.rmatvec(r), rtol=1e-10)


@pytest.mark.parametrize("method", ["als", "lm"])
def test_objective_never_increases_and_matrix_free_matches_dense(method):
    rng = np.random.default_rng(6)
    X = sp.random(400, 12, density=0.4, format="csr", random_state=6)
    C = double_differences(400, 900, rng)
    y = C @ (rng.standard_normal(400))
    st = ContrastState(np.zeros(12), np.linalg.qr(rng.standard_normal((12, 3)))[0],
                       np.zeros((12, 3)))
    out = {}
    for budget in (2**28, 2**10):
        s = ContrastSettings(zero_diagonal=True, fit_intercept=False, reg_linear=1e-2,
                             reg_pairwise=1e-2, method=method, max_iter=6, exact_iter=True,
                             memory_budget=budget)
        new, n_iter, info = contrast_ls(ContrastData(X, C, y, np.ones(900)), st, s)
        J = np.array(info["objective"])
        assert n_iter == 6 and np.all(np.diff(J) <= 1e-10 * J[:-1])
        out[budget] = new
    np.testing.assert_allclose(out[2**10].U @ out[2**10].V.T, out[2**28].U @ out[2**28].V.T,
                               rtol=1e-6, atol=1e-8)


def _summation_order_tol(model, X, C, sw):
    """How far two ALS fits that are equal in exact arithmetic may end apart in float64.

    Each ALS block is a ridge least-squares solve on the normal matrix N = (C D)' S (C D) +
    reg. A different summation order (dense BLAS against sparse products, the weights in N
    against duplicated rows, the state passed through the input coordinates on a warm start,
    another OpenBLAS kernel) perturbs the solve by a few units of roundoff u, which moves its
    solution by at most about cond(N) u relatively (Higham 2002, §20.1); the sweeps contract
    near the fit, so the same bound holds for the model's values. Returns cond(N) u max|f|
    (the larger cond of the U and V blocks at the fitted state)."""
    from fmlearn.solvers.contrast_ls import ContrastData, ContrastSettings

    data = ContrastData(np.asarray(X) / model.scale_, C, np.zeros(C.shape[0]), sw)
    settings = ContrastSettings(zero_diagonal=True, fit_intercept=False,
                                reg_pairwise=model.reg_pairwise)
    cond = 0.0
    for F in (model.working_U_, model.working_V_):
        prob = _Problem(data, [np.asarray(F, np.float64)], settings, False)
        N, _ = prob.normal(data.y)
        N[np.diag_indices(prob.p)] += prob.reg
        cond = max(cond, np.linalg.cond(N))
    return cond * np.finfo(np.float64).eps * np.max(np.abs(model.predict(X)))


@pytest.mark.blas
def test_warm_start_continues_and_weights_act_per_target():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((200, 6))
    C = double_differences(200, 500, rng)
    y = C @ planted(6, True, seed=8)(X) + 0.05 * rng.standard_normal(500)
    kw = dict(n_factors=2, solver="als", reg_pairwise=1e-3, random_state=0)
    ten = IFMRegressor(max_iter=10, **kw).fit(X, y, contrasts=C)
    five = IFMRegressor(max_iter=5, warm_start=True, **kw).fit(X, y, contrasts=C)
    five.fit(X, y, contrasts=C)
    # The tolerances: cond(N) u max|f| (5e-8 here, cond(N) ~ 2e7; the fits differ by 4e-11 to
    # 3e-10 under the SkylakeX, Haswell and Sandybridge kernels), where ignoring the weights
    # moves the values by 1e-2.
    tol = _summation_order_tol(ten, X, C, np.ones(500))
    assert tol < 1e-6
    np.testing.assert_allclose(five.predict(X), ten.predict(X), rtol=0, atol=tol)
    # A weight of 2 is the target counted twice.
    sw = np.ones(500)
    sw[:100] = 2.0
    a = IFMRegressor(max_iter=4, **kw).fit(X, y, sample_weight=sw, contrasts=C)
    C2 = sp.vstack([C, C[:100]]).tocsr()
    b = IFMRegressor(max_iter=4, **kw).fit(X, np.concatenate([y, y[:100]]), contrasts=C2)
    tol = _summation_order_tol(a, X, C, sw)
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=0, atol=tol)
    # Sparse X gives the same model as dense X.
    c = IFMRegressor(max_iter=4, **kw).fit(sp.csr_matrix(X), y, sample_weight=sw, contrasts=C)
    np.testing.assert_allclose(c.predict(X), a.predict(X), rtol=0, atol=tol)
    # ... and these are real differences, far above the tolerance
    unweighted = IFMRegressor(max_iter=4, **kw).fit(X, y, contrasts=C)
    assert np.max(np.abs(unweighted.predict(X) - a.predict(X))) > 1e3 * tol


def test_intercept_is_learned_when_identifiable_and_held_when_not():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((300, 5))
    f = planted(5, False, seed=10)
    kw = dict(n_factors=3, tol=1e-12, random_state=0)
    plain = GFMRegressor(**kw).fit(X, f(X), contrasts=sp.identity(300, format="csr"))
    assert abs(plain.intercept_ - 0.7) < 1e-8 and plain.intercept_fitted_
    C = double_differences(300, 700, rng)
    warm = GFMRegressor(warm_start=True, **kw)
    warm.fit(X, f(X) + 5.0, contrasts=sp.identity(300, format="csr"))
    b0 = warm.intercept_
    warm.fit(X, C @ f(X), contrasts=C)
    assert warm.intercept_ == pytest.approx(b0, abs=1e-12) and not warm.intercept_fitted_
    assert bias_identifiable(None) and bias_identifiable(sp.identity(3, format="csr"))
    assert not bias_identifiable(C)


def test_bad_contrasts_are_refused_and_change_nothing():
    rng = np.random.default_rng(11)
    X = rng.standard_normal((50, 4))
    C = double_differences(50, 80, rng)
    y = C @ rng.standard_normal(50)
    m = IFMRegressor(n_factors=2, max_iter=2, random_state=0).fit(X, y, contrasts=C)
    before = snapshot(m)
    for Cbad, msg in bad_contrast_cases(C):
        with pytest.raises(ValueError, match=msg):
            m.fit(X[:, :3], y, contrasts=Cbad) if msg == "y has 80" else m.fit(X, y,
                                                                              contrasts=Cbad)
    with pytest.raises(ValueError, match="cannot fit contrasts"):
        IFMRegressor(solver="one_pass").fit(X, y, contrasts=C)
    with pytest.raises(ValueError, match="cannot fit contrasts"):
        GFMRegressor(solver="moment").fit(X, y, contrasts=C)
    with pytest.raises(ValueError, match="one-pass solvers only"):
        m.fit(X, y, contrasts=C, eval_set=(X, X[:, 0]))
    for key, value in before.items():
        np.testing.assert_array_equal(getattr(m, key), value)
    with pytest.raises(ValueError, match="columns but X has 20 rows"):
        m.predict_contrasts(X[:20], C)
    with pytest.raises(ValueError, match="must be"):
        check_contrasts("abc", 3)


@pytest.mark.parametrize("solver", ["als", "lm"])
@pytest.mark.parametrize("Est", [GFMRegressor, IFMRegressor])
def test_overflowing_contrasts_raise_divergence_and_change_nothing(Est, solver):
    # C x 1e300 is finite, so it passes the checks, but C^T C overflows inside the solver:
    # the reliability guide promises DivergenceError (not scipy's "must not contain infs"),
    # and the fitted model stays as it was.
    from fmlearn.exceptions import DivergenceError

    rng = np.random.default_rng(12)
    X = rng.standard_normal((40, 4))
    C = double_differences(40, 60, rng)
    y = C @ rng.standard_normal(40)
    m = Est(n_factors=2, solver=solver, max_iter=2, random_state=0).fit(X, y, contrasts=C)
    before = snapshot(m)
    with pytest.raises(DivergenceError, match="failed numerically"):
        m.fit(X, y * 1e300, contrasts=C * 1e300)
    for key, value in before.items():
        np.testing.assert_array_equal(getattr(m, key), value)


@pytest.mark.parametrize("zd", [False, True])
def test_model_values_equal_the_written_out_model(zd):
    from fmlearn.solvers.contrast_ls import model_values

    rng = np.random.default_rng(12)
    X = rng.standard_normal((30, 6))
    st = ContrastState(rng.standard_normal(6), rng.standard_normal((6, 2)),
                       rng.standard_normal((6, 2)), 0.3)
    want = [gfm_value(x, st.b, st.w, st.U, st.V, zd) for x in X]
    np.testing.assert_allclose(model_values(X, st, zd), want, rtol=1e-12)
    np.testing.assert_allclose(model_values(sp.csr_matrix(X), st, zd), want, rtol=1e-12)


def test_contrast_fit_saves_and_loads(tmp_path):
    from fmlearn.io import load

    rng = np.random.default_rng(13)
    X = rng.standard_normal((100, 5))
    C = double_differences(100, 150, rng)
    m = IFMRegressor(n_factors=2, solver="als", max_iter=3, random_state=0)
    m.fit(X, C @ rng.standard_normal(100), contrasts=C)
    back = load(m.save(tmp_path / "m.fmz"))
    np.testing.assert_array_equal(back.predict_contrasts(X, C), m.predict_contrasts(X, C))
    assert back.intercept_fitted_ is False


def test_auto_solver_on_contrasts_takes_lm_cold_and_als_for_warm_refits():
    import fmlearn._contrasts as contrasts

    rng = np.random.default_rng(14)
    d = 6
    f = planted(d, True, seed=15)
    X, X2 = rng.standard_normal((200, d)), rng.standard_normal((200, d))
    C, C2 = double_differences(200, 500, rng), double_differences(200, 500, rng)
    kw = dict(n_factors=2, reg_linear=1e-2, reg_pairwise=1e-2, random_state=0)
    # Cold and small: LM; the warm-started refit: ALS, at most WARM_AUTO_SWEEPS sweeps.
    cold = IFMRegressor(**kw).fit(X, C @ f(X), contrasts=C)
    assert cold.n_iter_ > contrasts.WARM_AUTO_SWEEPS
    lm = IFMRegressor(solver="lm", max_iter=cold.n_iter_, **kw).fit(X, C @ f(X), contrasts=C)
    np.testing.assert_array_equal(cold.predict(X), lm.predict(X))
    y2 = C2 @ (1.1 * f(X2))
    cold.set_params(warm_start=True).fit(X2, y2, contrasts=C2)
    assert 1 <= cold.n_iter_ <= contrasts.WARM_AUTO_SWEEPS
    als = IFMRegressor(solver="lm", max_iter=lm.n_iter_, warm_start=True, **kw)
    als.fit(X, C @ f(X), contrasts=C)
    als.set_params(solver="als", max_iter=cold.n_iter_).fit(X2, y2, contrasts=C2)
    np.testing.assert_array_equal(cold.predict(X2), als.predict(X2))


# Every estimator and solver that fits contrasts (FM: ALS, MCMC, SGD; gFM and iFM: ALS, LM).
CONTRAST_FITS = [(FMRegressor, dict(solver=s, n_iter=2)) for s in ("als", "mcmc", "sgd")] + [
    (Est, dict(solver=s, max_iter=2)) for Est in (GFMRegressor, IFMRegressor)
    for s in ("als", "lm")]


@pytest.mark.parametrize("Est, kw", CONTRAST_FITS,
                         ids=[f"{E.__name__}-{kw['solver']}" for E, kw in CONTRAST_FITS])
def test_predict_contrasts_refuses_an_overflow_as_predict_does(Est, kw):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 4))
    C = double_differences(40, 60, rng)
    m = Est(n_factors=2, random_state=0, **kw).fit(X, C @ X[:, 0], contrasts=C)
    f = m.predict(X)  # finite scores ...
    assert np.all(np.isfinite(f)) and np.all(np.isfinite(m.predict_contrasts(X, C)))
    # ... whose combination by finite coefficients leaves float64: an error, never inf/NaN
    huge = C * (1e308 / np.max(np.abs(f)))
    with pytest.raises(ValueError, match=r"contrast \d+ overflows float64"):
        m.predict_contrasts(X, huge)
    with pytest.raises(ValueError, match="overflows float64"):
        m.predict(X * 1e200)
