"""Coordinate kernels of ALS and MCMC on relational data (Rendle 2013, "Scaling factorization
machines to relational data", VLDB 2013, §4-5), and the prediction of relational rows.

The expanded row of sample i is ``x_i = [x_i^0 | X_1[b_1(i)] | ... | X_B[b_B(i)]]``: its
row-level features, then the row b_r(i) of each block r (see :mod:`fmlearn.relation`).
Features are numbered in that order: the row-level ones 0..d0-1, then block r's
``foff[r]..foff[r+1]-1``. The sweep is :func:`fmlearn.kernels.cd.gibbs_sweep`'s, in its draw
order; this module supplies its two steps for the :data:`Relations` record: w0's step, and a
pass that runs the row-level features with :mod:`fmlearn.kernels.cd`'s pass over its colour
classes (class-major row layout), then each block's features, block after block, each in
index order.

A block feature j of block r touches every sample of every block row b that holds it, and the
samples of one block row differ only in their other parts. With e_i the row state of
``kernels.cd`` (E[i, 0]: pred - target for the squared loss, pred for the logistic loss),
l'_i its loss derivative, s_i the weights, q_i the factor sum of the factor f being updated and
qB[b] = sum_j v_jf X_r[b, j] the block row's share of it (so that qm_i = q_i - qB[b_r(i)] is
the rest of the row's), the derivative of f(x_i) in the coordinate is

    w_j:  h_i = x_bj                 v_jf:  h_i = a_b + x_bj qm_i,  a_b = x_bj (qB[b] - v_jf x_bj)

and the sums of the coordinate step (``kernels.cd._step``) reduce to sums over block rows:

    g  = sum_i s_i l'_i h_i = sum_b a_b SE[b] + x_bj SEQ[b]          (w_j: x_bj SE[b])
    hh = sum_i s_i h_i^2    = sum_b a_b^2 N[b] + 2 a_b x_bj SQ[b] + x_bj^2 SQQ[b]
                                                                     (w_j: x_bj^2 N[b])

with the per block row caches N = sum s_i, SE = sum s_i l'_i, SQ = sum s_i qm_i,
SQQ = sum s_i qm_i^2, SEQ = sum s_i l'_i qm_i over the samples of b (the cache of the paper's
§5.2, libFM's ``relation_cache``). A pass over block r gathers them in one pass over the
samples, updates the block's features from them (O(nnz(X_r)) per factor), keeping them
current as it goes: after a step by delta every h_i of the block row moves the row states by
delta h_i, so SE += c delta (a_b N + x_bj SQ), SEQ += c delta (a_b SQ + x_bj SQQ), qB += delta
x_bj (c the loss's curvature: 1 for the squared loss, where this is exact; for the logistic
loss of ALS the derivatives move along the quadratic majorizer with curvature 1/4, so the
block's steps minimise a surrogate that touches the loss where the pass starts -- a
majorization-minimization step that never increases the objective, where the flat sweep
recomputes each derivative exactly). N, SQ and SQQ do not move in a block's pass (qm_i is the
rest of the row's factor sum), so these changes add up to SE = SE0 + c (N DY + SQ DQ) and
SEQ = SEQ0 + c (SQ DY + SQQ DQ), with SE0, SEQ0 the gathered sums, DY the sum of the delta
a_b (the block row's own share of the prediction moved by DY) and DQ the change of qB: the
pass keeps DY and qB per block row and reads SE and SEQ from them. A last pass over the
samples writes the block's changes to each row state: the block row's own share of the
prediction moved by DY, its cross term by qm_i DQ, so e_i += DY[b] + qm_i DQ[b] and
q_i += DQ[b] (DQ = qB - qB at the pass's start); it also adds the block row's sum of the next
factor to the next factor's column, as the row-level pass does for its features.

The passes over the samples are fused where the order of the operations on each sample
allows: the write of the last row-level class's changes with block 0's gather, the write of
block r's changes with block r + 1's gather, and the write of the last block's changes with
the next factor's first row-level gather (left pending in ``plan.pend`` between the two
passes of :func:`~fmlearn.kernels.cd.gibbs_sweep`): B + 1 passes over the samples per factor
with B blocks and one row-level class. For unit weights, the squared loss and a row-level
class with one entry of value 1 in every sample (a day as a category) the fused passes run
sample by sample (:func:`_scatter_first_unit`, :func:`_flush_gather_unit`); the
estimator's merge orders a block-0 row's samples by their first row-level feature, so that
the class's gather sums runs of one feature. Each sample sees the operations of the
separate passes in their order: the same values.

Per sweep the cost is O(k (nnz(X^0) + sum_r nnz(X_r) + B n)) against O(k nnz(expanded)) for the
flat sweep. The result is that of the flat sweep over the expanded matrix visiting the
features in the same order (the row-level plan's colour classes, then every block feature as a
class of its own, in index order) up to the order of the floating-point sums (ALS with the
squared loss, MCMC), tested against a NumPy oracle and against the flat sweep. The block
passes run serially (their sums are scattered into the block rows); nothing depends on the
number of threads.

Prediction (:func:`relation_predict`, :func:`relation_predict_samples`): the block rows'
linear terms, factor sums and squared factor sums are tabled once per call for the block rows
the samples use, then each sample adds its tables to its row-level part.
"""

import math
from collections import namedtuple

import numpy as np
from numba import uint64
from numba.extending import overload

from . import compile_for
from ._jit import njit
from .cd import (
    CHUNK_ROWS,
    _class_step,
    _dloss,
    _fused,
    _parallel_flag,
    _Side,
    _step,
    _sweep_pass,
    bias_step,
    gibbs_sweep,
    is_record,
    sweep_bias,
    sweep_pass,
)
from .cd import (
    _gather as _class_gather,
)
from .cd import (
    _scatter as _class_scatter,
)
from .losses import SQUARED

