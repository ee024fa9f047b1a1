"""Prediction kernels of the second-order factorization machine.

    f(x) = w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l
         = w0 + <w, x> + 1/2 sum_f [ (sum_j v_jf x_j)^2 - sum_j v_jf^2 x_j^2 ]  (Rendle 2010 Eq. 5)

computed in O(nnz * k) per row. Rows are independent, so the parallel loop gives results that do
not depend on the number of threads.
"""

import math

import numpy as np
from numba import njit, prange


@njit(cache=True, nogil=True)
def fm_row(indptr, indices, data, i, w0, w, V, q, qq):
    """FM prediction for row ``i`` of a CSR matrix, accumulated in float64.

    Leaves ``q[f] = sum_j v_jf x_ij`` (used by gradients); ``q`` and ``qq`` are caller-owned
    buffers of length k. The inner loop runs over the factors, contiguous in ``V``.
    """
    return _row(indptr, indices, data, i, w0, w, V, q, qq)


# fm_row's body, inlined into the loops of this module at numba's IR level: a call per row
# with array arguments costs about as much as a one-hot row's arithmetic.
@njit(cache=True, nogil=True, inline="always")
def _row(indptr, indices, data, i, w0, w, V, q, qq):
    k = V.shape[1]
    for f in range(k):
        q[f] = 0.0
        qq[f] = 0.0
    acc = np.float64(w0)
    for p in range(indptr[i], indptr[i + 1]):
        j = indices[p]
        x = data[p]
        acc += w[j] * x
        for f in range(k):
            t = V[j, f] * x
            q[f] += t
            qq[f] += t * t
    for f in range(k):
        acc += 0.5 * (q[f] * q[f] - qq[f])
    return acc


# Rows per task of the parallel loops: buffers are allocated once per chunk, not per row.
CHUNK = 512
# Fewer rows than this are predicted serially: a solver's per-iteration evaluation (25,000
# MovieLens test rows) on two threads made the serial sweeps that follow it slower, and
# MCMC with n_jobs=2 slower than with one thread (36 against 30 ms per sweep, quiet machine).
PARALLEL_MIN_ROWS = 100_000


def fm_predict_csr(indptr, indices, data, w0, w, V, out):
    """Write f(x_i) for every row of a CSR matrix into ``out`` (float64) and return it.

    Fewer than ``PARALLEL_MIN_ROWS`` rows run in a plain compiled loop: a ``parallel=True``
    kernel compiles its serial branch into slower code (measured 1.9 against 1.25 ms on
    MovieLens' 25,000 test rows, the evaluation ALS and MCMC run after every sweep).
    """
    if indptr.shape[0] - 1 < PARALLEL_MIN_ROWS:
        return _predict_rows(indptr, indices, data, w0, w, V, out)
    return _predict_chunks(indptr, indices, data, w0, w, V, out)


@njit(cache=True)
def _predict_rows(indptr, indices, data, w0, w, V, out):
    k = V.shape[1]
    q = np.empty(k)
    qq = np.empty(k)
    for i in range(indptr.shape[0] - 1):
        out[i] = _row(indptr, indices, data, i, w0, w, V, q, qq)
    return out


@njit(cache=True, parallel=True)
def _predict_chunks(indptr, indices, data, w0, w, V, out):
    n = indptr.shape[0] - 1
    k = V.shape[1]
    for c in prange((n + CHUNK - 1) // CHUNK):
        q = np.empty(k)
        qq = np.empty(k)
        for i in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            out[i] = _row(indptr, indices, data, i, w0, w, V, q, qq)
    return out


@njit(cache=True, parallel=True)
def fm_predict_dense(X, w0, w, V, out):
    """Write f(x_i) for every row of a C-contiguous dense matrix into ``out`` (float64)."""
    n, d = X.shape
    k = V.shape[1]
    for i in prange(n):
        acc = np.float64(w0)
        for j in range(d):
            acc += w[j] * X[i, j]
        for f in range(k):
            s = 0.0
            ss = 0.0
            for j in range(d):
                t = V[j, f] * X[i, j]
                s += t
                ss += t * t
            acc += 0.5 * (s * s - ss)
        out[i] = acc
    return out


def fm_predict_samples_csr(indptr, indices, data, W0s, Ws, Vs, probit, clip, n_blocks, out):
    """Average over stored samples s of min(max(f_s(x_i), lo), hi) with ``clip = (lo, hi)``
    (or of Phi(f_s(x_i)) when ``probit``; ``clip`` is then unused).

    This is the posterior-mean predictor of the MCMC solver: ``W0s`` (S,), ``Ws`` (S, d),
    ``Vs`` (S, d, k). For regression every sample's prediction is clipped to the training
    target range before averaging, as libFM 1.4.4 does (``fm_learn_mcmc_simultaneous.h``,
    ``_learn``: each sweep's test prediction is clipped to [min_target, max_target], then
    summed): the estimate of E[clip(f(x))] under the posterior, whose target is known to lie in
    that range. Pass ``(-inf, inf)`` for the plain average.
    Samples form the outer loop, so each sample's factors stay in cache while every row of one
    of ``n_blocks`` blocks (one per thread) uses them; each row still sums its samples in
    order, so the result does not depend on the blocking or the thread count. One block runs
    in the calling thread: a single-threaded predict never compiles the parallel loop (seconds
    on a cold numba cache).
    """
    n = indptr.shape[0] - 1
    n_blocks = max(1, min(n_blocks, (n + CHUNK - 1) // CHUNK))
    clip = (float(clip[0]), float(clip[1]))
    if n_blocks == 1:
        return _samples_block(indptr, indices, data, W0s, Ws, Vs, probit, clip, 0, n, out)
    return _samples_blocks(indptr, indices, data, W0s, Ws, Vs, probit, clip, n_blocks, out)


@njit(cache=True, parallel=True)
def _samples_blocks(indptr, indices, data, W0s, Ws, Vs, probit, clip, n_blocks, out):
    n = indptr.shape[0] - 1
    size = (n + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        _samples_block(indptr, indices, data, W0s, Ws, Vs, probit, clip, b * size,
                       min(n, (b + 1) * size), out)
    return out


@njit(cache=True, nogil=True)
def _samples_block(indptr, indices, data, W0s, Ws, Vs, probit, clip, r0, r1, out):
    # The rows r0:r1 of fm_predict_samples_csr.
    S = W0s.shape[0]
    k = Vs.shape[2]
    lo, hi = clip
    q = np.empty(k)
    qq = np.empty(k)
    for i in range(r0, r1):
        out[i] = 0.0
    for s in range(S):
        w = Ws[s]
        V = Vs[s]
        for i in range(r0, r1):
            f = _row(indptr, indices, data, i, W0s[s], w, V, q, qq)
            if probit:
                f = 0.5 * math.erfc(-f / math.sqrt(2.0))
            else:
                f = min(max(f, lo), hi)
            out[i] += f
    for i in range(r0, r1):
        out[i] /= S
    return out
