"""Classic factorization machines (Rendle 2010) trained by SGD, ALS or MCMC as in libFM.

    f(x) = w0 + sum_j w_j x_j + sum_{j<l} <v_j, v_l> x_j x_l,     V in R^{d x k}

Every seed paper compares against this model; the solvers follow libFM 1.4 (Rendle 2012,
"Factorization Machines with libFM", ACM TIST 3(3)).

The family's package: the estimators here; their fit plan in :mod:`fmlearn.fm._plan` (every
entry point's hand-off to the solvers of :mod:`fmlearn.solvers.sgd`, :mod:`~fmlearn.solvers.als`
and :mod:`~fmlearn.solvers.mcmc`), the per-iteration history in :mod:`fmlearn.fm._history`, the
MCMC chain's attributes in :mod:`fmlearn.fm._mcmc` and the fit on contrast targets in
:mod:`fmlearn.fm._contrasts`.
"""

import numbers

import numba
import numpy as np
from scipy.special import ndtri
from sklearn.base import _fit_context, is_classifier
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted

from .._base import BaseFM, FMClassifierMixin, FMRegressorMixin, failure_atomic, progress
from .._data import canonical_csr, merge_duplicate_rows, merged_rows, raw, to_csr
from .._docs import fill_doc
from .._early_stopping import PARAMETER_CONSTRAINTS as STOPPING_CONSTRAINTS
from .._early_stopping import split_index, split_rows
from .._memory import small_pages
from .._plan import DataSummary, RunContext
from .._threads import n_threads
from ..kernels.losses import SQUARED
from ..kernels.predict import fm_predict_csr, fm_predict_samples_csr
from ..relation import check_relation_data, is_relation_data
from ..solvers._fm_common import RowTargets, check_groups, column_data, pair_rows
from ..solvers.als import als_solver
from ..solvers.mcmc import mcmc_solver
from . import _relation
from ._contrasts import ClassicFMContrastMixin
from ._history import FitRecorder
from ._mcmc import check_loaded_chain
from ._multiclass import (
    check_loaded_multiclass,
    class_view,
    is_multiclass,
    ovr_predict,
    ovr_proba,
    stack_views,
)
from ._plan import ClassicFMPlan, raise_diverged, stopping_rule, summary_reads


def _solver_is_sgd(est):
    if est.solver != "sgd":
        raise AttributeError(
            f"partial_fit is only available with solver='sgd' (this estimator has "
            f"solver={est.solver!r}); ALS, MCMC and VB sweep over the whole data set"
        )
    return True


def _run_sgd(plan, X, y, sw, recorder):
    from ..solvers.sgd import sgd_solver

    csr = raw(X)
    state = plan.state
    state, t, n_done, info = sgd_solver(csr, y, sw, state, plan.t, plan.sgd, plan.seed,
                                        recorder.epoch_callback(csr, y, sw, state),
                                        plan.context.start_clock)
    raise_diverged(info)
    return state, n_done, {"t": t}


def _ones_if_none(sw, n):
    """``sw``, or unit weights as an array when ``sw`` is None (ALS / MCMC without
    ``sample_weight`` carry None, not n ones: see ``_fit``)."""
    return np.ones(n) if sw is None else sw


def _run_als(plan, X, y, sw, recorder, rows=(None, None)):
    if plan.als.loss_code != SQUARED:  # the logistic sweep reads the labels in its order
        y = np.asarray(y)
    data = column_data(X, y, sw, *rows)
    callback = recorder.sweep_callback(
        y, _ones_if_none(sw, y.shape[0]) if recorder.tracking else sw, plan.state)
    state, n_done, info = als_solver(data, plan.state, plan.als, callback,
                                     plan.context.start_clock)
    raise_diverged(info)
    return state, n_done, {}


def _run_mcmc(plan, X, y, sw, recorder, rows=(None, None)):
    if plan.mcmc.probit:  # the latent draws read the labels in the fit's order
        y = np.asarray(y)
    data = column_data(X, y, sw, *rows)
    callback = recorder.sweep_callback(
        y, _ones_if_none(sw, y.shape[0]) if recorder.tracking else sw, plan.state)
    state, n_done, info = mcmc_solver(data, plan.state, plan.chain, plan.mcmc, plan.seed,
                                      callback, plan.context.start_clock)
    raise_diverged(info)
    return state, n_done, {"chain": plan.chain}


def _run_vb(plan, X, y, sw, recorder):
    from ..solvers.vb import vb_data, vb_solver

    data = vb_data(X, y, sw)
    callback = recorder.sweep_callback(y, sw, plan.state)
    state, n_done, info = vb_solver(data, plan.state, plan.posterior, plan.vb, callback,
                                    plan.context.start_clock)
    raise_diverged(info)
    return state, n_done, {"posterior": plan.posterior}


_RUN = {"sgd": _run_sgd, "als": _run_als, "mcmc": _run_mcmc, "vb": _run_vb}