__all__ = ["Relations", "RelationRows", "relation_sweep", "compile_relation_sweep",
           "relation_predict", "relation_predict_samples", "N_CACHE", "block_caches"]

Relations = namedtuple("Relations", ["rows", "sw", "unit", "ix", "grouped", "boff", "foff",
                                     "bptr", "bidx", "bval", "cptr", "cidx", "cval", "wsum",
                                     "C", "qn"])
Relations.__doc__ = """Training data of a relational sweep: ``rows`` the row-level features'
:class:`~fmlearn.kernels.cd.Columns` (with the targets and weights), ``sw`` and ``unit`` (the
same weights, read by the shared steps); ``ix`` (B, n) uint32: sample i's row of block r
(numbered across blocks: block r's rows are ``boff[r]..boff[r+1]-1``), ``grouped`` (B,)
whether block r's samples come in runs of the same row (sorted by it); ``foff`` (B + 1,) the
first feature of each block (``foff[0]`` = d0, ``foff[B]`` = d); the stacked block rows by row
(``bptr``, ``bidx`` global feature ids, ``bval``) and by feature (``cptr`` over the block
features j - d0, ``cidx`` block rows, ``cval``), indices uint32; ``wsum`` (R,) the total
weight of each block row's samples; ``C`` (R, :data:`N_CACHE`) float64, the block
rows' caches, and ``qn`` (R,) float64, their shares of the next factor's sums (work
space: :func:`block_caches`)."""

RelationRows = namedtuple("RelationRows", ["indptr", "indices", "data", "ix", "boff", "bptr",
                                           "bidx", "bval"])
RelationRows.__doc__ = """Relational samples to predict: the row-level features as CSR
(``indptr``, ``indices``, ``data``), ``ix`` (B, n) and the stacked block rows as in
:data:`Relations`."""

# The columns of a block row's cache C: weight, sums of l', qm, qm^2, l' qm; the block row's
# share of the factor sum, that share when the pass started, and the change of the block row's
# own share of the prediction.
_N, _SE, _SQ, _SQQ, _SEQ, _QB, _Q0, _DY = (uint64(t) for t in range(8))
N_CACHE = 8  # one 64-byte cache line per block row


@njit(inline="always")
def _row(b):
    # Offset of block row b's cache in the flat view of C (C.reshape(-1)). Unsigned offsets
    # and the flat view spare numba's negative-index wraparound and the 2-D address
    # arithmetic: _block_features took 7 % less time on MovieLens-100K's blocks (0.630
    # against 0.676 ms per pass over both blocks, min of 40 alternated, same process).
    return uint64(N_CACHE) * uint64(b)


def block_caches(n_rows):
    """The work space ``(C, qn)`` of a :data:`Relations` record for ``n_rows`` block rows,
    zeroed, C aligned to 64 bytes so that each block row's cache is one cache line (numpy
    aligns to 16 bytes: a row straddling two lines cost 5 % of :func:`_block_features`'s time
    on MovieLens-100K)."""
    size = n_rows * N_CACHE
    buf = np.zeros(size + N_CACHE)
    start = (-buf.ctypes.data % 64) // buf.itemsize
    return buf[start:start + size].reshape(n_rows, N_CACHE), np.zeros(n_rows)


@njit(cache=True, nogil=True)
def _block_sums(rel, lo, hi, theta, col, out):
    # out[b] = sum_j theta[j, col] x_bj over the block rows lo..hi-1.
    for b in range(lo, hi):
        s = 0.0
        for p in range(rel.bptr[b], rel.bptr[b + 1]):
            s += theta[rel.bidx[p], col] * rel.bval[p]
        out[b] = s


@njit(cache=True, nogil=True)
def _prepare(rel, r, pa):
    # Block r's caches cleared but for the samples' total weight N (fixed); for a factor
    # pass its share qB of the factor sums, which the previous pass added up in ``qn`` (from
    # the same values: V's column f does not change between that pass and this one).
    C = rel.C
    for b in range(rel.boff[r], rel.boff[r + 1]):
        for t in range(N_CACHE):
            C[b, t] = 0.0
        C[b, _N] = rel.wsum[b]
        if pa.slot == 1:
            C[b, _QB] = rel.qn[b]
            C[b, _Q0] = rel.qn[b]
        rel.qn[b] = 0.0  # the next factor's sums, added up by _block_features


@njit(cache=True, nogil=True)
def _scatter(rel, r, pa, E):
    # Block r's changes written to every sample's row state (see _scatter_rows).
    _scatter_rows(rel, r, pa.slot, pa.cur, pa.nxt, pa.fn, E, 0, rel.ix.shape[1], False)


