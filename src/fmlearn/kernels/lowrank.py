"""The CCFM's model matrix C (Zhang et al. 2018, §3.1) kept as C = U[:r]' K[:r, :r] U[:r]: an
orthonormal basis ``U`` of at most ``r_max`` rows of length D = d + 1 and a small symmetric core
``K``; or, with ``ident``, C = K itself (the identity basis: the dense form for small d).

Here: the prediction 1/2 x^' C x^ (minus the self-interactions when excluded), compression of
the basis to its largest-|eigenvalue| directions, the exact projection of the core onto the
trace-norm ball (or the PSD trace simplex), and extending the basis so that a row's G(x) lies in
its span. Every change that drops eigenvalues adds their trace mass to ``dropped`` (a bound on
the change of C in trace norm; the iterate stays in the ball because eigenvalues are only
removed).
"""

from collections import namedtuple

import numpy as np
from numba import prange

from ._jit import njit
from .dense import combine_rows
from .steps import load_xhat

# U (r_max, D) or (0, D) with ident; K (r_max, r_max) or (D, D); r: 1-array, the rank in use;
# dropped: 1-array, the trace mass dropped by compressions.
LowRank = namedtuple("LowRank", "U K r ident dropped")


@njit(cache=True, nogil=True)
def coords_sparse(U, r, ident, idx, val, n, z):
    """z = U x (coordinates of a sparse vector in the basis)."""
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
def lr_predict(C, idx, val, n, self_inter, d, z, w):
    """1/2 x^' C x^ minus the self-interactions when excluded; leaves z = U x^, w = K z."""
    U, K, r = C.U, C.K, C.r[0]
    if C.ident:
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
    coords_sparse(U, r, False, idx, val, n, z)
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

    Returns ``(new_r, dropped trace mass)``."""
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
    combine_rows(Q, order, r, U, D, Unew)
    combine_rows(Q, order, r, UB, nb, UBnew)
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


@njit(cache=True, nogil=True)
def extend_coordinates(C, idx, n, keep, v, work):
    """Extend the basis with e_j (j in the row) so that G(x) lies in span(U); returns the new r
    (-1 if the row is longer than the cap: the caller checks this beforehand).

    Room for all n directions is made first (compressing to ``keep`` <= r_max - n), so that a
    coordinate already in span(U) cannot be lost by a later compression."""
    U, K = C.U, C.K
    r = C.r[0]
    D = U.shape[1]
    r_max = U.shape[0]
    if n > r_max:
        return -1
    if r + n > r_max:
        r, dropped = lr_compress(U, K, r, min(keep, r_max - n), work, 0)
        C.dropped[0] += dropped
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
        rho = np.sqrt(np.sum(v * v))
        if rho <= 1e-9:
            continue
        for l in range(D):
            U[r, l] = v[l] / rho
        for k in range(r + 1):
            K[r, k] = 0.0
            K[k, r] = 0.0
        r += 1
    return r


@njit(cache=True, nogil=True)
def predict_step(state, cfg, work, rows, i):
    """The ``predict`` of the learners on C (OCCFM, CCFM-OGD/PA): load x^_i into the row
    buffers ``work.idx``/``work.val`` (its length in ``work.n``) and return 1/2 x^' C x^
    (leaves z = U x^ in ``work.z``)."""
    d = state.C.U.shape[1] - 1
    n = load_xhat(rows.indptr, rows.indices, rows.data, i, d, work.idx, work.val)
    work.n[0] = n
    return lr_predict(state.C, work.idx, work.val, n, cfg.self_inter, d, work.z, work.w)


@njit(cache=True, parallel=True)
def lr_predict_rows(Xp, Xi, Xd, C, self_inter, out):
    """Predictions of a CCFM for every row of a CSR matrix, rows in parallel (each row's result
    is independent of the thread count; a flat record such as :class:`LowRank` can enter a
    parallel region, a record nesting another cannot)."""
    n_rows = Xp.shape[0] - 1
    d = C.U.shape[1] - 1
    maxn = 1
    for i in range(n_rows):
        maxn = max(maxn, Xp[i + 1] - Xp[i] + 1)
    m = d + 1 if C.ident else max(C.r[0], 1)
    for i in prange(n_rows):
        idx = np.empty(maxn, dtype=np.int64)
        val = np.empty(maxn)
        z = np.empty(m)
        w = np.empty(m)
        n = load_xhat(Xp, Xi, Xd, i, d, idx, val)
        out[i] = lr_predict(C, idx, val, n, self_inter, d, z, w)
    return out
