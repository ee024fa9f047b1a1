"""The accumulated gradient S = sum_t c_t G(x_t) of the convex online learners, in one of two
forms chosen by the caller (``mode``):

* ``EXACT``: a symmetric CSR matrix whose pattern (both triangles) covers every pair of features
  seen together; values change in place. The caller grows the pattern before a batch
  (:func:`pattern_missing`, :func:`remap_values`).
* ``SKETCH``: S ~ P'P - N'N - diag(dg), where the rows of ``P`` (``N``) are a Frequent Directions
  sketch (Liberty 2013; Ghashami, Liberty, Phillips, Woodruff 2016, Alg. 2) of the rows
  sqrt(|c_t|) x^_t with c_t > 0 (< 0), and ``dg`` holds the left-out self-interactions exactly.
  Each sketch has 2 l rows; when they are full the sketch is shrunk to l - 1 rows by the l-th
  squared singular value delta, and ``shrunk`` accumulates those deltas: with them
  ||P'P - P^'P^||_2 <= sum delta (Ghashami et al. 2016, Thm. 2.1), so the sketch's spectral
  error is known at every round. Size and work per round are O(l D), whatever the stream length.

Every function here dispatches on the mode, so the learners never see which form S has.
"""

from collections import namedtuple

import numpy as np

from ._jit import njit

EXACT = 0
SKETCH = 1

# P, N: (2 l, D) sketch rows (empty in EXACT mode); fill: rows used in P, N; shrunk: the summed
# shrink deltas of P and N (the sketch's error bound); diag: the left-out self-interactions.
SymAcc = namedtuple("SymAcc", "mode indptr indices data P N fill shrunk diag")


