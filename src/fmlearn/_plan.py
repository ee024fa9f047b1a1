"""The hand-off from an estimator to its solvers: a data summary, a fit plan, a run context.

A fit goes through three steps, in every entry point of a model family (``fit``,
``partial_fit``, the contrast path, streaming, the Dask backend):

1. **Summarise the data** once: :class:`DataSummary` holds what the settings depend on (the
   width, the dtype, the total weight, the targets' range, the weighted squares of the
   non-zero feature values). In memory it comes from the validated rows
   (:meth:`DataSummary.of_rows`); the Dask backend merges the summaries of its partitions
   (:meth:`DataSummary.merge`) and never holds the rows.
2. **Plan** the fit: the family's plan (a frozen dataclass deriving from :class:`FitPlan`,
   e.g. :class:`fmlearn.fm._plan.ClassicFMPlan`) is built in one place from the estimator's
   ``get_params()``, the summary and the fitted state a warm start continues. It owns every
   resolved setting ("auto" resolved, and stored in the model so that a saved model says what
   it ran), the solver settings built by keyword, the random seed, the initial state, and the
   run context. Entry points read the plan; none calls a private method of an estimator.
3. **Run and commit**: the solvers take the plan's settings and state; the plan's ``commit``
   writes the learned attributes to the estimator at the end (a call that fails before commits
   nothing).

:class:`RunContext` is the run-time side of a plan (the clock of the solver's seconds, the
user's per-iteration callback and whether it may stop the run, the live state being
updated): it lives as long as the call and is never left on the estimator.

This module is shared infrastructure: it imports no model family. A new family (ranking,
field-aware, relational) derives its plan from :class:`FitPlan` and reuses the summary and
the run context (ARCHITECTURE.md, "Adding a model family").
"""

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

__all__ = ["DataSummary", "FitPlan", "RunContext", "check_callback", "pair_stats",
           "square_stats", "validate_params"]


def validate_params(est):
    """Check ``est``'s parameters against its constraints (scikit-learn's
    ``_parameter_constraints``): what ``fit`` runs first (``@_fit_context``), for the entry
    points that fit outside the estimator's ``fit`` (the Dask backend) and must refuse bad
    parameters before touching the data."""
    est._validate_params()


def square_stats(indptr, data, sw):
    """(sum of s_i x_ij^2, sum of s_i over the non-zero x_ij) of CSR rows with weights s_i: a
    row of weight m counts as m repeated rows (summed over partitions by the Dask backend)."""
    weights = np.repeat(np.asarray(sw, dtype=np.float64), np.diff(indptr))
    return float(weights @ (data * data)), float(weights @ (data != 0))


def pair_stats(indptr, data, sw):
    """sum_i s_i sum_{j<l} x_ij^2 x_il^2 of CSR rows with weights s_i, from each row's
    ``((sum_j x_ij^2)^2 - sum_j x_ij^4) / 2`` (O(nnz)): the weight of the rows' pairs of
    non-zero values, whose mean sets the spread of an FM's initial pairwise term."""
    n = indptr.shape[0] - 1
    if n == 0 or data.shape[0] == 0:
        return 0.0
    rows = np.repeat(np.arange(n), np.diff(indptr))
    sq = np.asarray(data, dtype=np.float64) ** 2
    with np.errstate(over="ignore", invalid="ignore"):
        s2 = np.bincount(rows, weights=sq, minlength=n)
        s4 = np.bincount(rows, weights=sq * sq, minlength=n)
        # max(0, .): the difference of two rounded sums of a row with one dominant value
        per_row = np.maximum(0.5 * (s2 * s2 - s4), 0.0)
        return float(np.asarray(sw, dtype=np.float64) @ per_row)


