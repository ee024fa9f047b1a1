"""The trace-norm bound of the trace-bounded online estimators (CCFM, OnlineCFM): the shared
parameters, the scale check and ``trace_bound="auto"`` (not an estimator module).

``trace_bound="auto"``: the right bound depends on the scale of the targets and of
the rows, and the printed settings of Zhang et al. 2018 differ by a factor of 30 between its data
sets (delta = 10 on MovieLens, 300 on IJCNN1). Two steps, both derived from the first batch:

1. The rows are rescaled to a mean squared norm of 1: the learner sees c x with
   c = 1 / sqrt(mean ||x||^2) (the fitted ``x_scale_``; predictions apply it too). Without it
   a bound cannot suit both the features and CCFM's constant coordinate of x^ = (x, 1): on
   features of size 1e-3 a bound large enough for the interactions lets each conditional-
   gradient step put that much mass on the constant coordinate.
2. A matrix C of trace norm delta predicts at most delta / 2 ||x^||^2 on a row x^, so a
   rank-one C reaches a prediction of the size s of the targets' spread on a typical row
   (||x^||^2 = 2 for CCFM, ||x||^2 = 1 for the convex FM) when delta = delta0 = 2 s / 2 (or
   2 s); s is the standard deviation of the targets for regression, 1 (a unit of log-odds)
   for classification. A fitted C spreads its mass over many directions (one per feature
   for a linear term: 2 ||w||_2 for the part [[0, w], [w', 0]]), so the bound is chosen
   among delta0 x 1, 4, ..., 4^5 by running the learner with each of them side by side on up
   to 8,000 rows spread evenly over the first batch (``fit``: after identical rows are merged,
   so that weights and repeated rows agree), visited in a fixed pseudo-random order (seed 0,
   whatever ``random_state``), and keeping the
   one of the smallest prequential loss on the last three quarters of them (ties: the
   smallest bound). The candidates run from the largest down and the scan stops at the first
   whose loss rises (the full scan's choice when the loss is unimodal in the bound): the
   small bounds, whose saturated projections are the costly runs, only run while they help.
   Fewer rows favour small bounds, which learn faster but less (measured on IJCNN1: 2,000
   rows chose 16 delta0, 8,000 rows 64 delta0, the better one).

The cost of the scan. Each candidate is the learner itself run over the sample, so the scan
costs up to six fits of 8,000 rows; on wide sparse rows one candidate can cost far more than
the others: CCFM-FTRL at a bound just below the one its unprojected iterate needs saturates its
tracked subspace (every Ritz pair survives the projection, Zhang et al. 2018's exact projection
then needs more eigenpairs than the tracker holds) and refines it ``eig_max_iter`` times per
round: on Reuters R8 (7,629 tf-idf columns, 5,418 sample rows) the candidate 16 took 61 of the
scan's 64 CPU s, the fit at the chosen bound 1 s. The scan therefore runs each candidate in
chunks of rows (one row at first, then 1/64 of the rows done) and, between chunks:

* stops a candidate whose loss so far passes the best candidate's whole loss (the losses are
  >= 0, so its sum can only grow: it cannot win; the completed candidates' losses are summed
  in one pass, bit for bit the single run's);
* refuses a candidate whose saturated projections outnumber the best run's by more than
  AUTO_COSTLY_ROUNDS (16): its projections are inexact (the rank they need exceeds the
  tracked subspace) and every such round costs up to ``eig_max_iter`` products with S; the
  scan stops there as at a rise (the smaller bounds start projecting earlier);
* does not run a candidate under which the largest candidate's run never projected: CCFM-FTRL
  keeps M = -eta_t S_t while eta_t times its running bound on ||S_t||_tr is at most the
  bound, and then evolves as without a bound, bit for bit (CFM-FTRL, whose set is the PSD
  trace simplex, projects every round, but with a zero threshold, whatever the bound, while
  the same quantity is at most the bound); the chunks bound eta_t ||S_t||_tr
  over each chunk (the learner's ``unprojected_bound``), and every candidate at least that
  bound has the largest candidate's loss (ties: the smaller bound, as before).

S's pattern (or its sketch, when the pattern passes its cap) is built once per scan for the
whole sample and copied into each candidate's learner. The choice is the previous scan's
wherever no candidate is refused (tests/online/test_online_trace_scan.py checks it against
a one-pass oracle). On 2,000 rows of Reuters R8 (4,145 tf-idf columns) a default
``CCFMClassifier("ftrl")`` fit costs 0.67 CPU s with this scan against 6.3 with the previous
one, the same bound (``benchmarks/bench_trace_bound.py --quick``, alternated, quiet machine).

CCFM adds a step 0 (``_column_scaled``): each column is first divided by the root mean square
of its non-zero values in the first batch (the fitted ``col_scale_``, float64 (d,), 1 for a
column without a non-zero there, like scikit-learn's ``StandardScaler.scale_`` a divisor;
predictions and later ``partial_fit`` batches apply it too), when that brings the rows to a
common norm: when it cuts the coefficient of variation of the rows' squared norms
(:func:`norm_spread`, weighted) below AUTO_SPREAD_RATIO (1/2) of the rows' as given
(:func:`evens_rows`); otherwise the columns are left as given (no ``col_scale_``). Why the
condition: on rows already of one norm the division undoes the weighting the user chose.
tf-idf rows have unit norm, their rare words the larger values; divided, every word of a row
weighs about 1 and the rows' squared norms become their word counts (spread 0 -> 0.46 on
Reuters R8): CCFMClassifier("ftrl")'s held-out AUC fell from 0.980 (the chosen bound given,
X as given) to 0.966 on Reuters R8 and from 0.928 to 0.873 on 20 Newsgroups. Standardised
one-hot rows, the case the division is for, go the other way (their norms spread by the
factors, 0.47 -> 0 on a generated one-hot set); dense rows of like columns are near a tie
(0.750 -> 0.751) and are left alone; both outcomes are scale-free (the spread is), so the
rule stays equivariant in X -> b X. Rows of unit mean squared norm also keep step 1's factor
exactly 1.0 (``x_scale_``; within UNIT_ROUNDING): tf-idf rows reach the learner as given.
The trace norm is not invariant to column scaling: standardising a one-hot column of frequency
p multiplies it by 1 / sqrt(p (1 - p)), 1 to ~100 on MovieLens, and a ball of trace norm delta
then costs a rare feature's weight up to 100 times less mass than a frequent one's, so the
bound favours the rare features (defaults on standardised MovieLens-100K: RMSE ratio 0.982 to
the mean's). The rows' scale is already derived from the data; the columns' scale is
the same kind of unit. On one-hot data times any positive column factors f_j the divisor is
f_j exactly and the division gives back exactly the rows without the factors, hence the same
learner and predictions (``fit`` with ``shuffle=True`` visits the rows in an order hashed
from their values, which the factors change). Columns seen only in later batches keep 1. CCFM
only: OnlineCFM meets the defaults bar on standardised MovieLens without it (ratio 0.846,
benchmarks/RESULTS.md) and would need its MovieLens rows re-measured.

OCCFM's scan (``CCFMClassifier()``'s and ``CCFMRegressor()``'s default learner) gets none of
these shortcuts: its conditional-gradient path depends on the bound from the first row
(C_{t+1} = (1 - gamma_t) C_t - gamma_t delta u_t u_t', u_t the top eigenvector of
eta S_t + 2 C_t, S_t the gradients at the previous iterates), so no candidate's run repeats
or starts from another's, and its candidates' losses are close (on tf-idf Reuters R8 the two
run, 1024 and 256 delta0, differed by 0.3% of the loss, and the stop at the rise came in the
last chunk). It therefore runs on fewer rows: AUTO_OCG_SHARE (1/2) of the first batch, spread
evenly, but at least AUTO_OCG_MIN_ROWS (2,000) and at most AUTO_TRACE_ROWS
(:meth:`_scan_rows`); the candidates are still delta0 x 4^k with delta0 from the targets of
the full sample. Its cost was up to 3.4 fits with the bound given (two candidates run on
every row of a 5,485-row batch, then the fit). Fewer rows favour smaller bounds (above): on
a generated 600-row text set half the rows chose 16 delta0 where all chose 64, hence the
floor of 2,000 rows, under which a batch's scan is cheap anyway; batches of more than 16,000
rows scan 8,000 as before. Measured with the defaults (benchmarks/bench_online_defaults.py,
"default, main" against "default", which also carries the even-rows condition): the same
bound on diabetes, breast cancer, anes96, randhie and Adult; abalone 12.7 -> 3.2 (test RMSE
2.89 -> 2.84), fair 4 -> 256 delta0 (error 0.266 -> 0.277; its losses are flat over the
bounds: on 4,000 of its rows the choice was 16); on the tf-idf sets of
benchmarks/bench_trace_bound.py see its table.

The selection depends on the data only (no draw from random_state, no threads); every candidate is a
deterministic online learner. It is equivariant where the model is: for squared loss the
learners are equivariant in y (C -> a C when y -> a y: the gradients, the iterates and the
bound scale together), and with step 1 the rows X -> b X give the same learner and the same
predictions. The resolved values are the fitted attributes ``trace_bound_`` (the given value
when ``trace_bound`` is a number), ``x_scale_`` (1.0 then) and CCFM's ``col_scale_`` (absent
then), stored in model files and checked on load.
"""

