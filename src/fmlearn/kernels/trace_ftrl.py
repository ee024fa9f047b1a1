"""FTRL with linearized losses and lazy projection (dual averaging) on a trace-norm set: the
CCFM-FTRL and CFM-FTRL baselines of Zhang et al. 2018, §4.1; one round's update, run by
:func:`fmlearn.kernels.steps.run_rows`.

M_{t+1} = argmin_{M in K} <S_t, M> + ||M||_F^2 / (2 eta_t) = Proj_K(-eta_t S_t),
eta_t = eta0 / t ** power_t, S_t the accumulated gradient. K is the trace-norm ball (``psd``
False, the CCFM: M = C on x^ = [x; 1], ``augment``) or {W >= 0, tr W <= delta} (``psd``, the
convex FM of Yamada et al. 2017: M = W on x, with the bias and linear weights learned by
per-coordinate FTRL-Proximal). The projection soft-thresholds eigenvalues of -eta_t S_t: by a full
eigendecomposition when ``dense`` (small D), else from the Ritz pairs of the tracked subspace
refined until their residuals are below ``eig_tol`` (exact up to that tolerance while the
projected rank stays below the subspace size; rounds where it does not are counted in
``saturated``, rounds stopped by ``eig_max_iter`` in ``inexact_steps``). While eta_t times a
bound on ||S_t||_tr is at most delta the projection is the identity and M = -eta_t S_t exactly
(``s_coef``). The model is kept as M = s_coef S + sum_k lam_k v_k v_k'.
"""

import math
from collections import namedtuple

import numpy as np
from numba import prange

from ._jit import njit
from .eigtrack import append, gs_rank1, refresh, ritz, rotate, top_by_magnitude
from .losses import loss_derivative
from .lowrank import ball_threshold
from .steps import BAD_STEP, NO_ROOM, OK, ftrl_coord, invscaling, load_row, load_xhat, run_rows
from .symacc import sacc_add, sacc_matvec, sacc_quad, sacc_rows, sym_dense

# V (cap, D), lam (cap), k: the eigenpairs of the model; s_coef: the weight of S in it;
# s_trace_bound: a bound on ||S||_tr; saturated, inexact_steps: counts; w0 ... n_linear: the
# FTRL-Proximal bias and linear weights of the convex FM (empty for the CCFM).
TraceState = namedtuple("TraceState", "t S tr V lam k s_coef s_trace_bound saturated "
                                      "inexact_steps w0 w z_bias n_bias z_linear n_linear")
TraceConfig = namedtuple("TraceConfig", "loss self_inter augment psd dense learning_rate power_t "
                                        "trace_bound alpha beta l1 l2 eig_tol eig_max_iter m_keep "
                                        "refresh")
TraceWork = namedtuple("TraceWork", "idx val n cb work v Sv Sdense")
# What a prediction reads of a TraceState but S: a flat record, which (unlike TraceState, that
# nests the record S) can enter a parallel region (:func:`eig_predict_rows`).
EigModel = namedtuple("EigModel", "w0 w V lam k s_coef")


def eig_model(state):
    """The :class:`EigModel` of a :class:`TraceState` (the same arrays, no copy)."""
    return EigModel(state.w0, state.w, state.V, state.lam, state.k, state.s_coef)


@njit(cache=True, nogil=True)
def _row(rows, i, d, augment, idx, val):
    if augment:
        return load_xhat(rows.indptr, rows.indices, rows.data, i, d, idx, val)
    return load_row(rows.indptr, rows.indices, rows.data, i, idx, val)


@njit(cache=True, nogil=True)
def eig_predict_row(model, S, idx, val, n, self_inter, d, augment):
    """Linear part (CFM) + 1/2 x~' M x~ - self-interactions, M = s_coef S + sum lam v v'.

    ``model``: an :class:`EigModel` or the :class:`TraceState` itself (the same fields)."""
    acc = 0.0
    if not augment:
        acc = model.w0[0]
        for p in range(n):
            acc += model.w[idx[p]] * val[p]
    quad = 0.0
    alpha = model.s_coef[0]
    if alpha != 0.0:
        quad = sacc_quad(S, alpha, idx, val, n, self_inter, d)
    V, lam = model.V, model.lam
    for a in range(model.k[0]):
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


@njit(cache=True, nogil=True)
def predict(state, cfg, work, rows, i):
    D = state.V.shape[1]
    d = D - 1 if cfg.augment else D
    n = _row(rows, i, d, cfg.augment, work.idx, work.val)
    work.n[0] = n
    return eig_predict_row(state, state.S, work.idx, work.val, n, cfg.self_inter, d,
                           cfg.augment)


