"""Matrix-free linear algebra: low-rank operators, top eigen/singular pairs, spectral norms.

Everything that must scale with the number of features ``d`` works through
:class:`scipy.sparse.linalg.LinearOperator` products (``matmat``) and never forms a d x d
matrix, except on the explicitly size-checked dense path: when ``d <= dense_max_dim`` (default
:data:`DENSE_MAX_DIM`) the operator is applied to the identity once and handed to LAPACK, which
for small ``d`` is both faster and exact. Above that budget, top pairs come from a block
randomized subspace iteration (Halko, Martinsson & Tropp 2011, Alg. 4.4 with Rayleigh-Ritz) or
from ARPACK's Lanczos (``scipy.sparse.linalg.eigsh`` / ``svds``).

The helpers are generic: the one-pass gFM uses them for its spectral initialisation and its
recovery diagnostics, and any solver that needs the top eigenpair of a symmetric operator (for
example a conditional-gradient step) can call :func:`top_eigenpairs` with ``which="LA"``.
"""

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import (
    ArpackNoConvergence,
    LinearOperator,
    aslinearoperator,
    eigsh,
    svds,
)
from sklearn.utils import check_random_state

#: Memory budget of the dense path: largest dimension for which an operator is materialised
#: (d x d float64 = 2 MB at d = 512).
DENSE_MAX_DIM = 512
#: Below this dimension :func:`leading_eigenpair` forms the operator densely: its d products
#: cost no more than ARPACK's Lanczos iterations (~20-30 products each call), and ARPACK needs
#: d > ncv = 20 anyway. (A cost crossover, not a memory budget: hence not DENSE_MAX_DIM.)
LANCZOS_MIN_DIM = 32

__all__ = [
    "DENSE_MAX_DIM",
    "LANCZOS_MIN_DIM",
    "LowRankOperator",
    "as_operator",
    "leading_eigenpair",
    "low_rank_eigh",
    "orthonormal_basis",
    "spectral_norm",
    "symmetric_low_rank",
    "top_eigenpairs",
    "top_singular_triplets",
]


def orthonormal_basis(A):
    """Q of the thin QR factorisation of ``A`` with the signs fixed so that ``diag(R) >= 0``.

    Fixing the signs makes the basis a continuous, deterministic function of ``A`` (LAPACK's
    Householder QR may return either sign per column).
    """
    Q, R = np.linalg.qr(A)
    s = np.sign(np.diagonal(R)).astype(Q.dtype)
    s[s == 0] = 1
    return Q * s


def _fix_signs(vecs):
    """Make the entry of largest magnitude of every column positive (deterministic output)."""
    if vecs.size == 0:
        return vecs
    idx = np.argmax(np.abs(vecs), axis=0)
    s = np.sign(vecs[idx, np.arange(vecs.shape[1])])
    s[s == 0] = 1
    return vecs * s


