"""How the one-pass solvers read a mini-batch: the products of the standardised rows
``Z = (X - mean) / scale`` with thin matrices, in fixed row chunks on a thread pool, and the
first batch's per-feature statistics.

Nothing here copies the batch. The standardisation is applied to the thin operands
(``Z B = X (B / scale) - 1 (mean^T (B / scale))``), a sparse chunk is a CSR view of the raw
arrays of its rows, squares ``Z o Z`` are taken value by value inside compiled kernels
(:mod:`fmlearn.kernels.squares`), and the first batch's variance and moments are summed chunk
by chunk. The chunking depends on the data shape only and partial sums are reduced in chunk
order, so results do not depend on the number of threads.
"""

import numpy as np
import scipy.sparse as sp

from .._threads import blas_single_thread, resolve_n_jobs
from ..kernels.rows import (
    csr_matmat,
    csr_tmatmat,
    residual_rows,
    sq_matvec_csr,
    sq_matvec_dense,
    sq_rmatvec_csr,
    sq_rmatvec_dense,
)

__all__ = ["Batch", "BatchRows", "predict_batch", "scale_from_variance", "standardization",
           "weighted_moments"]

#: Rows of a batch are processed in chunks of about this many stored values (dense entries or
#: CSR nonzeros): a chunk is read from memory once per fused pass and stays in cache between
#: its two BLAS products.
CHUNK_VALUES = 1 << 20
#: Fewest rows per chunk (very wide rows): below this the per-chunk Python work dominates.
MIN_CHUNK_ROWS = 64

_POOLS = {}


def _pool(n_threads):
    from concurrent.futures import ThreadPoolExecutor

    if n_threads not in _POOLS:
        _POOLS[n_threads] = ThreadPoolExecutor(n_threads, thread_name_prefix="fmlearn-gfm")
    return _POOLS[n_threads]


class CSRRows:
    """Rows of a CSR batch as the raw arrays (``indptr`` a view of the batch's offsets, not
    shifted; ``indices``, ``data`` the batch's own arrays): no copy. ``A @ B`` for a thin B."""

    def __init__(self, indptr, indices, data, n_features):
        self.indptr, self.indices, self.data = indptr, indices, data
        self.shape = (indptr.shape[0] - 1, n_features)

    def __matmul__(self, B):
        B = np.asarray(B)
        vec = B.ndim == 1
        B2 = B.reshape(-1, 1) if vec else B
        out = np.empty((self.shape[0], B2.shape[1]))
        csr_matmat(self.indptr, self.indices, self.data, B2, out)
        return out[:, 0] if vec else out


def _tmatmul(Xc, R):
    """``Xc^T @ R`` for a row chunk (float64). For dense chunks ``(R^T @ Xc)^T`` is used: BLAS
    runs the thin transposed product 2-3x faster in that orientation (measured, OpenBLAS)."""
    if isinstance(Xc, CSRRows):
        R = np.asarray(R)
        vec = R.ndim == 1
        out = np.zeros((Xc.shape[1], 1 if vec else R.shape[1]))
        csr_tmatmat(Xc.indptr, Xc.indices, Xc.data, R.reshape(-1, 1) if vec else R, out)
        return out[:, 0] if vec else out
    return np.asarray(R.T @ Xc, dtype=np.float64).T


