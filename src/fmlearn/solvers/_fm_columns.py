"""The column-wise coordinate layout (CSC and row passes) that the relational solvers
(:mod:`fmlearn.solvers.relation`) still run on: :func:`column_data` and :class:`ColumnData`
as they were before the classic FM moved to the class-major row layout of
:mod:`fmlearn.kernels.cd` (:func:`fmlearn.solvers._fm_common.column_data`). Kept apart,
with its kernels in :mod:`fmlearn.kernels.cd_columns`, until the relational sweep is ported to
that layout."""

from dataclasses import dataclass

import numpy as np

from .._data import raw
from ..kernels.cd_columns import ROW_BLOCK, Columns, Plan, cooccurrence_work, greedy_coloring
from ..kernels.losses import SQUARED
from ..kernels.predict import fm_predict_csr


@dataclass
class ColumnData:
    """Training data for the coordinate solvers: the records of ``kernels.cd``.

    ``cols`` (:class:`~fmlearn.kernels.cd.Columns`) holds both layouts, the targets and the
    weights; ``plan`` (:class:`~fmlearn.kernels.cd.Plan`) the visiting order in colour classes
    of features that never share a row (updated in parallel where large enough).
    """

    cols: Columns
    plan: Plan

    @property
    def csr(self):
        return self.cols.rindptr, self.cols.rindices, self.cols.rdata

    @property
    def y(self):
        return self.cols.y

    @property
    def sw(self):
        return self.cols.sw

    @property
    def n_samples(self):
        return self.cols.rindptr.shape[0] - 1

    @property
    def order(self):
        return self.plan.order

    @property
    def color_ptr(self):
        return self.plan.color_ptr

    @property
    def row_pass(self):
        """Per colour class: swept by streaming the rows (None when no class is)."""
        return self.plan.row_pass if self.plan.row_pass.any() else None

    @property
    def class_parallel(self):
        return self.plan.class_parallel

    def with_target(self, y):
        """The same data with other targets (MCMC probit's latent z)."""
        return ColumnData(self.cols._replace(y=y), self.plan)


# Entries below which a colour class (or a pass over the rows) runs serially: a parallel
# region costs microseconds, and far more when the machine is oversubscribed.
MIN_PARALLEL_NNZ = 50_000
# Colour classes and passes over the rows run in parallel only on at least this many rows.
# While the row cache E fits in the cores' caches, two threads writing it (a class's features
# touch disjoint rows, but rows of the same cache lines; a row pass hands the lines to the other
# core before the next serial step reads them) make the sweep slower than on one thread:
# measured on MovieLens-100K's 75,000 rows, quiet machine, MCMC 46 ms per sweep on 2 threads
# against 27 ms on one, and 27 ms on 2 threads with this threshold. On 2,000,000 rows two
# threads are 1.8x faster (benchmarks/RESULTS.md).
MIN_PARALLEL_ROWS = 500_000
# Above this many (row, feature, feature) triples the colouring is not worth building.
COLORING_BUDGET = 200_000_000
# Row-wise class sweeps are used when there are at most this many colour classes (one-hot
# fields: users, items, ...), at least ROW_PASS_MIN_ROWS rows (below, the row cache E stays in
# cache and jumping to each column's rows is cheaper than two full passes: measured 0.5 ms vs
# 4 ms per class sweep on MovieLens-100K's 75,000 rows) and their block sums fit in
# ROW_PASS_BUDGET entries.
ROW_PASS_MAX_COLORS = 4
ROW_PASS_MIN_ROWS = 250_000
ROW_PASS_BUDGET = 4_000_000


def column_data(X_csr, y, sw):
    """Build :class:`ColumnData` from a canonical CSR matrix (see ``_data.to_csr``).

    The colouring depends on the data only, never on the thread count, so serial and parallel
    sweeps visit the features in the same order.
    """
    csr = raw(X_csr)
    csc = raw(X_csr.tocsc())
    n, d = X_csr.shape
    order = np.arange(d, dtype=np.int64)
    color_ptr = np.array([0, d], dtype=np.int64)
    class_parallel = np.zeros(1, dtype=np.bool_)
    plan = None
    if cooccurrence_work(csr[0]) <= COLORING_BUDGET:
        color, n_colors = greedy_coloring(csc[0], csc[1], csr[0], csr[1], d)
        if n_colors < d:  # otherwise every class is a single feature: nothing to run in parallel
            order = np.argsort(color, kind="stable").astype(np.int64)
            color_ptr = np.searchsorted(color[order], np.arange(n_colors + 1)).astype(np.int64)
            col_nnz = np.diff(csc[0])[order]
            class_parallel = ((np.add.reduceat(col_nnz, color_ptr[:-1]) >= MIN_PARALLEL_NNZ)
                              & (n >= MIN_PARALLEL_ROWS))
            plan = _row_pass_plan(color, order, color_ptr, class_parallel, n)
    if plan is None:
        one = np.zeros(1, dtype=np.int64)
        work = np.zeros((1, 1))
        plan = Plan(order, color_ptr, class_parallel,
                    np.zeros(color_ptr.shape[0] - 1, dtype=np.bool_), one, one, work, work,
                    np.zeros(1), np.zeros(1))
    sw = np.ascontiguousarray(sw, dtype=np.float64)
    cols = Columns(*csc, *csr, np.ascontiguousarray(y, dtype=np.float64), sw,
                   bool(np.all(sw == 1.0)))
    return ColumnData(cols, plan)


def _row_pass_plan(color, order, color_ptr, class_parallel, n_rows):
    """The plan with the colour classes swept row-wise, their index maps and work buffers
    (None when no class is)."""
    n_colors = color_ptr.shape[0] - 1
    if n_colors > ROW_PASS_MAX_COLORS or n_rows < ROW_PASS_MIN_ROWS:
        return None
    n_blocks = max(1, -(-n_rows // ROW_BLOCK))
    sizes = np.diff(color_ptr)
    row_pass = sizes * n_blocks <= ROW_PASS_BUDGET
    if not row_pass.any():
        return None
    pos = np.empty_like(order)
    pos[order] = np.arange(order.shape[0]) - np.repeat(color_ptr[:-1], sizes)
    m = int(sizes[row_pass].max())
    return Plan(order, color_ptr, class_parallel, row_pass, color.astype(np.int64), pos,
                np.empty((n_blocks, m)), np.empty((n_blocks, m)), np.empty(m), np.empty(m))


def predict_rows(csr, state):
    """Predictions (float64, n) of ``state`` on the CSR arrays ``csr``."""
    indptr, indices, data = csr
    pred = np.empty(indptr.shape[0] - 1, dtype=np.float64)
    fm_predict_csr(indptr, indices, data, state.w0, state.w, state.V, pred)
    return pred


def row_state(csr, state, target, loss_code):
    """The (n, 3) row cache of ``kernels.cd``: column 0 is pred - target (squared loss) or pred,
    columns 1 and 2 are the kernels' work space (factor sums)."""
    pred = predict_rows(csr, state)
    E = np.zeros((pred.shape[0], 3), dtype=np.float64)
    E[:, 0] = pred - target if loss_code == SQUARED else pred
    return E


def refresh_row_state(E, csr, state, target):
    """Recompute ``E[:, 0] = pred - target`` from the model (against round-off drift)."""
    E[:, 0] = predict_rows(csr, state)
    E[:, 0] -= target