class LowRankOperator(LinearOperator):
    """The d1 x d2 operator ``L @ R.T + D`` with ``D`` diagonal (square case only) or zero.

    Parameters
    ----------
    L : ndarray of shape (d1, r)
    R : ndarray of shape (d2, r)
    diagonal : ndarray of shape (d1,) or None
        Added diagonal (requires d1 == d2). ``None`` means no diagonal term.

    Notes
    -----
    Memory and every product cost O((d1 + d2) r); :meth:`toarray` is the only method that builds
    the dense matrix and is meant for small examples and tests.
    """

    def __init__(self, L, R, diagonal=None):
        L = np.asarray(L)
        R = np.asarray(R)
        if L.ndim != 2 or R.ndim != 2 or L.shape[1] != R.shape[1]:
            raise ValueError(f"factors must be 2-D with equal column counts, got {L.shape} and "
                             f"{R.shape}")
        if diagonal is not None:
            diagonal = np.asarray(diagonal)
            if L.shape[0] != R.shape[0] or diagonal.shape != (L.shape[0],):
                raise ValueError("a diagonal term needs a square operator and d entries")
        self.L = L
        self.R = R
        self.diagonal_term = diagonal
        dtype = np.result_type(L.dtype, R.dtype, np.float32)
        super().__init__(dtype=dtype, shape=(L.shape[0], R.shape[0]))

    @property
    def rank_bound(self):
        """Upper bound on the rank when there is no diagonal term (the factor width)."""
        return self.L.shape[1]

    def _matmat(self, B):
        out = self.L @ (self.R.T @ B)
        if self.diagonal_term is not None:
            out = out + self.diagonal_term[:, None] * B
        return out

    def _matvec(self, b):
        return self._matmat(np.asarray(b).reshape(-1, 1)).ravel()

    def _rmatmat(self, B):
        out = self.R @ (self.L.T @ B)
        if self.diagonal_term is not None:
            out = out + self.diagonal_term[:, None] * B
        return out

    def _rmatvec(self, b):
        return self._rmatmat(np.asarray(b).reshape(-1, 1)).ravel()

    def _adjoint(self):
        return LowRankOperator(self.R, self.L, self.diagonal_term)

    def diagonal(self):
        """The diagonal of the operator, shape (min(d1, d2),), in O(d r)."""
        m = min(self.shape)
        out = np.einsum("ij,ij->i", self.L[:m], self.R[:m])
        if self.diagonal_term is not None:
            out = out + self.diagonal_term
        return out

    def trace(self):
        return float(np.sum(self.diagonal()))

    def toarray(self):
        """The dense matrix (for small operators: tests, examples, plots)."""
        out = self.L @ self.R.T
        if self.diagonal_term is not None:
            out[np.diag_indices_from(out)] += self.diagonal_term
        return out


def symmetric_low_rank(U, V, zero_diagonal=False):
    """``(U V^T + V U^T) / 2``, optionally with its diagonal removed, as a :class:`LowRankOperator`.

    This is the second-order matrix of the generalized FM (Lin and Ye 2016, Algorithm 1, line 1)
    and, with ``zero_diagonal=True``, of the improved FM (Lin et al. 2019, §3.3).
    """
    U = np.asarray(U)
    V = np.asarray(V)
    L = np.hstack([U, V]) * 0.5
    R = np.hstack([V, U])
    diag = -np.einsum("ij,ij->i", U, V) if zero_diagonal else None
    return LowRankOperator(L, R, diag)


def low_rank_eigh(op):
    """Exact eigenpairs of a symmetric :class:`LowRankOperator` without diagonal term.

    With ``op = L R^T`` (r columns), the range lies in span(L): for Q an orthonormal basis of L,
    the nonzero eigenpairs are those of the r x r matrix ``Q^T L R^T Q`` lifted by Q. Returns
    ``vals`` (r,) sorted by decreasing magnitude and ``vecs`` (d, r). O(d r^2).
    """
    if not isinstance(op, LowRankOperator) or op.diagonal_term is not None:
        raise ValueError("low_rank_eigh needs a LowRankOperator without diagonal term")
    if op.shape[0] != op.shape[1]:
        raise ValueError(f"low_rank_eigh needs a square operator, got {op.shape}")
    Q = orthonormal_basis(op.L.astype(np.float64))
    T = (Q.T @ op.L) @ (op.R.T @ Q)
    vals, W = np.linalg.eigh(0.5 * (T + T.T))
    idx = _pick(vals, vals.shape[0], "LM")
    return vals[idx], _fix_signs(Q @ W[:, idx])


def as_operator(A):
    """A :class:`LinearOperator` for an ndarray, sparse matrix or operator."""
    if isinstance(A, LinearOperator):
        return A
    if sp.issparse(A):
        return aslinearoperator(A)
    A = np.asarray(A)
    if A.ndim != 2:
        raise ValueError(f"expected a 2-D matrix or operator, got shape {A.shape}")
    return aslinearoperator(A)


def _dense(op, dtype=np.float64):
    d2 = op.shape[1]
    return np.asarray(op.matmat(np.eye(d2, dtype=dtype)), dtype=np.float64)


def _pick(vals, k, which):
    if which == "LM":
        order = np.argsort(-np.abs(vals), kind="stable")
    elif which == "LA":
        order = np.argsort(-vals, kind="stable")
    elif which == "SA":
        order = np.argsort(vals, kind="stable")
    else:
        raise ValueError(f"which must be 'LM', 'LA' or 'SA', got {which!r}")
    return order[:k]


