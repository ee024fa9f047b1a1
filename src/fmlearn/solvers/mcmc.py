"""MCMC: libFM's Gibbs sampler for the Bayesian FM (Freudenthaler, Schmidt-Thieme & Rendle 2011;
Rendle 2012 §4.3, Algorithm 3).

Model: y_i ~ N(f(x_i), 1/alpha) (regression) or y_i = sign(z_i), z_i ~ N(f(x_i), 1) (probit
classification). Priors w_j ~ N(mu_w,g, 1/lambda_w,g), v_jf ~ N(mu_f,g, 1/lambda_f,g) where g is
feature j's group (libFM's ``-meta``; one group without it), w0 ~ N(0, 1/reg0) (flat when
reg0 = 0), with hyper-priors lambda ~ Gamma((alpha_0 + 1)/2, beta_0/2),
mu ~ N(mu_0, 1/(gamma_0 lambda)), alpha ~ Gamma(alpha_0/2, beta_0/2); libFM's defaults
alpha_0 = beta_0 = gamma_0 = 1, mu_0 = 0. As in libFM's ``fm_learn_mcmc``, w0 and the noise
precision alpha are not grouped.

A sweep draws alpha (regression) or the latent z (probit), then w0, (lambda_w, mu_w) of every
group, every w_j, (lambda_f, mu_f) of every group and factor, and every v_jf, each from its full
conditional, in one compiled call (``kernels.cd.coordinate_sweep``). Its random numbers are
drawn beforehand in two vectorised calls (standard normals and standard gammas, whose shapes do
not depend on the state; the kernel scales them), so the chain does not depend on the number of
threads. With ``relax`` (the estimator's ``overrelaxation``) the draws are over-relaxed
(``kernels.cd._step``: same posterior, other dynamics) from the sweep at which the chain is
found settled (:func:`record_sweep`, :func:`sweep_config`); before it they are Gibbs draws.

Read against libFM 1.4.4's ``fm_learn_mcmc.h`` / ``fm_learn_mcmc_simultaneous.h`` with
``-meta``, the model and the order of the draws are the same (alpha; w0 with a flat prior;
lambda then mu of each group from the previous mu; every w_j; lambda then mu of every factor
and group; V factor by factor; group sizes count every feature, those absent from the training
rows drawn from their prior); libFM's gamma_0 and beta_0 trade places in the formulas, the same
at the defaults 1, 1. What differs: the random numbers (libFM: ``rand()`` seeded by ``-seed``,
Leva's normals, Marsaglia-Tsang gammas); the visiting order inside a colour class (a Gibbs
scan order, not the posterior); the residuals rebuilt every ``refresh_every`` sweeps (libFM:
every sweep); the prediction averages the clipped samples after the burn-in (libFM: of every
sweep, from the first); the estimator's default ``overrelaxation="auto"`` over-relaxes the
regression chain's draws once it has settled (libFM: Gibbs draws throughout).

Sample weights s_i multiply each row's Gaussian log-likelihood (an integer weight m equals m
repeated rows for regression; for probit it tempers the latent Gaussian of the row).
"""

from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtr, ndtri

from ..kernels.cd import (
    Config,
    Model,
    Prior,
    gamma_shapes,
    n_normals,
)
from ..kernels.losses import SQUARED
from ._fm_common import group_index


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
    relax: float = 0.0  # over-relaxation of the draws once settled (kernels.cd._step); 0: Gibbs
    refresh_every: int = 10
    groups: object = None  # None, or (group (d,) int64, group_size (G,) float64)


@dataclass
class Chain:
    """Hyper-parameters and bookkeeping carried across sweeps (and warm starts).

    ``lambda_w``, ``mu_w`` have shape (G,), ``lambda_v``, ``mu_v`` (k, G). The kept samples
    live in preallocated buffers ``samples = (w0 (m,), w (m, d), V (m, d, k))`` of which the
    first ``n_samples`` are used. ``scales`` holds the parameters' root mean square after each
    of the last ``2 * SETTLE_WINDOW`` sweeps until the chain is found settled, at sweep
    ``settled_at`` (-1: not yet; :func:`record_sweep`).
    """

    alpha: float
    lambda_w: np.ndarray
    mu_w: np.ndarray
    lambda_v: np.ndarray
    mu_v: np.ndarray
    t: int = 0  # sweeps done over the chain's life
    stride: int = 1
    samples: tuple = None
    n_samples: int = 0
    settled_at: int = -1
    scales: list = field(default_factory=list)

    @classmethod
    def start(cls, n_factors, n_groups=1):
        return cls(1.0, np.ones(n_groups), np.zeros(n_groups), np.ones((n_factors, n_groups)),
                   np.zeros((n_factors, n_groups)))

    def kept(self):
        """The kept samples (w0 (S,), w (S, d), V (S, d, k)), without spare capacity."""
        S = self.n_samples
        if self.samples is None:
            return None
        if self.samples[0].shape[0] == S:
            return self.samples
        return tuple(a[:S].copy() for a in self.samples)


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


