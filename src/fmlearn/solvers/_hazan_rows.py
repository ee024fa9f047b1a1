"""The rows of the convex FM (Yamada et al. 2017) and the block functions that touch them.

:class:`CFMData` holds one block of training rows (X, X^T, X o X, y, weights, group slices);
:func:`atom_quadratic` and :func:`quadratic_part` give the model's pairwise part q(W) on rows.
:mod:`fmlearn.solvers.hazan` never touches a row itself: every O(nnz) operation of the solver
is one of the ``blk_*`` functions below, run on the rows of one block and its named n-vectors,
either in this process (:class:`LocalRows`) or on Dask workers (``fmlearn.distributed``).
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from ..kernels.losses import loss_derivative_np, loss_value_np


@dataclass
class CFMData:
    """Training data of the convex FM: X (CSR), X^T (CSR), the same for X o X, y, weights.

    Plain SciPy sparse products (``X @ v``) are used for every O(nnz) operation: on one core
    they beat a hand-written loop, and they do not spin threads on a busy machine.
    """

    X: object
    XT: object
    X2: object
    X2T: object
    y: np.ndarray
    sw: np.ndarray
    groups: object = None  # None, or a list of (feature indices, X_g, X_g^T, (X_g o X_g)^T)

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def n_features(self):
        return self.X.shape[1]


def cfm_data(X_csr, y, sw, groups=None):
    """Build :class:`CFMData` from a canonical CSR matrix (float64 copies; X o X is X itself
    when every stored value is 1, as in one-hot data).

    ``groups`` (disjoint arrays of feature indices) makes W block-diagonal over them (Yamada et al.
    2017, Lemma 3): only features of the same group interact. The column slices X_g are kept for the
    per-group eigen-problems; together they hold at most nnz values."""
    X = _same_index_dtype(sp.csr_matrix(X_csr, dtype=np.float64, copy=True))
    XT = _same_index_dtype(X.T.tocsr())
    if np.all(X.data == 1.0):
        X2, X2T = X, XT  # 0/1 data (one-hot): X o X is X, no copy
    elif np.all(np.abs(X.data) == 1.0):
        X2, X2T = abs(X), abs(XT)
    else:
        X2 = _same_index_dtype(X.multiply(X).tocsr())
        X2T = _same_index_dtype(X2.T.tocsr())
    parts = None
    if groups is not None:
        parts = []
        for idx in groups:
            idx = np.asarray(idx, dtype=np.int64)
            Xg = _same_index_dtype(X[:, idx].tocsr())
            X2gT = _same_index_dtype(X2[:, idx].T.tocsr())
            parts.append((idx, Xg, _same_index_dtype(Xg.T.tocsr()), X2gT))
    return CFMData(X, XT, X2, X2T, np.ascontiguousarray(y, dtype=np.float64),
                   np.ascontiguousarray(sw, dtype=np.float64), parts)


def _same_index_dtype(M):
    # SciPy converts mixed int32/int64 index arrays on every product (2x slower on
    # MovieLens); give indptr and indices one dtype, int32 whenever nnz allows it.
    dtype = np.int32 if M.nnz < np.iinfo(np.int32).max else np.int64
    M.indptr = M.indptr.astype(dtype, copy=False)
    M.indices = M.indices.astype(dtype, copy=False)
    return M


def atom_quadratic(pair, p):
    """q_i = 1/2 [(x_i^T p)^2 - sum_j x_ij^2 p_j^2]: the model's pairwise part for W = p p^T."""
    X, X2 = pair
    s = X @ p
    return 0.5 * (s * s - X2 @ (p * p))


def sparse_pair(X_csr):
    """(X, X o X) of held-out rows, for :func:`atom_quadratic` / :func:`quadratic_part`."""
    X = _same_index_dtype(sp.csr_matrix(X_csr, dtype=np.float64, copy=True))
    return X, _same_index_dtype(X.multiply(X).tocsr())