def _chunk_bounds(X):
    n = X.shape[0]
    per_row = (X.nnz / max(n, 1)) if sp.issparse(X) else X.shape[1]
    rows = max(MIN_CHUNK_ROWS, int(CHUNK_VALUES // max(per_row, 1.0)))
    bounds = np.unique(np.append(np.arange(0, n, rows), n))
    return bounds if bounds.shape[0] >= 2 else np.array([0, n])


def _row_view(X, a, b):
    """Rows a:b of X without copying: a slice of a dense array, or :class:`CSRRows` over the
    raw arrays of the batch (scipy's row slicing would copy them)."""
    if not sp.issparse(X):
        return X[a:b]
    return CSRRows(X.indptr[a:b + 1], X.indices, X.data, X.shape[1])


def _sq_matvec(Xc, v):
    """``(Xc o Xc) @ v`` (float64), the square taken value by value."""
    out = np.empty(Xc.shape[0])
    if isinstance(Xc, CSRRows):
        sq_matvec_csr(Xc.indptr, Xc.indices, Xc.data, v, out)
    else:
        sq_matvec_dense(Xc, v, out)
    return out


def _sq_rmatvec(Xc, r):
    """``(Xc o Xc)^T @ r`` (float64), the square taken value by value."""
    out = np.zeros(Xc.shape[1])
    r = np.ascontiguousarray(r, dtype=np.float64)
    if isinstance(Xc, CSRRows):
        sq_rmatvec_csr(Xc.indptr, Xc.indices, Xc.data, r, out)
    else:
        sq_rmatvec_dense(Xc, r, out)
    return out


def _map_chunks(X, n_jobs, fn):
    """``[fn(Xc, a, b) for each row chunk]`` in chunk order, chunks spread over the threads."""
    bounds = _chunk_bounds(X)
    chunks = list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=False))
    n_threads = resolve_n_jobs(n_jobs)

    def run(ab):
        return fn(_row_view(X, *ab), *ab)

    with blas_single_thread():
        if n_threads == 1 or len(chunks) == 1:
            return [run(ab) for ab in chunks]
        return list(_pool(n_threads).map(run, chunks))


def _reduce(parts):
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out


