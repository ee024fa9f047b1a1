"""Coordinate kernels shared by ALS (libFM's coordinate descent) and MCMC (libFM's Gibbs sampler).

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
their own (libFM recomputes them with a pass per factor).

Colour classes and the row layout. Features that never share a row do not interact (their
updates touch disjoint rows of E), so features are grouped into colour classes of a greedy
colouring of the co-occurrence graph; a pass updates the classes one after another. A row holds
at most one entry of a class, so a class's entries are stored *by row* (:data:`Columns`: the
entries of each class in increasing row order, the feature as its place in the class): every
pass over a class streams its entries and ``E`` in row order, with no jump to a column's rows
(which on large data cost a cache miss per entry, the cost that dominated a sweep). Updating a
class takes two visits of its rows: *gather* the sums g_j = sum_i s_i l'_i h_ij and
hh_j = sum_i s_i h_ij^2 of its features, step them, then *scatter* their changes into E. The
scatter of class c and the gather of class c + 1 run in one pass over the rows (chunk by chunk
of :data:`CHUNK_ROWS` rows, so a chunk's E is still in cache for the second visit), and the
scatter of a pass's last class is run with the gather of the next pass's first class: a pass
over the parameters of a factor costs one visit of the rows per colour class.

Bytes moved (the model behind the bandwidth bound that ``benchmarks/bench_fit_setup.py`` prints
under its tables). With n rows, C colour
classes covering rows r_c times in total (r_c = n for a class with one entry in every row), k
factors and E of 24 bytes per row, a sweep makes (k + 1) C + 1 fused passes over the classes
plus two reads of E[:, 0] (alpha and w0) and the write of w0's change; each fused pass reads and
writes the E rows its two classes touch and reads each entry's place (2 bytes, 4 in classes of
more than 65,536 features; its row, 4 bytes, unless the class covers every row; its value,
8 bytes, unless every value of the class is 1):

    bytes per sweep = (k + 1) * sum_c r_c * (48 + 2 b_c) + 3 * 24 n + small,

where b_c is the bytes stored per entry of class c (2 to 16) and each entry is read twice per
pass (gather and scatter). For one-hot user x item rows (C = 2, r_c = n, b_c = 4, k = 8) this is
9 * 2 * n * 56 + 72 n = 1080 n bytes (1008 n with 2-byte places; the figures below were
measured with 4-byte places): 2.2 GB per sweep at 2,000,000 rows. Against the copy
bandwidth of ``np.copyto`` per CPU second on one thread (read + write; 25 GB/s on the AMD EPYC
the suite runs on) that is a bound of 0.08 s per sweep at 2,000,000 rows and 0.32 s at
8,000,000; the sweep measured 0.085 and 0.34 CPU s (ALS and MCMC at 2,000,000 rows, ALS at
8,000,000: about 1.1x the bound; on a loaded machine), where the column-wise sweep this layout
replaced took 0.40-0.43 and 2.2 s (5-7x).

Threads and summation order. The sums of a class are accumulated in row order. On data of at
least ``BLOCKED_MIN_ROWS`` rows (``solvers._fm_common``) a class with enough entries is
*blocked*: its rows are cut into ``plan.bptr.shape[1] - 1`` blocks of ``plan.block_rows`` rows
(a number fixed by the data, never by the thread count), each block gathers its partial sums,
and the partial sums are added in block order; the blocks run in parallel. A class that is not
blocked runs serially with one running sum per feature in row order, which is the order of the
column-wise sweep this layout replaced. Either way the result does not depend on the number of
threads.
"""

import math
from collections import namedtuple

import numpy as np
from numba import prange, uint64
from numba.core import types
from numba.extending import overload

from . import compile_for
from ._jit import njit
from ._prefetch import prefetch
from .losses import SQUARED, loss_derivative

Columns = namedtuple("Columns", ["etpos", "erow", "ex", "y", "sw", "unit"])
Columns.__doc__ = """Training rows of a sweep, stored colour class by colour class (see the
module docstring): the entries of class c are ``etpos[eptr[c]:eptr[c + 1]]`` (``Plan.eptr``)
in increasing row order, each the place t of its feature in the class (the feature is
``order[color_ptr[c] + t]``). The q-th entry of class c lies in row ``erow[roff[c] + q]``, or
in row q when ``roff[c] < 0`` (the class has one entry in every row); its value is
``ex[xoff[c] + q]``, or 1 when ``xoff[c] < 0`` (every value of the class is 1). ``etpos``
uint16 (int32 when a class holds more than 65,536 features:
``solvers._fm_common.place_dtype``), ``erow`` int32; ``ex`` the model's dtype. Targets or
labels ``y`` (float64, one per row; empty when the squared loss's sweep never reads them),
sample weights ``sw`` and ``unit`` (True when every weight is 1: the weights are not read)."""

