"""Generalized FM (seed 000/003 Algorithm 1) and moment elimination (seed 001 Algorithm 1).

Oracles: every solver step against a dense NumPy transcription of the printed algorithm (with
the documented fixes). Planted truths: recovery to the accuracies of the papers' theorems
(linear rate, a floor proportional to the label noise), and the failure modes the fixes are
about (the unshifted, the printed-moment and the G-for-w variants diverge).
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import fmlearn
from fmlearn import GFMRegressor
from fmlearn.datasets import make_gfm
from fmlearn.diagnostics import feature_moments, moment_invertibility, recovery_error
from fmlearn.exceptions import ConvergenceWarning, DivergenceError
from fmlearn.gfm import SmallBatchWarning
from fmlearn.linalg import symmetric_low_rank
from fmlearn.solvers import moment as moment_mod
from fmlearn.solvers.one_pass import OnePassSettings, new_state, one_pass_step


# -- dense oracles ------------------------------------------------------------------------------
def oracle_step(X, y, w, U, V, correction="shift", coef=None):
    """000 Algorithm 1 lines 5-8 (one step from a non-empty state), dense d x d, no intercept.

    ``correction="moment"``: 001 Eq. 7-10 with the fixes (- 1/2 P0 I; H for w)."""
    n, d = X.shape
    M = (U @ V.T + V @ U.T) / 2
    r = y - X @ w - np.einsum("ij,jk,ik->i", X, M, X)
    H1 = (X.T * r) @ X / (2 * n)
    h2 = r.mean()
    h3 = X.T @ r / n
    if correction == "shift":
        E = H1 - 0.5 * h2 * np.eye(d)
        dw = h3
    else:
        P0, P1 = h2, h3
        P2 = (X * X).T @ r / n - P0
        E = H1 - 0.5 * P0 * np.eye(d) - 0.5 * np.diag(coef[:, 0] * P1 + coef[:, 1] * P2)
        dw = coef[:, 2] * P1 + coef[:, 3] * P2
    Q, R = np.linalg.qr((E + M) @ U)
    Q = Q * np.sign(np.diag(R))
    return w + dw, Q, (E + M) @ Q


def oracle_coefficients(X):
    """G and H of 001 Eq. 8-9 from the empirical moments, by explicit 2 x 2 solves."""
    k3 = (X ** 3).mean(0)
    k4 = (X ** 4).mean(0)
    out = []
    for a, b in zip(k3, k4, strict=False):
        A = np.array([[1.0, a], [a, b - 1.0]])
        out.append(np.concatenate([np.linalg.solve(A, [a, b - 3.0]),
                                   np.linalg.solve(A, [1.0, 0.0])]))
    return np.array(out)


def planted(d=12, k=2, seed=0):
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.standard_normal((d, k)))[0]
    lam = np.array([1.5, -1.0, 1.2, -1.7, 1.1])[:k]
    return rng.standard_normal(d) / np.sqrt(d), Q, lam


@pytest.mark.parametrize("correction", ["shift", "moment"])
def test_step_matches_dense_oracle(correction):
    rng = np.random.default_rng(1)
    d, k, n = 12, 2, 400
    if correction == "moment":
        X = rng.exponential(size=(n, d)) - 1.0
    else:
        X = rng.standard_normal((n, d))
    y = rng.standard_normal(n)
    U = np.linalg.qr(rng.standard_normal((d, k)))[0]
    V = rng.standard_normal((d, k))
    w = rng.standard_normal(d)
    st = new_state(d, k)
    st.w, st.U, st.V, st.t = w.copy(), U.copy(), V.copy(), 3
    st.mean, st.scale, st.ref_norm = np.zeros(d), np.ones(d), 100.0
    coef = oracle_coefficients(X) if correction == "moment" else None
    st.coef = coef
    settings = OnePassSettings(k, correction=correction, fit_intercept=False, standardize=False)
    new, info = one_pass_step(X, y, np.ones(n), st, settings)
    w2, U2, V2 = oracle_step(X, y, w, U, V, correction, coef)
    np.testing.assert_allclose(new.w, w2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(new.U, U2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(new.V, V2, rtol=1e-10, atol=1e-12)
    assert new.t == 4 and info["diverged"] is None


def test_moment_coefficients_match_explicit_solves():
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.exponential(size=5000) - 1, rng.standard_normal(5000),
                         rng.uniform(-1, 1, 5000) * np.sqrt(3)])
    kappa, phi = (X ** 3).mean(0), (X ** 4).mean(0)
    np.testing.assert_allclose(moment_mod.moment_coefficients(kappa, phi),
                               oracle_coefficients(X), rtol=1e-10)
    # Gaussian moments: G = 0 and H = (1, 0), i.e. the method is seed 000's.
    np.testing.assert_allclose(moment_mod.moment_coefficients([0.0], [3.0]), [[0, 0, 1, 0]],
                               atol=1e-15)


def test_first_batch_is_spectral_initialisation():
    # U^(0) = top-k eigenvectors (by magnitude) of H1 - h2/2 I, V = (H1 - h2/2 I) U, w = h3.
    w_true, Q, lam = planted(d=15, k=3)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((900, 15))
    y = X @ w_true + ((X @ Q) ** 2) @ lam
    settings = OnePassSettings(3, fit_intercept=False, standardize=False)
    st, _ = one_pass_step(X, y, np.ones(900), new_state(15, 3), settings)
    E = (X.T * y) @ X / (2 * 900) - 0.5 * y.mean() * np.eye(15)
    vals, vecs = np.linalg.eigh(E)
    top = vecs[:, np.argsort(-np.abs(vals))[:3]]
    np.testing.assert_allclose(st.U @ st.U.T, top @ top.T, atol=1e-10)
    np.testing.assert_allclose(st.V, E @ st.U, atol=1e-10)
    np.testing.assert_allclose(st.w, X.T @ y / 900, atol=1e-12)


# -- planted recovery ---------------------------------------------------------------------------
def _stream_fit(dist="gaussian", c=10, T=20, noise=0.0, solver="one_pass", d=100, k=5, seed=0,
                **kw):
    n = c * k * d
    X, y, truth = make_gfm((T + 1) * n, d, k, noise=noise, distribution=dist, random_state=seed)
    m = GFMRegressor(k, solver=solver, batch_size=n, max_iter=1, random_state=0, **kw)
    return m.fit(X, y, truth=truth), truth


def test_noise_free_gaussian_linear_rate():
    # 000 Theorem 1: eps_t <= delta^t eps_0 with delta = O(1/sqrt(n)); issue bar: <= 1e-8 after
    # 20 batches of n = 10 k d (d = 100, k = 5, mixed-sign M*).
    m, _ = _stream_fit(c=10, T=20)
    err = np.array(m.history_["recovery_error"])
    assert err.shape == (21,)
    assert err[-1] <= 1e-8
    # Geometric decrease: a log-linear fit explains the curve and its rate is well below 1.
    t = np.arange(err.shape[0])
    slope, icept = np.polyfit(t, np.log(err), 1)
    rate = np.exp(slope)
    assert rate < 0.5
    resid = np.log(err) - (slope * t + icept)
    assert np.max(np.abs(resid)) < 1.5  # within a factor e^1.5 of the fitted line everywhere
    assert np.all(np.diff(np.log(err)) < 0.1)  # (almost) monotone


def test_rate_improves_with_batch_size():
    # delta ~ 1/sqrt(n): a 4x larger batch roughly halves the per-batch rate.
    rates = []
    for c in (5, 20):
        m, _ = _stream_fit(c=c, T=8, d=60, k=3, seed=1)
        err = np.array(m.history_["recovery_error"])
        rates.append(np.exp(np.polyfit(np.arange(err.shape[0]), np.log(err), 1)[0]))
    assert rates[1] < 0.75 * rates[0]


def test_noise_floor_is_proportional_to_noise():
    # 000 Theorem 15: the error levels off at O(r / (1 - q)) with r = O(xi / sqrt(n)).
    floors = []
    for sigma in (0.1, 0.01):
        m, _ = _stream_fit(c=10, T=14, noise=sigma, d=60, k=3, seed=2)
        floors.append(np.median(m.history_["recovery_error"][-5:]))
    assert 1e-4 < floors[0] < 0.05
    assert 5 < floors[0] / floors[1] < 20


def test_small_batch_diverges_and_large_converges():
    # n <= k d diverges (the prototype); the estimator stops and says why.
    X, y, truth = make_gfm(40 * 500, 100, 5, random_state=4)
    with pytest.warns(SmallBatchWarning):
        m = GFMRegressor(5, batch_size=500, max_iter=1, random_state=0)
        with pytest.raises(DivergenceError, match="batch"):
            m.fit(X, y, truth=truth)
    assert not hasattr(m, "working_U_")


def test_divergence_keeps_previous_state():
    X, y, truth = make_gfm(20 * 1500, 30, 2, random_state=5)
    m = GFMRegressor(2, batch_size=1500, max_iter=1, random_state=0).fit(X, y)
    before = m.predict(X[:50])
    Xe = np.random.default_rng(0).exponential(size=(60 * 150, 30)) - 1
    ye = make_gfm(60 * 150, 30, 2, distribution="exponential", truth=truth, random_state=1)[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallBatchWarning)
        with pytest.raises(DivergenceError, match="keeps its previous state"):
            m.set_params(batch_size=150).fit(Xe, ye)
    np.testing.assert_array_equal(m.predict(X[:50]), before)


# -- non-Gaussian features: seed 001 --------------------------------------------------------
def test_skewed_features_one_pass_fails_moment_converges():
    # Issue bar: on centred exponential features (n = 5 k d), 000's algorithm diverges while
    # moment elimination reaches ~1e-5.
    with pytest.raises(DivergenceError):
        _stream_fit("exponential", c=5, T=30)
    m, _ = _stream_fit("exponential", c=5, T=30, solver="moment")
    assert m.history_["recovery_error"][-1] < 1e-4
    assert np.all(np.isfinite(m.moment_coef_))


def test_one_pass_with_safeguard_converges_on_skewed_features():
    # The truth is a fixed point whatever the feature law (r = 0 there); on skewed features the
    # plain step overshoots (the kappa and phi - 3 terms of 001 Theorem 4 make it expansive),
    # and the monotone safeguard's halved step turns it back into a contraction.
    m, _ = _stream_fit("exponential", c=5, T=25, d=60, k=3, safeguard=True)
    err = np.array(m.history_["recovery_error"])
    assert np.all(np.isfinite(err)) and err[-1] < 1e-3


@pytest.mark.parametrize("dist", ["uniform", "beta"])
def test_one_pass_is_unbiased_on_mild_sub_gaussian_features(dist):
    # The extra moment terms vanish at the truth: the plain method converges here.
    m, _ = _stream_fit(dist, c=10, T=18, d=60, k=3)
    assert m.history_["recovery_error"][-1] < 1e-5


def test_rademacher_features_recover_the_diagonal_and_warn_tau():
    # tau = 0 (001 Proposition 1): the diagonal is not identifiable from moments, yet the
    # low-rank structure pins it down; the moment solver warns (a caution, not a verdict).
    m, _ = _stream_fit("rademacher", c=10, T=20, d=60, k=3)
    assert m.history_["recovery_error"][-1] < 1e-6
    with pytest.warns(UserWarning, match="tau"):
        mm, _ = _stream_fit("rademacher", c=10, T=3, d=60, k=3, solver="moment")
    assert np.all(mm.moment_tau_ < 1e-8)


def test_printed_moment_operator_diverges_on_gaussian(monkeypatch):
    # 001 Eq. (7) as printed lacks - 1/2 P0 I: it diverges for k >= 3 even on Gaussian data.
    def printed(coef, h2, h3, q):
        return -0.5 * (coef[:, 0] * h3 + coef[:, 1] * (q - h2))

    m, _ = _stream_fit(c=5, T=12, d=60, k=3, solver="moment", fit_intercept=False)
    assert m.history_["recovery_error"][-1] < 1e-2
    monkeypatch.setattr(moment_mod, "diagonal_correction", printed)
    with pytest.raises(DivergenceError):
        _stream_fit(c=5, T=30, d=60, k=3, solver="moment", fit_intercept=False)


def test_w_update_with_G_instead_of_H_fails(monkeypatch):
    # Appendix E writes G for the w-update (Eq. 10 has H); with G the error does not converge.
    def with_G(coef, h2, h3, q):
        return coef[:, 0] * h3 + coef[:, 1] * (q - h2)

    monkeypatch.setattr(moment_mod, "linear_update", with_G)
    try:
        m, _ = _stream_fit("exponential", c=5, T=15, d=60, k=3, solver="moment")
        assert m.history_["recovery_error"][-1] > 1e-1
    except DivergenceError:
        pass


@pytest.mark.parametrize("variant", ["none", "full_h2"])
def test_lemma10_shift_as_printed_diverges(variant, monkeypatch):
    # 000 Lemma 10 prints tr(.) and - h2 I; the algorithm's 1/2 tr / - 1/2 h2 I is right.
    # Without an intercept (the paper's model) dropping the shift, or using - h2 I, diverges.
    from fmlearn.solvers import one_pass

    real = one_pass._diagonal_term

    def shifted(d, h2, h3, q, state, settings):
        if variant == "none":
            return np.zeros(d)
        return 2.0 * real(d, h2, h3, q, state, settings)

    m, _ = _stream_fit(c=10, T=12, d=60, k=3, fit_intercept=False)
    assert m.history_["recovery_error"][-1] < 1e-4
    monkeypatch.setattr(one_pass, "_diagonal_term", shifted)
    with pytest.raises(DivergenceError):
        _stream_fit(c=10, T=30, d=60, k=3, fit_intercept=False)


# -- estimator behaviour --------------------------------------------------------------------
def test_fit_equals_partial_fit_and_warm_start():
    X, y, truth = make_gfm(8 * 1000, 20, 2, random_state=6)
    a = GFMRegressor(2, batch_size=1000, max_iter=1, random_state=0).fit(X, y, truth=truth)
    b = GFMRegressor(2, random_state=0)
    for i in range(8):
        b.partial_fit(X[1000 * i:1000 * (i + 1)], y[1000 * i:1000 * (i + 1)], truth=truth)
    for name in ("working_w_", "working_U_", "working_V_", "mean_", "scale_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.working_intercept_ == b.working_intercept_
    assert a.history_["recovery_error"] == b.history_["recovery_error"]
    assert a.n_batches_ == b.n_batches_ == 8
    c = GFMRegressor(2, batch_size=1000, max_iter=1, warm_start=True, random_state=0)
    c.fit(X[:4000], y[:4000]).fit(X[4000:], y[4000:])
    np.testing.assert_array_equal(c.predict(X[:100]), a.predict(X[:100]))


def test_results_do_not_depend_on_threads(monkeypatch):
    from fmlearn.solvers import _one_pass_data

    monkeypatch.setattr(_one_pass_data, "CHUNK_VALUES", 2000)  # many chunks even on small data
    X, y, truth = make_gfm(4 * 3000, 20, 2, random_state=15)
    fits = [GFMRegressor(2, solver="moment", batch_size=3000, max_iter=1, n_jobs=j,
                         random_state=0).fit(sp.csr_matrix(X) if sparse else X, y)
            for sparse in (False, True) for j in (1, 2)]
    np.testing.assert_array_equal(fits[0].working_V_, fits[1].working_V_)
    np.testing.assert_array_equal(fits[2].working_V_, fits[3].working_V_)
    np.testing.assert_array_equal(fits[0].predict(X), fits[1].predict(X))


def test_sparse_equals_dense_and_float32_close():
    X, y, truth = make_gfm(6 * 800, 20, 2, random_state=7)
    X[np.abs(X) < 0.5] = 0.0  # real zeros, so CSR differs from dense
    kw = dict(batch_size=800, max_iter=1, random_state=0)
    for solver in ("one_pass", "moment"):
        dense = GFMRegressor(2, solver=solver, **kw).fit(X, y)
        csr = GFMRegressor(2, solver=solver, **kw).fit(sp.csr_matrix(X), y)
        np.testing.assert_allclose(csr.predict(sp.csr_matrix(X)), dense.predict(X), rtol=1e-9,
                                   atol=1e-9)
        np.testing.assert_allclose(csr.working_V_, dense.working_V_, atol=1e-9)
    f32 = GFMRegressor(2, **kw).fit(X.astype(np.float32), y)
    f64 = GFMRegressor(2, **kw).fit(X, y)
    assert f32.working_V_.dtype == np.float32
    np.testing.assert_allclose(f32.predict(X), f64.predict(X), rtol=1e-3, atol=1e-3)


@pytest.mark.blas
def test_standardisation_is_an_exact_reparametrisation():
    # Fitting on s * x + m gives the same function of x; reported parameters are in input units.
    X, y, truth = make_gfm(10 * 1000, 15, 2, random_state=8)
    s = np.linspace(0.5, 3.0, 15)
    m0 = np.linspace(-2.0, 5.0, 15)
    a = GFMRegressor(2, batch_size=1000, max_iter=1, random_state=0).fit(X, y, truth=truth)
    b = GFMRegressor(2, batch_size=1000, max_iter=1, random_state=0).fit(X * s + m0, y)
    np.testing.assert_allclose(b.predict(X * s + m0), a.predict(X), rtol=1e-8, atol=1e-8)
    # Model in input coordinates reproduces predict: b + x w + x^T M x.
    Z = X[:20] * s + m0
    direct = b.intercept_ + Z @ b.w_ + np.einsum("ij,jk,ik->i", Z, b.M_.toarray(), Z)
    np.testing.assert_allclose(direct, b.predict(Z), rtol=1e-8, atol=1e-8)
    # and the recovered model is the planted one
    assert a.history_["recovery_error"][-1] < 1e-4
    np.testing.assert_allclose(a.w_, truth.w, atol=1e-4)
    assert abs(a.intercept_) < 1e-4


def test_recovery_error_matches_dense_computation():
    rng = np.random.default_rng(9)
    U, V = rng.standard_normal((10, 2)), rng.standard_normal((10, 2))
    Ut, Vt = rng.standard_normal((10, 3)), rng.standard_normal((10, 3))
    for zero in (False, True):
        M = symmetric_low_rank(U, V, zero_diagonal=zero)
        Mt = symmetric_low_rank(Ut, Vt, zero_diagonal=zero)
        w, wt = rng.standard_normal(10), rng.standard_normal(10)
        dense = ((np.linalg.norm(w - wt) + np.linalg.norm(M.toarray() - Mt.toarray(), 2))
                 / (np.linalg.norm(wt) + np.linalg.norm(Mt.toarray(), 2)))
        assert recovery_error(w, M, wt, Mt) == pytest.approx(dense, rel=1e-10)
        assert recovery_error(w, M, wt, Mt.toarray()) == pytest.approx(dense, rel=1e-10)


def test_moment_invertibility_values():
    rng = np.random.default_rng(10)
    n = 200_000
    X = np.column_stack([rng.standard_normal(n), rng.exponential(size=n) - 1,
                         rng.choice([-1.0, 1.0], n), rng.uniform(-1, 1, n), np.full(n, 3.0)])
    tau = moment_invertibility(X)
    # (the exponential's sample fourth moment converges slowly: its 8th moment is large)
    np.testing.assert_allclose(tau[[0, 3]], [2.0, 0.8], atol=0.1)
    assert abs(tau[1] - 4.0) < 0.5 and tau[2] < 1e-9
    assert tau[4] == 0.0
    # sparse input gives the same moments (power sums instead of a dense copy)
    Xs = X.copy()
    Xs[rng.random(Xs.shape) < 0.3] = 0.0
    dense, sparse = feature_moments(Xs), feature_moments(sp.csr_matrix(Xs))
    for key in dense:
        np.testing.assert_allclose(sparse[key], dense[key], rtol=1e-8, atol=1e-10)


def test_reused_passes_are_monotone_on_small_data():
    rng = np.random.default_rng(11)
    X = rng.standard_normal((200, 10))
    y = X[:, 0] + 0.5 * X[:, 1] * X[:, 2] + 0.3 * rng.standard_normal(200)
    m = GFMRegressor(3, random_state=0).fit(X, y)  # one batch, passes until converged
    rmse = np.array(m.history_["rmse"])
    assert m.n_passes_ > 3
    assert np.all(np.diff(rmse[2:]) <= 1e-10 * rmse[2:-1])
    assert m.score(X, y) > 0.8


def test_bad_input_and_truth():
    X, y, truth = make_gfm(500, 8, 2, random_state=12)
    m = GFMRegressor(2)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        m.fit(Xn, y)
    with pytest.raises(ValueError, match="truth M has shape"):
        m.fit(X, y, truth=(truth.w, np.eye(7)))
    with pytest.raises(ValueError, match="truth w has shape"):
        m.fit(X, y, truth=(np.ones(3), truth.M))
    with pytest.raises(ValueError, match="eval_set"):
        m.fit(X, y, eval_set=X)
    with pytest.raises(ValueError, match="solver"):
        GFMRegressor(solver="sgd").fit(X, y)


def test_eval_set_and_history():
    X, y, truth = make_gfm(12 * 1000, 10, 2, noise=0.1, random_state=13)
    m = GFMRegressor(2, batch_size=1000, max_iter=1, random_state=0)
    m.fit(X[:10000], y[:10000], truth=truth, eval_set=(X[10000:], y[10000:]))
    assert len(m.history_["val"]) == len(m.history_["rmse"]) == m.n_iter_ == 10
    assert m.history_["val"][-1] < 0.2
    assert m.history_["val"][-1] < m.history_["val"][0]


def test_save_load_roundtrip(tmp_path):
    X, y, truth = make_gfm(5 * 600, 12, 2, random_state=14)
    for solver in ("one_pass", "moment"):
        m = GFMRegressor(2, solver=solver, batch_size=600, max_iter=1, random_state=0).fit(X, y)
        path = m.save(tmp_path / f"{solver}.fmz")
        m2 = fmlearn.load(path)
        np.testing.assert_array_equal(m2.predict(X), m.predict(X))
        np.testing.assert_array_equal(m2.M_.toarray(), m.M_.toarray())
        m2.partial_fit(X[:600], y[:600])  # a loaded model continues the stream
        assert m2.n_batches_ == m.n_batches_ + 1


def test_reproduction_quick(tmp_path, capsys):
    from fmlearn import reproduce

    res = reproduce.run("gfm-convergence", tmp_path, quick=True)
    assert (tmp_path / "gfm_convergence.png").stat().st_size > 0
    th = res["threshold"]
    assert th[10][-1] < 1e-3 < np.nanmax(th[1])  # the threshold in c is visible
    assert th[10][-1] < th[5][-1] < th[3][-1]
    floors = {s: np.median(e[-5:]) for s, e in res["noise"].items()}
    assert floors[0.0] < floors[0.01] < floors[0.1]
    assert "rate/batch" in capsys.readouterr().out


# -- no silent stall (issue 10, item 6) ---------------------------------------------------------
def _stall_run(dist, noise=0.0, T=20, **kw):
    d, k = 100, 3
    n = 10 * k * d
    X, y, truth = make_gfm(T * n, d, k, noise=noise, distribution=dist, random_state=0)
    return GFMRegressor(k, batch_size=n, max_iter=1, random_state=0, **kw), X, y, truth


def test_one_pass_on_skewed_features_warns_with_the_remedy():
    # The repro of issue 10: plain one-pass gFM on centred exponential features (d = 100,
    # k = 3, n = 10 k d per batch) used to wander at 5-45% relative error without a word.
    m, X, y, truth = _stall_run("exponential")
    with pytest.warns(ConvergenceWarning, match=r"solver='moment' or IFMRegressor"):
        m.fit(X, y, truth=truth)
    assert m.history_["recovery_error"][-1] > 0.05  # it did stall
    # The remedies reach the truth on the same stream.
    mm, *_ = _stall_run("exponential", solver="moment")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        mm.fit(X, y, truth=truth)
    assert mm.history_["recovery_error"][-1] < 1e-4


@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_no_stall_warning_on_gaussian_features(noise):
    m, X, y, truth = _stall_run("gaussian", noise=noise)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m.fit(X, y, truth=truth)
    assert m.history_["recovery_error"][-1] < (1e-6 if noise == 0 else 0.2)
    change = np.array(m.history_["change"][1:])
    assert change.shape == (19,) and np.all(np.isfinite(change))


def test_stall_warning_also_through_partial_fit():
    m, X, y, _ = _stall_run("exponential")
    n = X.shape[0] // 20
    with pytest.warns(ConvergenceWarning, match="not converging") as rec:
        for t in range(20):
            m.partial_fit(X[t * n:(t + 1) * n], y[t * n:(t + 1) * n])
    # reported once when the stall starts, not on every later batch
    assert sum("not converging" in str(r.message) for r in rec) == 1


def test_nan_in_a_later_batch_is_a_clear_error_and_keeps_the_model():
    # The finiteness of a dense X is checked by the solver's first read of each batch (not by
    # a separate read): an error in batch 3 must still leave the fitted model untouched.
    X, y, _ = make_gfm(4000, 10, 2, random_state=3)
    m = GFMRegressor(2, batch_size=1000, random_state=0).fit(X, y)
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(m).items()}
    bad = X.copy()
    bad[2500, 4] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        m.fit(bad, y)
    with pytest.raises(ValueError, match="y contains NaN"):
        m.fit(X, np.where(np.arange(4000) == 7, np.nan, y))
    for key, value in before.items():
        np.testing.assert_array_equal(getattr(m, key), value)


def test_unconverged_passes_warning_says_how_far_and_what_to_change():
    # Three passes over 2 batches cannot settle to tol=1e-12: the warning gives the last
    # pass's relative change of the training RMSE (the fit's own history) and the remedies.
    X, y, _ = make_gfm(2 * 600, 8, 2, noise=0.5, random_state=3)
    with pytest.warns(ConvergenceWarning, match="in the last of 3 passes") as rec:
        m = GFMRegressor(2, batch_size=600, max_iter=3, tol=1e-12, random_state=0).fit(X, y)
    msg = str(rec[0].message)
    r = np.asarray(m.history_["rmse"]).reshape(3, 2) ** 2
    passes = np.sqrt(r.mean(axis=1))
    assert f"{abs(passes[1] - passes[2]) / passes[1]:.2g} (relative)" in msg
    assert "raise max_iter" in msg and "tol=None" in msg