# -- the rows: where the n-vectors live ----------------------------------------------------------
# The solver below never touches a row. Every O(nnz) operation is a *block function*
# ``fn(data, vec, *args) -> tuple`` run on the rows of one block (a :class:`CFMData`) and its
# named n-vectors ``vec`` (q, f, g, qp, delta); the tuples of all blocks are added up, entry by
# entry, in block order. :class:`LocalRows` holds every row in this process as one block;
# ``fmlearn.distributed`` holds blocks on Dask workers with the same two calls (``reduce``: the
# sums only; ``update``: the sums, and the block's vectors as the function left them). The
# client side (eigen-solver, conjugate gradient, line search, atoms) is the same code for both,
# so the two paths differ only in the order of floating-point summation.
class LocalRows:
    """Every row in this process: one :class:`CFMData` block and its named n-vectors."""

    def __init__(self, data):
        self.data = data
        self.vectors = {}
        self.n_features = data.n_features
        self.groups = None if data.groups is None else [g[0] for g in data.groups]

    def reduce(self, fn, *args):
        return fn(self.data, self.vectors, *args)

    update = reduce


def as_rows(data):
    """``data`` as rows: a :class:`CFMData` becomes :class:`LocalRows`; rows pass through."""
    return LocalRows(data) if isinstance(data, CFMData) else data


def _combination(data, vec, terms):
    """sum_i c_i v_i over ``terms`` = ((c, name), ...), "y" naming the targets."""
    out = None
    for c, name in terms:
        v = data.y if name == "y" else vec[name]
        v = v if c == 1.0 else c * v
        out = v if out is None else out + v
    return out


def _weights(data, vec, name):
    return data.sw if name is None else vec[name]


def blk_scale(data, vec):
    """sum s, sum s y, sum s y^2, sum_i s_i ||x_i||^2 and sum_i s_i nnz(x_i): the weighted
    scales of y and of the non-zero feature values (``trace_bound="auto"``)."""
    s = data.sw
    counts = np.diff(data.X.indptr).astype(np.float64)
    return (float(s.sum()), float(s @ data.y), float(s @ (data.y * data.y)),
            float((data.X2T @ s).sum()), float(s @ counts))


def blk_ridge_diagonal(data, vec, weights):
    """sum s and (X o X)^T s: the Jacobi preconditioner of the ridge system (s: the sample
    weights, or the stored n-vector named ``weights``)."""
    s = _weights(data, vec, weights)
    return float(s.sum()), data.X2T @ s


def blk_ridge_rhs(data, vec, terms):
    """Z^T (s o v) for the n-vector v = sum c_i v_i (the right-hand side of a ridge solve)."""
    u = data.sw * _combination(data, vec, terms)
    return float(u.sum()), data.XT @ u


def blk_ridge_apply(data, vec, w0, w1, weights):
    """Z^T (s o Z w) with w1 already masked: the ridge system's product (without lam1)."""
    u = _weights(data, vec, weights) * (data.X @ w1 + w0)
    return float(u.sum()), data.XT @ u


def blk_logistic_curvature(data, vec, w0, w1):
    """Store h = s l''(f) at f = Z w + q (the logistic Hessian is Z^T diag(h) Z + reg)."""
    sig = expit(-data.y * (data.X @ w1 + w0 + vec["q"]))
    vec["h"] = data.sw * sig * (1.0 - sig)
    return ()


def blk_quadratic(data, vec, P, lam, name):
    """vec[name] = q(P diag(lam) P^T) on the block's rows."""
    vec[name] = quadratic_part((data.X, data.X2), P, lam)
    return ()


def blk_current(data, vec, loss, w0, w1, metric):
    """Predictions f, gradient weights g (stored) of the iterate with linear part w; returns
    (s^T r^2 for the squared loss else 0, g^T q, (X o X)^T g, metric numerator, sum s)."""
    q = vec["q"]
    lin = data.X @ w1 + w0
    if loss == "squared":
        r = data.y - lin - q
        g = data.sw * r
        part = float(g @ r)
        f = lin + q
    else:
        f = lin + q
        g = -0.5 * data.sw * loss_derivative_np("logistic", f, data.y)
        part = 0.0
    vec["f"], vec["g"] = f, g
    if metric[0] == "rmse":
        err = (np.clip(f, metric[1], metric[2]) - data.y) ** 2
    else:
        err = (np.sign(f) != data.y).astype(np.float64)
    return part, float(g @ q), data.X2T @ g, float(data.sw @ err), float(data.sw.sum())


