"""Variational Bayes for the classic FM: mean-field coordinate ascent on the evidence lower
bound, with the priors of the Gibbs sampler (:mod:`fmlearn.solvers.mcmc`).

The posterior of libFM's Bayesian FM is approximated by independent factors (Gaussian for w0,
w, V and the group means mu; Gamma for the noise precision alpha and the group precisions
lambda; truncated normal for the probit classifier's latent z), each updated in turn to the
exact maximiser of the ELBO given the others (:mod:`fmlearn.kernels.vb`), as myFM's
``VariationalFMRegressor`` / ``VariationalFMClassifier`` do: one sweep costs about what a
Gibbs sweep costs, and a few tens of sweeps give the posterior means, where MCMC averages
hundreds of samples. Prediction uses the posterior means (E f(x) = f(x; m) under the mean
field; for probit, Phi of it).
"""

from dataclasses import dataclass

import numpy as np

from .._data import raw
from ..kernels import compile_for
from ..kernels.vb import N_COLUMNS, VBConfig, VBData, VBModel, VBPrior, row_variances, vb_sweep
from ._fm_common import group_index, predict_rows

__all__ = ["VBPosterior", "VBSettings", "vb_data", "vb_solver"]


#: Sweeps (over the model's life) during which the hyper-parameters keep their start (unit
#: precisions, group means N(0, 1)) while w and V move. Updating every factor from the first
#: sweep lets mean-field VB settle in its well-known collapsed optimum (V = 0, its prior
#: precision growing as V shrinks): on MovieLens-100K (one-hot users and items, k = 8,
#: random states 0-2) the probit classifier of ratings >= 4 ended there on every state (test
#: log-loss 0.5624, the biases' model) and the regressor at RMSE 0.9037-0.9053; holding the
#: hyper-parameters 3, 5 or 10 sweeps gave 0.5500 and 0.9016-0.9021 on every state (1 sweep:
#: 0.5500 on one state of three). Every sweep still maximises the ELBO over the factors it
#: updates, so the bound never decreases.
HYPER_AFTER = 5


@dataclass
class VBSettings:
    n_iter: int
    probit: bool
    reg_bias: float = 0.0  # prior precision of w0 (0: flat)
    alpha_0: float = 1.0
    beta_0: float = 1.0
    gamma_0: float = 1.0
    mu_0: float = 0.0
    groups: object = None  # None, or (group (d,) int64, group_size (G,) float64)
    refresh_every: int = 10  # rebuild the residuals from the means against round-off drift
    hyper_after: int = HYPER_AFTER


@dataclass
class VBPosterior:
    """The variational factors besides the means of w0, w and V (which live in the
    :class:`~fmlearn.solvers._fm_common.FMState`): the variances of w0, w (d,) and V (d, k),
    the noise precision's E alpha and rate, and per group (G,) / per factor and group (k, G)
    E lambda, its rate, and the mean and variance of mu."""

    w0_var: float
    w_var: np.ndarray
    V_var: np.ndarray
    alpha: float
    alpha_rate: float
    lambda_w: np.ndarray
    rate_w: np.ndarray
    mu_w: np.ndarray
    mu_var_w: np.ndarray
    lambda_v: np.ndarray
    rate_v: np.ndarray
    mu_v: np.ndarray
    mu_var_v: np.ndarray
    t: int = 0  # sweeps done over the model's life

    @classmethod
    def start(cls, n_features, n_factors, n_groups, init_var, dtype):
        """The start of a fit: the means' variances ``init_var`` (the initial factors'
        spread), unit precisions, and the group means' factors N(0, 1).

        The unit variance of the group means is what keeps the factors alive: the first
        update of every lambda then sees E (v - mu)^2 of about 1, not the initial factors'
        spread (0.01 at init_stdev 0.1), so the first V update is not held at 0 by a prior
        precision of about 50 (from which mean-field VB never leaves 0: on MovieLens-100K
        such a start ended at the biases-only RMSE 0.9405 against 0.9026; myFM starts its
        group means' variances at 1 too)."""
        d, k, G = n_features, n_factors, n_groups
        return cls(float(init_var), np.full(d, init_var, dtype=dtype),
                   np.full((d, k), init_var, dtype=dtype), 1.0, 1.0, np.ones(G), np.ones(G),
                   np.zeros(G), np.ones(G), np.ones((k, G)), np.ones((k, G)),
                   np.zeros((k, G)), np.ones((k, G)))

    def copy(self):
        return VBPosterior(**{k: (v.copy() if isinstance(v, np.ndarray) else v)
                              for k, v in vars(self).items()})

    def attributes(self):
        """The JSON-able part (``vb_`` of a fitted estimator); the variances of w and V are
        arrays of their own."""
        out = {}
        for name, value in vars(self).items():
            if name in ("w_var", "V_var"):
                continue
            if isinstance(value, np.ndarray):
                out[name] = value.tolist()
            else:
                out[name] = int(value) if name == "t" else float(value)
        return out

    @classmethod
    def from_attributes(cls, vb, w_var, V_var):
        arrays = {k: np.array(v, dtype=np.float64) for k, v in vb.items()
                  if isinstance(v, list)}
        scalars = {k: (int(v) if k == "t" else float(v)) for k, v in vb.items()
                   if not isinstance(v, list)}
        return cls(w_var=w_var, V_var=V_var, **scalars, **arrays)


