"""Implicit coordinate descent (iCD) for the classic FM on implicit feedback (Bayer, He,
Kanagal & Rendle, WWW 2017): one side's sweep of exact coordinate minimisations of

    L = sum_{(c, i) in S} a_ci (f(c, i) - 1)^2 + a0 sum_{(c, i) not in S} f(c, i)^2
        + reg_bias w0^2 + reg_linear |w|^2 + reg_pairwise |V|^2,

the weighted squared loss over *every* (context, item) pair (Hu, Koren & Volinsky 2008: the
positives S of weight a_ci = sample weight, every other pair of weight a0 = negative_weight),
with no sampling.

With the split f(c, i) = phi(c) + phi(i) + <q(c), q(i)> (:mod:`.rows`; the context side's phi
holds w0) the model is linear in each parameter theta, so L is a parabola in theta and one
Newton step minimises it exactly. Writing L = sum_S [a (f - 1)^2 - a0 f^2] + a0 sum_{all} f^2,
the all-pairs part of the derivative of a context-side parameter needs only the item side's
aggregates N = #items, P = sum phi(i), Qs = sum q(i), Qp = sum phi(i) q(i), J = sum q(i) q(i)^T
(Bayer et al. 2017, Sec. 4: the Gramian trick of implicit ALS). For v_lf (context feature l,
factor f), with h_c = q_f(c) - v_lf x_cl (unchanged by the step) and d f(c, i) / d v_lf =
x_cl (h_c + q_f(i)):

    sum_i f(c, i) df/dv = x_cl (h_c T_c + phi(c) Qs_f + Qp_f + R_c),
    T_c = sum_i f(c, i) = N phi(c) + P + <q(c), Qs>,   R_c = (J q(c))_f,
    sum_i (df/dv)^2 = x_cl^2 (N h_c^2 + 2 h_c Qs_f + J_ff),

and after the step delta every cache moves in O(1) per context: phi(c) += delta x h_c,
T_c += delta x (N h_c + Qs_f), R_c += delta x J_ff, q_f(c) += delta x; the positives' scores
f(c, i) += delta x (h_c + q_f(i)). A sweep of one side costs O(k (nnz of its rows + the
events' nnz) + k^2 (rows + other side's rows)); the item side is the same computation with the
roles swapped (one compiled function serves both).

Both L' and L'' are computed exactly, so every coordinate step lowers L or leaves it: the
objective never increases from sweep to sweep (tested against a brute-force all-pairs loss).
"""

from collections import namedtuple

import numpy as np
from numba import njit

from .rows import rows_part_q

Side = namedtuple("Side", [
    "f_ptr", "f_rows", "f_vals", "r_indptr", "r_indices", "r_data",
    "ev_ptr", "ev_other", "ev_index", "ev_alpha", "bias"])
Side.__doc__ = """One side (contexts or items) of the iCD problem: the transpose of its rows
(``f_ptr`` (d + 1,), ``f_rows``, ``f_vals``: the rows holding feature l and their values),
its CSR rows (``r_indptr``, ``r_indices``, ``r_data``), its rows' events (``ev_ptr`` over its
rows; ``ev_other`` the other side's row, ``ev_index`` the event's slot in the shared score
cache, ``ev_alpha`` its weight a), and ``bias``: whether this side holds w0."""

Cache = namedtuple("Cache", ["phi", "Q", "T", "R", "A"])
Cache.__doc__ = """Per-row caches of one side: ``phi`` (n,), ``Q`` (k, n) factor-major,
``T`` (n,) the row's sum of scores over the other side, ``R`` (n,) (J q)_f, ``A`` (n,) the sum
of a - a0 over its events."""

Other = namedtuple("Other", ["phi", "Q"])
Other.__doc__ = """The other side's ``phi`` (n_o,) and ``Q`` (k, n_o), fixed during a sweep."""

ICDConfig = namedtuple("ICDConfig", ["alpha0", "reg_bias", "reg_linear", "reg_pairwise"])
ICDConfig.__doc__ = """a0 (the weight of a pair that is not an event) and the L2 penalties."""


