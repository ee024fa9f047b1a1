"""Lanczos with full reorthogonalization for the eigenpair of largest |eigenvalue| of a small
dense symmetric matrix (the OCCFM eigen-step for small d), with the tridiagonal eigen-solve by
bisection on Sturm counts and inverse iteration.

The start vector is the previous eigenvector (a warm start) plus a small pseudo-random part,
drawn by :func:`lcg_fill` from a state fixed by the round number and the learner's
``random_state`` key (:func:`start_state`), so results are reproducible and independent of
threads.
"""

from collections import namedtuple

import numpy as np

from ._jit import njit
from .dense import dot, matvec

# Weight of the pseudo-random part of the start vector: the warm start usually lies near the
# new eigenvector, but after a conditional-gradient step the extreme eigenvalue often moves to
# another eigenvector, which the start vector must not miss.
PERTURB = 0.05

# H (D, D) the matrix, V (D, D) the Lanczos basis, a / b the tridiagonal, y / work its
# eigenvector and a buffer, w a length-D buffer.
LanczosWork = namedtuple("LanczosWork", "H V a b y work w")

# |entries| of H outside this range are rescaled before the iteration (and theta scaled back),
# so that squares of entries neither overflow nor underflow.
_SAFE_LO = 1e-150
_SAFE_HI = 1e150

_LCG_A = np.uint64(6364136223846793005)
_LCG_C = np.uint64(1442695040888963407)


@njit(cache=True, nogil=True)
def start_state(seed, key):
    """The generator state for round ``seed`` of a learner whose ``random_state`` key is
    ``key`` (0 for ``random_state=None``)."""
    s = np.uint64(seed) ^ (np.uint64(key) << np.uint64(32))
    return s * _LCG_A + _LCG_C


@njit(cache=True, nogil=True)
def lcg_fill(h, out):
    """Fill ``out`` with uniform values in [-0.5, 0.5) from the 64-bit LCG state h; returns the
    next state."""
    h = np.uint64(h)  # a Python int from a caller would be typed as a signed int64
    for j in range(out.shape[0]):
        h = h * _LCG_A + _LCG_C
        out[j] = (float(h >> np.uint64(11)) / 9007199254740992.0) - 0.5
    return h


@njit(cache=True, nogil=True)
def sturm_count(a, b, k, x):
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
def tridiag_bisect(a, b, k, index, n_steps):
    """Eigenvalue number ``index`` (ascending) of a k x k symmetric tridiagonal matrix,
    bracketed by bisection on Sturm counts within the Gershgorin interval (``n_steps``
    halvings)."""
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
        if sturm_count(a, b, k, mid) <= index:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@njit(cache=True, nogil=True)
def tridiag_vector(a, b, k, lam, y, work):
    """Unit eigenvector for the approximate eigenvalue ``lam`` by two steps of inverse
    iteration (Thomas algorithm); returns the Rayleigh quotient y'Ty."""
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
        nrm = np.sqrt(nrm)
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


@njit(cache=True, nogil=True)
def _form_h(S, K, eta, H):
    """H = -eta S - 2 K; returns max |H_jl|."""
    D = H.shape[0]
    hmax = 0.0
    for j in range(D):
        for l in range(D):
            H[j, l] = -eta * S[j, l] - 2.0 * K[j, l]
            hmax = max(hmax, abs(H[j, l]))
    return hmax


@njit(cache=True, nogil=True)
def _reorthogonalize(V, k, w):
    """w -= sum_{i <= k} (V_i . w) V_i."""
    D = w.shape[0]
    for i in range(k + 1):
        c = dot(V[i], w, D)
        for j in range(D):
            w[j] -= c * V[i, j]


@njit(cache=True, nogil=True)
def lanczos_top(S, K, eta, q0, h, tol, lw, q):
    """Eigenpair of largest |eigenvalue| of H = -eta S - 2 K (dense, D x D) by Lanczos with
    full reorthogonalization from q0 plus ``PERTURB`` times a pseudo-random vector drawn from
    the generator state ``h`` (:func:`start_state`). Stops when the Ritz residual beta |y_k| is
    at most tol |theta| (checked at k = 6, 10, 14, ...), or at k = D (then exact up to
    rounding); an invariant subspace found early is left with a fresh start vector orthogonal
    to it. Writes the unit eigenvector to q and returns theta."""
    H, V, a, b, y, work, w = lw.H, lw.V, lw.a, lw.b, lw.y, lw.work, lw.w
    D = q0.shape[0]
    hmax = _form_h(S, K, eta, H)
    if hmax == 0.0:  # H = 0: every point of the ball is a linear minimizer (no move)
        q[:] = q0
        return 0.0
    unscale = 1.0
    if hmax < _SAFE_LO or hmax > _SAFE_HI:
        unscale = hmax
        H[:, :] /= hmax
    h = lcg_fill(h, w)
    rn = PERTURB / np.sqrt(np.sum(w * w))
    nrm = 0.0
    for j in range(D):
        V[0, j] = q0[j] + rn * w[j]
        nrm += V[0, j] * V[0, j]
    nrm = np.sqrt(nrm)
    for j in range(D):
        V[0, j] /= nrm
    theta = 0.0
    kk = 0
    for k in range(D):
        matvec(H, V[k], D, w)
        a[k] = dot(V[k], w, D)
        _reorthogonalize(V, k, w)  # full reorthogonalization (includes the three-term recurrence)
        beta = np.sqrt(np.sum(w * w))
        kk = k + 1
        # the tridiagonal eigen-solve costs O(k) per bisection step: check at k = 6, 10, 14, ...
        check = kk == D or (kk >= 6 and kk % 4 == 2) or beta <= 1e-12 * max(abs(a[k]), 1e-300)
        if check:
            # both ends to ~1e-7 by bisection; the vector of the larger |theta| by inverse
            # iteration, its Rayleigh quotient as theta
            th_hi = tridiag_bisect(a, b, kk, kk - 1, 24)
            th_lo = tridiag_bisect(a, b, kk, 0, 24)
            theta = tridiag_vector(a, b, kk, th_hi if abs(th_hi) >= abs(th_lo) else th_lo,
                                   y, work)
            if kk == D or beta * abs(y[kk - 1]) <= tol * abs(theta):
                break
        if beta <= 1e-12 * max(abs(theta), abs(a[k]), 1e-300):
            # invariant subspace: continue from a pseudo-random vector orthogonal to it
            h = lcg_fill(h, w)
            _reorthogonalize(V, k, w)
            _reorthogonalize(V, k, w)
            V[k + 1, :] = w / np.sqrt(np.sum(w * w))
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
    q /= np.sqrt(np.sum(q * q))
    return theta * unscale
