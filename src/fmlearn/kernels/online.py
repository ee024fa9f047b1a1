"""Compiled per-row loops of the online learners for the compact convexified FM (seed 002).

A CCFM is one symmetric (d+1) x (d+1) matrix C acting on the augmented row x^ = [x; 1]:

    y^(x) = 1/2 x^' C x^  -  [no self-interactions] 1/2 sum_{j<d} C_jj x_j^2        (002 §3.1)

and the gradient of a round's loss l(y^, y) is ``l' * 1/2 G(x)`` with
``G(x) = x^ x^' - [no self-interactions] diag(x o x, 0)``. Every loop here takes a whole batch
of CSR rows, visits them in the given order (predict, then learn) and writes each row's
prediction *before* its update into ``out``, so prequential evaluation costs nothing extra.

Representations (chosen by the caller from a memory budget, see ``solvers/_online_common.py``):

* C is ``U[:r]' K[:r, :r] U[:r]`` with orthonormal rows ``U`` (a basis of length-D vectors) and
  a small symmetric core ``K``; a new direction extends the basis, and when the basis is full
  the core is eigendecomposed and the smallest-|eigenvalue| directions are dropped (their
  trace mass is counted in ``fst[0]``). With ``ident`` the basis is the identity (r = D) and K
  is C itself: the dense representation for small d.
* The accumulated gradient S = sum_t l'_t 1/2 G(x_t) is a symmetric CSR matrix whose pattern
  (both triangles) covers every pair of features seen together; its values change in place.
* The OCG linear step needs the eigenpair of H = -eta S - 2 C of largest |eigenvalue|. It is
  tracked by a small orthonormal subspace ``B`` whose products ``S B`` and ``C B`` (and the
  Gram matrices ``B S B'``, ``B C B'``) are updated with every rank-one change of S and C, so a
  Rayleigh-Ritz step costs O(m^3) and expanding the subspace with the new row x^ costs
  O(D m) plus one sparse row combination. Optional refinement steps add the Ritz residual
  (one sparse matrix-vector product each) until the residual is below ``eig_tol * |theta|``.
  Per-round work is bounded by the sizes of B, U and S, never by the round number.
"""

import math

import numpy as np
from numba import njit, prange

from ..losses import loss_derivative, loss_value

# ----------------------------------------------------------------------------------------------
# augmented rows and the sparse symmetric accumulator S
# ----------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _xhat(indptr, indices, data, i, d, idx, val):
    """Fill ``idx``/``val`` with the augmented row [x_i; 1] (sorted indices); return its nnz."""
    n = 0
    for p in range(indptr[i], indptr[i + 1]):
        idx[n] = indices[p]
        val[n] = data[p]
        n += 1
    idx[n] = d
    val[n] = 1.0
    return n + 1


@njit(cache=True, nogil=True)
def _find(Sp, Si, row, col):
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


@njit(cache=True, nogil=True)
def _sym_add(Sp, Si, Sd, idx, val, n, coef, self_inter, d):
    """S += coef * G(x); returns False if a needed pattern entry is missing."""
    for a in range(n):
        j = idx[a]
        for b in range(n):
            if a == b and not self_inter and j < d:
                continue
            pos = _find(Sp, Si, j, idx[b])
            if pos < 0:
                return False
            Sd[pos] += coef * val[a] * val[b]
    return True


@njit(cache=True, nogil=True)
def _sym_rows(Sp, Si, Sd, idx, val, n, out):
    """out = S x^ for a sparse x^ (rows of S are its columns)."""
    out[:] = 0.0
    for a in range(n):
        j = idx[a]
        xa = val[a]
        for p in range(Sp[j], Sp[j + 1]):
            out[Si[p]] += Sd[p] * xa


@njit(cache=True, nogil=True)
def _sym_matvec(Sp, Si, Sd, v, out):
    D = Sp.shape[0] - 1
    for j in range(D):
        s = 0.0
        for p in range(Sp[j], Sp[j + 1]):
            s += Sd[p] * v[Si[p]]
        out[j] = s


@njit(cache=True)
def sym_dense(Sp, Si, Sd, out):
    """Scatter the CSR accumulator into a dense symmetric array (small D only)."""
    out[:, :] = 0.0
    for j in range(Sp.shape[0] - 1):
        for p in range(Sp[j], Sp[j + 1]):
            out[j, Si[p]] = Sd[p]


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
                if _find(Sp, Si, j, k) < 0:
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


# ----------------------------------------------------------------------------------------------
# the symmetric matrix C = U' K U (or K itself when ``ident``)
# ----------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _coords_sparse(U, r, ident, idx, val, n, z):
    """z = U x^ (coordinates of a sparse vector in the basis)."""
    if ident:
        z[:r] = 0.0
        for p in range(n):
            z[idx[p]] = val[p]
        return
    for a in range(r):
        s = 0.0
        for p in range(n):
            s += U[a, idx[p]] * val[p]
        z[a] = s


@njit(cache=True, nogil=True)
def _ccfm_pred(U, K, r, ident, idx, val, n, self_inter, d, z, w):
    """1/2 x^' C x^ minus the self-interactions when excluded; leaves z = U x^, w = K z."""
    if ident:
        acc = 0.0
        for a in range(n):
            ja = idx[a]
            s = 0.0
            for b in range(n):
                s += K[ja, idx[b]] * val[b]
            acc += val[a] * s
            if not self_inter and ja < d:
                acc -= val[a] * val[a] * K[ja, ja]
        return 0.5 * acc
    _coords_sparse(U, r, ident, idx, val, n, z)
    acc = 0.0
    for a in range(r):
        s = 0.0
        for b in range(r):
            s += K[a, b] * z[b]
        w[a] = s
        acc += z[a] * s
    if not self_inter:
        for p in range(n):
            j = idx[p]
            if j >= d:
                continue
            cjj = 0.0
            for a in range(r):
                s = 0.0
                for b in range(r):
                    s += K[a, b] * U[b, j]
                cjj += U[a, j] * s
            acc -= val[p] * val[p] * cjj
    return 0.5 * acc


