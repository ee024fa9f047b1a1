"""State and data containers shared by the classic-FM solvers (SGD, ALS, MCMC)."""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._data import raw
from .._memory import empty_for_sweeps
from ..kernels.cd import (
    CHUNK_ROWS,
    Columns,
    Plan,
    compile_sweep,
    coordinate_sweep,
    greedy_coloring,
)
from ..kernels.cd_layout import (
    all_ones,
    class_counts,
    coloring_rounds,
    field_row_state,
    fill_classes,
    fill_dense_classes,
    fill_fields,
    inverse_rows,
    row_state_at,
    rows_cooccurrence_work,
    to_places,
)
from ..kernels.losses import SQUARED
from ..kernels.predict import fm_predict_csr


@dataclass
class FMState:
    """Parameters of a second-order FM: ``w0`` (scalar), ``w`` (d,), ``V`` (d, k)."""

    w0: float
    w: np.ndarray
    V: np.ndarray

    def copy(self):
        return FMState(float(self.w0), self.w.copy(), self.V.copy())

    def is_finite(self):
        return bool(np.isfinite(self.w0) and np.all(np.isfinite(self.w))
                    and np.all(np.isfinite(self.V)))


class RowTargets:
    """The targets of the fit's rows, ``source[rows]`` (float64), without a copy: the source
    rows' targets (the user's, validated) read through the fit's row index. The squared-loss
    sweeps never read the targets (their row state holds the residuals); the row state's
    (re)computation reads them through the index (:func:`~fmlearn.kernels.cd_layout.row_state_at`),
    so a fit holds no n-long array of targets of its own (8 bytes per row: 61 MB at 8,000,000
    rows). Anything else (metrics, the logistic and probit sweeps) gets the gathered array
    (``numpy.asarray``), computed once and then kept."""

    def __init__(self, source, rows):
        self.source = source
        self.rows = rows
        self._taken = None

    @staticmethod
    def reads(source):
        """Whether targets ``source`` can be read in place (a C-contiguous float64 vector)."""
        source = np.asarray(source)
        return source.dtype == np.float64 and source.ndim == 1 and source.flags.c_contiguous

    @classmethod
    def of(cls, source, rows, taken):
        """``RowTargets(source, rows)`` when ``source`` is a C-contiguous float64 vector and
        ``rows`` a non-empty int32 index (``taken`` = ``source[rows]``, which the caller then
        drops; None: gathered here when needed), else ``taken``."""
        source = np.asarray(source)
        if cls.reads(source) and rows.dtype == np.int32 and rows.shape[0]:
            return cls(source, rows)
        return source[rows] if taken is None else taken

    @property
    def shape(self):
        return self.rows.shape

    @property
    def dtype(self):
        return self.source.dtype

    def __len__(self):
        return self.rows.shape[0]

    def __array__(self, dtype=None, copy=None):
        if self._taken is None:
            from ..kernels.dedup import take

            self._taken = take(self.source, self.rows)
        out = self._taken if dtype is None else self._taken.astype(dtype, copy=False)
        return out.copy() if copy and out is self._taken else out