Plan = namedtuple("Plan", ["order", "color_ptr", "eptr", "roff", "xoff", "bidx", "bptr",
                           "block_rows", "xone", "G", "H", "old", "delta", "vn", "pend"])
Plan.__doc__ = """Visiting order and work space of a sweep: features
``order[color_ptr[c]:color_ptr[c + 1]]`` form colour class c; ``eptr``, ``roff``, ``xoff``
(C,) locate its entries (:data:`Columns`). A class with ``bidx[c] >= 0`` is blocked: its
entries of block b (rows ``b * block_rows`` on) start at ``eptr[c] + bptr[bidx[c], b]`` (for a
class covering every row, ``bidx[c]`` is -2 and block b starts at entry ``b * block_rows``).
``xone`` (1,) holds 1 in the model's dtype. Work space: the partial sums ``G``, ``H``
(blocks, m) of the class being gathered; the previous values ``old`` and the changes
``delta`` (2, m; model dtype) and the next factor's values ``vn`` (2, m; float64) of the two
classes in flight; ``pend`` (int64, 6) the class whose changes are still to be written to E
(-1: none), its pass (slot, cur, nxt, fn) and buffer."""

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


# Rows per chunk of a fused pass: the scatter of one class and the gather of the next visit a
# chunk's rows one after the other, so the second visit finds the chunk's E (96 KB) in cache.
CHUNK_ROWS = 4096
# Entries of E (3 per row) ahead of the scatter's row that it asks the CPU to prefetch: the
# scatter streams E in row order, and the hardware prefetcher stops at each 4 KiB page
# boundary (every 170 rows); 64 rows (1.5 KiB) ahead keeps the stream going across them.
# An ALS sweep at 8,000,000 user x item rows: 0.494 (0.483-0.511) CPU s against 0.543
# (0.531-0.604) without (benchmarks/bench_setup_ab.py --reps 5 against e3df2b0, whose sweep
# differs by the prefetches only; load 1.03-1.06). Only from PREFETCH_MIN_ROWS rows on (E of
# 24 MB, beyond the cores' share of the last-level cache), where they were measured to help
# (2,000,000 and 8,000,000 rows): a smaller row state stays in the caches, where a prefetch
# is an instruction for nothing (MovieLens-100K's 75,000 rows, a Dask worker's partition).
PREFETCH_MIN_ROWS = 1 << 20
AHEAD = uint64(3 * 64)

# One class's side of a fused pass: colour class c (-1: none), its pass (slot, cur, nxt, fn)
# and the buffer (row of Plan.old / delta / vn) holding its values.
_Side = namedtuple("_Side", ["c", "slot", "cur", "nxt", "fn", "buf"])


@njit(cache=True, nogil=True)
def _class_start(plan, c, b):
    # Index (within class c) of the first entry of class c in block b, for a blocked class.
    if plan.bidx[c] == -2:
        return b * plan.block_rows
    return plan.bptr[plan.bidx[c], b]


@njit(cache=True, nogil=True)
def _scatter(cols, plan, E, sc, V, q, stop):
    """Write the changes of class ``sc.c`` to the rows of its entries q, q + 1, ... lying
    before row ``stop``; returns the index of the first entry not written.

    Row r of an entry of feature place t and value x gains d x (w_j, slot 0) or
    d x (q_r - old x) in E[r, 0] and d x in its factor sums E[r, cur] (v_jf, slot 1), with
    d = delta[t] and old the feature's previous value; and v_j,fn x in the next factor's sums
    E[r, nxt] when fn >= 0."""
    c = sc.c
    lo = plan.eptr[c]
    cnt = plan.eptr[c + 1] - lo
    roff = plan.roff[c]
    xoff = plan.xoff[c]
    old = plan.old[sc.buf]
    delta = plan.delta[sc.buf]
    vn = plan.vn[sc.buf]
    cur = sc.cur
    nxt = sc.nxt
    if roff < 0 and xoff < 0:
        hi = min(cnt, stop)
        _scatter_unit(E, cols.etpos, lo, q, hi, sc.slot, cur, nxt, sc.fn, old, delta, vn)
        return max(q, hi)
    one = plan.xone[0]
    if roff < 0:
        cnt = min(cnt, stop)
    while q < cnt:
        r = q if roff < 0 else cols.erow[roff + q]
        if r >= stop:
            break
        t = cols.etpos[lo + q]
        x = one if xoff < 0 else cols.ex[xoff + q]
        d = delta[t]
        if sc.slot == 0:
            E[r, 0] += d * x
        else:
            E[r, 0] += d * x * (E[r, cur] - old[t] * x)
            E[r, cur] += d * x
        if sc.fn >= 0:
            E[r, nxt] += vn[t] * x
        q += 1
    return q


