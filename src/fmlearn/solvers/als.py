"""ALS: libFM's coordinate descent for the classic FM (Rendle et al. 2011; Rendle 2012 §4.2).

Each sweep updates w0, every w_j, then every v_jf factor by factor, each to the minimizer of
its one-dimensional problem given the others (exact for the squared loss; for the logistic loss
a majorization step with curvature bound 1/4, which never increases the objective). Predictions
and factor sums are cached, so a sweep costs O(nnz * k).
"""

from dataclasses import dataclass

import numpy as np

from ..kernels.cd import (
    factor_sweep_colored,
    factor_sweep_serial,
    linear_sweep_colored,
    linear_sweep_serial,
)
from ..losses import SMOOTHNESS, loss_derivative_np, loss_value_np
from ._fm_common import predict_with_sums


@dataclass
class ALSSettings:
    n_iter: int
    loss: str  # "squared" | "logistic"
    loss_code: int
    reg_bias: float
    reg_linear: float
    reg_pairwise: float
    refresh_every: int = 10  # recompute cached sums from scratch to stop round-off drift


def objective(data, state, settings, pred=None):
    """Weighted sum of losses plus the L2 penalties (the quantity ALS never increases)."""
    if pred is None:
        pred, _ = predict_with_sums(data.csr, state)
    loss = np.dot(data.sw, loss_value_np(settings.loss, pred, data.y))
    return float(
        loss
        + 0.5 * settings.reg_bias * state.w0**2
        + 0.5 * settings.reg_linear * np.dot(state.w, state.w)
        + 0.5 * settings.reg_pairwise * np.sum(state.V.astype(np.float64) ** 2)
    )


def bias_step(sw, target, pred, w0, loss, loss_code, lam, alpha=1.0, mu=0.0, noise=0.0,
              sample=False):
    """The coordinate step for w0 (h_i = 1); returns the new value and updates ``pred``."""
    g = float(np.dot(sw, loss_derivative_np(loss, pred, target)))
    hh = float(sw.sum())
    if sample:
        prec = alpha * hh + lam
        new = w0 - (alpha * g + lam * (w0 - mu)) / prec + noise / np.sqrt(prec)
    else:
        new = w0 - (g + lam * (w0 - mu)) / (SMOOTHNESS[loss_code] * hh + lam)
    pred += new - w0
    return new


def sweep(data, state, pred, Q, target, loss_code, curv, lams, mus, alpha, noises, sample):
    """One pass over w (then V factor by factor) with the shared coordinate kernels."""
    indptr, indices, vals = data.csc
    lam_w, lam_v = lams
    mu_w, mu_v = mus
    noise_w, noise_v = noises
    colored = data.color_ptr is not None
    if colored:
        linear_sweep_colored(indptr, indices, vals, data.order, data.color_ptr, state.w, pred,
                             target, data.sw, loss_code, curv, lam_w, mu_w, alpha, noise_w, sample)
    else:
        linear_sweep_serial(indptr, indices, vals, data.order, state.w, pred, target, data.sw,
                            loss_code, curv, lam_w, mu_w, alpha, noise_w, sample)
    for f in range(state.V.shape[1]):
        if colored:
            factor_sweep_colored(indptr, indices, vals, data.order, data.color_ptr, f, state.V, Q,
                                 pred, target, data.sw, loss_code, curv, lam_v[f], mu_v[f], alpha,
                                 noise_v[f], sample)
        else:
            factor_sweep_serial(indptr, indices, vals, data.order, f, state.V, Q, pred, target,
                                data.sw, loss_code, curv, lam_v[f], mu_v[f], alpha, noise_v[f],
                                sample)


def als_solver(data, state, settings, callback=None):
    """Run ``settings.n_iter`` ALS sweeps from ``state`` (modified in place).

    Parameters
    ----------
    data : ColumnData
    state : FMState
    settings : ALSSettings
    callback : callable(iteration, pred) -> bool, optional
        Called after each sweep with the cached training predictions; returning True stops.

    Returns
    -------
    state, n_iter, info : info has ``"diverged"`` (None or a message).
    """
    k = state.V.shape[1]
    curv = SMOOTHNESS[settings.loss_code]
    zeros_d = np.zeros(data.csc[0].shape[0] - 1)
    noises = (zeros_d, [zeros_d] * k)
    lams = (settings.reg_linear, [settings.reg_pairwise] * k)
    mus = (0.0, [0.0] * k)
    pred, Q = predict_with_sums(data.csr, state)
    n_done = 0
    for it in range(settings.n_iter):
        if it and it % settings.refresh_every == 0:
            pred, Q = predict_with_sums(data.csr, state)
        state.w0 = bias_step(data.sw, data.y, pred, state.w0, settings.loss, settings.loss_code,
                             settings.reg_bias)
        sweep(data, state, pred, Q, data.y, settings.loss_code, curv, lams, mus, 1.0, noises,
              False)
        n_done = it + 1
        if not np.all(np.isfinite(pred)):
            return state, n_done, {"diverged": f"ALS produced non-finite predictions at sweep "
                                               f"{n_done}; increase reg_linear/reg_pairwise"}
        if callback is not None and callback(it, pred):
            break
    return state, n_done, {"diverged": None}
