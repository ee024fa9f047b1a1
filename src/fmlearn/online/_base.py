"""Shared machinery of the online estimators (not an estimator module): validation, the live
learner kept between calls, fit / partial_fit with failure atomicity, prequential predictions
and the consistency check of a loaded state.

The learner's state is a record of named arrays changed in place by the compiled kernels. The
estimator keeps the learner itself between calls (``_live``) and exposes its arrays as the
``state_<name>_`` attributes -- the same arrays, not copies -- so a call costs what its rows
cost (O(nnz k) for the classic FM), and :meth:`save` or pickling find the state by name. After
:func:`fmlearn.load`, unpickling or an edit of those attributes, the learner is rebuilt around
them on the next call.
"""

import numbers
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._base import BaseFM, FMClassifierMixin, FMRegressorMixin, progress
from .._data import merge_duplicate_rows, raw, to_csr
from .._early_stopping import PARAMETER_CONSTRAINTS as STOPPING_CONSTRAINTS
from .._early_stopping import SCORES, EarlyStopping, rule_of_params, split_rows
from .._threads import blas_single_thread
from ..exceptions import DivergenceError
from ..kernels.losses import LOSS_CODES
from ..solvers._online_common import status_message

_PREFIX = "state_"

# constructor argument names per class (inspect.signature is slow on a one-row call)
_PARAM_NAMES = {}

# rows per compiled call in ``fit`` when a progress bar is shown
_CHUNK = 8192

# A row of weight s is learned as ceil(s) rounds: beyond this a weight is refused (it would
# take that many rounds).
MAX_WEIGHT = 2.0**31


def running_intercepts(y, sw, order, stats, classifier):
    """The intercept b before each round of ``order`` (indexed by row) and the statistics
    after them, from ``stats`` (two weights) before: for regression the weighted mean of the
    targets seen (0 before any; ``stats`` = [sum of weights, weighted sum of targets]), for
    classification the add-one log-odds log((w+ + 1) / (w- + 1)) of the class weights seen
    (``stats`` = [w-, w+]). Both are the minimizers of the loss over a constant model of the
    rows seen, so b depends on the targets of earlier rows only (prequential)."""
    w, t = sw[order], y[order]
    if classifier:
        a, b = w * (t <= 0), w * (t > 0)
    else:
        a, b = w, w * t
    ca = stats[0] + np.cumsum(a) - a
    cb = stats[1] + np.cumsum(b) - b
    if classifier:
        before = np.log((cb + 1.0) / (ca + 1.0))
    else:
        before = np.divide(cb, ca, out=np.zeros_like(cb), where=ca > 0)
    off = np.zeros(y.shape[0])
    off[order] = before
    return off, [float(stats[0] + a.sum()), float(stats[1] + b.sum())]


def intercept_of(stats, classifier):
    """The intercept of the statistics of :func:`running_intercepts` after the rows seen."""
    if classifier:
        return float(np.log((stats[1] + 1.0) / (stats[0] + 1.0)))
    return float(stats[1] / stats[0]) if stats[0] > 0 else 0.0


def sample_weights(sw):
    """The row weights normalised to sum 1 (uniform when they sum to 0)."""
    total = sw.sum()
    return sw / total if total > 0 else np.full(sw.shape[0], 1.0 / max(sw.shape[0], 1))


def target_spread(y, sw, classifier):
    """The scale s of the targets: their weighted standard deviation (regression; |mean| or
    1 when they are constant), 1 (a unit of log-odds) for a classifier."""
    if classifier:
        return 1.0
    w = sample_weights(sw)
    mean = float(np.dot(w, y))
    spread = float(np.sqrt(np.dot(w, (y - mean) ** 2)))
    if not spread > 0:
        spread = abs(mean) if mean != 0 else 1.0
    return spread