@njit(cache=True, nogil=True)
def _scatter_unit(E, etpos, lo, a, b, slot, cur, nxt, fn, old, delta, vn):
    # _scatter on rows a:b of a class with one entry of value 1 in every row (entry r is row
    # r): the same arithmetic with x = 1 (x * y == y exactly), the branches out of the loops.
    # Unsigned indices spare numba's negative-index wraparound (1.5 against 2.4 ns per row),
    # E's rows as 3 consecutive values of its flat view another 15 %.
    Ef = E.reshape(-1)
    cu = uint64(cur)
    nx = uint64(nxt)
    three = uint64(3)
    pf = E.shape[0] >= PREFETCH_MIN_ROWS
    if slot == 0:
        if fn >= 0:
            for i in range(a, b):
                r = three * uint64(i)
                if pf:
                    prefetch(Ef, r + AHEAD)
                t = uint64(etpos[uint64(lo + i)])
                Ef[r] += delta[t]
                Ef[r + nx] += vn[t]
        else:
            for i in range(a, b):
                if pf:
                    prefetch(Ef, three * uint64(i) + AHEAD)
                Ef[three * uint64(i)] += delta[uint64(etpos[uint64(lo + i)])]
    elif fn >= 0:
        for i in range(a, b):
            r = three * uint64(i)
            if pf:
                prefetch(Ef, r + AHEAD)
            t = uint64(etpos[uint64(lo + i)])
            d = delta[t]
            Ef[r] += d * (Ef[r + cu] - old[t])
            Ef[r + cu] += d
            Ef[r + nx] += vn[t]
    else:
        for i in range(a, b):
            r = three * uint64(i)
            if pf:
                prefetch(Ef, r + AHEAD)
            t = uint64(etpos[uint64(lo + i)])
            d = delta[t]
            Ef[r] += d * (Ef[r + cu] - old[t])
            Ef[r + cu] += d


@njit(cache=True, nogil=True)
def _gather(cols, plan, E, ga, loss, gb, q, stop):
    """Add the sums of class ``ga.c`` over its entries q, q + 1, ... lying before row ``stop``
    to ``G[gb]``, ``H[gb]``; returns the index of the first entry not read."""
    c = ga.c
    lo = plan.eptr[c]
    cnt = plan.eptr[c + 1] - lo
    roff = plan.roff[c]
    xoff = plan.xoff[c]
    old = plan.old[ga.buf]
    G = plan.G[gb]
    H = plan.H[gb]
    cur = ga.cur
    y = cols.y
    sw = cols.sw
    unit = cols.unit
    fast = unit and loss == SQUARED  # the common case, without per-entry branches
    if fast and roff < 0 and xoff < 0:
        hi = min(cnt, stop)
        _gather_unit(E, cols.etpos, lo, q, hi, ga.slot, cur, old, G, H)
        return max(q, hi)
    one = plan.xone[0]
    if roff < 0:
        cnt = min(cnt, stop)
    while q < cnt:
        r = q if roff < 0 else cols.erow[roff + q]
        if r >= stop:
            break
        t = cols.etpos[lo + q]
        x = one if xoff < 0 else cols.ex[xoff + q]
        if fast:
            if ga.slot == 0:
                G[t] += E[r, 0] * x
                H[t] += x * x
            else:
                h = x * (E[r, cur] - old[t] * x)
                G[t] += E[r, 0] * h
                H[t] += h * h
        else:
            h = x if ga.slot == 0 else x * (E[r, cur] - old[t] * x)
            s = 1.0 if unit else sw[r]
            G[t] += s * _dloss(loss, E[r, 0], y, r) * h
            H[t] += s * h * h
        q += 1
    return q


