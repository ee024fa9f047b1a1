"""Stochastic-gradient epoch of the classic FM (libFM's ``fm_learn_sgd_element``).

One pass over the rows in the order given; per row the prediction and the factor sums
q_f = sum_j v_jf x_j cost O(nnz_row * k), then every parameter touched by the row moves along
its negative gradient with L2 shrinkage (applied lazily, to the present features only, as libFM
does). A row of weight s is visited ceil(s) times in a row with steps scaled by s / ceil(s):
a large weight never becomes one oversized step, and a weight of m equals m repeated rows.
"""

import math

import numpy as np
from numba import njit

from ..losses import SMOOTHNESS, SQUARED, loss_derivative
from .predict import fm_row

CONSTANT = 0
INVSCALING = 1
SCHEDULE_CODES = {"constant": CONSTANT, "invscaling": INVSCALING}


@njit(cache=True, nogil=True)
def learning_rate_at(schedule, eta0, power_t, t):
    if schedule == INVSCALING:
        return eta0 / math.pow(1.0 + t, power_t)
    return eta0


@njit(cache=True, nogil=True)
def _pred_and_grad_norm2(indptr, indices, data, i, w0, w, V, q, qq, a, b):
    """FM prediction of row i and ||d f(x_i) / d(w0, w, V)||^2, in one pass over the row.

    With h_jf = x_j (q_f - v_jf x_j), sum_j h_jf^2 = q_f^2 S2 - 2 q_f A_f + B_f where
    S2 = sum_j x_j^2, A_f = sum_j v_jf x_j^3, B_f = sum_j v_jf^2 x_j^4: no second pass.
    Leaves q[f] = sum_j v_jf x_ij for the update.
    """
    k = V.shape[1]
    for f in range(k):
        q[f] = 0.0
        qq[f] = 0.0
        a[f] = 0.0
        b[f] = 0.0
    pred = np.float64(w0)
    s2 = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        j = indices[p]
        x = data[p]
        x2 = x * x
        pred += w[j] * x
        s2 += x2
        for f in range(k):
            t = V[j, f] * x
            tt = t * t
            q[f] += t
            qq[f] += tt
            a[f] += t * x2
            b[f] += tt * x2
    norm2 = 1.0 + s2
    for f in range(k):
        pred += 0.5 * (q[f] * q[f] - qq[f])
        norm2 += q[f] * q[f] * s2 - 2.0 * q[f] * a[f] + b[f]
    return pred, norm2


@njit(cache=True)
def sgd_epoch(indptr, indices, data, y, sw, order, params0, w, V, loss, eta0, schedule, power_t,
              t, reg0, reg1, reg2, clip_lo, clip_hi, limit, implicit):
    """Run one epoch; returns ``(t, bad_row)`` with ``bad_row = -1`` when every step was finite.

    ``params0`` is a length-1 array holding w0. ``t`` counts steps over the estimator's life
    (it drives the step-size schedule across ``partial_fit`` calls). The epoch stops at the
    first row whose prediction is non-finite or exceeds ``limit`` in magnitude.

    With ``implicit`` the step is divided by ``1 + eta * s * L * ||grad f||^2`` (L the loss's
    smoothness): the implicit (proximal) update of the linearised loss, which cannot overshoot
    the row's target however large ``eta`` or the target scale (Kulis & Bartlett 2010; Toulis &
    Airoldi 2017). For ``eta * ||grad f||^2 << 1`` it is libFM's plain step.
    """
    k = V.shape[1]
    q = np.empty(k, dtype=np.float64)
    qq = np.empty(k, dtype=np.float64)
    a = np.empty(k, dtype=np.float64)
    b = np.empty(k, dtype=np.float64)
    curv = SMOOTHNESS[loss]
    for r in range(order.shape[0]):
        i = order[r]
        if sw[i] <= 0.0:  # a zero-weight row does not exist for the model
            continue
        start = indptr[i]
        end = indptr[i + 1]
        reps = max(1, int(math.ceil(sw[i])))
        scale = sw[i] / reps
        for _ in range(reps):  # later visits of the same row see the updated model
            if implicit:
                pred, norm2 = _pred_and_grad_norm2(indptr, indices, data, i, params0[0], w, V, q,
                                                   qq, a, b)
            else:
                pred = fm_row(indptr, indices, data, i, params0[0], w, V, q, qq)
                norm2 = 0.0
            if not (abs(pred) <= limit):
                return t, i
            if loss == SQUARED:
                pred = min(max(pred, clip_lo), clip_hi)
            eta = learning_rate_at(schedule, eta0, power_t, t)
            t += 1
            g = scale * loss_derivative(loss, pred, y[i])
            if implicit:
                g /= 1.0 + eta * scale * curv * norm2
            params0[0] -= eta * (g + reg0 * params0[0])
            for p in range(start, end):
                j = indices[p]
                x = data[p]
                w[j] -= eta * (g * x + reg1 * w[j])
                for f in range(k):
                    v = V[j, f]
                    V[j, f] = v - eta * (g * x * (q[f] - v * x) + reg2 * v)
    return t, -1