@njit(cache=True, nogil=True)
def _scatter_rows(rel, r, slot, cur, nxt, fn, E, lo, hi, dead):
    # Block r's changes written to the row states of samples lo..hi-1 (after the features'
    # update of a pass with slot, cur, nxt, fn): the block row's own share of the prediction
    # moved by DY, its cross term by qm DQ, its factor sum by DQ; plus its share of the next
    # factor's sums. ``dead``: the factor sums E[:, cur] are zeroed right after (the next
    # factor's first pass reuses the column), so their update is not written. (Loops written
    # out here and below: a call per sample passing arrays costs their reference counts. E
    # and C through flat views with unsigned offsets, as kernels.cd's _scatter_unit: no
    # negative-index wraparound.)
    C = rel.C.reshape(-1)
    qn = rel.qn
    ix = rel.ix[r]
    Ef = E.reshape(-1)
    cu = uint64(cur)
    nx = uint64(nxt)
    a = uint64(lo)
    z = uint64(hi)
    three = uint64(3)
    if slot == 0:
        if fn >= 0:
            for i in range(a, z):
                b = ix[i]
                e = three * i
                Ef[e] += C[_row(b) + _DY]
                Ef[e + nx] += qn[b]
        else:
            for i in range(a, z):
                Ef[three * i] += C[_row(ix[i]) + _DY]
        return
    if dead:  # fn >= 0 here: a next factor's pass follows
        for i in range(a, z):
            b = ix[i]
            k = _row(b)
            e = three * i
            q0 = C[k + _Q0]
            Ef[e] += C[k + _DY] + (Ef[e + cu] - q0) * (C[k + _QB] - q0)
            Ef[e + nx] += qn[b]
        return
    for i in range(a, z):
        b = ix[i]
        k = _row(b)
        e = three * i
        q0 = C[k + _Q0]
        dq = C[k + _QB] - q0
        qm = Ef[e + cu] - q0
        Ef[e] += C[k + _DY] + qm * dq
        Ef[e + cu] += dq
        if fn >= 0:
            Ef[e + nx] += qn[b]


@njit(cache=True, nogil=True)
def _gather(rel, r, pa, E, cfg):
    # Block r's caches from every sample's row state (see _gather_rows).
    _gather_rows(rel, r, pa.slot, pa.cur, E, cfg, 0, rel.ix.shape[1])


@njit(cache=True, nogil=True)
def _gather_rows(rel, r, slot, cur, E, cfg, lo, hi):
    """Block r's caches from the row states of samples lo..hi-1 (added to them): over the
    samples of each block row b, the sums of s l', s qm, s qm^2, s l' qm (N is fixed:
    ``wsum``).

    For a block whose samples come in runs of the same row (``grouped``: block 0, by which
    the samples are sorted) a run's sums are kept in registers and added to the row's cache
    when the run ends -- the same additions in the same order, without a chain of stores and
    loads of one address (0.15 against 0.26 ms per pass over MovieLens' 75,000 samples,
    measured by the branch while other work ran); a
    run cut by ``lo`` or ``hi`` is stored and loaded again, which changes no sum."""
    C = rel.C.reshape(-1)
    ix = rel.ix[r]
    Ef = E.reshape(-1)
    n = uint64(hi)
    cur = uint64(cur)
    three = uint64(3)
    one = uint64(1)
    fast = rel.unit and cfg.loss == SQUARED
    y = rel.rows.y
    if slot == 0:
        i = uint64(lo)
        while i < n:  # runs of one block row (of length 1 when the block is not grouped)
            b = ix[i]
            k = _row(b)
            se = C[k + _SE]
            while i < n and ix[i] == b:
                if fast:
                    se += Ef[three * i]
                else:
                    s = 1.0 if rel.unit else rel.sw[i]
                    se += s * _dloss(cfg.loss, Ef[three * i], y, i)
                i += one
            C[k + _SE] = se
        return
    if not rel.grouped[r]:
        for i in range(uint64(lo), n):
            k = _row(ix[i])
            t = three * i
            if fast:
                e = Ef[t]
                qm = Ef[t + cur] - C[k + _QB]
                C[k + _SE] += e
                C[k + _SQ] += qm
                C[k + _SQQ] += qm * qm
                C[k + _SEQ] += qm * e
            else:
                s = 1.0 if rel.unit else rel.sw[i]
                e = _dloss(cfg.loss, Ef[t], y, i)
                qm = Ef[t + cur] - C[k + _QB]
                h = s * qm
                C[k + _SE] += s * e
                C[k + _SQ] += h
                C[k + _SQQ] += h * qm
                C[k + _SEQ] += h * e
        return
    i = uint64(lo)
    while i < n:
        b = ix[i]
        k = _row(b)
        qb = C[k + _QB]
        se = C[k + _SE]
        sq = C[k + _SQ]
        sqq = C[k + _SQQ]
        seq = C[k + _SEQ]
        while i < n and ix[i] == b:
            t = three * i
            if fast:
                e = Ef[t]
                qm = Ef[t + cur] - qb
                se += e
                sq += qm
                sqq += qm * qm
                seq += qm * e
            else:
                s = 1.0 if rel.unit else rel.sw[i]
                e = _dloss(cfg.loss, Ef[t], y, i)
                qm = Ef[t + cur] - qb
                h = s * qm
                se += s * e
                sq += h
                sqq += h * qm
                seq += h * e
            i += one
        C[k + _SE] = se
        C[k + _SQ] = sq
        C[k + _SQQ] = sqq
        C[k + _SEQ] = seq


@njit(cache=True, nogil=True)
def _scatter_gather(rel, r, r2, pa, E):
    """:func:`_scatter` of block r then :func:`_gather` of block r2 in one pass over the
    samples: a factor pass, unit weights, the squared loss, block r2 not grouped (the same
    operations in the same order; 0.22 against 0.26 ms on MovieLens' 75,000 samples)."""
    C = rel.C.reshape(-1)
    qn = rel.qn
    ix = rel.ix[r]
    ix2 = rel.ix[r2]
    Ef = E.reshape(-1)
    cur = uint64(pa.cur)
    nxt = uint64(pa.nxt)
    fn = pa.fn
    three = uint64(3)
    n = uint64(ix.shape[0])
    i = uint64(0)
    while i < n:  # runs of one row of block r (of length 1 unless it is grouped)
        b = ix[i]
        k = _row(b)
        q0 = C[k + _Q0]
        dq = C[k + _QB] - q0
        dy = C[k + _DY]
        qnb = qn[b] if fn >= 0 else 0.0
        while True:
            t = three * i
            q = Ef[t + cur]
            e = Ef[t] + (dy + (q - q0) * dq)
            q += dq
            Ef[t] = e
            Ef[t + cur] = q
            if fn >= 0:
                Ef[t + nxt] += qnb
            k2 = _row(ix2[i])
            qm = q - C[k2 + _QB]
            C[k2 + _SE] += e
            C[k2 + _SQ] += qm
            C[k2 + _SQQ] += qm * qm
            C[k2 + _SEQ] += qm * e
            i += uint64(1)
            if i == n or ix[i] != b:
                break