@njit(cache=True)
def lr_compress(U, K, r, keep, UB, nb):
    """Eigendecompose the core, keep the ``keep`` largest-|eigenvalue| directions (dropping
    zero ones) and rotate the basis (and the tracker's ``UB = U B'``, if ``nb`` > 0).

    Returns ``(new_r, dropped trace mass)``; the dropped mass bounds the change of C in trace
    norm, and the iterate stays in the ball because eigenvalues are only removed."""
    D = U.shape[1]
    M = np.empty((r, r))
    for a in range(r):
        for b in range(r):
            M[a, b] = 0.5 * (K[a, b] + K[b, a])
    lam, Q = np.linalg.eigh(M)
    order = np.argsort(-np.abs(lam))
    top = abs(lam[order[0]]) if r > 0 else 0.0
    n_keep = 0
    for k in range(min(keep, r)):
        if top > 0.0 and abs(lam[order[k]]) > 1e-14 * top:
            n_keep += 1
    dropped = 0.0
    for k in range(n_keep, r):
        dropped += abs(lam[order[k]])
    Unew = np.zeros((n_keep, D))
    UBnew = np.zeros((n_keep, max(nb, 1)))
    for k in range(n_keep):
        col = order[k]
        for a in range(r):
            c = Q[a, col]
            if c != 0.0:
                for j in range(D):
                    Unew[k, j] += c * U[a, j]
                for b in range(nb):
                    UBnew[k, b] += c * UB[a, b]
    K[:r, :r] = 0.0
    for k in range(n_keep):
        U[k, :] = Unew[k, :]
        K[k, k] = lam[order[k]]
        for b in range(nb):
            UB[k, b] = UBnew[k, b]
    for k in range(n_keep, r):
        U[k, :] = 0.0
        for b in range(nb):
            UB[k, b] = 0.0
    return n_keep, dropped


@njit(cache=True)
def ball_threshold(lam, delta, psd):
    """tau such that sum_i max(|lam_i| - tau, 0) = delta (0 if already inside).

    With ``psd`` the set is {W >= 0, tr W <= delta}: negative eigenvalues are zeroed and the
    positive ones shifted by tau >= 0."""
    n = lam.shape[0]
    mags = np.empty(n)
    for i in range(n):
        mags[i] = max(lam[i], 0.0) if psd else abs(lam[i])
    total = mags.sum()
    if total <= delta:
        return 0.0
    s = np.sort(mags)[::-1]
    csum = 0.0
    tau = 0.0
    for k in range(n):
        csum += s[k]
        cand = (csum - delta) / (k + 1)
        if k + 1 == n or s[k + 1] <= cand:
            tau = cand
            break
    return max(tau, 0.0)


@njit(cache=True)
def project_core(K, r, delta, psd):
    """Replace the r x r core by its projection onto the trace-norm ball (or the PSD trace
    simplex with ``psd``); returns the number of nonzero eigenvalues kept."""
    M = np.empty((r, r))
    for a in range(r):
        for b in range(r):
            M[a, b] = 0.5 * (K[a, b] + K[b, a])
    lam, Q = np.linalg.eigh(M)
    tau = ball_threshold(lam, delta, psd)
    nz = 0
    for i in range(r):
        if psd:
            lam[i] = max(lam[i] - tau, 0.0)
        else:
            m = max(abs(lam[i]) - tau, 0.0)
            lam[i] = m if lam[i] >= 0.0 else -m
        if lam[i] != 0.0:
            nz += 1
    if tau == 0.0 and not psd:
        return nz  # inside the ball: K is unchanged (up to symmetrization)
    for a in range(r):
        for b in range(r):
            s = 0.0
            for k in range(r):
                s += Q[a, k] * lam[k] * Q[b, k]
            K[a, b] = s
    return nz


# ----------------------------------------------------------------------------------------------
# the eigen tracker
# ----------------------------------------------------------------------------------------------
# B (m_max, D): orthonormal rows spanning the tracked subspace, with SB = B S (rows S B_a) and
# GS = B S B' kept exact through every rank-one change of S, and UB = U B' (r_max, m_max) linking
# B to the basis of C, so that B C B' = UB' K UB costs O(r^2 m). The Ritz residual of any vector
# of span(B) is then known without a product with S; a product is only needed to add a new
# direction to the subspace.


@njit(cache=True, nogil=True)
def _gs_rank1(B, SB, GS, nb, idx, val, n, coef, self_inter, d, cb):
    """cb = B x^; S B' and B S B' follow S += coef * G(x)."""
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
def _append(B, SB, GS, UB, nb, r, ident, v, Sv, Uv, c, c_known, work):
    """Append v orthonormalized against B, given S v and (unless ``ident``) U v.

    ``c`` holds B v on entry when ``c_known``. SB, GS and UB gain the new row/column from the
    known products (b = (v - B'c) / rho, so S b = (S v - SB'c) / rho). Returns the new size
    (unchanged when v lies in span(B)); ``v`` is overwritten."""
    D = B.shape[1]
    n0 = 0.0
    for j in range(D):
        n0 += v[j] * v[j]
    if n0 == 0.0:
        return nb
    if not c_known:
        for a in range(nb):
            s = 0.0
            for j in range(D):
                s += B[a, j] * v[j]
            c[a] = s
    for j in range(D):
        SB[nb, j] = Sv[j]
    for a in range(nb):
        ca = c[a]
        if ca != 0.0:
            for j in range(D):
                v[j] -= ca * B[a, j]
                SB[nb, j] -= ca * SB[a, j]
    rho2 = 0.0
    for j in range(D):
        rho2 += v[j] * v[j]
    if rho2 < 0.25 * n0:  # cancellation: orthogonalize twice (Kahan-Parlett)
        for a in range(nb):
            s = 0.0
            for j in range(D):
                s += B[a, j] * v[j]
            work[a] = s
        for a in range(nb):
            ca = work[a]
            if ca != 0.0:
                c[a] += ca
                for j in range(D):
                    v[j] -= ca * B[a, j]
                    SB[nb, j] -= ca * SB[a, j]
        rho2 = 0.0
        for j in range(D):
            rho2 += v[j] * v[j]
    if rho2 <= 1e-16 * n0:
        return nb
    inv = 1.0 / math.sqrt(rho2)
    for j in range(D):
        B[nb, j] = v[j] * inv
        SB[nb, j] *= inv
    for a in range(nb + 1):
        s = 0.0
        for j in range(D):
            s += B[a, j] * SB[nb, j]
        GS[a, nb] = s
        GS[nb, a] = s
    if not ident:
        for k in range(r):
            s = Uv[k]
            for a in range(nb):
                s -= UB[k, a] * c[a]
            UB[k, nb] = s * inv
    return nb + 1


@njit(cache=True, nogil=True)
def _gram_c(K, UB, r, ident, B, nb, GC, kb):
    """GC = B C B' (from UB and the core, or directly for a dense C)."""
    if ident:
        D = B.shape[1]
        for b in range(nb):
            for j in range(D):
                s = 0.0
                for l in range(D):
                    s += K[j, l] * B[b, l]
                kb[j] = s
            for a in range(b + 1):
                s = 0.0
                for j in range(D):
                    s += B[a, j] * kb[j]
                GC[a, b] = s
                GC[b, a] = s
        return
    for b in range(nb):
        for k in range(r):
            s = 0.0
            for l in range(r):
                s += K[k, l] * UB[l, b]
            kb[k] = s
        for a in range(b + 1):
            s = 0.0
            for k in range(r):
                s += UB[k, a] * kb[k]
            GC[a, b] = s
            GC[b, a] = s