@njit(cache=True, nogil=True)
def find_entry(Sp, Si, row, col):
    """Position of (row, col) in a CSR pattern with sorted indices, or -1."""
    lo = Sp[row]
    hi = Sp[row + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        c = Si[mid]
        if c < col:
            lo = mid + 1
        elif c > col:
            hi = mid
        else:
            return mid
    return -1


# _exact_pos's answer for a pair G(x) leaves out (a self-interaction, see _left_out).
_LEFT_OUT = -2


@njit(cache=True, nogil=True)
def _left_out(j, self_inter, d):
    """True when G(x) leaves out the self-interaction x_j^2: j is one of the first d
    coordinates and ``self_inter`` is off."""
    return not self_inter and j < d


@njit(cache=True, nogil=True)
def _exact_pos(Sp, Si, j, l, same, self_inter, d):
    """Where the pair (j, l) of a sparse row's features (``same``: one entry twice) sits in
    the EXACT pattern (Sp, Si) of S: its position, -1 when the pattern lacks it, or
    ``_LEFT_OUT`` when G(x) leaves it out. (Scalars and the pattern's arrays, not the record
    S: every array passed per pair costs a reference count per call.)"""
    if same and _left_out(j, self_inter, d):
        return _LEFT_OUT
    return find_entry(Sp, Si, j, l)


@njit(cache=True, nogil=True, error_model="numpy")
def sacc_add(S, idx, val, n, coef, self_inter, d):
    """S += coef * G(x) for the sparse row (idx, val); G(x) = x x' minus diag(x o x) on the
    first d coordinates unless ``self_inter``. Returns 0, 1 if a sketch was shrunk (products
    with S kept elsewhere must be recomputed) or -1 if an EXACT pattern entry is missing."""
    if S.mode == EXACT:
        for a in range(n):
            for b in range(n):
                pos = _exact_pos(S.indptr, S.indices, idx[a], idx[b], a == b, self_inter, d)
                if pos == -1:
                    return -1
                if pos >= 0:
                    S.data[pos] += coef * val[a] * val[b]
        return 0
    for a in range(n):
        if _left_out(idx[a], self_inter, d):
            S.diag[idx[a]] += coef * val[a] * val[a]
    side = 0 if coef > 0.0 else 1
    B = S.P if side == 0 else S.N
    row = S.fill[side]
    B[row, :] = 0.0
    s = np.sqrt(abs(coef))
    for a in range(n):
        B[row, idx[a]] = s * val[a]
    S.fill[side] = row + 1
    if row + 1 < B.shape[0]:
        return 0
    S.shrunk[side] += fd_shrink(B)
    S.fill[side] = B.shape[0] // 2 - 1
    return 1


@njit(cache=True, nogil=True, error_model="numpy")
def fd_shrink(B):
    """Frequent Directions shrink of a full (2 l, D) sketch: B <- sqrt(max(Sigma^2 - delta, 0))
    V' with delta the l-th largest squared singular value; the l - 1 nonzero rows come first.
    Returns delta. The SVD comes from the small Gram matrix B B' (O(l^2 D))."""
    m = B.shape[0]
    ell = m // 2
    G = B @ B.T
    lam, Y = np.linalg.eigh(0.5 * (G + G.T))
    delta = max(lam[m - ell], 0.0)  # ascending: the l-th largest
    W = Y.T @ B  # rows: sigma_i v_i'
    B[:, :] = 0.0
    for k in range(ell - 1):
        col = m - 1 - k
        s2 = lam[col]
        if s2 <= delta or s2 <= 0.0:
            break
        f = np.sqrt((s2 - delta) / s2)
        B[k, :] = f * W[col, :]
    return delta


@njit(cache=True, nogil=True)
def sacc_rows(S, idx, val, n, out):
    """out = S x for a sparse x (S is symmetric: its rows are its columns)."""
    out[:] = 0.0
    if S.mode == EXACT:
        for a in range(n):
            j = idx[a]
            xa = val[a]
            for p in range(S.indptr[j], S.indptr[j + 1]):
                out[S.indices[p]] += S.data[p] * xa
        return
    _sketch_apply(S.P, S.fill[0], idx, val, n, 1.0, out)
    _sketch_apply(S.N, S.fill[1], idx, val, n, -1.0, out)
    for a in range(n):
        out[idx[a]] -= S.diag[idx[a]] * val[a]


@njit(cache=True, nogil=True)
def _sketch_apply(B, rows, idx, val, n, sign, out):
    """out += sign B' (B x) for a sparse x."""
    for k in range(rows):
        s = 0.0
        for a in range(n):
            s += B[k, idx[a]] * val[a]
        if s != 0.0:
            s *= sign
            for j in range(out.shape[0]):
                out[j] += s * B[k, j]


@njit(cache=True, nogil=True)
def sacc_matvec(S, v, out):
    """out = S v for a dense v."""
    D = out.shape[0]
    if S.mode == EXACT:
        for j in range(D):
            s = 0.0
            for p in range(S.indptr[j], S.indptr[j + 1]):
                s += S.data[p] * v[S.indices[p]]
            out[j] = s
        return
    for j in range(D):
        out[j] = -S.diag[j] * v[j]
    for side in range(2):
        B = S.P if side == 0 else S.N
        sign = 1.0 if side == 0 else -1.0
        for k in range(S.fill[side]):
            s = 0.0
            for j in range(D):
                s += B[k, j] * v[j]
            s *= sign
            for j in range(D):
                out[j] += s * B[k, j]


@njit(cache=True, nogil=True)
def sacc_quad(S, alpha, idx, val, n, self_inter, d):
    """sum over pairs (a, b) of the row of alpha S_jl x_j x_l, leaving out the a = b terms of
    the first d coordinates unless ``self_inter``."""
    quad = 0.0
    if S.mode == EXACT:
        for a in range(n):
            for b in range(n):
                pos = _exact_pos(S.indptr, S.indices, idx[a], idx[b], a == b, self_inter, d)
                if pos >= 0:
                    quad += alpha * S.data[pos] * val[a] * val[b]
        return quad
    for side in range(2):
        B = S.P if side == 0 else S.N
        sign = 1.0 if side == 0 else -1.0
        for k in range(S.fill[side]):
            s = 0.0
            dg = 0.0
            for a in range(n):
                c = B[k, idx[a]] * val[a]
                s += c
                if _left_out(idx[a], self_inter, d):
                    dg += c * c
            quad += sign * alpha * (s * s - dg)
    for a in range(n):
        if not _left_out(idx[a], self_inter, d):
            quad -= alpha * S.diag[idx[a]] * val[a] * val[a]
    return quad


@njit(cache=True)
def sym_dense(S, out):
    """Scatter S into a dense symmetric array (small D only)."""
    D = out.shape[0]
    out[:, :] = 0.0
    if S.mode == EXACT:
        for j in range(D):
            for p in range(S.indptr[j], S.indptr[j + 1]):
                out[j, S.indices[p]] = S.data[p]
        return
    out[:, :] = S.P[: S.fill[0]].T @ S.P[: S.fill[0]] - S.N[: S.fill[1]].T @ S.N[: S.fill[1]]
    for j in range(D):
        out[j, j] -= S.diag[j]


@njit(cache=True)
def pattern_missing(Sp, Si, indptr, indices, d, augment):
    """True if some pair of features of a CSR row batch (plus the bias coordinate d when
    ``augment``) is missing from the pattern of S."""
    n_rows = indptr.shape[0] - 1
    extra = 1 if augment else 0
    for i in range(n_rows):
        lo = indptr[i]
        hi = indptr[i + 1]
        for p in range(lo, hi + extra):
            j = indices[p] if p < hi else d
            for q in range(lo, hi + extra):
                k = indices[q] if q < hi else d
                if find_entry(Sp, Si, j, k) < 0:
                    return True
    return False


@njit(cache=True)
def remap_values(old_p, old_i, old_d, new_p, new_i, new_d):
    """Copy the values of an old CSR pattern into a superset pattern (both canonical)."""
    for j in range(old_p.shape[0] - 1):
        q = new_p[j]
        for p in range(old_p[j], old_p[j + 1]):
            c = old_i[p]
            while new_i[q] != c:
                q += 1
            new_d[q] = old_d[p]