# learning_rate="auto" of the FTRL learners (OnlineFM, OnlineCFM): FTRL-Proximal's alpha of
# (w0, w) is AUTO_LINEAR_RATE x the targets' spread s (:func:`target_spread`; 1 for a
# classifier). Its per-coordinate steps are normalised by the root of the summed squared
# gradients (McMahan et al. 2013), so a weight moves by about alpha per round and by at most
# about alpha sqrt(m) over m rounds whatever the gradients' scale: alpha must carry the unit of
# the targets (on rows brought to a unit scale, ``x_scale_``), or a weight of size 500 takes
# thousands of rounds to reach.
AUTO_LINEAR_RATE = 0.5

# a resolved scale or rate beyond this (or below its inverse) is refused in a loaded model
MAX_SCALE = 1e300


def inverse_root(mean2, what, param):
    """1 / sqrt(mean2), ``mean2`` a weighted mean of squared feature values: the ``x_scale_``
    of an "auto" rule; a clear error when it overflowed or is 0 (``what``: for what the scale
    is derived, ``param``: the parameter to give instead)."""
    if not np.isfinite(mean2):
        raise ValueError(f"feature values are too large for {what} (their squares overflow "
                         f"float64); rescale X")
    if not mean2 > 0:
        raise ValueError(f"{param}='auto' needs rows with non-zero features (of positive "
                         f"weight); give {param}")
    return float(1.0 / np.sqrt(mean2))


def value_scale(X, sw):
    """1 / the root mean square of the non-zero values of the rows X (each row's values
    weighted by its weight): the ``x_scale_`` that brings a typical feature value to 1."""
    w = np.repeat(sample_weights(sw), np.diff(X.indptr))
    total = float(w.sum())
    with np.errstate(over="ignore"):
        mean2 = float(np.dot(w, X.data ** 2)) / total if total > 0 else 0.0
    return inverse_root(mean2, "the FTRL steps", "learning_rate")


def check_loaded_float(est, name, required):
    """A loaded resolved value ``name`` (e.g. ``x_scale_``) is a positive finite float, present
    when ``required``."""
    value = est.__dict__.get(name)
    if value is None:
        if required:
            raise ValueError(f"the model's parameters need {name} but it has none")
        return
    if not isinstance(value, float) or not 0 < value < MAX_SCALE or not 1 / value < MAX_SCALE:
        raise ValueError(f"{name} = {value!r} must be a positive finite float")


STANDARDIZE_CONSTRAINT = ["boolean", StrOptions({"auto"})]


def standardizer(X, sw):
    """``(mean_, scale_)`` of ``standardize`` from the first batch X (CSR, the rows' weights
    ``sw``): the weighted mean and standard deviation of each column (0 and 1 for a column
    constant in the batch; computed relative to the column's largest |deviation| so that the
    squares do not overflow).

    Replaces scikit-learn's ``StandardScaler(...).fit(X, sample_weight=sw)`` for that reason:
    on columns of size 1e160 its variance overflows and it returns ``scale_ = 1`` (measured with
    scikit-learn 1.9.1), leaving the rows at 1e160; here they become unit rows
    (tests/test_edge_numbers.py fits X * 1e160)."""
    d = X.shape[1]
    p = sample_weights(sw)
    dense = X.toarray()
    with np.errstate(over="ignore", invalid="ignore"):
        mean = p @ dense
        dense -= mean
        top = np.abs(dense).max(axis=0) if dense.shape[0] else np.zeros(d)
        top[~(top > 0)] = 1.0
        scale = top * np.sqrt(p @ (dense / top) ** 2)
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(scale))):
        raise ValueError("feature values are too large to be standardised in float64; "
                         "rescale X or set standardize=False")
    # a column constant in the first batch (every column of a one-row batch) is left as given:
    # centring would zero it, and a stream started one row at a time keeps its rows as given
    const = ~(scale > 1 / MAX_SCALE)
    mean[const], scale[const] = 0.0, 1.0
    return mean, scale


def standardized(X, mean, scale):
    """The CSR rows (X - mean) / scale (X itself without ``scale``; dense rows in CSR)."""
    if scale is None:
        return X
    with np.errstate(over="ignore", invalid="ignore"):
        out = to_csr((X.toarray() - mean) / scale, np.float64)
    if out.nnz and not np.all(np.isfinite(out.data)):
        raise ValueError("standardised feature values overflow float64 (values far beyond "
                         "those of the first batch); rescale X")
    return out