@dataclass
class ColumnData:
    """Training data for the coordinate solvers: the records of ``kernels.cd`` and the rows.

    ``cols`` (:class:`~fmlearn.kernels.cd.Columns`) holds the entries of every colour class in
    row order, the targets and the weights; ``plan`` (:class:`~fmlearn.kernels.cd.Plan`) the
    visiting order in colour classes of features that never share a row and the sweep's work
    space. The fit's rows are rows of the CSR arrays ``source`` = (indptr, indices, data)
    through ``rows``: fit row r is source row ``rows[r]`` (an empty ``rows``: row r), so that
    a canonical CSR input is never copied (:meth:`row_state` reads it in its own order, then
    gathers the predictions in the fit's order). ``targets`` (:class:`RowTargets`, or None:
    ``cols.y``) holds the targets when ``cols.y`` does not (empty: a squared-loss fit's
    kernels never read them). ``fields``: the layout is :func:`_field_layout`'s (one-hot
    fields, values 1), whose entries give each fit row's features in their CSR order, so the
    row state is computed from them in fit order instead
    (:func:`~fmlearn.kernels.cd_layout.field_row_state`). ``held``: the row state's array
    as :func:`pair_rows` left it (the fit rows' targets in its first column), which the
    first :meth:`row_state` takes instead of a fresh one.
    """

    cols: Columns
    plan: Plan
    source: tuple
    rows: np.ndarray
    row_targets: RowTargets = None
    fields: bool = False
    held: np.ndarray = None

    @property
    def y(self):
        """The fit rows' targets (an array; gathered once from the source targets when the
        fit does not store them)."""
        return self.cols.y if self.row_targets is None else np.asarray(self.row_targets)

    @property
    def targets(self):
        """The fit rows' targets as the solvers pass them to :meth:`row_state` and
        :meth:`refresh`: ``y``, or the :class:`RowTargets` that reads them in place."""
        return self.cols.y if self.row_targets is None else self.row_targets

    @property
    def sw(self):
        """The fit rows' weights; unit weights (``cols.unit`` and a one-entry ``cols.sw``,
        which the kernels never read) as a read-only view of one 1.0 (no memory per row)."""
        sw = self.cols.sw
        if self.cols.unit and sw.shape[0] != self.n_samples:
            return np.broadcast_to(sw[:1], (self.n_samples,))
        return sw

    @property
    def n_samples(self):
        return (self.cols.y if self.row_targets is None else self.row_targets).shape[0]

    @property
    def order(self):
        return self.plan.order

    @property
    def color_ptr(self):
        return self.plan.color_ptr

    @property
    def blocked(self):
        """Per colour class: gathered in parallel blocks (see ``kernels.cd``)."""
        return (self.plan.bidx != -1) & (self.plan.bptr.shape[1] > 2)

    @property
    def csr(self):
        """The fit's rows as CSR arrays (a copy when the rows are indexed: for tests and
        small data only)."""
        indptr, indices, data = self.source
        if self.rows.shape[0] == 0:
            return (np.ascontiguousarray(indptr, dtype=np.int64), indices, data)
        X = sp.csr_matrix((data, indices, indptr), shape=(indptr.shape[0] - 1,
                                                         int(self.plan.order.shape[0])))
        return raw(X[self.rows])

    def predict(self, state, out=None):
        """Predictions (float64, n) of ``state`` on the fit's rows."""
        P = np.empty((self.n_samples, 1), dtype=np.float64)
        self._fill(P, state, np.zeros(0), False, False)
        if out is None:
            return P.reshape(-1)
        out[:] = P[:, 0]
        return out

    def _fill(self, E, state, target, squared, zero_work, held=False):
        """``E[:, 0]`` = the predictions (less ``target`` when ``squared``) by
        :func:`~fmlearn.kernels.cd_layout.row_state_at` (``field_row_state`` on the layout of
        one-hot fields); E's work columns are its scratch when ``zero_work`` and the fit
        rows are a permutation of the source rows. ``held``: ``E[:, 0]`` holds ``target``
        (the layout's row state, :attr:`held`)."""
        indptr, indices, data = self.source
        by_source = isinstance(target, RowTargets)
        if by_source:  # target[r] = target.source[rows[r]], read in place
            target = target.source
        target = np.ascontiguousarray(target, dtype=np.float64)
        if self.fields:  # each fit row's features in the entries, in fit order
            field_row_state(self.cols.etpos, self.plan.order, self.plan.color_ptr, self.rows,
                           data[:1], state.w0, state.w, state.V, target, by_source, squared,
                           E, zero_work, held)
            return
        n_src = indptr.shape[0] - 1
        if zero_work and n_src == self.n_samples:
            S, sc = E, 2
        else:
            S, sc = np.empty((n_src, 1), dtype=np.float64), 0
        row_state_at(indptr, indices, data, self.rows, state.w0, state.w, state.V, target,
                     by_source, squared, E, S, sc, zero_work)

    def row_state(self, state, target, loss_code=SQUARED):
        """The (n, 3) row cache of ``kernels.cd``: column 0 is pred - target (squared loss) or
        pred, columns 1 and 2 are the kernels' work space (factor sums), zero. ``target``: an
        array in the fit's order, or :attr:`targets`."""
        E, self.held = self.held, None
        if E is not None:  # pair_rows' array, the targets in place when they are these
            self._fill(E, state, target, loss_code == SQUARED, True,
                       held=target is self.row_targets)
            return E
        release_free_memory()
        E = empty_for_sweeps((self.n_samples, 3), np.float64)
        self._fill(E, state, target, loss_code == SQUARED, True)
        return E

    def refresh(self, E, state, target):
        """Recompute ``E[:, 0] = pred - target`` from the model (against round-off drift)."""
        self._fill(E, state, target, True, False)

    def compile_sweep(self, prior, model, E, z, g, cfg):
        """Compile (or load from numba's cache) :meth:`sweep`'s kernel for these arguments."""
        compile_sweep(self.cols, self.plan, prior, model, E, z, g, cfg)

    def sweep(self, prior, model, E, z, g, cfg):
        """One coordinate sweep (:func:`~fmlearn.kernels.cd.coordinate_sweep`) in place; the
        ALS and MCMC solvers call the data's sweep, so relational data
        (:class:`~fmlearn.solvers.relation.RelationColumnData`) runs through the same solvers."""
        return coordinate_sweep(self.cols, self.plan, prior, model, E, z, g, cfg)

    def with_target(self, y):
        """The same data with other targets (MCMC probit's latent z)."""
        return ColumnData(self.cols._replace(y=y), self.plan, self.source, self.rows)


