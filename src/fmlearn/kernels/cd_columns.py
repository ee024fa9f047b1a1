"""The column-wise layout's coordinate kernels, kept for the relational sweep
(:mod:`fmlearn.kernels.cd_relation`) until it is ported to :mod:`fmlearn.kernels.cd`'s
class-major layout; otherwise as :mod:`fmlearn.kernels.cd` was before it.

Coordinate kernels shared by ALS (libFM's coordinate descent) and MCMC (libFM's Gibbs sampler).

Both update one parameter theta at a time. With h_i = d f(x_i) / d theta, sample weights s_i,
the loss derivative l'_i and the loss's smoothness L:

* ALS (prior precision lam, alpha = 1, no noise): the majorization-minimization step
  ``theta <- theta - (sum s_i l'_i h_i + lam theta) / (L sum s_i h_i^2 + lam)``; for the squared
  loss (L = 1) this is the exact minimizer of the 1-D objective (libFM's ALS, Rendle 2012 Eq. 23).
* MCMC (noise precision alpha, prior N(mu, 1/lam)): a draw from the Gaussian full conditional
  with precision ``P = alpha sum s_i h_i^2 + lam`` and mean
  ``theta - (alpha sum s_i l'_i h_i + lam (theta - mu)) / P`` (Rendle 2012, Eq. 26-27), where the
  standard normal of each coordinate is drawn beforehand so that the result does not depend on
  threads.

One call of :func:`coordinate_sweep` is a whole sweep (libFM's ``draw_all``): alpha, w0, the
hyper-parameters of w, every w_j, the hyper-parameters of every factor, then V factor by factor,
in the order of :func:`gibbs_sweep`, which the contrast sweep runs too.
Every feature j belongs to a group ``group[j]`` (libFM's ``-meta``) with its own prior
(lambda, mu) for w and for each factor; one group is the ungrouped model.

Row state: ``E`` has shape (n, 3); ``E[i, 0]`` is pred_i - target_i for the squared loss (so that
l'_i = E[i, 0]) and pred_i for the logistic loss; ``E[i, 1]`` and ``E[i, 2]`` hold, alternately,
q_if = sum_j v_jf x_ij of the factor being updated and of the next one. The pass that updates
factor f visits every entry of X once to write the change of the row state; it adds
v_j,f+1 x_ij to the next factor's column on the same visit, so the factor sums cost no pass of
their own (libFM recomputes them with a pass per factor). Keeping a row's state in one short
row of E means one cache line per visited entry, the cost that dominates a sweep.

Threads: features that never share a row do not interact (their updates touch disjoint rows of
E), so features are grouped into colour classes of a greedy colouring of the co-occurrence
graph; classes run one after another, features inside a class in parallel. The serial path
visits features in exactly the same order, hence the same result for any number of threads.
"""

import math
from collections import namedtuple

import numpy as np
from numba import njit, prange
from numba.core import types
from numba.extending import overload

from . import compile_for
from .losses import SQUARED, loss_derivative

Columns = namedtuple("Columns", ["indptr", "indices", "data", "rindptr", "rindices", "rdata",
                                 "y", "sw", "unit"])
Columns.__doc__ = """Training data of a sweep: CSC arrays (``indptr``, ``indices``, ``data``),
CSR arrays (``rindptr``, ``rindices``, ``rdata``), targets or labels ``y`` (float64), sample
weights ``sw`` and ``unit`` (True when every weight is 1: the weights are not read)."""

Plan = namedtuple("Plan", ["order", "color_ptr", "class_parallel", "row_pass", "color", "pos",
                           "G", "H", "old", "delta"])
Plan.__doc__ = """Visiting order: features ``order[color_ptr[c]:color_ptr[c + 1]]`` form colour
class c, run in parallel where ``class_parallel[c]`` and by streaming the rows
(:func:`_class_rows`) where ``row_pass[c]``; ``color[j]`` and ``pos[j]`` (place of j in its
class) and the work buffers ``G``, ``H`` (n_blocks, m), ``old``, ``delta`` (m,) serve the
row-wise sweep (size 1 when unused)."""

