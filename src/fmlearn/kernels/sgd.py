"""Stochastic-gradient epoch of the classic FM (libFM's ``fm_learn_sgd_element``).

One pass over the rows in the order given; per row the prediction and the factor sums
q_f = sum_j v_jf x_j cost O(nnz_row * k), then every parameter touched by the row moves along
its negative gradient with L2 shrinkage (applied lazily, to the present features only, as libFM
does). A row of weight s is visited ceil(s) times in a row with steps scaled by s / ceil(s):
a large weight never becomes one oversized step, and a weight of m equals m repeated rows.
"""

import math
from collections import namedtuple

import numpy as np

from ._jit import njit
from .losses import SMOOTHNESS, SQUARED, loss_derivative
from .predict import fm_row

CONSTANT = 0
INVSCALING = 1
SCHEDULE_CODES = {"constant": CONSTANT, "invscaling": INVSCALING}


@njit(cache=True, nogil=True)
def learning_rate_at(schedule, eta0, power_t, t):
    if schedule == INVSCALING:
        return eta0 / math.pow(1.0 + t, power_t)
    return eta0


NO_NORM = 0
NORM_BINARY = 1
NORM_GENERAL = 2


@njit(cache=True, nogil=True)
def _pred_and_grad_norm2(indptr, indices, data, i, w0, w, V, q, qq, a, b):
    """FM prediction of row i and ||d f(x_i) / d(w0, w, V)||^2 (see :func:`_row_terms`)."""
    mode = NORM_BINARY
    for p in range(indptr[i], indptr[i + 1]):
        if data[p] * data[p] != 1.0:
            mode = NORM_GENERAL
    return _row_terms(indptr, indices, data, i, w0, w, V, q, qq, a, b, mode)


# Inlined into its callers at numba's IR level: a call per row with array arguments cost about
# as much as a one-hot row's arithmetic (2M rows: 0.20 -> 0.15 CPU s per implicit epoch).
@njit(cache=True, nogil=True, inline="always")
def _row_terms(indptr, indices, data, i, w0, w, V, q, qq, a, b, mode):
    """FM prediction of row i and, unless ``mode`` is ``NO_NORM``, ||d f(x_i) / d(w0, w,
    V)||^2 (else 1 + S2), in one pass over the row.

    With h_jf = x_j (q_f - v_jf x_j), sum_j h_jf^2 = q_f^2 S2 - 2 q_f A_f + B_f where
    S2 = sum_j x_j^2, A_f = sum_j v_jf x_j^3, B_f = sum_j v_jf^2 x_j^4: no second pass.
    Leaves q[f] = sum_j v_jf x_ij for the update. ``NORM_BINARY`` (the caller knows every
    x_j^2 of the row is 1: one-hot and binary features): A_f = q_f and B_f = sum_j (v_jf x_j)^2
    exactly, the prediction's own sums, and ``a``, ``b`` are not touched.
    """
    k = V.shape[1]
    general = mode == NORM_GENERAL
    for f in range(k):
        q[f] = 0.0
        qq[f] = 0.0
    if general:
        for f in range(k):
            a[f] = 0.0
            b[f] = 0.0
    pred = 0.0  # w0 is added last: it is what the previous row's step changed
    s2 = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        j = indices[p]
        x = data[p]
        x2 = x * x
        pred += w[j] * x
        s2 += x2
        if general:
            for f in range(k):
                t = V[j, f] * x
                tt = t * t
                q[f] += t
                qq[f] += tt
                a[f] += t * x2
                b[f] += tt * x2
        else:
            for f in range(k):
                t = V[j, f] * x
                q[f] += t
                qq[f] += t * t
    # no branch in this loop: the norm of a binary row needs only the two sums
    q2 = 0.0
    qq_sum = 0.0
    for f in range(k):
        qf2 = q[f] * q[f]
        pred += 0.5 * (qf2 - qq[f])
        q2 += qf2
        qq_sum += qq[f]
    pred += w0
    norm2 = 1.0 + s2
    if mode == NORM_BINARY:
        norm2 += q2 * (s2 - 2.0) + qq_sum
    elif general:
        norm2 += q2 * s2
        for f in range(k):
            norm2 += b[f] - 2.0 * q[f] * a[f]
    return pred, norm2


Rows = namedtuple("Rows", ["indptr", "indices", "data", "y", "sw"])
Rows.__doc__ = """Training rows: CSR arrays, targets (labels in {-1, +1} for the logistic loss)
and sample weights (float64)."""

Params = namedtuple("Params", ["w", "V", "scal"])
Params.__doc__ = """The model, updated in place: ``w`` (d,), ``V`` (d, k), ``scal`` (float64
[w0])."""

SGDConfig = namedtuple("SGDConfig", ["loss", "eta0", "schedule", "power_t", "reg0", "reg1",
                                     "reg2", "clip_lo", "clip_hi", "limit", "implicit",
                                     "binary", "unit_weights"], defaults=(False, False))
