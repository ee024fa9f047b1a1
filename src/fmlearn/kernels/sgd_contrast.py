"""Stochastic-gradient epoch of the classic FM on contrast targets y_g = sum_i C[g, i] f(x_i).

:func:`fmlearn.kernels.sgd.sgd_epoch` with targets in place of rows: a step visits one target,
predicts it as (C f)_g = sum_i C[g, i] f(x_i) over its rows (O(sum of their nnz k)), and moves
every parameter the target touches along the negative gradient of
1/2 s_g ((C f)_g - y_g)^2, whose gradient is e_g sum_i C[g, i] grad f(x_i). The gradient is
gathered per distinct feature of the target at the old parameters before any of them moves
(the rows of a target may share features: the vTEC encoding's angle features are in all
four), and the L2 shrinkage is applied once per distinct feature, as libFM applies it to the
features present in a row. The bias's derivative is sum_i C[g, i]: zero for double
differences, whose bias is then left where it is, neither stepped nor shrunk (a target whose
row sum is zero does not hold w0; the caller passes ``rowsum`` zero when w0 is held).
Weights, the step-size schedule and the implicit step are those of ``sgd_epoch``; predictions
are not clipped (the clip range of f is unknown from contrasts).
"""

import math
from collections import namedtuple

import numpy as np

from ._jit import njit
from .losses import SMOOTHNESS, loss_derivative
from .predict import fm_row
from .sgd import learning_rate_at

Targets = namedtuple("Targets", ["cptr", "crow", "cval", "indptr", "indices", "data", "y",
                                 "sw", "rowsum"])
Targets.__doc__ = """Training targets: C's CSR arrays (``cptr``, ``crow``, ``cval``: the rows
of target g and their coefficients), X's CSR arrays, targets ``y`` and weights ``sw``
(n_targets,), and ``rowsum`` = C 1 (zeros when the bias is held)."""

TargetWork = namedtuple("TargetWork", ["q", "qq", "Q", "pos", "feat", "gw", "gv"])
TargetWork.__doc__ = """Caller-owned buffers: ``q``, ``qq`` (k,); ``Q`` (rows per target, k)
the factor sums of the target's rows; ``pos`` (d,) int64, -1 except during a step (slot of a
feature in the target); ``feat`` (m,) int64, ``gw`` (m,), ``gv`` (m, k) for the m distinct
features of a target: the gradient of (C f)_g."""


def target_work(n_features, n_factors, max_rows, max_features):
    """Fresh :class:`TargetWork` for targets of at most ``max_rows`` rows and
    ``max_features`` stored entries over their rows."""
    k = n_factors
    m = max(1, max_features)
    return TargetWork(np.empty(k), np.empty(k), np.empty((max(1, max_rows), k)),
                      np.full(n_features, -1, dtype=np.int64), np.empty(m, dtype=np.int64),
                      np.empty(m), np.empty((m, k)))


@njit(cache=True, nogil=True)
def _target_gradient(rows, g, params, work):
    """(C f)_g, and in ``work`` the gradient of (C f)_g per distinct feature; returns
    (prediction, number of distinct features, squared norm of the gradient incl. w0's)."""
    w, V = params.w, params.V
    k = V.shape[1]
    a0 = rows.cptr[g]
    pred = 0.0
    for a in range(a0, rows.cptr[g + 1]):
        fi = fm_row(rows.indptr, rows.indices, rows.data, rows.crow[a], params.scal[0], w, V,
                    work.q, work.qq)
        pred += rows.cval[a] * fi
        for f in range(k):
            work.Q[a - a0, f] = work.q[f]
    nf = 0
    for a in range(a0, rows.cptr[g + 1]):
        i = rows.crow[a]
        c = rows.cval[a]
        for p in range(rows.indptr[i], rows.indptr[i + 1]):
            j = rows.indices[p]
            x = rows.data[p]
            s = work.pos[j]
            if s < 0:
                s = nf
                work.pos[j] = s
                work.feat[s] = j
                work.gw[s] = 0.0
                for f in range(k):
                    work.gv[s, f] = 0.0
                nf += 1
            cx = c * x
            work.gw[s] += cx
            for f in range(k):
                work.gv[s, f] += cx * (work.Q[a - a0, f] - V[j, f] * x)
    norm2 = rows.rowsum[g] * rows.rowsum[g]
    for s in range(nf):
        norm2 += work.gw[s] * work.gw[s]
        for f in range(k):
            norm2 += work.gv[s, f] * work.gv[s, f]
    return pred, nf, norm2


@njit(cache=True)
def sgd_target_epoch(rows, params, order, t, cfg, work):
    """Visit the targets ``order`` once; returns ``(t, bad_target)``, ``bad_target = -1`` when
    every step was finite.

    ``params``, ``cfg`` (``clip_lo``/``clip_hi`` unused) and ``t`` are those of
    :func:`fmlearn.kernels.sgd.sgd_epoch`; ``cfg.limit`` bounds |(C f)_g|.
    """
    w, V = params.w, params.V
    k = V.shape[1]
    curv = SMOOTHNESS[cfg.loss]
    for r in range(order.shape[0]):
        g = order[r]
        if rows.sw[g] <= 0.0:
            continue
        reps = max(1, int(math.ceil(rows.sw[g])))
        scale = rows.sw[g] / reps
        for _rep in range(reps):  # later visits of the same target see the updated model
            pred, nf, norm2 = _target_gradient(rows, g, params, work)
            if not (abs(pred) <= cfg.limit):
                for s in range(nf):
                    work.pos[work.feat[s]] = -1
                return t, g
            eta = learning_rate_at(cfg.schedule, cfg.eta0, cfg.power_t, t)
            t += 1
            e = scale * loss_derivative(cfg.loss, pred, rows.y[g])
            if cfg.implicit:
                e /= 1.0 + eta * scale * curv * norm2
            if rows.rowsum[g] != 0.0:  # w0 is in the target: step and shrink it
                w0 = params.scal[0]
                params.scal[0] = w0 - eta * (e * rows.rowsum[g] + cfg.reg0 * w0)
            for s in range(nf):
                j = work.feat[s]
                work.pos[j] = -1
                w[j] -= eta * (e * work.gw[s] + cfg.reg1 * w[j])
                for f in range(k):
                    v = V[j, f]
                    V[j, f] = v - eta * (e * work.gv[s, f] + cfg.reg2 * v)
    return t, -1
