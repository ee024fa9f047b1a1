"""Coordinate kernels of the classic FM fitted to contrast targets y_g = sum_i C[g, i] f(x_i).

ALS and MCMC of :mod:`fmlearn.kernels.cd` on targets instead of rows. Every parameter theta
enters f linearly: f(x_i) = g_i + theta h_i with h_i = d f(x_i) / d theta (x_ij for w_j,
x_ij (q_if - v_jf x_ij) for v_jf, 1 for w0). So it enters every target linearly too:
(C f)_g = G_g + theta u_g with u_g = sum_i C[g, i] h_i, and with the target residuals
e_g = (C f)_g - y_g and target weights s_g the 1-D problem is that of :mod:`kernels.cd` with
``g = sum_g s_g e_g u_g`` and ``hh = sum_g s_g u_g^2``:

* ALS: theta <- theta - (g + lam theta) / (hh + lam), the exact minimiser of
  1/2 sum_g s_g e_g^2 + lam/2 theta^2 along theta;
* MCMC: theta ~ N(theta - (alpha g + lam (theta - mu)) / P, 1/P), P = alpha hh + lam (the
  Gaussian full conditional; the noise precision alpha has the Gamma conditional with
  ``sum_g s_g`` and ``sum_g s_g e_g^2``, counted over targets).

After a step by delta, e_g += delta u_g on the targets the feature touches and, for a factor,
q_if += delta x_ij on its rows. Per sweep the cost is O(k (nnz(X) t + nnz(B))), t the targets
per row and B the target-feature incidence (feature j touches target g when some row of
target g holds j).

State: ``E`` (n_targets,) the residuals e_g; ``Q`` (n_rows, 2) the factor sums q_if of the
factor being updated and of the next one (filled on the same pass, as in ``kernels.cd``);
``u`` (n_targets,) zeros on entry and exit (the scatter buffer of u_g).

Threads: two features that touch a common *target* interact (the second reads e_g that the
first changed), even when they never share a row. The colour classes are therefore a greedy
colouring of the graph of B (two features adjacent when they touch a common target; every row
of the data belongs to some target, so features sharing a row are adjacent too): features of a
class touch disjoint targets and disjoint rows, so their updates, including their writes to
the shared buffer ``u``, are independent, and a class can run in parallel with the same result
as the serial path, which visits the same order.

The bias w0 has h_i = 1, so u_g = sum_i C[g, i]: when every row of C sums to zero it is not
identifiable and is held (``ContrastColumns.bias`` False), never drifted by a penalty or a
prior.
"""

from collections import namedtuple

from numba import prange
from numba.extending import overload

from ._jit import njit
from .cd import _step, _step_of, gibbs_sweep, is_record, sweep_bias, sweep_pass

ContrastColumns = namedtuple("ContrastColumns", [
    "indptr", "indices", "data", "tptr", "tidx", "tval", "bptr", "btgt", "y", "sw", "unit",
    "rowsum", "bias"])
ContrastColumns.__doc__ = """Training data of a contrast sweep: X's CSC arrays (``indptr``,
``indices``, ``data``); C^T by rows (``tptr``, ``tidx``, ``tval``: the targets of row i and
their coefficients); B by features (``bptr``, ``btgt``: the targets feature j touches, in
increasing order); targets ``y`` and weights ``sw`` (n_targets,), ``unit`` (every weight is 1);
``rowsum`` (n_targets,) = C 1, the targets' derivative in w0; ``bias`` (w0 is learned)."""

ContrastPlan = namedtuple("ContrastPlan", ["order", "color_ptr", "class_parallel"])
ContrastPlan.__doc__ = """Visiting order: features ``order[color_ptr[c]:color_ptr[c + 1]]``
form colour class c of the target-level colouring, run in parallel where
``class_parallel[c]``."""