@njit(cache=True, nogil=True, error_model="numpy")
def update(state, cfg, work, rows, i, pred, scale):
    D = state.V.shape[1]
    d = D - 1 if cfg.augment else D
    idx, val, n = work.idx, work.val, work.n[0]
    g = scale * loss_derivative(cfg.loss, pred, rows.y[i])
    if not math.isfinite(g):
        return BAD_STEP
    t = state.t[0]
    if not cfg.augment:
        ftrl_coord(state.z_bias, state.n_bias, state.w0, 0, g, cfg.alpha, cfg.beta, cfg.l1,
                   cfg.l2)
        for p in range(n):
            ftrl_coord(state.z_linear, state.n_linear, state.w, idx[p], g * val[p], cfg.alpha,
                       cfg.beta, cfg.l1, cfg.l2)
    coef = 0.5 * g
    if coef != 0.0:
        status = sacc_add(state.S, idx, val, n, coef, cfg.self_inter, d)
        if status < 0:
            return NO_ROOM
        if status == 1:  # a shrunk sketch changed S globally: recompute the products
            state.tr.since_refresh[0] = max(state.tr.since_refresh[0], cfg.refresh)
    eta_t = invscaling(cfg.learning_rate, cfg.power_t, t)
    # ||S_t||_tr <= sum_tau |l'_tau| / 2 ||G(x_tau)||_tr: while eta_t times this bound is at
    # most delta the projection is the identity and M = -eta_t S_t exactly
    gtr = 0.0
    for p in range(n):
        gtr += val[p] * val[p]
        if not cfg.self_inter and idx[p] < d:
            gtr += val[p] * val[p]
    state.s_trace_bound[0] += abs(coef) * gtr
    state.s_coef[0] = 0.0
    if not cfg.dense and eta_t * state.s_trace_bound[0] <= cfg.trace_bound and not cfg.psd:
        state.s_coef[0] = -eta_t
        state.k[0] = 0
        return OK
    if cfg.dense:
        _dense_projection(state, cfg, work, eta_t)
    else:
        _tracked_projection(state, cfg, work, eta_t, coef, d)
    for a in range(state.k[0]):
        if not math.isfinite(state.lam[a]):
            return BAD_STEP
    return OK


@njit(cache=True, nogil=True)
def _thresholded(x, tau, psd):
    """An eigenvalue after the projection's soft-thresholding by tau."""
    if psd:
        return max(x - tau, 0.0)
    m = max(abs(x) - tau, 0.0)
    return m if x >= 0.0 else -m


@njit(cache=True, nogil=True)
def _store_ritz_pairs(state, cfg, th, Y, B, nb, eta_t, tau):
    """The surviving pairs (eta_t th, B' Y) as the model's eigenpairs; returns how many."""
    V, lam = state.V, state.lam
    D = V.shape[1]
    k = 0
    for a in range(nb):
        m = _thresholded(eta_t * th[a], tau, cfg.psd)
        if m != 0.0:
            V[k, :] = 0.0
            for b in range(nb):
                c = Y[b, a]
                for j in range(D):
                    V[k, j] += c * B[b, j]
            lam[k] = m
            k += 1
    return k


@njit(cache=True, nogil=True)
def _dense_projection(state, cfg, work, eta_t):
    """Proj_K(-eta_t S) by a full eigendecomposition (small D)."""
    Sd = work.Sdense
    D = Sd.shape[0]
    sym_dense(state.S, Sd)
    for a in range(D):
        for b in range(D):
            Sd[a, b] = -eta_t * Sd[a, b]
    th, Q = np.linalg.eigh(Sd)
    tau = ball_threshold(th, cfg.trace_bound, cfg.psd)
    V, lam = state.V, state.lam
    k = 0
    for a in range(D - 1, -1, -1):
        m = _thresholded(th[a], tau, cfg.psd)
        if m != 0.0 and k < V.shape[0]:
            for j in range(D):
                V[k, j] = Q[j, a]
            lam[k] = m
            k += 1
    state.k[0] = k


@njit(cache=True, nogil=True)
def _ritz_residual(tr, nb, th, Y, col, v):
    """v = (-S) q - theta q for the Ritz pair ``col`` of -S on span(B), q = B' Y[:, col] (S q
    is known from SB); returns ||v||^2."""
    B, SB = tr.B, tr.SB
    res = 0.0
    for j in range(B.shape[1]):
        s = 0.0
        qj = 0.0
        for b in range(nb):
            s -= Y[b, col] * SB[b, j]
            qj += Y[b, col] * B[b, j]
        v[j] = s - th[col] * qj
        res += v[j] * v[j]
    return res


@njit(cache=True, nogil=True)
def _worst_residual(tr, nb, th, Y, eta_t, tau, psd, v):
    """(largest relative Ritz residual among the pairs that survive the projection, its
    column; -1 if none survives)."""
    worst = -1.0
    wcol = -1
    for a in range(nb):
        m = (th[a] * eta_t - tau) if psd else (abs(th[a]) * eta_t - tau)
        if m <= 0.0:
            continue
        res = _ritz_residual(tr, nb, th, Y, a, v)
        rel = math.sqrt(res) / max(abs(th[a]), 1e-300)
        if rel > worst:
            worst = rel
            wcol = a
    return worst, wcol


