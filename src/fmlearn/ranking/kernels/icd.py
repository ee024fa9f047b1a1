"""Implicit coordinate descent (iCD) for the classic FM on implicit feedback (Bayer, He,
Kanagal & Rendle, WWW 2017): one side's sweep of exact coordinate minimisations of

    L = sum_{(c, i) in S} a_ci (f(c, i) - 1)^2 + a0 sum_{(c, i) not in S} f(c, i)^2
        + reg_bias m_0 w0^2 + sum_l m_l (reg_linear w_l^2 + reg_pairwise |v_l|^2),

the weighted squared loss over *every* (context, item) pair (Hu, Koren & Volinsky 2008: the
positives S of weight a_ci = sample weight, every other pair of weight a0 = negative_weight),
with no sampling; m_l is the total weight of the pairs holding feature l (each counted with
x_l^2; m_0 of all pairs): penalties scaled by frequency, as SGD's per-step penalties are, and
independent of the data's size (Rendle et al. 2022 scale iALS's penalty so).

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
f(c, i) += delta x (h_c + q_f(i)). A sweep of one side costs O(k (nnz of its rows + events)
+ k^2 (rows + other side's rows)): the events enter through per-row sums updated in O(1) per
step (see :func:`icd_side`); the item side is the same computation with the roles swapped
(one compiled function serves both).

Both L' and L'' are computed exactly, so every coordinate step lowers L or leaves it: the
objective never increases from sweep to sweep (tested against a brute-force all-pairs loss).
"""

from collections import namedtuple

import numpy as np

from ...kernels._jit import njit
from .rows import rows_part_q

Side = namedtuple("Side", [
    "f_ptr", "f_rows", "f_vals", "r_indptr", "r_indices", "r_data",
    "ev_ptr", "ev_other", "ev_alpha", "bias", "mass"])
Side.__doc__ = """One side (contexts or items) of the iCD problem: the transpose of its rows
(``f_ptr`` (d + 1,), ``f_rows``, ``f_vals``: the rows holding feature l and their values),
its CSR rows (``r_indptr``, ``r_indices``, ``r_data``), its rows' events (``ev_ptr`` over its
rows; ``ev_other`` the other side's row, ``ev_alpha`` its weight a), ``bias``: whether
this side holds w0, and ``mass`` (d,): every feature's total pair weight m_l (both sides'
features; the penalties are ``reg m_l theta^2``)."""

Cache = namedtuple("Cache", ["phi", "Q", "T", "R", "A", "yhat"])
Cache.__doc__ = """Per-row caches of one side: ``phi`` (n,), ``Q`` (k, n) factor-major,
``T`` (n,) the row's sum of scores over the other side, ``R`` (n,) (J q)_f, ``A`` (n,) the sum
of a - a0 over its events; ``yhat`` (n_events,) the events' scores f(c, i) in this side's
order. Each side recomputes its scores from the model when its sweep starts, so the two sides
never share a cache."""

Other = namedtuple("Other", ["phi", "Q"])
Other.__doc__ = """The other side's ``phi`` (n_o,) and ``Q`` (k, n_o), fixed during a sweep."""

ICDConfig = namedtuple("ICDConfig", ["alpha0", "reg_bias", "reg_linear", "reg_pairwise",
                                     "mass0"])
ICDConfig.__doc__ = """a0 (the weight of a pair that is not an event), the L2 penalties and
``mass0``, the total weight of all pairs (w0's penalty scale)."""


# Q is factor-major (k, n): the loops below run over the rows innermost, streaming through
# one factor's row of Q at a time (a row-by-row loop over Q[:, r] touches k cache lines per
# row, which dominated a sweep on 20M events).
@njit(cache=True, nogil=True)
def aggregates(other):
    """(N, P, P2, Qs, Qp, J) of the other side: count, sum of phi, sum of phi^2, sum of q,
    sum of phi q, sum of q q^T (each summed over the rows in order)."""
    Q, phi = other.Q, other.phi
    k, n = Q.shape
    P = 0.0
    P2 = 0.0
    for o in range(n):
        P += phi[o]
        P2 += phi[o] * phi[o]
    Qs = np.zeros(k)
    Qp = np.zeros(k)
    J = np.zeros((k, k))
    for f in range(k):
        s = 0.0
        sp = 0.0
        for o in range(n):
            s += Q[f, o]
            sp += phi[o] * Q[f, o]
        Qs[f] = s
        Qp[f] = sp
        for g in range(f, k):
            t = 0.0
            for o in range(n):
                t += Q[f, o] * Q[g, o]
            J[f, g] = t
            J[g, f] = t
    return float(n), P, P2, Qs, Qp, J


