"""Online factorization machines: the compact convexified FM with its learners (seed 002) and
the online baselines of its experiments on the classic FM and on the convex FM of seed 004.

* :class:`CCFMRegressor`, :class:`CCFMClassifier` - y^ = 1/2 x^' C x^ with x^ = [x; 1] and C
  symmetric in the trace-norm ball ||C||_tr <= delta (002 §3.1); learner ``"ocg"`` is OCCFM
  (002 Algorithm 2), ``"ogd"``, ``"pa"`` and ``"ftrl"`` the projected baselines (002 §4.1).
* :class:`OnlineFMRegressor`, :class:`OnlineFMClassifier` - the classic FM (Rendle 2010) with
  ``"ftrl"`` (FM-FTRL), ``"ogd"`` or ``"pa"``.
* :class:`OnlineCFMRegressor`, :class:`OnlineCFMClassifier` - the convex FM of seed 004 with
  FTRL (CFM-FTRL).

Every estimator learns row by row in a compiled loop. ``partial_fit`` takes one row or many
and visits them in the given order; ``fit`` starts afresh and makes ``n_iter`` passes over the
rows in a random order (the protocol of 002 §4.1). The learner's whole state is kept in
``_``-suffixed attributes, so a model saved with :meth:`save` continues learning after
:func:`fmlearn.load`.
"""

import numbers

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._base import BaseFM, FMClassifierMixin, FMRegressorMixin, progress
from ._data import merge_duplicate_rows, raw, to_csr
from ._threads import blas_single_thread
from .exceptions import DivergenceError
from .losses import LOSS_CODES
from .solvers._online_common import DEFAULT_BUDGET_MB
from .solvers.ftrl import CCFMFTRLLearner, CFMFTRLLearner, FMFTRLLearner, FTRLSettings
from .solvers.ocg import OCGLearner, OCGSettings
from .solvers.ogd import CCFMOGDLearner, FMOGDLearner, OGDSettings
from .solvers.pa import CCFMPALearner, FMPALearner, PASettings

_STATE_PREFIX = "state_"


# rows per compiled call in ``fit`` when a progress bar is shown
_CHUNK = 8192