@njit(cache=True, nogil=True, fastmath={"contract"})
def _block_features(rel, r, pa, group, cfg):
    # Every feature of block r once, in index order, from and into the block rows' caches;
    # the second visit of a feature's entries also adds its share of the next factor's sums
    # (qn, cleared by _prepare; V's next column does not change in this pass). A factor's
    # sums are written with u = qB[b] - v_jf x_bj (a_b = x_bj u): g = sum_b x_bj (u SE[b] +
    # SEQ[b]), hh = sum_b x_bj^2 (u (u N[b] + 2 SQ[b]) + SQQ[b]) (the module docstring's
    # sums, factored), where SE and SEQ are the current ones, read lazily from the gathered
    # SE0, SEQ0 and the block row's changes so far (DY, DQ = QB - Q0; see the module
    # docstring): SE = SE0 + c (N DY + SQ DQ), SEQ = SEQ0 + c (SQ DY + SQQ DQ). A step then
    # writes only DY += delta x_bj u and QB += delta x_bj per entry (and qn): 4 stores and
    # about 22 floating-point operations per entry over both visits instead of 6 and 31 for
    # the eager updates of SE and SEQ, 6 % less time in this function within the MCMC sweep
    # on MovieLens-100K (4.79 against 5.09 ms per sweep, median of 8 alternated rounds of 40
    # sweeps in one process, load 7). The sums round otherwise (by ulps of their terms; the
    # chain moves by ulps, its test RMSE by less than 1e-4).
    # Compiled with fused multiply-adds (fastmath "contract" only: no flag that assumes no
    # NaN or infinity, which the divergence test needs): a product and the sum it feeds are
    # rounded once, so the sums move by ulps and the chain is not bit for bit the one of
    # separate multiplies and adds; 10 % less time (0.571 against 0.633 ms per pass over
    # MovieLens-100K's two blocks, min of 40 alternated in one process, load 8-10). The
    # same kernel runs on every thread count and in the Dask backend's client (whose
    # partitions' sums fill SE0, SQ, SQQ, SEQ0 as the gather does).
    C = rel.C.reshape(-1)  # block row b's cache at C[8 b:8 b + 8] (see _row)
    qn = rel.qn
    cidx = rel.cidx
    cval = rel.cval
    d0 = rel.foff[0]
    theta = pa.theta
    col = pa.col
    V = pa.V
    fn = pa.fn
    c = cfg.curv
    for j in range(rel.foff[r], rel.foff[r + 1]):
        old = theta[j, col]
        g = 0.0
        hh = 0.0
        lo = uint64(rel.cptr[j - d0])
        hi = uint64(rel.cptr[j - d0 + 1])
        if pa.slot == 0:
            for p in range(lo, hi):
                b = cidx[p]
                k = _row(b)
                x = cval[p]
                nb = C[k + _N]
                g += x * (C[k + _SE] + c * nb * C[k + _DY])
                hh += x * x * nb
        else:
            for p in range(lo, hi):
                b = cidx[p]
                k = _row(b)
                x = cval[p]
                qb = C[k + _QB]
                dq = qb - C[k + _Q0]
                dy = C[k + _DY]
                nb = C[k + _N]
                sq = C[k + _SQ]
                sqq = C[k + _SQQ]
                se = C[k + _SE] + c * (nb * dy + sq * dq)
                seq = C[k + _SEQ] + c * (sq * dy + sqq * dq)
                u = qb - old * x
                g += x * (u * se + seq)
                hh += x * x * (u * (u * nb + sq + sq) + sqq)
        noise = pa.z[pa.z0 + j] if cfg.sample else 0.0
        gj = group[j]
        theta[j, col] = _step(old, g, hh, pa.lam[gj], pa.mu[gj], pa.alpha, c, noise,
                              cfg.sample, cfg.relax)
        delta = theta[j, col] - old  # in the model's precision, as kernels.cd
        vn = V[j, fn] if fn >= 0 else 0.0
        if delta == 0.0:
            if fn >= 0:
                for p in range(lo, hi):
                    qn[cidx[p]] += vn * cval[p]
            continue
        if pa.slot == 0:
            for p in range(lo, hi):
                b = cidx[p]
                x = cval[p]
                C[_row(b) + _DY] += delta * x
                qn[b] += vn * x
        else:
            for p in range(lo, hi):
                b = cidx[p]
                k = _row(b)
                x = cval[p]
                qb = C[k + _QB]
                dx = delta * x
                C[k + _DY] += dx * (qb - old * x)
                C[k + _QB] = qb + dx
                qn[b] += vn * x