import copy
import numbers

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._data import raw
from .._threads import blas_single_thread
from ..kernels.losses import loss_value_np
from ..kernels.steps import OK
from ..solvers._online_common import EXACT_CHUNK, GradientOwner
from ._base import (
    MAX_SCALE,
    intercept_of,
    inverse_root,
    running_intercepts,
    sample_weights,
    target_spread,
)

# rows of the first batch on which trace_bound="auto" compares its candidates
AUTO_TRACE_ROWS = 8000
# the candidates are delta0 times these factors (module docstring)
AUTO_TRACE_FACTORS = (1.0, 4.0, 16.0, 64.0, 256.0, 1024.0)
# trace_bound="auto" runs a candidate in chunks of max(1, rows done / CHUNK_DIVISOR) rows
CHUNK_DIVISOR = 64
# relative rounding allowed between the chunked and the one-pass sums of the losses
LOSS_ROUNDING = 1e-9
# OCCFM's candidates run on this share of the first batch, at least AUTO_OCG_MIN_ROWS of its
# rows (module docstring, "OCCFM's scan")
AUTO_OCG_SHARE = 0.5
AUTO_OCG_MIN_ROWS = 2000
# chunks of the candidates' runs for learners without a tracked projection
COARSE_CHUNKS = 16
# a candidate whose projections saturated the tracked subspace in more rounds than this is
# refused (module docstring, "The cost of the scan")
AUTO_COSTLY_ROUNDS = 16
# CCFM's "auto" divides the columns only when that cuts the spread of the rows' squared norms
# below this fraction of the spread as given (module docstring, step 0)
AUTO_SPREAD_RATIO = 0.5
# relative rounding of a mean squared row norm of 1 (sums over up to 1e6 rows of unit norm)
UNIT_ROUNDING = 1e-9
# a bound (or a bound times a squared row norm) beyond this would overflow float64 predictions
MAX_BOUND = 1e300