def blk_gradient_matvec(data, vec, v, group):
    """X^T (g o X v) on all features (``group`` None) or on the features of one group."""
    if group is None:
        X, XT = data.X, data.XT
    else:
        _, X, XT, _ = data.groups[group]
    return (XT @ (vec["g"] * (X @ v)),)


def blk_atom(data, vec, p, eta, rhs):
    """qp = q(p p^T), delta = eta qp - q (stored); with ``rhs`` returns Z^T (s o qp)."""
    qp = atom_quadratic((data.X, data.X2), p)
    vec["qp"] = qp
    vec["delta"] = eta * qp - vec["q"]
    if not rhs:
        return ()
    u = data.sw * qp
    return float(u.sum()), data.XT @ u


def blk_pair(data, vec, p, pa, scale, rhs):
    """The pairwise direction (mass ``scale`` moved from atom ``pa``, or from the zero vertex
    when None, to the atom p): delta = scale (q(p p^T) - q(pa pa^T)) (stored); with ``rhs``
    returns Z^T (s o delta)."""
    pair = (data.X, data.X2)
    qa = 0.0 if pa is None else atom_quadratic(pair, pa)
    # q(p p^T) is already stored when blk_atom ran for this p (step="auto": both candidates)
    qp = vec["qp"] if "qp" in vec else atom_quadratic(pair, p)
    vec["delta"] = scale * (qp - qa)
    if not rhs:
        return ()
    u = data.sw * vec["delta"]
    return float(u.sum()), data.XT @ u


def blk_pair_step(data, vec, alpha):
    """q <- q + a delta (a pairwise step); returns 1 when a prediction is no longer finite."""
    q = vec["q"] + alpha * vec["delta"]
    vec["q"] = q
    del vec["delta"]
    vec.pop("qp", None)  # the Frank-Wolfe candidate's, when step="auto" compared both
    return (0 if np.all(np.isfinite(q)) else 1,)


def blk_atom_scores(data, vec, P, block=16):
    """sum_i g_i (x_i . p_k)^2 for every column p_k of P (``block`` columns at a time): with
    (X o X)^T g, the atoms' p_k^T M(g) p_k (the away atom of a pairwise step)."""
    g = vec["g"]
    out = np.empty(P.shape[1])
    for k in range(0, P.shape[1], block):
        S = np.asarray(data.X @ P[:, k:k + block])
        out[k:k + block] = g @ (S * S)
    return (out,)


def blk_face_basis(data, vec, Q):
    """Store B = X Q (the rows in the orthonormal basis Q of the atoms' span, d x k) for the
    corrective steps; with Q None, drop it."""
    if Q is None:
        vec.pop("B", None)
    else:
        vec["B"] = np.asarray(data.X @ Q)
    return ()


def blk_face_gradient(data, vec):
    """B^T diag(g) B: with (X o X)^T g, the face's restriction Q^T M(g) Q of -grad J."""
    B = vec["B"]
    return (B.T @ (vec["g"][:, None] * B),)


def blk_face_direction(data, vec, D, dD, rhs):
    """delta = q(Q D Q^T) for a symmetric k x k D, with dD = diag(Q D Q^T) (stored); with
    ``rhs`` returns Z^T (s o delta)."""
    B = vec["B"]
    vec["delta"] = 0.5 * (np.einsum("ij,ij->i", B @ D, B) - data.X2 @ dD)
    if not rhs:
        return ()
    u = data.sw * vec["delta"]
    return float(u.sum()), data.XT @ u


def blk_exact_step(data, vec, wd0, wd1):
    """g^T delta and s^T res^2 with res = delta - Z w_delta (Eq. 6, corrected)."""
    res = vec["delta"] - (data.X @ wd1 + wd0)
    return float(vec["g"] @ vec["delta"]), float(data.sw @ (res * res))