@njit(cache=True, nogil=True)
def _flush(cols, plan, V, E, loss, par):
    """Write the changes of the row-level pass's last colour class to the row states.

    :func:`kernels.cd._sweep_pass` leaves them to the first fused pass of the next factor
    (``plan.pend``) when a factor follows; the block passes read the row states (E[:, 0] and
    the factor sums), so they are written here first, by the same scatter of ``kernels.cd``
    (its :func:`~fmlearn.kernels.cd._fused` pass with nothing gathered)."""
    pend = plan.pend
    if pend[0] < 0:
        return
    sc = _Side(pend[0], pend[1], pend[2], pend[3], pend[4], pend[5])
    _fused(cols, plan, E, sc, _Side(-1, 0, 0, 0, -1, 0), -1, V, loss, par)
    pend[0] = -1


# plan.pend[0] of a relational sweep between two passes when the changes of the last block
# are still to be written (plan.pend[1:5]: that pass's slot, cur, nxt, fn): the next pass
# writes them in its first pass over the samples (_rows_pass).
_BLOCK_PENDING = -2


@njit(cache=True, nogil=True)
def _serial_class(plan, c, par):
    # Whether kernels.cd runs the fused passes of row-level class c serially (over all rows
    # in order, one running sum per feature) -- as its _fused and _sweep_pass decide with
    # nothing pending: the class is not blocked or the plan runs no blocks.
    return par is None or plan.bptr.shape[1] <= 2 or plan.bidx[c] == -1


@njit(cache=True, nogil=True)
def _scatter_first_unit(rel, plan, gslot, gcur, E, buf, zero, slot, cur, nxt, fn, dead):
    """:func:`_scatter_first_class` sample by sample, for unit weights, the squared loss and a
    first row-level class with one entry of value 1 in every sample (a day as a category):
    the last block's changes (pass ``slot, cur, nxt, fn``), the zeroed column, then the
    class's sums (pass ``gslot, gcur``; ``kernels.cd._gather_unit``'s arithmetic, a run of
    one feature summed in registers) -- per sample the operations of the separate passes in
    their order, so the same values, with the row state read once. Within the MCMC sweep on
    MovieLens-100K's relation blocks this and :func:`_flush_gather_unit` took 1.73 and 1.20
    ms per sweep against 1.96 and 1.42 for the separate passes (5 % of the sweep; two
    alternated rounds of 200 sweeps in one process, load 9; the chunked fusion of
    :func:`_scatter_first_class` alone measured no gain)."""
    C = rel.C.reshape(-1)
    qn = rel.qn
    ix = rel.ix[rel.ix.shape[0] - 1]
    Ef = E.reshape(-1)
    etpos = rel.rows.etpos
    lo = uint64(plan.eptr[0])
    old = plan.old[buf]
    G = plan.G[0]
    H = plan.H[0]
    n = uint64(ix.shape[0])
    if n == 0:
        return
    three = uint64(3)
    cu = uint64(cur)
    nx = uint64(nxt)
    gc = uint64(gcur)
    zc = uint64(max(zero, 0))
    tp = uint64(etpos[lo])
    g = G[tp]
    hh = H[tp]
    for i in range(n):
        e = three * i
        b = ix[i]
        k = _row(b)
        if slot == 0:
            Ef[e] += C[k + _DY]
        else:
            q0 = C[k + _Q0]
            dq = C[k + _QB] - q0
            Ef[e] += C[k + _DY] + (Ef[e + cu] - q0) * dq
            if not dead:
                Ef[e + cu] += dq
        if fn >= 0:
            Ef[e + nx] += qn[b]
        if zero >= 0:
            Ef[e + zc] = 0.0
        t = uint64(etpos[lo + i])
        if t != tp:
            G[tp] = g
            H[tp] = hh
            tp = t
            g = G[t]
            hh = H[t]
        if gslot == 0:
            g += Ef[e]
            hh += 1.0
        else:
            h = Ef[e + gc] - old[t]
            g += Ef[e] * h
            hh += h * h
    G[tp] = g
    H[tp] = hh


@njit(cache=True, nogil=True)
def _scatter_first_class(rel, plan, pa, E, cfg, buf, zero):
    """The first pass over the samples of a factor pass whose previous pass left its last
    block's changes pending: chunk by chunk of ``kernels.cd.CHUNK_ROWS`` samples, the
    block's changes written (:func:`_scatter_rows`), the next factor's column zeroed
    (``zero`` >= 0), then row-level class 0's sums gathered (``kernels.cd._gather`` into
    ``G[0]``, ``H[0]``): per sample the operations of the separate passes in their order, so
    the same values; the chunk's row states are still in cache for the gather. When ``zero``
    is the pending pass's factor column, its update is not written (it is zeroed next)."""
    pend = plan.pend
    cols = rel.rows
    r = rel.ix.shape[0] - 1
    slot, cur, nxt, fn = pend[1], pend[2], pend[3], pend[4]
    dead = slot == 1 and zero == cur
    ga = _Side(0, pa.slot, pa.cur, pa.nxt, pa.fn, buf)
    for t in range(plan.color_ptr[1] - plan.color_ptr[0]):
        plan.G[0, t] = 0.0
        plan.H[0, t] = 0.0
    pend[0] = -1
    if rel.unit and cfg.loss == SQUARED and plan.roff[0] < 0 and plan.xoff[0] < 0:
        _scatter_first_unit(rel, plan, pa.slot, pa.cur, E, buf, zero, slot, cur, nxt, fn,
                            dead)
        return
    n = E.shape[0]
    qg = 0
    a = 0
    while a < n:
        z = min(n, a + CHUNK_ROWS)
        _scatter_rows(rel, r, slot, cur, nxt, fn, E, a, z, dead)
        if zero >= 0:
            for i in range(a, z):
                E[i, zero] = 0.0
        qg = _class_gather(cols, plan, E, ga, cfg.loss, 0, qg, z)
        a = z