class Batch:
    """The rows ``z_i = (x_i - mean) / scale`` of one mini-batch, used only through products.

    ``X`` is a dense C-contiguous array or a canonical CSR matrix; the standardisation is applied
    implicitly (``Z B = X (B / scale) - 1 (mean^T (B / scale))``), so a sparse batch stays
    sparse and no copy of the batch is made. Products run over fixed row chunks on ``n_jobs``
    threads with single-threaded BLAS; the fused passes (:meth:`residual_pass`,
    :meth:`gram_pass`) read each chunk once for both of their products, so one step of the
    solver reads the batch twice.
    """

    def __init__(self, X, mean=None, scale=None, n_jobs=1):
        self.X = X
        self.sparse = sp.issparse(X)
        self.n, self.d = X.shape
        self.dtype = X.dtype
        self.mean = None if mean is None or not np.any(mean) else np.asarray(mean, np.float64)
        self.inv = None if scale is None or np.all(scale == 1) else 1.0 / np.asarray(scale,
                                                                                   np.float64)
        self.n_jobs = n_jobs

    # -- plumbing -------------------------------------------------------------------------------
    def _cast(self, B):
        return np.ascontiguousarray(B, dtype=self.dtype)

    def _map(self, fn):
        return _map_chunks(self.X, self.n_jobs, fn)

    def _scaled(self, B):
        B = np.asarray(B, dtype=np.float64)
        if self.inv is not None:
            B = B * self.inv[:, None]
        shift = None if self.mean is None else self.mean @ B
        return self._cast(B), shift

    def _finish_rmat(self, raw, colsum):
        """Z^T R from X^T R (raw, d x c) and the column sums of R."""
        if self.mean is not None:
            raw -= self.mean[:, None] * colsum[None, :]
        if self.inv is not None:
            raw *= self.inv[:, None]
        return raw

    def _sq_vector(self, v):
        """Coefficients so that (Z o Z) v = (X o X) c2 - 2 X c1 + c0."""
        v = np.asarray(v, dtype=np.float64)
        c2 = v if self.inv is None else v * self.inv * self.inv
        if self.mean is None:
            return c2, None, 0.0
        return c2, self.mean * c2, float(np.dot(self.mean * self.mean, c2))

    def _finish_sq(self, q, lin, total):
        if self.mean is not None:
            q = q - 2.0 * self.mean * lin + self.mean * self.mean * total
        if self.inv is not None:
            q = q * self.inv * self.inv
        return q

    # -- products -------------------------------------------------------------------------------
    def matmat(self, B):
        """``Z @ B`` for B of shape (d, c), in the batch dtype."""
        Bs, shift = self._scaled(B)
        out = np.empty((self.n, Bs.shape[1]), dtype=self.dtype)

        def work(Xc, a, b):
            out[a:b] = Xc @ Bs
            if shift is not None:
                out[a:b] -= shift.astype(self.dtype)

        self._map(work)
        return out

    def rmatmat(self, R):
        """``Z^T @ R`` for R of shape (n, c); float64."""
        R = self._cast(R)

        def work(Xc, a, b):
            Rc = R[a:b]
            return _tmatmul(Xc, Rc), Rc.sum(axis=0, dtype=np.float64)

        parts = self._map(work)
        return self._finish_rmat(_reduce([p[0] for p in parts]), _reduce([p[1] for p in parts]))

    def sq_matvec(self, v):
        """``(Z o Z) @ v`` (n,), float64."""
        c2, c1, c0 = self._sq_vector(v)
        c1c = None if c1 is None else self._cast(c1)
        out = np.empty(self.n)

        def work(Xc, a, b):
            o = _sq_matvec(Xc, c2)
            if c1c is not None:
                o -= 2.0 * np.asarray(Xc @ c1c, dtype=np.float64)
                o += c0
            out[a:b] = o

        self._map(work)
        return out

    def sq_rmatvec(self, r):
        """``(Z o Z)^T @ r`` (d,), float64."""
        r = self._cast(r)

        def work(Xc, a, b):
            rc = r[a:b]
            lin = None if self.mean is None else _tmatmul(Xc, rc)
            return _sq_rmatvec(Xc, rc), lin, float(np.sum(rc, dtype=np.float64))

        parts = self._map(work)
        return self._finish_sq(_reduce([p[0] for p in parts]),
                               None if self.mean is None else _reduce([p[1] for p in parts]),
                               sum(p[2] for p in parts))

    # -- fused passes of the solver -------------------------------------------------------------
    def residual_pass(self, U, V, w, b0, y, sw, Wsum, zero_diagonal=False, need_q=False):
        """One read of the batch for everything the step needs from the current model.

        Returns ``rss`` (sum of sw r^2), ``rho = sw r / Wsum`` (n,), ``h2 = sum(rho)``,
        ``G = Z^T [rho o Z U, rho]`` (d, k+1) and, when ``need_q``, ``q = (Z o Z)^T rho``.
        """
        k = U.shape[1]
        Ws, shift = self._scaled(np.column_stack([U, V, w]))
        # A column of ones gives the row sums of X: the finiteness check of the batch rides on
        # this read (a value 1 is never skipped by BLAS, and inf or NaN reaches the sum).
        Ws = np.column_stack([Ws, np.ones(self.d, dtype=self.dtype)])
        if shift is not None:
            shift = np.append(shift, 0.0)  # the ones column is not shifted
        # G's product in an even width (a zero column): odd widths run ~10% slower in
        # OpenBLAS's thin-matrix kernels (measured, k = 10).
        width = k + 1 + (k + 1) % 2
        sq = None
        if zero_diagonal and k:
            c2, c1, c0 = self._sq_vector(np.einsum("ij,ij->i", U, V))
            sq = (c2, None if c1 is None else self._cast(c1), c0)
        rho = np.empty(self.n)
        y = np.asarray(y, dtype=np.float64)
        sw = np.asarray(sw, dtype=np.float64)

        shift = np.zeros(2 * k + 2) if shift is None else shift
        none = np.empty(0)

        def work(Xc, a, b):
            with np.errstate(invalid="ignore", over="ignore"):  # checked just below
                P = Xc @ Ws
            extra = none
            if sq is not None:
                extra = -_sq_matvec(Xc, sq[0])
                if sq[1] is not None:
                    extra += 2.0 * np.asarray(Xc @ sq[1], dtype=np.float64) - sq[2]
            R = np.empty((b - a, width), dtype=self.dtype)
            colsum = np.zeros(k + 1)
            rss, bad = residual_rows(P, shift, float(b0), k, extra, y[a:b], sw[a:b],
                                     1.0 / Wsum, R, rho[a:b], colsum)
            if bad >= 0:
                raise ValueError(f"Input X contains NaN or infinity (row {a + bad} of the "
                                 "batch, or values so large that its sum overflows)")
            G = _tmatmul(Xc, R)
            q = _sq_rmatvec(Xc, R[:, k]) if need_q else None
            return rss, G, colsum, q

        parts = self._map(work)
        colsum = _reduce([p[2] for p in parts])
        Graw = _reduce([p[1] for p in parts])[:, :k + 1]
        q = None
        if need_q:
            q = self._finish_sq(_reduce([p[3] for p in parts]), Graw[:, k].copy(),
                                float(colsum[k]))
        G = self._finish_rmat(Graw, colsum)
        return {"rss": float(sum(p[0] for p in parts)), "rho": rho, "h2": float(colsum[k]),
                "G": G, "q": q}

    def gram_pass(self, B, rho):
        """``Z^T (rho o Z B)`` for B (d, c), one read of the batch; float64."""
        Bs, shift = self._scaled(B)

        def work(Xc, a, b):
            P = np.asarray(Xc @ Bs, dtype=np.float64)
            if shift is not None:
                P -= shift
            R = self._cast(rho[a:b, None] * P)
            return _tmatmul(Xc, R), R.sum(axis=0, dtype=np.float64)

        parts = self._map(work)
        return self._finish_rmat(_reduce([p[0] for p in parts]), _reduce([p[1] for p in parts]))