def _malloc_trim():
    try:
        import ctypes

        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_TRIM = _malloc_trim()


def release_free_memory():
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing
    elsewhere). NumPy buffers below glibc's mmap threshold, which it raises up to 32 MB as
    large buffers are freed, live on the heap, and their pages stay resident after ``free``
    until the top of the heap has more than twice that free: the set-up's transient
    int32 row arrays (4 bytes per row: 31 MB at 8,000,000 rows) would stay resident under
    the row state allocated after them."""
    if _TRIM is not None:
        _TRIM(0)


def predict_rows(csr, state):
    """Predictions (float64, n) of ``state`` on the CSR arrays ``csr`` (the Dask workers'
    row state)."""
    indptr, indices, data = csr
    pred = np.empty(indptr.shape[0] - 1, dtype=np.float64)
    fm_predict_csr(indptr, indices, data, state.w0, state.w, state.V, pred)
    return pred


def row_state(csr, state, target, loss_code):
    """The (n, 3) row cache of ``kernels.cd`` on the CSR arrays ``csr``: column 0 is
    pred - target (squared loss) or pred, columns 1 and 2 the kernels' work space (the
    ordinal regressor's sweep; the classic FM's uses :meth:`ColumnData.row_state`)."""
    pred = predict_rows(csr, state)
    E = np.zeros((pred.shape[0], 3), dtype=np.float64)
    E[:, 0] = pred - target if loss_code == SQUARED else pred
    return E


def refresh_row_state(E, csr, state, target):
    """Recompute ``E[:, 0] = pred - target`` from the model (against round-off drift)."""
    E[:, 0] = predict_rows(csr, state)
    E[:, 0] -= target


# Entries below which a colour class of the contrast sweep (``fm_contrast``) runs serially: a
# parallel region costs microseconds, and far more when the machine is oversubscribed.
MIN_PARALLEL_NNZ = 50_000
# Colour classes of the contrast sweep run in parallel only on at least this many targets
# (measured on MovieLens-100K's rows: two threads writing a cache that fits in the cores'
# caches made the sweep slower than one; on 2,000,000 rows two threads are 1.8x faster).
MIN_PARALLEL_ROWS = 500_000
# Above this many (row, feature, feature) triples the colouring is not worth building.
COLORING_BUDGET = 200_000_000
# Rounds of the row-wise colouring (kernels.cd_layout.coloring_rounds) before the column-wise
# greedy colouring is run instead.
COLORING_ROUNDS = 8
# A colour class is gathered in parallel blocks (kernels.cd) on at least this many rows, when
# it holds at least MIN_PARALLEL_NNZ entries and its block sums fit in BLOCK_BUDGET entries.
# Below, the row cache E stays in the cores' caches and two threads writing it are slower than
# one (MovieLens-100K, 75,000 rows: 46 ms per MCMC sweep on 2 threads, 27 ms on one); on
# 2,000,000 rows two threads are faster. Blocked classes sum in block order (a fixed number of
# blocks, never the thread count), the others in row order.
BLOCKED_MIN_ROWS = 250_000
# Blocks of a blocked plan: enough for the threads to share; their rows a multiple of
# BLOCK_ALIGN (the kernels' chunk).
N_BLOCKS = 16
BLOCK_ALIGN = CHUNK_ROWS
BLOCK_BUDGET = 1_000_000


@dataclass
class PairRows:
    """What :func:`pair_rows` lays out for :func:`column_data`: ``E`` the row state's array
    (fit rows x 3, the rows' targets in its first column), ``etpos`` the fit rows' features
    (class-major), ``place`` each feature's place in its rows (-1: none)."""

    E: np.ndarray
    etpos: np.ndarray
    place: np.ndarray


def pair_rows(X_csr, y, sw):
    """``fmlearn._data.merged_rows(X_csr, y, sw, targets=False)`` for rows of two one-hot
    fields (every row two entries of value 1, each feature at one place in every row it is
    in: user x item data), fused with their layout and the targets' gather
    (:func:`fmlearn.kernels.dedup.pair_groups`): ``(rows, sw, pairs, moments)``, where
    ``rows`` and ``sw`` are merged_rows' (the same rows, order and weights, bit for bit),
    ``pairs`` a :class:`PairRows` for :func:`column_data` and ``moments`` the targets' (min,
    max, weighted sum, weighted sum of squares) as ``DataSummary.with_targets`` records them
    through the row index; or None when the rows are not such, some weight is not positive,
    ``y`` is not a contiguous float64 vector or the fused kernel's limits are passed (the
    caller then takes the separate passes, which give the same fit).

    The row state's array is allocated first and is the merge's work space (its records),
    so nothing else of the rows' size is allocated for the merge and the layout besides
    the row index (4 bytes per row) and the entries (4); the array goes to the solver with
    the targets already in fit order.
    """
    from .._data import _COUNTING_SORT_COLUMNS
    from ..kernels.dedup import MAX_BUCKET, pair_groups

    indptr, indices, data = X_csr.indptr, X_csr.indices, X_csr.data
    n, d = X_csr.shape
    if not (0 < n < 2**31 and 2 < d <= min(_COUNTING_SORT_COLUMNS, 1 << 16)
            and 4 * n <= COLORING_BUDGET and indptr[-1] == 2 * n and indptr[1] == 2):
        return None
    y = np.asarray(y)
    if not (y.dtype == np.float64 and y.ndim == 1 and y.flags.c_contiguous):
        return None
    unit = sw is None
    if not unit:
        sw = np.asarray(sw, dtype=np.float64)
        if not np.all(sw > 0):
            return None
        unit = bool(np.all(sw == 1.0))
    if not all_ones(data):
        return None
    bits = np.uint32 if data.dtype == np.float32 else np.uint64
    b = max(1, int(d + 1).bit_length())
    release_free_memory()  # the validation's freed buffers, not resident under E
    E = empty_for_sweeps((n, 3), np.float64)
    ok, rows, w, place, etpos, moments = pair_groups(
        indptr, indices, data, data.view(bits), y, n, d, b, np.zeros(0) if unit else sw,
        unit, MAX_BUCKET, E)
    if not ok:
        return None
    g = rows.shape[0]
    if 2 * g <= n:  # few groups: not the n-long buffer they were written in
        rows = rows.copy()
    if unit and w.shape[0] == 0:  # nothing merged: merged_rows' weights
        w = sw
    return rows, w, PairRows(E[:g], etpos, place), tuple(float(v) for v in moments)

def column_data(X_csr, y, sw, rows=None, keep=None, pairs=None):
    """Build :class:`ColumnData` from the canonical CSR rows ``X_csr`` (see ``_data.to_csr``)
    with targets ``y`` (an array, or a :class:`RowTargets` that reads them in place) and
    weights ``sw`` of the fit's rows (None: unit weights, kept as one
    entry instead of n; :attr:`ColumnData.sw`): fit row r is row ``rows[r]`` of
    ``X_csr`` (None: the rows of ``X_csr`` in order; see ``_data.merged_rows``). ``keep``
    (bool, one per row of ``X_csr``) marks the rows the fit uses when ``rows`` leaves some out
    (for the colouring; None: every row).

    The colouring depends on the data only, never on the thread count, so serial and parallel
    sweeps visit the features in the same order.

    Rows of one-hot fields whose fit rows are all the rows in another order (what
    ``merged_rows`` gives when nothing is merged or dropped) are coloured and laid out in one
    pass (:func:`_field_layout`), and their row state is computed from the layout in fit
    order (:attr:`ColumnData.fields`); other rows take the colouring's rounds, the class
    counts (from the colouring's first round when the fit rows are the kept rows) and the
    fill. Either way the same arrays. ``pairs``: :func:`pair_rows`' layout of the fit rows
    ``rows`` (two one-hot fields), finished here without another pass over the rows.
    8,000,000 rows of two fields, one thread
    (``benchmarks/bench_setup_ab.py`` against 729dd44's general passes, 5 alternated fresh
    processes, load 0.8-1.0): 0.205 (0.169-0.218) against 0.428 (0.389-0.443) CPU s for this
    function.
    """
    indptr, indices, data = X_csr.indptr, X_csr.indices, X_csr.data
    n_src, d = X_csr.shape
    rows = np.zeros(0, dtype=np.int32) if rows is None else rows
    n = rows.shape[0] if rows.shape[0] else n_src
    inv = np.zeros(0, dtype=rows.dtype)
    fields = None
    if pairs is not None:
        fields = _laid_fields(pairs.place, pairs.etpos, 2, n, data.dtype)
    elif rows.shape[0]:
        inv = inverse_rows(rows, n_src)
    if rows.shape[0] and n == n_src and keep is None and pairs is None:  # a permutation
        fields = _field_layout(X_csr, inv, n)
    if fields is not None:
        order, color_ptr, color, (count, dense, eptr, roff, xoff, etpos, erow, ex) = fields
    else:
        # the colouring's rows (the kept ones) are the fit's when no kept row is left out or
        # merged (fit rows are distinct kept rows): then it counts the classes' entries too
        same = n == (n_src if keep is None else int(np.count_nonzero(keep)))
        fcount = np.full(d if same else 0, -1, dtype=np.int64)  # -1: not counted
        order, color_ptr, color = _colour_classes(X_csr, inv, keep, fcount)
        counts = _counts_of(fcount, color, color_ptr, data)
        count, dense, eptr, roff, xoff, etpos, erow, ex = class_entries(
            indptr, indices, data, rows, inv, inv, n, order, color_ptr, color, counts)
    del inv  # the layout's only: the row state reads the source rows (or the layout)
    plan = _plan(order, color_ptr, eptr, roff, xoff, count, dense, erow, n, data.dtype)
    sw = np.ones(1) if sw is None else np.ascontiguousarray(sw, dtype=np.float64)
    by_rows = y if isinstance(y, RowTargets) else None
    y = np.zeros(0) if by_rows is not None else np.ascontiguousarray(y, dtype=np.float64)
    cols = Columns(etpos, erow, ex, y, sw, bool(np.all(sw == 1.0)))
    return ColumnData(cols, plan, (indptr, indices, data), rows, by_rows, fields is not None,
                      None if pairs is None else pairs.E)


def _field_layout(X_csr, inv, n):
    """The colour classes and class-major entries of :func:`column_data` for rows of one-hot
    fields (:func:`~fmlearn.kernels.cd_layout.fill_fields`: every row m entries, each feature
    at one place in every row; the colouring and the fill in one pass over the source rows,
    instead of the colouring's pass, then the fill's), or None when the rows are not such
    (then the general passes run). The fit's rows are the source rows through ``inv`` (every
    source row one fit row); the values must all be 1, the features fit the entries' uint16
    (at most 65,536), m < d and the row-wise colouring would settle (m <=
    ``COLORING_ROUNDS``) within its budget.

    The same arrays as the general passes: the greedy colouring (class c: the features at
    place c), each class in every row, one place per entry. 8,000,000 rows of two fields
    (``benchmarks/bench_setup_ab.py``, 5 alternated fresh processes, load 0.8-1.0): 0.122
    (0.102-0.140) CPU s for the pass and 0.006 s for
    :func:`~fmlearn.kernels.cd_layout.to_places`, where 729dd44 took 0.120 for the colouring
    (two rounds), 0.044 for the class counts and 0.136 for the fill."""
    indptr, indices, data = X_csr.indptr, X_csr.indices, X_csr.data
    d = X_csr.shape[1]
    m = int(indptr[1] - indptr[0]) if n else 0
    shaped = 2 <= m <= COLORING_ROUNDS and m < d <= 1 << 16 and m * m * n <= COLORING_BUDGET
    if not shaped or not all_ones(data):
        return None
    etpos = np.empty(m * n, dtype=np.uint16)
    place, ok = fill_fields(indptr, indices, inv, d, m, etpos)
    if not ok:
        return None
    return _laid_fields(place, etpos, m, n, data.dtype)


def _laid_fields(place, etpos, m, n, dtype):
    """:func:`_field_layout`'s result from the features' places ``place`` (-1: in no row)
    and the entries' features ``etpos`` (``m n``, class-major, each class in fit row
    order), which become their places in their classes."""
    color = np.maximum(place, 0).astype(np.int64, copy=False)
    order = np.argsort(color, kind="stable").astype(np.int64)
    color_ptr = np.searchsorted(color[order], np.arange(m + 1)).astype(np.int64)
    count = np.full(m, n, dtype=np.int64)
    offsets = _class_offsets(count, np.ones(m, dtype=np.bool_), n, color_ptr, dtype, etpos)
    to_places(etpos, _places(order, color_ptr))
    return order, color_ptr, color, (count,) + offsets


def _places(order, color_ptr):
    """Each feature's place in its colour class (int32)."""
    pos = np.empty(order.shape[0], dtype=np.int32)
    pos[order] = np.arange(order.shape[0]) - np.repeat(color_ptr[:-1], np.diff(color_ptr))
    return pos


def _class_offsets(count, ones, n, color_ptr, dtype, etpos=None):
    """``(dense, eptr, roff, xoff, etpos, erow, ex)`` of :func:`class_entries` from the
    classes' entries and whether their values are all 1: the arrays allocated, not filled
    (``etpos`` given: that one)."""
    eptr = np.zeros(count.shape[0] + 1, dtype=np.int64)
    np.cumsum(count, out=eptr[1:])
    dense = count == n
    roff = np.where(dense, -1, np.cumsum(np.where(dense, 0, count)) - count).astype(np.int64)
    xoff = np.where(ones, -1, np.cumsum(np.where(ones, 0, count)) - count).astype(np.int64)
    if etpos is None:
        etpos = np.empty(eptr[-1], dtype=place_dtype(color_ptr))
    erow = np.empty(int(count[~dense].sum()), dtype=np.int32 if n < 2**31 else np.int64)
    ex = np.empty(int(count[~ones].sum()), dtype=dtype)
    return dense, eptr, roff, xoff, etpos, erow, ex


def _counts_of(fcount, color, color_ptr, data):
    """``(count, ones)`` of :func:`~fmlearn.kernels.cd_layout.class_counts` without its pass
    over the rows: the classes' entries as the sums of ``fcount`` (the entries of each feature
    in the fit's rows, counted by the colouring; ``fcount[0] < 0``: not counted), and every
    class all ones when every value of ``data`` is 1 (one-hot rows; a sequential read that
    stops at the first other value). None when either is unknown (the caller then counts)."""
    n_colors = color_ptr.shape[0] - 1
    if fcount.shape[0] == 0 or fcount[0] < 0 or not all_ones(data):
        return None
    count = np.zeros(n_colors, dtype=np.int64)
    np.add.at(count, color, fcount)
    return count, np.ones(n_colors, dtype=np.bool_)


def class_entries(indptr, indices, data, rows, inv, count_inv, n, order, color_ptr, color,
                  counts=None):
    """The class-major entries of ``n`` fit rows under the colour classes ``(order,
    color_ptr, color)`` (``kernels.cd_layout``'s passes): returns ``(count, dense, eptr,
    roff, xoff, etpos, erow, ex)``, the entries per class, the classes with an entry in every
    row, the classes' offsets into the entries, rows and values (-1 where a class keeps no
    rows or no values) and the three arrays. Fit row r is source row ``rows[r]`` (empty: the
    source rows in order) and ``inv`` its inverse (empty likewise); ``count_inv`` is the
    inverse the counts use (empty: every source row counts); ``counts``, when known,
    :func:`~fmlearn.kernels.cd_layout.class_counts`' ``(count, ones)``. One home for
    :func:`column_data` and the distributed workers' layout of a partition."""
    n_colors = color_ptr.shape[0] - 1
    pos = _places(order, color_ptr)
    if counts is None:
        counts = class_counts(indptr, indices, data, count_inv, color, n_colors)
    count, ones = counts
    dense, eptr, roff, xoff, etpos, erow, ex = _class_offsets(count, ones, n, color_ptr,
                                                              data.dtype)
    if dense.all():  # one entry per class in every row (one-hot fields): in source order
        fill_dense_classes(indptr, indices, data, inv, color, pos, eptr, xoff, etpos, ex)
    else:
        fill_classes(indptr, indices, data, rows, n, color, pos, eptr, roff, xoff, etpos, erow,
                     ex)
    return count, dense, eptr, roff, xoff, etpos, erow, ex


def place_dtype(color_ptr):
    """The dtype of the entries' places in their class (``Columns.etpos``): uint16 when no
    class holds more than 65,536 features (2 bytes per non-zero instead of 4: 31 MB less at
    8,000,000 one-hot rows of two fields), else int32. The same integers either way, so the
    same sweep; the kernels compile one variant per dtype, and classes that large are rare
    (the colouring of one-hot fields gives one class per field)."""
    sizes = np.diff(color_ptr)
    return np.uint16 if sizes.shape[0] == 0 or sizes.max() <= 1 << 16 else np.int32


def _colour_classes(X_csr, inv, keep, fcount=None):
    """``(order, color_ptr, color)`` of the fit's rows: the classes of the greedy colouring
    (by colour, then feature index); d classes of one feature in index order when the
    colouring is over budget or gives every feature its own colour. ``fcount`` (int64, d;
    None or empty: none) gets each feature's entries in the kept rows from the row-wise
    colouring's first round; left as it is (``fcount[0] = -1``: not counted) when that does
    not run."""
    d = X_csr.shape[1]
    fcount = np.zeros(0, dtype=np.int64) if fcount is None else fcount
    single = (np.arange(d, dtype=np.int64), np.arange(d + 1, dtype=np.int64),
              np.arange(d, dtype=np.int64))
    if rows_cooccurrence_work(X_csr.indptr, inv) > COLORING_BUDGET:
        return single
    fcount[:] = 0 if COLORING_ROUNDS else -1  # counted in the first round
    color, n_colors, ok = coloring_rounds(X_csr.indptr, X_csr.indices,
                                          np.zeros(0, np.bool_) if keep is None else keep, d,
                                          COLORING_ROUNDS, fcount)
    if not ok:
        X = X_csr if keep is None else X_csr[np.flatnonzero(keep)]
        csr = raw(X)
        csc = raw(X.tocsc())
        color, n_colors = greedy_coloring(csc[0], csc[1], csr[0], csr[1], d)
    if n_colors >= d:
        return single
    order = np.argsort(color, kind="stable").astype(np.int64)
    color_ptr = np.searchsorted(color[order], np.arange(n_colors + 1)).astype(np.int64)
    return order, color_ptr, color


def _plan(order, color_ptr, eptr, roff, xoff, count, dense, erow, n, dtype):
    """The :class:`~fmlearn.kernels.cd.Plan`: which classes are blocked, their block starts,
    the work space."""
    n_colors = color_ptr.shape[0] - 1
    sizes = np.diff(color_ptr)
    m = max(1, int(sizes.max()) if n_colors else 1)
    per_block = -(-n // N_BLOCKS)
    block_rows = max(1, -(-per_block // BLOCK_ALIGN) * BLOCK_ALIGN)
    n_blocks = max(1, -(-n // block_rows))
    blocked = ((n >= BLOCKED_MIN_ROWS) & (count >= MIN_PARALLEL_NNZ)
               & (sizes * n_blocks <= BLOCK_BUDGET))
    if n_blocks < 2 or not blocked.any():
        n_blocks, blocked = 1, np.zeros(n_colors, dtype=bool)
    bidx = np.full(n_colors, -1, dtype=np.int64)
    bidx[blocked & dense] = -2
    sparse = np.flatnonzero(blocked & ~dense)
    bptr = np.zeros((max(1, sparse.shape[0]), n_blocks + 1), dtype=np.int64)
    starts = np.arange(n_blocks + 1) * block_rows
    for i, c in enumerate(sparse):
        bidx[c] = i
        bptr[i] = np.searchsorted(erow[roff[c]:roff[c] + count[c]], starts)
    G = np.empty((n_blocks, m))
    return Plan(order, color_ptr, eptr, roff, xoff, bidx, bptr, block_rows,
                np.ones(1, dtype=dtype), G, np.empty_like(G), np.empty((2, m), dtype=dtype),
                np.empty((2, m), dtype=dtype), np.empty((2, m)),
                np.array([-1, 0, 0, 0, -1, 0], dtype=np.int64))


def group_index(groups, n_features):
    """``(group, group_size)``: each feature's group (int64, d) and the features per group
    (float64, G) from validated groups (an int array of length d, or None: one group)."""
    if groups is None:
        return np.zeros(n_features, dtype=np.int64), np.array([float(n_features)])
    group = np.ascontiguousarray(groups, dtype=np.int64)
    return group, np.bincount(group).astype(np.float64)


def check_groups(groups, n_features):
    """Validate ``groups`` (see :class:`fmlearn.FMRegressor`) into ``(group, group_size)`` or None.

    A sequence of length ``n_features`` gives each feature's group id (libFM's ``-meta``);
    any other length lists group sizes in column order (myFM's ``group_shapes``).
    """
    if groups is None:
        return None
    arr = np.asarray(groups)
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise ValueError(f"groups must be a 1-D sequence of integers, got shape {arr.shape}")
    if arr.dtype.kind not in "iuf" or (arr.dtype.kind == "f" and not (
            np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)))):
        raise ValueError(f"groups must hold integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.shape[0] == n_features:  # one group id per feature
        if arr.min() < 0:
            raise ValueError(f"groups holds a negative group id ({arr.min()})")
        if arr.max() >= n_features:
            raise ValueError(f"groups holds group id {arr.max()}, more than one group per "
                             f"feature ({n_features} features); ids must be < {n_features}")
        return group_index(arr, n_features)
    if np.any(arr < 1) or arr.sum() != n_features:
        raise ValueError(f"groups of length {arr.shape[0]} is read as group sizes in column "
                         f"order: they must be positive and sum to n_features={n_features} "
                         f"(got sum {arr.sum()}); or give one group id per feature")
    return group_index(np.repeat(np.arange(arr.shape[0]), arr), n_features)


#: ``init_stdev="auto"``: the initial pairwise term's standard deviation is at most this
#: share of the targets' (:func:`auto_init_stdev`).
INIT_PAIRWISE_SHARE = 0.5


def auto_init_stdev(sum_sq, n_nonzero, mean_pairs=None, n_factors=None, spread=None,
                    base=0.1):
    """``init_stdev="auto"`` of ALS and MCMC: ``min(base / r, sqrt(c s) / (k q)^(1/4))``, with
    ``r`` the root mean square of the non-zero feature values, ``q`` the mean over the rows of
    ``sum_{j<l} x_j^2 x_l^2`` (``mean_pairs``, :func:`fmlearn._plan.pair_stats`), ``k`` the
    rank, ``s`` the targets' standard deviation (``spread``; 1 for a classifier, a unit of
    log-odds) and ``c`` = :data:`INIT_PAIRWISE_SHARE`. Without ``q``, ``k`` or ``s``:
    ``base / r``.

    ``base / r`` makes each pair's initial term <v_j, v_l> x_j x_l the size it has on one-hot
    rows with libFM's 0.1, whatever the units of X: with features standardised without
    centring, one-hot columns of rare users become values of 30-270 on MovieLens-100K, and
    from N(0, 0.1^2) factors the MCMC chain started from pairwise terms of several hundred and
    reached a test RMSE of 1.05 against the mean's 1.13; from the scaled start it reaches 0.93,
    as on the raw one-hot data.

    The pairs of a row add up, though. From factors drawn i.i.d. N(0, sigma^2), a row's
    pairwise term ``sum_{j<l} <v_j, v_l> x_j x_l`` has mean 0 and variance
    ``k sigma^4 sum_{j<l} x_j^2 x_l^2`` (its terms are uncorrelated), ``k sigma^4 q`` over the
    rows; the cap keeps its standard deviation under ``c s``, so that the start does not
    predict noise larger than the signal to be learned. On one-hot user x item rows (q = 1,
    k = 8, ratings s = 1.1) the cap is 0.28 and ``base / r`` = 0.1 stays; on dense rows the
    d (d - 1) / 2 pairs matter: on the N(0, 1/d) rows of Lin et al. 2019 (§4.1, Fig. 1(a),
    d = 100, k = 5, s = 0.11, q = 0.5) ``base / r`` is 1.0, the start's pairwise terms 15
    times the labels' spread, and ALS ended at a test RMSE of 0.0076 after 100 sweeps against
    5.9e-4 from 0.1; the cap gives 0.19 (``benchmarks/bench_init_stdev.py``). The cap scales
    as sqrt(s), as the factors of a model of targets a y scale by sqrt(a).
    """
    if n_nonzero == 0 or not 0.0 < sum_sq < np.inf:
        # No value, or squares that overflow float64: the fit's own products overflow too and
        # its divergence check names the cause; a start scaled to 0 would hide it.
        return base
    stdev = base / float(np.sqrt(sum_sq / n_nonzero))
    if (mean_pairs is not None and n_factors and spread is not None
            and 0.0 < mean_pairs < np.inf and 0.0 < spread < np.inf):
        cap = float(np.sqrt(INIT_PAIRWISE_SHARE * spread)
                    / (float(n_factors) * float(mean_pairs)) ** 0.25)
        if cap > 0.0:
            stdev = min(stdev, cap)
    return stdev


def init_state(n_features, n_factors, init_stdev, rng, dtype, random_linear=False):
    """Zero bias; factors drawn from N(0, init_stdev^2) (libFM's init); linear terms zero, or
    with ``random_linear`` drawn from N(0, init_stdev^2) after the factors.

    libFM 1.4.4 starts its MCMC sampler from random linear terms (``libfm.cpp``, method
    ``mcmc``: ``fm.w.init_normal(fm.init_mean, fm.init_stdev)``; SGD and ALS keep
    ``fm_model::init``'s zeros). It matters for the Gibbs sampler: from w = 0 the first draw of
    lambda_w sees sum_j (w_j - mu_w)^2 = 0, lambda_w ~ Gamma((p + 2) / 2, rate 1 / 2) is about
    p + 2 (945 for MovieLens's users against about 90 from the random start), and that near-zero
    prior variance holds w at 0 for tens of sweeps: on MovieLens-100K the sampler's single-
    sample test RMSE was 0.077 worse than libFM's after two sweeps.
    """
    V = (rng.standard_normal((n_features, n_factors)) * init_stdev).astype(dtype)
    if random_linear:
        w = (rng.standard_normal(n_features) * init_stdev).astype(dtype)
    else:
        w = np.zeros(n_features, dtype=dtype)
    return FMState(0.0, w, V)