@njit(cache=True, nogil=True)
def _rows_pass(rel, plan, pa, group, E, cfg, par):
    """The row-level features' pass: :func:`kernels.cd._sweep_pass`, with the pending
    changes of the previous pass's last block (``plan.pend[0]`` = ``_BLOCK_PENDING``)
    written first -- in the same pass over the samples as the gather of the first colour
    class (:func:`_scatter_first_class`) when that class runs serially, else by a pass of
    their own."""
    pend = plan.pend
    n_classes = plan.color_ptr.shape[0] - 1
    if pend[0] == _BLOCK_PENDING and (n_classes == 0 or not _serial_class(plan, 0, par)):
        _scatter_rows(rel, rel.ix.shape[0] - 1, pend[1], pend[2], pend[3], pend[4], E, 0,
                      E.shape[0], False)
        pend[0] = -1
    if pend[0] != _BLOCK_PENDING:
        _sweep_pass(rel.rows, plan, pa, group, E, cfg, par)
        return
    # kernels.cd._sweep_pass's class loop, its first fused pass replaced (nothing of the
    # row-level classes is pending: the previous pass wrote its last class before its blocks)
    zero = pa.nxt if pa.fn >= 0 else -1
    n_blocks = plan.bptr.shape[1] - 1
    for c in range(n_classes):
        buf = 1 - pend[5]
        lo = plan.color_ptr[c]
        old = plan.old[buf]
        for t in range(plan.color_ptr[c + 1] - lo):
            old[t] = pa.theta[plan.order[lo + t], pa.col]
        if c == 0:
            _scatter_first_class(rel, plan, pa, E, cfg, buf, zero)
            blocked = False
        else:
            sc = _Side(pend[0], pend[1], pend[2], pend[3], pend[4], pend[5])
            ga = _Side(c, pa.slot, pa.cur, pa.nxt, pa.fn, buf)
            _fused(rel.rows, plan, E, sc, ga, -1, pa.V, cfg.loss, par)
            blocked = par is not None and n_blocks > 1 and plan.bidx[c] != -1 and (
                sc.c < 0 or plan.bidx[sc.c] != -1)
        _class_step(plan, c, pa, group, cfg, buf, n_blocks if blocked else 1)
        pend[0] = c
        pend[1] = pa.slot
        pend[2] = pa.cur
        pend[3] = pa.nxt
        pend[4] = pa.fn
        pend[5] = buf
    if pa.fn < 0:
        sc = _Side(pend[0], pend[1], pend[2], pend[3], pend[4], pend[5])
        _fused(rel.rows, plan, E, sc, _Side(-1, 0, 0, 0, -1, 0), -1, pa.V, cfg.loss, par)
        pend[0] = -1


@njit(cache=True, nogil=True)
def _flush_gather_unit(rel, plan, c, slot, cur, nxt, fn, buf, gslot, gcur, E):
    """:func:`_flush_gather` sample by sample, for unit weights, the squared loss and a last
    row-level class c with one entry of value 1 in every sample: the class's changes
    (``kernels.cd._scatter_unit``'s arithmetic, pass ``slot, cur, nxt, fn``) then block 0's
    sums (pass ``gslot, gcur``; :func:`_gather_rows`'s arithmetic, a run of one block row
    summed in registers) -- the same values, with the row state read once."""
    C = rel.C.reshape(-1)
    ix = rel.ix[0]
    Ef = E.reshape(-1)
    etpos = rel.rows.etpos
    lo = uint64(plan.eptr[c])
    old = plan.old[buf]
    delta = plan.delta[buf]
    vn = plan.vn[buf]
    n = uint64(ix.shape[0])
    three = uint64(3)
    cu = uint64(cur)
    nx = uint64(nxt)
    gc = uint64(gcur)
    i = uint64(0)
    while i < n:  # runs of one row of block 0 (of length 1 unless it is grouped)
        b = ix[i]
        k = _row(b)
        qb = C[k + _QB]
        se = C[k + _SE]
        sq = C[k + _SQ]
        sqq = C[k + _SQQ]
        seq = C[k + _SEQ]
        while True:
            e = three * i
            t = uint64(etpos[lo + i])
            d = delta[t]
            if slot == 0:
                Ef[e] += d
            else:
                Ef[e] += d * (Ef[e + cu] - old[t])
                Ef[e + cu] += d
            if fn >= 0:
                Ef[e + nx] += vn[t]
            r = Ef[e]
            se += r
            if gslot == 1:
                qm = Ef[e + gc] - qb
                sq += qm
                sqq += qm * qm
                seq += qm * r
            i += uint64(1)
            if i == n or ix[i] != b:
                break
        C[k + _SE] = se
        if gslot == 1:
            C[k + _SQ] = sq
            C[k + _SQQ] = sqq
            C[k + _SEQ] = seq


@njit(cache=True, nogil=True)
def _flush_gather(rel, plan, pa, E, cfg):
    """The changes of the row-level pass's last colour class (pending, ``plan.pend``)
    written to the row states and block 0's caches gathered from them, in one pass over
    the samples, chunk by chunk (``kernels.cd._scatter`` then :func:`_gather_rows` on each
    chunk: per sample the operations of :func:`_flush` and :func:`_gather`, in their order)."""
    pend = plan.pend
    sc = _Side(pend[0], pend[1], pend[2], pend[3], pend[4], pend[5])
    pend[0] = -1
    if sc.c < 0:  # nothing pending
        _gather_rows(rel, 0, pa.slot, pa.cur, E, cfg, 0, E.shape[0])
        return
    if rel.unit and cfg.loss == SQUARED and plan.roff[sc.c] < 0 and plan.xoff[sc.c] < 0:
        _flush_gather_unit(rel, plan, sc.c, sc.slot, sc.cur, sc.nxt, sc.fn, sc.buf, pa.slot,
                           pa.cur, E)
        return
    n = E.shape[0]
    qs = 0
    a = 0
    while a < n:
        z = min(n, a + CHUNK_ROWS)
        qs = _class_scatter(rel.rows, plan, E, sc, pa.V, qs, z)
        _gather_rows(rel, 0, pa.slot, pa.cur, E, cfg, a, z)
        a = z


