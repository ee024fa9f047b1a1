"""OCCFM, online conditional gradient on the compact convexified FM (Zhang et al. 2018,, Algorithm
2): one round's update, run by :func:`fmlearn.kernels.steps.run_rows`.

Round t (1-based, counted over the learner's life in ``state.t``):

1. predict y^_t = 1/2 x^_t' C_t x^_t (:func:`fmlearn.kernels.lowrank.predict_step`);
2. S_t = S_{t-1} + l'(y^_t, y_t) 1/2 G(x_t), so grad F_t(C) = eta S_t + 2 (C - C_1), C_1 = 0;
3. (theta, q) = the eigenpair of H_t = -eta S_t - 2 C_t of largest |theta| (Zhang et al. 2018, Thm.
1 and
   Lemma 5: the top singular pair of a symmetric matrix is (|theta|, sign(theta) q, q)): for
   small D by Lanczos on the dense H; otherwise the Ritz pair of the tracked subspace expanded
   with x^_t, refined while its residual ||H q - theta q|| exceeds eig_tol |theta| by up to
   ``eig_max_iter`` Davidson steps (one product with S each);
4. C_{t+1} = (1 - gamma_t) C_t + gamma_t delta sign(theta) q q',
   gamma_t = min(1, (t + gamma_offset) ** -gamma_power). When H_t = 0 every point of the ball
   solves the linear step and C_t itself is taken (no move).

Deviations from the printed algorithm (Zhang et al. 2018, Alg. 2 line 4, proof of Thm. 1): the
printed gradient "f_tau(C_tau) x^_t x^_t'" is read as grad f_tau(C_tau) = l'_tau 1/2 G(x_tau), and
the sum runs to tau = t (the round's gradient is known when C_{t+1} is chosen), which also defines
the first linear step (at t = 1 the printed sum is empty and H_1 = 0).
"""

import math
from collections import namedtuple

import numpy as np

from ._jit import njit
from .eigtrack import (
    append,
    apply_c,
    argmax_abs,
    combine,
    gram_c,
    gs_rank1,
    orth_q,
    refresh,
    ritz,
    rotate,
    top_by_magnitude,
)
from .lanczos import lanczos_top, start_state
from .losses import loss_derivative
from .lowrank import lr_compress, predict_step
from .steps import BAD_STEP, NO_ROOM, OK, run_rows
from .symacc import sacc_add, sacc_matvec, sacc_rows

# Relative Ritz residual at which the dense (small-D) Lanczos eigen-step stops: 1e-4 gave the
# same IJCNN1 predictions as 1e-6 (prequential error identical, AUC within 1e-5) at 1.25x the
# rounds per second.
DENSE_STEP_TOL = 1e-4

# C (LowRank), S (SymAcc), tr (Tracker); t, inexact_steps, davidson_steps: 1-arrays of counts;
# residual_sum: sum of the relative Ritz residuals of the tracked steps; theta: the last one;
# seed_key: the random_state key of the Lanczos start vectors.
OCGState = namedtuple("OCGState", "t C S tr inexact_steps davidson_steps residual_sum theta "
                                  "seed_key")
OCGConfig = namedtuple("OCGConfig", "loss self_inter learning_rate trace_bound gamma_power "
                                    "gamma_offset eig_tol eig_max_iter m_keep r_keep refresh")
# row buffers (idx, val, n), vectors of length D (v, Sv, q, Cq), of the rank (z, w, t1, aU, Uv,
# kb), of the subspace (cb, work, GC) and the Lanczos workspace (lw, small D only)
OCGWork = namedtuple("OCGWork", "idx val n z w t1 aU Uv kb cb work GC v Sv q Cq lw")