def _select_with_ties(vals, vecs, k, which, rtol=1e-9):
    """The top-k eigenpairs, with a tie at the k-th eigenvalue resolved canonically.

    When the k-th and (k+1)-th keys are equal (a degenerate eigenspace straddles the cut, e.g.
    the null space of a batch with fewer rows than features), LAPACK's basis of that eigenspace
    is arbitrary and changes with round-off. We keep the untied pairs and complete them with the
    projections of the coordinate vectors e_1, e_2, ... onto the tied eigenspace (Gram-Schmidt),
    a choice that depends only on the subspace, so equal problems give equal answers.
    """
    key = {"LM": np.abs(vals), "LA": vals, "SA": -vals}[which]
    order = _pick(vals, vals.shape[0], which)
    if k >= vals.shape[0]:
        return vals[order[:k]], _fix_signs(vecs[:, order[:k]])
    tol = rtol * max(float(np.max(np.abs(vals))), 1e-300)
    cut = key[order[k - 1]]
    tied = np.flatnonzero(np.abs(key - cut) <= tol)
    if tied.shape[0] <= 1 or np.all(np.isin(tied, order[:k])):
        return vals[order[:k]], _fix_signs(vecs[:, order[:k]])
    keep = [i for i in order[:k] if i not in set(tied.tolist())]
    need = k - len(keep)
    B = vecs[:, tied]
    chosen = []
    basis = np.zeros((vecs.shape[0], 0))
    for j in range(vecs.shape[0]):
        if len(chosen) == need:
            break
        v = B @ B[j]  # projection of e_j onto the tied eigenspace
        v = v - basis @ (basis.T @ v)
        nv = np.linalg.norm(v)
        if nv > 1e-6:
            v = v / nv
            basis = np.column_stack([basis, v])
            chosen.append(v)
    # Rayleigh quotients of the chosen vectors (all equal to the tied eigenvalue up to rtol).
    tv = np.array([float(v @ (vecs * vals) @ (vecs.T @ v)) for v in chosen])
    out_vals = np.concatenate([vals[keep], tv])
    out_vecs = np.column_stack([vecs[:, keep]] + chosen)
    return out_vals, _fix_signs(out_vecs)


