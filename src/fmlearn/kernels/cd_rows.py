"""Colour-class steps of the coordinate sweep (``kernels.cd``) on one block of rows.

The distributed ALS / MCMC sweep (:mod:`fmlearn.distributed`) keeps each partition's rows and
its row cache ``E`` (the (n, 3) cache of ``kernels.cd``) on a worker. Updating one colour
class (features that never share a row) needs the rows only through two per-feature sums,
``g_j = sum_i s_i l'_i h_ij`` and ``hh_j = sum_i s_i h_ij^2``, and then a change of each
row's cache by the class's new values. :func:`class_round` does both on a partition, visiting
the rows of the two classes it touches (:func:`class_rows`): it applies the changes of the
class updated last (``Apply``), then gathers the sums of the next class (``Gather``) into
``G``, ``H`` (indexed by the feature's place in its class). Each row holds at most one
feature of a class, so the row's changes and sums are those of
:func:`fmlearn.kernels.cd._rows_pass` (the in-memory row-wise class sweep), entry for entry.
"""

import math
from collections import namedtuple

import numpy as np

from ._jit import njit
from .cd import _dloss, _fused, _Side, _step, scatter_delta

Rows = namedtuple("Rows", ["indptr", "indices", "data", "y", "sw", "unit"])
Rows.__doc__ = """A partition's CSR arrays, its targets or labels ``y`` and weights ``sw``
(float64); ``unit`` is True when every weight is 1 (then ``sw`` is not read)."""

Apply = namedtuple("Apply", ["shift", "c", "slot", "cur", "nxt", "old", "delta", "vn", "zero"])
Apply.__doc__ = """Changes to the row cache: ``shift`` added to every ``E[i, 0]`` (the change
of w0), then those of colour class ``c`` (-1: none): its features' previous values ``old``
and changes ``delta`` (class-length, float64) of w (``slot`` 0) or of the factor whose sums
are cache column ``cur`` (slot 1); ``vn`` (class-length, or empty) the values of the next
factor, added to column ``nxt``. ``zero`` (-1: none) is a cache column set to 0 after the
changes (the next pass's factor sums start from 0)."""

Gather = namedtuple("Gather", ["c", "slot", "cur", "old", "loss"])
Gather.__doc__ = """Sums of colour class ``c`` (-1: none) for w (``slot`` 0) or the factor
whose sums are cache column ``cur``; ``old`` the class's current values, ``loss`` the loss
code of ``kernels.cd``."""


ClassRows = namedtuple("ClassRows", ["ptr", "row", "entry"])
ClassRows.__doc__ = """A partition's rows by colour class: class c's rows are
``row[ptr[c]:ptr[c + 1]]`` (increasing) with the CSR entry ``entry`` of their feature in class
c (a row holds at most one; :func:`class_rows`)."""


@njit(cache=True, nogil=True)
def _class_rows(indptr, indices, color, n_classes, ptr, row, entry, fill):
    # counting (fill=False: ptr[c + 1] = class c's rows) or filling pass; a row's first entry
    # of class c only (what kernels.cd._class_entry finds; a row holds at most one)
    n = indptr.shape[0] - 1
    last = np.full(n_classes, -1, np.int64)
    at = ptr[:-1].copy()
    for i in range(n):
        for p in range(indptr[i], indptr[i + 1]):
            c = color[indices[p]]
            if c >= 0 and last[c] != i:
                last[c] = i
                if fill:
                    row[at[c]] = i
                    entry[at[c]] = p
                    at[c] += 1
                else:
                    ptr[c + 1] += 1


def class_rows(indptr, indices, color):
    """The :class:`ClassRows` of a partition's CSR rows under the colouring ``color`` (a
    counting pass and a filling pass; int64 arrays of at most nnz entries)."""
    n_classes = int(color.max()) + 1 if color.shape[0] else 0
    ptr = np.zeros(n_classes + 1, np.int64)
    none = np.empty(0, np.int64)
    _class_rows(indptr, indices, color, n_classes, ptr, none, none, False)
    np.cumsum(ptr, out=ptr)
    row = np.empty(ptr[-1], np.int64)
    entry = np.empty(ptr[-1], np.int64)
    _class_rows(indptr, indices, color, n_classes, ptr, row, entry, True)
    return ClassRows(ptr, row, entry)


@njit(cache=True, nogil=True)
def class_round(rows, crows, pos, E, ap, ga, G, H):
    """Apply ``ap`` to every row, then gather the sums of ``ga`` into ``G``, ``H``
    (class-length, overwritten). ``crows`` (:class:`ClassRows`) lists each class's rows and
    entries, so a round visits only the rows of the two classes it touches (and every row for
    a change of w0 or a cache column set to 0): each row sees the same operations in the same
    order as in one pass over all rows, and each feature's sums add its rows in increasing
    order, so the result is that of a pass over every row, bit for bit. The work falls where
    the colour classes are many (multi-hot rows); with two one-hot fields each class holds a
    feature of every row and the round costs what a pass over all rows did."""
    for t in range(G.shape[0]):
        G[t] = 0.0
        H[t] = 0.0
    has_next = ap.vn.shape[0] > 0
    n = rows.indptr.shape[0] - 1
    if ap.shift != 0.0:
        for i in range(n):
            E[i, 0] += ap.shift
    if ap.c >= 0:
        for q in range(crows.ptr[ap.c], crows.ptr[ap.c + 1]):
            i = crows.row[q]
            p = crows.entry[q]
            t = pos[rows.indices[p]]
            x = rows.data[p]
            scatter_delta(E, i, ap.slot, ap.cur, ap.delta[t], x, ap.old[t])
            if has_next:
                E[i, ap.nxt] += ap.vn[t] * x
    if ap.zero >= 0:
        for i in range(n):
            E[i, ap.zero] = 0.0
    if ga.c >= 0:
        for q in range(crows.ptr[ga.c], crows.ptr[ga.c + 1]):
            i = crows.row[q]
            p = crows.entry[q]
            t = pos[rows.indices[p]]
            x = rows.data[p]
            h = x if ga.slot == 0 else x * (E[i, ga.cur] - ga.old[t] * x)
            s = 1.0 if rows.unit else rows.sw[i]
            G[t] += s * _dloss(ga.loss, E[i, 0], rows.y, i) * h
            H[t] += s * h * h


