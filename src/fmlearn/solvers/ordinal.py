"""Ordered probit MCMC for the classic FM (:class:`fmlearn.FMOrdinalRegressor`).

Model (Albert & Chib 1993, ordinal data; the FM as the latent mean as in myFM's ordered probit):
labels are classes c = 0..K-1, and

    z_i ~ N(f(x_i), 1),    y_i = c  where  t_{c-1} < z_i <= t_c,

with cut-points t_0 < t_1 < ... < t_{K-2} (t_{-1} = -inf, t_{K-1} = +inf), a flat prior on
them, and the Bayesian FM's priors (:mod:`fmlearn.solvers.mcmc`) on w and V. The bias w0 and
the cut-points are not identified together (adding a constant to both changes nothing), so
w0 is held at 0 and the cut-points carry the offset: in the shared sweep w0 gets a prior of
precision :data:`W0_PRECISION` (its draws stay below 1e-140).

A sweep draws

1. the cut-points given f, with the latent z integrated out (Cowles 1996: z given the
   cut-points mixes slowly when the cut-points are drawn given z, as in Albert & Chib's
   original Gibbs step whose uniform full conditionals shrink with the number of rows), by one
   Metropolis-Hastings step (:func:`draw_cut_points`) whose proposal is a multivariate t
   (:data:`PROPOSAL_DF` degrees of freedom) around the Newton step from the current cut-points
   with the curvature of the log-likelihood there: close to the posterior on large data
   (MovieLens-100K: acceptance 0.8-0.9), and exact MH whatever its quality;
2. each z_i from N(f(x_i), 1) truncated to its class's interval (:func:`draw_truncated`);
3. w, V and their hyper-parameters given z: the regression sweep of the Gibbs sampler
   (``kernels.cd.coordinate_sweep``) with the noise precision held at 1, as for the probit
   classifier.

The log-likelihood of the cut-points, its gradient and its (tridiagonal) Hessian are
:func:`cut_point_terms`. Prediction: P(y = c | x) is the posterior mean over the kept samples
of Phi(t_c - f(x)) - Phi(t_{c-1} - f(x)) (:func:`ordinal_proba`).
"""

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

from ..kernels.cd import (
    Config,
    Model,
    Prior,
    compile_sweep,
    coordinate_sweep,
    gamma_shapes,
    n_normals,
)
from ..kernels.losses import SQUARED
from ..kernels.ordinal import cut_point_sums, truncated_latent
from ..kernels.predict import fm_predict_csr
from ._fm_common import group_index, refresh_row_state, row_state
from .mcmc import _reserve, run_chain, sweep_config

__all__ = ["PROPOSAL_DF", "W0_PRECISION", "CutPoints", "cut_point_terms", "draw_cut_points",
           "draw_truncated", "initial_cut_points", "ordinal_proba", "ordinal_solver"]

#: Prior precision of w0 in the ordinal sweep: w0 is held at 0 (the cut-points carry the offset).
W0_PRECISION = 1e300
#: Degrees of freedom of the cut-points' t proposal (heavier tails than the Gaussian it
#: approximates keep the importance ratio bounded).
PROPOSAL_DF = 8.0


@dataclass
class CutPoints:
    """The cut-points' state across sweeps: ``value`` (K-1,), the MH counts, and the kept
    samples ``samples`` (m, K-1), thinned with the chain's reservoir."""

    value: np.ndarray
    n_accepted: int = 0
    n_proposed: int = 0
    samples: np.ndarray = None


def cut_point_terms(t, f, y, sw, hessian=True):
    """The log-likelihood sum_i s_i log P(y_i | f_i, t) of the cut-points ``t`` (K-1,) with the
    latent z integrated out, its gradient (K-1,) and Hessian (K-1, K-1) in ``t``
    (:func:`fmlearn.kernels.ordinal.cut_point_sums`, one pass over the rows).

    ``y`` holds class indices 0..K-1 (int64), ``f`` the FM scores, ``sw`` the weights. With
    a_i = t_{y_i - 1} - f_i, b_i = t_{y_i} - f_i, P_i = Phi(b_i) - Phi(a_i) and the ratios
    r_b = phi(b)/P, r_a = phi(a)/P: d log P / d b = r_b, d log P / d a = -r_a,
    d^2/db^2 = -b r_b - r_b^2, d^2/da^2 = a r_a - r_a^2, d^2/(da db) = r_a r_b. Returns -inf
    (and no derivatives) when ``t`` is not strictly increasing.
    """
    K1 = t.shape[0]
    if K1 > 1 and not np.all(np.diff(t) > 0):
        return -np.inf, None, None
    grad = np.zeros(K1)
    H = np.zeros((K1, K1))
    ll = cut_point_sums(np.ascontiguousarray(t, dtype=np.float64), f, y, sw, grad, H, hessian)
    return (ll, grad, H) if hessian else (ll, None, None)