def blk_logistic_segment(data, vec, a):
    """First and second derivative in a of sum s log(1 + exp(-y (f + a delta)))."""
    y, sw, delta = data.y, data.sw, vec["delta"]
    sig = expit(-y * (vec["f"] + a * delta))
    return float(sw @ (-y * sig * delta)), float(sw @ (sig * (1.0 - sig) * delta * delta))


def blk_logistic_gain(data, vec, a):
    """sum s (l(f) - l(f + a delta)) for the logistic loss l: the decrease of the loss along
    the stored direction at step a (w fixed), to compare two candidate steps."""
    m0 = -data.y * vec["f"]
    m1 = m0 - a * data.y * vec["delta"]
    return (float(data.sw @ (np.logaddexp(0.0, m0) - np.logaddexp(0.0, m1))),)


def blk_step(data, vec, alpha, eta):
    """q <- (1 - a) q + a eta qp; returns 1 when a prediction is no longer finite."""
    q = (1.0 - alpha) * vec["q"] + (alpha * eta) * vec["qp"]
    vec["q"] = q
    del vec["qp"], vec["delta"]
    return (0 if np.all(np.isfinite(q)) else 1,)


def blk_logistic_loss(data, vec, w0, w1):
    """sum s l(f), sum s l'(f), X^T (s o l'(f)) with f = Z w + q: the L-BFGS objective."""
    f = data.X @ w1 + w0 + vec["q"]
    u = data.sw * loss_derivative_np("logistic", f, data.y)
    return float(data.sw @ loss_value_np("logistic", f, data.y)), float(u.sum()), data.XT @ u


def blk_squared_loss(data, vec, w0, w1):
    """s^T r^2 with r = y - Z w - q."""
    r = data.y - (data.X @ w1 + w0) - vec["q"]
    return (float(data.sw @ (r * r)),)


# -- linear algebra helpers ---------------------------------------------------------------------
def quadratic_part(pair, P, lam, block=16):
    """q_i = 1/2 tr(W (x_i x_i^T - diag(x_i o x_i))) for W = P diag(lam) P^T, O(nnz * atoms)
    time; atoms are taken ``block`` at a time so that memory stays O(n * block)."""
    X, X2 = pair
    q = -(X2 @ ((P * P) @ lam)) if lam.shape[0] else np.zeros(X.shape[0])
    for k in range(0, lam.shape[0], block):
        S = np.asarray(X @ P[:, k:k + block])
        q += (S * S) @ lam[k:k + block]
    return 0.5 * q


# -- the exact logistic step along a segment -----------------------------------------------------
def logistic_line_search(y, sw, base, delta):
    """argmin over a in [0, 1] of sum s log(1 + exp(-y (base + a delta))) (safeguarded Newton
    on the increasing derivative)."""
    data = CFMData(None, None, None, None, np.asarray(y, dtype=np.float64),
                   np.asarray(sw, dtype=np.float64))
    vec = {"f": np.asarray(base, dtype=np.float64), "delta": np.asarray(delta, dtype=np.float64)}
    return safeguarded_newton(lambda a: blk_logistic_segment(data, vec, a))


def safeguarded_newton(derivs):
    """argmin over [0, 1] of a convex function given ``derivs(a) -> (first, second)``
    derivatives (Newton steps kept inside a shrinking bracket, else bisection)."""
    if derivs(1.0)[0] <= 0.0:
        return 1.0
    if derivs(0.0)[0] >= 0.0:
        return 0.0
    lo, hi, a = 0.0, 1.0, 0.5
    for _ in range(100):
        d1, d2 = derivs(a)
        if d1 < 0.0:
            lo = a
        else:
            hi = a
        if hi - lo < 1e-12:
            break
        newton = a - d1 / d2 if d2 > 0.0 else -1.0
        if lo < newton < hi and abs(newton - a) <= 1e-10:
            return newton  # Newton converges from one side: the bracket would not shrink
        a = newton if lo < newton < hi else 0.5 * (lo + hi)
    return a