@njit(cache=True, nogil=True)
def _ritz(GS, GC, nb, alpha, beta):
    """Eigenpairs of alpha * GS + beta * GC, i.e. of alpha S + beta C on span(B)."""
    M = np.empty((nb, nb))
    for a in range(nb):
        for b in range(nb):
            M[a, b] = 0.5 * (alpha * (GS[a, b] + GS[b, a]) + beta * (GC[a, b] + GC[b, a]))
    return np.linalg.eigh(M)


@njit(cache=True, nogil=True)
def _rotate(B, SB, GS, UB, nb, r, ident, Y, sel, n_sel):
    """Replace the subspace by its Ritz vectors Y[:, sel[:n_sel]] (a thick restart)."""
    D = B.shape[1]
    nB = np.zeros((n_sel, D))
    nS = np.zeros((n_sel, D))
    for k in range(n_sel):
        col = sel[k]
        for a in range(nb):
            c = Y[a, col]
            if c != 0.0:
                for j in range(D):
                    nB[k, j] += c * B[a, j]
                    nS[k, j] += c * SB[a, j]
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
def tracker_refresh(Sp, Si, Sd, U, r, ident, B, SB, GS, UB, nb):
    """Re-orthonormalize B and recompute S B', B S B' and U B' exactly (removes rounding drift)."""
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
        nrm = math.sqrt(np.sum(v * v))
        if nrm > 1e-6:
            B[m, :] = v / nrm
            m += 1
    for a in range(m):
        _sym_matvec(Sp, Si, Sd, B[a], SB[a])
    for a in range(m):
        for b in range(a, m):
            s = 0.0
            for j in range(D):
                s += B[a, j] * SB[b, j]
            GS[a, b] = s
            GS[b, a] = s
    if not ident:
        for k in range(r):
            for a in range(m):
                s = 0.0
                for j in range(D):
                    s += U[k, j] * B[a, j]
                UB[k, a] = s
    return m


@njit(cache=True, nogil=True)
def _top_by_magnitude(theta, n_sel, mode):
    """Indices of the ``n_sel`` Ritz values to keep: largest |theta| (mode 0) or largest
    theta (mode 1, the PSD case)."""
    if mode == 1:
        order = np.argsort(-theta)
    else:
        order = np.argsort(-np.abs(theta))
    return order[:n_sel]


@njit(cache=True, nogil=True)
def _argmax_abs(theta):
    best = 0
    for k in range(1, theta.shape[0]):
        if abs(theta[k]) > abs(theta[best]):
            best = k
    return best


@njit(cache=True, nogil=True)
def _combine(B, nb, y, col, out):
    """out = sum_a Y[a, col] B_a."""
    out[:] = 0.0
    for a in range(nb):
        c = y[a, col]
        if c != 0.0:
            for j in range(out.shape[0]):
                out[j] += c * B[a, j]


@njit(cache=True, nogil=True)
def _apply_c(U, K, r, ident, UB, y, col, nb, q, t1, t2, out):
    """out = C q for q = B' Y[:, col] (through UB when C is low-rank)."""
    if ident:
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


# ----------------------------------------------------------------------------------------------
# small dense case: Lanczos with full reorthogonalization for the extreme eigenpair
# ----------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _sturm_count(a, b, k, x):
    """Number of eigenvalues below x of the tridiagonal matrix (diagonal a, off-diagonal b)."""
    count = 0
    dd = a[0] - x
    if dd < 0.0:
        count += 1
    for i in range(1, k):
        if dd == 0.0:
            dd = 1e-300
        dd = a[i] - x - b[i - 1] * b[i - 1] / dd
        if dd < 0.0:
            count += 1
    return count


@njit(cache=True, nogil=True)
def _tridiag_bisect(a, b, k, index, n_steps):
    """Eigenvalue number ``index`` (ascending) of a k x k symmetric tridiagonal matrix
    (diagonal a, off-diagonal b), bracketed by bisection on Sturm counts within the
    Gershgorin interval (``n_steps`` halvings)."""
    lo = 0.0
    hi = 0.0
    for i in range(k):
        r = (abs(b[i - 1]) if i > 0 else 0.0) + (abs(b[i]) if i < k - 1 else 0.0)
        if i == 0 or a[i] - r < lo:
            lo = a[i] - r
        if i == 0 or a[i] + r > hi:
            hi = a[i] + r
    for _ in range(n_steps):
        mid = 0.5 * (lo + hi)
        if _sturm_count(a, b, k, mid) <= index:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@njit(cache=True, nogil=True)
def _tridiag_vector(a, b, k, lam, y, work):
    """Unit eigenvector for the approximate eigenvalue ``lam`` by two steps of inverse
    iteration (Thomas algorithm); returns the Rayleigh quotient y'Ty, which refines ``lam``
    to about the square of the vector's accuracy."""
    scale = 1e-300
    for i in range(k):
        scale = max(scale, abs(a[i]) + (abs(b[i]) if i < k - 1 else 0.0))
    shift = lam + 1e-12 * scale
    for i in range(k):
        y[i] = 1.0
    for _ in range(2):
        dd = a[0] - shift
        if dd == 0.0:
            dd = 1e-300
        work[0] = dd
        for i in range(1, k):
            m = b[i - 1] / work[i - 1]
            dd = a[i] - shift - m * b[i - 1]
            if dd == 0.0:
                dd = 1e-300
            work[i] = dd
            y[i] -= m * y[i - 1]
        y[k - 1] /= work[k - 1]
        for i in range(k - 2, -1, -1):
            y[i] = (y[i] - b[i] * y[i + 1]) / work[i]
        nrm = 0.0
        for i in range(k):
            nrm += y[i] * y[i]
        nrm = math.sqrt(nrm)
        for i in range(k):
            y[i] /= nrm
    rq = 0.0
    for i in range(k):
        s = a[i] * y[i]
        if i > 0:
            s += b[i - 1] * y[i - 1]
        if i < k - 1:
            s += b[i] * y[i + 1]
        rq += y[i] * s
    return rq


# Weight of the pseudo-random part of Lanczos' start vector: the warm start (the previous
# eigenvector) usually lies near the new one, but after a conditional-gradient step the extreme
# eigenvalue often moves to another eigenvector, which the start vector must not miss.
PERTURB = 0.05