def top_eigenpairs(A, k, *, which="LM", method="auto", n_iter=4, oversample=10,
                   dense_max_dim=DENSE_MAX_DIM, tol=0.0, random_state=None):
    """Top ``k`` eigenpairs of a symmetric matrix or operator.

    Parameters
    ----------
    A : ndarray, sparse matrix or LinearOperator of shape (d, d)
        Symmetric; only products ``A @ B`` are used (except on the dense path).
    k : int
        Number of pairs, ``1 <= k <= d``.
    which : {"LM", "LA", "SA"}, default="LM"
        Largest magnitude, largest algebraic or smallest algebraic eigenvalues.
    method : {"auto", "dense", "randomized", "lanczos"}, default="auto"
        ``"dense"`` materialises ``A`` (refused above ``dense_max_dim``); ``"randomized"`` runs
        ``n_iter`` block subspace iterations on ``k + oversample`` vectors followed by a
        Rayleigh-Ritz step; ``"lanczos"`` calls ARPACK (``eigsh``, needs ``k < d``). ``"auto"``
        is dense when ``d <= dense_max_dim`` and randomized otherwise.
    n_iter, oversample : int
        Randomized method: power iterations and extra block vectors. The block iteration only
        resolves eigenvalues whose magnitude stands out from the tail; with ``which="LM"`` the
        error shrinks like ``(|lambda_{b+1}| / |lambda_k|) ** (2 n_iter + 1)``, b the block size.
    dense_max_dim : int
        Memory budget of the dense path, in rows of the d x d matrix.
    tol : float
        Lanczos tolerance (0: machine precision).
    random_state : int, RandomState or None
        Start block of the randomized and Lanczos methods.

    Returns
    -------
    vals : ndarray of shape (k,), float64, ordered as ``which`` asks.
    vecs : ndarray of shape (d, k), orthonormal columns; the sign of each column is fixed so that
        its largest-magnitude entry is positive.
    """
    op = as_operator(A)
    d = op.shape[0]
    if op.shape[1] != d:
        raise ValueError(f"top_eigenpairs needs a square operator, got shape {op.shape}")
    if not 1 <= k <= d:
        raise ValueError(f"k must be in [1, {d}], got {k}")
    if method == "auto":
        method = "dense" if d <= dense_max_dim else "randomized"
    if method == "dense":
        if d > dense_max_dim:
            raise ValueError(f"dense eigendecomposition refused: d={d} exceeds dense_max_dim="
                             f"{dense_max_dim} (use method='randomized' or 'lanczos')")
        M = _dense(op)
        M = 0.5 * (M + M.T)
        vals, vecs = np.linalg.eigh(M)
        return _select_with_ties(vals, vecs, k, which)
    rng = check_random_state(random_state)
    if method == "lanczos":
        if k >= d:
            return top_eigenpairs(op, k, which=which, method="randomized", n_iter=n_iter,
                                  oversample=oversample, random_state=rng)
        v0 = rng.standard_normal(d)
        vals, vecs = eigsh(op, k=k, which=which, tol=tol, v0=v0)
        idx = _pick(vals, k, which)
        return vals[idx], _fix_signs(vecs[:, idx])
    if method != "randomized":
        raise ValueError(f"unknown method {method!r}")
    b = min(d, k + oversample)
    dtype = np.float64 if op.dtype == np.float64 else np.float32
    Q = orthonormal_basis(rng.standard_normal((d, b)).astype(dtype))
    if which != "LM":
        # Subspace iteration finds the largest magnitudes; shift so that the wanted end of the
        # spectrum has the largest magnitude (the shift is a bound on the spectral norm).
        shift = spectral_norm(op, method="randomized", random_state=rng) * 1.01
        sign = 1.0 if which == "LA" else -1.0
        base = op
        op = LinearOperator((d, d), matvec=lambda x: sign * base.matvec(x) + shift * x,
                            matmat=lambda B: sign * base.matmat(B) + shift * B, dtype=base.dtype)
    for _ in range(n_iter):
        Q = orthonormal_basis(op.matmat(Q))
    AQ = op.matmat(Q)
    T = Q.T @ AQ
    T = 0.5 * (T + T.T)
    vals, W = np.linalg.eigh(T.astype(np.float64))
    idx = _pick(vals, k, "LM")
    vecs = Q.astype(np.float64) @ W[:, idx]
    vals = vals[idx]
    if which != "LM":
        vals = sign * (vals - shift)
        order = _pick(vals, k, which)
        vals, vecs = vals[order], vecs[:, order]
    return vals, _fix_signs(vecs)


def leading_eigenpair(A, *, v0=None, tol=0.0, maxiter=None):
    """Largest algebraic eigenpair of a symmetric operator, warm-started, never failing.

    The linear oracle of Frank-Wolfe over the spectahedron (:mod:`fmlearn.solvers.hazan`):
    ARPACK's Lanczos (``eigsh``, ``which="LA"``) from ``v0``, or a dense ``eigh`` below
    :data:`LANCZOS_MIN_DIM`.

    Returns
    -------
    p : ndarray of shape (d,), unit norm
    rho : float
        The Rayleigh quotient of ``p`` (exact for that vector, so a duality gap computed from
        it is never overstated).
    converged : bool
        False when ARPACK did not converge: ``p`` is then its best Ritz vector (or ``v0``).

    Examples
    --------
    >>> import numpy as np
    >>> p, rho, ok = leading_eigenpair(np.diag([1.0, 3.0, -5.0]))
    >>> float(rho), bool(abs(p[1]) == 1.0), ok
    (3.0, True, True)
    """
    op = as_operator(A)
    d = op.shape[0]
    converged = True
    if d <= LANCZOS_MIN_DIM:
        M = _dense(op)
        _, vecs = np.linalg.eigh(0.5 * (M + M.T))
        p = vecs[:, -1]
    else:
        maxiter = max(1000, 10 * d) if maxiter is None else maxiter
        try:
            _, vecs = eigsh(op, k=1, which="LA", v0=v0, tol=tol, maxiter=maxiter)
            p = vecs[:, 0]
        except ArpackNoConvergence as exc:
            converged = False
            p = exc.eigenvectors[:, 0] if exc.eigenvectors.shape[1] else v0
    p = np.asarray(p, dtype=np.float64)
    p = p / np.linalg.norm(p)
    return p, float(p @ op.matvec(p)), converged


