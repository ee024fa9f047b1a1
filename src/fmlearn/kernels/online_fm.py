"""The classic FM learned online (the FM-* baselines of Zhang et al. 2018, §4.1): one round's update
of passive-aggressive or FTRL-Proximal on (w0, w, V), run by
:func:`fmlearn.kernels.steps.run_rows`. A round touches only the row's coordinates: O(nnz k).
Online gradient descent on the classic FM is FMRegressor's SGD, :func:`fmlearn.kernels.sgd.
sgd_epoch` (one learner, one kernel).
"""

import math
from collections import namedtuple

from ._jit import njit
from .losses import LOGISTIC, loss_derivative
from .predict import fm_row
from .sgd import _pred_and_grad_norm2
from .steps import BAD_STEP, OK, ftrl_coord, ftrl_scalar, run_rows

# t: 1-array, rounds learned; w0: 1-array
FMState = namedtuple("FMState", "t w0 w V")
# FTRL-Proximal adds the (z, n) of every coordinate
FTRLFMState = namedtuple("FTRLFMState", "t w0 w V z_bias n_bias z_linear n_linear z_pairwise "
                                        "n_pairwise")
PAConfig = namedtuple("PAConfig", "loss pa_c epsilon")
FTRLConfig = namedtuple("FTRLConfig", "loss learning_rate ftrl_beta l1_linear reg_bias "
                                      "reg_linear learning_rate_pairwise ftrl_beta_pairwise "
                                      "l1_pairwise reg_pairwise")
# q: sum_j v_jf x_j of the row; qq, fa, fb: buffers; norm2: 1-array, ||grad f||^2 of the row
FMWork = namedtuple("FMWork", "q qq fa fb norm2")


@njit(cache=True, nogil=True)
def predict_with_norm(state, cfg, work, rows, i):
    """f(x_i), and ||d f / d(w0, w, V)||^2 into work.norm2 (PA's tau)."""
    pred, work.norm2[0] = _pred_and_grad_norm2(rows.indptr, rows.indices, rows.data, i,
                                               state.w0[0], state.w, state.V, work.q, work.qq,
                                               work.fa, work.fb)
    return pred


@njit(cache=True, nogil=True)
def predict(state, cfg, work, rows, i):
    return fm_row(rows.indptr, rows.indices, rows.data, i, state.w0[0], state.w, state.V,
                  work.q, work.qq)


@njit(cache=True, nogil=True)
def _descend(state, rows, i, g, eta, reg_linear, reg_pairwise, q):
    """w -= eta (g x + reg w), V -= eta (g d f / dV + reg V) on the row's coordinates (an
    overflow shows in the next row's prediction, or in the learner's check after the call)."""
    w, V = state.w, state.V
    k = V.shape[1]
    for p in range(rows.indptr[i], rows.indptr[i + 1]):
        j = rows.indices[p]
        x = rows.data[p]
        w[j] -= eta * (g * x + reg_linear * w[j])
        for f in range(k):
            vv = V[j, f]
            V[j, f] = vv - eta * (g * x * (q[f] - vv * x) + reg_pairwise * vv)


@njit(cache=True, nogil=True, error_model="numpy")
def update_pa(state, cfg, work, rows, i, pred, scale):
    """Passive-aggressive PA-I (Crammer et al. 2006) on the FM, linearized in (w0, w, V).

    Loss: epsilon-insensitive (squared) or hinge (logistic, labels +-1). With h the gradient of
    f(x) in the parameters, tau = min(pa_c, l_PA / ||h||^2) and theta <- theta - tau s h,
    s = d l_PA / d f."""
    y = rows.y[i]
    if cfg.loss == LOGISTIC:
        l_pa = 1.0 - y * pred
        sgn = -y
    else:
        l_pa = abs(pred - y) - cfg.epsilon
        sgn = 1.0 if pred > y else -1.0
    if l_pa <= 0.0:
        return OK
    tau = min(cfg.pa_c * scale, l_pa / work.norm2[0])
    g = tau * sgn
    state.w0[0] -= g
    _descend(state, rows, i, g, 1.0, 0.0, 0.0, work.q)
    return OK if math.isfinite(state.w0[0]) else BAD_STEP


@njit(cache=True, nogil=True, error_model="numpy")
def update_ftrl(state, cfg, work, rows, i, pred, scale):
    """FTRL-Proximal (McMahan et al. 2013, Algorithm 1) on every coordinate of (w0, w, V): the
    FM-FTRL baseline of Zhang et al. 2018, §4.1 (after Ta 2015). The factors' z starts at
    -(beta_v / alpha_v) V_init, which centres their proximal term at the random initialization
    instead of 0 (from 0 every factor gradient would vanish)."""
    w, V, q = state.w, state.V, work.q
    k = V.shape[1]
    g = scale * loss_derivative(cfg.loss, pred, rows.y[i])
    ftrl_coord(state.z_bias, state.n_bias, state.w0, 0, g, cfg.learning_rate, cfg.ftrl_beta,
               cfg.l1_linear, cfg.reg_bias)
    for p in range(rows.indptr[i], rows.indptr[i + 1]):
        j = rows.indices[p]
        x = rows.data[p]
        ftrl_coord(state.z_linear, state.n_linear, w, j, g * x, cfg.learning_rate,
                   cfg.ftrl_beta, cfg.l1_linear, cfg.reg_linear)
        for f in range(k):
            vv = V[j, f]
            gv = g * x * (q[f] - vv * x)
            state.z_pairwise[j, f], state.n_pairwise[j, f], V[j, f] = ftrl_scalar(
                state.z_pairwise[j, f], state.n_pairwise[j, f], vv, gv,
                cfg.learning_rate_pairwise, cfg.ftrl_beta_pairwise, cfg.l1_pairwise,
                cfg.reg_pairwise)
    return OK if math.isfinite(state.w0[0]) else BAD_STEP


# the per-row protocol (:func:`fmlearn.kernels.steps.run_rows`) with each learner's step


@njit(cache=True, nogil=True)
def learn_pa(rows, state, cfg, work, limit):
    return run_rows(rows, state, cfg, work, predict_with_norm, update_pa, limit)


@njit(cache=True, nogil=True)
def learn_ftrl(rows, state, cfg, work, limit):
    return run_rows(rows, state, cfg, work, predict, update_ftrl, limit)