@njit(cache=True, nogil=True)
def _lanczos_top(S, K, eta, q0, seed, tol, H, V, a, b, y, work, w, q):
    """Eigenpair of largest |eigenvalue| of H = -eta S - 2 K (dense, D x D) by Lanczos with
    full reorthogonalization from q0 (slightly perturbed, deterministically from ``seed``, so
    that every eigenvector is reachable). Stops when the Ritz residual beta |y_k| is at most
    tol |theta| (checked at k = 6, 10, 14, ...), or at k = D (then exact up to rounding); an
    invariant subspace found early is left with a fresh start vector orthogonal to it. Writes
    the unit eigenvector to q and returns theta."""
    D = q0.shape[0]
    hmax = 0.0
    for j in range(D):
        for l in range(D):
            H[j, l] = -eta * S[j, l] - 2.0 * K[j, l]
            hmax = max(hmax, abs(H[j, l]))
    if hmax == 0.0:  # H = 0: every point of the ball is a linear minimizer (no move)
        q[:] = q0
        return 0.0
    h = np.uint64(seed) * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
    rn = 0.0
    for j in range(D):
        h = h * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
        w[j] = (float(h >> np.uint64(11)) / 9007199254740992.0) - 0.5
        rn += w[j] * w[j]
    rn = PERTURB / math.sqrt(rn)
    nrm = 0.0
    for j in range(D):
        V[0, j] = q0[j] + rn * w[j]
        nrm += V[0, j] * V[0, j]
    nrm = math.sqrt(nrm)
    for j in range(D):
        V[0, j] /= nrm
    theta = 0.0
    kk = 0
    for k in range(D):
        for j in range(D):
            s = 0.0
            for l in range(D):
                s += H[j, l] * V[k, l]
            w[j] = s
        s = 0.0
        for j in range(D):
            s += V[k, j] * w[j]
        a[k] = s
        for i in range(k + 1):  # full reorthogonalization (includes the three-term recurrence)
            c = 0.0
            for j in range(D):
                c += V[i, j] * w[j]
            for j in range(D):
                w[j] -= c * V[i, j]
        beta = 0.0
        for j in range(D):
            beta += w[j] * w[j]
        beta = math.sqrt(beta)
        kk = k + 1
        # the tridiagonal eigen-solve costs O(k) per bisection step: check at k = 6, 10, 14, ...
        check = kk == D or (kk >= 6 and kk % 4 == 2) or beta <= 1e-12 * max(abs(a[k]), 1e-300)
        if check:
            # both ends to ~1e-7 by bisection; the vector of the larger |theta| by inverse
            # iteration, its Rayleigh quotient as theta
            th_hi = _tridiag_bisect(a, b, kk, kk - 1, 24)
            th_lo = _tridiag_bisect(a, b, kk, 0, 24)
            theta = _tridiag_vector(a, b, kk, th_hi if abs(th_hi) >= abs(th_lo) else th_lo,
                                    y, work)
            if kk == D or beta * abs(y[kk - 1]) <= tol * abs(theta):
                break
        if beta <= 1e-12 * max(abs(theta), abs(a[k]), 1e-300):
            # invariant subspace: continue from a deterministic vector orthogonal to it
            for j in range(D):
                h = h * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
                w[j] = (float(h >> np.uint64(11)) / 9007199254740992.0) - 0.5
            for _ in range(2):
                for i in range(k + 1):
                    c = 0.0
                    for j in range(D):
                        c += V[i, j] * w[j]
                    for j in range(D):
                        w[j] -= c * V[i, j]
            beta_n = math.sqrt(np.sum(w * w))
            for j in range(D):
                V[k + 1, j] = w[j] / beta_n
            b[k] = 0.0
            continue
        b[k] = beta
        for j in range(D):
            V[k + 1, j] = w[j] / beta
    q[:] = 0.0
    for i in range(kk):
        c = y[i]
        for j in range(D):
            q[j] += c * V[i, j]
    nrm = math.sqrt(np.sum(q * q))
    for j in range(D):
        q[j] /= nrm
    return theta


# ----------------------------------------------------------------------------------------------
# OCCFM (002 Algorithm 2)
# ----------------------------------------------------------------------------------------------
# integer state ``ist``: [t, r, nb, rounds since refresh, rounds whose linear step stopped above
# the tolerance, Davidson steps taken]; float state ``fst``: [dropped trace mass, sum of
# relative Ritz residuals, last theta].


