"""fmlearn.solvers.ordinal: the cut-points' log-likelihood, gradient and Hessian against a slow
NumPy oracle and finite differences, the truncated latent draw against scipy's truncnorm, the
Metropolis-Hastings step against the posterior on a grid, and the kept cut-points in step with
the chain's kept samples."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from scipy.special import log_ndtr as scipy_log_ndtr
from scipy.special import ndtri

from fmlearn.kernels.ordinal import _ndtri_lower, log_interval, log_ndtr
from fmlearn.kernels.predict import fm_predict_csr
from fmlearn.solvers._fm_common import column_data, init_state
from fmlearn.solvers.mcmc import Chain, MCMCSettings
from fmlearn.solvers.ordinal import (
    W0_PRECISION,
    CutPoints,
    cut_point_terms,
    draw_cut_points,
    draw_truncated,
    ordinal_proba,
    ordinal_solver,
)


def _oracle_loglik(t, f, y, sw):
    """Row by row: log(Phi(t_y - f) - Phi(t_{y-1} - f)) with the ends at -+inf."""
    ext = [-np.inf, *t, np.inf]
    total = 0.0
    for fi, yi, si in zip(f, y, sw, strict=True):
        total += si * np.log(stats.norm.cdf(ext[yi + 1] - fi) - stats.norm.cdf(ext[yi] - fi))
    return total


def _case(seed=0, n=60, K=4):
    rng = np.random.default_rng(seed)
    f = rng.normal(0, 0.8, n)
    t = np.sort(rng.normal(0, 1, K - 1)) + np.arange(K - 1) * 0.3
    y = np.searchsorted(t, f + rng.normal(size=n))
    y[:K] = np.arange(K)  # every class present
    sw = rng.uniform(0.5, 2.0, n)
    return t, f, y.astype(np.int64), sw


@pytest.mark.parametrize("K", [2, 3, 5])
def test_cut_point_terms_match_oracle_and_finite_differences(K):
    t, f, y, sw = _case(K=K)
    ll, grad, H = cut_point_terms(t, f, y, sw)
    assert ll == pytest.approx(_oracle_loglik(t, f, y, sw), rel=1e-12)
    h = 1e-5
    fd_grad = np.empty(K - 1)
    fd_H = np.empty((K - 1, K - 1))
    for c in range(K - 1):
        e = np.zeros(K - 1)
        e[c] = h
        fd_grad[c] = (_oracle_loglik(t + e, f, y, sw) - _oracle_loglik(t - e, f, y, sw)) / (2 * h)
        fd_H[c] = (cut_point_terms(t + e, f, y, sw)[1] - cut_point_terms(t - e, f, y, sw)[1]) / (
            2 * h)
    # central differences: error O(h^2 * third derivative) ~ 1e-9 relative to O(n) terms
    np.testing.assert_allclose(grad, fd_grad, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(H, fd_H, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(H, H.T)


def test_unordered_cut_points_have_zero_likelihood():
    t, f, y, sw = _case(K=4)
    assert cut_point_terms(t[::-1].copy(), f, y, sw)[0] == -np.inf


def test_log_ndtr_and_inverse_match_scipy():
    x = np.concatenate([np.linspace(-60, 10, 1401), [-29.999, -30.0, -30.001, 5.999, 6.001]])
    ours = np.array([log_ndtr(v) for v in x])
    np.testing.assert_allclose(ours, scipy_log_ndtr(x), rtol=2e-14, atol=1e-300)
    assert log_ndtr(-np.inf) == -np.inf and log_ndtr(np.inf) == 0.0
    p = np.concatenate([np.logspace(-300, -1, 600), np.linspace(0.1, 0.5, 401)])
    np.testing.assert_allclose([_ndtri_lower(v) for v in p], ndtri(p), rtol=1e-13, atol=1e-15)


def test_log_interval_is_accurate_in_both_tails():
    # far upper tail: Phi(41) - Phi(40) = Phi(-40) - Phi(-41), about Phi(-40); plain ndtr gives 0
    assert log_interval(40.0, 41.0) == pytest.approx(scipy_log_ndtr(-40.0), rel=1e-12)
    assert log_interval(-41.0, -40.0) == pytest.approx(scipy_log_ndtr(-40.0), rel=1e-12)
    # a narrow interval at the centre: the density times the width
    w = 1e-9
    assert log_interval(0.0, w) == pytest.approx(np.log(w * stats.norm.pdf(0.0)), rel=1e-8)
    assert log_interval(-np.inf, np.inf) == 0.0
    assert log_interval(-np.inf, 0.0) == pytest.approx(np.log(0.5), rel=1e-15)


@pytest.mark.parametrize("lo, hi, f", [(-np.inf, -0.5, 0.3), (0.2, 1.1, -0.4), (1.0, np.inf, -2.0),
                                       (8.0, 9.0, 0.0), (-np.inf, -45.0, 0.0),
                                       (-0.5, np.inf, 0.0), (-3.0, 3.0, 0.5)])
def test_truncated_draws_follow_truncnorm(lo, hi, f):
    rng = np.random.default_rng(1)
    n = 4000
    # the interval (lo, hi] as a class between the cut-points lo and hi (the finite ones)
    t = np.array([v for v in (lo, hi) if np.isfinite(v)])
    cls = 1 if np.isfinite(lo) else 0
    z = draw_truncated(t, np.full(n, f), np.full(n, cls, dtype=np.int64), 1.0 - rng.random(n))
    assert np.all(np.isfinite(z)) and np.all(z >= lo) and np.all(z <= hi)
    if hi > -40:  # scipy's truncnorm cdf (its own far-tail formula) as the reference
        ks = stats.kstest(z, stats.truncnorm(lo - f, hi - f, loc=f).cdf)
        assert ks.pvalue > 1e-3
    else:  # far lower tail: z - hi ~ -Exp(|hi|), mean -1/|hi|
        assert np.mean(z - hi) == pytest.approx(-1.0 / abs(hi), rel=0.05)


def _grid_posterior(f, y, sw, K):
    """Posterior mean and sd of the cut-points under a flat prior, by summation on a grid."""
    g = np.linspace(-3.0, 3.0, 241 if K == 2 else 121)
    if K == 2:
        ll = np.array([cut_point_terms(np.array([a]), f, y, sw, hessian=False)[0] for a in g])
        p = np.exp(ll - ll.max())
        p /= p.sum()
        m = p @ g
        return np.array([m]), np.array([np.sqrt(p @ (g - m) ** 2)])
    A, B = np.meshgrid(g, g, indexing="ij")
    ll = np.full(A.shape, -np.inf)
    for i in range(g.shape[0]):
        for j in range(i + 1, g.shape[0]):
            ll[i, j] = cut_point_terms(np.array([g[i], g[j]]), f, y, sw, hessian=False)[0]
    p = np.exp(ll - ll.max())
    p /= p.sum()
    m = np.array([np.sum(p * A), np.sum(p * B)])
    sd = np.sqrt([np.sum(p * (A - m[0]) ** 2), np.sum(p * (B - m[1]) ** 2)])
    return m, sd


@pytest.mark.parametrize("K", [2, 3])
def test_metropolis_step_samples_the_cut_point_posterior(K):
    # f fixed: the chain of MH steps alone must have the posterior of t given f as its law
    t, f, y, sw = _case(seed=3, n=40, K=K)
    mean, sd = _grid_posterior(f, y, sw, K)
    cuts = CutPoints(np.sort(t))
    rs = np.random.default_rng(0)
    draws = []
    for _ in range(3000):
        draw_cut_points(cuts, f, y, sw, rs)
        draws.append(cuts.value.copy())
    draws = np.array(draws[200:])
    assert cuts.n_accepted / cuts.n_proposed > 0.5
    # Monte Carlo error of a 2800-draw mean with acceptance > 0.5: below 0.05 sd; grid error
    # (step 0.025-0.05 against sd 0.2-0.3) smaller still
    np.testing.assert_allclose(draws.mean(axis=0), mean, atol=0.15 * sd.min())
    np.testing.assert_allclose(draws.std(axis=0), sd, rtol=0.12)


def test_kept_cut_points_follow_the_chain_reservoir():
    # n_kept=4 over 40 sweeps halves the reservoir several times: every kept (w, cut-points)
    # pair must come from the same sweep
    rng = np.random.default_rng(0)
    n, d = 200, 6
    X = sp.csr_matrix(rng.normal(size=(n, d)))
    y = np.digitize(X @ rng.normal(size=d), [-1.0, 0.0, 1.0]).astype(np.float64)
    data = column_data(X, y, np.ones(n))
    state = init_state(d, 2, 0.1, rng, np.float64, random_linear=True)
    chain = Chain.start(2)
    settings = MCMCSettings(n_iter=40, probit=True, n_burn_in=3, n_kept=4, reg_bias=W0_PRECISION)
    cuts = CutPoints(np.array([-1.0, 0.0, 1.0]))
    seen = []

    def record(it, f):
        seen.append((state.w.copy(), cuts.value.copy()))
        direct = np.empty(n)
        fm_predict_csr(X.indptr, X.indices, X.data, 0.0, state.w, state.V, direct)
        np.testing.assert_allclose(f, direct, rtol=1e-9, atol=1e-9)  # the sweep's scores
        return False

    state, n_done, info = ordinal_solver(data, state, chain, cuts, settings, seed=5,
                                         callback=record)
    assert n_done == 40 and info["diverged"] is None and chain.stride > 1
    w_kept = chain.samples[1][:chain.n_samples]
    for s in range(chain.n_samples):
        sweep = next(i for i, (w, _) in enumerate(seen) if np.array_equal(w, w_kept[s]))
        np.testing.assert_array_equal(cuts.samples[s], seen[sweep][1])
    assert abs(state.w0) < 1e-100  # w0 held at 0


def test_ordinal_proba_sums_to_one_and_is_monotone_in_the_score():
    # f(x) = x (w = 1 > 0 in every sample): P(y <= c | x) falls and E[level] rises with x
    x = np.linspace(-4, 4, 81)
    X = sp.csr_matrix(x[:, None])
    S = 3
    samples = (np.zeros(S), np.ones((S, 1)) * np.array([[0.5], [1.0], [2.0]]),
               np.zeros((S, 1, 1)))
    cuts = np.array([[-1.0, 0.0, 1.5], [-0.5, 0.2, 0.9], [-2.0, -1.0, 2.0]])
    P = ordinal_proba(*[X.indptr, X.indices, X.data], samples, cuts)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-14)
    assert np.all(P >= 0)
    cum = np.cumsum(P, axis=1)[:, :-1]
    assert np.all(np.diff(cum, axis=0) <= 1e-15)
    assert np.all(np.diff(P @ np.arange(4)) > 0)