def _proposal(t, grad, H):
    """Centre and Cholesky factor of the proposal's precision: the Newton step from ``t``
    with the curvature -H (symmetrised and kept positive definite)."""
    P = -H
    P = 0.5 * (P + P.T)
    scale = np.maximum(np.abs(np.diag(P)), 1e-12)
    P = P + np.diag(1e-9 * scale)
    try:
        L = np.linalg.cholesky(P)
    except np.linalg.LinAlgError:
        P = np.diag(scale)
        L = np.linalg.cholesky(P)
    centre = t + np.linalg.solve(P, grad)
    return centre, L


def _log_q(x, centre, L, df):
    """Log-density (up to a constant shared by every point) of the multivariate t proposal
    with precision L L^T at ``x``."""
    u = L.T @ (x - centre)
    return -0.5 * (df + x.shape[0]) * np.log1p(np.dot(u, u) / df) + np.sum(np.log(np.diag(L)))


def draw_cut_points(cuts, f, y, sw, rs, df=PROPOSAL_DF):
    """One Metropolis-Hastings step of the cut-points given the scores ``f`` (the latent z
    integrated out); ``cuts.value`` updated in place. Returns whether the proposal was taken.

    Proposal from t: t' = c(t) + L(t)^{-T} e sqrt(df / g), e ~ N(0, I), g ~ chi^2_df, where
    c(t) is the Newton step and L L^T = -H(t) (:func:`_proposal`); the reverse density
    q(t | t') is evaluated at the Newton step from t', so the step is exact MH for any f.
    The random numbers (K-1 normals, one chi-square, one uniform) are drawn whatever happens.
    """
    t = cuts.value
    K1 = t.shape[0]
    e = rs.standard_normal(K1)
    g = rs.chisquare(df)
    u = rs.random()
    ll, grad, H = cut_point_terms(t, f, y, sw)
    centre, L = _proposal(t, grad, H)
    prop = centre + np.linalg.solve(L.T, e) * np.sqrt(df / g)
    cuts.n_proposed += 1
    ll2, grad2, H2 = cut_point_terms(prop, f, y, sw)
    if not np.isfinite(ll2):
        return False
    centre2, L2 = _proposal(prop, grad2, H2)
    log_ratio = (ll2 - ll) + _log_q(t, centre2, L2, df) - _log_q(prop, centre, L, df)
    if np.log(u) < log_ratio:
        cuts.value = prop
        cuts.n_accepted += 1
        return True
    return False


def draw_truncated(t, f, y, u):
    """Every row's z ~ N(f_i, 1) truncated to its class's interval (t_{y_i - 1}, t_{y_i}]
    (:func:`fmlearn.kernels.ordinal.truncated_latent`, inversion with ``u`` uniform in
    (0, 1]; an interval above the mean is mirrored, the far tail drawn as exponential)."""
    z = np.empty(f.shape[0])
    truncated_latent(np.ascontiguousarray(t, dtype=np.float64), f, y, u, z)
    return z


def initial_cut_points(y, sw, n_classes):
    """Cut-points of a model with f = 0 at the classes' weighted frequencies: t_c =
    Phi^{-1}(P(y <= c)) (every class present, so strictly increasing)."""
    freq = np.bincount(y, sw, minlength=n_classes)
    cum = np.cumsum(freq)[:-1] / freq.sum()
    return ndtri(cum)


def level_proba(f, cut_points):
    """Class probabilities (n, K) of the scores ``f`` (n,) under one sample's cut-points (K-1,):
    Phi(t_c - f) - Phi(t_{c-1} - f), the differences of a cumulative distribution clipped at 0
    (so each row sums to 1)."""
    K1 = cut_points.shape[0]
    cdf = ndtr(cut_points[None, :] - f[:, None])
    cdf = np.maximum.accumulate(cdf, axis=1)
    out = np.empty((f.shape[0], K1 + 1))
    out[:, 0] = cdf[:, 0]
    out[:, 1:K1] = np.diff(cdf, axis=1)
    out[:, K1] = 1.0 - cdf[:, -1]
    return out