@njit(cache=True)
def ocg_batch(Xp, Xi, Xd, y, sw, order, loss, self_inter, Sp, Si, Sd, U, K, ident, B, SB, GS,
              UB, ist, fst, eta, delta, gamma_power, gamma_offset, eig_tol, eig_iter, m_keep,
              r_keep, refresh, limit, out):
    """OCCFM rounds over the rows ``order`` of a CSR batch; returns the first bad row or -1.

    Round t (1-based, counted over the learner's life in ``ist[0]``):

    1. predict y^_t = y^(x_t; C_t) and write it to ``out``;
    2. S_t = S_{t-1} + l'(y^_t, y_t) 1/2 G(x_t), so grad F_t(C) = eta S_t + 2 (C - C_1), C_1 = 0;
    3. (theta, q) = the eigenpair of H_t = -eta S_t - 2 C_t of largest |theta| (002 Thm. 1 and
       Lemma 5: the top singular pair of a symmetric matrix is (|theta|, sign(theta) q, q)):
       the Ritz pair of the tracked subspace expanded with x^_t; while its residual
       ||H q - theta q|| exceeds eig_tol |theta|, up to ``eig_iter`` Davidson steps add the
       residual to the subspace (one sparse product with S each);
    4. C_{t+1} = (1 - gamma_t) C_t + gamma_t delta sign(theta) q q',
       gamma_t = min(1, (t + gamma_offset) ** -gamma_power). When H_t = 0 every point of the
       ball solves the linear step and C_t itself is taken (no move).

    Deviations from the printed algorithm (002 Alg. 2 line 4, proof of Thm. 1): the printed
    gradient "f_tau(C_tau) x^_t x^_t'" is read as grad f_tau(C_tau) = l'_tau 1/2 G(x_tau), and
    the sum runs to tau = t (the round's gradient is known when C_{t+1} is chosen), which also
    defines the first linear step (at t = 1 the printed sum is empty and H_1 = 0).
    """
    d = U.shape[1] - 1
    D = d + 1
    m_max = B.shape[0]
    r_max = K.shape[0]
    maxn = 1
    for i in range(Xp.shape[0] - 1):
        maxn = max(maxn, Xp[i + 1] - Xp[i] + 1)
    idx = np.empty(maxn, dtype=np.int64)
    val = np.empty(maxn)
    rr_ = max(r_max, 1)
    z = np.zeros(max(rr_, D))
    w = np.zeros(rr_)
    t1 = np.zeros(rr_)
    aU = np.zeros(rr_ + 1)
    cb = np.zeros(m_max)
    work = np.zeros(m_max)
    GC = np.zeros((m_max, m_max))
    kb = np.zeros(max(D, rr_))
    v = np.zeros(D)
    Sv = np.zeros(D)
    Uv = np.zeros(rr_)
    q = np.zeros(D)
    Cq = np.zeros(D)
    small = m_max >= D and ident
    # relative Ritz residual of the dense eigen-step: 1e-4 gives the same IJCNN1 predictions
    # as 1e-6 (prequential error identical, AUC within 1e-5) at 1.25x the rounds per second
    lanczos_tol = 1e-4
    LV = np.zeros((D if small else 1, D))
    LH = np.zeros((D if small else 1, D))
    la = np.zeros(D)
    lb = np.zeros(D)
    ly = np.zeros(D)
    lwork = np.zeros(D)
    for rr in range(order.shape[0]):
        i = order[rr]
        n = _xhat(Xp, Xi, Xd, i, d, idx, val)
        if sw[i] <= 0.0:
            out[i] = _ccfm_pred(U, K, ist[1], ident, idx, val, n, self_inter, d, z, w)
            continue
        reps = max(1, int(math.ceil(sw[i])))
        scale = sw[i] / reps
        for rep in range(reps):
            r = ist[1]
            nb = ist[2]
            pred = _ccfm_pred(U, K, r, ident, idx, val, n, self_inter, d, z, w)
            if rep == 0:
                out[i] = pred
            if not (abs(pred) <= limit):
                return i
            g = scale * loss_derivative(loss, pred, y[i])
            t = ist[0] + 1
            ist[0] = t
            # -- 2. accumulated gradient (S, S B', B S B')
            coef = 0.5 * g
            if coef != 0.0:
                if not _sym_add(Sp, Si, Sd, idx, val, n, coef, self_inter, d):
                    return -2
            _gs_rank1(B, SB, GS, nb, idx, val, n, coef, self_inter, d, cb)
            full = nb >= D  # the subspace is the whole space: Ritz pairs are eigenpairs
            ist[3] += 1
            if ist[3] >= refresh and nb > 0 and not full:
                nb = tracker_refresh(Sp, Si, Sd, U, r, ident, B, SB, GS, UB, nb)
                _gs_rank1(B, SB, GS, nb, idx, val, n, 0.0, self_inter, d, cb)
                ist[3] = 0
            # -- 3. linear step
            if not full:
                if nb >= m_max:
                    _gram_c(K, UB, r, ident, B, nb, GC, kb)
                    theta, Y = _ritz(GS, GC, nb, -eta, -2.0)
                    nb = _rotate(B, SB, GS, UB, nb, r, ident, Y,
                                 _top_by_magnitude(theta, m_keep, 0), m_keep)
                    _gs_rank1(B, SB, GS, nb, idx, val, n, 0.0, self_inter, d, cb)
                v[:] = 0.0
                for p in range(n):
                    v[idx[p]] = val[p]
                _sym_rows(Sp, Si, Sd, idx, val, n, Sv)
                nb = _append(B, SB, GS, UB, nb, r, ident, v, Sv, z, cb, True, work)
            ist[2] = nb
            if nb == 0:
                continue
            if full and ident:
                # small dense case: B is the identity, so GS = S; Lanczos on H = -eta S - 2 C
                # from the previous eigenvector, to a residual of 1e-6 |theta| (or k = D)
                th = _lanczos_top(GS, K, eta, UB[0], t, lanczos_tol, LH, LV, la, lb, ly, lwork, Sv,
                                  q)
                UB[0, :] = q
                fst[2] = th
                if th == 0.0:
                    continue
                gamma = min(1.0, math.pow(t + gamma_offset, -gamma_power))
                cstep = gamma * delta * (1.0 if th > 0.0 else -1.0)
                for j in range(D):
                    for l in range(D):
                        K[j, l] = (1.0 - gamma) * K[j, l] + cstep * q[j] * q[l]
                continue
            _gram_c(K, UB, r, ident, B, nb, GC, kb)
            theta, Y = _ritz(GS, GC, nb, -eta, -2.0)
            best = _argmax_abs(theta)
            it = 0
            while not full:
                th = theta[best]
                # the Ritz residual H q - theta q, with S q = SB' y known
                _combine(B, nb, Y, best, q)
                _apply_c(U, K, r, ident, UB, Y, best, nb, q, t1, w, Cq)
                for j in range(D):
                    v[j] = -2.0 * Cq[j] - th * q[j]
                for a in range(nb):
                    c = -eta * Y[a, best]
                    if c != 0.0:
                        for j in range(D):
                            v[j] += c * SB[a, j]
                res = 0.0
                for j in range(D):
                    res += v[j] * v[j]
                res = math.sqrt(res)
                if th == 0.0 or res <= eig_tol * abs(th):
                    break
                if it >= eig_iter:
                    ist[4] += 1
                    break
                it += 1
                ist[5] += 1
                if nb >= m_max:
                    nb = _rotate(B, SB, GS, UB, nb, r, ident, Y,
                                 _top_by_magnitude(theta, m_keep, 0), m_keep)
                else:
                    _sym_matvec(Sp, Si, Sd, v, Sv)
                    if not ident:
                        for k in range(r):
                            s = 0.0
                            for j in range(D):
                                s += U[k, j] * v[j]
                            Uv[k] = s
                    nb2 = _append(B, SB, GS, UB, nb, r, ident, v, Sv, Uv, cb, False, work)
                    if nb2 == nb:
                        break
                    nb = nb2
                _gram_c(K, UB, r, ident, B, nb, GC, kb)
                theta, Y = _ritz(GS, GC, nb, -eta, -2.0)
                best = _argmax_abs(theta)
            if not full and theta[best] != 0.0:
                fst[1] += res / abs(theta[best])
            ist[2] = nb
            th = theta[best]
            fst[2] = th
            if th == 0.0:
                continue
            _combine(B, nb, Y, best, q)
            # -- 4. conditional-gradient step on C (and on UB, whose rows follow U)
            gamma = min(1.0, math.pow(t + gamma_offset, -gamma_power))
            cstep = gamma * delta * (1.0 if th > 0.0 else -1.0)
            if ident:
                for j in range(D):
                    for l in range(D):
                        K[j, l] = (1.0 - gamma) * K[j, l] + cstep * q[j] * q[l]
                continue
            for a in range(r):
                for b in range(r):
                    K[a, b] *= 1.0 - gamma
            rho = _orth_q(U, r, UB, nb, Y, best, q, v, aU, Uv)
            if rho > 1e-9 and r < D:
                if r >= r_max:
                    r, dropped = lr_compress(U, K, r, r_keep, UB, nb)
                    fst[0] += dropped
                    rho = _orth_q(U, r, UB, nb, Y, best, q, v, aU, Uv)
                if rho > 1e-9:
                    inv = 1.0 / rho
                    for j in range(D):
                        U[r, j] = v[j] * inv
                    for a in range(nb):
                        s = Y[a, best]
                        for k in range(r):
                            s -= aU[k] * UB[k, a]
                        UB[r, a] = s * inv
                    aU[r] = rho
                    r += 1
            for a in range(r):
                ca = cstep * aU[a]
                for b in range(r):
                    K[a, b] += ca * aU[b]
            ist[1] = r
    return -1


