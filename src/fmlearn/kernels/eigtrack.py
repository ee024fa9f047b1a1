"""The tracked eigen-subspace that serves the convex learners' eigen-steps.

A small orthonormal subspace ``B`` (m_max x D rows) is kept across rounds together with
``SB = B S`` (rows S B_a) and ``GS = B S B'``, both updated exactly with every rank-one change
of the accumulated gradient S, and ``UB = U B'`` (r_max x m_max) linking B to the basis of the
low-rank C, so that B C B' = UB' K UB costs O(r^2 m). The Ritz pairs of any combination
alpha S + beta C on span(B) then cost O(m^3) and their residuals no product with S; a product
is only needed to add a new direction (a Davidson step) or to recompute the products
(:func:`refresh`, which also removes rounding drift).
"""

from collections import namedtuple

import numpy as np

from ._jit import njit
from .dense import combine_rows, dot, matvec
from .symacc import sacc_matvec

# B, SB (m_max, D); GS (m_max, m_max); UB (max(r_max, 1), m_max); nb: 1-array, the size in
# use; since_refresh: 1-array, rounds since the last exact recomputation.
Tracker = namedtuple("Tracker", "B SB GS UB nb since_refresh")


@njit(cache=True, nogil=True)
def gs_rank1(tr, nb, idx, val, n, coef, self_inter, d, cb):
    """cb = B x^; S B' and B S B' follow S += coef * G(x)."""
    B, SB, GS = tr.B, tr.SB, tr.GS
    for a in range(nb):
        s = 0.0
        for p in range(n):
            s += B[a, idx[p]] * val[p]
        cb[a] = s
    if coef == 0.0:
        return
    for a in range(nb):
        for p in range(n):
            j = idx[p]
            SB[a, j] += coef * val[p] * cb[a]
            if not self_inter and j < d:
                SB[a, j] -= coef * val[p] * val[p] * B[a, j]
    for a in range(nb):
        for b in range(a, nb):
            s = cb[a] * cb[b]
            if not self_inter:
                for p in range(n):
                    j = idx[p]
                    if j < d:
                        s -= val[p] * val[p] * B[a, j] * B[b, j]
            GS[a, b] += coef * s
            GS[b, a] = GS[a, b]


@njit(cache=True, nogil=True)
def _orthogonalize(B, SB, nb, v, c, row):
    """v -= B' c and SB[row] -= SB' c (the known products follow the vector)."""
    D = B.shape[1]
    for a in range(nb):
        ca = c[a]
        if ca != 0.0:
            for j in range(D):
                v[j] -= ca * B[a, j]
                SB[row, j] -= ca * SB[a, j]


@njit(cache=True, nogil=True)
def _project(B, nb, v, out):
    """out[a] = B[a] . v for the first nb basis rows."""
    for a in range(nb):
        s = 0.0
        for j in range(B.shape[1]):
            s += B[a, j] * v[j]
        out[a] = s


@njit(cache=True, nogil=True)
def append(tr, nb, r, ident, v, Sv, Uv, c, c_known, work):
    """Append v orthonormalized against B, given S v and (unless ``ident``) U v.

    ``c`` holds B v on entry when ``c_known``. SB, GS and UB gain the new row/column from the
    known products (b = (v - B'c) / rho, so S b = (S v - SB'c) / rho). Returns the new size
    (unchanged when v lies in span(B)); ``v`` is overwritten."""
    B, SB, GS, UB = tr.B, tr.SB, tr.GS, tr.UB
    D = B.shape[1]
    n0 = 0.0
    for j in range(D):
        n0 += v[j] * v[j]
    if n0 == 0.0:
        return nb
    if not c_known:
        _project(B, nb, v, c)
    for j in range(D):
        SB[nb, j] = Sv[j]
    _orthogonalize(B, SB, nb, v, c, nb)
    rho2 = 0.0
    for j in range(D):
        rho2 += v[j] * v[j]
    if rho2 < 0.25 * n0:  # cancellation: orthogonalize twice (Kahan-Parlett)
        _project(B, nb, v, work)
        for a in range(nb):
            if work[a] != 0.0:
                c[a] += work[a]
        _orthogonalize(B, SB, nb, v, work, nb)
        rho2 = 0.0
        for j in range(D):
            rho2 += v[j] * v[j]
    if rho2 <= 1e-16 * n0:
        return nb
    inv = 1.0 / np.sqrt(rho2)
    for j in range(D):
        B[nb, j] = v[j] * inv
        SB[nb, j] *= inv
    for a in range(nb + 1):
        _gram_entry(B, SB, GS, a, nb)
    if not ident:
        for k in range(r):
            s = Uv[k]
            for a in range(nb):
                s -= UB[k, a] * c[a]
            UB[k, nb] = s * inv
    return nb + 1


