"""Generalized factorization machine trained by the one-pass alternating scheme (seed 000/003,
Algorithm 1) or by its moment-eliminating variant for non-Gaussian features (seed 001 §3.2).

    f(x) = b + <w, x> + x^T M x,     M = (U V^T + V U^T) / 2     (symmetric, rank <= 2k)

No PSD and no zero-diagonal constraint (000 §2): M may have eigenvalues of both signs, which
the classic FM (M = V V^T minus its diagonal) cannot represent.

The shared estimator plumbing of every one-pass model (this one, :class:`fmlearn.IFMRegressor`
and the rank-one sensing estimators) lives in :class:`OnePassMixin`.
"""

import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._base import BaseFM, FMRegressorMixin, failure_atomic, progress
from ._contrasts import ContrastALSMixin
from ._data import to_csr
from .exceptions import ConvergenceWarning, DivergenceError, SmallBatchWarning
from .linalg import symmetric_low_rank
from .solvers.one_pass import (
    Batch,
    OnePassSettings,
    OnePassState,
    new_state,
    one_pass_solver,
    predict_batch,
)

__all__ = ["GFMRegressor", "SmallBatchWarning", "OnePassMixin"]

#: Rows per batch of ``batch_size="auto"``, in units of n_factors * n_features (000 Theorem 1
#: asks for n >= C k^3 d; on Gaussian data c = 10 converges fast and c ~ 2-3 is the edge).
AUTO_BATCH_FACTOR = 10
#: Below this many rows per batch (in units of k d) the theory gives no guarantee.
MIN_BATCH_FACTOR = 2
#: n_passes="auto": one pass when X holds at least this many batches (the one-pass iteration
#: contracts geometrically per batch), else passes over the re-used data until converged.
AUTO_MIN_BATCHES = 10
AUTO_MAX_PASSES = 100


def train_rows(est, X, y, sample_weight, reset):
    """Validated (X, y, sample_weight) with the rows of weight 0 dropped (they add nothing to
    the batch averages, and dropping them keeps "weight 0 == row absent" exact)."""
    X, y, sw = est._validate_train(X, y, sample_weight, reset=reset)
    if reset and not (X.nnz if sp.issparse(X) else np.any(X)):
        # the one-pass estimators standardise by the first batch's moments; all-zero
        # features have none (GFM's shift correction then fitted an intercept far off the mean)
        raise ValueError(f"{type(est).__name__}: X is all zeros; the one-pass estimators need "
                         "features that vary (their moments define the working coordinates)")
    keep = np.flatnonzero(sw > 0)
    if keep.shape[0] < X.shape[0]:
        X, y, sw = X[keep], y[keep], sw[keep]
    return X, y, sw


def _as_truth(truth, d):
    """Validate a planted truth: an object with ``w`` and ``M`` attributes, or a pair (w, M)."""
    if truth is None:
        return None
    if hasattr(truth, "M"):
        w, M = getattr(truth, "w", None), truth.M
    else:
        try:
            w, M = truth
        except (TypeError, ValueError):
            raise ValueError("truth must be a pair (w, M) or have attributes w and M") from None
    if w is None:
        w = np.zeros(d)
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (d,):
        raise ValueError(f"truth w has shape {w.shape}, expected ({d},)")
    if getattr(M, "shape", None) != (d, d):
        raise ValueError(f"truth M has shape {getattr(M, 'shape', None)}, expected ({d}, {d})")
    return w, M