def top_singular_triplets(A, k, *, method="auto", n_iter=4, oversample=10,
                          dense_max_dim=DENSE_MAX_DIM, tol=0.0, random_state=None):
    """Top ``k`` singular triplets ``(U, s, Vt)`` of a (possibly rectangular) matrix or operator.

    Same methods as :func:`top_eigenpairs`; ``"lanczos"`` uses ``scipy.sparse.linalg.svds``.
    Returns ``U`` (d1, k), ``s`` (k,) descending, ``Vt`` (k, d2); signs fixed on ``U``.
    """
    op = as_operator(A)
    d1, d2 = op.shape
    if not 1 <= k <= min(d1, d2):
        raise ValueError(f"k must be in [1, {min(d1, d2)}], got {k}")
    if method == "auto":
        method = "dense" if max(d1, d2) <= dense_max_dim else "randomized"
    if method == "dense":
        if max(d1, d2) > dense_max_dim:
            raise ValueError(f"dense SVD refused: shape {op.shape} exceeds dense_max_dim="
                             f"{dense_max_dim}")
        U, s, Vt = np.linalg.svd(_dense(op), full_matrices=False)
        U, s, Vt = U[:, :k], s[:k], Vt[:k]
    elif method == "lanczos" and k < min(d1, d2):
        rng = check_random_state(random_state)
        U, s, Vt = svds(op, k=k, tol=tol, v0=rng.standard_normal(min(d1, d2)))
        order = np.argsort(-s, kind="stable")
        U, s, Vt = U[:, order], s[order], Vt[order]
    elif method in ("randomized", "lanczos"):
        rng = check_random_state(random_state)
        b = min(d1, d2, k + oversample)
        dtype = np.float64 if op.dtype == np.float64 else np.float32
        Q = orthonormal_basis(op.matmat(rng.standard_normal((d2, b)).astype(dtype)))
        for _ in range(n_iter):
            Q = orthonormal_basis(op.rmatmat(Q))
            Q = orthonormal_basis(op.matmat(Q))
        Bt = op.rmatmat(Q)  # (d2, b) = (Q^T A)^T
        W, s, Zt = np.linalg.svd(Bt.T.astype(np.float64), full_matrices=False)
        U = Q.astype(np.float64) @ W[:, :k]
        s, Vt = s[:k], Zt[:k]
    else:
        raise ValueError(f"unknown method {method!r}")
    # Fix signs on U and carry them to V so that U diag(s) Vt is unchanged.
    Uf = _fix_signs(U)
    flip = np.sign(np.sum(Uf * U, axis=0))
    flip[flip == 0] = 1
    return Uf, s, Vt * flip[:, None]


def spectral_norm(A, *, method="auto", dense_max_dim=DENSE_MAX_DIM, random_state=None):
    """The spectral norm (largest singular value) of a matrix or operator, matrix-free.

    A :class:`LowRankOperator` without diagonal term is handled exactly in O(d r^2) by two thin
    QR factorisations; other operators go through :func:`top_singular_triplets` (dense below
    ``dense_max_dim``, else Lanczos to machine precision).
    """
    op = as_operator(A)
    if isinstance(op, LowRankOperator) and op.diagonal_term is None:
        if op.L.shape[1] == 0:
            return 0.0
        _, RL = np.linalg.qr(op.L.astype(np.float64))
        _, RR = np.linalg.qr(op.R.astype(np.float64))
        return float(np.linalg.norm(RL @ RR.T, 2))
    if min(op.shape) == 0:
        return 0.0
    if method == "auto":
        method = "dense" if max(op.shape) <= dense_max_dim else "lanczos"
    if method == "lanczos" and min(op.shape) <= 1:
        method = "dense" if max(op.shape) <= dense_max_dim else "randomized"
    _, s, _ = top_singular_triplets(op, 1, method=method, dense_max_dim=dense_max_dim,
                                    random_state=random_state, n_iter=20)
    return float(s[0])