def sweep_config(cfg, chain, settings):
    """The :class:`~fmlearn.kernels.cd.Config` of the chain's next sweep: over-relaxed draws
    (``settings.relax``) once the chain is settled (``chain.settled_at``, :func:`record_sweep`),
    plain Gibbs draws before.

    Over-relaxation keeps the posterior but moves each coordinate only to ``a (old - m)`` from
    its conditional mean m: from a start far from the posterior it converges |a| times per
    sweep where Gibbs jumps at once. On MovieLens-100K the factors grow from their N(0, 0.1^2)
    start to their posterior scale (rms of V 0.1 to about 0.45) in about 100-150 Gibbs sweeps;
    over-relaxed while they grow (from sweep 23-31, no groups) a chain predicted a validation
    split after 100 sweeps at 0.940-0.944 against Gibbs's 0.930 (benchmarks/RESULTS.md). Hence the
    switch on settling: a chain that has not settled draws exactly as with ``relax = 0``."""
    if cfg.relax == 0.0 or 0 <= chain.settled_at <= chain.t:
        return cfg
    return cfg._replace(relax=0.0)


# The settling test of record_sweep: two consecutive windows of this many sweeps whose mean
# parameter scale differs by at most SETTLE_TOL (relative).
SETTLE_WINDOW = 10
SETTLE_TOL = 0.02


def record_sweep(chain, state, settings):
    """After a sweep (``chain.t`` already counts it): test whether the chain has settled, then
    offer the sample to the kept reservoir (:func:`_keep`).

    The chain is settled at the first sweep t after the burn-in at which the root mean square
    s of the parameters (w and V) has stopped trending: the mean of s over sweeps t-9..t and
    over t-19..t-10 (``SETTLE_WINDOW`` = 10) differ by at most 2 % (``SETTLE_TOL``) of the
    latter. Growing out of a small start (MovieLens-100K: 4-20 % per 10 sweeps) or shrinking
    from a large one fails the test; on MovieLens-100K's training rows (k = 8, init_stdev 0.1)
    chains settle after 120-130 sweeps without groups and 99-109 with user/item groups. The
    test depends on the chain's draws only, which do not depend on the number of threads or
    workers; once passed it is not repeated (``settled_at`` is kept with the chain)."""
    if chain.settled_at < 0:
        d, k = state.V.shape
        ss = float(np.dot(state.w, state.w)) + float(np.sum(np.square(state.V)))
        chain.scales = chain.scales[1 - 2 * SETTLE_WINDOW:] + [np.sqrt(ss / (d * (k + 1)))]
        if len(chain.scales) == 2 * SETTLE_WINDOW and chain.t >= settings.n_burn_in:
            before = np.mean(chain.scales[:SETTLE_WINDOW])
            after = np.mean(chain.scales[SETTLE_WINDOW:])
            if abs(after - before) <= SETTLE_TOL * before:
                chain.settled_at = chain.t
                chain.scales = []
    _keep(chain, state, settings)