#: The keys of ``vb_`` and their shapes given (k, G): what a loaded model must hold.
ATTRIBUTE_SHAPES = {"t": "int", "w0_var": (), "alpha": (), "alpha_rate": (), "lambda_w": "G",
                    "rate_w": "G", "mu_w": "G", "mu_var_w": "G", "lambda_v": "kG",
                    "rate_v": "kG", "mu_v": "kG", "mu_var_v": "kG"}


def vb_data(X_csr, y, sw):
    """The :class:`~fmlearn.kernels.vb.VBData` of a canonical CSR matrix (both layouts),
    targets or labels ``y`` and weights ``sw``."""
    sw = np.ascontiguousarray(sw, dtype=np.float64)
    csc = X_csr.tocsc()
    x2 = csc.data.astype(np.float64) ** 2
    weights = sw[csc.indices]
    starts = csc.indptr[:-1]
    col_x2 = np.zeros(csc.shape[1])
    col_x4 = np.zeros(csc.shape[1])
    nonempty = np.diff(csc.indptr) > 0
    if x2.size:
        col_x2[nonempty] = np.add.reduceat(weights * x2, starts[nonempty])
        col_x4[nonempty] = np.add.reduceat(weights * x2 * x2, starts[nonempty])
    return VBData(*raw(csc), *raw(X_csr), np.ascontiguousarray(y, dtype=np.float64), sw,
                  bool(np.all(sw == 1.0)), float(sw.sum()), col_x2, col_x4)


def _records(data, state, post, settings):
    d, k = state.V.shape
    group, size = settings.groups if settings.groups is not None else group_index(None, d)
    prior = VBPrior(group, size, post.lambda_w, post.rate_w, post.mu_w, post.mu_var_w,
                    post.lambda_v, post.rate_v, post.mu_v, post.mu_var_v)
    model = VBModel(state.w, state.V, post.w_var, post.V_var,
                    np.array([state.w0, post.w0_var, post.alpha, post.alpha_rate, 0.0]))
    cfg = VBConfig(bool(settings.probit), True, float(settings.reg_bias), float(settings.alpha_0),
                   float(settings.beta_0), float(settings.gamma_0), float(settings.mu_0))
    return prior, model, cfg


def _residuals(data, state, target):
    E = np.zeros((data.y.shape[0], N_COLUMNS))
    E[:, 0] = predict_rows((data.rindptr, data.rindices, data.rdata), state) - target
    return E


def vb_solver(data, state, post, settings, callback=None, on_start=None):
    """Run ``settings.n_iter`` coordinate-ascent sweeps; ``state`` (the means) and ``post``
    (the other factors) are updated in place.

    Parameters
    ----------
    data : VBData
        ``data.y`` holds regression targets, or labels in {-1, +1} when ``settings.probit``.
    state : FMState
    post : VBPosterior
    settings : VBSettings
    callback : callable(iteration, E, target) -> bool, optional
        Called after each sweep with the row cache (``E[:, 0] + target`` are the training
        predictions of the means); returning True stops.
    on_start : callable(), optional
        Called once the sweep is compiled (or loaded from numba's cache), right before the
        first sweep.

    Returns
    -------
    state, n_iter, info : info has ``"diverged"`` (None or a message).
    """
    prior, model, cfg = _records(data, state, post, settings)
    target = data.y.copy() if not settings.probit else np.zeros_like(data.y)
    E = _residuals(data, state, target)
    compile_for(vb_sweep, data, prior, model, E, target, cfg)
    if not settings.probit:  # alpha's first update needs the variance of f
        compile_for(row_variances, data, model, target)
        model.scal[4] = row_variances(data, model, np.empty(data.y.shape[0]))
    if on_start is not None:
        on_start()
    n_done = 0
    info = {"diverged": None}
    for it in range(settings.n_iter):
        if it and it % settings.refresh_every == 0:
            state.w0 = float(model.scal[0])
            E[:, 0] = predict_rows((data.rindptr, data.rindices, data.rdata), state) - target
        ok = vb_sweep(data, prior, model, E, target,
                      cfg._replace(hyper=post.t >= settings.hyper_after))
        post.t += 1
        state.w0 = float(model.scal[0])
        n_done = it + 1
        if not ok:
            info = {"diverged": f"variational Bayes produced non-finite values at sweep "
                                f"{n_done}"}
            break
        if callback is not None and callback(it, E, target):
            break
    post.w0_var = float(model.scal[1])
    post.alpha = float(model.scal[2])
    post.alpha_rate = float(model.scal[3])
    return state, n_done, info