TRACE_BOUND_CONSTRAINT = [Interval(numbers.Real, 0, None, closed="neither"),
                          StrOptions({"auto"})]


def check_trace_bounded_scale(X, trace_bound, x_scale=1.0, col_scale=None):
    """Refuse rows whose prediction could overflow float64 under a trace-norm bound: for every
    matrix C with ||C||_tr <= trace_bound, |x^T C x| / 2 <= trace_bound / 2 ||x||^2 (CCFM's
    augmented x^ = (1, x) adds the 1), x the rows with their columns divided by ``col_scale``
    (if any) times ``x_scale``. Overflowing x_j x_l would otherwise reach the
    eigendecompositions as inf."""
    if X.nnz:
        norm2 = row_norms2(X, col_scale) * x_scale ** 2 + 1.0
        if not np.all(np.isfinite(norm2)) or trace_bound * norm2.max() > MAX_BOUND:
            raise ValueError("feature values are too large for the trace-norm bound "
                             "(predictions would overflow float64); rescale X")


def row_norms2(X, col_scale=None):
    """||x_i||^2 of every row of a CSR matrix (its columns divided by ``col_scale`` if given,
    as :func:`scale_columns` would, without copying X)."""
    data = X.data if col_scale is None else X.data / col_scale[X.indices]
    with np.errstate(over="ignore"):
        return np.bincount(np.repeat(np.arange(X.shape[0]), np.diff(X.indptr)),
                           weights=data ** 2, minlength=X.shape[0])