def _square_sums(indptr, data, sw):
    """``(sum_sq, n_nonzero, sum_pairs)``: :func:`square_stats` and :func:`pair_stats` (``sw``
    None: unit weights, not materialised on the compiled path), by one
    compiled pass without temporaries when the sums are exact in any order (integer values and
    weights: one-hot and count data; then the same doubles), else by those functions. At
    8,000,000 one-hot rows the NumPy route held ~450 MB of O(nnz) temporaries and took ~5x the
    pass's CPU."""
    unit = sw is None
    sw = np.zeros(0) if unit else np.asarray(sw)
    if (indptr.dtype == np.int32 and data.dtype == np.float64 and sw.dtype == np.float64
            and (unit or sw.shape == (indptr.shape[0] - 1,))):
        from .kernels.dedup import exact_square_sums  # numba only when a fit runs

        ok, sum_sq, n_nonzero, sum_pairs = exact_square_sums(indptr, data, sw)
        if ok:
            return float(sum_sq), float(n_nonzero), float(sum_pairs)
    if unit:
        sw = np.ones(indptr.shape[0] - 1)
    sum_sq, n_nonzero = square_stats(indptr, data, sw)
    return sum_sq, n_nonzero, pair_stats(indptr, data, sw)


def check_callback(callback):
    """``callback`` unchanged when callable or None; else a ``TypeError`` naming its type."""
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
    return callback