@njit(cache=True, nogil=True)
def _orth_q(U, r, UB, nb, Y, col, q, p, aU, work):
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
    return math.sqrt(rho2)


@njit(cache=True, parallel=True)
def ccfm_predict(Xp, Xi, Xd, U, K, r, ident, self_inter, out):
    """Predictions of a CCFM for every row of a CSR matrix (rows in parallel)."""
    n_rows = Xp.shape[0] - 1
    d = U.shape[1] - 1
    maxn = 1
    for i in range(n_rows):
        maxn = max(maxn, Xp[i + 1] - Xp[i] + 1)
    m = d + 1 if ident else max(r, 1)
    for i in prange(n_rows):
        idx = np.empty(maxn, dtype=np.int64)
        val = np.empty(maxn)
        z = np.empty(m)
        w = np.empty(m)
        n = _xhat(Xp, Xi, Xd, i, d, idx, val)
        out[i] = _ccfm_pred(U, K, r, ident, idx, val, n, self_inter, d, z, w)
    return out


@njit(cache=True)
def ccfm_losses(Xp, Xi, Xd, y, U, K, r, ident, self_inter, loss):
    """Per-row losses of a fixed CCFM (the comparator's side of the regret)."""
    n_rows = Xp.shape[0] - 1
    d = U.shape[1] - 1
    maxn = 1
    for i in range(n_rows):
        maxn = max(maxn, Xp[i + 1] - Xp[i] + 1)
    m = d + 1 if ident else max(r, 1)
    idx = np.empty(maxn, dtype=np.int64)
    val = np.empty(maxn)
    z = np.empty(m)
    w = np.empty(m)
    out = np.empty(n_rows)
    for i in range(n_rows):
        n = _xhat(Xp, Xi, Xd, i, d, idx, val)
        p = _ccfm_pred(U, K, r, ident, idx, val, n, self_inter, d, z, w)
        out[i] = loss_value(loss, p, y[i])
    return out


# ----------------------------------------------------------------------------------------------
# projected learners on the CCFM: OGD and passive-aggressive (002 §4.1 baselines)
# ----------------------------------------------------------------------------------------------

OGD = 0
PA = 1


@njit(cache=True, nogil=True)
def _extend_coordinates(U, K, r, idx, n, keep, fst, v, work):
    """Extend the basis with e_j (j in the row) so that G(x) lies in span(U); returns r.

    Room for all n directions is made first (compressing to ``keep`` <= r_max - n), so that a
    coordinate already in span(U) cannot be lost by a later compression."""
    D = U.shape[1]
    r_max = U.shape[0]
    if n > r_max:
        return -1  # the caller checks max row length against the cap; never write past U
    if r + n > r_max:
        r, dropped = lr_compress(U, K, r, min(keep, r_max - n), work, 0)
        fst[0] += dropped
    for p in range(n):
        j = idx[p]
        # e_j - U' U e_j: its norm^2 is 1 - ||U[:, j]||^2
        s = 0.0
        for k in range(r):
            s += U[k, j] * U[k, j]
        if 1.0 - s <= 1e-18:
            continue
        v[:] = 0.0
        v[j] = 1.0
        for _ in range(2):
            for k in range(r):
                c = 0.0
                for l in range(D):
                    c += U[k, l] * v[l]
                if c != 0.0:
                    for l in range(D):
                        v[l] -= c * U[k, l]
        rho = math.sqrt(np.sum(v * v))
        if rho <= 1e-9:
            continue
        for l in range(D):
            U[r, l] = v[l] / rho
        for k in range(r + 1):
            K[r, k] = 0.0
            K[k, r] = 0.0
        r += 1
    return r


@njit(cache=True)
def ccfm_proj_batch(Xp, Xi, Xd, y, sw, order, loss, self_inter, mode, U, K, ident, ist, fst,
                    eta0, power_t, delta, pa_c, epsilon, r_keep, limit, out):
    """Projected OGD (``mode`` 0) or projected passive-aggressive PA-I (``mode`` 1) on the
    CCFM; returns the first bad row or -1.

    OGD: C <- Proj_K(C - eta_t l'(y^, y) 1/2 G(x)), eta_t = eta0 / t ** power_t (Zinkevich 2003).
    PA-I (Crammer et al. 2006): with the hinge (classification) or epsilon-insensitive
    (regression) loss l_PA and the gradient of y^ in C, 1/2 G(x),
    C <- Proj_K(C - tau s 1/2 G(x)), tau = min(pa_c, l_PA / ||1/2 G(x)||_F^2), s = dl_PA/dy^.
    The projection onto K = {C symmetric, ||C||_tr <= delta} soft-thresholds the eigenvalues of
    the core (exact: C = U' K U with orthonormal U, so C and K share their nonzero spectrum).
    """
    d = U.shape[1] - 1
    D = d + 1
    r_max = K.shape[0]
    maxn = 1
    for i in range(Xp.shape[0] - 1):
        maxn = max(maxn, Xp[i + 1] - Xp[i] + 1)
    idx = np.empty(maxn, dtype=np.int64)
    val = np.empty(maxn)
    z = np.zeros(max(r_max, D))
    w = np.zeros(max(r_max, 1))
    v = np.zeros(D)
    work = np.zeros((1, 1))
    for rr in range(order.shape[0]):
        i = order[rr]
        n = _xhat(Xp, Xi, Xd, i, d, idx, val)
        if sw[i] <= 0.0:
            out[i] = _ccfm_pred(U, K, ist[1], ident, idx, val, n, self_inter, d, z, w)
            continue
        reps = max(1, int(math.ceil(sw[i])))
        scale = sw[i] / reps
        for rep in range(reps):
            r = ist[1]
            pred = _ccfm_pred(U, K, r, ident, idx, val, n, self_inter, d, z, w)
            if rep == 0:
                out[i] = pred
            if not (abs(pred) <= limit):
                return i
            t = ist[0] + 1
            ist[0] = t
            if mode == OGD:
                eta_t = eta0 / math.pow(t, power_t)
                coef = -0.5 * scale * eta_t * loss_derivative(loss, pred, y[i])
            else:
                if loss == 0:
                    l_pa = abs(pred - y[i]) - epsilon
                    sgn = 1.0 if pred > y[i] else -1.0
                else:
                    l_pa = 1.0 - y[i] * pred
                    sgn = -y[i]
                if l_pa <= 0.0:
                    continue
                xx = 0.0
                x4 = 0.0
                for p in range(n):
                    xx += val[p] * val[p]
                    if idx[p] < d:
                        x4 += val[p] ** 4
                gnorm2 = 0.25 * (xx * xx - (0.0 if self_inter else x4))
                tau = min(pa_c * scale, l_pa / gnorm2)
                coef = -0.5 * tau * sgn
            if coef == 0.0:
                continue
            if ident:
                for a in range(n):
                    ja = idx[a]
                    for b in range(n):
                        if a == b and not self_inter and ja < d:
                            continue
                        K[ja, idx[b]] += coef * val[a] * val[b]
                project_core(K, D, delta, False)
                continue
            r = _extend_coordinates(U, K, r, idx, n, r_keep, fst, v, work)
            if r < 0:
                return -3
            # coordinates of x^ and of the e_j in the extended basis
            for k in range(r):
                s = 0.0
                for p in range(n):
                    s += U[k, idx[p]] * val[p]
                z[k] = s
            for a in range(r):
                for b in range(r):
                    g = z[a] * z[b]
                    if not self_inter:
                        for p in range(n):
                            j = idx[p]
                            if j < d:
                                g -= val[p] * val[p] * U[a, j] * U[b, j]
                    K[a, b] += coef * g
            nz = project_core(K, r, delta, False)
            if r >= r_max - maxn and nz < r:
                r, dropped = lr_compress(U, K, r, max(nz, 1), work, 0)
                fst[0] += dropped
            ist[1] = r
    return -1