@njit(cache=True, nogil=True)
def aggregates(other):
    """(N, P, P2, Qs, Qp, J) of the other side: count, sum of phi, sum of phi^2, sum of q,
    sum of phi q, sum of q q^T (fixed summation order)."""
    k, n = other.Q.shape
    P = 0.0
    P2 = 0.0
    Qs = np.zeros(k)
    Qp = np.zeros(k)
    J = np.zeros((k, k))
    for o in range(n):
        ph = other.phi[o]
        P += ph
        P2 += ph * ph
        for f in range(k):
            qf = other.Q[f, o]
            Qs[f] += qf
            Qp[f] += ph * qf
            for g in range(f, k):
                J[f, g] += qf * other.Q[g, o]
    for f in range(k):
        for g in range(f):
            J[f, g] = J[g, f]
    return float(n), P, P2, Qs, Qp, J


@njit(cache=True, nogil=True)
def refresh(side, cache, other, model, yhat, alpha0):
    """Recompute the side's phi and Q from the model, its events' scores and T, A."""
    k = model.V.shape[1]
    rows_part_q(side.r_indptr, side.r_indices, side.r_data, model.w, model.V, cache.phi,
                cache.Q)
    n = cache.phi.shape[0]
    if side.bias:
        for r in range(n):
            cache.phi[r] += model.scal[0]
    N, P, P2, Qs, Qp, J = aggregates(other)
    for r in range(n):
        t = N * cache.phi[r] + P
        for f in range(k):
            t += cache.Q[f, r] * Qs[f]
        cache.T[r] = t
        a = 0.0
        for p in range(side.ev_ptr[r], side.ev_ptr[r + 1]):
            o = side.ev_other[p]
            s = cache.phi[r] + other.phi[o]
            for f in range(k):
                s += cache.Q[f, r] * other.Q[f, o]
            yhat[side.ev_index[p]] = s
            a += side.ev_alpha[p] - alpha0
        cache.A[r] = a
    return N, P, P2, Qs, Qp, J


@njit(cache=True, nogil=True)
def _residual_sum(side, r, yhat, alpha0):
    """sum over the events of row r of a (f - 1) - a0 f."""
    e = 0.0
    for p in range(side.ev_ptr[r], side.ev_ptr[r + 1]):
        y = yhat[side.ev_index[p]]
        e += side.ev_alpha[p] * (y - 1.0) - alpha0 * y
    return e