def ordinal_proba(indptr, indices, data, samples, cut_samples):
    """Posterior mean class probabilities (n, K): the average over the kept samples
    (w0 (S,), w (S, d), V (S, d, k)) and cut-points (S, K-1) of :func:`level_proba`.
    Each row sums to 1."""
    n = indptr.shape[0] - 1
    S, K1 = cut_samples.shape
    out = np.zeros((n, K1 + 1))
    f = np.empty(n)
    for s in range(S):
        fm_predict_csr(indptr, indices, data, samples[0][s], samples[1][s], samples[2][s], f)
        out += level_proba(f, cut_samples[s])
    out /= S
    return out / out.sum(axis=1, keepdims=True)


def ordinal_solver(data, state, chain, cuts, settings, seed, callback=None):
    """Run ``settings.n_iter`` sweeps (see the module docstring); ``state``, ``chain`` and
    ``cuts`` are updated in place and the kept cut-points follow the chain's reservoir.

    ``data`` (:class:`~fmlearn.solvers._fm_common.ColumnData`) holds the class indices
    0..K-1 as ``y``; ``settings`` an :class:`~fmlearn.solvers.mcmc.MCMCSettings` with
    ``probit=True`` and ``reg_bias`` = :data:`W0_PRECISION`. Sweep t draws from
    ``default_rng([seed, t])``. ``callback(it, f)``, with ``f`` the training rows' scores of
    the sweep's sample, returning True stops. Returns
    ``(state, n_iter, info)`` as :func:`~fmlearn.solvers.mcmc.mcmc_solver`.
    """
    d, k = state.V.shape
    y = data.y.astype(np.int64)
    sw = data.sw
    group, size = settings.groups if settings.groups is not None else group_index(None, d)
    prior = Prior(group, size, chain.lambda_w, chain.mu_w, chain.lambda_v, chain.mu_v)
    cfg = Config(SQUARED, 1.0, True, True, False, float(settings.reg_bias),
                 settings.alpha_0, settings.beta_0, settings.gamma_0, settings.mu_0,
                 float(settings.relax))
    shapes = gamma_shapes(d, k, size, cfg, float(sw.sum()))
    nz = n_normals(d, k, size.shape[0])
    model = Model(state.w, state.V, np.array([state.w0, 1.0]))
    target = np.zeros(y.shape[0])
    E = row_state(data.csr, state, target, SQUARED)
    _reserve(chain, state, settings)
    m = chain.samples[0].shape[0]
    if cuts.samples is None or cuts.samples.shape[0] < m:
        buf = np.empty((m, cuts.value.shape[0]))
        if cuts.samples is not None:
            buf[:chain.n_samples] = cuts.samples[:chain.n_samples]
        cuts.samples = buf
    compile_sweep(data.cols, data.plan, prior, model, E, np.zeros(nz), shapes, cfg)
    before = {}

    def sweep(rs):
        nonlocal target
        pred = E[:, 0] + target
        draw_cut_points(cuts, pred, y, sw, rs)
        target = draw_truncated(cuts.value, pred, y, 1.0 - rs.random(pred.shape[0]))
        E[:, 0] = pred - target
        before["n"], before["stride"] = chain.n_samples, chain.stride
        return coordinate_sweep(data.cols, data.plan, prior, model, E, rs.standard_normal(nz),
                                rs.standard_gamma(shapes), sweep_config(cfg, chain, settings))

    def after(it):
        _mirror_keep(cuts, chain, before["n"], before["stride"])
        return callback is not None and callback(it, E[:, 0] + target)

    return run_chain(settings, seed, chain, state, model, sweep,
                     lambda: refresh_row_state(E, data.csr, state, target), after)


def _mirror_keep(cuts, chain, n_before, stride_before):
    """Keep the cut-points the chain's reservoir kept (``solvers.mcmc._keep``: written at
    slot n_before, then every other slot when the reservoir was halved)."""
    if chain.stride != stride_before:
        cuts.samples[n_before] = cuts.value
        half = cuts.samples[:n_before + 1:2].copy()
        cuts.samples[:half.shape[0]] = half
    elif chain.n_samples == n_before + 1:
        cuts.samples[n_before] = cuts.value
