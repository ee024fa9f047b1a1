"""Row utilities of the ranking kernels: grouping identical CSR rows (the distinct contexts
and items of a set of events) and the per-row terms of the FM score.

For disjoint feature sets a (context) and b (item) the classic FM score splits exactly into

    f(a + b) = w0 + part(a) + part(b) + <q(a), q(b)>,
    part(x) = <w, x> + 1/2 (|q(x)|^2 - sum_j x_j^2 |v_j|^2),   q(x) = sum_j x_j v_j,

(Rendle 2010, Eq. 5 applied to each block), which every ranking kernel uses: a pair costs
O(k) once its two rows' terms are known.
"""

import numpy as np

from ...kernels._jit import njit

_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@njit(cache=True)
def row_hashes(indptr, indices, data):
    """64-bit FNV-1a hash of each CSR row's (index, value bits) pairs (float64 ``data``)."""
    n = indptr.shape[0] - 1
    bits = data.view(np.uint64)
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        h = _FNV_OFFSET
        h = (h ^ np.uint64(indptr[i + 1] - indptr[i])) * _FNV_PRIME
        for p in range(indptr[i], indptr[i + 1]):
            h = (h ^ np.uint64(indices[p])) * _FNV_PRIME
            h = (h ^ bits[p]) * _FNV_PRIME
        out[i] = h
    return out


@njit(cache=True)
def _same_row(indptr, indices, data, a, b):
    la = indptr[a + 1] - indptr[a]
    if la != indptr[b + 1] - indptr[b]:
        return False
    for t in range(la):
        if (indices[indptr[a] + t] != indices[indptr[b] + t]
                or data[indptr[a] + t] != data[indptr[b] + t]):
            return False
    return True


@njit(cache=True)
def group_rows(order, h, indptr, indices, data):
    """Distinct rows: ``order`` sorts the rows by hash ``h``; returns ``(label, reps)`` with
    ``label[i]`` the distinct row of row i (numbered in sorted order) and ``reps`` one row per
    distinct row. Rows with equal hashes are compared in full, so a hash collision between
    different rows never merges them; equal rows share a hash and are adjacent in ``order``
    (possibly behind a colliding row, which is why every distinct row of a run of equal hashes
    is searched)."""
    n = order.shape[0]
    label = np.empty(n, dtype=np.int64)
    reps = np.empty(n, dtype=np.int64)
    g = 0
    start = 0  # first distinct row of the current run of equal hashes
    for t in range(n):
        i = order[t]
        if t == 0 or h[i] != h[order[t - 1]]:
            start = g
        found = -1
        for s in range(start, g):
            if _same_row(indptr, indices, data, reps[s], i):
                found = s
                break
        if found < 0:
            reps[g] = i
            found = g
            g += 1
        label[i] = found
    return label, reps[:g]


@njit(cache=True, nogil=True)
def rows_part_q(indptr, indices, data, w, V, part, Q):
    """For every CSR row r: ``part[r] = <w, x> + 1/2 (|q|^2 - sum_j x_j^2 |v_j|^2)`` and
    ``Q[:, r] = q(x_r)`` (``Q`` factor-major, shape (k, n_rows)); each sum in row order.

    The rows are summed into a row-major buffer of a block of rows, then copied into Q by
    factor: Q's rows are written as streams (one write per row and factor across a (k, n)
    array touched k cache lines per row)."""
    k = V.shape[1]
    n = indptr.shape[0] - 1
    B = 256
    buf = np.empty((B, k))
    for r0 in range(0, n, B):
        r1 = min(n, r0 + B)
        for r in range(r0, r1):
            q = buf[r - r0]
            for f in range(k):
                q[f] = 0.0
            lin = 0.0
            sq = 0.0
            for p in range(indptr[r], indptr[r + 1]):
                j = indices[p]
                x = data[p]
                lin += w[j] * x
                for f in range(k):
                    t = V[j, f] * x
                    q[f] += t
                    sq += t * t
            qq = 0.0
            for f in range(k):
                qq += q[f] * q[f]
            part[r] = lin + 0.5 * (qq - sq)
        for f in range(k):
            for r in range(r0, r1):
                Q[f, r] = buf[r - r0, f]