@njit(cache=True)
def icd_side(side, cache, other, model, yhat, cfg):
    """One sweep over this side's parameters (w0 if ``side.bias``, then w_l, then v_lf
    factor by factor), each set to the exact minimiser of L with everything else fixed."""
    w, V = model.w, model.V
    k = V.shape[1]
    a0 = cfg.alpha0
    N, P, P2, Qs, Qp, J = refresh(side, cache, other, model, yhat, a0)
    n = cache.phi.shape[0]
    d = side.f_ptr.shape[0] - 1
    if side.bias:
        G = 0.0
        H = 0.0
        for r in range(n):
            G += a0 * cache.T[r] + _residual_sum(side, r, yhat, a0)
            H += a0 * N + cache.A[r]
        w0 = model.scal[0]
        den = H + cfg.reg_bias
        if den > 0.0:
            delta = -(G + cfg.reg_bias * w0) / den
            model.scal[0] = w0 + delta
            for r in range(n):
                cache.phi[r] += delta
                cache.T[r] += N * delta
            for p in range(side.ev_index.shape[0]):
                yhat[side.ev_index[p]] += delta
    for l in range(d):
        if side.f_ptr[l] == side.f_ptr[l + 1]:
            continue
        G = 0.0
        H = 0.0
        for p in range(side.f_ptr[l], side.f_ptr[l + 1]):
            r = side.f_rows[p]
            x = side.f_vals[p]
            G += x * (a0 * cache.T[r] + _residual_sum(side, r, yhat, a0))
            H += x * x * (a0 * N + cache.A[r])
        den = H + cfg.reg_linear
        if not den > 0.0:
            continue
        delta = -(G + cfg.reg_linear * w[l]) / den
        w[l] += delta
        for p in range(side.f_ptr[l], side.f_ptr[l + 1]):
            r = side.f_rows[p]
            dx = delta * side.f_vals[p]
            cache.phi[r] += dx
            cache.T[r] += N * dx
            for q in range(side.ev_ptr[r], side.ev_ptr[r + 1]):
                yhat[side.ev_index[q]] += dx
    for f in range(k):
        Jff = J[f, f]
        for r in range(n):
            s = 0.0
            for g in range(k):
                s += J[f, g] * cache.Q[g, r]
            cache.R[r] = s
        for l in range(d):
            if side.f_ptr[l] == side.f_ptr[l + 1]:
                continue
            v = V[l, f]
            G = 0.0
            H = 0.0
            for p in range(side.f_ptr[l], side.f_ptr[l + 1]):
                r = side.f_rows[p]
                x = side.f_vals[p]
                h = cache.Q[f, r] - v * x
                g_all = (h * cache.T[r] + cache.phi[r] * Qs[f] + Qp[f] + cache.R[r])
                h_all = N * h * h + 2.0 * h * Qs[f] + Jff
                g_ev = 0.0
                h_ev = 0.0
                for q in range(side.ev_ptr[r], side.ev_ptr[r + 1]):
                    y = yhat[side.ev_index[q]]
                    a = side.ev_alpha[q]
                    z = h + other.Q[f, side.ev_other[q]]
                    g_ev += (a * (y - 1.0) - a0 * y) * z
                    h_ev += (a - a0) * z * z
                G += x * (a0 * g_all + g_ev)
                H += x * x * (a0 * h_all + h_ev)
            den = H + cfg.reg_pairwise
            if not den > 0.0:
                continue
            delta = -(G + cfg.reg_pairwise * v) / den
            V[l, f] = v + delta
            for p in range(side.f_ptr[l], side.f_ptr[l + 1]):
                r = side.f_rows[p]
                x = side.f_vals[p]
                h = cache.Q[f, r] - v * x
                dx = delta * x
                cache.phi[r] += dx * h
                cache.T[r] += dx * (N * h + Qs[f])
                cache.R[r] += dx * Jff
                cache.Q[f, r] += dx
                for q in range(side.ev_ptr[r], side.ev_ptr[r + 1]):
                    yhat[side.ev_index[q]] += dx * (h + other.Q[f, side.ev_other[q]])


@njit(cache=True)
def icd_objective(side, cache, other, model, yhat, cfg):
    """L at the current model, from this side's point of view (its caches refreshed)."""
    w, V = model.w, model.V
    k = V.shape[1]
    a0 = cfg.alpha0
    N, P, P2, Qs, Qp, J = refresh(side, cache, other, model, yhat, a0)
    n = cache.phi.shape[0]
    total = 0.0
    for r in range(n):
        ph = cache.phi[r]
        s = N * ph * ph + P2 + 2.0 * ph * P
        for f in range(k):
            qf = cache.Q[f, r]
            s += 2.0 * qf * (ph * Qs[f] + Qp[f])
            t = 0.0
            for g in range(k):
                t += J[f, g] * cache.Q[g, r]
            s += qf * t
        total += a0 * s
        for p in range(side.ev_ptr[r], side.ev_ptr[r + 1]):
            y = yhat[side.ev_index[p]]
            total += side.ev_alpha[p] * (y - 1.0) ** 2 - a0 * y * y
    reg = cfg.reg_bias * model.scal[0] ** 2
    for j in range(w.shape[0]):
        reg += cfg.reg_linear * w[j] * w[j]
        for f in range(k):
            reg += cfg.reg_pairwise * V[j, f] * V[j, f]
    return total + reg