class _OnlineBase(BaseFM):
    """Shared machinery: validation, the learner's state in attributes, fit / partial_fit,
    prequential predictions (see module docstring)."""

    _common_constraints = {
        "n_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "shuffle": ["boolean"],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # -- the learner ------------------------------------------------------------------------
    def _new_learner(self, n_features, rng):  # pragma: no cover - abstract
        raise NotImplementedError

    def _learner(self):
        """The learner rebuilt around the fitted state (arrays are shared, not copied)."""
        if getattr(self, "learner_", self.learner) != self.learner:
            raise ValueError(f"the model was fitted with learner={self.learner_!r}; "
                             f"set learner={self.learner_!r} or fit again")
        learner = self._new_learner(int(self.n_features_in_), None)
        prefix = _STATE_PREFIX
        values = {k[len(prefix):-1]: v for k, v in vars(self).items()
                  if k.startswith(prefix) and k.endswith("_")}
        return learner.load_state(values)

    def _keep(self, learner):
        for name, value in learner.state().items():
            setattr(self, f"{_STATE_PREFIX}{name}_", value)
        self.learner_ = learner.name
        self.n_rounds_ = learner.t

    def _limit(self, y):
        return 1e10 * max(1.0, float(np.max(np.abs(y))) if y.shape[0] else 1.0)

    def _is_classifier(self):
        return isinstance(self, FMClassifierMixin)

    def _loss_code(self):
        return LOSS_CODES["logistic" if self._is_classifier() else "squared"]

    # -- validation -------------------------------------------------------------------------
    def _validate(self, X, y, sample_weight, reset, classes=None):
        kw = {"classes": classes} if self._is_classifier() else {}
        X, y, sw = self._validate_train(X, y, sample_weight, reset=reset, **kw)
        X = to_csr(X, np.float64)
        self._check_scale(X)
        return X, np.ascontiguousarray(y, dtype=np.float64), sw

    def _check_scale(self, X):
        """Hook: refuse inputs whose scale would overflow a bounded model."""

    # -- running the learner ----------------------------------------------------------------
    def _run(self, learner, X, y, sw, order, out, bar=None):
        csr = raw(X)
        snapshot = self._snapshot(learner)
        limit = self._limit(y)
        step = _CHUNK if bar is not None else max(1, order.shape[0])
        info = {}
        for start in range(0, order.shape[0], step):
            part = order[start:start + step]
            with blas_single_thread():
                bad, info = learner.learn(csr, y, sw, part, out, limit)
            if bad >= 0:
                if snapshot is not None:
                    learner.load_state(snapshot)
                raise DivergenceError(
                    f"{type(self).__name__}(learner={learner.name!r}) diverged at row {bad}: "
                    f"its prediction became non-finite or exceeded {limit:.3g}; "
                    f"{self._divergence_hint()}; the estimator keeps its previous state")
            if bar is not None:
                bar.update(part.shape[0])
        return info

    def _snapshot(self, learner):
        return None

    def _divergence_hint(self):
        return "lower the learning rate or rescale the features"

    def _start(self, n_features, rng):
        learner = self._new_learner(n_features, rng)
        for name in [k for k in vars(self) if k.startswith(_STATE_PREFIX)]:
            delattr(self, name)
        for name in ("y_range_", "learner_"):
            if hasattr(self, name):
                delattr(self, name)
        return learner

    def _fit(self, X, y, sample_weight, classes=None):
        warm = self.warm_start and hasattr(self, "learner_")
        X, y, sw = self._validate(X, y, sample_weight, reset=not warm, classes=classes)
        rng = check_random_state(self.random_state)
        learner = self._learner() if warm else self._start(X.shape[1], rng)
        if self.shuffle:
            # An exact rewriting of the weighted stream: duplicates become one weighted row,
            # visited as consecutive rounds, in an order independent of the input order.
            X, y, sw = merge_duplicate_rows(X, y, sw)
        self._update_range(y)
        n = X.shape[0]
        out = np.empty(n)
        bar = progress(self.verbose, n * self.n_iter, f"{type(self).__name__}[{self._name()}]")
        with bar:
            for _ in range(self.n_iter):
                order = rng.permutation(n) if self.shuffle else np.arange(n)
                info = self._run(learner, X, y, sw, order.astype(np.int64), out,
                                 bar if self.verbose else None)
        self._keep(learner)
        self.info_ = info
        return self

    def _partial_fit(self, X, y, sample_weight, classes=None):
        first = not hasattr(self, "learner_")
        X, y, sw = self._validate(X, y, sample_weight, reset=first, classes=classes)
        if first:
            learner = self._start(X.shape[1], check_random_state(self.random_state))
        else:
            learner = self._learner()
        out = np.empty(X.shape[0])
        self.info_ = self._run(learner, X, y, sw, np.arange(X.shape[0], dtype=np.int64), out)
        lo, hi = self._running_range(y)
        self._keep(learner)
        self._update_range(y)
        return out, lo, hi

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
        csr = raw(to_csr(X, np.float64))
        return self._learner().predict(csr)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Learn from scratch (unless ``warm_start``) with ``n_iter`` passes over the rows.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Targets, or any two labels for a classifier.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; a row of weight m counts like m repeated rows.
        """
        return self._fit(X, y, sample_weight)

    def _check_loaded_state(self):
        for name, value in vars(self).items():
            if (name.startswith(_STATE_PREFIX) and isinstance(value, np.ndarray)
                    and value.dtype.kind == "f" and not np.all(np.isfinite(value))):
                raise ValueError(f"{name} contains NaN or infinity")
        try:
            learner = self._learner()
            probe = np.eye(1, int(self.n_features_in_))
            scores = learner.predict(raw(to_csr(probe, np.float64)))
        except (IndexError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"inconsistent learner state: {exc}") from None
        if not np.all(np.isfinite(scores)):
            raise ValueError("model parameters contain NaN or infinity")

    def _name(self):
        return self.learner


class _OnlineClassifier(FMClassifierMixin):
    """Binary classification front of the online estimators."""

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Learn from one row or many, visited in the given order (one round per row).

        ``classes`` (both labels) is needed on the first call unless ``y`` holds both."""
        self._partial_fit(X, y, sample_weight, classes=classes)
        return self


class _RegressorRange(FMRegressorMixin):
    """Regression front: predictions are clipped to the range of the targets seen (as
    libFM does)."""

    @_fit_context(prefer_skip_nested_validation=True)
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


# ----------------------------------------------------------------------------------------------
# compact convexified FM
# ----------------------------------------------------------------------------------------------


class _CCFMBase(_OnlineBase):
    _parameter_constraints = {
        **_OnlineBase._common_constraints,
        "learner": [StrOptions({"ocg", "ogd", "pa", "ftrl"})],
        "delta": [Interval(numbers.Real, 0, None, closed="neither")],
        "eta": [Interval(numbers.Real, 0, None, closed="neither")],
        "gamma_power": [Interval(numbers.Real, 0, None, closed="left")],
        "gamma_offset": [Interval(numbers.Real, 0, None, closed="left")],
        "power_t": [Interval(numbers.Real, 0, None, closed="left")],
        "pa_c": [Interval(numbers.Real, 0, None, closed="neither")],
        "epsilon": [Interval(numbers.Real, 0, None, closed="left")],
        "self_interaction": ["boolean"],
        "eig_iter": [Interval(numbers.Integral, 0, None, closed="left")],
        "eig_tol": [Interval(numbers.Real, 0, None, closed="neither")],
        "max_rank": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "memory_budget_mb": [Interval(numbers.Real, 0, None, closed="neither")],
    }

    def __init__(self, learner="ocg", *, delta=10.0, eta=1.0, gamma_power=0.5, gamma_offset=0.0,
                 power_t=0.5, pa_c=1.0, epsilon=0.0, self_interaction=True, eig_iter=4,
                 eig_tol=1e-2, max_rank=None, memory_budget_mb=DEFAULT_BUDGET_MB, n_iter=1,
                 shuffle=True, warm_start=False, random_state=None, verbose=0):
        self.learner = learner
        self.delta = delta
        self.eta = eta
        self.gamma_power = gamma_power
        self.gamma_offset = gamma_offset
        self.power_t = power_t
        self.pa_c = pa_c
        self.epsilon = epsilon
        self.self_interaction = self_interaction
        self.eig_iter = eig_iter
        self.eig_tol = eig_tol
        self.max_rank = max_rank
        self.memory_budget_mb = memory_budget_mb
        self.n_iter = n_iter
        self.shuffle = shuffle
        self.warm_start = warm_start
        self.random_state = random_state
        self.verbose = verbose

    def _new_learner(self, n_features, rng):
        loss = self._loss_code()
        si = self.self_interaction
        budget = self.memory_budget_mb
        if self.learner == "ocg":
            st = OCGSettings(eta=self.eta, delta=self.delta, gamma_power=self.gamma_power,
                             gamma_offset=self.gamma_offset, eig_iter=self.eig_iter,
                             eig_tol=self.eig_tol, max_rank=self.max_rank or 16, budget_mb=budget)
            return OCGLearner(n_features, st, loss, si)
        if self.learner == "ogd":
            st = OGDSettings(eta0=self.eta, power_t=self.power_t, delta=self.delta,
                             max_rank=self.max_rank or 128, budget_mb=budget)
            return CCFMOGDLearner(n_features, st, loss, si)
        if self.learner == "pa":
            st = PASettings(pa_c=self.pa_c, epsilon=self.epsilon, delta=self.delta,
                            max_rank=self.max_rank or 128, budget_mb=budget)
            return CCFMPALearner(n_features, st, loss, si)
        st = FTRLSettings(eta0=self.eta, power_t=self.power_t, delta=self.delta,
                          eig_iter=max(self.eig_iter, 10), eig_tol=min(self.eig_tol, 1e-6),
                          budget_mb=budget)
        return CCFMFTRLLearner(n_features, st, loss, si)

    def _check_scale(self, X):
        # |y^| <= delta / 2 * ||x^||^2 for every C in the ball: refuse rows that would overflow
        if X.nnz:
            norm2 = np.bincount(np.repeat(np.arange(X.shape[0]), np.diff(X.indptr)),
                                weights=X.data ** 2, minlength=X.shape[0]) + 1.0
            if not np.all(np.isfinite(norm2)) or self.delta * norm2.max() > 1e300:
                raise ValueError("feature values are too large for the trace-norm bound "
                                 "(predictions would overflow); rescale X")

    def augmented_matrix(self):
        """The learned (d+1) x (d+1) matrix C = [[Z, w], [w', 2 w0]] as a dense array.

        Meant for small d (it allocates (d+1)^2 floats)."""
        check_is_fitted(self)
        return self._learner().matrix()

    def trace_norm(self):
        """||C||_tr of the learned matrix (at most ``delta``)."""
        check_is_fitted(self)
        return self._learner().trace_norm()


_CCFM_DOC = """
    The compact convexified factorization machine (seed 002 §3.1) predicts

        y^(x) = 1/2 x^' C x^ = w0 + <w, x> + 1/2 x' Z x,     x^ = [x; 1],  C = [[Z, w], [w', 2 w0]]

    with C symmetric in the trace-norm ball ||C||_tr <= delta: one convex compact decision set
    and a loss convex in C, as online convex optimization requires. With
    ``self_interaction=False`` the terms Z_jj x_j^2 are left out (002 §3.1 remark; the bias
    entry 2 w0 is kept, which the printed formula <C, x^x^' - diag(x^ o x^)> would drop).

    Parameters
    ----------
    learner : {"ocg", "ogd", "pa", "ftrl"}, default="ocg"
        ``"ocg"``: OCCFM, online conditional gradient (002 Algorithm 2): no projection, one
        eigenvector per round. ``"ogd"``: projected online gradient descent; ``"pa"``: projected
        passive-aggressive (PA-I); ``"ftrl"``: FTRL with lazy projection (002 §4.1 baselines);
        these project exactly onto the ball by eigendecomposition every round.
    delta : float, default=10.0
        Trace-norm bound of C (002 uses 10 on MovieLens and 300 on IJCNN1).
    eta : float, default=1.0
        ``"ocg"``: weight of the accumulated gradient in F_t (002 Alg. 2 line 4); the theory's
        D / (4 G T^(3/4)) is far too small in practice (see docs/online.md). ``"ogd"``, ``"ftrl"``:
        the step size eta_t = eta / t ** power_t.
    gamma_power, gamma_offset : float, default=0.5, 0.0
        ``"ocg"``: gamma_t = min(1, (t + gamma_offset) ** -gamma_power) (002: power 1/2).
    power_t : float, default=0.5
        ``"ogd"``, ``"ftrl"``: decay of the step size (002: 1/sqrt(t)).
    pa_c : float, default=1.0
        ``"pa"``: aggressiveness (largest step).
    epsilon : float, default=0.0
        ``"pa"`` regression: width of the insensitive zone.
    self_interaction : bool, default=True
        Model the terms x_j^2 (002's CCFM does).
    eig_iter : int, default=4
        ``"ocg"``: the eigenvector comes from a small tracked subspace expanded with each row;
        while its residual ||H q - theta q|| exceeds ``eig_tol * |theta|``, up to this many
        Davidson steps (one sparse product each) refine it. 0 skips refinement (faster, less
        accurate: see docs/online.md). For d + 1 <= 64 the step is an exact eigendecomposition.
    eig_tol : float, default=1e-2
        ``"ocg"``: relative residual at which refinement stops.
    max_rank : int or None, default=None
        Rank cap of C kept as a basis and a small core (None: 16 for ``"ocg"``, 128 for
        ``"ogd"``/``"pa"``); when the cap reaches d+1, C is kept dense. Directions beyond the cap
        are dropped by smallest |eigenvalue| (their trace mass is reported in ``info_``).
    memory_budget_mb : float, default=256
        Memory the basis of C and the accumulated-gradient pattern may take; the rank cap is
        lowered to fit and a pattern beyond it raises ``MemoryError``.
    n_iter : int, default=1
        Passes over the data in ``fit``.
    shuffle : bool, default=True
        ``fit`` visits the rows in a fresh random order each pass (identical rows merged into
        one weighted row, visited as consecutive rounds); ``False`` keeps the given order, so
        that ``fit`` equals one ``partial_fit`` on the same rows.
    warm_start : bool, default=False
        ``fit`` continues from the current state.
    random_state : int, RandomState or None, default=None
        Order of the rows in ``fit``.
    verbose : int, default=0
        Show a progress bar.
"""

_CCFM_ATTRS = """
    Attributes
    ----------
    learner_ : str
        The learner whose state is stored.
    n_rounds_ : int
        Rounds learned so far (a row of weight s counts ceil(s) rounds).
    info_ : dict
        Diagnostics of the last call (trace mass dropped by the rank cap, rounds whose
        eigenvector stopped above ``eig_tol``).
    state_*_ : ndarrays and ints
        The learner's state (C as basis and core, the accumulated gradient, the eigen tracker).
    n_features_in_ : int

    References
    ----------
    W. Zhang, X. Lin, P. Zhao. Online compact convexified factorization machine. WWW 2018
    (seed 002): §3.1 (CCFM), Algorithm 2 and Theorems 1-3 (OCCFM), §4.1 (baselines).
    E. Hazan. Introduction to online convex optimization, 2016 (OCG).
"""


class CCFMRegressor(_RegressorRange, _CCFMBase):
    __doc__ = ("""Compact convexified factorization machine for regression (squared loss),
    learned online.
""" + _CCFM_DOC + """    clip_predictions : bool, default=True
        Clip predictions to the range of the training targets (prequential predictions to
        the range of the targets seen before each row).
""" + _CCFM_ATTRS + """    y_range_ : list of two floats

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import CCFMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 5)); y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> m = CCFMRegressor(delta=5.0, gamma_power=1.0, random_state=0).fit(X, y)
    >>> bool(np.sqrt(np.mean((m.predict(X) - y) ** 2)) < 0.6 * y.std())
    True
    """)

    _parameter_constraints = {**_CCFMBase._parameter_constraints,
                              "clip_predictions": ["boolean"]}

    def __init__(self, learner="ocg", *, delta=10.0, eta=1.0, gamma_power=0.5, gamma_offset=0.0,
                 power_t=0.5, pa_c=1.0, epsilon=0.0, self_interaction=True, eig_iter=4,
                 eig_tol=1e-2, max_rank=None, memory_budget_mb=DEFAULT_BUDGET_MB, n_iter=1,
                 shuffle=True, clip_predictions=True, warm_start=False, random_state=None,
                 verbose=0):
        super().__init__(learner, delta=delta, eta=eta, gamma_power=gamma_power,
                         gamma_offset=gamma_offset, power_t=power_t, pa_c=pa_c, epsilon=epsilon,
                         self_interaction=self_interaction, eig_iter=eig_iter, eig_tol=eig_tol,
                         max_rank=max_rank, memory_budget_mb=memory_budget_mb, n_iter=n_iter,
                         shuffle=shuffle, warm_start=warm_start, random_state=random_state,
                         verbose=verbose)
        self.clip_predictions = clip_predictions


class CCFMClassifier(_OnlineClassifier, _CCFMBase):
    __doc__ = ("""Compact convexified factorization machine for binary classification
    (logistic loss), learned online. Any two labels; ``decision_function`` is y^(x) for
    ``classes_[1]`` and ``predict_proba`` its sigmoid.
""" + _CCFM_DOC + _CCFM_ATTRS + """    classes_ : ndarray of shape (2,)

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import CCFMClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 4)); y = np.where(X[:, 0] * X[:, 1] > 0, "yes", "no")
    >>> clf = CCFMClassifier(delta=50.0, gamma_power=1.0, random_state=0).fit(X, y)
    >>> bool((clf.predict(X) == y).mean() > 0.9)
    True
    """)


# ----------------------------------------------------------------------------------------------
# classic FM, online
# ----------------------------------------------------------------------------------------------


class _OnlineFMBase(_OnlineBase):
    _parameter_constraints = {
        **_OnlineBase._common_constraints,
        "learner": [StrOptions({"ftrl", "ogd", "pa"})],
        "n_factors": [Interval(numbers.Integral, 0, None, closed="left")],
        "init_stdev": [Interval(numbers.Real, 0, None, closed="left")],
        "eta": [Interval(numbers.Real, 0, None, closed="neither")],
        "power_t": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_bias": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_linear": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_pairwise": [Interval(numbers.Real, 0, None, closed="left")],
        "pa_c": [Interval(numbers.Real, 0, None, closed="neither")],
        "epsilon": [Interval(numbers.Real, 0, None, closed="left")],
        "ftrl_alpha": [Interval(numbers.Real, 0, None, closed="neither")],
        "ftrl_beta": [Interval(numbers.Real, 0, None, closed="left")],
        "l1": [Interval(numbers.Real, 0, None, closed="left")],
        "l2": [Interval(numbers.Real, 0, None, closed="left")],
        "ftrl_alpha_v": [Interval(numbers.Real, 0, None, closed="neither")],
        "ftrl_beta_v": [Interval(numbers.Real, 0, None, closed="neither")],
        "l1_v": [Interval(numbers.Real, 0, None, closed="left")],
        "l2_v": [Interval(numbers.Real, 0, None, closed="left")],
        "implicit": ["boolean"],
    }

    def __init__(self, learner="ftrl", *, n_factors=8, init_stdev=0.1, eta=0.05, power_t=0.5,
                 reg_bias=0.0, reg_linear=0.0, reg_pairwise=0.0, pa_c=0.1, epsilon=0.0,
                 ftrl_alpha=0.1, ftrl_beta=1.0, l1=0.0, l2=0.0, ftrl_alpha_v=0.05,
                 ftrl_beta_v=1.0, l1_v=0.0, l2_v=0.0, implicit=True, n_iter=1, shuffle=True,
                 warm_start=False, random_state=None, verbose=0):
        self.learner = learner
        self.n_factors = n_factors
        self.init_stdev = init_stdev
        self.eta = eta
        self.power_t = power_t
        self.reg_bias = reg_bias
        self.reg_linear = reg_linear
        self.reg_pairwise = reg_pairwise
        self.pa_c = pa_c
        self.epsilon = epsilon
        self.ftrl_alpha = ftrl_alpha
        self.ftrl_beta = ftrl_beta
        self.l1 = l1
        self.l2 = l2
        self.ftrl_alpha_v = ftrl_alpha_v
        self.ftrl_beta_v = ftrl_beta_v
        self.l1_v = l1_v
        self.l2_v = l2_v
        self.implicit = implicit
        self.n_iter = n_iter
        self.shuffle = shuffle
        self.warm_start = warm_start
        self.random_state = random_state
        self.verbose = verbose

    def _new_learner(self, n_features, rng):
        args = (n_features, self.n_factors, self.init_stdev, rng, self._loss_code())
        if self.learner == "ftrl":
            st = FTRLSettings(alpha=self.ftrl_alpha, beta=self.ftrl_beta, l1=self.l1, l2=self.l2,
                              alpha_v=self.ftrl_alpha_v, beta_v=self.ftrl_beta_v, l1_v=self.l1_v,
                              l2_v=self.l2_v)
            return FMFTRLLearner(*args, st)
        if self.learner == "ogd":
            st = OGDSettings(eta0=self.eta, power_t=self.power_t, reg0=self.reg_bias,
                             reg1=self.reg_linear, reg2=self.reg_pairwise,
                             implicit=self.implicit)
            return FMOGDLearner(*args, st)
        return FMPALearner(*args, PASettings(pa_c=self.pa_c, epsilon=self.epsilon))

    def _learner(self):
        learner = super()._learner()
        if learner.V.shape[1] != self.n_factors:
            raise ValueError(f"the model was fitted with n_factors={learner.V.shape[1]}; "
                             "fit again to change it")
        return learner

    def _snapshot(self, learner):
        return {k: np.array(v, copy=True) for k, v in learner.state().items()}

    def _divergence_hint(self):
        hints = {"ogd": "lower eta", "ftrl": "lower ftrl_alpha / ftrl_alpha_v",
                 "pa": "lower pa_c"}
        return hints[self.learner] + " or rescale the features"

    @property
    def w0_(self):
        check_is_fitted(self)
        return float(self.state_params0_[0])

    @property
    def w_(self):
        check_is_fitted(self)
        return self.state_w_

    @property
    def V_(self):
        check_is_fitted(self)
        return self.state_V_


_FM_DOC = """
    The classic factorization machine (Rendle 2010)

        f(x) = w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l

    learned online by one of the per-row rules that seed 002 §4.1 compares OCCFM with.

    Parameters
    ----------
    learner : {"ftrl", "ogd", "pa"}, default="ftrl"
        ``"ftrl"``: FTRL-Proximal (McMahan et al. 2013) on every coordinate of (w0, w, V), the
        FM-FTRL of 002 (after Ta 2015); ``"ogd"``: online gradient descent with step
        eta / t ** power_t (power_t = 0: plain SGD); ``"pa"``: passive-aggressive PA-I on the
        model linearized at the current parameters (hinge / epsilon-insensitive loss).
    n_factors : int, default=8
    init_stdev : float, default=0.1
        Standard deviation of the initial factors.
    eta, power_t : float, default=0.05, 0.5
        ``"ogd"`` step size.
    reg_bias, reg_linear, reg_pairwise : float, default=0.0
        ``"ogd"`` L2 penalties on w0, w, V.
    implicit : bool, default=True
        ``"ogd"``: divide each step by 1 + eta_t L ||grad f(x)||^2 (the implicit update of the
        linearized loss, as :class:`FMRegressor`'s SGD), which does not overshoot whatever the
        feature scale; for small steps it is the plain gradient step (``False``).
    pa_c, epsilon : float, default=0.1, 0.0
        ``"pa"`` aggressiveness and insensitive zone (regression).
    ftrl_alpha, ftrl_beta, l1, l2 : float, default=0.1, 1.0, 0.0, 0.0
        ``"ftrl"`` parameters of w0 and w (McMahan et al. 2013, Algorithm 1).
    ftrl_alpha_v, ftrl_beta_v, l1_v, l2_v : float, default=0.05, 1.0, 0.0, 0.0
        ``"ftrl"`` parameters of the factors; their proximal term is centred at the random
        initial factors.
    n_iter, shuffle, warm_start, random_state, verbose :
        As in :class:`CCFMRegressor`; ``random_state`` also draws the initial factors.

    Attributes
    ----------
    w0_, w_, V_ : float, ndarray (n_features,), ndarray (n_features, n_factors)
    learner_, n_rounds_, info_, state_*_, n_features_in_ :
        As in :class:`CCFMRegressor`.

    References
    ----------
    S. Rendle. Factorization machines. ICDM 2010.
    H. B. McMahan et al. Ad click prediction: a view from the trenches. KDD 2013.
    K. Crammer et al. Online passive-aggressive algorithms. JMLR 7, 2006.
    A.-P. Ta. Factorization machines with follow-the-regularized-leader for CTR prediction in
    display advertising. IEEE Big Data 2015.
"""


class OnlineFMRegressor(_RegressorRange, _OnlineFMBase):
    __doc__ = ("""Factorization machine regressor learned online (FTRL, OGD or PA).
""" + _FM_DOC + """    clip_predictions : bool, default=True
        As in :class:`CCFMRegressor`.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import OnlineFMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(3000, 5)); y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> m = OnlineFMRegressor(n_factors=4, n_iter=5, random_state=0).fit(X, y)
    >>> bool(np.sqrt(np.mean((m.predict(X) - y) ** 2)) < 0.5 * y.std())
    True
    """)

    _parameter_constraints = {**_OnlineFMBase._parameter_constraints,
                              "clip_predictions": ["boolean"]}

    def __init__(self, learner="ftrl", *, n_factors=8, init_stdev=0.1, eta=0.05, power_t=0.5,
                 reg_bias=0.0, reg_linear=0.0, reg_pairwise=0.0, pa_c=0.1, epsilon=0.0,
                 ftrl_alpha=0.1, ftrl_beta=1.0, l1=0.0, l2=0.0, ftrl_alpha_v=0.05,
                 ftrl_beta_v=1.0, l1_v=0.0, l2_v=0.0, implicit=True, n_iter=1, shuffle=True,
                 clip_predictions=True, warm_start=False, random_state=None, verbose=0):
        super().__init__(learner, n_factors=n_factors, init_stdev=init_stdev, eta=eta,
                         power_t=power_t, reg_bias=reg_bias, reg_linear=reg_linear,
                         reg_pairwise=reg_pairwise, pa_c=pa_c, epsilon=epsilon,
                         ftrl_alpha=ftrl_alpha, ftrl_beta=ftrl_beta, l1=l1, l2=l2,
                         ftrl_alpha_v=ftrl_alpha_v, ftrl_beta_v=ftrl_beta_v, l1_v=l1_v,
                         l2_v=l2_v, implicit=implicit, n_iter=n_iter, shuffle=shuffle,
                         warm_start=warm_start, random_state=random_state, verbose=verbose)
        self.clip_predictions = clip_predictions


class OnlineFMClassifier(_OnlineClassifier, _OnlineFMBase):
    __doc__ = ("""Factorization machine binary classifier learned online (FTRL, OGD or PA);
    logistic loss for FTRL and OGD, hinge loss for PA; any two labels.
""" + _FM_DOC + """    classes_ : ndarray of shape (2,)

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import OnlineFMClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(3000, 4)); y = np.where(X[:, 0] * X[:, 1] > 0, 1, 0)
    >>> clf = OnlineFMClassifier(n_factors=4, n_iter=5, random_state=0).fit(X, y)
    >>> bool((clf.predict(X) == y).mean() > 0.9)
    True
    """)


# ----------------------------------------------------------------------------------------------
# convex FM (seed 004), online
# ----------------------------------------------------------------------------------------------


class _OnlineCFMBase(_OnlineBase):
    _parameter_constraints = {
        **_OnlineBase._common_constraints,
        "learner": [StrOptions({"ftrl"})],
        "delta": [Interval(numbers.Real, 0, None, closed="neither")],
        "eta": [Interval(numbers.Real, 0, None, closed="neither")],
        "power_t": [Interval(numbers.Real, 0, None, closed="left")],
        "ftrl_alpha": [Interval(numbers.Real, 0, None, closed="neither")],
        "ftrl_beta": [Interval(numbers.Real, 0, None, closed="left")],
        "l1": [Interval(numbers.Real, 0, None, closed="left")],
        "l2": [Interval(numbers.Real, 0, None, closed="left")],
        "eig_iter": [Interval(numbers.Integral, 0, None, closed="left")],
        "eig_tol": [Interval(numbers.Real, 0, None, closed="neither")],
        "memory_budget_mb": [Interval(numbers.Real, 0, None, closed="neither")],
    }

    def __init__(self, learner="ftrl", *, delta=10.0, eta=1.0, power_t=0.5, ftrl_alpha=0.1,
                 ftrl_beta=1.0, l1=0.0, l2=0.0, eig_iter=10, eig_tol=1e-6,
                 memory_budget_mb=DEFAULT_BUDGET_MB, n_iter=1, shuffle=True, warm_start=False,
                 random_state=None, verbose=0):
        self.learner = learner
        self.delta = delta
        self.eta = eta
        self.power_t = power_t
        self.ftrl_alpha = ftrl_alpha
        self.ftrl_beta = ftrl_beta
        self.l1 = l1
        self.l2 = l2
        self.eig_iter = eig_iter
        self.eig_tol = eig_tol
        self.memory_budget_mb = memory_budget_mb
        self.n_iter = n_iter
        self.shuffle = shuffle
        self.warm_start = warm_start
        self.random_state = random_state
        self.verbose = verbose

    def _new_learner(self, n_features, rng):
        st = FTRLSettings(eta0=self.eta, power_t=self.power_t, delta=self.delta,
                          alpha=self.ftrl_alpha, beta=self.ftrl_beta, l1=self.l1, l2=self.l2,
                          eig_iter=self.eig_iter, eig_tol=self.eig_tol,
                          budget_mb=self.memory_budget_mb)
        return CFMFTRLLearner(n_features, st, self._loss_code())

    def interaction_matrix(self):
        """The learned d x d positive semidefinite W (dense; meant for small d)."""
        check_is_fitted(self)
        return self._learner().matrix()

    @property
    def w0_(self):
        check_is_fitted(self)
        return float(self.state_lin_[-1, 2])

    @property
    def w_(self):
        check_is_fitted(self)
        return self.state_lin_[:-1, 2]


_CFM_DOC = """
    The convex factorization machine of seed 004 (Yamada et al. 2017)

        f(x) = w0 + <w, x> + 1/2 sum_{j != l} W_jl x_j x_l,   W >= 0,  tr W <= delta

    learned online by FTRL (the CFM-FTRL baseline of seed 002 §4.1): W by lazy projection of
    the accumulated gradient onto the positive semidefinite trace simplex, w0 and w by
    per-coordinate FTRL-Proximal.

    Parameters
    ----------
    learner : {"ftrl"}, default="ftrl"
    delta : float, default=10.0
        Trace bound of W.
    eta, power_t : float, default=1.0, 0.5
        W_{t+1} = Proj(-eta_t S_t), eta_t = eta / t ** power_t.
    ftrl_alpha, ftrl_beta, l1, l2 : float, default=0.1, 1.0, 0.0, 0.0
        FTRL-Proximal of w0 and w.
    eig_iter, eig_tol : int, float, default=10, 1e-6
        For d above a few hundred, the projection uses a refined partial eigendecomposition
        (this many refinement products per round at most, to this relative residual).
    memory_budget_mb, n_iter, shuffle, warm_start, random_state, verbose :
        As in :class:`CCFMRegressor`.

    Attributes
    ----------
    w0_, w_ : float, ndarray of shape (n_features,)
    learner_, n_rounds_, info_, state_*_, n_features_in_ :
        As in :class:`CCFMRegressor`.

    References
    ----------
    M. Yamada et al. Convex factorization machine for toxicogenomics prediction. KDD 2017
    (seed 004, Eq. 1-2). W. Zhang, X. Lin, P. Zhao, WWW 2018 (seed 002 §4.1).
"""


class OnlineCFMRegressor(_RegressorRange, _OnlineCFMBase):
    __doc__ = ("""Convex factorization machine regressor learned online by FTRL.
""" + _CFM_DOC + """    clip_predictions : bool, default=True

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import OnlineCFMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 5)); y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> m = OnlineCFMRegressor(delta=2.0, random_state=0).fit(X, y)
    >>> bool(np.sqrt(np.mean((m.predict(X) - y) ** 2)) < 0.9 * y.std())
    True
    """)

    _parameter_constraints = {**_OnlineCFMBase._parameter_constraints,
                              "clip_predictions": ["boolean"]}

    def __init__(self, learner="ftrl", *, delta=10.0, eta=1.0, power_t=0.5, ftrl_alpha=0.1,
                 ftrl_beta=1.0, l1=0.0, l2=0.0, eig_iter=10, eig_tol=1e-6,
                 memory_budget_mb=DEFAULT_BUDGET_MB, n_iter=1, shuffle=True,
                 clip_predictions=True, warm_start=False, random_state=None, verbose=0):
        super().__init__(learner, delta=delta, eta=eta, power_t=power_t, ftrl_alpha=ftrl_alpha,
                         ftrl_beta=ftrl_beta, l1=l1, l2=l2, eig_iter=eig_iter, eig_tol=eig_tol,
                         memory_budget_mb=memory_budget_mb, n_iter=n_iter, shuffle=shuffle,
                         warm_start=warm_start, random_state=random_state, verbose=verbose)
        self.clip_predictions = clip_predictions


class OnlineCFMClassifier(_OnlineClassifier, _OnlineCFMBase):
    __doc__ = ("""Convex factorization machine binary classifier (logistic loss) learned
    online by FTRL; any two labels.
""" + _CFM_DOC + """    classes_ : ndarray of shape (2,)

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import OnlineCFMClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 4)); y = np.where(X[:, 0] + X[:, 1] > 0, "a", "b")
    >>> clf = OnlineCFMClassifier(random_state=0).fit(X, y)
    >>> bool((clf.predict(X) == y).mean() > 0.9)
    True
    """)