# ----------------------------------------------------------------------------------------------
# FTRL with lazy projection on the trace-norm ball (CCFM-FTRL) or the PSD trace simplex with an
# unconstrained linear part (CFM-FTRL, the convex FM of seed 004)
# ----------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def ftrl_coord(zn, j, g, alpha, beta, l1, l2):
    """FTRL-Proximal step of coordinate j (McMahan et al. 2013, Algorithm 1).

    ``zn[j] = (z, n, w)``; returns the new weight (also stored in ``zn[j, 2]``)."""
    z = zn[j, 0]
    nn = zn[j, 1]
    w = zn[j, 2]
    sigma = (math.sqrt(nn + g * g) - math.sqrt(nn)) / alpha
    z += g - sigma * w
    nn += g * g
    if abs(z) <= l1:
        w = 0.0
    else:
        w = -(z - math.copysign(l1, z)) / ((beta + math.sqrt(nn)) / alpha + l2)
    zn[j, 0] = z
    zn[j, 1] = nn
    zn[j, 2] = w
    return w


@njit(cache=True, nogil=True)
def _row(indptr, indices, data, i, d, augment, idx, val):
    if augment:
        return _xhat(indptr, indices, data, i, d, idx, val)
    n = 0
    for p in range(indptr[i], indptr[i + 1]):
        idx[n] = indices[p]
        val[n] = data[p]
        n += 1
    return n


@njit(cache=True, nogil=True)
def _eig_pred(V, lam, k, alpha, Sp, Si, Sd, idx, val, n, self_inter, d, lin, augment):
    """Linear part (CFM) + 1/2 x~' M x~ - self-interactions, M = alpha S + sum_k lam_k v_k v_k'."""
    acc = 0.0
    if not augment:
        acc = lin[d, 2]
        for p in range(n):
            acc += lin[idx[p], 2] * val[p]
    quad = 0.0
    if alpha != 0.0:
        for a in range(n):
            j = idx[a]
            for b in range(n):
                if a == b and not self_inter and j < d:
                    continue
                pos = _find(Sp, Si, j, idx[b])
                if pos >= 0:
                    quad += alpha * Sd[pos] * val[a] * val[b]
    for a in range(k):
        s = 0.0
        diag = 0.0
        for p in range(n):
            j = idx[p]
            c = V[a, j] * val[p]
            s += c
            if not self_inter and j < d:
                diag += c * c
        quad += lam[a] * (s * s - diag)
    return acc + 0.5 * quad


