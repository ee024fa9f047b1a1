"""Estimator plumbing shared by the one-pass models (:class:`fmlearn.GFMRegressor`,
:class:`fmlearn.IFMRegressor`, the symmetric sensing models): :class:`OnePassMixin`, and
:class:`OnePassRun`, one training call taken batch by batch.

The algorithm lives in :mod:`fmlearn.solvers.one_pass` (the step, the pass loop with its
stopping rule, the "auto" batch rule, the contraction tracking); this module validates input,
cuts it into batches, records the history, warns and commits the state to the estimator.
``fit``, ``partial_fit`` and :func:`fmlearn.distributed.fit_one_pass` all go through
:meth:`OnePassMixin.begin_one_pass` and :meth:`OnePassRun.step` / :meth:`OnePassRun.passes`,
so the estimator is written only by :meth:`OnePassRun.commit`, after the last batch succeeded.
"""

import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn import config_context
from sklearn.base import _fit_context
from sklearn.metrics import root_mean_squared_error
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._base import failure_atomic, progress, store_params
from .._data import to_csr
from .._early_stopping import PARAMETER_CONSTRAINTS as STOPPING_CONSTRAINTS
from .._early_stopping import EarlyStopping, rule_of_params
from ..exceptions import ConvergenceWarning, DivergenceError, SmallBatchWarning
from ..linalg import symmetric_low_rank
from ..solvers.one_pass import (
    GAUSSIAN_GAP,
    MIN_BATCH_FACTOR,
    Batch,
    BatchRows,
    OnePassSettings,
    OnePassState,
    auto_batch_size,
    auto_max_iter,
    new_state,
    one_pass_fit,
    one_pass_solver,
    predict_batch,
)

__all__ = ["ONE_PASS_CONSTRAINTS", "OnePassFMMixin", "OnePassMixin", "OnePassRun", "as_truth",
           "original_parameters", "train_rows"]

#: Constraints of the parameters every one-pass estimator has (gFM, iFM, the sensing models).
ONE_PASS_CONSTRAINTS = {
    "batch_size": [Interval(numbers.Integral, 1, None, closed="left"), StrOptions({"auto"})],
    "init": [StrOptions({"auto", "dense", "randomized", "lanczos"})],
    "warm_start": ["boolean"],
    "random_state": ["random_state"],
    "n_jobs": [Interval(numbers.Integral, -1, None, closed="left"), None],
    "verbose": ["verbose"],
}


def train_rows(est, X, y, sample_weight, reset, solver_checks_finite=False):
    """Validated (X, y, sample_weight) with the rows of weight 0 dropped (they add nothing to
    the batch averages, and dropping them keeps "weight 0 == row absent" exact).

    ``solver_checks_finite``: leave the finiteness of a dense X to the solver, whose first read
    of every batch checks it (:meth:`fmlearn.solvers._one_pass_data.Batch.residual_pass`): a
    separate check here would read the whole of X once more (~10% of a step at d = 1000).
    """
    if solver_checks_finite:
        with config_context(assume_finite=True):
            X, y, sw = est._validate_train(X, y, sample_weight, reset=reset)
        if not np.all(np.isfinite(y)):
            raise ValueError("Input y contains NaN or infinity.")
    else:
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


def as_truth(truth, d):
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


def original_parameters(state, zero_diagonal=False):
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