def column_scale(X, sw):
    """The root mean square of each column's non-zero values (weighted by the rows' weights),
    1 for a column without one: the divisor of the column (module docstring, step 0; a
    division, so that a one-hot column times f, whose scale is f exactly, gives back exactly
    1). Computed relative to each column's largest |value| so that neither the squares nor
    their sums under- or overflow."""
    d = X.shape[1]
    nz = X.data != 0
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[nz]
    cols, vals = X.indices[nz], np.abs(X.data[nz])
    w = sample_weights(sw)[rows]
    top = np.zeros(d)
    np.maximum.at(top, cols, vals)
    count = np.bincount(cols, weights=w, minlength=d)
    seen = (count > 0) & (top > 0)
    rel = vals / np.where(top > 0, top, 1.0)[cols]
    mean2 = np.bincount(cols, weights=w * rel ** 2, minlength=d)
    scale = np.ones(d)
    with np.errstate(over="ignore"):
        scale[seen] = top[seen] * np.sqrt(mean2[seen] / count[seen])
    if not np.all(np.isfinite(scale) & (scale > 1 / MAX_SCALE) & (scale < MAX_SCALE)):
        raise ValueError("trace_bound='auto': a column's values are too large or too small to "
                         "be rescaled in float64; rescale X or give trace_bound")
    return scale


def norm_spread(X, sw, col_scale=None):
    """The coefficient of variation (weighted standard deviation / weighted mean) of the rows'
    squared norms ||x_i||^2 (their columns divided by ``col_scale`` if given): 0 when every
    row has the same norm, whatever that norm; 0 for rows without a non-zero value."""
    p = sample_weights(sw)
    with np.errstate(over="ignore", invalid="ignore"):
        n2 = row_norms2(X, col_scale)
        top = n2.max() if n2.shape[0] else 0.0
        if not (np.isfinite(top) and top > 0):
            return 0.0
        n2 = n2 / top
        mean = float(np.dot(p, n2))
        return float(np.sqrt(np.dot(p, (n2 - mean) ** 2))) / mean


def evens_rows(X, col_scale, sw):
    """Whether dividing the columns by ``col_scale`` brings the rows to a common norm: the
    spread of the squared norms (:func:`norm_spread`) falls below AUTO_SPREAD_RATIO of the
    rows' as given (module docstring, step 0: rows already of one norm, as tf-idf's, keep
    their columns)."""
    return norm_spread(X, sw, col_scale) < AUTO_SPREAD_RATIO * norm_spread(X, sw)


def scale_columns(X, col_scale):
    """X with each column divided by ``col_scale`` (X itself when there is none)."""
    if col_scale is None:
        return X
    out = X.copy()
    out.data = out.data / col_scale[out.indices]
    return out


def auto_x_scale(X, sw):
    """1 / sqrt(mean ||x||^2) of the rows (weighted; module docstring); exactly 1.0 when that
    mean is 1 up to its summation's rounding (rows of unit norm, as tf-idf's, are left as
    given, bit for bit)."""
    with np.errstate(over="ignore", invalid="ignore"):
        norm2 = float(np.dot(sample_weights(sw), row_norms2(X)))
    scale = inverse_root(norm2, "the trace-norm bound", "trace_bound")
    return 1.0 if abs(scale - 1.0) <= UNIT_ROUNDING else scale