@njit(cache=True, nogil=True)
def _gather_unit(E, etpos, lo, a, b, slot, cur, old, G, H):
    # _gather (unit weights, squared loss) on rows a:b of a class with one entry of value 1
    # in every row. A feature's consecutive entries (users, when rows are sorted by their
    # first feature) are summed in registers, in the same order (0.7 against 2.6 ns per row:
    # a sum kept in memory waits for its own store at every entry).
    if a >= b:
        return
    Ef = E.reshape(-1)
    pf = E.shape[0] >= PREFETCH_MIN_ROWS
    cu = uint64(cur)
    three = uint64(3)
    tp = uint64(etpos[uint64(lo + a)])
    g = G[tp]
    hh = H[tp]
    for i in range(a, b):
        r = three * uint64(i)
        if pf:
            prefetch(Ef, r + AHEAD)
        t = uint64(etpos[uint64(lo + i)])
        if t != tp:
            G[tp] = g
            H[tp] = hh
            tp = t
            g = G[t]
            hh = H[t]
        if slot == 0:
            g += Ef[r]
            hh += 1.0
        else:
            h = Ef[r + cu] - old[t]
            g += Ef[r] * h
            hh += h * h
    G[tp] = g
    H[tp] = hh


@njit(cache=True, nogil=True)
def _next_row(cols, plan, sd, q):
    # Row of entry q of side sd's class (n + 1 past its last entry, or for no class).
    if sd.c < 0:
        return np.int64(1) << 62
    c = sd.c
    if q >= plan.eptr[c + 1] - plan.eptr[c]:
        return np.int64(1) << 62
    if plan.roff[c] < 0:
        return np.int64(q)
    return np.int64(cols.erow[plan.roff[c] + q])


@njit(cache=True, nogil=True)
def _fused_rows(cols, plan, E, sc, ga, zero, V, loss, lo_row, hi_row, qs, qg, gb):
    """One fused pass over rows lo_row:hi_row, chunk by chunk: the scatter of class ``sc.c``
    (its entries from qs), then ``E[:, zero] = 0`` (``zero`` >= 0: the first pass of a
    factor), then the gather of class ``ga.c`` (its entries from qg) into ``G[gb]``,
    ``H[gb]``. Chunks without an entry of either class are skipped unless rows are zeroed."""
    a = lo_row
    while a < hi_row:
        if zero < 0:  # skip to the chunk of the next entry
            nxt = min(_next_row(cols, plan, sc, qs), _next_row(cols, plan, ga, qg))
            if nxt >= hi_row:
                break
            if nxt > a:
                a += (nxt - a) // CHUNK_ROWS * CHUNK_ROWS
        z = min(hi_row, a + CHUNK_ROWS)
        if sc.c >= 0:
            qs = _scatter(cols, plan, E, sc, V, qs, z)
        if zero >= 0:
            for i in range(a, z):
                E[i, zero] = 0.0
        if ga.c >= 0:
            qg = _gather(cols, plan, E, ga, loss, gb, qg, z)
        a = z


@njit(cache=True, nogil=True)
def _fused_block(cols, plan, E, sc, ga, zero, V, loss, b):
    # Block b of a fused pass whose classes are blocked (or absent): partial sums in G[b].
    n = E.shape[0]
    lo_row = b * plan.block_rows
    hi_row = min(n, lo_row + plan.block_rows)
    qs = _class_start(plan, sc.c, b) if sc.c >= 0 else 0
    qg = 0
    if ga.c >= 0:
        qg = _class_start(plan, ga.c, b)
        m = plan.color_ptr[ga.c + 1] - plan.color_ptr[ga.c]
        for t in range(m):
            plan.G[b, t] = 0.0
            plan.H[b, t] = 0.0
    _fused_rows(cols, plan, E, sc, ga, zero, V, loss, lo_row, hi_row, qs, qg, b)


@njit(cache=True, parallel=True)
def _fused_parallel(cols, plan, E, sc, ga, zero, V, loss):
    """A fused pass over every block in parallel (the blocks' rows are disjoint, their
    partial sums go to their own row of G)."""
    for b in prange(plan.bptr.shape[1] - 1):
        _fused_block(cols, plan, E, sc, ga, zero, V, loss, b)


@njit(cache=True, nogil=True)
def _fused(cols, plan, E, sc, ga, zero, V, loss, par):
    # One fused pass over all rows: in parallel blocks when the gathered class is blocked (or
    # nothing is gathered) and the plan has blocks, else serially with one running sum per
    # feature in row order (G[0]). ``par`` is None for plans without blocks: numba then
    # prunes the parallel branch before typing it (see coordinate_sweep).
    if par is not None:
        if plan.bptr.shape[1] > 2 and (ga.c < 0 or plan.bidx[ga.c] != -1) and (
                sc.c < 0 or plan.bidx[sc.c] != -1):
            _fused_parallel(cols, plan, E, sc, ga, zero, V, loss)
            return
    if ga.c >= 0:
        m = plan.color_ptr[ga.c + 1] - plan.color_ptr[ga.c]
        for t in range(m):
            plan.G[0, t] = 0.0
            plan.H[0, t] = 0.0
    _fused_rows(cols, plan, E, sc, ga, zero, V, loss, 0, E.shape[0], 0, 0, 0)


