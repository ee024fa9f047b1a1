"""Compiled per-row loops of the online learners for the classic FM (the FM-* baselines of
seed 002 §4.1): online gradient descent, passive-aggressive and FTRL-Proximal on (w0, w, V).

Each loop visits a batch of CSR rows in the given order, writes the prediction made *before*
the row's update into ``out`` (prequential evaluation for free) and stops at the first row whose
prediction is non-finite or exceeds ``limit``. A row of weight s is visited ceil(s) times with
its gradient scaled by s / ceil(s), so a weight of m equals m repeated rows.
"""

import math

import numpy as np
from numba import njit

from ..losses import LOGISTIC, SMOOTHNESS, loss_derivative
from .online import ftrl_coord
from .predict import fm_row
from .sgd import _pred_and_grad_norm2


@njit(cache=True)
def fm_ogd_batch(Xp, Xi, Xd, y, sw, order, loss, params0, w, V, ist, eta0, power_t, reg0, reg1,
                 reg2, implicit, limit, out):
    """Online gradient descent with step eta0 / t ** power_t (Zinkevich 2003) and L2 penalties.

    With power_t = 0 this is plain SGD (Rendle 2010 §III-C); ``params0`` holds w0, ``ist[0]``
    counts the steps over the model's life. With ``implicit`` the step is divided by
    1 + eta L ||grad f||^2 (the implicit update of the linearized loss, as ``FMRegressor``'s
    SGD does), which cannot overshoot a row's target whatever the feature scale."""
    k = V.shape[1]
    q = np.empty(k)
    qq = np.empty(k)
    fa = np.empty(k)
    fb = np.empty(k)
    for r in range(order.shape[0]):
        i = order[r]
        reps = max(1, int(math.ceil(sw[i]))) if sw[i] > 0.0 else 1
        scale = sw[i] / reps
        for rep in range(reps):
            pred, norm2 = _pred_and_grad_norm2(Xp, Xi, Xd, i, params0[0], w, V, q, qq, fa, fb)
            if rep == 0:
                out[i] = pred
            if sw[i] <= 0.0:
                break
            if not (abs(pred) <= limit):
                return i
            t = ist[0] + 1
            ist[0] = t
            eta = eta0 / math.pow(t, power_t)
            g = scale * loss_derivative(loss, pred, y[i])
            if implicit:
                g /= 1.0 + eta * scale * SMOOTHNESS[loss] * norm2
            params0[0] -= eta * (g + reg0 * params0[0])
            for p in range(Xp[i], Xp[i + 1]):
                j = Xi[p]
                x = Xd[p]
                w[j] -= eta * (g * x + reg1 * w[j])
                for f in range(k):
                    vv = V[j, f]
                    V[j, f] = vv - eta * (g * x * (q[f] - vv * x) + reg2 * vv)
    return -1


@njit(cache=True)
def fm_pa_batch(Xp, Xi, Xd, y, sw, order, loss, params0, w, V, ist, pa_c, epsilon, limit, out):
    """Passive-aggressive PA-I (Crammer et al. 2006) on the FM, linearized in (w0, w, V).

    Loss: epsilon-insensitive (``loss`` squared) or hinge (``loss`` logistic, labels +-1). With
    h = the gradient of f(x) in the parameters, tau = min(pa_c, l_PA / ||h||^2) and the step is
    theta <- theta - tau s h, s = d l_PA / d f."""
    k = V.shape[1]
    q = np.empty(k)
    qq = np.empty(k)
    fa = np.empty(k)
    fb = np.empty(k)
    for r in range(order.shape[0]):
        i = order[r]
        reps = max(1, int(math.ceil(sw[i]))) if sw[i] > 0.0 else 1
        scale = sw[i] / reps
        for rep in range(reps):
            pred, norm2 = _pred_and_grad_norm2(Xp, Xi, Xd, i, params0[0], w, V, q, qq, fa, fb)
            if rep == 0:
                out[i] = pred
            if sw[i] <= 0.0:
                break
            if not (abs(pred) <= limit):
                return i
            ist[0] += 1
            if loss == LOGISTIC:
                l_pa = 1.0 - y[i] * pred
                sgn = -y[i]
            else:
                l_pa = abs(pred - y[i]) - epsilon
                sgn = 1.0 if pred > y[i] else -1.0
            if l_pa <= 0.0:
                continue
            tau = min(pa_c * scale, l_pa / norm2)
            g = tau * sgn
            params0[0] -= g
            for p in range(Xp[i], Xp[i + 1]):
                j = Xi[p]
                x = Xd[p]
                w[j] -= g * x
                for f in range(k):
                    vv = V[j, f]
                    V[j, f] = vv - g * x * (q[f] - vv * x)
    return -1


@njit(cache=True)
def fm_ftrl_batch(Xp, Xi, Xd, y, sw, order, loss, zn0, znw, Vz, Vn, params0, w, V, ist, alpha,
                  beta, l1, l2, alpha_v, beta_v, l1_v, l2_v, limit, out):
    """FTRL-Proximal (McMahan et al. 2013, Algorithm 1) on every coordinate of (w0, w, V): the
    FM-FTRL baseline of seed 002 §4.1 (after Ta 2015).

    ``zn0`` (1, 3) and ``znw`` (d, 3) hold (z, n, weight) of w0 and w; ``Vz``, ``Vn`` the z and n
    of the factors, whose current weights live in ``V`` (and w0, w in ``params0``, ``w``). The
    factors' z starts at -(beta_v / alpha_v) V_init, which centres their proximal term at the
    random initialization instead of 0 (from 0 every factor gradient would vanish)."""
    k = V.shape[1]
    q = np.empty(k)
    qq = np.empty(k)
    for r in range(order.shape[0]):
        i = order[r]
        pred = fm_row(Xp, Xi, Xd, i, params0[0], w, V, q, qq)
        out[i] = pred
        if sw[i] <= 0.0:
            continue
        reps = max(1, int(math.ceil(sw[i])))
        scale = sw[i] / reps
        for rep in range(reps):
            if rep > 0:
                pred = fm_row(Xp, Xi, Xd, i, params0[0], w, V, q, qq)
            if not (abs(pred) <= limit):
                return i
            ist[0] += 1
            g = scale * loss_derivative(loss, pred, y[i])
            params0[0] = ftrl_coord(zn0, 0, g, alpha, beta, l1, l2)
            for p in range(Xp[i], Xp[i + 1]):
                j = Xi[p]
                x = Xd[p]
                w[j] = ftrl_coord(znw, j, g * x, alpha, beta, l1, l2)
                for f in range(k):
                    vv = V[j, f]
                    gv = g * x * (q[f] - vv * x)
                    z = Vz[j, f]
                    nn = Vn[j, f]
                    sigma = (math.sqrt(nn + gv * gv) - math.sqrt(nn)) / alpha_v
                    z += gv - sigma * vv
                    nn += gv * gv
                    Vz[j, f] = z
                    Vn[j, f] = nn
                    if abs(z) <= l1_v:
                        V[j, f] = 0.0
                    else:
                        V[j, f] = -(z - math.copysign(l1_v, z)) / (
                            (beta_v + math.sqrt(nn)) / alpha_v + l2_v)
    return -1