@njit(cache=True, nogil=True)
def layout_round(cols, plan, E, ap, ga):
    """:func:`class_round` on a partition laid out class-major (the in-memory sweep's
    :data:`fmlearn.kernels.cd.Columns` and :data:`~fmlearn.kernels.cd.Plan` of the partition's
    rows under the fit's colouring, one block): the fused pass of ``kernels.cd`` (the
    scatter of class ``ap.c`` and the gather of class ``ga.c`` chunk by chunk, streaming each
    class's entries and ``E`` in row order) in place of a walk through the CSR rows. Returns
    nothing: the sums of ``ga.c`` are in ``plan.G[0, :m]``, ``plan.H[0, :m]``.

    Each row sees the same operations in the same order as in :func:`class_round` and each
    feature's sums add its rows in increasing order (the serial gather, one running sum per
    feature), with the same arithmetic (the unit-value paths drop multiplications by 1,
    which are exact), so the result equals :func:`class_round`'s bit for bit (tested). On
    one-hot rows a round costs what a class pass of the in-memory sweep costs (about 2 ns per
    row against 16-18 ns for the walk through the CSR rows)."""
    if ap.shift != 0.0:
        for i in range(E.shape[0]):
            E[i, 0] += ap.shift
    fn = -1
    if ap.c >= 0:
        for t in range(ap.delta.shape[0]):
            plan.old[0, t] = ap.old[t]
            plan.delta[0, t] = ap.delta[t]
        if ap.vn.shape[0] > 0:
            fn = 0
            for t in range(ap.vn.shape[0]):
                plan.vn[0, t] = ap.vn[t]
    if ga.c >= 0:
        for t in range(ga.old.shape[0]):
            plan.old[1, t] = ga.old[t]
    sc = _Side(ap.c, ap.slot, ap.cur, ap.nxt, fn, 0)
    gs = _Side(ga.c, ga.slot, ga.cur, 0, -1, 1)
    _fused(cols, plan, E, sc, gs, ap.zero, plan.G, ga.loss, None)


@njit(cache=True, nogil=True)
def bias_sums(rows, E, loss):
    """``(sum s_i l'_i, sum s_i, sum s_i E[i, 0]^2, all E[:, 0] finite)``: the sums of the w0
    step (h_i = 1) and of the noise precision's draw."""
    g = 0.0
    hh = 0.0
    rss = 0.0
    ok = True
    for i in range(E.shape[0]):
        s = 1.0 if rows.unit else rows.sw[i]
        r = E[i, 0]
        ok = ok and math.isfinite(r)
        g += s * _dloss(loss, r, rows.y, i)
        hh += s
        rss += s * r * r
    return g, hh, rss, ok


Step = namedtuple("Step", ["group", "lam", "mu", "alpha", "curv", "z", "z0", "sample",
                           "relax"])
Step.__doc__ = """Settings of one pass's coordinate steps: feature groups ``group`` (d,) and
their prior ``lam``, ``mu`` (G,), noise precision ``alpha``, smoothness ``curv``, the sweep's
standard normals ``z`` read at ``z0 + j`` for feature j when ``sample`` (MCMC)."""


@njit(cache=True, nogil=True)
def class_step(feats, theta, col, G, H, st, old, delta):
    """Step every feature ``feats[t]`` of a colour class from its sums ``G[t]``, ``H[t]``
    (the step of ``kernels.cd``); record its previous value and change in ``old``,
    ``delta`` (the change in the model's precision, as the in-memory sweep applies it)."""
    for t in range(feats.shape[0]):
        j = feats[t]
        o = theta[j, col]
        gj = st.group[j]
        noise = st.z[st.z0 + j] if st.sample else 0.0
        theta[j, col] = _step(o, G[t], H[t], st.lam[gj], st.mu[gj], st.alpha, st.curv, noise,
                              st.sample, st.relax)
        old[t] = o
        delta[t] = theta[j, col] - o


@njit(cache=True)
def row_pairs(indptr, indices, n_features, lo, hi):
    """Codes ``j * n_features + l`` (j < l) of the feature pairs that share a row, rows
    ``lo:hi`` (indices sorted within a row); with repeats."""
    count = 0
    for i in range(lo, hi):
        m = indptr[i + 1] - indptr[i]
        count += m * (m - 1) // 2
    out = np.empty(count, dtype=np.int64)
    q = 0
    for i in range(lo, hi):
        for a in range(indptr[i], indptr[i + 1]):
            base = np.int64(indices[a]) * n_features
            for b in range(a + 1, indptr[i + 1]):
                out[q] = base + indices[b]
                q += 1
    return out
