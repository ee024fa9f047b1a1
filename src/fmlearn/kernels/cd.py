"""Coordinate kernels shared by ALS (libFM's coordinate descent) and MCMC (libFM's Gibbs sampler).

Both update one parameter theta at a time. With h_i = d f(x_i) / d theta, sample weights s_i,
the loss derivative l'_i and the loss's smoothness L:

* ALS (prior precision lam, alpha = 1, no noise): the majorization-minimization step
  ``theta <- theta - (sum s_i l'_i h_i + lam theta) / (L sum s_i h_i^2 + lam)``; for the squared
  loss (L = 1) this is the exact minimizer of the 1-D objective (libFM's ALS, Rendle 2012 Eq. 23).
* MCMC (noise precision alpha, prior N(mu, 1/lam)): a draw from the Gaussian full conditional
  with precision ``P = alpha sum s_i h_i^2 + lam`` and mean
  ``theta - (alpha sum s_i l'_i h_i + lam (theta - mu)) / P`` (Rendle 2012, Eq. 26-27), where the
  standard normal ``noise[j]`` is drawn beforehand so that the result does not depend on threads.

Row state: ``E`` has shape (n, 2); ``E[i, 0]`` is pred_i - target_i for the squared loss (so that
l'_i = E[i, 0]) and pred_i for the logistic loss; ``E[i, 1]`` holds q_if = sum_j v_jf x_ij of the
factor being updated. Keeping both in one row of E means one cache line per visited entry, the
cost that dominates a sweep (libFM interleaves its e and q caches for the same reason).

Threads: features that never share a row do not interact (their updates touch disjoint rows of
E), so features are grouped into colour classes of a greedy colouring of the co-occurrence
graph; classes run one after another, features inside a class in parallel. The serial path
visits features in exactly the same order, hence the same result for any number of threads.
"""

import math

import numpy as np
from numba import njit, prange

from ..losses import SQUARED, loss_derivative


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
def _dloss(loss, r, y, i):
    # Loss derivative from the cached row state r (see module docstring).
    if loss == SQUARED:
        return r
    return loss_derivative(loss, r, y[i])


@njit(cache=True, nogil=True)
def _update(j, slot, indptr, indices, data, E, y, sw, unit, loss, curv, lam, mu, alpha, noise,
            sample, theta, jj, ff):
    # One coordinate: theta[jj, ff] (a w_j when slot == 0, a v_jf when slot == 1).
    old = theta[jj, ff]
    g = 0.0
    hh = 0.0
    for p in range(indptr[j], indptr[j + 1]):
        i = indices[p]
        x = data[p]
        h = x if slot == 0 else x * (E[i, 1] - old * x)
        s = 1.0 if unit else sw[i]
        g += s * _dloss(loss, E[i, 0], y, i) * h
        hh += s * h * h
    new = _step(old, g, hh, lam, mu, alpha, curv, noise, sample)
    theta[jj, ff] = new
    delta = new - old
    if delta != 0.0:
        for p in range(indptr[j], indptr[j + 1]):
            i = indices[p]
            x = data[p]
            if slot == 0:
                E[i, 0] += delta * x
            else:
                E[i, 0] += delta * x * (E[i, 1] - old * x)
                E[i, 1] += delta * x


# Entries below which a colour class is swept serially: a parallel region costs microseconds,
# and far more when the machine is oversubscribed.
MIN_PARALLEL_NNZ = 50_000


@njit(cache=True, parallel=True)
def coordinate_sweep(indptr, indices, data, order, color_ptr, class_nnz, parallel, slot, theta,
                     col, E, y, sw, unit, loss, curv, lam, mu, alpha, noise, sample):
    """Update ``theta[j, col]`` for every feature j in ``order`` (``slot`` 0: linear weights,
    ``theta`` = w[:, None]; ``slot`` 1: factor ``col`` of V, with E[:, 1] holding its sums).

    A colour class with fewer than ``MIN_PARALLEL_NNZ`` entries (``class_nnz[c]``) runs serially.
    ``E[i, 0]`` is the cached row state: pred - target for the squared loss, pred otherwise;
    ``noise[j]`` the pre-drawn normal of feature j. With ``parallel`` the colour classes cut by
    ``color_ptr`` run one after another and their features in parallel; otherwise the same
    order is visited serially (identical result).
    """
    if parallel:
        for c in range(color_ptr.shape[0] - 1):
            if class_nnz[c] >= MIN_PARALLEL_NNZ:
                for t in prange(color_ptr[c], color_ptr[c + 1]):
                    j = order[t]
                    _update(j, slot, indptr, indices, data, E, y, sw, unit, loss, curv, lam, mu,
                            alpha, noise[j], sample, theta, j, col)
            else:  # too little work to pay for waking the threads; same order, same result
                for t in range(color_ptr[c], color_ptr[c + 1]):
                    j = order[t]
                    _update(j, slot, indptr, indices, data, E, y, sw, unit, loss, curv, lam, mu,
                            alpha, noise[j], sample, theta, j, col)
    else:
        for t in range(order.shape[0]):
            j = order[t]
            _update(j, slot, indptr, indices, data, E, y, sw, unit, loss, curv, lam, mu, alpha,
                    noise[j], sample, theta, j, col)


