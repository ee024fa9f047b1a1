"""Prediction kernels of the second-order factorization machine.

    f(x) = w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l
         = w0 + <w, x> + 1/2 sum_f [ (sum_j v_jf x_j)^2 - sum_j v_jf^2 x_j^2 ]  (Rendle 2010 Eq. 5)

computed in O(nnz * k) per row. Rows are independent, so the parallel loop gives results that do
not depend on the number of threads.
"""

import math

import numpy as np
from numba import prange

from ._jit import njit


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



@njit(cache=True, nogil=True, inline="always")
def _pair(w0, w, V, a, b, x, tm):
    """:func:`_row`'s value for a row of two entries, features ``a`` then ``b``, both of
    value ``x``: the same operations in the same order (the linear terms after ``w0``, then
    each factor's ``0.5 (q_f^2 - qq_f)`` with ``q_f = (0 + t_a) + t_b``), so the same
    double, with the factor sums in registers instead of ``_row``'s buffers (a store and a
    load per entry and factor less: the row state of ``kernels.cd_layout.field_row_state``
    on two fields). The factors' terms are computed in one loop into ``tm`` (float64, at
    least k long), which the compiler vectorizes, and added to the prediction in a second,
    in factor order. ``field_row_state``'s loop over 8,000,000 rows, k = 8, the row state
    already touched, 5 alternated repetitions in one process: 0.075 (0.075-0.077) CPU s
    against 0.103 (0.102-0.105) with one loop, whose running sum kept it scalar (the same
    doubles)."""
    acc = np.float64(w0)
    acc += w[a] * x
    acc += w[b] * x
    va = V[a]
    vb = V[b]
    for f in range(V.shape[1]):
        ta = va[f] * x
        tb = vb[f] * x
        q = 0.0
        q += ta
        q += tb
        qq = 0.0
        qq += ta * ta
        qq += tb * tb
        tm[f] = 0.5 * (q * q - qq)
    for f in range(V.shape[1]):
        acc += tm[f]
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

    Batched over the samples: one pass over the rows, each row computing every sample's
    prediction at once. The parameters of the features the rows use are first gathered
    feature-major, ``Wt`` (m, S) and ``Vt`` (m, k * S) with ``Vt[j, f * S + s] = Vs[s, j, f]``
    (O(m S k) for the m distinct features, never more than the prediction itself), so a row's
    inner loops run over the S samples side by side: contiguous, without a chain of dependent
    additions, which the compiler vectorises. Each sample's f_s(x_i) is still summed in the
    order of the single-model kernel (bias, linear terms in the row's order, then the factors
    f = 0, 1, ...) and the clipped values are summed over s = 0, 1, ... in order, so the
    result is bitwise that of the former sample-by-sample loop and does not depend on the
    blocking or the thread count (measured 1.35x faster on 100,000 one-hot rows, S = 90,
    k = 8; ``benchmarks/bench_serving.py``). One of ``n_blocks`` row blocks per thread; one
    block runs in the calling thread: a single-threaded predict never compiles the parallel
    loop (seconds on a cold numba cache).
    """
    n = indptr.shape[0] - 1
    n_blocks = max(1, min(n_blocks, (n + CHUNK - 1) // CHUNK))
    clip = (float(clip[0]), float(clip[1]))
    W0s, Wt, Vt, local = samples_feature_major(indptr, indices, W0s, Ws, Vs)
    if n_blocks == 1:
        return _samples_block(indptr, local, data, W0s, Wt, Vt, probit, clip, 0, n, out)
    return _samples_blocks(indptr, local, data, W0s, Wt, Vt, probit, clip, n_blocks, out)


def samples_feature_major(indptr, indices, W0s, Ws, Vs):
    """``(W0s, Wt, Vt, local)``: the samples of the features the CSR rows use, feature-major
    (see :func:`fm_predict_samples_csr`), and the rows' column indices renumbered into them."""
    S, d, k = Vs.shape
    used = np.asarray(indices[indptr[0]:indptr[-1]])
    local = np.zeros(indices.shape[0], dtype=np.intp)
    if used.shape[0] >= d:  # as many entries as features: take them all, no renumbering
        cols = None
        local[indptr[0]:indptr[-1]] = used
    elif 16 * used.shape[0] < d:  # a few rows of many features: sort their indices
        cols, inv = np.unique(used, return_inverse=True)
        local[indptr[0]:indptr[-1]] = inv.reshape(-1)
    else:  # a mark per feature (O(nnz + d), no sort)
        mark = np.zeros(d, dtype=bool)
        mark[used] = True
        cols = np.flatnonzero(mark)
        rank = np.cumsum(mark, dtype=np.intp) - 1
        local[indptr[0]:indptr[-1]] = rank[used]
    Wsel = Ws if cols is None else Ws[:, cols]
    Vsel = Vs if cols is None else Vs[:, cols, :]
    Wt = np.ascontiguousarray(Wsel.T)
    Vt = np.ascontiguousarray(np.transpose(Vsel, (1, 2, 0))).reshape(Wt.shape[0], k * S)
    return np.ascontiguousarray(W0s), Wt, Vt, local


@njit(cache=True, parallel=True)
def _samples_blocks(indptr, indices, data, W0s, Wt, Vt, probit, clip, n_blocks, out):
    n = indptr.shape[0] - 1
    size = (n + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        _samples_block(indptr, indices, data, W0s, Wt, Vt, probit, clip, b * size,
                       min(n, (b + 1) * size), out)
    return out


@njit(cache=True, nogil=True)
def _samples_block(indptr, indices, data, W0s, Wt, Vt, probit, clip, r0, r1, out):
    # The rows r0:r1 of fm_predict_samples_csr, every sample of a row at once (feature-major
    # samples: Wt (m, S), Vt (m, k * S)).
    S = W0s.shape[0]
    kS = Vt.shape[1]
    k = kS // S if S > 0 else 0
    lo, hi = clip
    acc = np.empty(S)
    q = np.empty(kS)
    qq = np.empty(kS)
    for i in range(r0, r1):
        for s in range(S):
            acc[s] = W0s[s]
        for t in range(kS):
            q[t] = 0.0
            qq[t] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            x = data[p]
            wj = Wt[j]
            vj = Vt[j]
            for s in range(S):
                acc[s] += wj[s] * x
            for t in range(kS):
                v = vj[t] * x
                q[t] += v
                qq[t] += v * v
        for f in range(k):
            o = f * S
            for s in range(S):
                acc[s] += 0.5 * (q[o + s] * q[o + s] - qq[o + s])
        tot = 0.0
        for s in range(S):
            a = acc[s]
            if probit:
                a = 0.5 * math.erfc(-a / math.sqrt(2.0))
            else:
                a = min(max(a, lo), hi)
            tot += a
        out[i] = tot / S
    return out