@njit(cache=True, nogil=True)
def _class_step(plan, c, pa, group, cfg, buf, n_parts):
    # Step every feature of class c from its sums (the partial sums G[:n_parts], H[:n_parts]
    # added in block order); record its change and the next factor's value in buffer buf.
    lo = plan.color_ptr[c]
    old = plan.old[buf]
    delta = plan.delta[buf]
    vn = plan.vn[buf]
    for t in range(plan.color_ptr[c + 1] - lo):
        g = 0.0
        hh = 0.0
        for b in range(n_parts):
            g += plan.G[b, t]
            hh += plan.H[b, t]
        j = plan.order[lo + t]
        o = old[t]
        noise = pa.z[pa.z0 + j] if cfg.sample else 0.0
        gj = group[j]
        pa.theta[j, pa.col] = _step(o, g, hh, pa.lam[gj], pa.mu[gj], pa.alpha, cfg.curv, noise,
                                    cfg.sample, cfg.relax)
        delta[t] = pa.theta[j, pa.col] - o  # in the model's precision: E stays the model's
        if pa.fn >= 0:
            vn[t] = pa.V[j, pa.fn]


@njit(cache=True, nogil=True)
def _sweep_pass(cols, plan, pa, group, E, cfg, par):
    """Every feature's theta[:, col] once, colour class after colour class (see the module
    docstring): one fused pass per class writes the previous class's changes and gathers
    this class's sums; the changes of the last class are left to the first pass of the next
    factor (``plan.pend``), or written here when no factor follows (``pa.fn < 0``)."""
    pend = plan.pend
    zero = pa.nxt if pa.fn >= 0 else -1
    n_blocks = plan.bptr.shape[1] - 1
    n_classes = plan.color_ptr.shape[0] - 1
    for c in range(n_classes):
        buf = 1 - pend[5]
        lo = plan.color_ptr[c]
        old = plan.old[buf]
        for t in range(plan.color_ptr[c + 1] - lo):
            old[t] = pa.theta[plan.order[lo + t], pa.col]
        sc = _Side(pend[0], pend[1], pend[2], pend[3], pend[4], pend[5])
        ga = _Side(c, pa.slot, pa.cur, pa.nxt, pa.fn, buf)
        _fused(cols, plan, E, sc, ga, zero if c == 0 else -1, pa.V, cfg.loss, par)
        blocked = par is not None and n_blocks > 1 and plan.bidx[c] != -1 and (
            sc.c < 0 or plan.bidx[sc.c] != -1)
        _class_step(plan, c, pa, group, cfg, buf, n_blocks if blocked else 1)
        pend[0] = c
        pend[1] = pa.slot
        pend[2] = pa.cur
        pend[3] = pa.nxt
        pend[4] = pa.fn
        pend[5] = buf
    if pa.fn < 0 or n_classes == 0:
        sc = _Side(pend[0], pend[1], pend[2], pend[3], pend[4], pend[5])
        if sc.c >= 0 or (zero >= 0 and n_classes == 0):
            none = _Side(-1, 0, 0, 0, -1, 0)
            _fused(cols, plan, E, sc, none, zero if n_classes == 0 else -1, pa.V, cfg.loss,
                   par)
        pend[0] = -1


# The row-wise steps of the distributed sweep (kernels.cd_rows) on a partition's CSR rows.
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

    Bytes moved per sweep and their bandwidth bound: see the module docstring.

    The compiled sweep comes in two specialisations: one for plans without blocked classes
    (every plan below ``BLOCKED_MIN_ROWS`` rows, such as MovieLens-100K), which never
    references the parallel fused pass, and one for the others. A first fit on small data
    therefore compiles no parallel region (numba compiles every function a kernel may call,
    and a ``parallel=True`` one costs seconds).
    """
    return _coordinate_sweep(cols, plan, prior, model, E, z, g, cfg, _parallel_flag(plan))


def compile_sweep(cols, plan, prior, model, E, z, g, cfg):
    """Compile (or load from numba's cache) the sweep :func:`coordinate_sweep` runs on these
    arguments, without running it."""
    compile_for(_coordinate_sweep, cols, plan, prior, model, E, z, g, cfg, _parallel_flag(plan))


def _parallel_flag(plan):
    # None selects the serial specialisation of the sweep (see coordinate_sweep).
    return True if plan.bptr.shape[1] > 2 and bool(np.any(plan.bidx != -1)) else None


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
    plan.pend[0] = -1
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