@njit(cache=True, nogil=True)
def _relation_pass(rel, plan, pa, group, E, cfg, par):
    # The row-level features with kernels.cd's pass (which clears and starts the next
    # factor's column), then block after block: gather its caches, update its features, write
    # its changes (and its share of the next factor's sums) back to the row states. Passes
    # over the samples are fused where the order of operations per sample allows: the last
    # row-level class's changes with block 0's gather, block r's changes with block r + 1's
    # gather, the last block's changes with the next factor's first row-level gather (left
    # pending in plan.pend when a factor follows: gibbs_sweep's next call is that factor's
    # pass).
    B = rel.ix.shape[0]
    _rows_pass(rel, plan, pa, group, E, cfg, par)
    if B == 0:
        return
    _prepare(rel, 0, pa)
    if plan.pend[0] >= 0 and _serial_class(plan, plan.pend[0], par):
        _flush_gather(rel, plan, pa, E, cfg)
    else:
        _flush(rel.rows, plan, pa.V, E, cfg.loss, par)
        _gather(rel, 0, pa, E, cfg)
    fuse = pa.slot == 1 and rel.unit and cfg.loss == SQUARED
    for r in range(B):
        _block_features(rel, r, pa, group, cfg)
        if r + 1 == B:
            if pa.fn >= 0:
                pend = plan.pend
                pend[0] = _BLOCK_PENDING
                pend[1] = pa.slot
                pend[2] = pa.cur
                pend[3] = pa.nxt
                pend[4] = pa.fn
            else:
                _scatter(rel, r, pa, E)
            break
        _prepare(rel, r + 1, pa)
        if fuse and not rel.grouped[r + 1]:
            _scatter_gather(rel, r, r + 1, pa, E)
        else:
            _scatter(rel, r, pa, E)
            _gather(rel, r + 1, pa, E, cfg)


@overload(sweep_bias)
def _relation_bias(cols, E, w0, alpha, noise, cfg):
    if is_record(cols, Relations):
        return lambda cols, E, w0, alpha, noise, cfg: bias_step(cols.rows, E, w0, alpha,
                                                                noise, cfg)
    return None


@overload(sweep_pass)
def _relation_sweep_pass(cols, plan, pa, group, E, work, cfg):
    if is_record(cols, Relations):
        return lambda cols, plan, pa, group, E, work, cfg: _relation_pass(cols, plan, pa, group,
                                                                          E, cfg, work)
    return None


def relation_sweep(rel, plan, prior, model, E, z, g, cfg):
    """One sweep of ALS (``cfg.sample`` False) or MCMC over every parameter of the model of the
    expanded rows, in place, with the arguments of :func:`fmlearn.kernels.cd.coordinate_sweep`
    (``plan`` is the row-level features' plan); returns True when everything is finite."""
    return _relation_sweep(rel, plan, prior, model, E, z, g, cfg, _parallel_flag(plan))


def compile_relation_sweep(rel, plan, prior, model, E, z, g, cfg):
    """Compile (or load from numba's cache) :func:`relation_sweep` for these arguments."""
    compile_for(_relation_sweep, rel, plan, prior, model, E, z, g, cfg, _parallel_flag(plan))


@njit(cache=True)
def _relation_sweep(rel, plan, prior, model, E, z, g, cfg, par):
    plan.pend[0] = -1  # no class's changes pending (see kernels.cd._coordinate_sweep)
    return gibbs_sweep(rel, plan, prior, model, E, E[:, 0], par, z, g, cfg)


# -- prediction ---------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _used_rows(rr):
    used = np.zeros(rr.bptr.shape[0] - 1, dtype=np.bool_)
    for r in range(rr.ix.shape[0]):
        for i in range(rr.ix.shape[1]):
            used[rr.ix[r, i]] = True
    return used


@njit(cache=True, nogil=True)
def _tables(rr, used, w, V, T):
    # T[b] = [sum_j w_j x_bj, sum_j v_jf x_bj (k), sum_j v_jf^2 x_bj^2 (k)] for used block rows.
    k = V.shape[1]
    for b in range(T.shape[0]):
        if not used[b]:
            continue
        for t in range(1 + 2 * k):
            T[b, t] = 0.0
        for p in range(rr.bptr[b], rr.bptr[b + 1]):
            j = rr.bidx[p]
            x = rr.bval[p]
            T[b, 0] += w[j] * x
            for f in range(k):
                t = V[j, f] * x
                T[b, 1 + f] += t
                T[b, 1 + k + f] += t * t


@njit(cache=True, nogil=True)
def _sample_rows(rr, T, w0, w, V, q, qq, probit, lo, hi, add, out):
    # f(x_i) of every sample from its row-level features and its block rows' tables; with
    # ``add`` the clipped value (or Phi(f) when ``probit``) is added to out[i].
    k = V.shape[1]
    B = rr.ix.shape[0]
    for i in range(rr.indptr.shape[0] - 1):
        acc = np.float64(w0)
        for f in range(k):
            q[f] = 0.0
            qq[f] = 0.0
        for r in range(B):
            b = rr.ix[r, i]
            acc += T[b, 0]
            for f in range(k):
                q[f] += T[b, 1 + f]
                qq[f] += T[b, 1 + k + f]
        for p in range(rr.indptr[i], rr.indptr[i + 1]):
            j = rr.indices[p]
            x = rr.data[p]
            acc += w[j] * x
            for f in range(k):
                t = V[j, f] * x
                q[f] += t
                qq[f] += t * t
        for f in range(k):
            acc += 0.5 * (q[f] * q[f] - qq[f])
        if not add:
            out[i] = acc
        elif probit:
            out[i] += 0.5 * math.erfc(-acc / math.sqrt(2.0))
        else:
            out[i] += min(max(acc, lo), hi)