@dataclass(frozen=True)
class DataSummary:
    """What a fit plan needs to know about the training data.

    Attributes
    ----------
    n_samples : int
        Rows (or contrast targets) the solver sees.
    n_features : int
    dtype : str
        The model's dtype name ("float64" or "float32").
    weight : float
        Total sample weight.
    y_min, y_max : float
        Range of the targets (regression); NaN when not recorded (classifiers).
    sum_sq, n_nonzero : float
        Weighted sums over the non-zero feature values x_ij of s_i x_ij^2 and of s_i (a row
        of weight m counts as m rows): their ratio is the mean squared non-zero value, the
        scale that the "auto" initialisations divide by.
    sum_pairs : float
        Weighted sum over the rows of sum_{j<l} x_ij^2 x_il^2 (:func:`pair_stats`): divided
        by ``weight``, the mean weight of a row's pairs of non-zero values.
    y_sum, y_sum_sq : float
        Weighted sums of the targets and of their squares (NaN when not recorded): the
        targets' spread (:attr:`y_std`).
    """

    n_samples: int
    n_features: int
    dtype: str
    weight: float = math.nan
    y_min: float = math.nan
    y_max: float = math.nan
    sum_sq: float = 0.0
    n_nonzero: float = 0.0
    sum_pairs: float = 0.0
    y_sum: float = math.nan
    y_sum_sq: float = math.nan

    @property
    def squares(self):
        """``(sum_sq, n_nonzero)``."""
        return self.sum_sq, self.n_nonzero

    @property
    def mean_pairs(self):
        """``sum_pairs / weight``: the mean over the rows of sum_{j<l} x_ij^2 x_il^2 (0
        without rows)."""
        return self.sum_pairs / self.weight if self.weight > 0 else 0.0

    @property
    def y_std(self):
        """The weighted standard deviation of the targets (NaN when not recorded)."""
        if not self.weight > 0:
            return math.nan
        mean = self.y_sum / self.weight
        return math.sqrt(max(self.y_sum_sq / self.weight - mean * mean, 0.0))

    @property
    def y_range(self):
        return [self.y_min, self.y_max]

    @classmethod
    def of_rows(cls, X, y, sw, *, squares=True, unit_weights=False):
        """The summary of validated rows: ``X`` canonical CSR (its dtype is the model's),
        targets ``y`` (their range is recorded; None: no range), ``sw`` the rows' weights
        (with ``unit_weights``, None: every row of weight 1, without an array of ones).
        ``squares=False`` skips the O(nnz) squares (a call that does not use them)."""
        return cls.of_csr(X.indptr, X.data, X.shape[1], y, sw, squares=squares,
                          unit_weights=unit_weights)

    @classmethod
    def of_csr(cls, indptr, data, n_features, y, sw, *, squares=True, unit_weights=False):
        """:meth:`of_rows` from the raw CSR arrays (a Dask partition's)."""
        unit = unit_weights and sw is None
        n = int(indptr.shape[0] - 1)
        sum_sq = n_nonzero = sum_pairs = 0.0
        if squares:
            sum_sq, n_nonzero, sum_pairs = _square_sums(indptr, data, None if unit else sw)
        lo, hi, y_sum, y_sum_sq = _target_stats(y, sw, unit_weights=unit)
        return cls(n, int(n_features), np.dtype(data.dtype).name,
                   float(n) if unit else float(np.sum(sw)), lo, hi, sum_sq, n_nonzero,
                   sum_pairs, y_sum, y_sum_sq)

    @classmethod
    def of_rows_subset(cls, X, sw, subset):
        """``of_rows(X[subset], None, sw[subset])`` (``subset`` sorted row indices), the same
        doubles, without copying the rows when the square sums are exact (integer values and
        weights): then the other rows count with weight 0, which adds exact zeros; otherwise
        the rows are copied for the NumPy sums and freed."""
        sw = np.asarray(sw, dtype=np.float64)
        sw_sub = sw[subset]
        masked = np.zeros_like(sw)
        masked[subset] = sw_sub
        sums = None
        if X.indptr.dtype == np.int32 and X.data.dtype == np.float64:
            from .kernels.dedup import exact_square_sums  # numba only when a fit runs

            ok, sum_sq, n_nonzero, sum_pairs = exact_square_sums(X.indptr, X.data, masked)
            if ok:
                sums = float(sum_sq), float(n_nonzero), float(sum_pairs)
        del masked
        if sums is None:
            return cls.of_rows(X[subset], None, sw_sub)
        return cls(int(subset.shape[0]), int(X.shape[1]), np.dtype(X.data.dtype).name,
                   float(np.sum(sw_sub)), math.nan, math.nan, *sums)

    def with_targets(self, y, sw=None, *, rows=None, unit_weights=False):
        """The same summary with the range (and, given their weights ``sw``, or with
        ``unit_weights`` and ``sw`` None, weight 1 each, the spread) of the targets ``y``
        (rows may have been merged or dropped since the squares were summed); with ``rows``
        (an int index), of the targets ``y[rows]``, read in place."""
        return self.with_target_moments(*_target_stats(
            y, sw, rows=rows, unit_weights=unit_weights and sw is None))

    def with_squares(self, X, sw, *, pairs_of_ones=False):
        """The same summary with :meth:`of_rows`' square sums of the canonical CSR rows
        ``X`` with weights ``sw`` (None: unit weights). ``pairs_of_ones``: every row holds
        two entries of value 1, so that with unit weights (None, or all 1) the sums are the
        counts (2n, 2n, n), the doubles the pass gives, without the pass."""
        n = X.shape[0]
        if pairs_of_ones and (sw is None or bool(np.all(np.asarray(sw) == 1.0))):
            sums = 2.0 * n, 2.0 * n, float(n)
        else:
            sums = _square_sums(X.indptr, X.data, sw)
        return replace(self, sum_sq=sums[0], n_nonzero=sums[1], sum_pairs=sums[2])

    def with_target_moments(self, y_min, y_max, y_sum, y_sum_sq):
        """The same summary with the targets' range and weighted sums given (what
        :meth:`with_targets` computes)."""
        return replace(self, y_min=y_min, y_max=y_max, y_sum=y_sum, y_sum_sq=y_sum_sq)

    @classmethod
    def merge(cls, parts, n_features, dtype):
        """The summary of the union of row sets summarised by ``parts`` (the Dask backend's
        partitions): counts and weights added, squares added exactly (``math.fsum``), the
        targets' range widened; partitions without rows ignored for the range."""
        parts = list(parts)
        lo = min((p.y_min for p in parts if p.n_samples), default=math.nan)
        hi = max((p.y_max for p in parts if p.n_samples), default=math.nan)
        rows = [p for p in parts if p.n_samples]
        return cls(sum(p.n_samples for p in parts), int(n_features), np.dtype(dtype).name,
                   float(sum(p.weight for p in parts)), lo, hi,
                   math.fsum(p.sum_sq for p in parts), sum(p.n_nonzero for p in parts),
                   math.fsum(p.sum_pairs for p in parts),
                   math.fsum(p.y_sum for p in rows) if rows else math.nan,
                   math.fsum(p.y_sum_sq for p in rows) if rows else math.nan)


