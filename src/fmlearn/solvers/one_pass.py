"""One-pass alternating solver of the generalized FM (seed 000/003, Algorithm 1) and its
relatives: improved FM with zero diagonal (seed 001 §3.3), symmetric and asymmetric rank-one
matrix sensing (seed 000 §2.1). The moment-eliminating variant (seed 001 Algorithm 1) plugs its
diagonal correction into the same step through :mod:`fmlearn.solvers.moment`.

Model (working coordinates ``z = (x - mean) / scale``, fixed after the first batch)::

    f(z) = b + <w, z> + z^T M z,     M = (U V^T + V U^T) / 2,  U^T U = I   (rank <= 2k, 000 Alg. 1)
    iFM:  M = (U V^T + V U^T) / 2 - diag(U V^T)                          (001 §3.3)

One step on a batch of n rows with residuals r = y - f(Z) and weights s (sum 1 after scaling,
rho = s * r) forms the matrix-free operator

    E(B) = 1/2 Z^T (rho o Z B) - 1/2 h2 B + M B,      h2 = sum(rho),  h3 = Z^T rho

and runs one block power step  U <- QR(E(U)),  V <- E(U),  w <- w + h3   (000 Alg. 1 lines 5-8).
Every product touches the batch only through ``Z @ B`` and ``Z^T @ R`` with B, R of width <= 2k+1;
memory is O(kd) plus the batch, and no d x d matrix is formed (the spectral initialisation is
matrix-free above :data:`fmlearn.linalg.DENSE_MAX_DIM` features).

Why the shift: E[(1/2n) A'A(M)] = M + tr(M)/2 I for Gaussian x (000 Theorem 4) and
E[h2] = tr(M* - M), so ``H1 - h2/2 I`` estimates M* - M. 000 Lemma 10 prints ``tr`` and
``- h2 I`` (and the concluding sentence ``H1 - h2 I + M -> M*``): that is a typo, the algorithm's
``1/2 tr`` / ``- 1/2 h2 I`` is right (Theorem 4 and Lemma 13 Eq. 5 have the 1/2), and the unshifted
iteration diverges (tested in tests/test_gfm.py). 003's Algorithm 1 line 1 repeats A(M) in H1 by
an extraction glitch; the 000 text is used.

iFM (001 §3.3): with diag(M) = 0 the shift and the moment terms vanish (001 Eq. 11); the solver
uses the off-diagonal part of H1 and fills the diagonal of the power-iteration operator with the
current diag(U V^T), so that the operator tends to the rank-k matrix U* V*^T whose off-diagonal
part is M* (a fixed point argument; seed 001 gives no algorithm for iFM beyond "the same scheme").

Intercept (not in the seeds, needed for real data): E[h2] = (b* - b) + tr(M* - M) and the shift
cancels any intercept error, so ``b <- b + h2 - (tr M_new - tr M_old)`` converges with M.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from .._threads import blas_single_thread, resolve_n_jobs
from ..linalg import orthonormal_basis, top_eigenpairs, top_singular_triplets

# A step whose residual RMS exceeds this multiple of the first batch's target RMS, or whose
# parameters grow this much beyond the first estimate, is declared divergent.
DIVERGENCE_FACTOR = 1e4


#: Rows of a batch are processed in chunks of about this many stored values (dense entries or
#: CSR nonzeros): a chunk is read from memory once per fused pass and stays in cache between
#: its two BLAS products. The chunking depends on the data shape only, so partial sums are
#: reduced in the same order whatever the number of threads (identical results).
CHUNK_VALUES = 1 << 20

_POOLS = {}


def _tmatmul(Xc, R):
    """``Xc^T @ R`` for a row chunk (float64). For dense chunks ``(R^T @ Xc)^T`` is used: BLAS
    runs the thin transposed product 2-3x faster in that orientation (measured, OpenBLAS)."""
    if sp.issparse(Xc):
        return np.asarray(Xc.T @ R, dtype=np.float64)
    return np.asarray(R.T @ Xc, dtype=np.float64).T


def _pool(n_threads):
    from concurrent.futures import ThreadPoolExecutor

    if n_threads not in _POOLS:
        _POOLS[n_threads] = ThreadPoolExecutor(n_threads, thread_name_prefix="fmlearn-gfm")
    return _POOLS[n_threads]


class Batch:
    """The rows ``z_i = (x_i - mean) / scale`` of one mini-batch, used only through products.

    ``X`` is a dense C-contiguous array or a canonical CSR matrix; the standardisation is applied
    implicitly (``Z B = X (B / scale) - 1 (mean^T (B / scale))``), so a sparse batch stays
    sparse and no copy of a dense batch is made (squares ``Z o Z`` are formed chunk by chunk).
    Products run over fixed row chunks on ``n_jobs`` threads with single-threaded BLAS; the
    fused passes (:meth:`residual_pass`, :meth:`gram_pass`) read each chunk once for both of
    their products, so one step of the solver reads the batch twice.
    """

    def __init__(self, X, mean=None, scale=None, n_jobs=1):
        self.X = X
        self.sparse = sp.issparse(X)
        self.n, self.d = X.shape
        self.dtype = X.dtype
        self.mean = None if mean is None or not np.any(mean) else np.asarray(mean, np.float64)
        self.inv = None if scale is None or np.all(scale == 1) else 1.0 / np.asarray(scale,
                                                                                   np.float64)
        per_row = (X.nnz / max(self.n, 1)) if self.sparse else self.d
        rows = max(64, int(CHUNK_VALUES // max(per_row, 1.0)))
        self.bounds = np.unique(np.append(np.arange(0, self.n, rows), self.n))
        if self.bounds.shape[0] < 2:
            self.bounds = np.array([0, self.n])
        self.n_jobs = resolve_n_jobs(n_jobs)

    # -- plumbing -------------------------------------------------------------------------------
    def _cast(self, B):
        return np.ascontiguousarray(B, dtype=self.dtype)

    def _map(self, fn):
        """``[fn(a, b) for each chunk]`` in chunk order, chunks spread over the threads."""
        chunks = list(zip(self.bounds[:-1].tolist(), self.bounds[1:].tolist(), strict=False))
        with blas_single_thread():
            if self.n_jobs == 1 or len(chunks) == 1:
                return [fn(a, b) for a, b in chunks]
            return list(_pool(self.n_jobs).map(lambda ab: fn(*ab), chunks))

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

    @staticmethod
    def _reduce(parts):
        out = parts[0]
        for p in parts[1:]:
            out = out + p
        return out

    # -- products -------------------------------------------------------------------------------
    def matmat(self, B):
        """``Z @ B`` for B of shape (d, c), in the batch dtype."""
        Bs, shift = self._scaled(B)
        out = np.empty((self.n, Bs.shape[1]), dtype=self.dtype)

        def work(a, b):
            out[a:b] = self.X[a:b] @ Bs
            if shift is not None:
                out[a:b] -= shift.astype(self.dtype)

        self._map(work)
        return out

    def rmatmat(self, R):
        """``Z^T @ R`` for R of shape (n, c); float64."""
        R = self._cast(R)

        def work(a, b):
            Rc = R[a:b]
            return (_tmatmul(self.X[a:b], Rc),
                    Rc.sum(axis=0, dtype=np.float64))

        parts = self._map(work)
        return self._finish_rmat(self._reduce([p[0] for p in parts]),
                                 self._reduce([p[1] for p in parts]))

    def _sq_chunk(self, a, b):
        Xc = self.X[a:b]
        if self.sparse:
            Xc = Xc.copy()
            Xc.data = Xc.data * Xc.data
            return Xc
        return Xc * Xc

    def _sq_vector(self, v):
        """Coefficients so that (Z o Z) v = (X o X) c2 - 2 X c1 + c0."""
        v = np.asarray(v, dtype=np.float64)
        c2 = v if self.inv is None else v * self.inv * self.inv
        if self.mean is None:
            return c2, None, 0.0
        return c2, self.mean * c2, float(np.dot(self.mean * self.mean, c2))

    def sq_matvec(self, v):
        """``(Z o Z) @ v`` (n,), float64."""
        c2, c1, c0 = self._sq_vector(v)
        c2c = self._cast(c2)
        c1c = None if c1 is None else self._cast(c1)
        out = np.empty(self.n)

        def work(a, b):
            o = np.asarray(self._sq_chunk(a, b) @ c2c, dtype=np.float64)
            if c1c is not None:
                o -= 2.0 * np.asarray(self.X[a:b] @ c1c, dtype=np.float64)
                o += c0
            out[a:b] = o

        self._map(work)
        return out

    def sq_rmatvec(self, r):
        """``(Z o Z)^T @ r`` (d,), float64."""
        r = self._cast(r)

        def work(a, b):
            rc = r[a:b]
            q = _tmatmul(self._sq_chunk(a, b), rc)
            lin = None if self.mean is None else _tmatmul(self.X[a:b], rc)
            return q, lin, float(np.sum(rc, dtype=np.float64))

        parts = self._map(work)
        return self._finish_sq(self._reduce([p[0] for p in parts]),
                               None if self.mean is None else self._reduce([p[1] for p in parts]),
                               sum(p[2] for p in parts))

    def _finish_sq(self, q, lin, total):
        if self.mean is not None:
            q = q - 2.0 * self.mean * lin + self.mean * self.mean * total
        if self.inv is not None:
            q = q * self.inv * self.inv
        return q

    # -- fused passes of the solver -------------------------------------------------------------
    def residual_pass(self, U, V, w, b0, y, sw, Wsum, zero_diagonal=False, need_q=False):
        """One read of the batch for everything the step needs from the current model.

        Returns ``rss`` (sum of sw r^2), ``rho = sw r / Wsum`` (n,), ``h2 = sum(rho)``,
        ``G = Z^T [rho o Z U, rho]`` (d, k+1) and, when ``need_q``, ``q = (Z o Z)^T rho``.
        """
        k = U.shape[1]
        Ws, shift = self._scaled(np.column_stack([U, V, w]))
        sq = None
        if zero_diagonal and k:
            sq = self._sq_vector(np.einsum("ij,ij->i", U, V))
            sq = (self._cast(sq[0]), None if sq[1] is None else self._cast(sq[1]), sq[2])
        rho = np.empty(self.n)
        y = np.asarray(y, dtype=np.float64)
        sw = np.asarray(sw, dtype=np.float64)

        def work(a, b):
            Xc = self.X[a:b]
            P = np.asarray(Xc @ Ws, dtype=np.float64)
            if shift is not None:
                P -= shift
            pred = b0 + P[:, 2 * k] + np.einsum("ij,ij->i", P[:, :k], P[:, k:2 * k])
            Xsq = None
            if sq is not None:
                Xsq = self._sq_chunk(a, b)
                pred -= np.asarray(Xsq @ sq[0], dtype=np.float64)
                if sq[1] is not None:
                    pred += 2.0 * np.asarray(Xc @ sq[1], dtype=np.float64) - sq[2]
            r = y[a:b] - pred
            swc = sw[a:b]
            rss = float(np.dot(swc, r * r))
            rc = swc * r / Wsum
            rho[a:b] = rc
            R = np.empty((b - a, k + 1), dtype=self.dtype)
            R[:, :k] = rc[:, None] * P[:, :k]
            R[:, k] = rc
            G = _tmatmul(Xc, R)
            colsum = R.sum(axis=0, dtype=np.float64)
            q = lin = None
            if need_q:
                if Xsq is None:
                    Xsq = self._sq_chunk(a, b)
                q = _tmatmul(Xsq, R[:, k])
                lin = G[:, k]
            return rss, G, colsum, q, lin

        parts = self._map(work)
        rss = float(sum(p[0] for p in parts))
        colsum = self._reduce([p[2] for p in parts])
        Graw = self._reduce([p[1] for p in parts])
        q = None
        if need_q:
            q = self._finish_sq(self._reduce([p[3] for p in parts]),
                                Graw[:, k].copy(), float(colsum[k]))
        G = self._finish_rmat(Graw, colsum)
        return {"rss": rss, "rho": rho, "h2": float(colsum[k]), "G": G, "q": q}

    def gram_pass(self, B, rho):
        """``Z^T (rho o Z B)`` for B (d, c), one read of the batch; float64."""
        Bs, shift = self._scaled(B)

        def work(a, b):
            Xc = self.X[a:b]
            P = np.asarray(Xc @ Bs, dtype=np.float64)
            if shift is not None:
                P -= shift
            R = self._cast(rho[a:b, None] * P)
            return _tmatmul(Xc, R), R.sum(axis=0, dtype=np.float64)

        parts = self._map(work)
        return self._finish_rmat(self._reduce([p[0] for p in parts]),
                                 self._reduce([p[1] for p in parts]))


@dataclass
class OnePassState:
    """Solver state in working coordinates plus the first-batch statistics it depends on.

    ``U`` (d, k) has orthonormal columns, ``V`` (d, k); ``mean``/``scale`` define the working
    coordinates; ``coef`` (d, 4) holds the moment-elimination coefficients (G1, G2, H1, H2) of
    seed 001 Eq. 8-9 (None for other corrections); ``y_scale`` is the RMS of the first batch's
    targets (divergence reference); ``ref_norm`` the parameter norm after it; ``tau`` the
    per-feature phi - 1 - kappa^2 (moment correction only); ``t`` counts batches consumed.
    """

    w: np.ndarray
    U: np.ndarray
    V: np.ndarray
    b: float = 0.0
    t: int = 0
    mean: np.ndarray = None
    scale: np.ndarray = None
    coef: np.ndarray = None
    y_scale: float = 0.0
    ref_norm: float = 0.0
    tau: np.ndarray = None
    eta: float = 0.5

    def copy(self):
        c = lambda a: None if a is None else a.copy()  # noqa: E731
        return OnePassState(self.w.copy(), self.U.copy(), self.V.copy(), float(self.b),
                            int(self.t), c(self.mean), c(self.scale), c(self.coef),
                            float(self.y_scale), float(self.ref_norm), c(self.tau),
                            float(self.eta))


@dataclass
class OnePassSettings:
    """What to fit and how.

    correction : "shift" (000 Alg. 1), "moment" (001 Alg. 1, fixed), "zero_diagonal" (iFM) or
        "none" (the unshifted iteration, kept only to demonstrate that it diverges).
    fit_linear, fit_intercept : learn w and b (False for rank-one sensing).
    standardize : compute mean/scale from the first batch (else z = x); the mean is removed only
        when ``fit_intercept`` (otherwise the scale is the root mean square).
    init : eigen-solver method of the spectral initialisation (see ``linalg.top_eigenpairs``).
    step : scale of the data term, E(B) = M B + step * (estimate of (M* - M) B), and of the w
        and b updates. 1 is the algorithm of the seeds (fresh batches).
    reuse : the batches have been seen before (passes after the first). The one-pass theory
        then no longer applies (the batch is not independent of the iterate) and the iteration
        is a projected gradient-type method on the empirical risk, whose step 1 can overshoot
        (e.g. batches of a few k d rows): a step is halved whenever it would increase the
        batch's loss (then doubled again, up to ``reuse_step``, for the next batch), and a batch
        is skipped when the step falls below ``min_step``.
    safeguard : apply the same monotone check to fresh batches (an in-sample test: on the
        designs the theory covers, the step decreases the batch loss and is accepted as is).
    """

    n_factors: int
    correction: str = "shift"
    fit_linear: bool = True
    fit_intercept: bool = True
    standardize: bool = True
    init: str = "auto"
    init_n_iter: int = 2
    random_state: object = None
    step: float = 1.0
    n_jobs: object = None
    reuse: bool = False
    reuse_step: float = 1.0
    safeguard: bool = False
    min_step: float = 1e-4
    divergence_factor: float = DIVERGENCE_FACTOR
    tau_floor: float = 1e-8


def new_state(n_features, n_factors, dtype=np.float64):
    """An empty state (t = 0): the first batch will standardise, estimate moments, initialise."""
    k = min(n_factors, n_features)
    return OnePassState(np.zeros(n_features, dtype), np.zeros((n_features, k), dtype),
                        np.zeros((n_features, k), dtype))


# -- first-batch statistics ---------------------------------------------------------------------
def weighted_moments(X, sw, mean=None, scale=None, orders=(3, 4)):
    """Weighted per-feature moments ``E[z^p]`` of ``z = (x - mean) / scale`` (dense or CSR).

    For CSR input the central moments are expanded in raw power sums (one sparse product each),
    so no dense copy is made.
    """
    W = float(np.sum(sw))
    sw = np.asarray(sw, dtype=np.float64)
    d = X.shape[1]
    mean = np.zeros(d) if mean is None else np.asarray(mean, np.float64)
    scale = np.ones(d) if scale is None else np.asarray(scale, np.float64)
    out = []
    if sp.issparse(X):
        S = [None] * (max(orders) + 1)
        Xp = X.astype(np.float64)
        for p in range(1, max(orders) + 1):
            Y = Xp.copy()
            Y.data = Y.data ** p
            S[p] = np.asarray(Y.T @ sw).ravel() / W
        S[0] = np.ones(d)
        from math import comb

        for p in orders:
            m = sum(comb(p, i) * S[i] * (-mean) ** (p - i) for i in range(p + 1))
            out.append(m / scale ** p)
    else:
        Z = (np.asarray(X, dtype=np.float64) - mean) / scale
        for p in orders:
            out.append((sw @ Z ** p) / W)
    return out


def standardization(X, sw, center=True):
    """Weighted mean and standard deviation per feature (scale 1 where the variance is 0).

    With ``center=False`` the mean is 0 and the scale is the root mean square.
    """
    W = float(np.sum(sw))
    sw = np.asarray(sw, dtype=np.float64)
    if sp.issparse(X):
        mean = np.asarray(X.T @ sw, dtype=np.float64).ravel() / W
        Xsq = X.astype(np.float64).copy()
        Xsq.data **= 2
        ex2 = np.asarray(Xsq.T @ sw).ravel() / W
        var = ex2 - mean * mean if center else ex2
    else:
        Xd = np.asarray(X, dtype=np.float64)
        mean = (sw @ Xd) / W
        var = (sw @ (Xd - mean) ** 2) / W if center else (sw @ (Xd * Xd)) / W
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


def _first_batch(rows, state, settings):
    d = rows.d
    if settings.standardize:
        # Centring turns x^T M x into a form with a constant term, so it needs an intercept;
        # without one, only the scale is normalised (still an exact reparametrisation).
        state.mean, state.scale = rows.standardization(center=settings.fit_intercept)
    else:
        state.mean, state.scale = np.zeros(d), np.ones(d)
    if settings.correction == "moment":
        from .moment import moment_coefficients

        kappa, phi = rows.moments(state.mean, state.scale)
        state.coef = moment_coefficients(kappa, phi, settings.tau_floor)
        state.tau = np.abs(phi - 1.0 - kappa * kappa)
    y_rms, y_mean = rows.target_moments()
    state.y_scale = y_rms
    if settings.fit_intercept:
        # Start the intercept at the mean target: the shift would absorb any start value, but a
        # large mean residual adds mean(y)/2 E[z z^T] noise to the spectral initialisation.
        state.b = y_mean


class BatchRows:
    """One mini-batch ``(X, y, sw)`` held in memory, as :func:`one_pass_step_rows` reads it.

    The step touches a batch only through the methods below, each a sum over rows given the
    current state (the sufficient statistics of the batch); everything else in the step works
    on d x O(k) arrays. :mod:`fmlearn.distributed` implements the same methods over the
    partitions of a batch on a Dask cluster (map on the workers, reduce on the client).

    ``d``, ``wsum`` (sum of the weights); first batch only: ``standardization(center)``,
    ``moments(mean, scale)`` -> (kappa, phi), ``target_moments()`` -> (RMS, mean) of y; then
    ``bind(mean, scale, n_jobs)`` fixes the working coordinates for ``residual_pass`` (returns
    rss, h2, G, q and an opaque ``rho`` that only ``gram_pass`` consumes), ``gram_pass(B, rho)``
    and ``rss(state, zero_diagonal)`` (the safeguard's extra read).
    """

    def __init__(self, X, y, sw):
        self.X = X
        self.y = np.asarray(y, dtype=np.float64)
        self.sw = np.asarray(sw, dtype=np.float64)
        self.d = X.shape[1]
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


# -- prediction -------------------------------------------------------------------------------
def predict_batch(batch, state, zero_diagonal):
    """f(z) for every row of ``batch`` (float64)."""
    k = state.U.shape[1]
    P = batch.matmat(np.column_stack([state.U, state.V, state.w]))
    P = P.astype(np.float64, copy=False)
    pred = state.b + P[:, 2 * k] + np.einsum("ij,ij->i", P[:, :k], P[:, k:2 * k])
    if zero_diagonal and k:
        pred -= batch.sq_matvec(np.einsum("ij,ij->i", state.U, state.V))
    return pred


def _trace(U, V, zero_diagonal):
    return 0.0 if zero_diagonal else float(np.einsum("ij,ij->", U, V))


# -- one step ---------------------------------------------------------------------------------
def one_pass_step(X, y, sw, state, settings):
    """One batch of the alternating scheme; returns ``(new_state, info)`` (``state`` untouched).

    ``info`` has ``"rmse"`` (weighted residual RMS of the batch before the update, a prequential
    error), and ``"diverged"`` (None or a message; then ``new_state`` is ``state``).
    """
    return one_pass_step_rows(BatchRows(X, y, sw), state, settings)


def one_pass_step_rows(rows, state, settings):
    """:func:`one_pass_step` on a batch given as a :class:`BatchRows`-like object (the batch
    statistics may then be computed elsewhere, e.g. by :mod:`fmlearn.distributed`)."""
    state = state.copy()
    first = state.t == 0
    if first:
        _first_batch(rows, state, settings)
    rows.bind(state.mean, state.scale, settings.n_jobs)
    d = rows.d
    k = state.U.shape[1]
    zero_diag = settings.correction == "zero_diagonal"
    Wsum = rows.wsum

    # First read of the batch: residuals of the current model and every statistic built on them.
    stats = rows.residual_pass(state.U, state.V, state.w, state.b, zero_diag,
                               need_q=settings.correction not in ("shift", "none"))
    rmse = float(np.sqrt(stats["rss"] / Wsum))
    info = {"rmse": rmse, "diverged": None}
    # Safeguarded steps are monotone on their batch; only unguarded fresh batches can diverge.
    unguarded = not (settings.reuse or settings.safeguard)
    if not np.isfinite(rmse) or (not first and unguarded and state.y_scale > 0
                                 and rmse > settings.divergence_factor * state.y_scale):
        info["diverged"] = (f"the residual RMS on batch {state.t + 1} is {rmse:.3g}, "
                            f"{rmse / max(state.y_scale, 1e-300):.3g} times the RMS of the "
                            "first batch's targets")
        return state, info
    rho, h2, G, q = stats["rho"], stats["h2"], stats["G"], stats["q"]
    h3 = G[:, k]  # Z^T rho; G[:, :k] = Z^T (rho o Z U) feeds E(U)
    diag0 = _diagonal_term(d, h2, h3, q, state, settings)
    lin0 = _linear_update(h2, h3, q, state, settings) if settings.fit_linear else None
    Uold, Vold = state.U.astype(np.float64), state.V.astype(np.float64)

    cache = {}

    def candidate(eta):
        diag = eta * diag0

        def apply_E(B, ZtB=None):
            # E(B) = M B + eta (1/2 Z^T (rho o Z B) + diag0 o B),  M = sym(U V^T) (full diagonal)
            if ZtB is None:  # second read of the batch
                ZtB = rows.gram_pass(B, rho)
            out = (0.5 * eta) * ZtB + diag[:, None] * B
            if k:
                out += 0.5 * (Uold @ (Vold.T @ B) + Vold @ (Uold.T @ B))
            return out

        if k:
            if first and "U0" in cache:  # the eigenvectors of eta * E0 do not depend on eta
                Unew = cache["U0"]
            elif first:
                op = LinearOperator((d, d), matvec=lambda v: apply_E(v.reshape(-1, 1)).ravel(),
                                    matmat=apply_E, dtype=np.float64)
                _, Unew = top_eigenpairs(op, k, which="LM", method=settings.init,
                                         n_iter=settings.init_n_iter,
                                         random_state=settings.random_state)
                cache["U0"] = Unew
            else:
                Unew = orthonormal_basis(apply_E(Uold, ZtB=G[:, :k]))
            Vnew = apply_E(Unew)
        else:
            Unew, Vnew = Uold, Vold
        w = state.w.astype(np.float64)
        if lin0 is not None:
            w = w + eta * lin0
        b = state.b
        if settings.fit_intercept:
            b = b + eta * h2 - (_trace(Unew, Vnew, zero_diag) - _trace(Uold, Vold, zero_diag))
        return Unew, Vnew, w, float(b)

    eta = float(state.eta) if settings.reuse and not first else float(settings.step)
    guarded = settings.safeguard or (settings.reuse and not first)
    while True:
        Unew, Vnew, w, b = candidate(eta)
        if not guarded:
            break
        # Accept only a step that does not increase this batch's loss, else halve it (a monotone
        # safeguard: always on re-used batches, on fresh ones only when settings.safeguard).
        trial = OnePassState(w, Unew, Vnew, b)
        new_rmse = float(np.sqrt(rows.rss(trial, zero_diag) / Wsum))  # an extra read
        if np.isfinite(new_rmse) and new_rmse <= rmse * (1.0 + 1e-10):
            break
        eta *= 0.5
        if eta < settings.min_step:
            Unew, Vnew, w, b = Uold, Vold, state.w.astype(np.float64), state.b
            info["stalled"] = True
            break
    if settings.reuse and not first:
        # Try a larger step on the next batch (halvings are per step, not forever).
        state.eta = min(float(settings.reuse_step), 2.0 * eta) if not info.get("stalled") \
            else float(settings.reuse_step)
    info["step"] = eta

    norm = float(np.linalg.norm(w) + np.linalg.norm(Vnew))
    finite = np.isfinite(norm) and np.isfinite(b)
    if first:
        state.ref_norm = norm
    elif not finite or (unguarded and norm > settings.divergence_factor
                        * max(state.ref_norm, 1e-12) + 1e-300):
        info["diverged"] = (f"the parameters exploded on batch {state.t + 1} (norm {norm:.3g} "
                            f"vs {state.ref_norm:.3g} after the first batch)")
        return state, info
    if not finite:
        info["diverged"] = "the first batch produced non-finite parameters"
        return state, info
    dtype = state.w.dtype
    state.U, state.V, state.w, state.b = (Unew.astype(dtype), Vnew.astype(dtype),
                                          w.astype(dtype), float(b))
    state.t += 1
    return state, info


def _diagonal_term(d, h2, h3, q, state, settings):
    """Diagonal part of the data term of E (a d-vector): the shift and the moment corrections.

    ``q = (Z o Z)^T rho`` (needed by the moment and zero-diagonal corrections).
    """
    c = settings.correction
    if c == "shift":
        return np.full(d, -0.5 * h2)
    if c == "none":
        return np.zeros(d)
    if c == "zero_diagonal":
        # off-diagonal part of H1 = 1/2 Z^T diag(rho) Z: remove its diagonal 1/2 (Z o Z)^T rho
        return -0.5 * q
    if c == "moment":
        from .moment import diagonal_correction

        return diagonal_correction(state.coef, h2, h3, q)
    raise ValueError(f"unknown correction {c!r}")


def _linear_update(h2, h3, q, state, settings):
    if settings.correction == "moment":
        from .moment import linear_update

        return linear_update(state.coef, h2, h3, q)
    return h3


def one_pass_solver(batches, state, settings, callback=None):
    """Run :func:`one_pass_step` over an iterable of ``(X, y, sample_weight)`` batches.

    Parameters
    ----------
    batches : iterable of (X, y, sw)
        ``X`` dense C-contiguous or canonical CSR, all with the same number of columns.
    state : OnePassState (``new_state`` for a fresh fit)
    settings : OnePassSettings
    callback : callable(t, state, info) -> bool, optional
        Called after every batch; returning True stops.

    Returns
    -------
    state, n_iter, info : ``info`` has ``"rmse"`` (list, per batch) and ``"diverged"``.
    """
    rmses = []
    n_done = 0
    for X, y, sw in batches:
        new, info = one_pass_step(X, y, sw, state, settings)
        if info["diverged"]:
            return state, n_done, {"rmse": rmses, "diverged": info["diverged"]}
        state = new
        n_done += 1
        rmses.append(info["rmse"])
        if callback is not None and callback(state.t, state, info):
            break
    return state, n_done, {"rmse": rmses, "diverged": None}


# -- asymmetric rank-one sensing ----------------------------------------------------------------
@dataclass
class AsymState:
    """``M = U V^T`` with ``U`` (d1, k) orthonormal, ``V`` (d2, k); ``t`` batches consumed."""

    U: np.ndarray
    V: np.ndarray
    t: int = 0
    y_scale: float = 0.0
    ref_norm: float = 0.0

    def copy(self):
        return AsymState(self.U.copy(), self.V.copy(), int(self.t), float(self.y_scale),
                         float(self.ref_norm))


def asym_predict(Bu, Bv, state):
    return np.einsum("ij,ij->i", Bu.matmat(state.U).astype(np.float64),
                     Bv.matmat(state.V).astype(np.float64))


def asym_step(Xu, Xv, y, sw, state, settings):
    """One batch of asymmetric rank-one sensing y_i = u_i^T M* v_i (000 §2.1).

    For independent isotropic u, v the operator is unbiased, E[(1/n) A'A(M)] = M, so no shift
    is needed: with E = Xu^T diag(rho) Xv + U V^T (d1 x d2),  U <- QR(E Vbar) (Vbar an
    orthonormal basis of V),  V <- E^T U  (alternating power step, M_new = U U^T E).
    """
    state = state.copy()
    first = state.t == 0
    Bu, Bv = Batch(Xu, n_jobs=settings.n_jobs), Batch(Xv, n_jobs=settings.n_jobs)
    y = np.asarray(y, np.float64)
    sw = np.asarray(sw, np.float64)
    Wsum = float(sw.sum())
    if first:
        state.y_scale = float(np.sqrt(np.dot(sw, y * y) / Wsum))
    r = y - asym_predict(Bu, Bv, state)
    rmse = float(np.sqrt(np.dot(sw, r * r) / Wsum))
    info = {"rmse": rmse, "diverged": None}
    if not np.isfinite(rmse) or (not first and not settings.safeguard
                                 and rmse > settings.divergence_factor
                                 * max(state.y_scale, 1e-300)):
        info["diverged"] = f"the residual RMS on batch {state.t + 1} is {rmse:.3g}"
        return state, info
    rho = sw * r / Wsum
    U, V = state.U.astype(np.float64), state.V.astype(np.float64)
    k = U.shape[1]

    def E(B):  # (d2, c) -> (d1, c)
        return Bu.rmatmat(rho[:, None] * Bv.matmat(B)) + U @ (V.T @ B)

    def Et(B):  # (d1, c) -> (d2, c)
        return Bv.rmatmat(rho[:, None] * Bu.matmat(B)) + V @ (U.T @ B)

    if first:
        op = LinearOperator((Bu.d, Bv.d), matvec=lambda v: E(v.reshape(-1, 1)).ravel(),
                            rmatvec=lambda v: Et(v.reshape(-1, 1)).ravel(), matmat=E,
                            rmatmat=Et, dtype=np.float64)
        Unew, _, _ = top_singular_triplets(op, k, method=settings.init,
                                           n_iter=settings.init_n_iter,
                                           random_state=settings.random_state)
    else:
        Unew = orthonormal_basis(E(orthonormal_basis(V)))
    Vnew = Et(Unew)
    if settings.safeguard:
        # M_new = U U^T E is linear in the data term: M(eta) = U U^T (U V^T + eta D) with
        # D = Xu^T diag(rho) Xv, so V(eta) = V U^T Unew + eta (Vnew - V U^T Unew).
        base = V @ (U.T @ Unew)
        eta = 1.0
        while True:
            Vtry = base + eta * (Vnew - base)
            r2 = y - asym_predict(Bu, Bv, AsymState(Unew, Vtry))
            new_rmse = float(np.sqrt(np.dot(sw, r2 * r2) / Wsum))
            if np.isfinite(new_rmse) and new_rmse <= rmse * (1.0 + 1e-10):
                Vnew = Vtry
                break
            eta *= 0.5
            if eta < settings.min_step:
                Unew, Vnew = U, V
                break
    norm = float(np.linalg.norm(Vnew))
    if first:
        state.ref_norm = norm
    unguarded = not settings.safeguard
    if not np.isfinite(norm) or (not first and unguarded and norm > settings.divergence_factor
                                 * max(state.ref_norm, 1e-12)):
        info["diverged"] = f"the factors exploded on batch {state.t + 1} (norm {norm:.3g})"
        return state, info
    state.U, state.V = Unew.astype(state.U.dtype), Vnew.astype(state.V.dtype)
    state.t += 1
    return state, info