# -- first-batch statistics ---------------------------------------------------------------------
def _power_sums(X, sw, orders):
    """``{p: sum_i sw_i x_ij^p}`` for CSR X, one value array per power (indices shared)."""
    data = X.data.astype(np.float64)
    out = {}
    for p in orders:
        Y = sp.csr_matrix((data ** p, X.indices, X.indptr), shape=X.shape, copy=False)
        out[p] = np.asarray(Y.T @ sw).ravel()
    return out


def _central_sums(X, sw, mean, orders, n_jobs=1):
    """``{p: sum_i sw_i (x_ij - mean_j)^p}`` for dense X, chunk by chunk (no n x d copy)."""
    def work(Xc, a, b):
        out, P = {}, None
        with np.errstate(invalid="ignore", over="ignore"):  # non-finite X: the caller checks
            D = np.asarray(Xc, dtype=np.float64) - mean
            for p in range(1, max(orders) + 1):
                if p == 2:
                    P = D * D  # then powered in place: two chunk-sized arrays at most
                elif p > 2:
                    P *= D
                else:
                    P = D
                if p in orders:
                    out[p] = sw[a:b] @ P
        return out

    parts = _map_chunks(X, n_jobs, work)
    return {p: _reduce([part[p] for part in parts]) for p in orders}


def weighted_moments(X, sw, mean=None, scale=None, orders=(3, 4)):
    """Weighted per-feature moments ``E[z^p]`` of ``z = (x - mean) / scale`` (dense or CSR).

    For CSR input the central moments are expanded in raw power sums (one sparse product each,
    sharing the index arrays), for dense input they are summed chunk by chunk: no copy of X.
    """
    W = float(np.sum(sw))
    sw = np.asarray(sw, dtype=np.float64)
    d = X.shape[1]
    mean = np.zeros(d) if mean is None else np.asarray(mean, np.float64)
    scale = np.ones(d) if scale is None else np.asarray(scale, np.float64)
    if sp.issparse(X):
        from math import comb

        S = _power_sums(X, sw, range(1, max(orders) + 1))
        S[0] = np.full(d, W)
        sums = {p: sum(comb(p, i) * S[i] * (-mean) ** (p - i) for i in range(p + 1))
                for p in orders}
    else:
        sums = _central_sums(X, sw, mean, tuple(orders))
    return [sums[p] / W / scale ** p for p in orders]


