"""Projected online learners on the CCFM (the CCFM-OGD and CCFM-PA baselines of Zhang et al. 2018,
§4.1): one round's update, run by :func:`fmlearn.kernels.steps.run_rows`.

OGD (Zinkevich 2003): C <- Proj_K(C - eta_t l'(y^, y) 1/2 G(x)), eta_t = eta0 / t ** power_t.
PA-I (Crammer et al. 2006): with the hinge (classification) or epsilon-insensitive (regression)
loss l_PA and the gradient of y^ in C, 1/2 G(x): C <- Proj_K(C - tau s 1/2 G(x)),
tau = min(pa_c, l_PA / ||1/2 G(x)||_F^2), s = d l_PA / d y^.
The projection onto K = {C symmetric, ||C||_tr <= delta} soft-thresholds the eigenvalues of the
core (exact: C = U' K U with orthonormal U, so C and K share their nonzero spectrum).
"""

import math
from collections import namedtuple

from ._jit import njit
from .losses import SQUARED, loss_derivative
from .lowrank import extend_coordinates, lr_compress, predict_step, project_core
from .steps import BAD_STEP, NO_ROOM, OK, invscaling, run_rows

OGD = 0
PA = 1

# C (LowRank); t: 1-array, rounds learned
ProjState = namedtuple("ProjState", "t C")
# mode OGD or PA; row_cap: the longest augmented row of the batch; r_keep: rank kept by a
# compression made to fit a row
ProjConfig = namedtuple("ProjConfig", "loss self_inter mode learning_rate power_t trace_bound "
                                      "pa_c epsilon row_cap r_keep")
ProjWork = namedtuple("ProjWork", "idx val n z w v work")


@njit(cache=True, nogil=True, error_model="numpy")
def _coefficient(cfg, work, pred, y, scale, t, d):
    """The step along 1/2 G(x): -eta_t l' (OGD) or -tau s (PA), scaled by the row weight."""
    if cfg.mode == OGD:
        eta_t = invscaling(cfg.learning_rate, cfg.power_t, t)
        return -0.5 * scale * eta_t * loss_derivative(cfg.loss, pred, y)
    if cfg.loss == SQUARED:
        l_pa = abs(pred - y) - cfg.epsilon
        sgn = 1.0 if pred > y else -1.0
    else:
        l_pa = 1.0 - y * pred
        sgn = -y
    if l_pa <= 0.0:
        return 0.0
    xx = 0.0
    x4 = 0.0
    for p in range(work.n[0]):
        xx += work.val[p] * work.val[p]
        if work.idx[p] < d:
            x4 += work.val[p] ** 4
    gnorm2 = 0.25 * (xx * xx - (0.0 if cfg.self_inter else x4))
    tau = min(cfg.pa_c * scale, l_pa / gnorm2)
    return -0.5 * tau * sgn


@njit(cache=True, nogil=True, error_model="numpy")
def update(state, cfg, work, rows, i, pred, scale):
    C = state.C
    U, K = C.U, C.K
    D = U.shape[1]
    d = D - 1
    idx, val, n = work.idx, work.val, work.n[0]
    coef = _coefficient(cfg, work, pred, rows.y[i], scale, state.t[0], d)
    if coef == 0.0:
        return OK
    if not math.isfinite(coef):
        return BAD_STEP
    if C.ident:
        for a in range(n):
            ja = idx[a]
            for b in range(n):
                if a == b and not cfg.self_inter and ja < d:
                    continue
                K[ja, idx[b]] += coef * val[a] * val[b]
        project_core(K, D, cfg.trace_bound, False)
        return OK
    r = extend_coordinates(C, idx, n, cfg.r_keep, work.v, work.work)
    if r < 0:
        return NO_ROOM
    z = work.z
    # coordinates of x^ and of the e_j in the extended basis
    for k in range(r):
        s = 0.0
        for p in range(n):
            s += U[k, idx[p]] * val[p]
        z[k] = s
    for a in range(r):
        for b in range(r):
            g = z[a] * z[b]
            if not cfg.self_inter:
                for p in range(n):
                    j = idx[p]
                    if j < d:
                        g -= val[p] * val[p] * U[a, j] * U[b, j]
            K[a, b] += coef * g
    nz = project_core(K, r, cfg.trace_bound, False)
    if r >= K.shape[0] - cfg.row_cap and nz < r:
        r, dropped = lr_compress(U, K, r, max(nz, 1), work.work, 0)
        C.dropped[0] += dropped
    C.r[0] = r
    return OK


@njit(cache=True, nogil=True)
def learn_rows(rows, state, cfg, work, limit):
    """The per-row protocol (:func:`fmlearn.kernels.steps.run_rows`) with this learner's step."""
    return run_rows(rows, state, cfg, work, predict_step, update, limit)