def _fit_rows(est, X, y, sw, eval_set, context, label=None, validated_eval=False):
    """The fit on validated rows (``y`` targets or labels in {-1, +1}): early-stopping rule,
    relational or flat rows, the plan built from ``est`` (the estimator, or a class's view of
    a multiclass one), the solver, the commit to ``est``. ``eval_set`` is the user's
    (validated here) or, with ``validated_eval``, one already validated and encoded. Returns
    the fit's ``history_``."""
    rule = stopping_rule(est, X.shape[0], eval_set is not None)
    relational = is_relation_data(X) and est.solver in ("als", "mcmc")
    carved = None
    rows = ()
    moments = None  # the targets' statistics, when the merge gave them
    checked = None  # the rows canonical_csr has checked
    if relational:  # ALS and MCMC sweep per block row (fmlearn.fm._relation)
        if rule.split:
            raise ValueError("early stopping on relational data (RelationData) needs an "
                             "explicit eval_set: validation rows are not carved out of "
                             "relation blocks")
        summary = _relation.summarize(X, sw)
        X, y, sw = _relation.merge(X, y, sw)
    else:  # SGD and VB visit the rows of relational data expanded
        # ALS / MCMC read the rows where they are (a canonical CSR is not copied) through an
        # index of the merged rows (rows); SGD and VB take them as one array in their order.
        sweeps = est.solver in ("als", "mcmc")
        squares, spread = summary_reads(est)
        if is_relation_data(X):
            X = _relation.expanded(X, X.dtype)
        else:
            # the rows are copied by the merge below (SGD with shuffling, VB): not before it
            merged = sweeps or est.solver != "sgd" or est.shuffle
            X = canonical_csr(X, X.dtype) if merged else to_csr(X, X.dtype)
            checked = X
        if sweeps and rule.split:  # the training rows stay where they are, as an index
            train, carved = split_index(X, y, sw, rule, est.random_state, is_classifier(est))
            summary = DataSummary.of_rows_subset(X, _ones_if_none(sw, X.shape[0]), train)
        else:
            train = None
            X, y, sw, carved = split_rows(X, y, sw, rule, est.random_state, is_classifier(est))
            # the squares count the rows as given (ALS and MCMC: after the merge, below)
            summary = DataSummary.of_rows(X, None, sw, unit_weights=True,
                                          squares=squares and not sweeps)
        # An exact rewriting of the weighted loss; makes the fit independent of row order.
        if sweeps:
            if X is not checked:  # split_rows' copy (the training part of a split: itself)
                X = canonical_csr(X, X.dtype)
            sw_rows = sw
            y_source = y
            # the fit rows' targets read in place (y_source[index]): no copy held by the fit
            in_place = RowTargets.reads(y_source)
            # user x item rows: the merge, the layout and the targets' gather in one kernel,
            # in the row state's array (the same fit)
            paired = pair_rows(X, y, sw) if in_place and train is None else None
            if paired is not None:
                index, sw, pairs, moments = paired
                rows = ((index, None, pairs),)
                y = RowTargets.of(y_source, index, None)
            else:
                index, y, sw, keep = merged_rows(X, y, sw, group_by_first=True, subset=train,
                                                 targets=not in_place)
                rows = ((index, keep),)
                if y is None:
                    y = RowTargets.of(y_source, index, None)
            if squares and train is None:  # of the rows as given; the fused merge's rows:
                # two entries of value 1 each, whose sums are counts
                summary = summary.with_squares(X, sw_rows, pairs_of_ones=paired is not None)
        elif est.solver != "sgd" or est.shuffle:
            X, y, sw = merge_duplicate_rows(X, y, sw, group_by_first=est.solver != "sgd")
    if moments is not None:
        summary = summary.with_target_moments(*moments)
    elif isinstance(y, RowTargets) and (spread or train is not None or rows[0][1] is not None):
        # the targets' statistics read through the index too
        summary = summary.with_targets(y.source, sw, rows=y.rows, unit_weights=True)
    elif isinstance(y, RowTargets):  # only their range: that of the rows as given (each is
        # a fit row or merged into one with the same target), read in order, not gathered
        summary = summary.with_targets(y.source)
    else:
        summary = summary.with_targets(y, sw, unit_weights=True)
    plan = ClassicFMPlan.build(est, summary, context=context, stopping=rule)
    if validated_eval and carved is None:
        evald = None if eval_set is None else (raw(to_csr(eval_set[0], X.dtype)), eval_set[1])
        eval_sw = None
    else:
        evald, eval_sw = est._encoded_eval_set(eval_set, X.dtype, carved)
    name = f"{type(est).__name__}[{plan.solver}]" + ("" if label is None else f" {label!r}")
    bar = progress(est.verbose, est.n_iter, name)
    recorder = FitRecorder(plan, bar, evald, eval_sw=eval_sw)
    run = _relation.run_relation if relational else _RUN[plan.solver]
    with bar, n_threads(est.n_jobs):
        state, n_done, result = run(plan, X, y, sw, recorder, *rows)
    best = recorder.finish(state)
    plan.commit(est, state, n_done, history=recorder.history, best_iteration=best, **result)
    return recorder.history


def _partial_fit_rows(est, X, y, sw):
    """One SGD epoch over validated rows (``y`` targets or labels in {-1, +1}), committed to
    ``est`` (the estimator, or a class's view of a multiclass one)."""
    from ..solvers.sgd import sgd_solver

    plan = ClassicFMPlan.build(est, DataSummary.of_rows(X, y, sw, squares=False),
                               mode="partial_fit")
    with n_threads(est.n_jobs):
        state, t, n_done, info = sgd_solver(raw(X), y, sw, plan.state, plan.t, plan.sgd,
                                            plan.seed)
    raise_diverged(info)
    plan.commit(est, state, n_done, t=t)