@njit(cache=True, nogil=True)
def _update(j, cols, E, Q, u, theta, V, st, lam, mu, noise):
    # One coordinate theta[j, st.col] (w_j when slot == 0, v_jf when slot == 1).
    indptr, indices, data = cols.indptr, cols.indices, cols.data
    tptr, tidx, tval = cols.tptr, cols.tidx, cols.tval
    col = st.col
    cur = st.cur - 1  # Q's columns 0, 1 are the passes' factor-sum slots 1, 2
    old = theta[j, col]
    for p in range(indptr[j], indptr[j + 1]):
        i = indices[p]
        x = data[p]
        h = x if st.slot == 0 else x * (Q[i, cur] - old * x)
        for q in range(tptr[i], tptr[i + 1]):
            u[tidx[q]] += tval[q] * h
    g = 0.0
    hh = 0.0
    for p in range(cols.bptr[j], cols.bptr[j + 1]):
        t = cols.btgt[p]
        ut = u[t]
        s = 1.0 if st.unit else cols.sw[t]
        g += s * E[t] * ut
        hh += s * ut * ut
    new = _step(old, g, hh, lam, mu, st.alpha, st.curv, noise, st.sample, st.relax)
    theta[j, col] = new
    delta = theta[j, col] - old  # in the model's precision: E stays the model's
    for p in range(cols.bptr[j], cols.bptr[j + 1]):
        t = cols.btgt[p]
        E[t] += delta * u[t]
        u[t] = 0.0
    fn = st.fn
    if st.slot == 0 and fn < 0:
        return
    vn = V[j, fn] if fn >= 0 else 0.0
    nxt = st.nxt - 1 if fn >= 0 else cur
    dq = delta if st.slot == 1 else 0.0
    for p in range(indptr[j], indptr[j + 1]):
        i = indices[p]
        x = data[p]
        Q[i, cur] += dq * x
        Q[i, nxt] += vn * x


@njit(cache=True, nogil=True)
def _features(cols, plan, pa, group, E, Q, u, cfg, lo, hi):
    # The features order[lo:hi] one after another.
    st = _step_of(pa, cols, cfg)
    for t in range(lo, hi):
        j = plan.order[t]
        noise = pa.z[pa.z0 + j] if cfg.sample else 0.0
        _update(j, cols, E, Q, u, pa.theta, pa.V, st, pa.lam[group[j]], pa.mu[group[j]],
                noise)


@njit(cache=True, parallel=True)
def _class_parallel(cols, plan, lo, hi, pa, group, E, Q, u, cfg):
    # The features of one colour class touch disjoint targets and rows: independent updates.
    for t in prange(lo, hi):
        _features(cols, plan, pa, group, E, Q, u, cfg, t, t + 1)


@njit(cache=True, nogil=True)
def _sweep_pass(cols, plan, pa, group, E, Q, u, cfg):
    # Every feature's theta[:, col] once, colour class after colour class.
    if pa.fn >= 0:
        for i in range(Q.shape[0]):
            Q[i, pa.nxt - 1] = 0.0
    for c in range(plan.color_ptr.shape[0] - 1):
        lo = plan.color_ptr[c]
        hi = plan.color_ptr[c + 1]
        if plan.class_parallel[c]:
            _class_parallel(cols, plan, lo, hi, pa, group, E, Q, u, cfg)
        else:
            _features(cols, plan, pa, group, E, Q, u, cfg, lo, hi)


@njit(cache=True, nogil=True)
def _bias_step(cols, E, w0, alpha, noise, cfg):
    # w0's coordinate step: h_i = 1, so u_g = rowsum_g.
    if not cols.bias:
        return w0
    g = 0.0
    hh = 0.0
    for t in range(E.shape[0]):
        s = 1.0 if cols.unit else cols.sw[t]
        ut = cols.rowsum[t]
        g += s * E[t] * ut
        hh += s * ut * ut
    new = _step(w0, g, hh, cfg.reg_bias, 0.0, alpha, cfg.curv, noise, cfg.sample, cfg.relax)
    delta = new - w0
    for t in range(E.shape[0]):
        E[t] += delta * cols.rowsum[t]
    return new


@overload(sweep_bias)
def _contrast_bias(cols, E, w0, alpha, noise, cfg):
    if is_record(cols, ContrastColumns):
        return lambda cols, E, w0, alpha, noise, cfg: _bias_step(cols, E, w0, alpha, noise, cfg)
    return None


@overload(sweep_pass)
def _contrast_pass(cols, plan, pa, group, E, work, cfg):
    if is_record(cols, ContrastColumns):
        return lambda cols, plan, pa, group, E, work, cfg: _sweep_pass(cols, plan, pa, group, E,
                                                                        work[0], work[1], cfg)
    return None


@njit(cache=True)
def contrast_sweep(cols, plan, prior, model, E, Q, u, rand, cfg):
    """One ALS (``cfg.sample`` False) or MCMC sweep over every parameter, in place.

    The order and the random numbers are those of :func:`fmlearn.kernels.cd.coordinate_sweep`
    (both are :func:`fmlearn.kernels.cd.gibbs_sweep`; ``rand = (z, g)``: its standard normals
    and gammas), so C = identity gives the plain sweep. ``E`` must hold e_g = (C f)_g - y_g on
    entry; ``Q`` and ``u`` are work space (``u`` all zero). Returns True when every residual
    and parameter is finite afterwards.
    """
    z, g = rand
    return gibbs_sweep(cols, plan, prior, model, E, E, (Q, u), z, g, cfg)