SGDConfig.__doc__ = """Scalars of the update: loss code, step size ``eta0`` and its
``schedule`` code and ``power_t``, the L2 penalties of w0, w and V, the clipping range of the
squared loss's prediction, the divergence ``limit`` on |f(x)| and ``implicit``; and two facts
about the rows that the caller checked once (:func:`row_facts`) so that the epoch does not
test them per row: ``binary`` (every stored x_j is +-1) and ``unit_weights`` (every sample
weight is 1). False (the default) is always correct, only slower."""


def row_facts(data, sw):
    """``(binary, unit_weights)`` of :class:`SGDConfig` for the rows' stored values ``data``
    and sample weights ``sw``: one pass over each, once per fit."""
    return bool(np.all(np.abs(data) == 1)), bool(np.all(sw == 1))


Work = namedtuple("Work", ["q", "qq", "a", "b", "pred"])
Work.__doc__ = """Caller-owned buffers, so that a call allocates nothing (a one-row call costs
O(nnz k)): ``q``, ``qq``, ``a``, ``b`` of length k, and ``pred``, either empty or of length
``order.shape[0]``: then ``pred[r]`` receives the raw prediction f(x) of the r-th visited row
before its update (the prequential prediction of online learning; the first visit of a
weighted row)."""


def sgd_work(n_factors, n_pred=0):
    """Fresh :class:`Work` buffers for ``n_factors`` factors and ``n_pred`` predictions."""
    k = n_factors
    return Work(np.empty(k), np.empty(k), np.empty(k), np.empty(k), np.empty(n_pred))


@njit(cache=True)
def sgd_epoch(rows, params, order, block, t, cfg, work):
    """Visit the rows of ``order`` once; returns ``(t, bad_row)`` with ``bad_row = -1`` when
    every step was finite.

    With ``block = 1`` ``order`` lists rows; with ``block > 1`` it lists blocks: entry b stands
    for the rows ``order[b] * block`` up to the next block (or the end), in storage order. A
    shuffled epoch then costs a permutation of n / block entries, not of n rows.

    ``t`` counts steps over the estimator's life (it drives the step-size schedule across
    ``partial_fit`` calls). The epoch stops at the first row whose prediction is non-finite or
    exceeds ``cfg.limit`` in magnitude.

    With ``cfg.implicit`` the step is divided by ``1 + eta * s * L * ||grad f||^2`` (L the
    loss's smoothness): the implicit (proximal) update of the linearised loss, which cannot
    overshoot the row's target however large ``eta`` or the target scale (Kulis & Bartlett
    2010; Toulis & Airoldi 2017). For ``eta * ||grad f||^2 << 1`` it is libFM's plain step.
    """
    indptr, indices, data = rows.indptr, rows.indices, rows.data
    n = indptr.shape[0] - 1
    w, V = params.w, params.V
    k = V.shape[1]
    q, qq = work.q, work.qq
    keep_pred = work.pred.shape[0] > 0
    mode = NO_NORM
    if cfg.implicit:
        mode = NORM_BINARY if cfg.binary else NORM_GENERAL
    w0 = params.scal[0]
    r = -1
    for bl in range(order.shape[0]):
        lo = order[bl] * block
        for i in range(lo, min(lo + block, n)):
            r += 1
            if cfg.unit_weights:
                reps, scale = 1, 1.0
            else:
                s = rows.sw[i]
                if s <= 0.0:  # a zero-weight row does not exist for the model
                    if keep_pred:
                        work.pred[r] = fm_row(indptr, indices, data, i, w0, w, V, q, qq)
                    continue
                reps = max(1, int(math.ceil(s)))
                scale = s / reps
            curv = SMOOTHNESS[cfg.loss] * scale
            for rep in range(reps):  # later visits of the same row see the updated model
                pred, norm2 = _row_terms(indptr, indices, data, i, w0, w, V, q, qq, work.a,
                                         work.b, mode)
                if keep_pred and rep == 0:
                    work.pred[r] = pred
                if not (abs(pred) <= cfg.limit):
                    params.scal[0] = w0
                    return t, i
                eta = learning_rate_at(cfg.schedule, cfg.eta0, cfg.power_t, t)
                t += 1
                # the implicit step's factor needs the norm, not the prediction: a division
                # off the chain that runs from one row's prediction to the next row's
                shrink = scale / (1.0 + eta * curv * norm2) if cfg.implicit else scale
                if cfg.loss == SQUARED:
                    pred = min(max(pred, cfg.clip_lo), cfg.clip_hi)
                g = shrink * loss_derivative(cfg.loss, pred, rows.y[i])
                w0 -= eta * (g + cfg.reg0 * w0)
                for p in range(indptr[i], indptr[i + 1]):
                    j = indices[p]
                    x = data[p]
                    w[j] -= eta * (g * x + cfg.reg1 * w[j])
                    for f in range(k):
                        v = V[j, f]
                        V[j, f] = v - eta * (g * x * (q[f] - v * x) + cfg.reg2 * v)
    params.scal[0] = w0
    return t, -1