def _scores(indptr, indices, data, w0, w, V, samples, probit, clip):
    """One model's scores on CSR arrays: f(x) of (w0, w, V), or with MCMC ``samples`` the
    posterior mean of f (regression, each sample clipped to ``clip``) or the margin
    Phi^-1(mean_s Phi(f_s)) (probit)."""
    out = np.empty(indptr.shape[0] - 1)
    if samples is None:
        fm_predict_csr(indptr, indices, data, w0, w, V, out)
        return out
    fm_predict_samples_csr(indptr, indices, data, *samples, probit, clip,
                           numba.get_num_threads(), out)
    if probit:  # back to the margin scale: Phi(decision) = mean_s Phi(f_s)
        out = ndtri(np.clip(out, 1e-300, 1.0 - 1e-16))
    return out


def _holds_classes(est, n_classes):
    """Whether ``est`` holds a fitted model of ``n_classes`` classes (after validation has
    set ``classes_`` to the new labels: the stacked attributes tell the old count)."""
    w = getattr(est, "w_", None)
    return w is not None and w.ndim == 2 and w.shape[0] == n_classes


class _BaseClassicFM(BaseFM):
    _parameter_constraints = {
        "n_factors": [Interval(numbers.Integral, 0, None, closed="left")],
        "solver": [StrOptions({"sgd", "als", "mcmc", "vb"})],
        "n_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "init_stdev": [Interval(numbers.Real, 0, None, closed="left"), StrOptions({"auto"})],
        "reg_bias": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_linear": [Interval(numbers.Real, 0, None, closed="left"), "array-like"],
        "reg_pairwise": [Interval(numbers.Real, 0, None, closed="left"), "array-like"],
        "groups": ["array-like", None],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "lr_schedule": [StrOptions({"constant", "invscaling"})],
        "power_t": [Interval(numbers.Real, 0, None, closed="left")],
        "shuffle": ["boolean"],
        "implicit_sgd": ["boolean"],
        "average_epochs": [Interval(numbers.Integral, 1, None, closed="left"),
                           StrOptions({"auto"})],
        "n_burn_in": [Interval(numbers.Integral, 0, None, closed="left"), None],
        "n_kept_samples": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "overrelaxation": [Interval(numbers.Real, -1, 1, closed="neither"), StrOptions({"auto"})],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "n_jobs": [Interval(numbers.Integral, -1, None, closed="left"), None],
        "verbose": ["verbose"],
        **STOPPING_CONSTRAINTS,
    }

    def __init__(self, n_factors=8, *, solver="mcmc", n_iter=100, init_stdev="auto", reg_bias=0.0,
                 reg_linear=0.0, reg_pairwise=0.0, learning_rate=0.01, lr_schedule="constant",
                 power_t=0.5, shuffle=True, implicit_sgd=True, average_epochs="auto",
                 n_burn_in=None, n_kept_samples=None, overrelaxation="auto", groups=None,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=5, tol=1e-4,
                 warm_start=False, random_state=None, n_jobs=None, verbose=0):
        self.n_factors = n_factors
        self.solver = solver
        self.n_iter = n_iter
        self.init_stdev = init_stdev
        self.reg_bias = reg_bias
        self.reg_linear = reg_linear
        self.reg_pairwise = reg_pairwise
        self.learning_rate = learning_rate
        self.lr_schedule = lr_schedule
        self.power_t = power_t
        self.shuffle = shuffle
        self.implicit_sgd = implicit_sgd
        self.average_epochs = average_epochs
        self.n_burn_in = n_burn_in
        self.n_kept_samples = n_kept_samples
        self.overrelaxation = overrelaxation
        self.groups = groups
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.warm_start = warm_start
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    # -- input (a matrix, or relational data: fmlearn.RelationData) ----------------------------
    def _validate_X_y(self, X, y, *, reset, y_numeric, accept_sparse=("csr", "csc")):
        if is_relation_data(X):
            Xr = _relation.validate_relation_X(self, X, reset=reset)
            return Xr, _relation.validate_relation_y(y, Xr.shape[0], y_numeric)
        out = super()._validate_X_y(X, y, reset=reset, y_numeric=y_numeric,
                                    accept_sparse=accept_sparse)
        if reset:
            self.__dict__.pop(_relation.LAYOUT, None)
        return out

    def _validate_X_predict(self, X, accept_sparse=("csr", "csc")):
        if is_relation_data(X):
            return _relation.checked_predict_input(self, X)
        return super()._validate_X_predict(X, accept_sparse)

    # -- fit --------------------------------------------------------------------------------
    def _encoded_eval_set(self, eval_set, dtype, carved=None):
        """``(csr arrays, y)`` of the validation rows (the ``eval_set``, or the rows carved
        out for early stopping) and their weights (None: unit weights)."""
        if carved is not None:
            Xv, yv, swv = carved
            if swv is not None and np.all(swv == 1):
                swv = None
            return (raw(to_csr(Xv, dtype)), yv), swv
        ev = self._validate_eval_set(eval_set)
        if ev is None:
            return None, None
        if is_relation_data(ev[0]):
            return (_relation.relation_eval_rows(check_relation_data(ev[0], dtype)), ev[1]), None
        return (raw(to_csr(ev[0], dtype)), ev[1]), None

    def _fit(self, X, y, sample_weight, eval_set, classes=None, callback=None):
        # the set-up's large arrays are each touched once: no huge-page advice (fmlearn._memory)
        with small_pages():
            return self._fit_pages(X, y, sample_weight, eval_set, classes, callback)

    def _fit_pages(self, X, y, sample_weight, eval_set, classes, callback):
        context = RunContext(callback, may_stop=True)
        # unit weights: the sweeps' set-up and layout carry None, not n ones (8 bytes per
        # row less during the fit: 64 MB at 8,000,000 rows, and no pass to fill them)
        X, y, sw = self._validate_train(
            X, y, sample_weight, reset=True,
            unit_none=sample_weight is None and self.solver in ("als", "mcmc"),
            **({"classes": classes} if is_classifier(self) else {}))
        if sw is None and (y.ndim != 1 or is_relation_data(X)):
            sw = np.ones(X.shape[0])  # one fit per class, relational rows: the weights
        if y.ndim == 1:
            _fit_rows(self, X, y, sw, eval_set, context)
            return self
        # one binary fit per class (fm/_multiclass.py), on a view of each class's model
        if is_relation_data(X):
            raise ValueError("FMClassifier with three classes or more takes a matrix, not "
                             "RelationData; expand it (or fit one binary model per class)")
        ev = self._validate_eval_set(eval_set)  # labels encoded: (n, C) of -1 / +1
        warm = self.warm_start and _holds_classes(self, y.shape[1])
        views, histories = [], []
        for c in range(y.shape[1]):
            view = class_view(self, c, warm)
            ev_c = None if ev is None else (ev[0], ev[1][:, c])
            histories.append(_fit_rows(view, X, y[:, c], sw, ev_c, context,
                                       label=self.classes_[c], validated_eval=True))
            views.append(view)
        stack_views(self, views, histories)
        return self

    # -- partial_fit (SGD) ------------------------------------------------------------------
    def _partial_fit(self, X, y, sample_weight, classes=None):
        first = not hasattr(self, "w_")
        kw = {"classes": classes} if is_classifier(self) else {}
        n_before = len(getattr(self, "classes_", ()))
        X, y, sw = self._validate_train(X, y, sample_weight, reset=first, **kw)
        dtype = X.dtype if first else self.dtype_
        X = _relation.expanded(X, dtype) if is_relation_data(X) else to_csr(X, dtype)
        if y.ndim == 1:
            _partial_fit_rows(self, X, y, sw)
            return self
        warm = not first and n_before == y.shape[1]
        views = []
        for c in range(y.shape[1]):
            view = class_view(self, c, warm)
            _partial_fit_rows(view, X, y[:, c], sw)
            views.append(view)
        stack_views(self, views, None)
        return self

    # -- prediction -------------------------------------------------------------------------
    def _raw_predict(self, X):
        if is_relation_data(X):  # validated by _validate_X_predict
            out = _relation.relation_predictions(self, X, is_classifier(self),
                                                 self._clip_range())
            lo, hi = self._clip_range()
            return np.clip(out, lo, hi)
        indptr, indices, data = raw(to_csr(X, self._model_dtype()))
        mcmc = hasattr(self, "samples_V_") and getattr(self, "solver_", None) == "mcmc"
        probit = is_classifier(self)
        with n_threads(self.n_jobs):
            if self.w_.ndim == 1:
                out = _scores(indptr, indices, data, self.w0_, self.w_, self.V_,
                              (self.samples_w0_, self.samples_w_, self.samples_V_) if mcmc
                              else None, probit, self._clip_range())
            else:  # one model per class
                out = np.column_stack([
                    _scores(indptr, indices, data, self.w0_[c], self.w_[c], self.V_[c],
                            (self.samples_w0_[c], self.samples_w_[c], self.samples_V_[c])
                            if mcmc else None, probit, self._clip_range())
                    for c in range(self.w_.shape[0])])
        lo, hi = self._clip_range()
        return np.clip(out, lo, hi)

    def compress_posterior(self, n_samples):
        """Keep only ``n_samples`` of an MCMC model's kept posterior samples, evenly spaced
        along the chain and ending with its last sample; return ``self``.

        Opt-in compression for serving: ``predict`` and :func:`fmlearn.recommend` of an MCMC
        model cost in proportion to the number of kept samples S (the posterior mean is an
        average over them), so keeping n of them divides both costs by about S / n. The
        prediction is still an exact average of (clipped) sample predictions, over fewer
        samples: a Monte Carlo estimate of the posterior mean with more variance. Its accuracy
        cost, measured on MovieLens-100K (``benchmarks/bench_serving.py --compress``), is in
        docs/serving.md. ``n_samples`` at least S keeps every sample (the model is unchanged).
        The model saves and loads as any other; a ``warm_start`` fit continues the chain from
        the compressed samples.

        Parameters
        ----------
        n_samples : int
            Samples to keep (at least 1).

        Returns
        -------
        self
        """
        check_is_fitted(self)
        if getattr(self, "solver_", None) != "mcmc" or not hasattr(self, "samples_V_"):
            raise ValueError("compress_posterior needs a model fitted with solver='mcmc' "
                             f"(this one: solver={getattr(self, 'solver_', None)!r})")
        if (isinstance(n_samples, (bool, np.bool_))
                or not isinstance(n_samples, (numbers.Integral, np.integer)) or n_samples < 1):
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
        axis = 1 if np.ndim(self.w_) == 2 else 0  # one chain per class: (C, S, ...)
        S = self.samples_w0_.shape[axis]
        if n_samples >= S:
            return self
        keep = np.round(np.linspace(S - 1, 0, int(n_samples)))[::-1].astype(np.intp)
        for name in ("samples_w0_", "samples_w_", "samples_V_"):
            setattr(self, name, np.ascontiguousarray(np.take(getattr(self, name), keep,
                                                             axis=axis)))
        return self

    def _check_loaded_state(self):
        from ._vb import check_loaded_posterior

        d = int(self.n_features_in_)
        k = self.n_factors
        groups = check_groups(self.groups, d)
        n_groups = 1 if groups is None else groups[1].shape[0]
        multiclass = is_classifier(self) and is_multiclass(self)
        if multiclass:
            check_loaded_multiclass(self, d, k, n_groups, check_loaded_chain,
                                    check_loaded_posterior)
        elif self.w_.shape != (d,) or self.V_.shape != (d, k):
            raise ValueError(f"w_ {self.w_.shape} / V_ {self.V_.shape} do not match "
                             f"n_features_in_={d}, n_factors={k}")
        for name in ("w_", "V_"):
            if getattr(self, name).dtype != np.dtype(self.dtype_):
                raise ValueError(f"{name} has dtype {getattr(self, name).dtype}, "
                                 f"expected {self.dtype_}")
        _relation.check_loaded_layout(self)
        if multiclass:
            pass
        elif self.solver_ == "mcmc":
            check_loaded_chain(self, d, k, n_groups)
        elif self.solver_ == "vb":
            check_loaded_posterior(self, d, k, n_groups)
        init_stdev = self.__dict__.get("init_stdev_")  # absent from older model files
        if init_stdev is not None and not (isinstance(init_stdev, float)
                                           and 0.0 <= init_stdev < np.inf):
            raise ValueError(f"init_stdev_ = {init_stdev!r} must be a non-negative finite "
                             "float")
        if not (np.all(np.isfinite(self.w0_)) and np.all(np.isfinite(self.w_))
                and np.all(np.isfinite(self.V_))):
            raise ValueError("model parameters contain NaN or infinity")
        if is_classifier(self):
            if np.ndim(self.classes_) != 1 or np.shape(self.classes_)[0] < 2:
                raise ValueError(f"classes_ must hold two labels or more, not "
                                 f"{np.shape(self.classes_)}")
        else:
            lo, hi = getattr(self, "y_range_", (np.nan, np.nan))
            if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
                raise ValueError("invalid or missing training target range y_range_")