@njit(cache=True, nogil=True, error_model="numpy")
def update(state, cfg, work, rows, i, pred, scale):
    """Steps 2-4 of round ``state.t`` (module docstring)."""
    C, tr = state.C, state.tr
    D = C.U.shape[1]
    idx, val, n = work.idx, work.val, work.n[0]
    r = C.r[0]
    nb = _accumulate(state, cfg, work, scale * loss_derivative(cfg.loss, pred, rows.y[i]))
    if nb < 0:
        return NO_ROOM
    full = nb >= D  # the subspace is the whole space: Ritz pairs are eigenpairs
    if not full:
        if nb >= tr.B.shape[0]:
            gram_c(C, r, tr.UB, tr.B, nb, work.GC, work.kb)
            theta, Y = ritz(tr.GS, work.GC, nb, -cfg.learning_rate, -2.0)
            nb = rotate(tr, nb, r, C.ident, Y, top_by_magnitude(theta, cfg.m_keep, 0),
                        cfg.m_keep)
            gs_rank1(tr, nb, idx, val, n, 0.0, cfg.self_inter, D - 1, work.cb)
        work.v[:] = 0.0
        for p in range(n):
            work.v[idx[p]] = val[p]
        sacc_rows(state.S, idx, val, n, work.Sv)
        nb = append(tr, nb, r, C.ident, work.v, work.Sv, work.z, work.cb, True, work.work)
    tr.nb[0] = nb
    if nb == 0:
        return OK
    if full and C.ident:
        return _dense_step(state, cfg, work)
    theta, Y, best, nb, res = _refine(state, cfg, work, nb, full)
    if not full and theta[best] != 0.0:
        state.residual_sum[0] += res / abs(theta[best])
    tr.nb[0] = nb
    th = theta[best]
    state.theta[0] = th
    if not np.isfinite(th):
        return BAD_STEP
    if th == 0.0:
        return OK
    combine(tr.B, nb, Y, best, work.q)
    _cg_step(state, cfg, work, th, Y, best)
    return OK


@njit(cache=True, nogil=True)
def _accumulate(state, cfg, work, g):
    """Step 2 on S and the tracker's products; returns the subspace size (-1: no room)."""
    C, tr = state.C, state.tr
    D = C.U.shape[1]
    idx, val, n = work.idx, work.val, work.n[0]
    nb = tr.nb[0]
    coef = 0.5 * g
    if coef != 0.0:
        status = sacc_add(state.S, idx, val, n, coef, cfg.self_inter, D - 1)
        if status < 0:
            return -1
        if status == 1:  # a shrunk sketch changed S globally: recompute the products now
            tr.since_refresh[0] = max(tr.since_refresh[0], cfg.refresh)
    gs_rank1(tr, nb, idx, val, n, coef, cfg.self_inter, D - 1, work.cb)
    tr.since_refresh[0] += 1
    if tr.since_refresh[0] >= cfg.refresh and nb > 0 and nb < D:
        nb = refresh(state.S, C.U, C.r[0], C.ident, tr, nb)
        gs_rank1(tr, nb, idx, val, n, 0.0, cfg.self_inter, D - 1, work.cb)
        tr.since_refresh[0] = 0
    return nb


@njit(cache=True, nogil=True)
def _gamma_step(state, cfg, th):
    """(gamma_t, gamma_t delta sign(theta)) of the conditional-gradient step."""
    gamma = min(1.0, math.pow(state.t[0] + cfg.gamma_offset, -cfg.gamma_power))
    return gamma, gamma * cfg.trace_bound * (1.0 if th > 0.0 else -1.0)


@njit(cache=True, nogil=True, error_model="numpy")
def _dense_step(state, cfg, work):
    """Small dense case: B is the identity, so GS = S; Lanczos on H = -eta S - 2 C from the
    previous eigenvector (kept in UB[0]) to DENSE_STEP_TOL (or k = D), then step 4."""
    K, UB, q = state.C.K, state.tr.UB, work.q
    D = K.shape[0]
    h = start_state(state.t[0], state.seed_key)
    th = lanczos_top(state.tr.GS, K, cfg.learning_rate, UB[0], h, DENSE_STEP_TOL, work.lw, q)
    UB[0, :] = q
    state.theta[0] = th
    if not np.isfinite(th):
        return BAD_STEP
    if th == 0.0:
        return OK
    gamma, cstep = _gamma_step(state, cfg, th)
    for j in range(D):
        for l in range(D):
            K[j, l] = (1.0 - gamma) * K[j, l] + cstep * q[j] * q[l]
    return OK