class OnePassRun:
    """One training call of a one-pass estimator, batch by batch (from
    :meth:`OnePassMixin.begin_one_pass`).

    :meth:`step` runs :func:`fmlearn.solvers.one_pass.one_pass_solver` on one batch object
    (:class:`fmlearn.solvers.one_pass.BatchRows` or any object with its methods, e.g. a Dask
    batch), :meth:`passes` runs :func:`fmlearn.solvers.one_pass.one_pass_fit` over in-memory
    batches; both record the history, report a stall and raise ``DivergenceError`` (the
    estimator untouched). :meth:`commit` writes the state to the estimator.
    """

    def __init__(self, est, state, settings, history, truth=None, evald=None, bar=None):
        self.est, self.state, self.settings = est, state, settings
        self.history, self.truth, self.evald = history, truth, evald
        self.bar = progress(0, 1, "") if bar is None else bar
        self.fresh = state.t == 0
        self.n_steps = 0
        self.batch_size = 0

    def _callback(self, t, state, info):
        self.est._record(self.history, state, info, self.truth, self.evald, self.bar)
        if self.fresh and state.t == 1:
            self.est._after_first_batch(state)
        if "stall" in info:
            self.est._warn_stall(info["stall"])
        return False

    def step(self, rows):
        """One step of the solver on the batch object ``rows``; returns the step's info."""
        self.batch_size = max(self.batch_size, int(getattr(getattr(rows, "X", None), "shape",
                                                           (0,))[0]))
        out = {}

        def cb(t, state, info):
            out.update(info)
            return self._callback(t, state, info)

        state, done, info = one_pass_solver([rows], self.state, self.settings, cb,
                                            history=self.history)
        if info["diverged"]:
            self.est._raise_diverged(info, self.batch_size or "?")
        self.state = state
        self.n_steps += done
        return out

    def passes(self, batches, *, max_iter, tol, weights=None, stopping=None):
        """:func:`fmlearn.solvers.one_pass.one_pass_fit` over ``batches()`` (a callable giving
        a fresh iterable of (X, y, sw) per pass); returns its info.

        ``stopping`` (an active :class:`fmlearn._early_stopping.StoppingRule`, with
        validation rows in ``evald``): after each pass the validation RMSE of the pass's last
        model (``history["val"]``) is squared into ``history["val_loss"]``, the shared rule
        decides whether to stop, and the best pass's model is kept (``best_pass``, from 0)."""
        end_pass = None
        monitor = None
        if stopping is not None and self.evald is not None:
            self.history["val_loss"] = []
            current = {}
            monitor = EarlyStopping(stopping, copy_state=lambda: current["state"].copy())

            def end_pass(p, state):
                current["state"] = state
                loss = float(self.history["val"][-1]) ** 2
                self.history["val_loss"].append(loss)
                return monitor.observe(p, loss)

        state, done, info = one_pass_fit(batches, self.state, self.settings, max_iter=max_iter,
                                         tol=tol, weights=weights, callback=self._callback,
                                         end_pass=end_pass)
        self.n_steps += done
        if info["diverged"]:
            self.est._raise_diverged(info, self.batch_size)
        self.best_pass = None
        if monitor is not None and monitor.keeps_best():
            state = monitor.best_state
            self.best_pass = int(monitor.best_iteration)
        self.state = state
        return info

    def warn_small(self, n_rows):
        """A ``SmallBatchWarning`` when batches of ``n_rows`` rows are below the theory's
        ~2 k d rows."""
        self.est._warn_small(n_rows, self.state.w.shape[0])

    def commit(self, **attrs):
        """Write the state, the history and ``attrs`` (e.g. ``n_iter_``) to the estimator."""
        est = self.est
        for name, value in attrs.items():
            setattr(est, name, value)
        est.history_ = self.history
        est._store_state(self.state)
        return est