class FMRegressor(ClassicFMContrastMixin, FMRegressorMixin, _BaseClassicFM):
    """Factorization machine regressor (Rendle 2010) with libFM's SGD, ALS and MCMC solvers.

    Model::

        f(x) = w0 + sum_j w_j x_j + sum_{j<l} <v_j, v_l> x_j x_l

    Parameters
    ----------
    n_factors : int, default=8
        Rank k of the pairwise interactions (libFM ``-dim 1,1,k``).
    solver : {"mcmc", "als", "sgd"}, default="mcmc"
        ``"mcmc"``: Bayesian FM by Gibbs sampling with hyper-priors (no regularization to tune);
        predictions average the thinned posterior samples. ``"als"``: coordinate descent with
        cached residuals. ``"sgd"``: stochastic gradient descent (supports ``partial_fit``).
    n_iter : int, default=100
        Sweeps (MCMC, ALS) or epochs (SGD) per call to ``fit``.
    init_stdev : float or "auto", default="auto"
        Standard deviation of the initial factors (libFM ``-init_stdev``); MCMC also draws the
        initial linear terms with it, as libFM does (the others start them at 0). ``"auto"``:
        for MCMC and ALS, 0.1 (libFM's usual value) divided by the root mean square of the
        non-zero training feature values, so the initial terms do not depend on the scale of X
        (0.1 on one-hot data), and at most the value at which the initial pairwise term's
        spread is half the targets' (dense rows have many pairs: Lin et al. 2019, Fig. 1(a));
        the rule is in docs/parameters.md; for SGD ``min(0.1, sqrt(learning_rate / 2))``, the
        spread of constant-step SGD's own iterates (0.05 at libFM's step 0.005; MovieLens-100K
        test RMSE -0.002 against 0.1, benchmarks/RESULTS.md), from the settings only so that ``fit``
        equals ``partial_fit`` on batches. The value used is recorded in ``init_stdev_``.
    reg_bias, reg_linear, reg_pairwise : float, default=0.0
        L2 penalties on w0, w and V for ALS and SGD (libFM ``-regular r0,r1,r2``); for MCMC,
        ``reg_bias`` is the prior precision of w0 and the others are learned. With
        ``groups``, ALS accepts one ``reg_linear`` and one ``reg_pairwise`` per group
        (libFM's ``-regular`` with 1 + 2G values).
    learning_rate : float, default=0.01
        SGD step size (libFM ``-learn_rate``).
    lr_schedule : {"constant", "invscaling"}, default="constant"
        SGD step size ``learning_rate`` or ``learning_rate / (1 + t) ** power_t``.
    power_t : float, default=0.5
    shuffle : bool, default=True
        SGD: visit rows in a fresh random order each epoch. With ``False`` rows are visited in
        the given order, and ``fit`` equals the same rows passed in batches to ``partial_fit``.
    implicit_sgd : bool, default=True
        Divide each SGD step by ``1 + learning_rate * ||grad f(x)||^2``: the implicit update of
        the linearised loss, which cannot overshoot a row's target, so large targets or steps do
        not diverge. When ``learning_rate * ||grad f||^2`` is small it equals libFM's plain step
        (``False``).
    average_epochs : int or "auto", default="auto"
        SGD: ``fit`` returns the mean of the models at the end of the last ``average_epochs``
        epochs (tail averaging; Polyak & Juditsky 1992, Rakhlin et al. 2012): the noise of a
        constant step averages out. 1 returns the last epoch's model (libFM). ``"auto"``: a
        tenth of ``n_iter``, rounded up (MovieLens-100K at libFM's settings: test RMSE -0.0009,
        benchmarks/RESULTS.md). ``history_`` shows the epochs' own models; ``partial_fit``
        does not average.
    n_burn_in : int or None, default=None
        MCMC sweeps discarded before samples are kept for prediction (None:
        ``min(10, n_iter // 10)``; from the default init_stdev the chain mixes within a few sweeps).
    n_kept_samples : int or None, default=None
        MCMC: at most this many evenly spaced samples are kept for ``predict`` (when more
        sweeps are run, every other kept sample is dropped and the spacing doubles). None keeps
        every sample after burn-in as long as they fit in 256 MB (at least 10): on
        MovieLens-100K all of 500 sweeps, whose average predicts better than 100 thinned ones
        (test RMSE -0.0010 +- 0.0002, benchmarks/RESULTS.md).
    overrelaxation : "auto" or float in (-1, 1), default="auto"
        MCMC: once the chain has settled, each draw from a Gaussian full conditional N(m, s^2)
        is over-relaxed (Adler 1981; Neal 1998), ``m + a (old - m) + sqrt(1 - a^2) s z``: the
        same posterior, less random walk between coupled parameters (a user's and an item's
        factors). Settled: the first sweep after the burn-in where the parameters' root mean
        square, averaged over the last 10 sweeps, is within 2 % of its average over the 10
        before (``chain_["settled_at"]``); before it, Gibbs draws, so a chain that has not
        settled draws exactly as with 0 (libFM's Gibbs draw). ``"auto"``: -0.9 for regression
        (chosen on a validation split of MovieLens-100K's training rows; over-relaxed from the
        burn-in on it helped long chains and hurt 100-sweep ones), 0 for the probit classifier.
    groups : array-like of int or None, default=None
        Feature groups, each with its own priors (libFM's ``-meta``, myFM's
        ``group_shapes``): a sequence of length ``n_features`` gives each feature's group id
        (ids 0, 1, ...), any other length lists group sizes in column order (summing to
        ``n_features``). MCMC draws a (lambda, mu) for w and for each factor per group (w0
        and the noise precision are shared, as in libFM); ALS takes ``reg_linear`` /
        ``reg_pairwise`` as one number or one value per group. Build them from feature
        names with :func:`fmlearn.encoders.feature_groups` (users, items, side blocks).
        None: one group. Not used by SGD.
    early_stopping : bool or "auto", default=False
        SGD and ALS: score a validation set after every epoch / sweep
        (``history_["val_loss"]``: the mean squared error, or a classifier's mean log loss),
        stop once ``n_iter_no_change`` iterations in a row did not improve it by more than
        ``tol``, and keep the model of the best iteration (``best_iteration_``). The
        validation rows are the ``eval_set`` of :meth:`fit`, else ``validation_fraction`` of
        the training rows (not trained on; stratified for a classifier). ``"auto"``: on with
        an ``eval_set`` or more than 10,000 rows (scikit-learn's HistGradientBoosting rule).
        With SGD's ``average_epochs`` the model kept is the best epoch's own, not a tail
        average. MCMC has no early stop (True is refused, "auto" is off): with an
        ``eval_set`` its ``history_`` reports the split R-hat of the validation predictions.
    validation_fraction : float in (0, 1), default=0.1
        Share of the training rows set aside for early stopping when no ``eval_set`` is given.
    n_iter_no_change : int, default=5
        Iterations without improvement before early stopping stops.
    tol : float, default=1e-4
        The improvement of the validation loss that counts (in its units).
    clip_predictions : bool, default=True
        Clip predictions to the range of the training targets (as libFM does).
    warm_start : bool, default=False
        Continue from the previous solution (and, for MCMC, the chain) on the next ``fit``.
    random_state : int, RandomState or None, default=None
    n_jobs : int or None, default=None
        Threads for the compiled loops (None or -1: all CPUs numba may use, see
        ``fmlearn._threads``). Results do not depend on it.
    verbose : int, default=0
        Show a progress bar with the running train (and eval_set) RMSE.

    Attributes
    ----------
    w0_ : float
    w_ : ndarray of shape (n_features,)
    V_ : ndarray of shape (n_features, n_factors)
        The model (SGD, ALS) or the last Gibbs sample (MCMC).
    samples_w0_, samples_w_, samples_V_ : ndarrays of shape (S,), (S, d), (S, d, k)
        MCMC only: the kept posterior samples whose average is the prediction.
    n_iter_ : int
        Iterations run (fewer than ``n_iter`` when early stopping or the callback stopped).
    best_iteration_ : int or None
        With early stopping, the iteration (from 1) whose model was kept.
    early_stopping_ : bool
        Whether early stopping was on (what "auto" resolved to).
    init_stdev_ : float
        The ``init_stdev`` the last fit resolved (``"auto"`` resolved; the initial factors'
        standard deviation when the fit started a new model). Absent from models saved before
        it was recorded (they load and predict as before).
    history_ : dict
        Per-iteration ``"iter_time"`` (solver seconds, evaluation and the compilation of the
        kernels excluded: they are compiled, or loaded from numba's cache, before the first
        iteration's clock starts); with ``verbose``, ``eval_set`` or a fit ``callback`` also
        the ``"train"`` metric (RMSE), with ``eval_set`` the ``"val"`` metric, and for MCMC
        and ALS ``"train_avg"`` and ``"val_avg"``, the RMSE of the running average of the
        predictions of all iterations (libFM's report). With early stopping ``"val_loss"``
        (the score the rule reads) and ``"best_iteration"`` (from 0); for MCMC with an
        ``eval_set``, ``"val_rhat"`` and ``"val_rhat_median"``: the largest and the median over
        the validation rows of the split R-hat (Gelman et al. 2013) of their predictions
        over the sweeps after burn-in (near 1 when the chain has settled; NaN with fewer
        than 4 such sweeps).
    n_features_in_ : int

    References
    ----------
    S. Rendle. Factorization machines. ICDM 2010.
    S. Rendle. Factorization machines with libFM. ACM TIST 3(3), 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import FMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5)); y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> m = FMRegressor(n_factors=2, n_iter=50, random_state=0).fit(X, y)
    >>> bool(np.sqrt(np.mean((m.predict(X) - y) ** 2)) < 0.5)
    True
    """

    _parameter_constraints = {**_BaseClassicFM._parameter_constraints,
                              "clip_predictions": ["boolean"]}

    def __init__(self, n_factors=8, *, solver="mcmc", n_iter=100, init_stdev="auto", reg_bias=0.0,
                 reg_linear=0.0, reg_pairwise=0.0, learning_rate=0.01, lr_schedule="constant",
                 power_t=0.5, shuffle=True, implicit_sgd=True, average_epochs="auto",
                 n_burn_in=None, n_kept_samples=None, overrelaxation="auto", groups=None,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=5, tol=1e-4,
                 clip_predictions=True, warm_start=False, random_state=None, n_jobs=None,
                 verbose=0):
        super().__init__(n_factors, solver=solver, n_iter=n_iter, init_stdev=init_stdev,
                         reg_bias=reg_bias, reg_linear=reg_linear, reg_pairwise=reg_pairwise,
                         learning_rate=learning_rate, lr_schedule=lr_schedule, power_t=power_t,
                         shuffle=shuffle, implicit_sgd=implicit_sgd,
                         average_epochs=average_epochs, n_burn_in=n_burn_in,
                         n_kept_samples=n_kept_samples, overrelaxation=overrelaxation,
                         groups=groups, early_stopping=early_stopping,
                         validation_fraction=validation_fraction,
                         n_iter_no_change=n_iter_no_change, tol=tol,
                         warm_start=warm_start, random_state=random_state, n_jobs=n_jobs,
                         verbose=verbose)
        self.clip_predictions = clip_predictions

    @fill_doc
    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, eval_set=None, contrasts=None, callback=None):
        """Fit the model.

        Parameters
        ----------
        %(fit_data)s
        eval_set : (X_val, y_val), optional
            Held-out data whose RMSE is recorded in ``history_`` after each iteration; with
            ``early_stopping`` True or "auto" it decides when to stop. In a Pipeline, pass it
            as ``fmregressor__eval_set`` to a :class:`fmlearn.pipeline.Pipeline`, which
            transforms ``X_val`` by the fitted preceding steps.
        contrasts : sparse matrix of shape (n_targets, n_samples), optional
            Fit y_g = sum_i C[g, i] f(x_i) (``y`` and ``sample_weight`` then have n_targets
            entries), with any solver; see :meth:`predict_contrasts` and docs/vtec.md.
        callback : callable, optional
            ``callback(i, history)`` is called as iteration ``i`` (from 0) ends, with the
            history so far (the keys of ``history_``, ``"train"`` always recorded): for live
            progress reports. Returning True stops the fit after that iteration: the model
            is the one of that iteration (or the best one, with early stopping) and
            ``n_iter_`` says how many ran.
        """
        if contrasts is not None:
            if is_relation_data(X):
                raise ValueError("fit(..., contrasts=C) takes the rows as a matrix; relational "
                                 "data (RelationData) is not supported there: pass "
                                 "X.to_csr()")
            return self._fit_contrasts(X, y, sample_weight, eval_set, contrasts, callback)
        return self._fit(X, y, sample_weight, eval_set, callback=callback)

    @available_if(_solver_is_sgd)
    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, sample_weight=None):
        """One SGD epoch over the given rows, in the given order (solver="sgd" only)."""
        self._rows_after_contrasts()
        return self._partial_fit(X, y, sample_weight)


