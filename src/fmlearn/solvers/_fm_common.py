"""State and data containers shared by the classic-FM solvers (SGD, ALS, MCMC)."""

from dataclasses import dataclass

import numpy as np

from .._data import raw
from ..kernels.cd import ROW_BLOCK, Columns, Plan, cooccurrence_work, greedy_coloring
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
