"""MCMC: libFM's Gibbs sampler for the Bayesian FM (Freudenthaler, Schmidt-Thieme & Rendle 2011;
Rendle 2012 §4.3, Algorithm 3).

Model: y_i ~ N(f(x_i), 1/alpha) (regression) or y_i = sign(z_i), z_i ~ N(f(x_i), 1) (probit
classification). Priors w_j ~ N(mu_w, 1/lambda_w), v_jf ~ N(mu_f, 1/lambda_f), w0 ~ N(0, 1/reg0)
(flat when reg0 = 0), with hyper-priors lambda ~ Gamma((alpha_0 + 1)/2, beta_0/2),
mu ~ N(mu_0, 1/(gamma_0 lambda)), alpha ~ Gamma(alpha_0/2, beta_0/2); libFM's defaults
alpha_0 = beta_0 = gamma_0 = 1, mu_0 = 0.

A sweep draws alpha (regression) or the latent z (probit), then w0, (lambda_w, mu_w), every w_j,
and for each factor f (lambda_f, mu_f) and every v_jf, each from its full conditional with the
shared coordinate kernels (``kernels.cd``). All normal variates of a sweep are drawn in a fixed
order from the caller's ``RandomState`` before the kernels run, so the chain does not depend on
the number of threads.

Sample weights s_i multiply each row's Gaussian log-likelihood (an integer weight m equals m
repeated rows for regression; for probit it tempers the latent Gaussian of the row).
"""

from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtr, ndtri

from ..losses import SQUARED
from ._fm_common import row_state
from .als import bias_step, sweep


@dataclass
class MCMCSettings:
    n_iter: int
    probit: bool
    n_burn_in: int
    n_kept: int
    reg_bias: float = 0.0  # prior precision of w0
    alpha_0: float = 1.0
    beta_0: float = 1.0
    gamma_0: float = 1.0
    mu_0: float = 0.0
    refresh_every: int = 10


@dataclass
class Chain:
    """Hyper-parameters and bookkeeping carried across sweeps (and warm starts)."""

    alpha: float
    lambda_w: float
    mu_w: float
    lambda_v: np.ndarray
    mu_v: np.ndarray
    t: int = 0  # sweeps done over the chain's life
    stride: int = 1
    kept_w0: list = field(default_factory=list)
    kept_w: list = field(default_factory=list)
    kept_V: list = field(default_factory=list)

    @classmethod
    def start(cls, n_factors):
        return cls(1.0, 1.0, 0.0, np.ones(n_factors), np.zeros(n_factors))


def draw_latent(pred, ysign, u):
    """z ~ N(pred, 1) truncated to sign(z) = ysign, by inversion (u uniform in (0, 1]).

    With m = ysign * pred, Z = ysign * z ~ N(m, 1) | Z > 0 is Z = m - Phi^{-1}(u Phi(m)).
    Where Phi(m) underflows (m < -37) the tail is exponential: Z ~ Exp(rate -m).
    """
    m = ysign * pred
    phi = ndtr(m)
    with np.errstate(divide="ignore"):
        z = m - ndtri(u * phi)
        tail = phi <= 1e-300
        if np.any(tail):
            z[tail] = -np.log(u[tail]) / -m[tail]
    return ysign * z


def draw_hyper(theta, mu_prev, rs, s):
    """(lambda, mu) of a parameter group from their conditional (Normal-Gamma) posterior.

    ``rs`` is a numpy Generator; ``s`` the MCMCSettings with the hyper-prior constants."""
    theta = np.asarray(theta, dtype=np.float64)
    p = theta.shape[0]
    rate = 0.5 * (s.beta_0 + s.gamma_0 * (mu_prev - s.mu_0) ** 2 + np.sum((theta - mu_prev) ** 2))
    lam = rs.gamma(0.5 * (s.alpha_0 + p + 1), 1.0 / rate)
    mu = rs.normal((theta.sum() + s.gamma_0 * s.mu_0) / (p + s.gamma_0),
                   1.0 / np.sqrt((p + s.gamma_0) * lam))
    return float(lam), float(mu)