@njit(cache=True)
def trace_ftrl_batch(Xp, Xi, Xd, y, sw, order, loss, self_inter, augment, psd, dense, Sp, Si,
                     Sd, B, SB, GS, V, lam, lin, ist, fst, eta0, power_t, delta, alpha, beta, l1,
                     l2, eig_tol, eig_iter, m_keep, refresh, limit, out):
    """FTRL with linearized losses and lazy projection (dual averaging) on a trace-norm set.

    M_{t+1} = argmin_{M in K} <S_t, M> + ||M||_F^2 / (2 eta_t) = Proj_K(-eta_t S_t),
    eta_t = eta0 / t ** power_t, S_t the accumulated gradient. K is the trace-norm ball
    (``psd`` False, the CCFM: M = C on x^ = [x; 1], ``augment``) or {W >= 0, tr W <= delta}
    (``psd``, the convex FM of seed 004: M = W on x, with the bias and linear weights learned by
    per-coordinate FTRL-Proximal in ``lin``). The projection soft-thresholds eigenvalues of
    -eta_t S_t: by a full eigendecomposition when ``dense`` (small D), else from the Ritz pairs of
    the tracked subspace refined until their residuals are below ``eig_tol`` (exact up to that
    tolerance while the projected rank stays below the subspace size; rounds where it does not
    are counted in ``ist[4]``). The model is kept as eigenpairs: M = sum_k lam_k v_k v_k'.
    """
    D = B.shape[1]
    d = D - 1 if augment else D
    m_max = B.shape[0]
    maxn = 1
    for i in range(Xp.shape[0] - 1):
        maxn = max(maxn, Xp[i + 1] - Xp[i] + 1)
    idx = np.empty(maxn, dtype=np.int64)
    val = np.empty(maxn)
    cb = np.zeros(m_max)
    work = np.zeros(m_max)
    v = np.zeros(D)
    Sv = np.zeros(D)
    dummy = np.zeros((1, 1))
    Sdense = np.zeros((D, D)) if dense else np.zeros((1, 1))
    for rr in range(order.shape[0]):
        i = order[rr]
        n = _row(Xp, Xi, Xd, i, d, augment, idx, val)
        if sw[i] <= 0.0:
            out[i] = _eig_pred(V, lam, ist[1], fst[1], Sp, Si, Sd, idx, val, n, self_inter, d, lin,
                               augment)
            continue
        reps = max(1, int(math.ceil(sw[i])))
        scale = sw[i] / reps
        for rep in range(reps):
            pred = _eig_pred(V, lam, ist[1], fst[1], Sp, Si, Sd, idx, val, n, self_inter, d, lin,
                             augment)
            if rep == 0:
                out[i] = pred
            if not (abs(pred) <= limit):
                return i
            g = scale * loss_derivative(loss, pred, y[i])
            t = ist[0] + 1
            ist[0] = t
            if not augment:
                ftrl_coord(lin, d, g, alpha, beta, l1, l2)
                for p in range(n):
                    ftrl_coord(lin, idx[p], g * val[p], alpha, beta, l1, l2)
            coef = 0.5 * g
            nb = ist[2]
            if coef != 0.0:
                if not _sym_add(Sp, Si, Sd, idx, val, n, coef, self_inter, d):
                    return -2
            eta_t = eta0 / math.pow(t, power_t)
            # ||S_t||_tr <= sum_tau |l'_tau| / 2 ||G(x_tau)||_tr: while eta_t times this bound is
            # at most delta the projection is the identity and M = -eta_t S_t exactly
            gtr = 0.0
            for p in range(n):
                gtr += val[p] * val[p]
                if not self_inter and idx[p] < d:
                    gtr += val[p] * val[p]
            fst[2] += abs(coef) * gtr
            fst[1] = 0.0
            if not dense and eta_t * fst[2] <= delta and not psd:
                fst[1] = -eta_t
                ist[1] = 0
                continue
            if dense:
                sym_dense(Sp, Si, Sd, Sdense)
                for a in range(D):
                    for b in range(D):
                        Sdense[a, b] = -eta_t * Sdense[a, b]
                th, Q = np.linalg.eigh(Sdense)
                tau = ball_threshold(th, delta, psd)
                k = 0
                for a in range(D - 1, -1, -1):
                    if psd:
                        m = max(th[a] - tau, 0.0)
                    else:
                        m = max(abs(th[a]) - tau, 0.0)
                        m = m if th[a] >= 0.0 else -m
                    if m != 0.0 and k < V.shape[0]:
                        for j in range(D):
                            V[k, j] = Q[j, a]
                        lam[k] = m
                        k += 1
                ist[1] = k
                continue
            # -- tracked subspace: S B (rank-one), B S B', expansion with x~
            _gs_rank1(B, SB, GS, nb, idx, val, n, coef, self_inter, d, cb)
            ist[3] += 1
            if ist[3] >= refresh and nb > 0:
                nb = tracker_refresh(Sp, Si, Sd, dummy, 0, True, B, SB, GS, dummy, nb)
                _gs_rank1(B, SB, GS, nb, idx, val, n, 0.0, self_inter, d, cb)
                ist[3] = 0
            if nb >= m_max:
                th, Y = _ritz(GS, GS, nb, -1.0, 0.0)
                sel = _top_by_magnitude(th, m_keep, 1 if psd else 0)
                nb = _rotate(B, SB, GS, dummy, nb, 0, True, Y, sel, m_keep)
                _gs_rank1(B, SB, GS, nb, idx, val, n, 0.0, self_inter, d, cb)
            v[:] = 0.0
            for p in range(n):
                v[idx[p]] = val[p]
            _sym_rows(Sp, Si, Sd, idx, val, n, Sv)
            nb = _append(B, SB, GS, dummy, nb, 0, True, v, Sv, dummy[0], cb, True, work)
            ist[2] = nb
            if nb == 0:
                continue
            th, Y = _ritz(GS, GS, nb, -1.0, 0.0)
            it = 0
            while True:
                tau = ball_threshold(eta_t * th, delta, psd)
                # the worst residual among the Ritz pairs that survive the projection
                worst = -1.0
                wcol = -1
                for a in range(nb):
                    m = (th[a] * eta_t - tau) if psd else (abs(th[a]) * eta_t - tau)
                    if m <= 0.0:
                        continue
                    res = 0.0
                    for j in range(D):
                        s = 0.0
                        qj = 0.0
                        for b in range(nb):
                            s -= Y[b, a] * SB[b, j]
                            qj += Y[b, a] * B[b, j]
                        rj = s - th[a] * qj
                        res += rj * rj
                    rel = math.sqrt(res) / max(abs(th[a]), 1e-300)
                    if rel > worst:
                        worst = rel
                        wcol = a
                if wcol < 0 or worst <= eig_tol:
                    break
                if it >= eig_iter:
                    ist[4] += 1
                    break
                it += 1
                if nb >= m_max:
                    sel = _top_by_magnitude(th, m_keep, 1 if psd else 0)
                    nb = _rotate(B, SB, GS, dummy, nb, 0, True, Y, sel, m_keep)
                else:
                    for j in range(D):
                        s = 0.0
                        qj = 0.0
                        for b in range(nb):
                            s -= Y[b, wcol] * SB[b, j]
                            qj += Y[b, wcol] * B[b, j]
                        v[j] = s - th[wcol] * qj
                    _sym_matvec(Sp, Si, Sd, v, Sv)
                    nb2 = _append(B, SB, GS, dummy, nb, 0, True, v, Sv, dummy[0], cb, False, work)
                    if nb2 == nb:
                        break
                    nb = nb2
                th, Y = _ritz(GS, GS, nb, -1.0, 0.0)
            ist[2] = nb
            tau = ball_threshold(eta_t * th, delta, psd)
            k = 0
            for a in range(nb):
                if psd:
                    m = max(eta_t * th[a] - tau, 0.0)
                else:
                    m = max(abs(eta_t * th[a]) - tau, 0.0)
                    m = m if th[a] >= 0.0 else -m
                if m != 0.0:
                    V[k, :] = 0.0
                    for b in range(nb):
                        c = Y[b, a]
                        for j in range(D):
                            V[k, j] += c * B[b, j]
                    lam[k] = m
                    k += 1
            if k == nb:
                fst[0] += 1.0  # every Ritz pair survived: the projection may miss mass
            ist[1] = k
    return -1


@njit(cache=True, parallel=True)
def eig_predict(Xp, Xi, Xd, V, lam, k, alpha, Sp, Si, Sd, self_inter, augment, lin, out):
    """Predictions of a model kept as eigenpairs (the FTRL learners), rows in parallel."""
    n_rows = Xp.shape[0] - 1
    D = V.shape[1]
    d = D - 1 if augment else D
    maxn = 1
    for i in range(n_rows):
        maxn = max(maxn, Xp[i + 1] - Xp[i] + 1)
    for i in prange(n_rows):
        idx = np.empty(maxn, dtype=np.int64)
        val = np.empty(maxn)
        n = _row(Xp, Xi, Xd, i, d, augment, idx, val)
        out[i] = _eig_pred(V, lam, k, alpha, Sp, Si, Sd, idx, val, n, self_inter, d, lin, augment)
    return out