def input_coordinates(b, w, times_W, mean, factor):
    """The constant and linear terms in the coordinates of X of the model
    b + <w, z> + 1/2 z' W z on z = factor o (x - mean) (W the symmetric matrix of the
    interactions the model uses, its diagonal included only when the model has x_j^2 terms;
    ``times_W(u)`` = W u): with u = factor o mean, b - <w, u> + 1/2 u' W u and
    factor o (w - W u); the matrix in the coordinates of X is diag(factor) W diag(factor)."""
    u = factor * mean
    Wu = times_W(u)
    return float(b - w @ u + 0.5 * u @ Wu), factor * (w - Wu)


class _OnlineBase(BaseFM):
    """Validation, the live learner, fit / partial_fit and prequential predictions."""

    # a model file written before ``standardize`` existed was fitted on X as given
    _params_before = {"standardize": False}

    _common_constraints = {
        "n_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "shuffle": ["boolean"],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "standardize": STANDARDIZE_CONSTRAINT,
        **STOPPING_CONSTRAINTS,
    }

    # -- the learner ------------------------------------------------------------------------
    def _new_learner(self, n_features, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def _learner(self):
        """The live learner of the fitted state (rebuilt around the ``state_*_`` arrays, without
        copying them, when they are not the live learner's)."""
        fitted = getattr(self, "learner_", self.learner)
        if fitted != self.learner:
            raise ValueError(f"the model was fitted with learner={fitted!r}; "
                             f"set learner={fitted!r} or fit again")
        live = self.__dict__.get("_live")
        if (live is not None and self._is_current(live)
                and self.__dict__.get("_live_params") == self._params_token()):
            return live
        learner = self._new_learner(int(self.n_features_in_), None)
        values = {k[len(_PREFIX):-1]: v for k, v in vars(self).items()
                  if k.startswith(_PREFIX) and k.endswith("_")}
        learner.load_arrays(values)
        self._check_compatible(learner)
        self._publish(learner)
        return learner

    def _is_current(self, live):
        published = self.__dict__.get("_live_arrays", {})
        return all(self.__dict__.get(f"{_PREFIX}{k}_") is v for k, v in published.items())

    def _check_compatible(self, learner):
        """Hook: refuse parameters that changed what the state means."""

    def _publish(self, learner):
        arrays = learner.arrays()
        for name in [k for k in vars(self) if k.startswith(_PREFIX)]:
            if name[len(_PREFIX):-1] not in arrays:
                delattr(self, name)
        for name, value in arrays.items():
            setattr(self, f"{_PREFIX}{name}_", value)
        self._live = learner
        self._live_arrays = arrays
        self._live_params = self._params_token()
        self.learner_ = learner.name
        self.n_rounds_ = learner.t

    def __getstate__(self):
        state = dict(super().__getstate__())
        for key in ("_live", "_live_arrays", "_live_params", "_checked_params"):
            state.pop(key, None)
        return state

    def _params_token(self):
        """The constructor arguments as a tuple (cheap to compare: no signature inspection)."""
        names = _PARAM_NAMES.get(type(self))
        if names is None:
            names = _PARAM_NAMES[type(self)] = tuple(self._get_param_names())
        return tuple(getattr(self, name) for name in names)

    def _check_params_once(self):
        """``_validate_params`` unless these very parameters were checked by an earlier call
        (a one-row ``partial_fit`` should not pay for it every time)."""
        token = self._params_token()
        if self.__dict__.get("_checked_params") != token:
            self._validate_params()
            self._checked_params = token

    def _limit(self, y):
        return 1e10 * max(1.0, float(np.max(np.abs(y))) if y.shape[0] else 1.0)

    def _is_classifier(self):
        return isinstance(self, FMClassifierMixin)

    def _loss_code(self):
        return LOSS_CODES["logistic" if self._is_classifier() else "squared"]

    def _seed_key(self, rng):
        """The random_state key of the learner's pseudo-random start vectors."""
        if self.random_state is None:
            return 0
        if isinstance(self.random_state, numbers.Integral):
            return int(self.random_state) & 0xFFFFFFFF
        return int(rng.randint(0, 2**31))

    # -- validation -------------------------------------------------------------------------
    def _validate(self, X, y, sample_weight, reset, classes=None):
        """The rows as the model sees them (CSR, standardised with the first batch's
        statistics, which a ``reset`` call derives), float64 targets and weights."""
        fast = None if reset else self._validate_train_fast(X, y, sample_weight)
        if fast is not None:
            X, y, sw = fast
        else:
            kw = {"classes": classes} if self._is_classifier() else {}
            X, y, sw = self._validate_train(X, y, sample_weight, reset=reset, **kw)
        sparse_input = sp.issparse(X)
        if sw.shape[0] and sw.max() > MAX_WEIGHT:
            raise ValueError(f"sample_weight above {MAX_WEIGHT:.0f}: a row of weight s is "
                             f"learned as ceil(s) rounds; rescale the weights")
        if fast is None:
            X = to_csr(X, np.float64)
        if reset and X.nnz == 0:
            # from a row without features an online model learns its bias alone, one decaying
            # step per round, and (a bounded CCFM) need not reach the mean of y
            raise ValueError(f"{type(self).__name__}: X is all zeros; an online model learns "
                             f"only its bias from it and need not reach the mean of y: start "
                             f"from rows with features")
        if np.any(np.abs(y) > 1e150):
            raise ValueError("targets above 1e150 in magnitude would overflow the learners' "
                             "squared terms; rescale y")
        if reset:
            self._fit_standardize(X, sw, sparse_input)
        X = self._standardized(X)
        self._check_scale(X)
        return X, np.ascontiguousarray(y, dtype=np.float64), sw

    def _fit_standardize(self, X, sw, sparse_input):
        """``standardize``: ``mean_`` and ``scale_`` from the first batch X (CSR), frozen
        afterwards (later batches, ``partial_fit`` after ``fit`` and predictions apply them).
        ``"auto"``: a dense X is centred and divided by its columns' standard deviations, a
        sparse X is learned as given; True: centred and scaled whatever its kind (a sparse X
        becomes dense); False: X as given (no ``mean_``, ``scale_``).

        Why sparse X is left alone by "auto": its scale is already derived by the learners'
        own rules (``x_scale_``; CCFM's ``col_scale_``), centring would make it dense, and
        dividing each column by the root mean square of its non-zero values (a scaling that
        keeps it sparse) broke the FTRL rule on a generated imbalanced tf-idf set: every word
        of a row then weighs about 1, and OnlineFMClassifier's default predicted none of the
        41 positives (tests/online/test_online_defaults.py, the imbalanced text set)."""
        self.__dict__.pop("mean_", None)
        self.__dict__.pop("scale_", None)
        if self.standardize is False or (self.standardize == "auto" and sparse_input):
            return
        # from the merged rows (an exact rewriting of the weighted stream, in an order of
        # their values): weights and repeated rows give the same statistics to the last bit
        Xm, _, swm = merge_duplicate_rows(X, np.zeros(X.shape[0]), sw)
        self.mean_, self.scale_ = standardizer(Xm, swm)

    def _standardized(self, X):
        """The CSR rows X (as given) standardised with the fitted ``mean_``, ``scale_``."""
        return standardized(X, self.__dict__.get("mean_"), self.__dict__.get("scale_"))

    def _check_scale(self, X):
        """Hook: refuse inputs whose scale would overflow a bounded model."""

    def _resolve_auto(self, X, y, sw):
        """Hook: resolve the parameters derived from the data before a new learner is made
        from the rows X (validated, in the given order)."""

    # -- running the learner ----------------------------------------------------------------
    def _x_scale(self):
        """The factor the learner's rows are multiplied by (1.0 unless derived from the data)."""
        return float(self.__dict__.get("x_scale_", 1.0))

    def _rows(self, X):
        """The raw CSR arrays the learner sees: X's, its values times :meth:`_x_scale`."""
        indptr, indices, data = raw(X)
        c = self._x_scale()
        return (indptr, indices, data * c) if c != 1.0 else (indptr, indices, data)

    def _run(self, learner, X, y, sw, order, out, bar=None):
        csr = self._rows(X)
        limit = self._limit(y)
        step = _CHUNK if bar is not None else max(1, order.shape[0])
        info = {}
        off, stats = None, None
        if self._intercept_outside():
            off, stats = running_intercepts(y, sw, order, self._intercept_stats(),
                                            self._is_classifier())
        for start in range(0, order.shape[0], step):
            part = order[start:start + step]
            with blas_single_thread():
                try:
                    status, row, info = learner.learn(csr, y, sw, part, out, limit, off)
                except np.linalg.LinAlgError as exc:  # a non-finite gradient reached eigh
                    raise DivergenceError(
                        f"{type(self).__name__}(learner={learner.name!r}) diverged: an "
                        f"eigendecomposition failed ({exc}); {self._divergence_hint()}; the "
                        f"estimator keeps its previous state") from exc
            if row >= 0:
                raise DivergenceError(
                    f"{type(self).__name__}(learner={learner.name!r}) diverged: "
                    f"{status_message(status, row, limit)}; {self._divergence_hint()}; the "
                    f"estimator keeps its previous state")
            if bar is not None:
                bar.update(part.shape[0])
        if stats is not None:
            self.intercept_stats_ = stats
        return info

    def _fit_link(self, X, y, sw):
        """Hook: fit what maps the learner's scores to the decision, on the rows X of the
        call that just learned them (validated)."""

    def _intercept_outside(self):
        """Whether the estimator keeps an intercept outside the learner (``fit_intercept``)."""
        return bool(getattr(self, "fit_intercept", False))

    def _intercept_stats(self):
        return list(self.__dict__.get("intercept_stats_", [0.0, 0.0]))


    def _divergence_hint(self):
        return "lower the learning rate or rescale the features"

    def _atomically(self, work, X):
        """Run ``work(snapshot_taker)``; if it raises (bad input, divergence, interrupt), put
        every attribute and the live learner's arrays back as they were."""
        saved = dict(self.__dict__)
        snaps = []

        def snapshot(learner, indices):
            snaps.append((learner, learner.snapshot(indices)))

        try:
            return work(snapshot)
        except BaseException:
            for learner, snap in snaps:
                learner.restore(snap)
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise

    def _validation(self, Xv, yv, sw, eval_set):
        """``(Xv, yv, sw, rule, validation)`` of a ``fit``: the early-stopping rule (the
        mean squared error of the clipped predictions, or a classifier's mean log loss of
        the margins) and the validation rows ``(X, y, sw)``: the ``eval_set``, or
        ``validation_fraction`` of the rows carved out (not trained on) when the rule needs
        them, else None."""
        classifier = self._is_classifier()
        rule = rule_of_params(self.get_params(deep=False),
                              score="log_loss" if classifier else "squared_error",
                              n_samples=Xv.shape[0], has_eval_set=eval_set is not None)
        Xv, yv, sw, carved = split_rows(Xv, yv, sw, rule, self.random_state, classifier)
        if carved is None and eval_set is not None:
            Xe, ye = self._validate_eval_set(eval_set)
            carved = (self._standardized(to_csr(Xe, np.float64)), ye, None)
        return Xv, yv, sw, rule, carved

    def _pass_monitor(self, learner, rule, validation, y_train, callback):
        """The shared :class:`~fmlearn._early_stopping.EarlyStopping` monitor of ``fit``'s
        passes and ``score(learner)``, the validation score of the learner's current state
        (None without validation rows)."""
        classifier = self._is_classifier()

        def copy_state():  # the learner's arrays (its round counter too) and the intercept
            return ({k: np.array(v, copy=True) for k, v in learner.arrays().items()},
                    self.__dict__.get("intercept_stats_"))

        monitor = EarlyStopping(rule, callback=callback,
                                copy_state=copy_state if rule.active else None)
        if validation is None:
            return monitor, None
        Xval, yval, swval = validation
        fn = SCORES[rule.score][0]
        lo, hi = float(np.min(y_train)), float(np.max(y_train))
        if not classifier and hasattr(self, "y_range_") and self.warm_start:
            lo, hi = min(lo, self.y_range_[0]), max(hi, self.y_range_[1])

        def score(learner):
            scores = learner.predict(self._rows(Xval))
            if self._intercept_outside():
                scores = scores + intercept_of(self._intercept_stats(), classifier)
            if not classifier and getattr(self, "clip_predictions", False):
                scores = np.clip(scores, lo, hi)
            return fn(yval, scores, swval)

        return monitor, score

    def _fit(self, X, y, sample_weight, classes=None, eval_set=None, callback=None):
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")

        def work(snapshot):
            warm = self.warm_start and hasattr(self, "learner_")
            if not warm:  # a fresh fit resolves the "auto" parameters again
                self.__dict__.pop("trace_bound_", None)
                self.__dict__.pop("x_scale_", None)
                self.__dict__.pop("col_scale_", None)
                self.__dict__.pop("learning_rate_", None)
                self.__dict__.pop("calibration_scale_", None)
                self.__dict__.pop("calibration_offset_", None)
                self.__dict__.pop("mean_", None)
                self.__dict__.pop("scale_", None)
            Xv, yv, sw = self._validate(X, y, sample_weight, reset=not warm, classes=classes)
            Xv, yv, sw, rule, validation = self._validation(Xv, yv, sw, eval_set)
            rng = check_random_state(self.random_state)
            if self.shuffle:
                # An exact rewriting of the weighted stream: duplicates become one weighted row,
                # visited as consecutive rounds, in an order independent of the input order
                # (the "auto" parameters are derived from it: repeated rows and weights agree).
                Xv, yv, sw = merge_duplicate_rows(Xv, yv, sw)
            if warm:
                learner = self._learner()
                snapshot(learner, Xv.indices)
            else:
                self._resolve_auto(Xv, yv, sw)
                learner = self._new_learner(Xv.shape[1], rng)
                self.__dict__.pop("y_range_", None)
                self.__dict__.pop("intercept_stats_", None)
            n = Xv.shape[0]
            out = np.empty(n)
            bar = progress(self.verbose, n * self.n_iter, f"{type(self).__name__}[{self.learner}]")
            monitor, score = self._pass_monitor(learner, rule, validation, yv, callback)
            n_done = 0
            with bar:
                for it in range(self.n_iter):
                    order = rng.permutation(n) if self.shuffle else np.arange(n)
                    t0 = time.perf_counter()
                    info = self._run(learner, Xv, yv, sw, order.astype(np.int64), out,
                                     bar if self.verbose else None)
                    n_done = it + 1
                    seconds = time.perf_counter() - t0
                    val = None if score is None else score(learner)
                    if monitor.end_iteration(it, seconds=seconds, val=val):
                        break
            if monitor.keeps_best():
                arrays, stats = monitor.best_state
                learner.load_arrays(arrays)
                if stats is not None:
                    self.intercept_stats_ = stats
            history = monitor.history
            if validation is None:
                del history["val"]
            del history["train"]  # the learners report no per-pass training loss
            self.history_ = history
            self.n_iter_ = n_done
            self.early_stopping_ = bool(rule.active)
            self.best_iteration_ = (int(monitor.best_iteration) + 1 if monitor.keeps_best()
                                    else None)
            self._update_range(yv)
            self._publish(learner)
            self.info_ = info
            self._fit_link(Xv, yv, sw)
            return self

        return self._atomically(work, X)

    def _partial_fit(self, X, y, sample_weight, classes=None):
        self._check_params_once()

        def work(snapshot):
            first = not hasattr(self, "learner_")
            Xv, yv, sw = self._validate(X, y, sample_weight, reset=first, classes=classes)
            if first:
                rng = check_random_state(self.random_state)
                self._resolve_auto(Xv, yv, sw)
                learner = self._new_learner(Xv.shape[1], rng)
            else:
                learner = self._learner()
                snapshot(learner, Xv.indices)
            out = np.empty(Xv.shape[0])
            info = self._run(learner, Xv, yv, sw, np.arange(Xv.shape[0], dtype=np.int64), out)
            lo, hi = self._running_range(yv)
            self._update_range(yv)
            self._publish(learner)
            self.info_ = info
            self._fit_link(Xv, yv, sw)
            return out, lo, hi

        return self._atomically(work, X)

    def _prequential(self, X, y, sample_weight=None, classes=None):
        """Learn the rows in order and return the scores predicted *before* each row's update
        (regression: clipped to the range of the targets seen before that row)."""
        out, lo, hi = self._partial_fit(X, y, sample_weight, classes=classes)
        if lo is not None:
            out = np.clip(out, lo, hi)
        return out

    def _update_range(self, y):
        pass

    def _running_range(self, y):
        return None, None

    # -- prediction -------------------------------------------------------------------------
    def _raw_predict(self, X):
        return self._learned_scores(self._standardized(to_csr(X, np.float64)))

    def _learned_scores(self, X):
        """The scores of the rows X as the model sees them (standardised CSR)."""
        scores = self._learner().predict(self._rows(X))
        if self._intercept_outside():
            scores += intercept_of(self._intercept_stats(), self._is_classifier())
        return scores

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, eval_set=None, callback=None):
        """Learn from scratch (unless ``warm_start``) with ``n_iter`` passes over the rows.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Targets, or any two labels for a classifier.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; a row of weight m counts like m repeated rows.
        eval_set : (X_val, y_val), optional
            Validation rows scored after every pass (``history_["val"]``: the mean squared
            error of the clipped predictions, or a classifier's mean log loss of the margins
            before calibration); with ``early_stopping`` True or "auto" they decide when to
            stop, and the best pass's model is kept (``best_iteration_``).
        callback : callable, optional
            ``callback(i, history)`` after pass ``i`` (from 0; the keys of ``history_``);
            returning True stops after that pass (the model is then that pass's, or the best
            one with early stopping; ``n_iter_`` says how many passes ran).
        """
        return self._fit(X, y, sample_weight, eval_set=eval_set, callback=callback)

    def _check_loaded_state(self):
        """Every state array against the others and the parameters (shapes, counters and
        indices within bounds, finiteness), then a prediction of a row touching every
        feature: a crafted file fails here, never in a kernel."""
        check_loaded_float(self, "x_scale_", False)
        self._check_loaded_standardize()
        learner = self._learner()
        template = self._new_learner(int(self.n_features_in_), None)
        learner.check_state(template)
        stats = self.__dict__.get("intercept_stats_")
        if stats is not None and (not isinstance(stats, list) or len(stats) != 2
                                  or not all(isinstance(v, float) and np.isfinite(v)
                                             for v in stats)
                                  or stats[0] < 0 or (self._is_classifier() and stats[1] < 0)):
            raise ValueError("intercept_stats_ must be two finite floats, the weights "
                             "non-negative")
        d = int(self.n_features_in_)
        probe = np.ones(d) / np.sqrt(d)
        scores = learner.predict(raw(to_csr(probe[None, :], np.float64)))
        if not np.all(np.isfinite(scores)):
            raise ValueError("model parameters give a non-finite prediction")


    def _check_loaded_standardize(self):
        """``mean_`` and ``scale_`` of a loaded model: both or neither, float64 of the width
        of X, finite, the scales positive."""
        mean, scale = self.__dict__.get("mean_"), self.__dict__.get("scale_")
        if mean is None and scale is None:
            return
        d = int(self.n_features_in_)
        for name, a in (("mean_", mean), ("scale_", scale)):
            if not (isinstance(a, np.ndarray) and a.dtype == np.float64 and a.shape == (d,)
                    and np.all(np.abs(a) < MAX_SCALE)):
                raise ValueError(f"{name} must be {d} finite float64 values")
        if not np.all(scale > 1 / MAX_SCALE):
            raise ValueError("scale_ must be positive")

    def _coordinates(self):
        """(mean, factor): the learner's rows are factor o (x - mean) (mean 0 and the factor
        ``x_scale_`` without ``standardize``)."""
        d = int(self.n_features_in_)
        c = self._x_scale()
        mean, scale = self.__dict__.get("mean_"), self.__dict__.get("scale_")
        factor = np.full(d, c) if scale is None else c / scale
        s = self.__dict__.get("col_scale_")
        if s is not None:
            factor = factor / s
        return (np.zeros(d) if mean is None else mean), factor