@njit(cache=True, nogil=True)
def refresh(side, cache, other, model, alpha0):
    """Recompute the side's phi and Q from the model, its events' scores and T, A."""
    k = model.V.shape[1]
    phi, Q, T, yhat = cache.phi, cache.Q, cache.T, cache.yhat
    ev_ptr, ev_other = side.ev_ptr, side.ev_other
    oQ, ophi = other.Q, other.phi
    rows_part_q(side.r_indptr, side.r_indices, side.r_data, model.w, model.V, phi, Q)
    n = phi.shape[0]
    if side.bias:
        for r in range(n):
            phi[r] += model.scal[0]
    N, P, P2, Qs, Qp, J = aggregates(other)
    for r in range(n):
        T[r] = N * phi[r] + P
        a = 0.0
        for p in range(ev_ptr[r], ev_ptr[r + 1]):
            yhat[p] = phi[r] + ophi[ev_other[p]]
            a += side.ev_alpha[p] - alpha0
        cache.A[r] = a
    for f in range(k):
        Qsf = Qs[f]
        for r in range(n):
            qf = Q[f, r]
            T[r] += qf * Qsf
            for p in range(ev_ptr[r], ev_ptr[r + 1]):
                yhat[p] += qf * oQ[f, ev_other[p]]
    return N, P, P2, Qs, Qp, J


@njit(cache=True)
def icd_side(side, cache, other, model, cfg):
    """One sweep over this side's parameters (w0 if ``side.bias``, then w_l, then v_lf
    factor by factor), each set to the exact minimiser of L with everything else fixed.

    The events' part of a coordinate's derivatives needs, per row r, only sums over its
    events: with e_p = a_p (f_p - 1) - a0 f_p and z_p = h_r + q_f(other_p),

        sum_p e_p z_p = h_r E_r + C_r,                E_r = sum_p e_p, C_r = sum_p e_p q_f(o_p),
        sum_p (a_p - a0) z_p^2 = h_r^2 A_r + 2 h_r B1_r + B2_r,

    B1_r = sum_p (a_p - a0) q_f(o_p), B2_r = sum_p (a_p - a0) q_f(o_p)^2. A step delta on
    v_lf moves every score of row r by dx (h_r + q_f(o_p)) (dx = delta x_rl), hence E_r and C_r
    by dx (h_r A_r + B1_r) and dx (h_r B1_r + B2_r): O(1) per row. The scores themselves are
    brought up to date once per factor (the row's pending shift S_r = sum dx h_r and slope
    D_r = sum dx along q_{f-1}), in the pass that computes the next factor's C, B1, B2: one
    pass over the events per factor, whatever the number of features in a row.
    """
    w, V = model.w, model.V
    k = V.shape[1]
    a0 = cfg.alpha0
    N, P, P2, Qs, Qp, J = refresh(side, cache, other, model, a0)
    yhat = cache.yhat
    ev_ptr, ev_other, ev_alpha = side.ev_ptr, side.ev_other, side.ev_alpha
    f_ptr, f_rows, f_vals = side.f_ptr, side.f_rows, side.f_vals
    oQ = other.Q
    phi, Q, T, R, A = cache.phi, cache.Q, cache.T, cache.R, cache.A
    mass = side.mass
    n = phi.shape[0]
    d = f_ptr.shape[0] - 1
    E = np.empty(n)
    C = np.empty(n)
    B1 = np.empty(n)
    B2 = np.empty(n)
    shift = np.zeros(n)
    slope = np.zeros(n)
    for r in range(n):
        e = 0.0
        for p in range(ev_ptr[r], ev_ptr[r + 1]):
            y = yhat[p]
            e += (ev_alpha[p] - a0) * y - ev_alpha[p]
        E[r] = e
    if side.bias:
        G = 0.0
        H = 0.0
        for r in range(n):
            G += a0 * T[r] + E[r]
            H += a0 * N + A[r]
        w0 = model.scal[0]
        lam = cfg.reg_bias * cfg.mass0
        den = H + lam
        if den > 0.0:
            delta = -(G + lam * w0) / den
            model.scal[0] = w0 + delta
            for r in range(n):
                phi[r] += delta
                T[r] += N * delta
                E[r] += delta * A[r]
                shift[r] += delta
    for l in range(d):
        if f_ptr[l] == f_ptr[l + 1]:
            continue
        G = 0.0
        H = 0.0
        for p in range(f_ptr[l], f_ptr[l + 1]):
            r = f_rows[p]
            x = f_vals[p]
            G += x * (a0 * T[r] + E[r])
            H += x * x * (a0 * N + A[r])
        lam = cfg.reg_linear * mass[l]
        den = H + lam
        if not den > 0.0:
            continue
        delta = -(G + lam * w[l]) / den
        w[l] += delta
        for p in range(f_ptr[l], f_ptr[l + 1]):
            r = f_rows[p]
            dx = delta * f_vals[p]
            phi[r] += dx
            T[r] += N * dx
            E[r] += dx * A[r]
            shift[r] += dx
    for f in range(k):
        Jff = J[f, f]
        Qsf = Qs[f]
        Qpf = Qp[f]
        for r in range(n):  # R = (J Q)_f, summed over g in order, rows innermost
            R[r] = 0.0
        for g in range(k):
            Jfg = J[f, g]
            for r in range(n):
                R[r] += Jfg * Q[g, r]
        # bring the scores up to date (the previous factor's steps and the linear ones) and
        # gather this factor's per-row sums
        for r in range(n):
            sh = shift[r]
            sl = slope[r]
            fp = f - 1 if f > 0 else 0  # slope is 0 before the first factor
            # two interleaved sets of sums: the additions' latency bounds this loop
            c = 0.0
            b1 = 0.0
            b2 = 0.0
            c_ = 0.0
            b1_ = 0.0
            b2_ = 0.0
            p = ev_ptr[r]
            end = ev_ptr[r + 1]
            while p + 1 < end:
                o = ev_other[p]
                y = yhat[p] + sh + sl * oQ[fp, o]
                yhat[p] = y
                am = ev_alpha[p] - a0
                qo = oQ[f, o]
                c += (am * y - ev_alpha[p]) * qo
                b1 += am * qo
                b2 += am * qo * qo
                o = ev_other[p + 1]
                y = yhat[p + 1] + sh + sl * oQ[fp, o]
                yhat[p + 1] = y
                am = ev_alpha[p + 1] - a0
                qo = oQ[f, o]
                c_ += (am * y - ev_alpha[p + 1]) * qo
                b1_ += am * qo
                b2_ += am * qo * qo
                p += 2
            if p < end:
                o = ev_other[p]
                y = yhat[p] + sh + sl * oQ[fp, o]
                yhat[p] = y
                am = ev_alpha[p] - a0
                qo = oQ[f, o]
                c += (am * y - ev_alpha[p]) * qo
                b1 += am * qo
                b2 += am * qo * qo
            C[r] = c + c_
            B1[r] = b1 + b1_
            B2[r] = b2 + b2_
            shift[r] = 0.0
            slope[r] = 0.0
        for l in range(d):
            if f_ptr[l] == f_ptr[l + 1]:
                continue
            v = V[l, f]
            G = 0.0
            H = 0.0
            for p in range(f_ptr[l], f_ptr[l + 1]):
                r = f_rows[p]
                x = f_vals[p]
                h = Q[f, r] - v * x
                g_all = h * T[r] + phi[r] * Qsf + Qpf + R[r]
                h_all = N * h * h + 2.0 * h * Qsf + Jff
                g_ev = h * E[r] + C[r]
                h_ev = h * h * A[r] + 2.0 * h * B1[r] + B2[r]
                G += x * (a0 * g_all + g_ev)
                H += x * x * (a0 * h_all + h_ev)
            lam = cfg.reg_pairwise * mass[l]
            den = H + lam
            if not den > 0.0:
                continue
            delta = -(G + lam * v) / den
            V[l, f] = v + delta
            for p in range(f_ptr[l], f_ptr[l + 1]):
                r = f_rows[p]
                x = f_vals[p]
                h = Q[f, r] - v * x
                dx = delta * x
                phi[r] += dx * h
                T[r] += dx * (N * h + Qsf)
                R[r] += dx * Jff
                Q[f, r] += dx
                E[r] += dx * (h * A[r] + B1[r])
                C[r] += dx * (h * B1[r] + B2[r])
                shift[r] += dx * h
                slope[r] += dx
    # the last factor's pending moves (the objective and the other side read the model, and
    # recompute the scores, but keep the cache exact)
    for r in range(n):
        sh = shift[r]
        sl = slope[r]
        if sh != 0.0 or sl != 0.0:
            for p in range(ev_ptr[r], ev_ptr[r + 1]):
                yhat[p] += sh + sl * oQ[k - 1, ev_other[p]]