@njit(cache=True, nogil=True)
def _davidson(state, cfg, work, nb, th, Y, wcol):
    """Add the residual of Ritz pair ``wcol`` to the subspace (or restart it when full);
    returns the new size (unchanged: nothing could be added)."""
    tr = state.tr
    v = work.v
    if nb >= tr.B.shape[0]:
        sel = top_by_magnitude(th, cfg.m_keep, 1 if cfg.psd else 0)
        return rotate(tr, nb, 0, True, Y, sel, cfg.m_keep)
    _ritz_residual(tr, nb, th, Y, wcol, v)
    sacc_matvec(state.S, v, work.Sv)
    return append(tr, nb, 0, True, v, work.Sv, work.Sv, work.cb, False, work.work)


@njit(cache=True, nogil=True)
def _tracked_projection(state, cfg, work, eta_t, coef, d):
    """Proj_K(-eta_t S) from the refined Ritz pairs of the tracked subspace."""
    tr = state.tr
    idx, val, n = work.idx, work.val, work.n[0]
    nb = tr.nb[0]
    gs_rank1(tr, nb, idx, val, n, coef, cfg.self_inter, d, work.cb)
    tr.since_refresh[0] += 1
    if tr.since_refresh[0] >= cfg.refresh and nb > 0:
        nb = refresh(state.S, tr.UB, 0, True, tr, nb)
        gs_rank1(tr, nb, idx, val, n, 0.0, cfg.self_inter, d, work.cb)
        tr.since_refresh[0] = 0
    if nb >= tr.B.shape[0]:
        th, Y = ritz(tr.GS, tr.GS, nb, -1.0, 0.0)
        sel = top_by_magnitude(th, cfg.m_keep, 1 if cfg.psd else 0)
        nb = rotate(tr, nb, 0, True, Y, sel, cfg.m_keep)
        gs_rank1(tr, nb, idx, val, n, 0.0, cfg.self_inter, d, work.cb)
    work.v[:] = 0.0
    for p in range(n):
        work.v[idx[p]] = val[p]
    sacc_rows(state.S, idx, val, n, work.Sv)
    nb = append(tr, nb, 0, True, work.v, work.Sv, work.Sv, work.cb, True, work.work)
    tr.nb[0] = nb
    if nb == 0:
        return
    th, Y = ritz(tr.GS, tr.GS, nb, -1.0, 0.0)
    it = 0
    while True:
        tau = ball_threshold(eta_t * th, cfg.trace_bound, cfg.psd)
        worst, wcol = _worst_residual(tr, nb, th, Y, eta_t, tau, cfg.psd, work.v)
        if wcol < 0 or worst <= cfg.eig_tol:
            break
        if it >= cfg.eig_max_iter:
            state.inexact_steps[0] += 1
            break
        it += 1
        nb2 = _davidson(state, cfg, work, nb, th, Y, wcol)
        if nb2 == nb and nb < tr.B.shape[0]:
            break
        nb = nb2
        th, Y = ritz(tr.GS, tr.GS, nb, -1.0, 0.0)
    tr.nb[0] = nb
    tau = ball_threshold(eta_t * th, cfg.trace_bound, cfg.psd)
    k = _store_ritz_pairs(state, cfg, th, Y, tr.B, nb, eta_t, tau)
    if k == nb:
        state.saturated[0] += 1  # every Ritz pair survived: the projection may miss mass
    state.k[0] = k


@njit(cache=True, parallel=True)
def eig_predict_rows(Xp, Xi, Xd, model, S, self_inter, augment, out):
    """Predictions of a model kept as eigenpairs (the FTRL learners), rows in parallel (each
    row's result is independent of the thread count): ``model`` is the state's
    :func:`eig_model`, ``S`` its accumulated gradient."""
    n_rows = Xp.shape[0] - 1
    D = model.V.shape[1]
    d = D - 1 if augment else D
    maxn = 1
    for i in range(n_rows):
        maxn = max(maxn, Xp[i + 1] - Xp[i] + 1)
    for i in prange(n_rows):
        idx = np.empty(maxn, dtype=np.int64)
        val = np.empty(maxn)
        if augment:
            n = load_xhat(Xp, Xi, Xd, i, d, idx, val)
        else:
            n = load_row(Xp, Xi, Xd, i, idx, val)
        out[i] = eig_predict_row(model, S, idx, val, n, self_inter, d, augment)
    return out


@njit(cache=True, nogil=True)
def learn_rows(rows, state, cfg, work, limit):
    """The per-row protocol (:func:`fmlearn.kernels.steps.run_rows`) with this learner's step."""
    return run_rows(rows, state, cfg, work, predict, update, limit)
