"""ALS: libFM's coordinate descent for the classic FM (Rendle et al. 2011; Rendle 2012 §4.2).

Each sweep updates w0, every w_j, then every v_jf factor by factor, each to the minimizer of
its one-dimensional problem given the others (exact for the squared loss; for the logistic loss
a majorization step with curvature bound 1/4, which never increases the objective). The row
cache (``kernels.cd``) makes a sweep cost O(nnz * k); a sweep is one compiled call.

With feature groups (libFM's ``-meta``), each group has its own penalties: ``reg_linear`` and
``reg_pairwise`` are arrays with one value per group (libFM's ``-regular`` with 1 + 2G values).
"""

from dataclasses import dataclass

import numpy as np

from ..kernels.cd import Config, Model, Prior
from ..kernels.losses import SMOOTHNESS, SQUARED, loss_value_np
from ._fm_common import group_index

_EMPTY = np.zeros(0)


@dataclass
class ALSSettings:
    n_iter: int
    loss: str  # "squared" | "logistic"
    loss_code: int
    reg_bias: float
    reg_linear: object  # float, or ndarray (G,) with groups
    reg_pairwise: object  # float, or ndarray (G,) with groups
    groups: object = None  # None, or (group (d,) int64, group_size (G,) float64)
    refresh_every: int = 10  # rebuild the row cache from scratch against round-off drift


def penalty(settings, state):
    """The L2 penalty 1/2 (r0 w0^2 + sum_j r1_g(j) w_j^2 + sum_jf r2_g(j) v_jf^2)."""
    group = (settings.groups or group_index(None, state.w.shape[0]))[0]
    r1 = np.broadcast_to(np.asarray(settings.reg_linear, dtype=np.float64), (group.max() + 1,))
    r2 = np.broadcast_to(np.asarray(settings.reg_pairwise, dtype=np.float64), (group.max() + 1,))
    V = state.V.astype(np.float64)
    return float(0.5 * settings.reg_bias * state.w0**2
                 + 0.5 * np.dot(r1[group], state.w.astype(np.float64) ** 2)
                 + 0.5 * np.dot(r2[group], np.sum(V**2, axis=1)))


def objective(data, state, settings):
    """Weighted sum of losses plus the L2 penalties (the quantity ALS never increases)."""
    pred = data.predict(state)
    loss = np.dot(data.sw, loss_value_np(settings.loss, pred, data.y))
    return float(loss + penalty(settings, state))


def fixed_prior(groups, d, k, reg_linear, reg_pairwise):
    """The :class:`~fmlearn.kernels.cd.Prior` of ALS: precision = penalty, mean 0, per group."""
    group, size = groups if groups is not None else group_index(None, d)
    n_groups = size.shape[0]
    lam_w = np.broadcast_to(np.asarray(reg_linear, dtype=np.float64), (n_groups,)).copy()
    lam_v = np.tile(np.broadcast_to(np.asarray(reg_pairwise, dtype=np.float64), (n_groups,)),
                    (k, 1))
    return Prior(group, size, lam_w, np.zeros(n_groups), lam_v, np.zeros((k, n_groups)))


def als_solver(data, state, settings, callback=None, on_start=None):
    """Run ``settings.n_iter`` ALS sweeps from ``state`` (modified in place).

    Parameters
    ----------
    data : ColumnData or RelationColumnData (relation blocks)
    state : FMState
    settings : ALSSettings
    callback : callable(iteration, E, target) -> bool, optional
        Called after each sweep with the row cache (``E[:, 0]`` is pred - target for the
        squared loss, pred for the logistic loss); returning True stops.
    on_start : callable(), optional
        Called once the sweep is compiled (or loaded from numba's cache), right before the
        first sweep: a caller timing the sweeps starts its clock there.

    Returns
    -------
    state, n_iter, info : info has ``"diverged"`` (None or a message).
    """
    d, k = state.V.shape
    code = settings.loss_code
    prior = fixed_prior(settings.groups, d, k, settings.reg_linear, settings.reg_pairwise)
    cfg = Config(code, float(SMOOTHNESS[code]), False, False, False, float(settings.reg_bias),
                 1.0, 1.0, 1.0, 0.0)
    model = Model(state.w, state.V, np.array([state.w0, 1.0]))
    # the squared loss's targets as the data holds them (possibly read in place through the
    # fit's row index, ColumnData.targets); the logistic loss's row state holds predictions
    target = data.targets if code == SQUARED else np.zeros(data.n_samples)
    E = data.row_state(state, target)
    data.compile_sweep(prior, model, E, _EMPTY, _EMPTY, cfg)
    if on_start is not None:
        on_start()
    return run_sweeps(
        settings, state, model,
        lambda: data.sweep(prior, model, E, _EMPTY, _EMPTY, cfg),
        lambda: data.refresh(E, state, target),
        None if callback is None else lambda it: callback(it, E, target))


def run_sweeps(settings, state, model, sweep, refresh, callback):
    """The sweep loop of :func:`als_solver` and of the contrast solver: ``sweep()`` runs one
    sweep in place and returns False when something turned non-finite; ``refresh()``
    recomputes the residual cache from ``state`` every ``settings.refresh_every`` sweeps;
    ``callback(it)`` returning True stops. Returns ``(state, n_iter, info)``."""
    n_done = 0
    for it in range(settings.n_iter):
        if it and it % settings.refresh_every == 0:
            state.w0 = float(model.scal[0])
            refresh()
        ok = sweep()
        state.w0 = float(model.scal[0])
        n_done = it + 1
        if not ok:
            return state, n_done, {"diverged": f"ALS produced non-finite predictions at sweep "
                                               f"{n_done}; increase reg_linear/reg_pairwise"}
        if callback is not None and callback(it):
            break
    return state, n_done, {"diverged": None}