@njit(cache=True)
def icd_objective(side, cache, other, model, cfg):
    """L at the current model, from this side's point of view (its caches refreshed)."""
    w, V = model.w, model.V
    k = V.shape[1]
    a0 = cfg.alpha0
    N, P, P2, Qs, Qp, J = refresh(side, cache, other, model, a0)
    yhat, phi, Q = cache.yhat, cache.phi, cache.Q
    n = phi.shape[0]
    acc = np.empty(n)  # the all-pairs sum of row r, accumulated factor by factor
    for r in range(n):
        ph = phi[r]
        acc[r] = N * ph * ph + P2 + 2.0 * ph * P
    jq = np.empty(n)
    for f in range(k):
        for r in range(n):
            jq[r] = 0.0
        for g in range(k):
            Jfg = J[f, g]
            for r in range(n):
                jq[r] += Jfg * Q[g, r]
        Qsf = Qs[f]
        Qpf = Qp[f]
        for r in range(n):
            qf = Q[f, r]
            acc[r] += 2.0 * qf * (phi[r] * Qsf + Qpf) + qf * jq[r]
    total = 0.0
    for r in range(n):
        total += a0 * acc[r]
        for p in range(side.ev_ptr[r], side.ev_ptr[r + 1]):
            y = yhat[p]
            total += side.ev_alpha[p] * (y - 1.0) ** 2 - a0 * y * y
    reg = cfg.reg_bias * cfg.mass0 * model.scal[0] ** 2
    for j in range(w.shape[0]):
        m = side.mass[j]
        reg += cfg.reg_linear * m * w[j] * w[j]
        for f in range(k):
            reg += cfg.reg_pairwise * m * V[j, f] * V[j, f]
    return total + reg
