"""ALS: libFM's coordinate descent for the classic FM (Rendle et al. 2011; Rendle 2012 §4.2).

Each sweep updates w0, every w_j, then every v_jf factor by factor, each to the minimizer of
its one-dimensional problem given the others (exact for the squared loss; for the logistic loss
a majorization step with curvature bound 1/4, which never increases the objective). The row
cache (``kernels.cd``) makes a sweep cost O(nnz * k).
"""

from dataclasses import dataclass

import numpy as np

from ..kernels.cd import bias_update, class_sweep_rows, coordinate_sweep, factor_column_sums
from ..losses import SMOOTHNESS, SQUARED, loss_value_np
from ._fm_common import predict_rows, row_state


@dataclass
class ALSSettings:
    n_iter: int
    loss: str  # "squared" | "logistic"
    loss_code: int
    reg_bias: float
    reg_linear: float
    reg_pairwise: float
    refresh_every: int = 10  # rebuild the row cache from scratch against round-off drift


def objective(data, state, settings):
    """Weighted sum of losses plus the L2 penalties (the quantity ALS never increases)."""
    pred = predict_rows(data.csr, state)
    loss = np.dot(data.sw, loss_value_np(settings.loss, pred, data.y))
    return float(
        loss
        + 0.5 * settings.reg_bias * state.w0**2
        + 0.5 * settings.reg_linear * np.dot(state.w, state.w)
        + 0.5 * settings.reg_pairwise * np.sum(state.V.astype(np.float64) ** 2)
    )


def bias_step(data, E, y, w0, loss_code, lam, alpha=1.0, mu=0.0, noise=0.0, sample=False):
    """The coordinate step for w0; returns the new value and updates ``E``."""
    return bias_update(E, y, data.sw, data.unit, loss_code, SMOOTHNESS[loss_code], lam, mu,
                       alpha, noise, sample, w0)


_NO_COLORS = np.zeros(1, dtype=np.int64)


def sweep(data, state, E, y, loss_code, lams, mus, alpha, noises, sample):
    """One pass over w, then over V factor by factor, with the shared coordinate kernels.

    ``lams``/``mus``/``noises`` are ``(for w, [for each factor])``.
    """
    _sweep_group(data, 0, state.w.reshape(-1, 1), 0, E, y, loss_code, lams[0], mus[0], alpha,
                 noises[0], sample)
    for f in range(state.V.shape[1]):
        factor_column_sums(*data.csr, state.V, f, E)
        _sweep_group(data, 1, state.V, f, E, y, loss_code, lams[1][f], mus[1][f], alpha,
                     noises[1][f], sample)


def _sweep_group(data, slot, theta, col, E, y, loss_code, lam, mu, alpha, noise, sample):
    # Every feature's coefficient theta[:, col] once, colour class after colour class.
    cindptr, cindices, cdata = data.csc
    curv = SMOOTHNESS[loss_code]
    common = (data.sw, data.unit, loss_code, curv, lam, mu, alpha, noise, sample)
    if data.row_pass is None:
        parallel = data.color_ptr is not None
        cptr = data.color_ptr if parallel else _NO_COLORS
        coordinate_sweep(cindptr, cindices, cdata, data.order, cptr, data.class_nnz, parallel,
                         slot, theta, col, E, y, *common)
        return
    for c in range(data.color_ptr.shape[0] - 1):
        lo, hi = data.color_ptr[c], data.color_ptr[c + 1]
        feats = data.order[lo:hi]
        if data.row_pass[c]:
            G, H, old, delta = data.work
            m = hi - lo
            class_sweep_rows(*data.csr, data.color, c, data.pos, feats, slot, theta, col, E, y,
                             *common, G[:, :m], H[:, :m], old[:m], delta[:m])
        else:
            coordinate_sweep(cindptr, cindices, cdata, feats, np.array([0, hi - lo]),
                             data.class_nnz[c:c + 1], True, slot, theta, col, E, y, *common)


def als_solver(data, state, settings, callback=None):
    """Run ``settings.n_iter`` ALS sweeps from ``state`` (modified in place).

    Parameters
    ----------
    data : ColumnData
    state : FMState
    settings : ALSSettings
    callback : callable(iteration, pred) -> bool, optional
        Called after each sweep with the training predictions; returning True stops.

    Returns
    -------
    state, n_iter, info : info has ``"diverged"`` (None or a message).
    """
    k = state.V.shape[1]
    y = data.y
    zeros = np.zeros(data.csc[0].shape[0] - 1)
    noises = (zeros, [zeros] * k)
    lams = (settings.reg_linear, [settings.reg_pairwise] * k)
    mus = (0.0, [0.0] * k)
    E = row_state(data.csr, state, y, settings.loss_code)
    n_done = 0
    for it in range(settings.n_iter):
        if it and it % settings.refresh_every == 0:
            E = row_state(data.csr, state, y, settings.loss_code)
        state.w0 = bias_step(data, E, y, state.w0, settings.loss_code, settings.reg_bias)
        sweep(data, state, E, y, settings.loss_code, lams, mus, 1.0, noises, False)
        n_done = it + 1
        if not np.all(np.isfinite(E[:, 0])):
            return state, n_done, {"diverged": f"ALS produced non-finite predictions at sweep "
                                               f"{n_done}; increase reg_linear/reg_pairwise"}
        if callback is not None:
            pred = E[:, 0] + y if settings.loss_code == SQUARED else E[:, 0].copy()
            if callback(it, pred):
                break
    return state, n_done, {"diverged": None}