@njit(cache=True, nogil=True)
def _residual(state, cfg, work, nb, Y, best, th):
    """v = H q - theta q for q = B' Y[:, best] (S q = SB' y is known); returns ||v||."""
    C, tr = state.C, state.tr
    D = C.U.shape[1]
    v, q = work.v, work.q
    combine(tr.B, nb, Y, best, q)
    apply_c(C, C.r[0], tr.UB, Y, best, nb, q, work.t1, work.w, work.Cq)
    for j in range(D):
        v[j] = -2.0 * work.Cq[j] - th * q[j]
    for a in range(nb):
        c = -cfg.learning_rate * Y[a, best]
        if c != 0.0:
            for j in range(D):
                v[j] += c * tr.SB[a, j]
    res = 0.0
    for j in range(D):
        res += v[j] * v[j]
    return np.sqrt(res)


@njit(cache=True, nogil=True)
def _refine(state, cfg, work, nb, full):
    """Ritz pair of largest |theta| on span(B), refined by Davidson steps while its residual
    exceeds eig_tol |theta|; returns (theta, Y, best, nb, residual)."""
    C, tr = state.C, state.tr
    r = C.r[0]
    gram_c(C, r, tr.UB, tr.B, nb, work.GC, work.kb)
    theta, Y = ritz(tr.GS, work.GC, nb, -cfg.learning_rate, -2.0)
    best = argmax_abs(theta)
    it = 0
    res = 0.0
    while not full:
        th = theta[best]
        res = _residual(state, cfg, work, nb, Y, best, th)
        if th == 0.0 or res <= cfg.eig_tol * abs(th) or not np.isfinite(res):
            break
        if it >= cfg.eig_max_iter:
            state.inexact_steps[0] += 1
            break
        it += 1
        state.davidson_steps[0] += 1
        if nb >= tr.B.shape[0]:
            nb = rotate(tr, nb, r, C.ident, Y, top_by_magnitude(theta, cfg.m_keep, 0),
                        cfg.m_keep)
        else:
            sacc_matvec(state.S, work.v, work.Sv)
            if not C.ident:
                for k in range(r):
                    s = 0.0
                    for j in range(work.v.shape[0]):
                        s += C.U[k, j] * work.v[j]
                    work.Uv[k] = s
            nb2 = append(tr, nb, r, C.ident, work.v, work.Sv, work.Uv, work.cb, False,
                         work.work)
            if nb2 == nb:
                break
            nb = nb2
        gram_c(C, r, tr.UB, tr.B, nb, work.GC, work.kb)
        theta, Y = ritz(tr.GS, work.GC, nb, -cfg.learning_rate, -2.0)
        best = argmax_abs(theta)
    return theta, Y, best, nb, res


@njit(cache=True, nogil=True, error_model="numpy")
def _cg_step(state, cfg, work, th, Y, best):
    """Step 4 on C = U' K U (and on UB, whose rows follow U); q = B' Y[:, best] in work.q."""
    C, tr = state.C, state.tr
    U, K, UB = C.U, C.K, tr.UB
    D = U.shape[1]
    nb = tr.nb[0]
    r = C.r[0]
    aU, v = work.aU, work.v
    gamma, cstep = _gamma_step(state, cfg, th)
    if C.ident:
        for j in range(D):
            for l in range(D):
                K[j, l] = (1.0 - gamma) * K[j, l] + cstep * work.q[j] * work.q[l]
        return
    for a in range(r):
        for b in range(r):
            K[a, b] *= 1.0 - gamma
    rho = orth_q(U, r, UB, nb, Y, best, work.q, v, aU, work.Uv)
    if rho > 1e-9 and r < D:
        if r >= K.shape[0]:
            r, dropped = lr_compress(U, K, r, cfg.r_keep, UB, nb)
            C.dropped[0] += dropped
            rho = orth_q(U, r, UB, nb, Y, best, work.q, v, aU, work.Uv)
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
    C.r[0] = r


@njit(cache=True, nogil=True)
def learn_rows(rows, state, cfg, work, limit):
    """The per-row protocol (:func:`fmlearn.kernels.steps.run_rows`) with this learner's step."""
    return run_rows(rows, state, cfg, work, predict_step, update, limit)