def mcmc_solver(data, state, chain, settings, seed, callback=None, on_start=None):
    """Run ``settings.n_iter`` Gibbs sweeps; ``state`` and ``chain`` are updated in place.

    Parameters
    ----------
    data : ColumnData or RelationColumnData (relation blocks)
        ``data.y`` holds regression targets, or labels in {-1, +1} when ``settings.probit``.
    state : FMState
        The current sample.
    chain : Chain
    settings : MCMCSettings
    seed : int
        Sweep t draws from ``numpy.random.default_rng([seed, t])`` (t counts sweeps over the
        chain's life), so a chain continued by a warm start equals one long run.
    callback : callable(iteration, E, target) -> bool, optional
        Called after each sweep with the row cache (``E[:, 0] + target`` are the training
        predictions of the new sample, ``state`` holds it); returning True stops.
    on_start : callable(), optional
        As in :func:`~fmlearn.solvers.als.als_solver` (called right before the first sweep).

    Returns
    -------
    state, n_iter, info : ``state`` holds the last sample; info has ``"diverged"`` (None or a
        message).
    """
    d, k = state.V.shape
    group, size = settings.groups if settings.groups is not None else group_index(None, d)
    prior = Prior(group, size, chain.lambda_w, chain.mu_w, chain.lambda_v, chain.mu_v)
    cfg = Config(SQUARED, 1.0, True, True, not settings.probit, float(settings.reg_bias),
                 settings.alpha_0, settings.beta_0, settings.gamma_0, settings.mu_0,
                 float(settings.relax))
    shapes = gamma_shapes(d, k, size, cfg, float(data.sw.sum()))
    nz = n_normals(d, k, size.shape[0])
    model = Model(state.w, state.V, np.array([state.w0, chain.alpha]))
    target = data.targets if not settings.probit else np.zeros(data.n_samples)
    E = data.row_state(state, target)  # E[:, 0] = pred - target
    _reserve(chain, state, settings)
    data.compile_sweep(prior, model, E, np.zeros(nz), shapes, cfg)
    if on_start is not None:
        on_start()

    def sweep(rs):
        nonlocal target
        if settings.probit:
            pred = E[:, 0] + target
            target = draw_latent(pred, data.y, 1.0 - rs.random(pred.shape[0]))
            E[:, 0] = pred - target
        return data.sweep(prior, model, E, rs.standard_normal(nz), rs.standard_gamma(shapes),
                          sweep_config(cfg, chain, settings))

    return run_chain(settings, seed, chain, state, model, sweep,
                     lambda: data.refresh(E, state, target),
                     None if callback is None else lambda it: callback(it, E, target))


def run_chain(settings, seed, chain, state, model, sweep, refresh, callback):
    """The sweep loop of :func:`mcmc_solver` and of the contrast solver: ``sweep(rs)`` draws
    one sweep in place from the generator ``default_rng([seed, t])`` of the chain's sweep t and
    returns False when something turned non-finite; ``refresh()`` recomputes the residual
    cache every ``settings.refresh_every`` sweeps; each sample is recorded
    (:func:`record_sweep`: the settling test and the kept reservoir); ``callback(it)``
    returning True stops. Returns ``(state, n_iter, info)``."""
    n_done = 0
    for it in range(settings.n_iter):
        rs = np.random.default_rng([seed, chain.t])
        if it and it % settings.refresh_every == 0:
            refresh()
        ok = sweep(rs)
        state.w0 = float(model.scal[0])
        chain.alpha = float(model.scal[1])
        chain.t += 1
        n_done = it + 1
        if not ok:
            return state, n_done, {"diverged": f"MCMC produced non-finite values at sweep {n_done}"}
        record_sweep(chain, state, settings)
        if callback is not None and callback(it):
            break
    return state, n_done, {"diverged": None}


def _reserve(chain, state, settings):
    """Room in the sample buffers for every sample this run can keep (pages are only touched
    when written)."""
    after_burn = max(0, chain.t + settings.n_iter - max(settings.n_burn_in, chain.t))
    need = min(settings.n_kept + 1, chain.n_samples + after_burn)
    have = 0 if chain.samples is None else chain.samples[0].shape[0]
    if need <= have:
        return
    d, k = state.V.shape
    new = (np.empty(need), np.empty((need, d), dtype=state.w.dtype),
           np.empty((need, d, k), dtype=state.V.dtype))
    for old, buf in zip(chain.samples or (), new, strict=False):
        buf[:chain.n_samples] = old[:chain.n_samples]
    chain.samples = new


def _keep(chain, state, settings):
    """Thinned reservoir of samples for prediction: keep every ``stride``-th sweep after
    burn-in; when more than ``n_kept`` are held, drop every other one and double the stride."""
    t = chain.t - settings.n_burn_in
    if t <= 0 or (t - 1) % chain.stride:
        return
    w0s, ws, Vs = chain.samples
    S = chain.n_samples
    w0s[S] = state.w0
    ws[S] = state.w
    Vs[S] = state.V
    chain.n_samples = S + 1
    if chain.n_samples > settings.n_kept:
        S2 = (chain.n_samples + 1) // 2
        for buf in chain.samples:
            buf[:S2] = buf[:chain.n_samples:2]
        chain.n_samples = S2
        chain.stride *= 2