@njit(cache=True, nogil=True)
def _gram_entry(B, SB, GS, a, b):
    """GS[a, b] = GS[b, a] = B[a] . SB[b]: one entry of the Gram matrix B S B'."""
    s = 0.0
    for j in range(B.shape[1]):
        s += B[a, j] * SB[b, j]
    GS[a, b] = s
    GS[b, a] = s


@njit(cache=True, nogil=True)
def gram_c(C, r, UB, B, nb, GC, kb):
    """GC = B C B': M' K M with M = UB[:r] (C = U' K U, so B C B' = UB' K UB) or M = B' for a
    dense C (K = C)."""
    if C.ident:
        _congruence(C.K, B.T, B.shape[1], nb, GC, kb)
    else:
        _congruence(C.K, UB, r, nb, GC, kb)


@njit(cache=True, nogil=True)
def _congruence(K, M, r, nb, out, kb):
    """out[:nb, :nb] = M[:r, :nb]' K[:r, :r] M[:r, :nb] (symmetric K)."""
    for b in range(nb):
        matvec(K, M[:, b], r, kb)
        for a in range(b + 1):
            s = dot(M[:, a], kb, r)
            out[a, b] = s
            out[b, a] = s


@njit(cache=True, nogil=True)
def ritz(GS, GC, nb, alpha, beta):
    """Eigenpairs of alpha * GS + beta * GC, i.e. of alpha S + beta C on span(B)."""
    M = np.empty((nb, nb))
    for a in range(nb):
        for b in range(nb):
            M[a, b] = 0.5 * (alpha * (GS[a, b] + GS[b, a]) + beta * (GC[a, b] + GC[b, a]))
    return np.linalg.eigh(M)


@njit(cache=True, nogil=True)
def rotate(tr, nb, r, ident, Y, sel, n_sel):
    """Replace the subspace by its Ritz vectors Y[:, sel[:n_sel]] (a thick restart)."""
    B, SB, GS, UB = tr.B, tr.SB, tr.GS, tr.UB
    D = B.shape[1]
    nB = np.zeros((n_sel, D))
    nS = np.zeros((n_sel, D))
    combine_rows(Y, sel, nb, B, D, nB)
    combine_rows(Y, sel, nb, SB, D, nS)
    gS = np.zeros((n_sel, n_sel))
    for k in range(n_sel):
        for l in range(n_sel):
            s = 0.0
            for a in range(nb):
                ya = Y[a, sel[k]]
                for b in range(nb):
                    s += ya * GS[a, b] * Y[b, sel[l]]
            gS[k, l] = s
    if not ident:
        nUB = np.zeros((r, n_sel))
        for k in range(r):
            for l in range(n_sel):
                s = 0.0
                for a in range(nb):
                    s += UB[k, a] * Y[a, sel[l]]
                nUB[k, l] = s
        for k in range(r):
            for l in range(n_sel):
                UB[k, l] = nUB[k, l]
    for k in range(n_sel):
        B[k, :] = nB[k, :]
        SB[k, :] = nS[k, :]
        for l in range(n_sel):
            GS[k, l] = gS[k, l]
    return n_sel