class FMClassifier(FMClassifierMixin, _BaseClassicFM):
    """Factorization machine classifier (Rendle 2010) with SGD, ALS, MCMC or VB; any number of
    labels.

    Two labels: ``decision_function`` is the FM score of ``classes_[1]``. SGD and ALS minimise
    the logistic loss (ALS by majorization steps that never increase it); MCMC samples the
    probit model of libFM, and ``predict_proba`` is the posterior mean of Phi(f(x)) over the
    kept samples; VB fits the same probit model by mean-field variational Bayes, and
    ``predict_proba`` is Phi of the posterior mean of f(x).

    Three labels or more: one binary FM per class (one-vs-rest), each fitted as the binary
    classifier on "this class or not" with the same settings and ``random_state``, which is
    what ``sklearn.multiclass.OneVsRestClassifier(FMClassifier(...))`` fits;
    ``decision_function`` returns the C classes' scores (n_samples, C), ``predict`` the class
    of the largest, ``predict_proba`` the binary probabilities normalised to sum to 1.
    The per-class models are stored side by side (``w0_`` (C,), ``w_`` (C, d), ``V_``
    (C, d, k), ...; see :mod:`fmlearn.fm._multiclass` for why one-vs-rest).

    Parameters
    ----------
    Same as :class:`FMRegressor` without ``clip_predictions``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    w0_, w_, V_, samples_w0_, samples_w_, samples_V_, w_var_, V_var_, n_iter_, init_stdev_ :
        As in :class:`FMRegressor`; with three classes or more, one per class on a leading
        axis (``chain_`` and ``vb_`` are then lists of one dict per class).
    history_ : dict
        As in :class:`FMRegressor` (the metric is the error rate); with three classes or more
        the summed ``"iter_time"`` and each class's history under ``"classes"``.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import FMClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4)); y = np.where(X[:, 0] * X[:, 1] > 0, "yes", "no")
    >>> clf = FMClassifier(n_factors=2, n_iter=100, random_state=0).fit(X, y)
    >>> bool((clf.predict(X) == y).mean() > 0.9)
    True

    Three classes (one-vs-rest):

    >>> y3 = np.digitize(X[:, 0] * X[:, 1], [-0.3, 0.3])
    >>> clf3 = FMClassifier(n_factors=2, n_iter=100, random_state=0).fit(X, y3)
    >>> clf3.predict_proba(X[:2]).shape
    (2, 3)
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags

    @property
    def _link(self):
        # the link of the fitted model (the parameter may have been changed since)
        solver = getattr(self, "solver_", self.solver)
        return "probit" if solver in ("mcmc", "vb") else "logistic"

    def _encode_y(self, y, reset, classes=None):
        """Labels in {-1, +1} (two classes), or an (n, C) matrix of them, one column per
        class (three or more: the one-vs-rest targets); ``classes_`` set when ``reset``."""
        check_classification_targets(y)
        y = np.asarray(y)
        if reset:
            y_type = type_of_target(y, input_name="y", raise_unknown=True)
            labels = np.unique(y) if classes is None else np.unique(np.asarray(classes))
            if y_type not in ("binary", "multiclass"):
                raise ValueError(f"FMClassifier takes one label per sample (binary or "
                                 f"multiclass), not a {y_type} target")
            if labels.shape[0] < 2:
                raise ValueError(f"A classifier needs samples of two classes or more; y has "
                                 f"only one class ({labels[0]!r}).")
            self.classes_ = labels
        unknown = np.setdiff1d(np.unique(y), self.classes_)
        if unknown.shape[0]:
            raise ValueError(f"y contains labels {unknown.tolist()} not seen in the first call "
                             f"(classes_ = {self.classes_.tolist()})")
        return _one_vs_rest_targets(y, self.classes_)

    def _fast_targets(self, y, n):
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != n or not np.isin(y, self.classes_).all():
            return None
        return _one_vs_rest_targets(y, self.classes_)

    def decision_function(self, X):
        """Margin of ``classes_[1]``, shape (n_samples,); with three classes or more each
        class's margin, shape (n_samples, n_classes)."""
        return self._scores(X)

    def predict_proba(self, X):
        """Class probabilities, shape (n_samples, n_classes), columns ordered as
        ``classes_``."""
        s = self.decision_function(X)
        if s.ndim == 1:
            return super()._proba_of_margins(s)
        return ovr_proba(s, self._link)

    def predict(self, X):
        """Predicted labels (values of ``classes_``)."""
        s = self.decision_function(X)
        if s.ndim == 1:
            return self.classes_[(s > 0).astype(np.intp)]
        return ovr_predict(s, self.classes_)

    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, eval_set=None, callback=None):
        """Fit the model (see :meth:`FMRegressor.fit`); ``y`` holds two labels or more
        (with three or more, ``callback`` is called for each class's iterations in turn, with
        that class's history)."""
        return self._fit(X, y, sample_weight, eval_set, callback=callback)

    @available_if(_solver_is_sgd)
    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One SGD epoch over the given rows (solver="sgd" only; each class's model with
        three classes or more).

        ``classes`` (every label) is needed on the first call unless ``y`` holds them all.
        """
        return self._partial_fit(X, y, sample_weight, classes=classes)


def _one_vs_rest_targets(y, classes):
    if classes.shape[0] == 2:
        return np.where(y == classes[1], 1.0, -1.0)
    return np.where(y[:, None] == classes[None, :], 1.0, -1.0)


def __getattr__(name):
    # The ordinal FM (its own solver and kernels) is imported on first use, not with the
    # classic FM's estimators: ``from fmlearn.fm import FMOrdinalRegressor`` still works.
    if name == "FMOrdinalRegressor":
        from .ordinal import FMOrdinalRegressor

        return FMOrdinalRegressor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