Prior = namedtuple("Prior", ["group", "group_size", "lam_w", "mu_w", "lam_v", "mu_v"])
Prior.__doc__ = """Per-group priors: ``group[j]`` (int64, d) is feature j's group,
``group_size`` (float64, G) the features per group; ``lam_w``, ``mu_w`` (G,) the prior of w,
``lam_v``, ``mu_v`` (k, G) of each factor. ALS keeps them fixed (lam = the L2 penalty, mu = 0);
MCMC draws them (``hyper``) in place."""

Config = namedtuple("Config", ["loss", "curv", "sample", "hyper", "draw_alpha", "reg_bias",
                               "alpha_0", "beta_0", "gamma_0", "mu_0", "relax"],
                    defaults=(0.0,))
Config.__doc__ = """Scalars of a sweep: loss code and smoothness, ``sample`` (MCMC draws;
False: ALS steps), ``hyper`` (draw the groups' (lambda, mu)), ``draw_alpha`` (draw the noise
precision; False keeps it), the prior precision of w0, libFM's hyper-prior constants and
``relax``, the over-relaxation of MCMC's draws (0: plain Gibbs; see :func:`_step`)."""

Model = namedtuple("Model", ["w", "V", "scal"])
Model.__doc__ = """The parameters updated in place: ``w`` (d,), ``V`` (d, k) and ``scal``
(float64 [w0, alpha])."""

# One parameter set of a pass: theta[:, col] (theta = w as (d, 1) for slot 0, V for slot 1),
# the row-state columns cur (its factor sums) and nxt (the next factor's, filled from column
# fn of V; fn = -1: none), the group priors lam/mu (G,) and the offset z0 of its normals.
_Pass = namedtuple("_Pass", ["slot", "theta", "col", "cur", "nxt", "fn", "V", "lam", "mu",
                             "z", "z0", "alpha"])


def n_normals(d, k, n_groups):
    """Standard normals one MCMC sweep consumes: w0, mu_w, w, every factor's mu and v."""
    return 1 + n_groups + d + k * (n_groups + d)


def gamma_shapes(d, k, group_size, cfg, sw_total):
    """Shapes of the standard gamma variates of one MCMC sweep, in the order they are used:
    alpha (when drawn), lambda_w per group, lambda of each factor per group."""
    lam = 0.5 * (cfg.alpha_0 + np.asarray(group_size, dtype=np.float64) + 1.0)
    head = [0.5 * (cfg.alpha_0 + sw_total)] if cfg.draw_alpha else []
    return np.concatenate([head, lam, np.tile(lam, k)])


@njit(cache=True, nogil=True)
def _step(old, g, hh, lam, mu, alpha, curv, noise, sample, relax):
    """One coordinate's new value from g = sum s_i l'_i h_i and hh = sum s_i h_i^2.

    MCMC (``sample``) draws from the Gaussian full conditional N(m, 1/P). With ``relax`` = a
    in (-1, 1) the draw is over-relaxed (Adler 1981; Neal 1998, "Suppressing random walks
    in MCMC using ordered overrelaxation", §2): m + a (old - m) + sqrt(1 - a^2) z / sqrt(P).
    Given the other parameters this maps N(m, 1/P) onto itself and is reversible, so the
    chain keeps its stationary distribution (the posterior); a < 0 moves the coordinate to
    the far side of its conditional mean, which suppresses the random walk of coordinates
    strongly coupled to each other (v_user and v_item). a = 0 is the plain Gibbs draw.
    """
    if sample:
        prec = alpha * hh + lam
        if prec <= 0.0:
            return old
        m = old - (alpha * g + lam * (old - mu)) / prec
        if relax == 0.0:
            return m + noise / math.sqrt(prec)
        return m + relax * (old - m) + math.sqrt(1.0 - relax * relax) * noise / math.sqrt(prec)
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