def standardization(X, sw, center=True):
    """Weighted mean and standard deviation per feature (scale 1 where the variance is 0).

    With ``center=False`` the mean is 0 and the scale is the root mean square.
    """
    W = float(np.sum(sw))
    sw = np.asarray(sw, dtype=np.float64)
    if sp.issparse(X):
        S = _power_sums(X, sw, (1, 2))
        mean = S[1] / W
        ex2 = S[2] / W
        var = ex2 - mean * mean if center else ex2
    else:
        mean = _reduce(_map_chunks(X, 1, lambda Xc, a, b: sw[a:b] @ np.asarray(Xc, np.float64)))
        mean = mean / W
        var = _central_sums(X, sw, mean if center else np.zeros_like(mean), (2,))[2] / W
    return scale_from_variance(mean, var, center)


def scale_from_variance(mean, var, center=True):
    """``(mean, scale)`` of :func:`standardization` from the weighted mean and variance (the
    raw second moment when not ``center``); shared with backends that sum them by parts."""
    if not center:
        mean = np.zeros_like(mean)
    scale = np.sqrt(np.clip(var, 0.0, None))
    # Constant columns (or variances lost to round-off) keep scale 1: they carry no signal here.
    tiny = scale <= 1e-12 * np.maximum(1.0, np.abs(mean))
    scale[tiny] = 1.0
    return mean, scale


class BatchRows:
    """One mini-batch ``(X, y, sw)`` held in memory, as the one-pass step reads it.

    The step touches a batch only through the methods below, each a sum over rows given the
    current state (the sufficient statistics of the batch); everything else in the step works
    on d x O(k) arrays. :mod:`fmlearn.distributed` implements the same methods over the
    partitions of a batch on a Dask cluster (map on the workers, reduce on the client).

    ``d``, ``wsum`` (sum of the weights); first batch only: ``standardization(center)``,
    ``target_moments()`` -> (RMS, mean) of y; ``moments(mean, scale)`` -> (kappa, phi) (first
    batch of moment elimination, and the stall diagnostic); then ``bind(mean, scale, n_jobs)``
    fixes the working coordinates for ``residual_pass`` (returns rss, h2, G, q and an opaque
    ``rho`` that only ``gram_pass`` consumes), ``gram_pass(B, rho)`` and
    ``rss(state, zero_diagonal)`` (the safeguard's extra read).
    """

    def __init__(self, X, y, sw):
        self.X = X
        self.y = np.asarray(y, dtype=np.float64)
        self.sw = np.asarray(sw, dtype=np.float64)
        self.n, self.d = X.shape
        self.wsum = float(self.sw.sum())
        self.batch = None

    def standardization(self, center):
        return standardization(self.X, self.sw, center=center)

    def moments(self, mean, scale):
        return weighted_moments(self.X, self.sw, mean, scale)

    def target_moments(self):
        return (float(np.sqrt(np.average(self.y ** 2, weights=self.sw))),
                float(np.average(self.y, weights=self.sw)))

    def bind(self, mean, scale, n_jobs):
        self.batch = Batch(self.X, mean, scale, n_jobs)

    def residual_pass(self, U, V, w, b0, zero_diagonal, need_q):
        return self.batch.residual_pass(U, V, w, b0, self.y, self.sw, self.wsum, zero_diagonal,
                                        need_q)

    def gram_pass(self, B, rho):
        return self.batch.gram_pass(B, rho)

    def rss(self, state, zero_diagonal):
        r = self.y - predict_batch(self.batch, state, zero_diagonal)
        return float(np.dot(self.sw, r * r))


def predict_batch(batch, state, zero_diagonal):
    """f(z) for every row of ``batch`` (float64)."""
    k = state.U.shape[1]
    P = batch.matmat(np.column_stack([state.U, state.V, state.w]))
    P = P.astype(np.float64, copy=False)
    pred = state.b + P[:, 2 * k] + np.einsum("ij,ij->i", P[:, :k], P[:, k:2 * k])
    if zero_diagonal and k:
        pred -= batch.sq_matvec(np.einsum("ij,ij->i", state.U, state.V))
    return pred