def mcmc_solver(data, state, chain, settings, seed, callback=None):
    """Run ``settings.n_iter`` Gibbs sweeps; ``state`` and ``chain`` are updated in place.

    Parameters
    ----------
    data : ColumnData
        ``data.y`` holds regression targets, or labels in {-1, +1} when ``settings.probit``.
    state : FMState
        The current sample.
    chain : Chain
    settings : MCMCSettings
    seed : int
        Sweep t draws from ``numpy.random.default_rng([seed, t])`` (t counts sweeps over the
        chain's life), so a chain continued by a warm start equals one long run.
    callback : callable(iteration, pred, state) -> bool, optional
        Called after each sweep with the training predictions of the new sample.

    Returns
    -------
    state, n_iter, info : info has ``"diverged"`` (None or a message).
    """
    k = state.V.shape[1]
    d = state.w.shape[0]
    sw = data.sw
    sw_total = float(sw.sum())
    target = data.y if not settings.probit else np.zeros_like(data.y)
    E = row_state(data.csr, state, target, SQUARED)  # E[:, 0] = pred - target
    n_done = 0
    for it in range(settings.n_iter):
        rs = np.random.default_rng([seed, chain.t])
        if it and it % settings.refresh_every == 0:
            E = row_state(data.csr, state, target, SQUARED)
        if settings.probit:
            pred = E[:, 0] + target
            target = draw_latent(pred, data.y, 1.0 - rs.random(pred.shape[0]))
            E[:, 0] = pred - target
            alpha = 1.0
        else:
            alpha = rs.gamma(0.5 * (settings.alpha_0 + sw_total),
                             2.0 / (settings.beta_0 + float(np.dot(sw, E[:, 0] ** 2))))
        chain.alpha = float(alpha)
        state.w0 = bias_step(data, E, target, state.w0, SQUARED, settings.reg_bias, alpha=alpha,
                             noise=rs.standard_normal(), sample=True)
        chain.lambda_w, chain.mu_w = draw_hyper(state.w, chain.mu_w, rs, settings)
        noise_w = rs.standard_normal(d)
        lam_v = np.empty(k)
        mu_v = np.empty(k)
        for f in range(k):
            lam_v[f], mu_v[f] = draw_hyper(state.V[:, f], chain.mu_v[f], rs, settings)
        noise_v = rs.standard_normal((k, d))
        chain.lambda_v, chain.mu_v = lam_v, mu_v
        sweep(data, state, E, target, SQUARED, (chain.lambda_w, lam_v), (chain.mu_w, mu_v),
              alpha, (noise_w, noise_v), True)
        chain.t += 1
        n_done = it + 1
        if not (np.all(np.isfinite(E[:, 0])) and state.is_finite()):
            return state, n_done, {"diverged": f"MCMC produced non-finite values at sweep {n_done}"}
        _keep(chain, state, settings)
        if callback is not None and callback(it, E[:, 0] + target, state):
            break
    return state, n_done, {"diverged": None}


def _keep(chain, state, settings):
    """Thinned reservoir of samples for prediction: keep every ``stride``-th sweep after
    burn-in; when more than ``n_kept`` are held, drop every other one and double the stride."""
    t = chain.t - settings.n_burn_in
    if t <= 0 or (t - 1) % chain.stride:
        return
    chain.kept_w0.append(float(state.w0))
    chain.kept_w.append(state.w.copy())
    chain.kept_V.append(state.V.copy())
    if len(chain.kept_w0) > settings.n_kept:
        chain.kept_w0 = chain.kept_w0[::2]
        chain.kept_w = chain.kept_w[::2]
        chain.kept_V = chain.kept_V[::2]
        chain.stride *= 2