# The scalars of one coordinate update (no arrays: passing records of arrays to a function
# called once per feature costs a reference count per array and call, measured 2x slower).
_Step = namedtuple("_Step", ["slot", "col", "cur", "nxt", "fn", "loss", "curv", "alpha",
                             "sample", "unit", "relax"])


@njit(cache=True, nogil=True)
def _step_of(pa, cols, cfg):
    return _Step(pa.slot, pa.col, pa.cur, pa.nxt, pa.fn, cfg.loss, cfg.curv, pa.alpha,
                 cfg.sample, cols.unit, cfg.relax)


@njit(cache=True, nogil=True)
def _update(j, csc, E, y, sw, theta, V, st, lam, mu, noise):
    # One coordinate theta[j, st.col] (a w_j when slot == 0, a v_jf when slot == 1); csc is
    # (indptr, indices, data).
    indptr, indices, data = csc
    col = st.col
    cur = st.cur
    old = theta[j, col]
    g = 0.0
    hh = 0.0
    if st.unit and st.loss == SQUARED:  # the common case, without per-entry branches
        if st.slot == 0:
            for p in range(indptr[j], indptr[j + 1]):
                x = data[p]
                g += E[indices[p], 0] * x
                hh += x * x
        else:
            for p in range(indptr[j], indptr[j + 1]):
                i = indices[p]
                x = data[p]
                h = x * (E[i, cur] - old * x)
                g += E[i, 0] * h
                hh += h * h
    else:
        for p in range(indptr[j], indptr[j + 1]):
            i = indices[p]
            x = data[p]
            h = x if st.slot == 0 else x * (E[i, cur] - old * x)
            s = 1.0 if st.unit else sw[i]
            g += s * _dloss(st.loss, E[i, 0], y, i) * h
            hh += s * h * h
    theta[j, col] = _step(old, g, hh, lam, mu, st.alpha, st.curv, noise, st.sample, st.relax)
    delta = theta[j, col] - old  # in the model's precision: E stays the model's
    fn = st.fn
    if delta == 0.0 and fn < 0:
        return
    vn = V[j, fn] if fn >= 0 else 0.0  # adding 0 when there is no next factor costs less
    nxt = st.nxt if fn >= 0 else 0      # than a branch per entry (column 0 gains 0.0)
    if st.slot == 0:
        for p in range(indptr[j], indptr[j + 1]):
            i = indices[p]
            x = data[p]
            E[i, 0] += delta * x
            E[i, nxt] += vn * x
    else:
        for p in range(indptr[j], indptr[j + 1]):
            i = indices[p]
            x = data[p]
            E[i, 0] += delta * x * (E[i, cur] - old * x)
            E[i, cur] += delta * x
            E[i, nxt] += vn * x


@njit(cache=True, nogil=True)
def _features(cols, plan, pa, group, E, cfg, lo, hi):
    # The features order[lo:hi] one after another.
    csc = (cols.indptr, cols.indices, cols.data)
    y = cols.y
    sw = cols.sw
    theta = pa.theta
    V = pa.V
    lam = pa.lam
    mu = pa.mu
    z = pa.z
    st = _step_of(pa, cols, cfg)
    for t in range(lo, hi):
        j = plan.order[t]
        noise = z[pa.z0 + j] if cfg.sample else 0.0
        _update(j, csc, E, y, sw, theta, V, st, lam[group[j]], mu[group[j]], noise)


@njit(cache=True, parallel=True)
def _class_parallel(cols, plan, lo, hi, pa, group, E, cfg):
    # The features of one colour class share no row: their updates are independent. (A call
    # per feature with the records costs about a microsecond: nothing against the 50,000
    # entries a class needs to run in parallel.)
    for t in prange(lo, hi):
        _features(cols, plan, pa, group, E, cfg, t, t + 1)


# Rows per block of the row-wise class sweep. Fixed (never derived from the thread count), so
# the order of the floating-point sums, hence the result, is the same for any number of threads.
ROW_BLOCK = 8192


