"""The per-row protocol every online learner shares, and its scalar step rules.

:func:`run_rows` is the one loop of every online learner (Zhang et al. 2018, §4.1 protocol): for
each row of a batch, in the given order, predict with the current model and write that prediction to
``out`` (prequential evaluation costs nothing extra), stop at a prediction that is non-finite or
beyond ``limit``, visit a row of weight s ceil(s) times with its gradient scaled by s / ceil(s)
(so a weight of m equals m repeated rows), count the round and hand it to the learner's
``update``. A learner is three records -- its state, its settings and its work buffers -- and
two compiled functions ``predict(state, cfg, work, rows, i)`` and
``update(state, cfg, work, rows, i, pred, scale) -> status``; ``pred`` includes the row's
offset ``rows.off[i]``, so that the loss and its derivative are those of the full model.
Each learner module has a two-line cached ``learn_rows`` that calls :func:`run_rows` with its
pair; ``run_rows`` is inlined there (numba IR inlining), so each learner's loop calls its step
directly and is cached (a compiled function taking compiled functions as run-time arguments
cannot be cached).

Also here: reading a row into index/value buffers (with the CCFM's bias coordinate),
FTRL-Proximal on one coordinate and the inverse-scaling step size.
"""

import math
from collections import namedtuple

from ._jit import njit

# A batch being learned: CSR arrays, targets, weights, the visiting order, the buffer that
# receives each row's prediction made before its update, and each row's offset: a constant
# added to the learner's prediction (the estimator's intercept kept outside the learner's
# constrained parameters; zeros when there is none).
Rows = namedtuple("Rows", "indptr indices data y sw order out off")

# status codes of ``update`` and ``run_rows``
OK = 0
BAD_PREDICTION = 1  # the prediction of the row was non-finite or beyond ``limit``
BAD_STEP = 2  # the row's update produced a non-finite value
NO_ROOM = 3  # internal: a needed entry or direction had no room (callers prevent it)


@njit(inline="always")
def run_rows(rows, state, cfg, work, predict, update, limit):
    """The per-row protocol (module docstring); returns ``(status, row)``, ``row`` = -1 when
    every row was learned."""
    for rr in range(rows.order.shape[0]):
        i = rows.order[rr]
        swi = rows.sw[i]
        if swi <= 0.0:
            rows.out[i] = predict(state, cfg, work, rows, i) + rows.off[i]
            continue
        reps = max(1, int(math.ceil(swi)))
        scale = swi / reps
        for rep in range(reps):
            pred = predict(state, cfg, work, rows, i) + rows.off[i]
            if rep == 0:
                rows.out[i] = pred
            if not (abs(pred) <= limit):
                return BAD_PREDICTION, i
            state.t[0] += 1
            status = update(state, cfg, work, rows, i, pred, scale)
            if status != OK:
                return status, i
    return OK, -1


@njit(cache=True, nogil=True)
def load_row(indptr, indices, data, i, idx, val):
    """Copy row i of a CSR matrix into ``idx``/``val``; returns its nnz."""
    n = 0
    for p in range(indptr[i], indptr[i + 1]):
        idx[n] = indices[p]
        val[n] = data[p]
        n += 1
    return n


@njit(cache=True, nogil=True)
def load_xhat(indptr, indices, data, i, d, idx, val):
    """The augmented row [x_i; 1] (sorted indices, the bias coordinate d last); returns nnz."""
    n = load_row(indptr, indices, data, i, idx, val)
    idx[n] = d
    val[n] = 1.0
    return n + 1


def max_row_nnz(indptr):
    """Largest number of nonzeros of a row of a CSR batch (0 for an empty batch)."""
    if indptr.shape[0] < 2:
        return 0
    return int((indptr[1:] - indptr[:-1]).max())


@njit(cache=True, nogil=True)
def ftrl_scalar(z, nn, w, g, alpha, beta, l1, l2):
    """FTRL-Proximal step of one coordinate (McMahan et al. 2013, Algorithm 1): the
    coordinate's (z, n, w) before and its gradient g in, the new (z, n, w) out."""
    sigma = (math.sqrt(nn + g * g) - math.sqrt(nn)) / alpha
    z += g - sigma * w
    nn += g * g
    if abs(z) <= l1:
        w = 0.0
    else:
        w = -(z - math.copysign(l1, z)) / ((beta + math.sqrt(nn)) / alpha + l2)
    return z, nn, w


@njit(cache=True, nogil=True)
def ftrl_coord(z, nn, w, j, g, alpha, beta, l1, l2):
    """:func:`ftrl_scalar` on coordinate j of the arrays z, n, w (updated in place); returns
    the new weight."""
    z[j], nn[j], w[j] = ftrl_scalar(z[j], nn[j], w[j], g, alpha, beta, l1, l2)
    return w[j]


@njit(cache=True, nogil=True)
def invscaling(eta0, power_t, t):
    """Step size eta0 / t ** power_t of round t >= 1 (power_t = 0: constant)."""
    return eta0 / math.pow(t, power_t)