class OnePassMixin:
    """Estimator plumbing shared by the one-pass models (not for direct use).

    Subclasses define ``_correction()`` ("shift", "moment", "zero_diagonal"), set
    ``_fit_linear`` as needed, and define the usual parameters (``n_factors``, ``batch_size``,
    ``max_iter``, ``tol``, ``safeguard``, ``init``, ``warm_start``, ``random_state``,
    ``n_jobs``, ``verbose``).
    """

    _fit_linear = True

    # -- helpers ------------------------------------------------------------------------------
    def _correction(self):
        raise NotImplementedError

    def _zero_diagonal(self):
        return self._correction() == "zero_diagonal"

    def _guard(self, multi_pass):
        guard = getattr(self, "safeguard", False)
        if guard == "auto":
            # Guard fresh steps only when fit will re-use the rows: then the run is outside the
            # one-pass theory anyway; a single streaming pass keeps the seeds' algorithm.
            guard = multi_pass
        return bool(guard)

    def _settings(self, rs, multi_pass=False):
        return OnePassSettings(
            n_factors=self.n_factors, correction=self._correction(),
            fit_linear=self._fit_linear, fit_intercept=self._uses_intercept(),
            standardize=self._uses_standardize(), init=self.init, random_state=rs,
            safeguard=self._guard(multi_pass), n_jobs=getattr(self, "n_jobs", None))

    def _uses_intercept(self):
        return bool(getattr(self, "fit_intercept", False))

    def _uses_standardize(self):
        return bool(getattr(self, "standardize", False))

    def resolve_batch_size(self, n_features):
        """Rows per batch that ``fit`` uses on data of ``n_features`` columns: ``batch_size``,
        with "auto" resolved by :func:`fmlearn.solvers.one_pass.auto_batch_size` (10 k d)."""
        if self.batch_size == "auto":
            return auto_batch_size(min(self.n_factors, n_features), n_features)
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
                "(Lin and Ye 2016, Theorem 1); the estimate may be poor or diverge. Use more rows "
                "per batch or fewer n_factors.", SmallBatchWarning, stacklevel=4)

    def _stall_remedy(self):
        return "use solver='moment' (GFMRegressor) or IFMRegressor"

    def _warn_stall(self, stall):
        """A :class:`ConvergenceWarning` when the solver stopped contracting on features far
        from Gaussian (``stall`` from :func:`fmlearn.solvers.one_pass.one_pass_solver`)."""
        if stall["gap"] <= GAUSSIAN_GAP or self._zero_diagonal():
            return  # iFM's step has no moment bias (Lin et al. 2019, Eq. 11)
        tau = np.abs(stall["phi"] - 1.0 - stall["kappa"] ** 2)
        warnings.warn(
            f"{type(self).__name__} is not converging: over the last {stall['window']} batches "
            f"the model still changed by >= {stall['change']:.0%} per batch while the batch "
            f"RMSE did not halve (best {stall['rmse']:.3g}), and the features are far from "
            f"Gaussian (mean |skewness| {np.mean(np.abs(stall['kappa'])):.2g}, mean |kurtosis "
            f"- 3| {np.mean(np.abs(stall['phi'] - 3.0)):.2g}; moment invertibility tau "
            f"median {np.median(tau):.2g}, 2 for Gaussian features). The plain one-pass step is "
            "biased on such features (Lin et al. 2019, Theorem 4) and may wander or later diverge: "
            f"{self._stall_remedy()}.", ConvergenceWarning, stacklevel=4)

    def _history_template(self, truth, eval_set):
        h = {"rmse": [], "change": []}
        if truth is not None:
            h["recovery_error"] = []
        if eval_set is not None:
            h["val"] = []
        return h

    def _eval_set(self, eval_set, dtype):
        ev = self._validate_eval_set(eval_set)
        if ev is None:
            return None
        return self._prepare_X(ev[0], dtype), ev[1]

    def _record(self, history, state, info, truth, evald, bar):
        history["rmse"].append(info["rmse"])
        history.setdefault("change", []).append(info.get("change", np.nan))
        post = {"batch_rmse": f"{info['rmse']:.4g}"}
        if truth is not None:
            history["recovery_error"].append(self._recovery_error(state, truth))
            post["rec_err"] = f"{history['recovery_error'][-1]:.3g}"
        if evald is not None:
            Xv, yv = evald
            pred = predict_batch(Batch(Xv, state.mean, state.scale, self.n_jobs), state,
                                 self._zero_diagonal())
            history["val"].append(float(root_mean_squared_error(yv, pred)))
            post["val"] = f"{history['val'][-1]:.4g}"
        bar.set_postfix(post)
        bar.update(1)

    def _recovery_error(self, state, truth):
        from ..diagnostics import recovery_error

        w, U, V, _ = original_parameters(state, self._zero_diagonal())
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

    # -- the public step ------------------------------------------------------------------------
    def begin_one_pass(self, X, y, sample_weight=None, *, reset=True, truth=None,
                       eval_set=None):
        """Start a training call: validate ``(X, y, sample_weight)`` (``reset=True``: as a new
        ``fit``, else as a further ``partial_fit``), pick the state to continue from (a new
        call continues only with ``warm_start``, and only from a state of the same width and
        dtype) and the settings.

        Returns an :class:`OnePassRun` holding the validated rows (``run.X``, ``run.y``,
        ``run.sw``: rows of weight 0 dropped, X dense C-contiguous or canonical CSR); its
        :meth:`~OnePassRun.step` takes one batch object at a time and its
        :meth:`~OnePassRun.commit` writes the result. :func:`fmlearn.distributed.fit_one_pass`
        passes a few head rows here and its Dask batches to ``step``.
        """
        self._validate_params()
        X, y, sw = train_rows(self, X, y, sample_weight, reset=reset, solver_checks_finite=True)
        d = X.shape[1]
        dtype = np.dtype(X.dtype if reset else self.dtype_)
        X = self._prepare_X(X, dtype)
        warm = self.warm_start or not reset
        state = self._state_from_attributes() if warm else None
        if state is None or state.w.shape[0] != d or state.w.dtype != dtype:
            state = new_state(d, self.n_factors, dtype)
        truth = as_truth(truth, d)
        evald = self._eval_set(eval_set, dtype)
        if reset or not hasattr(self, "history_"):
            history = self._history_template(truth, evald)
        else:  # partial_fit continues the history (a copy: committed only on success)
            history = {key: list(v) for key, v in self.history_.items()}
            history.setdefault("change", [np.nan] * len(history["rmse"]))
            if truth is not None:
                history.setdefault("recovery_error", [])
        settings = self._settings(check_random_state(self.random_state))
        run = OnePassRun(self, state, settings, history, truth, evald)
        run.X, run.y, run.sw, run.dtype = X, y, sw, dtype
        return run

    # -- fit / partial_fit ----------------------------------------------------------------------
    def _stopping_split(self, run, has_eval_set):
        """The early-stopping rule of a ``fit`` (None for the estimators without the
        parameters, or when it is off) and, when it carves its validation rows out of the
        training rows, the run's rows and ``evald`` updated. The passes' ``tol`` keeps its
        meaning (a relative change of the training RMSE); the rule counts any decrease of the
        validation loss as an improvement."""
        params = self.get_params(deep=False)
        if "early_stopping" not in params:
            return None
        rule = rule_of_params(params, score="squared_error", n_samples=run.X.shape[0],
                              has_eval_set=has_eval_set, tol=0.0)
        if not rule.active:
            return None
        if rule.split:
            from .._early_stopping import validation_split

            seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
            train, val = validation_split(run.X.shape[0], rule.fraction, seed)
            run.evald = (run.X[val], run.y[val])
            run.history["val"] = []
            run.X, run.y, run.sw = run.X[train], run.y[train], run.sw[train]
        return rule

    def _fit_one_pass(self, X, y, sample_weight, truth, eval_set):
        run = self.begin_one_pass(X, y, sample_weight, truth=truth, eval_set=eval_set)
        stopping = self._stopping_split(run, eval_set is not None)
        X, y, sw = run.X, run.y, run.sw
        n, d = X.shape  # rows of weight 0 are gone
        n_b = max(1, n // self.resolve_batch_size(d))
        bounds = np.linspace(0, n, n_b + 1).round().astype(np.int64)
        self._warn_small(int(np.min(np.diff(bounds))), d)
        ranges = list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))
        run.batch_size = int(np.max(np.diff(bounds)))
        max_iter = auto_max_iter(self.max_iter, n_b)
        run.settings.safeguard = self._guard(max_iter > 1)
        run.bar = progress(self.verbose, n_b * max_iter, type(self).__name__)
        with run.bar:
            info = run.passes(lambda: [(X[a:b], y[a:b], sw[a:b]) for a, b in ranges],
                              max_iter=max_iter, tol=self.tol,
                              weights=[float(sw[a:b].sum()) for a, b in ranges],
                              stopping=stopping)
        if (self.tol is not None and info["n_passes"] > 1 and not info["converged"]
                and not info.get("stopped")):
            self._warn_passes(info["pass_rmse"])
        extra = {}
        if "early_stopping" in self.get_params(deep=False):
            best = run.best_pass
            extra = {"early_stopping_": stopping is not None,
                     "best_iteration_": None if best is None else best + 1}
        return run.commit(dtype_=run.dtype.name, batch_size_=run.batch_size,
                          n_iter_=run.n_steps, n_passes_=info["n_passes"], **extra)

    def _warn_passes(self, losses):
        """The passes re-use the rows, a first-order method on the training risk (outside
        the one-pass theory) that may still be moving slowly when ``max_iter`` ends: say by
        how much and what to change."""
        prev, last = losses[-2], losses[-1]
        warnings.warn(
            f"{type(self).__name__}: the training RMSE still changed by "
            f"{abs(prev - last) / prev:.2g} (relative) in the last of {len(losses)} passes "
            f"({prev:.4g} -> {last:.4g}; first pass {losses[0]:.4g}), above tol={self.tol}. "
            "Passes after the first re-use the rows, a first-order method on the training "
            "error: raise max_iter to fit the training rows closer (the held-out error may not "
            "follow), or set tol=None to run max_iter passes without "
            "this check", ConvergenceWarning, stacklevel=4)

    def _partial_fit_one_pass(self, X, y, sample_weight, truth):
        first = not hasattr(self, "working_U_")
        run = self.begin_one_pass(X, y, sample_weight, reset=first, truth=truth)
        self._warn_small(run.X.shape[0], run.X.shape[1])
        run.step(BatchRows(run.X, run.y, run.sw))
        return run.commit(dtype_=run.dtype.name, batch_size_=int(run.X.shape[0]),
                          n_iter_=getattr(self, "n_iter_", 0) + run.n_steps)

    # -- prediction -----------------------------------------------------------------------------
    def _raw_predict(self, X):
        state = self._state_from_attributes()
        return predict_batch(Batch(X, state.mean, state.scale, getattr(self, "n_jobs", None)),
                             state, self._zero_diagonal())

    # -- the model in the caller's coordinates --------------------------------------------------
    def _original(self):
        check_is_fitted(self)
        return original_parameters(self._state_from_attributes(), self._zero_diagonal())

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