@njit(cache=True, nogil=True)
def _class_entry(rindptr, rindices, color, c, i):
    # The entry of row i whose feature is in colour class c (a row holds at most one), or -1.
    for p in range(rindptr[i], rindptr[i + 1]):
        if color[rindices[p]] == c:
            return p
    return -1


@njit(cache=True, nogil=True)
def scatter_delta(E, i, slot, cur, d, x, old):
    """Row i's cache after a coordinate moved by ``d`` (from ``old``) where the row holds
    ``x``: w_j (``slot`` 0) changes the residual by d x; v_jf changes it by
    d x (q_f - old x) and the factor sum q_f (column ``cur``) by d x."""
    if slot == 0:
        E[i, 0] += d * x
    else:
        E[i, 0] += d * x * (E[i, cur] - old * x)
        E[i, cur] += d * x


@njit(cache=True, nogil=True)
def _rows_pass(cols, plan, c, pa, E, cfg, b, scatter):
    # One block b of rows: gather the class's sums G[b], H[b] (scatter False), or write the
    # class's changes (plan.delta, plan.old) to the row state (scatter True).
    n = cols.rindptr.shape[0] - 1
    if not scatter:
        for t in range(plan.old.shape[0]):
            plan.G[b, t] = 0.0
            plan.H[b, t] = 0.0
    for i in range(b * ROW_BLOCK, min(n, (b + 1) * ROW_BLOCK)):
        p = _class_entry(cols.rindptr, cols.rindices, plan.color, c, i)
        if p < 0:
            continue
        j = cols.rindices[p]
        t = plan.pos[j]
        x = cols.rdata[p]
        if not scatter:
            h = x if pa.slot == 0 else x * (E[i, pa.cur] - pa.theta[j, pa.col] * x)
            s = 1.0 if cols.unit else cols.sw[i]
            plan.G[b, t] += s * _dloss(cfg.loss, E[i, 0], cols.y, i) * h
            plan.H[b, t] += s * h * h
            continue
        scatter_delta(E, i, pa.slot, pa.cur, plan.delta[t], x, plan.old[t])
        if pa.fn >= 0:
            E[i, pa.nxt] += pa.V[j, pa.fn] * x