@njit(cache=True)
def refresh(S, U, r, ident, tr, nb):
    """Re-orthonormalize B and recompute S B', B S B' and U B' exactly; returns the new size."""
    B, SB, GS, UB = tr.B, tr.SB, tr.GS, tr.UB
    D = B.shape[1]
    m = 0
    v = np.empty(D)
    for a in range(nb):
        v[:] = B[a, :]
        for _ in range(2):
            for b in range(m):
                s = 0.0
                for j in range(D):
                    s += B[b, j] * v[j]
                for j in range(D):
                    v[j] -= s * B[b, j]
        nrm = np.sqrt(np.sum(v * v))
        if nrm > 1e-6:
            B[m, :] = v / nrm
            m += 1
    for a in range(m):
        sacc_matvec(S, B[a], SB[a])
    for a in range(m):
        for b in range(a, m):
            _gram_entry(B, SB, GS, a, b)
    if not ident:
        for k in range(r):
            for a in range(m):
                s = 0.0
                for j in range(D):
                    s += U[k, j] * B[a, j]
                UB[k, a] = s
    return m


@njit(cache=True, nogil=True)
def top_by_magnitude(theta, n_sel, mode):
    """Indices of the ``n_sel`` Ritz values to keep: largest |theta| (mode 0) or largest
    theta (mode 1, the PSD case)."""
    if mode == 1:
        order = np.argsort(-theta)
    else:
        order = np.argsort(-np.abs(theta))
    return order[:n_sel]


@njit(cache=True, nogil=True)
def argmax_abs(theta):
    best = 0
    for k in range(1, theta.shape[0]):
        if abs(theta[k]) > abs(theta[best]):
            best = k
    return best


@njit(cache=True, nogil=True)
def combine(B, nb, y, col, out):
    """out = sum_a Y[a, col] B_a."""
    out[:] = 0.0
    for a in range(nb):
        c = y[a, col]
        if c != 0.0:
            for j in range(out.shape[0]):
                out[j] += c * B[a, j]


@njit(cache=True, nogil=True)
def apply_c(C, r, UB, y, col, nb, q, t1, t2, out):
    """out = C q for q = B' Y[:, col] (through UB when C is low-rank)."""
    U, K = C.U, C.K
    if C.ident:
        D = q.shape[0]
        for j in range(D):
            s = 0.0
            for l in range(D):
                s += K[j, l] * q[l]
            out[j] = s
        return
    for k in range(r):
        s = 0.0
        for a in range(nb):
            s += UB[k, a] * y[a, col]
        t1[k] = s
    for k in range(r):
        s = 0.0
        for l in range(r):
            s += K[k, l] * t1[l]
        t2[k] = s
    out[:] = 0.0
    for k in range(r):
        c = t2[k]
        if c != 0.0:
            for j in range(out.shape[0]):
                out[j] += c * U[k, j]


@njit(cache=True, nogil=True)
def orth_q(U, r, UB, nb, Y, col, q, p, aU, work):
    """p = q - U' aU with aU = U q (from UB when q = B' Y[:, col]); returns ||p||."""
    D = q.shape[0]
    for k in range(r):
        s = 0.0
        for a in range(nb):
            s += UB[k, a] * Y[a, col]
        aU[k] = s
    p[:] = q
    for k in range(r):
        c = aU[k]
        if c != 0.0:
            for j in range(D):
                p[j] -= c * U[k, j]
    rho2 = 0.0
    for j in range(D):
        rho2 += p[j] * p[j]
    if rho2 < 0.25:  # q is a unit vector: most of it lies in span(U), orthogonalize again
        for k in range(r):
            s = 0.0
            for j in range(D):
                s += U[k, j] * p[j]
            work[k] = s
        for k in range(r):
            c = work[k]
            if c != 0.0:
                aU[k] += c
                for j in range(D):
                    p[j] -= c * U[k, j]
        rho2 = 0.0
        for j in range(D):
            rho2 += p[j] * p[j]
    return np.sqrt(rho2)
