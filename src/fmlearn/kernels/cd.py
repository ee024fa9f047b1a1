"""Coordinate kernels shared by ALS (libFM's coordinate descent) and MCMC (libFM's Gibbs sampler).

Both update one parameter theta at a time with the cached predictions ``pred`` (and, for the
factors, the cached sums ``Q[f, i] = sum_j v_jf x_ij``). With h_i = d pred_i / d theta, sample
weights s_i, the loss derivative l'_i = dloss(pred_i, target_i) and its smoothness L:

* ALS (prior precision lam, alpha = 1, no noise): the majorization-minimization step
  ``theta <- theta - (sum s_i l'_i h_i + lam theta) / (L sum s_i h_i^2 + lam)``; for the squared
  loss (L = 1) this is the exact minimizer of the 1-D objective (libFM's ALS / Rendle 2012 Eq. 23).
* MCMC (noise precision alpha, prior N(mu, 1/lam)): a draw from the Gaussian full conditional
  with precision ``P = alpha sum s_i h_i^2 + lam`` and mean
  ``theta - (alpha sum s_i l'_i h_i + lam (theta - mu)) / P`` (Rendle 2012, Eq. 26-27), where the
  standard normal ``noise[j]`` is drawn beforehand so that the result does not depend on threads.

Threads: features that never share a row do not interact (their updates touch disjoint entries
of ``pred`` and ``Q``), so features are grouped into colour classes of a greedy colouring of the
co-occurrence graph; classes run one after another, features inside a class in parallel. The
serial driver visits features in exactly the same order, hence the same result for any number
of threads.
"""

import math

import numpy as np
from numba import njit, prange

from ..losses import loss_derivative


@njit(cache=True, nogil=True)
def _step(old, g, hh, lam, mu, alpha, curv, noise, sample):
    # g = sum s_i l'_i h_i, hh = sum s_i h_i^2.
    if sample:
        prec = alpha * hh + lam
        if prec <= 0.0:
            return old
        return old - (alpha * g + lam * (old - mu)) / prec + noise / math.sqrt(prec)
    denom = curv * hh + lam
    if denom <= 0.0:
        return old
    return old - (g + lam * (old - mu)) / denom


@njit(cache=True, nogil=True)
def _update_linear(j, indptr, indices, data, w, pred, target, sw, loss, curv, lam, mu, alpha,
                   noise, sample):
    g = 0.0
    hh = 0.0
    for p in range(indptr[j], indptr[j + 1]):
        i = indices[p]
        x = data[p]
        g += sw[i] * loss_derivative(loss, pred[i], target[i]) * x
        hh += sw[i] * x * x
    old = w[j]
    new = _step(old, g, hh, lam, mu, alpha, curv, noise[j], sample)
    w[j] = new
    delta = new - old
    if delta != 0.0:
        for p in range(indptr[j], indptr[j + 1]):
            pred[indices[p]] += delta * data[p]


@njit(cache=True, nogil=True)
def _update_factor(j, f, indptr, indices, data, V, Q, pred, target, sw, loss, curv, lam, mu,
                   alpha, noise, sample):
    old = V[j, f]
    g = 0.0
    hh = 0.0
    for p in range(indptr[j], indptr[j + 1]):
        i = indices[p]
        x = data[p]
        h = x * (Q[f, i] - old * x)
        g += sw[i] * loss_derivative(loss, pred[i], target[i]) * h
        hh += sw[i] * h * h
    new = _step(old, g, hh, lam, mu, alpha, curv, noise[j], sample)
    V[j, f] = new
    delta = new - old
    if delta != 0.0:
        for p in range(indptr[j], indptr[j + 1]):
            i = indices[p]
            x = data[p]
            pred[i] += delta * x * (Q[f, i] - old * x)
            Q[f, i] += delta * x


@njit(cache=True)
def linear_sweep_serial(indptr, indices, data, order, w, pred, target, sw, loss, curv, lam, mu,
                        alpha, noise, sample):
    for t in range(order.shape[0]):
        _update_linear(order[t], indptr, indices, data, w, pred, target, sw, loss, curv, lam, mu,
                       alpha, noise, sample)


@njit(cache=True, parallel=True)
def linear_sweep_colored(indptr, indices, data, order, color_ptr, w, pred, target, sw, loss,
                         curv, lam, mu, alpha, noise, sample):
    for c in range(color_ptr.shape[0] - 1):
        for t in prange(color_ptr[c], color_ptr[c + 1]):
            _update_linear(order[t], indptr, indices, data, w, pred, target, sw, loss, curv, lam,
                           mu, alpha, noise, sample)


@njit(cache=True)
def factor_sweep_serial(indptr, indices, data, order, f, V, Q, pred, target, sw, loss, curv, lam,
                        mu, alpha, noise, sample):
    for t in range(order.shape[0]):
        _update_factor(order[t], f, indptr, indices, data, V, Q, pred, target, sw, loss, curv,
                       lam, mu, alpha, noise, sample)


@njit(cache=True, parallel=True)
def factor_sweep_colored(indptr, indices, data, order, color_ptr, f, V, Q, pred, target, sw,
                         loss, curv, lam, mu, alpha, noise, sample):
    for c in range(color_ptr.shape[0] - 1):
        for t in prange(color_ptr[c], color_ptr[c + 1]):
            _update_factor(order[t], f, indptr, indices, data, V, Q, pred, target, sw, loss,
                           curv, lam, mu, alpha, noise, sample)


@njit(cache=True)
def cooccurrence_work(row_indptr):
    """sum_i nnz_i^2: the cost of building the feature co-occurrence graph."""
    total = 0
    for i in range(row_indptr.shape[0] - 1):
        m = row_indptr[i + 1] - row_indptr[i]
        total += m * m
    return total


@njit(cache=True)
def greedy_coloring(col_indptr, col_indices, row_indptr, row_indices, n_features):
    """Greedy colouring of the graph 'features j and l share a row'.

    Returns ``color`` (n_features,) and the number of colours. Features are visited in index
    order; each takes the smallest colour unused by its already-coloured neighbours.
    """
    color = np.full(n_features, -1, dtype=np.int64)
    mark = np.full(n_features + 1, -1, dtype=np.int64)  # mark[c] == j: colour c is taken for j
    n_colors = 0
    for j in range(n_features):
        for p in range(col_indptr[j], col_indptr[j + 1]):
            i = col_indices[p]
            for q in range(row_indptr[i], row_indptr[i + 1]):
                c = color[row_indices[q]]
                if c >= 0:
                    mark[c] = j
        c = 0
        while mark[c] == j:
            c += 1
        color[j] = c
        if c + 1 > n_colors:
            n_colors = c + 1
    return color, n_colors


@njit(cache=True, parallel=True)
def factor_sums(indptr, indices, data, V, Q):
    """Q[f, i] = sum_j V[j, f] x_ij for a CSR matrix (rows independent)."""
    n = indptr.shape[0] - 1
    k = V.shape[1]
    for i in prange(n):
        for f in range(k):
            s = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                s += V[indices[p], f] * data[p]
            Q[f, i] = s