class OnePassMixin:
    """Estimator plumbing shared by the one-pass models (not for direct use).

    Subclasses set ``_correction`` ("shift", "moment", "zero_diagonal"), ``_fit_linear`` and
    ``_fit_intercept_always`` as needed, and define the usual parameters.
    """

    _fit_linear = True

    # -- helpers ------------------------------------------------------------------------------
    def _correction(self):
        raise NotImplementedError

    def _zero_diagonal(self):
        return self._correction() == "zero_diagonal"

    def _settings(self, rs, multi_pass=False):
        guard = getattr(self, "safeguard", False)
        if guard == "auto":
            # Guard fresh steps only when fit will re-use the rows: then the run is outside the
            # one-pass theory anyway; a single streaming pass keeps the seeds' algorithm.
            guard = multi_pass
        return OnePassSettings(
            n_factors=self.n_factors, correction=self._correction(),
            fit_linear=self._fit_linear, fit_intercept=self._uses_intercept(),
            standardize=self._uses_standardize(), init=self.init, random_state=rs,
            safeguard=bool(guard),
            n_jobs=getattr(self, "n_jobs", None))

    def _uses_intercept(self):
        return bool(getattr(self, "fit_intercept", False))

    def _uses_standardize(self):
        return bool(getattr(self, "standardize", False))

    def _batch_rows(self, n_features):
        if self.batch_size == "auto":
            return AUTO_BATCH_FACTOR * min(self.n_factors, n_features) * n_features
        return int(self.batch_size)

    def _prepare_X(self, X, dtype):
        if sp.issparse(X):
            return to_csr(X, dtype)
        return np.ascontiguousarray(X, dtype=dtype)

    def _state_from_attributes(self):
        if not hasattr(self, "working_U_"):
            return None
        return OnePassState(
            self.working_w_.copy(), self.working_U_.copy(), self.working_V_.copy(),
            float(self.working_intercept_), int(self.n_batches_), self.mean_.copy(),
            self.scale_.copy(), None if self.moment_coef_ is None else self.moment_coef_.copy(),
            float(self.y_scale_), float(self.ref_norm_),
            None if self.moment_tau_ is None else self.moment_tau_.copy(), float(self.step_))

    def _store_state(self, state):
        self.working_w_ = state.w
        self.working_U_ = state.U
        self.working_V_ = state.V
        self.working_intercept_ = float(state.b)
        self.n_batches_ = int(state.t)
        self.mean_ = state.mean
        self.scale_ = state.scale
        self.moment_coef_ = state.coef
        self.y_scale_ = float(state.y_scale)
        self.ref_norm_ = float(state.ref_norm)
        self.moment_tau_ = state.tau
        self.step_ = float(state.eta)

    def _after_first_batch(self, state):
        """Hook called once, after the first batch of a fresh model (warnings on its data)."""

    def _warn_small(self, n_rows, d):
        k = min(self.n_factors, d)
        need = MIN_BATCH_FACTOR * k * d
        if n_rows < need:
            warnings.warn(
                f"{type(self).__name__}: a batch of {n_rows} rows is below the ~{need} rows "
                f"(about {MIN_BATCH_FACTOR} n_factors n_features) the one-pass theory needs "
                f"(seed 000 Theorem 1); the estimate may be poor or diverge. Use more rows per "
                "batch or fewer n_factors.", SmallBatchWarning, stacklevel=3)

    def _history_template(self, truth, eval_set):
        h = {"rmse": []}
        if truth is not None:
            h["recovery_error"] = []
        if eval_set is not None:
            h["val"] = []
        return h

    def _eval_set(self, eval_set):
        ev = self._validate_eval_set(eval_set)
        if ev is None:
            return None
        return self._prepare_X(ev[0], self.dtype_), ev[1]

    def _record(self, history, state, info, truth, evald, bar):
        history["rmse"].append(info["rmse"])
        post = {"batch_rmse": f"{info['rmse']:.4g}"}
        if truth is not None:
            history["recovery_error"].append(self._recovery_error(state, truth))
            post["rec_err"] = f"{history['recovery_error'][-1]:.3g}"
        if evald is not None:
            Xv, yv = evald
            pred = predict_batch(Batch(Xv, state.mean, state.scale, self.n_jobs), state,
                                 self._zero_diagonal())
            history["val"].append(float(np.sqrt(np.mean((pred - yv) ** 2))))
            post["val"] = f"{history['val'][-1]:.4g}"
        bar.set_postfix(post)
        bar.update(1)

    def _recovery_error(self, state, truth):
        from .diagnostics import recovery_error

        w, U, V, _ = _original_parameters(state, self._zero_diagonal())
        M = symmetric_low_rank(U, V, zero_diagonal=self._zero_diagonal())
        return recovery_error(w if self._fit_linear else None, M,
                              truth[0] if self._fit_linear else None, truth[1])

    def _raise_diverged(self, info, rows):
        k = min(self.n_factors, self.n_features_in_)
        raise DivergenceError(
            f"{type(self).__name__} diverged: {info['diverged']}. Batches had about {rows} "
            f"rows; the one-pass theory needs n >~ c k d with c ~ 2-3 on Gaussian data "
            f"(k d = {k * self.n_features_in_}). Use a larger batch_size or fewer n_factors; "
            "for skewed or heavy-tailed features try solver='moment' or IFMRegressor. "
            "The estimator keeps its previous state")

    # -- fit / partial_fit ----------------------------------------------------------------------
    def _fit_one_pass(self, X, y, sample_weight, truth, eval_set):
        X, y, sw = train_rows(self, X, y, sample_weight, reset=True)
        d = X.shape[1]
        self.dtype_ = np.dtype(X.dtype).name
        X = self._prepare_X(X, X.dtype)
        truth = _as_truth(truth, d)
        evald = self._eval_set(eval_set)
        state = self._state_from_attributes() if self.warm_start else None
        if state is None or state.w.shape[0] != d or state.w.dtype != X.dtype:
            state = new_state(d, self.n_factors, X.dtype)
        history = self._history_template(truth, eval_set)
        fresh = state.t == 0
        n = X.shape[0]
        rows = self._batch_rows(d)
        n_b = max(1, n // rows)
        bounds = np.linspace(0, n, n_b + 1).round().astype(np.int64)
        self._warn_small(int(np.min(np.diff(bounds))), d)
        self.batch_size_ = int(np.max(np.diff(bounds)))
        auto = self.n_passes == "auto"
        if auto:
            max_passes = 1 if n_b >= AUTO_MIN_BATCHES else AUTO_MAX_PASSES
        else:
            max_passes = int(self.n_passes)
        rs = check_random_state(self.random_state)
        settings = self._settings(rs, multi_pass=max_passes > 1)
        wsum = [float(sw[a:b].sum()) for a, b in zip(bounds[:-1], bounds[1:], strict=False)]

        def one_pass():
            for a, b in zip(bounds[:-1], bounds[1:], strict=False):
                yield X[a:b], y[a:b], sw[a:b]

        bar = progress(self.verbose, max_passes * n_b, type(self).__name__)
        n_done = 0
        previous = np.inf
        converged = max_passes == 1
        with bar:
            for p in range(max_passes):
                if p == 1:
                    settings.reuse = True
                    state.eta = settings.reuse_step
                state, done, info = one_pass_solver(
                    one_pass(), state, settings,
                    lambda t, st, inf: self._record(history, st, inf, truth, evald, bar))
                n_done += done
                if fresh and p == 0 and state.t > 0:
                    self._after_first_batch(state)
                if info["diverged"]:
                    self._raise_diverged(info, self.batch_size_)
                # Prequential RMSE of the pass (each batch's error before its update).
                loss = float(np.sqrt(np.dot(wsum, np.square(info["rmse"])) / np.sum(wsum)))
                # Pass 1 starts from the zero model, so compare from the third pass on.
                # Stop on a small relative change, or once the fit is exact to tol (noise-free
                # data decrease geometrically to 0 and never meet the relative test).
                if auto and p >= 2 and (abs(previous - loss) <= self.tol * previous
                                        or loss <= self.tol * state.y_scale):
                    converged = True
                    break
                previous = loss
        if auto and not converged:
            warnings.warn(f"{type(self).__name__}: the training RMSE still changed by more than "
                          f"tol={self.tol} after {max_passes} passes over the data",
                          ConvergenceWarning, stacklevel=3)
        self.n_iter_ = n_done
        self.n_passes_ = p + 1
        self.history_ = history
        self._store_state(state)
        return self

    def _partial_fit_one_pass(self, X, y, sample_weight, truth):
        first = not hasattr(self, "working_U_")
        X, y, sw = train_rows(self, X, y, sample_weight, reset=first)
        d = X.shape[1]
        if first:
            self.dtype_ = np.dtype(X.dtype).name
            state = new_state(d, self.n_factors, np.dtype(self.dtype_))
            self.history_ = self._history_template(truth, None)
        else:
            state = self._state_from_attributes()
        X = self._prepare_X(X, np.dtype(self.dtype_))
        truth = _as_truth(truth, d)
        if truth is not None and "recovery_error" not in self.history_:
            self.history_["recovery_error"] = []
        self._warn_small(X.shape[0], d)
        rs = check_random_state(self.random_state)
        history = self.history_
        state, n_done, info = one_pass_solver(
            [(X, y, sw)], state, self._settings(rs),
            lambda t, st, inf: self._record(history, st, inf, truth, None,
                                            progress(0, 1, "")))
        if first and state.t > 0:
            self._after_first_batch(state)
        if info["diverged"]:
            self._raise_diverged(info, X.shape[0])
        self.batch_size_ = int(X.shape[0])
        self.n_iter_ = getattr(self, "n_iter_", 0) + n_done
        self._store_state(state)
        return self

    # -- prediction -----------------------------------------------------------------------------
    def _raw_predict(self, X):
        state = self._state_from_attributes()
        return predict_batch(Batch(X, state.mean, state.scale, getattr(self, "n_jobs", None)),
                             state, self._zero_diagonal())

    # -- the model in the caller's coordinates --------------------------------------------------
    def _original(self):
        check_is_fitted(self)
        return _original_parameters(self._state_from_attributes(), self._zero_diagonal())

    @property
    def U_(self):
        """Left factor in input coordinates, shape (n_features, k): M = (U V^T + V U^T)/2."""
        return self._original()[1]

    @property
    def V_(self):
        """Right factor in input coordinates, shape (n_features, k)."""
        return self._original()[2]

    @property
    def w_(self):
        """Linear coefficients in input coordinates, shape (n_features,)."""
        return self._original()[0]

    @property
    def intercept_(self):
        """Constant term b of the model in input coordinates."""
        return self._original()[3]

    @property
    def M_(self):
        """The second-order matrix as a :class:`fmlearn.linalg.LowRankOperator` (never dense;
        call ``.toarray()`` for small d)."""
        _, U, V, _ = self._original()
        return symmetric_low_rank(U, V, zero_diagonal=self._zero_diagonal())

    def _check_loaded_state(self):
        d = int(self.n_features_in_)
        k = min(self.n_factors, d)
        if (self.working_w_.shape != (d,) or self.working_U_.shape != (d, k)
                or self.working_V_.shape != (d, k) or self.mean_.shape != (d,)
                or self.scale_.shape != (d,)):
            raise ValueError(f"stored arrays do not match n_features_in_={d}, n_factors={k}")
        if self.moment_coef_ is not None and np.shape(self.moment_coef_) != (d, 4):
            raise ValueError("moment_coef_ must have shape (n_features, 4)")
        if self.moment_tau_ is not None and np.shape(self.moment_tau_) != (d,):
            raise ValueError("moment_tau_ must have shape (n_features,)")
        for name in ("working_w_", "working_U_", "working_V_", "mean_", "scale_"):
            if not np.all(np.isfinite(getattr(self, name))):
                raise ValueError(f"{name} contains NaN or infinity")
        if np.any(self.scale_ <= 0):
            raise ValueError("scale_ must be positive")


def _original_parameters(state, zero_diagonal=False):
    """(w, U, V, b) of f(x) in input coordinates from the working-coordinate state.

    With z = (x - m) / s:  M = S^-1 M_z S^-1  (so U = U_z / s, V = V_z / s),
    w = w_z / s - 2 M m,  b = b_z + m^T M m - (w_z / s)^T m.
    """
    s = state.scale.astype(np.float64)
    m = state.mean.astype(np.float64)
    U = state.U.astype(np.float64) / s[:, None]
    V = state.V.astype(np.float64) / s[:, None]
    wz = state.w.astype(np.float64) / s
    Mop = symmetric_low_rank(U, V, zero_diagonal=zero_diagonal)
    Mm = Mop.matvec(m)
    w = wz - 2.0 * Mm
    b = float(state.b + m @ Mm - wz @ m)
    return w, U, V, b


class GFMRegressor(ContrastALSMixin, OnePassMixin, FMRegressorMixin, BaseFM):
    """Generalized factorization machine (gFM) trained one pass over mini-batches.

    Model::

        f(x) = b + <w, x> + x^T M x,      M = (U V^T + V U^T) / 2,   rank(M) <= 2k

    ``solver="one_pass"`` is seed 000 Algorithm 1: each mini-batch of n rows is read once and
    gives one step of a block power iteration on the matrix-free operator
    ``H1 - h2/2 I + M`` (H1 = A'(r)/(2n), h2 = mean residual), a QR, and ``w <- w + X^T r / n``.
    On Gaussian features the error shrinks geometrically when n >~ c k d (000 Theorems 1, 15;
    c ~ 2-3 is the edge, c = 10 converges fast). ``solver="moment"`` is seed 001 Algorithm 1
    with its fixes (see :mod:`fmlearn.solvers.moment`): the third and fourth moments of every
    feature, estimated on the first batch, remove the skewness/kurtosis bias that makes the
    plain method diverge on skewed features; it needs the tau-Moment Invertible Property
    (tau = |phi - 1 - kappa^2| > 0, see :func:`fmlearn.diagnostics.moment_invertibility`).

    The theory assumes features with zero mean and unit variance: with ``standardize=True``
    (default) the mean and scale of every feature are estimated on the first batch and the model
    is fitted on z = (x - mean) / scale, implicitly (sparse input stays sparse). The model is an
    exact reparametrisation, so ``w_``, ``U_``, ``V_``, ``M_``, ``intercept_`` are reported in
    the input coordinates.

    Parameters
    ----------
    n_factors : int, default=5
        k, the number of columns of U and V.
    solver : {"auto", "one_pass", "moment", "als", "lm"}, default="auto"
        "auto" is "one_pass" for ordinary targets and "lm" when ``fit`` gets ``contrasts``.
        "als" and "lm" are the batch solvers of :mod:`fmlearn.solvers.contrast_ls`
        (alternating exact ridge solves over (b, w, V) and (b, w, U), or Levenberg-Marquardt
        on all parameters; the objective never increases); they fit y itself or contrasts of f
        (seed 001 §4.2; docs/vtec.md), with ``n_passes`` iterations ("auto": until the
        relative decrease is below ``tol``, at most 100). The one-pass solvers cannot fit
        contrasts (they rely on the law of the rows x, which a contrast breaks).
    batch_size : int or "auto", default="auto"
        Rows per mini-batch in ``fit`` ("auto": 10 k d). ``fit`` cuts X in order into
        ``max(1, n // batch_size)`` batches of about equal size; ``partial_fit`` takes the batch
        it is given. When X has fewer rows than one batch it is used whole (one batch), and a
        :class:`SmallBatchWarning` is issued below about 2 k d rows.
    n_passes : int or "auto", default="auto"
        Passes over the batches in ``fit``. One pass is the streaming algorithm of the seeds.
        Further passes re-use the data, which the one-pass theory does not cover (a batch is no
        longer independent of the iterate): they run the same step as a projected gradient-type
        method on the empirical risk, with a monotone safeguard (a step that would increase the
        batch's loss is halved until it does not). "auto": one pass when X holds at least 10
        batches, otherwise passes until the training RMSE changes by less than ``tol``
        (relative) from one pass to the next or falls below ``tol`` times the RMS of the
        targets, at most 100 (small data sets).
    tol : float, default=1e-4
        Stopping tolerance of ``n_passes="auto"``.
    safeguard : bool or "auto", default="auto"
        Also on fresh batches, halve a step that would increase the batch's own loss (an extra
        read of the batch per step). "auto": only when ``fit`` makes more than one pass (small
        data sets, where the run is outside the one-pass theory anyway; on data that the theory
        covers the step decreases the loss and is accepted unchanged). A single streaming pass
        and ``partial_fit`` run the seeds' algorithm unguarded, so a run outside the theory
        (e.g. plain one-pass gFM on skewed features) diverges visibly and raises
        DivergenceError; with ``True`` such runs converge slowly or stall instead.
    fit_intercept : bool, default=True
        Learn a constant b (not in the seeds): E[h2] = (b* - b) + tr(M* - M), so
        b <- b + h2 - (tr M_new - tr M_old).
    standardize : bool, default=True
        Fit on features standardised with the first batch's mean and standard deviation (only
        scaled, by their root mean square, when ``fit_intercept=False``: removing the mean
        creates a constant term that only an intercept can absorb).
    init : {"auto", "dense", "randomized", "lanczos"}, default="auto"
        Eigen-solver of the spectral initialisation on the first batch (top-k eigenvectors of
        ``H1 - h2/2 I`` by magnitude); "auto" is exact (dense) up to
        :data:`fmlearn.linalg.DENSE_MAX_DIM` features and a randomized block power method above.
    warm_start : bool, default=False
        ``fit`` continues from the fitted state (same standardisation and moments).
    random_state : int, RandomState or None, default=None
        Used only by the randomized initialisation.
    n_jobs : int or None, default=None
        Threads for the batch products (None: all CPUs). Rows are processed in fixed chunks
        with single-threaded BLAS and summed in a fixed order, so results do not depend on it.
    verbose : int, default=0
        Progress bar with the prequential batch RMSE (and recovery error / validation RMSE).
    reg_linear, reg_pairwise : float, default=0.0
        solver="als" or "lm": ridge penalties on w and on (U, V) (working coordinates), added
        to the weighted sum of squared residuals (libFM's convention, as in FMRegressor).

    Attributes
    ----------
    w_ : ndarray of shape (n_features,)
    U_, V_ : ndarrays of shape (n_features, k)
        Factors in input coordinates (U_ has orthonormal columns when standardize=False).
    M_ : LowRankOperator of shape (n_features, n_features)
        The symmetric second-order matrix, matrix-free.
    intercept_ : float
    working_w_, working_U_, working_V_, working_intercept_, mean_, scale_
        The solver state in standardised coordinates (what ``partial_fit`` continues from).
    moment_coef_ : ndarray of shape (n_features, 4) or None
        solver="moment": the coefficients (G1, G2, H1, H2) of seed 001 Eq. 8-9.
    moment_tau_ : ndarray of shape (n_features,) or None
        solver="moment": tau = |phi - 1 - kappa^2| per standardised feature (first batch).
    n_batches_ : int
        Batches consumed since the first one (including by ``partial_fit``).
    n_iter_ : int
        Batch steps taken by the last ``fit`` (passes times the number of batches).
    n_passes_ : int
        Passes over the data made by the last ``fit``.
    step_ : float
        Step of the next re-used batch (1, halved after rejected steps and doubled back).
    batch_size_ : int
        Largest batch of the last call.
    history_ : dict of lists, one entry per batch
        ``"rmse"``: residual RMS of each batch *before* its update (a prequential error);
        ``"recovery_error"``: (|w - w*| + ||M - M*||_2) / (|w*| + ||M*||_2) when ``truth`` is
        passed (spectral norm, computed without d x d matrices); ``"val"``: RMSE on
        ``eval_set``.

    References
    ----------
    M. Lin and J. Ye. A non-convex one-pass framework for generalized factorization machine and
    rank-one matrix sensing. NeurIPS 2016 (seed 000; long version with proofs: seed 003).
    M. Lin et al. Which factorization machine modeling is better: a theoretical answer with
    optimal guarantee. AAAI 2019 (seed 001).

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import GFMRegressor
    >>> from fmlearn.datasets import make_gfm
    >>> X, y, truth = make_gfm(40000, 40, 2, random_state=0)
    >>> m = GFMRegressor(n_factors=2, batch_size=2000, random_state=0).fit(X, y, truth=truth)
    >>> m.n_batches_
    20
    >>> bool(m.history_["recovery_error"][-1] < 1e-6)
    True
    """

    _parameter_constraints = {
        "n_factors": [Interval(numbers.Integral, 1, None, closed="left")],
        "solver": [StrOptions({"auto", "one_pass", "moment", "als", "lm"})],
        "reg_linear": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_pairwise": [Interval(numbers.Real, 0, None, closed="left")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "n_passes": [Interval(numbers.Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "safeguard": ["boolean", StrOptions({"auto"})],
        "fit_intercept": ["boolean"],
        "standardize": ["boolean"],
        "init": [StrOptions({"auto", "dense", "randomized", "lanczos"})],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "n_jobs": [Interval(numbers.Integral, -1, None, closed="left"), None],
        "verbose": ["verbose"],
    }

    def __init__(self, n_factors=5, *, solver="auto", batch_size="auto", n_passes="auto",
                 tol=1e-4, safeguard="auto", fit_intercept=True, standardize=True, init="auto",
                 warm_start=False, random_state=None, n_jobs=None, verbose=0, reg_linear=0.0,
                 reg_pairwise=0.0):
        self.n_factors = n_factors
        self.solver = solver
        self.reg_linear = reg_linear
        self.reg_pairwise = reg_pairwise
        self.batch_size = batch_size
        self.n_passes = n_passes
        self.tol = tol
        self.safeguard = safeguard
        self.fit_intercept = fit_intercept
        self.standardize = standardize
        self.init = init
        self.warm_start = warm_start
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _correction(self):
        return "moment" if self.solver == "moment" else "shift"

    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, *, truth=None, eval_set=None, contrasts=None):
        """Fit over X cut into mini-batches, each read once per pass (or by ALS).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights: the batch averages of the algorithm become weighted averages
            (rows of weight 0 are dropped).
        truth : (w, M) or an object with attributes ``w`` and ``M``, optional
            Planted parameters (``M`` an array or LinearOperator); the recovery error after each
            batch is recorded in ``history_["recovery_error"]``.
        eval_set : (X_val, y_val), optional
            Held-out data whose RMSE is recorded after every batch.
        contrasts : sparse matrix of shape (n_targets, n_samples), optional
            Fit y_g = sum_i C[g, i] f(x_i) (y and sample_weight then have n_targets entries)
            with solver "lm" or "als"; see :meth:`predict_contrasts` and docs/vtec.md.
        """
        if self._resolve_solver(contrasts) in ("als", "lm"):
            return self._fit_als(X, y, sample_weight, contrasts, truth, eval_set)
        return self._fit_one_pass(X, y, sample_weight, truth, eval_set)

    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, sample_weight=None, *, truth=None):
        """One step of the algorithm on the batch (X, y), read once.

        The first call standardises, estimates moments (solver="moment") and initialises from
        this batch; ``fit`` equals the same batches passed in order to ``partial_fit``.
        """
        return self._partial_fit_one_pass(X, y, sample_weight, truth)

    def _after_first_batch(self, state):
        from .diagnostics import TAU_CAUTION

        if state.tau is None:
            return
        bad = np.flatnonzero(state.tau < TAU_CAUTION)
        if bad.shape[0]:
            shown = ", ".join(str(j) for j in bad[:10]) + (" ..." if bad.shape[0] > 10 else "")
            warnings.warn(
                f"GFMRegressor(solver='moment'): {bad.shape[0]} feature(s) have a small moment "
                f"invertibility tau = |phi - 1 - kappa^2| < {TAU_CAUTION} (features {shown}). "
                "Their self-interactions M_jj are poorly identifiable (seed 001 Definition 2, "
                "Proposition 1: binary features have tau = 0); this is a caution, not a verdict "
                "(the low-rank structure can still pin them down). IFMRegressor, which has no "
                "diagonal, does not depend on tau.", UserWarning, stacklevel=4)