@njit(cache=True, parallel=True)
def _class_rows(cols, plan, c, lo, hi, pa, group, E, cfg):
    """Update every feature of colour class ``c`` with two sequential passes over the rows.

    Same updates as the column-wise sweep of the class (its features share no row, so they are
    independent), but the sums over each feature's rows are gathered by streaming the CSR rows
    and ``E`` in order, not by jumping to each column's rows: on large data the column order
    costs a cache miss per entry. Block partial sums are reduced in block order.
    """
    n_blocks = -(-(cols.rindptr.shape[0] - 1) // ROW_BLOCK)
    for b in prange(n_blocks):
        _rows_pass(cols, plan, c, pa, E, cfg, b, False)
    for t in range(hi - lo):
        g = 0.0
        hh = 0.0
        for b in range(n_blocks):
            g += plan.G[b, t]
            hh += plan.H[b, t]
        j = plan.order[lo + t]
        o = pa.theta[j, pa.col]
        noise = pa.z[pa.z0 + j] if cfg.sample else 0.0
        gj = group[j]
        pa.theta[j, pa.col] = _step(o, g, hh, pa.lam[gj], pa.mu[gj], pa.alpha, cfg.curv, noise,
                                    cfg.sample, cfg.relax)
        plan.old[t] = o
        plan.delta[t] = pa.theta[j, pa.col] - o
    for b in prange(n_blocks):
        _rows_pass(cols, plan, c, pa, E, cfg, b, True)


@njit(cache=True, nogil=True)
def _sweep_pass(cols, plan, pa, group, E, cfg, par):
    # Every feature's theta[:, col] once, colour class after colour class. ``par`` is None
    # when the plan runs every class serially: numba then prunes the branch below before
    # typing it, so the parallel variants are never compiled (see :func:`coordinate_sweep`).
    if pa.fn >= 0:
        for i in range(E.shape[0]):
            E[i, pa.nxt] = 0.0
    for c in range(plan.color_ptr.shape[0] - 1):
        lo = plan.color_ptr[c]
        hi = plan.color_ptr[c + 1]
        if par is None:
            _features(cols, plan, pa, group, E, cfg, lo, hi)
        elif plan.row_pass[c]:
            _class_rows(cols, plan, c, lo, hi, pa, group, E, cfg)
        elif plan.class_parallel[c]:
            _class_parallel(cols, plan, lo, hi, pa, group, E, cfg)
        else:
            _features(cols, plan, pa, group, E, cfg, lo, hi)


@njit(cache=True, nogil=True)
def draw_group_hyper(theta, prior_group, size, lam, mu, g, z, cfg):
    """Draw (lambda_g, mu_g) of every group from their Normal-Gamma conditional (libFM's
    ``draw_w_lambda`` then ``draw_w_mu``), in place in ``lam``, ``mu`` (G,), from the
    parameters ``theta`` (d,) (w, or one column of V: one specialisation for both).

    lambda_g = g[grp] / rate_g with ``g`` standard gammas of shape (alpha_0 + p_g + 1) / 2 and
    rate_g = (beta_0 + gamma_0 (mu_g - mu_0)^2 + sum_{j in g} (theta_j - mu_g)^2) / 2 (the
    previous mu_g); then mu_g = (sum_{j in g} theta_j + gamma_0 mu_0) / (p_g + gamma_0)
    + z[grp] / sqrt((p_g + gamma_0) lambda_g).
    """
    n_groups = size.shape[0]
    total = np.zeros(n_groups)
    dev = np.zeros(n_groups)
    for j in range(theta.shape[0]):
        gj = prior_group[j]
        t = theta[j]
        total[gj] += t
        dev[gj] += (t - mu[gj]) ** 2
    for q in range(n_groups):
        rate = 0.5 * (cfg.beta_0 + cfg.gamma_0 * (mu[q] - cfg.mu_0) ** 2 + dev[q])
        lam[q] = g[q] / rate
        p = size[q] + cfg.gamma_0
        mu[q] = (total[q] + cfg.gamma_0 * cfg.mu_0) / p + z[q] / math.sqrt(p * lam[q])


@njit(cache=True, nogil=True)
def draw_alpha(cols, r, g0, cfg):
    """MCMC's noise precision alpha = g0 * 2 / (beta_0 + sum_i s_i r_i^2) from the residuals
    ``r`` (1-D) and a standard gamma ``g0``; shared by the plain and the contrast sweep."""
    s = 0.0
    for i in range(r.shape[0]):
        s += (1.0 if cols.unit else cols.sw[i]) * r[i] * r[i]
    return g0 * 2.0 / (cfg.beta_0 + s)


@njit(cache=True, nogil=True)
def draw_factor_hypers(V, prior, g, z, gi, zi, cfg):
    """Draw (lambda, mu) of every factor and group (:func:`draw_group_hyper`) when
    ``cfg.hyper``, from the gammas ``g[gi:]`` and the normals ``z[zi:]``; returns the next
    ``(gi, zi)`` (z's slots are consumed even when nothing is drawn, as in the sweep's layout)."""
    n_groups = prior.group_size.shape[0]
    for f in range(V.shape[1]):
        if cfg.hyper:
            draw_group_hyper(V[:, f], prior.group, prior.group_size, prior.lam_v[f], prior.mu_v[f],
                             g[gi:gi + n_groups], z[zi:zi + n_groups], cfg)
            gi += n_groups
        zi += n_groups
    return gi, zi


@njit(cache=True, nogil=True)
def sweep_finite(model, alpha, r):
    """True when w0, alpha, the residuals ``r`` (1-D), w and V are all finite."""
    ok = math.isfinite(model.scal[0]) and math.isfinite(alpha)
    for i in range(r.shape[0]):
        ok = ok and math.isfinite(r[i])
    for j in range(model.V.shape[0]):
        ok = ok and math.isfinite(model.w[j])
        for f in range(model.V.shape[1]):
            ok = ok and math.isfinite(model.V[j, f])
    return ok


@njit(cache=True, nogil=True)
def bias_step(cols, E, w0, alpha, noise, cfg):
    """The coordinate step for w0 (h_i = 1 for every row); updates E[:, 0], returns w0."""
    g = 0.0
    hh = 0.0
    for i in range(E.shape[0]):
        s = 1.0 if cols.unit else cols.sw[i]
        g += s * _dloss(cfg.loss, E[i, 0], cols.y, i)
        hh += s
    new = _step(w0, g, hh, cfg.reg_bias, 0.0, alpha, cfg.curv, noise, cfg.sample, cfg.relax)
    delta = new - w0
    for i in range(E.shape[0]):
        E[i, 0] += delta
    return new


def coordinate_sweep(cols, plan, prior, model, E, z, g, cfg):
    """One sweep of ALS (``cfg.sample`` False) or MCMC over every parameter, in place; see
    :func:`_coordinate_sweep`.

    The compiled sweep comes in two specialisations: one for plans whose colour classes all
    run serially (every plan below ``MIN_PARALLEL_ROWS`` / ``ROW_PASS_MIN_ROWS`` rows, such as
    MovieLens-100K), which never references the parallel class sweeps, and one for the others.
    A first fit on small data therefore compiles no parallel region (numba compiles every
    function a kernel may call, and a ``parallel=True`` one costs seconds).
    """
    return _coordinate_sweep(cols, plan, prior, model, E, z, g, cfg, _parallel_flag(plan))


def compile_sweep(cols, plan, prior, model, E, z, g, cfg):
    """Compile (or load from numba's cache) the sweep :func:`coordinate_sweep` runs on these
    arguments, without running it."""
    compile_for(_coordinate_sweep, cols, plan, prior, model, E, z, g, cfg, _parallel_flag(plan))


def _parallel_flag(plan):
    # None selects the serial specialisation of the sweep (see coordinate_sweep).
    return True if (plan.row_pass.any() or plan.class_parallel.any()) else None


@njit(cache=True)
def _coordinate_sweep(cols, plan, prior, model, E, z, g, cfg, par):
    """One sweep of ALS (``cfg.sample`` False) or MCMC over every parameter, in place: the
    draw order of :func:`gibbs_sweep` with this module's bias step and passes.

    ``z`` holds the sweep's standard normals (:func:`n_normals` of them; unread by ALS) and
    ``g`` its standard gammas (shapes :func:`gamma_shapes`; unread without ``cfg.hyper`` and
    ``cfg.draw_alpha``). ``E[:, 0]`` must hold the row state on entry (see the module
    docstring); columns 1 and 2 are work space. Returns True when the row state and every
    parameter are finite afterwards.
    """
    return gibbs_sweep(cols, plan, prior, model, E, E[:, 0], par, z, g, cfg)


# The two steps gibbs_sweep takes from the sweep that runs it, resolved by the type of the
# sweep's data record (numba overloads: compiled into the calling sweep, which numba can
# cache; a compiled function passed as a value could not be): ``kernels.cd`` registers them
# for :data:`Columns`, ``kernels.cd_contrast`` for its ``ContrastColumns``.
def sweep_bias(cols, E, w0, alpha, noise, cfg):
    """w0's coordinate step of the sweep of ``cols``: updates the row state, returns w0."""
    raise NotImplementedError("compiled only (numba overload by the type of cols)")


def sweep_pass(cols, plan, pa, group, E, work, cfg):
    """One pass of the sweep of ``cols`` over every feature's ``pa.theta[:, pa.col]``."""
    raise NotImplementedError("compiled only (numba overload by the type of cols)")


def is_record(typ, record):
    """Whether the numba type ``typ`` is the named tuple class ``record`` (overload guard)."""
    return isinstance(typ, types.BaseNamedTuple) and typ.instance_class is record


@overload(sweep_bias)
def _plain_bias(cols, E, w0, alpha, noise, cfg):
    if is_record(cols, Columns):
        return lambda cols, E, w0, alpha, noise, cfg: bias_step(cols, E, w0, alpha, noise, cfg)
    return None


@overload(sweep_pass)
def _plain_pass(cols, plan, pa, group, E, work, cfg):
    if is_record(cols, Columns):
        return lambda cols, plan, pa, group, E, work, cfg: _sweep_pass(cols, plan, pa, group, E,
                                                                        cfg, work)
    return None


@njit(inline="always")
def gibbs_sweep(cols, plan, prior, model, E, r, work, z, g, cfg):
    """One sweep over every parameter in libFM's draw order (``draw_all``): the one home of
    that order, run by the plain sweep (:func:`coordinate_sweep`) and by the contrast sweep
    (:func:`fmlearn.kernels.cd_contrast.contrast_sweep`).

    The order: the noise precision alpha (MCMC regression, from the residuals ``r`` and the
    gamma ``g[0]``), w0 (:func:`sweep_bias`), the hyper-parameters of w per group, every w_j,
    the hyper-parameters of every factor and group, then V factor by factor (each pass
    :func:`sweep_pass`, with the sweep's ``work``: the plain sweep's parallel flag, the
    contrast sweep's buffers). The standard normals ``z`` are laid out in that order (w0, mu_w
    per group, w_j per feature, mu_f per factor and group, v_jf factor by factor); a slot is
    consumed whether or not it is drawn, so ALS and MCMC share the layout. Returns
    :func:`sweep_finite` of the result.

    Not cached itself: it is inlined into each calling sweep (numba IR inlining), whose cache
    entry then holds it. Against the two copies of the order it replaced, the first compilation
    in a process with a cold cache costs 1.5-2 s more CPU inlined, 3.2 s as a function of its
    own (``benchmarks/compile_sweeps_ab.py``: ALS and MCMC on rows and on contrasts); loading
    from the cache costs the same. numba keys a cache entry by the caller's own source file
    only: after editing this function, clear ``kernels/__pycache__``, as for any kernel called
    across modules.
    """
    w = model.w
    V = model.V
    d = w.shape[0]
    k = V.shape[1]
    n_groups = prior.group_size.shape[0]
    theta_w = w.reshape((d, 1))
    alpha = model.scal[1]
    gi = 0
    if cfg.sample and cfg.draw_alpha:
        alpha = draw_alpha(cols, r, g[0], cfg)
        gi = 1
    model.scal[1] = alpha
    model.scal[0] = sweep_bias(cols, E, model.scal[0], alpha, z[0] if cfg.sample else 0.0, cfg)
    zi = 1
    if cfg.hyper:
        draw_group_hyper(theta_w[:, 0], prior.group, prior.group_size, prior.lam_w, prior.mu_w,
                         g[gi:gi + n_groups], z[zi:zi + n_groups], cfg)
        gi += n_groups
    zi += n_groups
    pa = _Pass(0, theta_w, 0, 1, 1, 0 if k > 0 else -1, V, prior.lam_w, prior.mu_w, z, zi,
               alpha)
    sweep_pass(cols, plan, pa, prior.group, E, work, cfg)
    zi += d
    gi, zi = draw_factor_hypers(V, prior, g, z, gi, zi, cfg)
    for f in range(k):
        cur = 1 + f % 2
        pa = _Pass(1, V, f, cur, 3 - cur, f + 1 if f + 1 < k else -1, V, prior.lam_v[f],
                   prior.mu_v[f], z, zi, alpha)
        sweep_pass(cols, plan, pa, prior.group, E, work, cfg)
        zi += d
    return sweep_finite(model, alpha, r)


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
