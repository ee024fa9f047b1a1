"""Row-chunk products of the one-pass solvers: a CSR row range times a thin matrix (and its
transpose) on the raw arrays of the whole batch, and the products with the element-wise
square of a chunk, ``(X o X) v`` and ``(X o X)^T r``, without forming ``X o X``.

scipy cannot multiply a row range of a CSR matrix without copying it (its constructor copies
views of a larger array, and row slicing copies the rows); these kernels take ``indptr[a:b+1]``
(not shifted) with the batch's full ``indices`` and ``data``, so a chunk costs nothing. They
accumulate in the same order as scipy's sparsetools (row by row, value by value). The one-pass
solvers of the improved FM (zero diagonal) and of moment elimination need
``(Z o Z)^T rho`` and ``(Z o Z) diag(U V^T)`` at every step; squaring each chunk first costs a
copy of the chunk per product. These kernels read every stored value once and square it in a
register. Dense chunks are C-contiguous ``(rows, d)`` arrays, sparse chunks the raw CSR arrays
of a row range. Every output entry is summed in row order, so results do not depend on the
thread that runs the chunk (``nogil``: the chunks run on the solver's thread pool).
"""

import numpy as np

from ._jit import njit


@njit(cache=True, nogil=True)
def csr_matmat(indptr, indices, data, B, out):
    """``out = A @ B`` for the CSR rows ``indptr`` (``n + 1`` offsets into ``indices``/``data``),
    B of shape (d, c), out of shape (n, c)."""
    n = indptr.shape[0] - 1
    c = B.shape[1]
    for i in range(n):
        for f in range(c):
            out[i, f] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            x = data[p]
            for f in range(c):
                out[i, f] += x * B[j, f]


@njit(cache=True, nogil=True)
def csr_tmatmat(indptr, indices, data, R, out):
    """``out += A^T @ R`` for the CSR rows ``indptr``, R of shape (n, c), out of shape (d, c)."""
    n = indptr.shape[0] - 1
    c = R.shape[1]
    for i in range(n):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            x = data[p]
            for f in range(c):
                out[j, f] += x * R[i, f]


@njit(cache=True, nogil=True)
def sq_matvec_dense(X, v, out):
    """``out[i] = sum_j X[i, j]^2 v[j]`` (float64 accumulation)."""
    n, d = X.shape
    for i in range(n):
        acc = 0.0
        for j in range(d):
            x = np.float64(X[i, j])
            acc += x * x * v[j]
        out[i] = acc


@njit(cache=True, nogil=True)
def sq_rmatvec_dense(X, r, out):
    """``out[j] += sum_i r[i] X[i, j]^2`` (float64 accumulation, rows in order)."""
    n, d = X.shape
    for i in range(n):
        ri = np.float64(r[i])
        for j in range(d):
            x = np.float64(X[i, j])
            out[j] += ri * x * x


@njit(cache=True, nogil=True)
def sq_matvec_csr(indptr, indices, data, v, out):
    """``out[i] = sum_p data[p]^2 v[indices[p]]`` over the stored values of row ``i``."""
    n = indptr.shape[0] - 1
    for i in range(n):
        acc = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            x = np.float64(data[p])
            acc += x * x * v[indices[p]]
        out[i] = acc


@njit(cache=True, nogil=True)
def sq_rmatvec_csr(indptr, indices, data, r, out):
    """``out[indices[p]] += r[i] data[p]^2`` over the rows in order."""
    n = indptr.shape[0] - 1
    for i in range(n):
        ri = np.float64(r[i])
        for p in range(indptr[i], indptr[i + 1]):
            x = np.float64(data[p])
            out[indices[p]] += ri * x * x


@njit(cache=True, nogil=True)
def residual_rows(P, shift, b0, k, extra, y, sw, inv_wsum, R, rho, colsum):
    """The per-row part of the one-pass residual pass, from ``P = X [U V w 1]`` of a chunk.

    With ``p = P[i] - shift``: f_i = b0 + p_w + <p_U, p_V> + extra[i] (``extra`` empty: 0),
    r_i = y_i - f_i, ``rho[i] = sw_i r_i inv_wsum``, ``R[i] = [rho_i p_U, rho_i, 0...]``
    (R's width may be padded), ``colsum += column sums of R``. Returns ``(sum sw r^2, row)``
    with ``row`` the first row whose sum ``P[i, 2k + 1]`` is not finite (NaN or infinity in
    X), or -1.
    """
    n = P.shape[0]
    width = R.shape[1]
    rss = 0.0
    for i in range(n):
        if not np.isfinite(P[i, 2 * k + 1]):
            return rss, i
        quad = 0.0
        for f in range(k):
            quad += (P[i, f] - shift[f]) * (P[i, k + f] - shift[k + f])
        pred = b0 + (P[i, 2 * k] - shift[2 * k]) + quad
        if extra.shape[0]:
            pred += extra[i]
        r = y[i] - pred
        rss += sw[i] * r * r
        rc = sw[i] * r * inv_wsum
        rho[i] = rc
        for f in range(k):
            R[i, f] = rc * (P[i, f] - shift[f])
        R[i, k] = rc
        for f in range(k + 1, width):
            R[i, f] = 0.0
        for f in range(k + 1):
            colsum[f] += R[i, f]
    return rss, -1