def auto_candidates(y, sw, classifier, augment):
    """The candidate bounds delta0 x AUTO_TRACE_FACTORS for rows of mean ||x||^2 = 1
    (module docstring)."""
    delta0 = 2.0 * target_spread(y, sw, classifier) / (2.0 if augment else 1.0)
    return [delta0 * f for f in AUTO_TRACE_FACTORS]


def sample_rows(n, cap=AUTO_TRACE_ROWS):
    """Up to ``cap`` row indices spread evenly over n rows, in order."""
    return np.unique(np.linspace(0, n - 1, min(n, cap)).round().astype(np.int64))


class TraceBounded:
    """``trace_bound`` (a number or ``"auto"``) and ``trace_bound_`` of CCFM and OnlineCFM."""

    _augment = True  # the rows are x^ = (x, 1) (CCFM); the convex FM sets False
    _column_scaled = False  # "auto" rescales the columns first (CCFM; module docstring)

    def _col_scale(self):
        """The per-column divisors of the learner's rows (None unless fitted)."""
        return self.__dict__.get("col_scale_")

    def _rows(self, X):
        s = self._col_scale()
        if s is None:
            return super()._rows(X)
        # divided first: a one-hot column times f gives back exactly the rows without f
        indptr, indices, data = raw(X)
        return indptr, indices, (data / s[indices]) * self._x_scale()

    def _trace_bound(self):
        """The bound the learner uses: the parameter, or the value ``"auto"`` resolved to."""
        if isinstance(self.trace_bound, str):
            return float(self.trace_bound_)
        return float(self.trace_bound)

    def _check_scale(self, X):
        if not isinstance(self.trace_bound, str) or "trace_bound_" in self.__dict__:
            check_trace_bounded_scale(X, self._trace_bound(), self._x_scale(),
                                      self._col_scale())

    def _resolve_auto(self, X, y, sw):
        """Set ``trace_bound_`` before a new learner is made from the rows X."""
        self.__dict__.pop("col_scale_", None)
        if isinstance(self.trace_bound, str):
            if self._column_scaled:
                # rows whose squares overflow are refused as without the rule: every model with
                # interactions refuses x_j x_l beyond float64
                auto_x_scale(X, sw)
                scale = column_scale(X, sw)
                if evens_rows(X, scale, sw):
                    self.col_scale_ = scale
            Xc = scale_columns(X, self._col_scale())
            self.x_scale_ = auto_x_scale(Xc, sw)
            self._rows_scaled(Xc, y, sw)
            self.trace_bound_ = self._select_trace_bound(X, y, sw)
            check_trace_bounded_scale(Xc, self.trace_bound_, self.x_scale_)
        else:
            self.x_scale_ = 1.0
            self._rows_scaled(X, y, sw)
            self.trace_bound_ = float(self.trace_bound)

    def _rows_scaled(self, X, y, sw):
        """Hook: the rows X and targets y of the first batch (columns divided by
        ``col_scale_``, not yet times ``x_scale_``, which is set) before the bound is chosen
        (CCFM derives its step from them)."""

    def _scan_rows(self, n):
        """The rows (in order) on which the candidates run: :func:`sample_rows`."""
        return sample_rows(n)

    def _select_trace_bound(self, X, y, sw):
        """The candidate of smallest prequential loss (module docstring)."""
        full = sample_rows(X.shape[0])
        rows = self._scan_rows(X.shape[0])
        # visited in a fixed pseudo-random order: ``fit`` hands the rows over sorted (merged
        # duplicates, grouped by their first feature), and a sorted stream is not the shuffled
        # one the learner will see
        rows = rows[np.random.RandomState(0).permutation(rows.shape[0])]
        Xs, ys, ws = X[rows], y[rows], sw[rows]
        csr = self._rows(Xs)
        classifier = self._is_classifier()
        off = None
        if self._intercept_outside():
            off, _ = running_intercepts(ys, ws, np.arange(rows.shape[0], dtype=np.int64),
                                        [0.0, 0.0], classifier)
        scan = _Scan(self, X.shape[1], csr, ys, ws, off, classifier)
        # largest bound first, stopping at the first candidate whose loss rises above the best
        # so far: the same choice as the full scan when the loss is unimodal over the grid
        best, best_loss = None, np.inf
        # the candidates from the targets of the whole sample (the same whatever the rows run)
        for cand in auto_candidates(y[full], sw[full], classifier, self._augment)[::-1]:
            value = scan.loss(cand, best_loss)
            if value is None:  # diverged
                continue
            if value <= best_loss:  # ties: the smaller bound
                best, best_loss = cand, value
            else:  # rose (or refused as costly: module docstring)
                break
        if best is None:
            raise ValueError("trace_bound='auto': every candidate bound diverged on the first "
                             "rows; rescale X or give trace_bound")
        return best

    @property
    def intercept_(self):
        """The intercept b kept outside the learner (0.0 when ``fit_intercept=False``)."""
        check_is_fitted(self)
        if not self._intercept_outside():
            return 0.0
        return intercept_of(self._intercept_stats(), self._is_classifier())

    def _publish(self, learner):
        super()._publish(learner)
        if not isinstance(self.trace_bound, str):
            self.trace_bound_ = float(self.trace_bound)

    def _check_loaded_state(self):
        """A loaded ``trace_bound_`` is a finite positive float (the resolved bound), then the
        learner's state."""
        tb = self.__dict__.get("trace_bound_")
        if tb is None and isinstance(self.trace_bound, str):
            raise ValueError("trace_bound='auto' but the model has no trace_bound_")
        if tb is not None and (not isinstance(tb, float) or not 0 < tb < MAX_BOUND):
            raise ValueError(f"trace_bound_ = {tb!r} must be a positive finite float")
        cs = self._col_scale()
        if cs is not None and not (
                isinstance(cs, np.ndarray) and cs.dtype == np.float64
                and cs.shape == (int(self.n_features_in_),)
                and np.all((cs > 1 / MAX_SCALE) & (cs < MAX_SCALE))):
            raise ValueError(f"col_scale_ must be {self.n_features_in_} positive finite float64 "
                             f"values")
        super()._check_loaded_state()