def _target_stats(y, sw, *, rows=None, unit_weights=False):
    """(min, max, weighted sum, weighted sum of squares) of the targets ``y`` (``y[rows]``
    with an index ``rows``); NaN without them (the sums also NaN without one weight per
    target, unless ``unit_weights``: weight 1 each). One compiled pass
    (:func:`fmlearn.kernels.dedup.target_moments`: sequential sums, the same doubles on
    every machine, no BLAS call and no temporaries); overflow to inf is kept, as NumPy's."""
    if y is None or not np.size(y):
        return math.nan, math.nan, math.nan, math.nan
    y = np.ascontiguousarray(y, dtype=np.float64).reshape(-1)
    if rows is not None and np.asarray(rows).dtype != np.int32:  # one compiled variant
        y, rows = y[rows], None
    index = np.zeros(0, dtype=np.int32) if rows is None else rows
    n = index.shape[0] if rows is not None else y.shape[0]
    if n == 0:
        return math.nan, math.nan, math.nan, math.nan
    w = None if sw is None else np.ascontiguousarray(sw, dtype=np.float64).reshape(-1)
    weighted = unit_weights or (w is not None and w.shape[0] == n)
    from .kernels.dedup import target_moments  # numba only when a fit runs

    lo, hi, total, total_sq = target_moments(
        y, index, w if weighted and not unit_weights else np.zeros(0))
    if not weighted:  # no weights, or contrast targets (not one per row)
        return float(lo), float(hi), math.nan, math.nan
    return float(lo), float(hi), float(total), float(total_sq)


class RunContext:
    """The run-time side of a fit: clock, callback, live state (one per call, discarded after).

    Parameters
    ----------
    callback : callable or None
        ``callback(iteration, history)`` after every iteration (validated by
        :func:`check_callback`).
    may_stop : bool, default=False
        Whether a true return value of ``callback`` stops the run (a family whose documented
        callback contract says so: every family's ``fit`` callback now may stop).

    Attributes
    ----------
    clock : float
        ``time.perf_counter()`` when the current iteration's solver time started.
    live : object
        The state the solver is updating (for callbacks that score it mid-run), or None.
    """

    def __init__(self, callback=None, *, may_stop=False):
        self.callback = check_callback(callback)
        self.may_stop = bool(may_stop)
        self.clock = time.perf_counter()
        self.live = None

    def start_clock(self):
        """Restart the clock: the solvers' ``on_start`` (called once their kernels are
        compiled or loaded, so that no iteration's time includes compilation), and after an
        iteration's bookkeeping."""
        self.clock = time.perf_counter()

    def lap(self):
        """Seconds since the clock started."""
        return time.perf_counter() - self.clock

    def notify(self, iteration, history):
        """Call the user's callback; True when it asked to stop and may do so."""
        if self.callback is None:
            return False
        stop = self.callback(iteration, history)
        return bool(stop) if self.may_stop else False


@dataclass(frozen=True, kw_only=True, eq=False)
class FitPlan:
    """Base of the model families' fit plans (frozen: built once, read by every entry point).

    Attributes
    ----------
    summary : DataSummary
    seed : int
        The seed that keys the solver's per-step random streams (drawn from
        ``random_state`` before anything else, so every entry point draws the same).
    context : RunContext
        The run-time side (plans are compared by identity: ``eq=False``).
    """

    summary: DataSummary
    seed: int
    context: RunContext = field(default_factory=RunContext, repr=False)