def is_online(estimator):
    """Whether ``estimator`` is one of the online estimators (CCFM, OnlineFM, OnlineCFM)."""
    return isinstance(estimator, _OnlineBase)


def prequential_scores(estimator, X, y, sample_weight=None, classes=None):
    """The online estimators' compiled prequential step, for
    :func:`fmlearn.evaluate_prequential`: learn the rows of ``X`` in order (as
    ``partial_fit``) and return the scores predicted *before* each row's update (regression:
    clipped to the range of the targets seen before that row)."""
    return estimator._prequential(X, y, sample_weight, classes=classes)


class _OnlineClassifier(FMClassifierMixin):
    """Binary classification front of the online estimators."""

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Learn from one row or many, visited in the given order (one round per row).

        ``classes`` (both labels) is needed on the first call unless ``y`` holds both."""
        self._partial_fit(X, y, sample_weight, classes=classes)
        return self


class _RegressorRange(FMRegressorMixin):
    """Regression front: predictions are clipped to the range of the targets seen (as
    libFM does)."""

    def partial_fit(self, X, y, sample_weight=None):
        """Learn from one row or many, visited in the given order (one round per row)."""
        self._partial_fit(X, y, sample_weight)
        return self

    def _update_range(self, y):
        if y.shape[0] == 0:
            return
        lo, hi = float(np.min(y)), float(np.max(y))
        if hasattr(self, "y_range_"):
            lo, hi = min(lo, self.y_range_[0]), max(hi, self.y_range_[1])
        self.y_range_ = [lo, hi]

    def _running_range(self, y):
        """Per row, the range of the targets seen before it (in this call and earlier)."""
        if not self.clip_predictions:
            return None, None
        prev_lo, prev_hi = (self.y_range_ if hasattr(self, "y_range_") else (np.inf, -np.inf))
        lo = np.minimum.accumulate(np.concatenate([[prev_lo], y[:-1]]))
        hi = np.maximum.accumulate(np.concatenate([[prev_hi], y[:-1]]))
        none = lo > hi  # nothing seen yet: no clipping
        lo[none], hi[none] = -np.inf, np.inf
        return lo, hi

    def predict(self, X):
        """Predicted targets, shape (n_samples,), clipped to the training range when
        ``clip_predictions``."""
        pred = self._scores(X)
        if self.clip_predictions and hasattr(self, "y_range_"):
            pred = np.clip(pred, self.y_range_[0], self.y_range_[1])
        return pred


def fitted_array(est, name):
    check_is_fitted(est)
    return getattr(est, f"{_PREFIX}{name}_")


class _LinearPart:
    """``w0_`` and ``w_`` of a learner with a linear part (the fitted named arrays), in the
    coordinates of X."""

    def _times_interactions(self, u):  # pragma: no cover - abstract
        """W u, W the learner's interaction matrix as the model uses it."""
        raise NotImplementedError

    def _input_linear(self):
        w0, w = float(fitted_array(self, "w0")[0]), fitted_array(self, "w")
        mean, factor = self._coordinates()
        if np.any(mean):
            return input_coordinates(w0, w, self._times_interactions, mean, factor)
        return w0, (w if np.all(factor == 1.0) else w * factor)

    @property
    def w0_(self):
        """The bias in the coordinates of X (the learner's, less what centring moved into
        it with ``standardize``)."""
        return self._input_linear()[0]

    @property
    def w_(self):
        """The linear weights of the original features (the learner's times ``x_scale_`` /
        ``scale_``, and with centring the part of the interactions that is linear in x)."""
        return self._input_linear()[1]