@njit(cache=True)
def relation_predict(rr, w0, w, V, out):
    """Write f(x_i) of every relational sample of ``rr`` (:data:`RelationRows`) into ``out``
    (float64) and return it: the model of the expanded rows (``kernels.predict``'s
    ``fm_predict_csr`` on them, up to the order of the sums)."""
    k = V.shape[1]
    T = np.empty((rr.bptr.shape[0] - 1, 1 + 2 * k))
    _tables(rr, _used_rows(rr), w, V, T)
    _sample_rows(rr, T, w0, w, V, np.empty(k), np.empty(k), False, 0.0, 0.0, False, out)
    return out


@njit(cache=True)
def relation_predict_samples(rr, W0s, Ws, Vs, probit, lo, hi, out):
    """The MCMC posterior-mean predictor of ``kernels.predict.fm_predict_samples_csr`` on
    relational samples: the average over the kept samples s of min(max(f_s(x_i), lo), hi), or
    of Phi(f_s(x_i)) when ``probit``; samples in order, so the result is that of the flat
    kernel up to the order of the sums within a prediction."""
    S = W0s.shape[0]
    k = Vs.shape[2]
    T = np.empty((rr.bptr.shape[0] - 1, 1 + 2 * k))
    used = _used_rows(rr)
    q = np.empty(k)
    qq = np.empty(k)
    for i in range(out.shape[0]):
        out[i] = 0.0
    for s in range(S):
        _tables(rr, used, Ws[s], Vs[s], T)
        _sample_rows(rr, T, W0s[s], Ws[s], Vs[s], q, qq, probit, lo, hi, True, out)
    for i in range(out.shape[0]):
        out[i] /= S
    return out


# -- one partition's share of a block pass (the Dask backend, fmlearn.distributed) --------------
@njit(cache=True, nogil=True)
def partition_block_round(ix_out, ix_in, E, y, sw, unit, loss, slot, cur, nxt, fn, dy, q0, qb,
                          qn, qb_in, out):
    """A partition's samples in one pass: the changes of a block (``ix_out`` the samples' rows
    of it, local to the block; empty: none) written to the row states as :func:`_scatter`
    does -- ``dy``, ``q0``, ``qb``, ``qn`` the block rows' DY, qB at the pass's start, qB now
    and share of the next factor's sums -- then the partition's share of the caches of the
    next block (``ix_in``; empty: none) gathered as :func:`_gather` does into ``out`` (its
    rows x [SE, SQ, SQQ, SEQ], overwritten; ``qb_in`` its rows' qB). The client adds the
    partitions' shares in partition order."""
    for t in range(out.shape[0]):
        for c in range(4):
            out[t, c] = 0.0
    n = E.shape[0]
    scatter = ix_out.shape[0] > 0
    gather = ix_in.shape[0] > 0
    for i in range(n):
        if scatter:
            b = ix_out[i]
            if slot == 0:
                E[i, 0] += dy[b]
            else:
                d = qb[b] - q0[b]
                E[i, 0] += dy[b] + (E[i, cur] - q0[b]) * d
                E[i, cur] += d
            if fn >= 0:
                E[i, nxt] += qn[b]
        if gather:
            b = ix_in[i]
            s = 1.0 if unit else sw[i]
            e = E[i, 0] if loss == SQUARED else _dloss(loss, E[i, 0], y, i)
            out[b, 0] += s * e
            if slot == 1:
                qm = E[i, cur] - qb_in[b]
                t = s * qm
                out[b, 1] += t
                out[b, 2] += t * qm
                out[b, 3] += t * e


def client_block_step(rel, r, pa, group, cfg, sums):
    """The client's part of block r's pass in the Dask backend: the block rows' caches from
    the partitions' summed ``sums`` (rows x [SE, SQ, SQQ, SEQ]; N and qB prepared by
    :func:`prepare_block`), then the block's features (:func:`_block_features`)."""
    lo, hi = rel.boff[r], rel.boff[r + 1]
    rel.C[lo:hi, _SE] = sums[:, 0]
    rel.C[lo:hi, _SQ] = sums[:, 1]
    rel.C[lo:hi, _SQQ] = sums[:, 2]
    rel.C[lo:hi, _SEQ] = sums[:, 3]
    _block_features(rel, r, pa, group, cfg)


def prepare_block(rel, r, pa):
    """:func:`_prepare` of block r (the client's caches before its gather round); returns the
    block rows' qB (what the partitions' gather needs)."""
    _prepare(rel, r, pa)
    return rel.C[rel.boff[r]:rel.boff[r + 1], _QB].copy()


def block_changes(rel, r):
    """Block r's ``(dy, q0, qb, qn)`` after its features' update: what the partitions write to
    their row states (:func:`partition_block_round`)."""
    lo, hi = rel.boff[r], rel.boff[r + 1]
    C = rel.C
    return (C[lo:hi, _DY].copy(), C[lo:hi, _Q0].copy(), C[lo:hi, _QB].copy(),
            rel.qn[lo:hi].copy())