# Rows per block of the row-wise class sweep. Fixed (never derived from the thread count), so
# the order of the floating-point sums, hence the result, is the same for any number of threads.
ROW_BLOCK = 8192


@njit(cache=True, parallel=True)
def class_sweep_rows(indptr, indices, data, color, c, pos, feats, slot, theta, col, E, y, sw,
                     unit, loss, curv, lam, mu, alpha, noise, sample, G, H, old, delta):
    """Update every feature of colour class ``c`` with two sequential passes over the rows.

    Same updates as :func:`coordinate_sweep` on the class (its features share no row, so they
    are independent), but the sums over each feature's rows are gathered by streaming the CSR
    rows and ``E`` in order, not by jumping to each column's rows: on large data the column
    order costs a cache miss per entry. Block partial sums ``G``, ``H`` (n_blocks, m) are
    reduced in block order. ``pos[j]`` is feature j's place in ``feats``; ``old`` and ``delta``
    are work arrays of length m.
    """
    n = indptr.shape[0] - 1
    m = feats.shape[0]
    n_blocks = G.shape[0]
    for b in prange(n_blocks):
        for t in range(m):
            G[b, t] = 0.0
            H[b, t] = 0.0
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                if color[j] == c:
                    t = pos[j]
                    x = data[p]
                    h = x if slot == 0 else x * (E[i, 1] - theta[j, col] * x)
                    s = 1.0 if unit else sw[i]
                    G[b, t] += s * _dloss(loss, E[i, 0], y, i) * h
                    H[b, t] += s * h * h
                    break  # a row holds at most one feature of a colour class
    for t in range(m):
        g = 0.0
        hh = 0.0
        for b in range(n_blocks):
            g += G[b, t]
            hh += H[b, t]
        j = feats[t]
        o = theta[j, col]
        new = _step(o, g, hh, lam, mu, alpha, curv, noise[j], sample)
        theta[j, col] = new
        old[t] = o
        delta[t] = new - o
    for b in prange(n_blocks):
        for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                if color[j] == c:
                    t = pos[j]
                    d = delta[t]
                    if d != 0.0:
                        x = data[p]
                        if slot == 0:
                            E[i, 0] += d * x
                        else:
                            E[i, 0] += d * x * (E[i, 1] - old[t] * x)
                            E[i, 1] += d * x
                    break


@njit(cache=True)
def bias_update(E, y, sw, unit, loss, curv, lam, mu, alpha, noise, sample, w0):
    """The coordinate step for w0 (h_i = 1 for every row); updates E and returns the new w0."""
    g = 0.0
    hh = 0.0
    for i in range(E.shape[0]):
        s = 1.0 if unit else sw[i]
        g += s * _dloss(loss, E[i, 0], y, i)
        hh += s
    new = _step(w0, g, hh, lam, mu, alpha, curv, noise, sample)
    delta = new - w0
    for i in range(E.shape[0]):
        E[i, 0] += delta
    return new


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
def factor_column_sums(indptr, indices, data, V, f, E):
    """E[i, 1] = sum_j V[j, f] x_ij for a CSR matrix (rows independent)."""
    n = indptr.shape[0] - 1
    if indptr[n] < MIN_PARALLEL_NNZ:
        for i in range(n):
            E[i, 1] = _column_sum(indptr, indices, data, V, f, i)
    else:
        for i in prange(n):
            E[i, 1] = _column_sum(indptr, indices, data, V, f, i)


@njit(cache=True, nogil=True)
def _column_sum(indptr, indices, data, V, f, i):
    s = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        s += V[indices[p], f] * data[p]
    return s