class OnePassFMMixin(OnePassMixin):
    """The parameters, ``fit`` and ``partial_fit`` gFM and iFM share (:class:`fmlearn.GFMRegressor`,
    :class:`fmlearn.IFMRegressor`; each documents the parameters and constrains its own
    ``solver``). The class also mixes in :class:`fmlearn._contrasts.ContrastALSMixin`, which
    resolves the solver and fits to contrasts."""

    # 0.1 name (gFM and iFM): until 0.3
    _renamed_params = {"n_passes": "max_iter"}

    _parameter_constraints = {
        "n_factors": [Interval(numbers.Integral, 1, None, closed="left")],
        "reg_linear": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_pairwise": [Interval(numbers.Real, 0, None, closed="left")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "tol": [Interval(numbers.Real, 0, None, closed="left"), None],
        "safeguard": ["boolean", StrOptions({"auto"})],
        "fit_intercept": ["boolean"],
        "standardize": ["boolean"],
        **ONE_PASS_CONSTRAINTS,
        **{k: STOPPING_CONSTRAINTS[k] for k in ("early_stopping", "validation_fraction",
                                                "n_iter_no_change")},
    }

    def __init__(self, n_factors=5, *, solver="auto", batch_size="auto", max_iter="auto",
                 tol=1e-4, safeguard="auto", fit_intercept=True, standardize=True, init="auto",
                 warm_start=False, random_state=None, n_jobs=None, verbose=0, reg_linear=0.0,
                 reg_pairwise=0.0, early_stopping=False, validation_fraction=0.1,
                 n_iter_no_change=2):
        store_params(self, locals())

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

        The first call standardises, estimates moments (gFM's solver="moment") and initialises
        from this batch; ``fit`` equals the same batches passed in order to ``partial_fit``.
        """
        return self._partial_fit_one_pass(X, y, sample_weight, truth)