class _Scan:
    """The runs of ``trace_bound="auto"``'s candidates on the sample rows (module docstring,
    "The cost of the scan"). ``record``: per candidate, (bound, outcome, rounds learned,
    costly rounds), outcome one of "run", "same" (not run: the run of a larger bound left
    every projection the identity), "rose" (stopped once its loss passed the best), "costly"
    (refused), "diverged"."""

    def __init__(self, est, n_features, csr, y, sw, off, classifier):
        self.est, self.n_features, self.csr = est, n_features, csr
        self.y, self.sw, self.off = y, sw, off
        n = y.shape[0]
        self.first_scored = n // 4
        self.loss_name = "logistic" if classifier else "squared"
        self.limit = est._limit(y)
        # chunk boundaries: 1 row at first, then 1/64 of the rows done, so that eta_{t0+1}
        # exceeds eta_t of a chunk's rounds by at most (1 + 1/64) ** power_t
        bounds = [0]
        while bounds[-1] < n:
            bounds.append(min(n, bounds[-1] + max(1, bounds[-1] // CHUNK_DIVISOR)))
        self.bounds = bounds
        # learners without a tracked projection (dense, OCCFM, the low-rank projected ones)
        # need the chunks only to stop a losing candidate: COARSE_CHUNKS of them
        self.coarse = sorted({int(round(n * k / COARSE_CHUNKS)) for k in range(COARSE_CHUNKS + 1)})
        self.best_costly = None  # costly rounds of the best candidate's run so far
        self.S0 = None  # the accumulated gradient prepared for the sample (empty)
        self.free_bound = None  # every bound >= this runs as the unbounded learner
        self.free_loss = None
        self.record = []

    def loss(self, cand, best_loss):
        """The candidate's weighted prequential loss on the scored rows, or np.inf when its
        run was stopped (its loss passed ``best_loss``, or it was refused as costly), or None
        when it diverged."""
        if self.free_bound is not None and cand >= self.free_bound * (1.0 + 1e-12):
            self.record.append((cand, "same", 0, 0, self.free_loss))
            return self.free_loss
        est = self.est
        est.trace_bound_ = cand
        learner = est._new_learner(self.n_features, None)
        n = self.y.shape[0]
        out = np.zeros(n)
        order = np.arange(n, dtype=np.int64)
        free = hasattr(learner, "unprojected_bound")
        free_bound = 0.0
        value = 0.0
        outcome = "run"
        with blas_single_thread():
            self._prepare(learner)
            bounds = self.bounds if getattr(learner, "dense", True) is False else self.coarse
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                t0 = learner.rounds() if free else 0
                try:
                    status, _, _ = learner.learn(self.csr, self.y, self.sw, order[a:b], out,
                                                 self.limit, self.off)
                except np.linalg.LinAlgError:
                    status = None
                if status != OK:
                    self.record.append((cand, "diverged", b, 0, np.inf))
                    return None
                if free:
                    bound = learner.unprojected_bound(t0)
                    free = bound is not None
                    free_bound = max(free_bound, bound) if free else 0.0
                s = max(a, self.first_scored)
                if s < b:
                    value += float(np.dot(self.sw[s:b], loss_value_np(
                        self.loss_name, out[s:b], self.y[s:b])))
                costly = _costly_rounds(learner)
                # the losses are >= 0: the sum only grows, and once past the best (by more
                # than the rounding of a sum in another order) the candidate cannot win
                if value > best_loss * (1.0 + LOSS_ROUNDING):
                    outcome = "rose"
                elif (self.best_costly is not None
                      and costly > self.best_costly + AUTO_COSTLY_ROUNDS):
                    outcome = "costly"
                if outcome != "run":
                    self.record.append((cand, outcome, b, costly, value))
                    return np.inf
        # the total in one sum, as a single pass over the rows would add it
        s = self.first_scored
        value = float(np.dot(self.sw[s:], loss_value_np(self.loss_name, out[s:], self.y[s:])))
        costly = _costly_rounds(learner)
        self.record.append((cand, outcome, n, costly, value))
        if value <= best_loss:
            self.best_costly = costly
        if free and self.free_bound is None and free_bound <= cand:
            self.free_bound, self.free_loss = free_bound, value
        return value

    def _prepare(self, learner):
        """Grow the (empty) accumulated gradient S's pattern for every pair of the sample, in
        the learner's own chunks of rows, or turn it into the sketch as soon as the pattern
        passes its cap; once, then copied into the next candidates' learners (S starts the
        same whatever the bound). The chunks of :meth:`loss` then add no pattern, and the
        pattern, the costly part on wide rows, is built once per scan rather than once per
        candidate and chunk."""
        if not isinstance(learner, GradientOwner):
            return
        if self.S0 is not None:
            learner.state = learner.state._replace(S=copy.deepcopy(self.S0))
            learner.state.tr.since_refresh[0] = self.since0
            return
        indptr, indices = self.csr[0], self.csr[1]
        n = indptr.shape[0] - 1
        for a in range(0, n, EXACT_CHUNK):
            b = min(n, a + EXACT_CHUNK)
            learner.prepare(indptr[a:b + 1] - indptr[a], indices[indptr[a]:indptr[b]])
        self.S0 = copy.deepcopy(learner.state.S)
        self.since0 = int(learner.state.tr.since_refresh[0])


def _costly_rounds(learner):
    """The learner's count of rounds of costly projections (0 for learners without one)."""
    return learner.costly_rounds() if hasattr(learner, "costly_rounds") else 0
