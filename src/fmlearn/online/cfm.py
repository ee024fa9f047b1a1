"""The convex FM of Yamada et al. 2017 learned online by FTRL (the CFM-FTRL baseline of Zhang et al.
2018, §4.1):
:class:`OnlineCFMRegressor` and :class:`OnlineCFMClassifier`."""

import numbers

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._docs import add_to_section, fill_doc
from ..solvers._online_common import DEFAULT_BUDGET_MB
from ..solvers.ftrl import CFMFTRLLearner, FTRLSettings
from ._base import (
    AUTO_LINEAR_RATE,
    _LinearPart,
    _OnlineBase,
    _OnlineClassifier,
    _RegressorRange,
    check_loaded_float,
    target_spread,
)
from ._trace import TRACE_BOUND_CONSTRAINT, TraceBounded


class _OnlineCFMBase(_LinearPart, TraceBounded, _OnlineBase):
    # 0.1 names: until 0.3 ("eta" was the step of W, "ftrl_alpha" FTRL's alpha of w0 and w)
    _renamed_params = {
        "delta": "trace_bound", "eta": "learning_rate_pairwise", "ftrl_alpha": "learning_rate",
        "alpha": "learning_rate", "beta": "ftrl_beta", "l1": "l1_linear", "l2": "reg_linear",
        "eig_iter": "eig_max_iter",
    }
    _augment = False
    _parameter_constraints = {
        **_OnlineBase._common_constraints,
        "learner": [StrOptions({"ftrl"})],
        "trace_bound": TRACE_BOUND_CONSTRAINT,
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither"),
                          StrOptions({"auto"})],
        "fit_intercept": ["boolean"],
        "learning_rate_pairwise": [Interval(numbers.Real, 0, None, closed="neither")],
        "power_t": [Interval(numbers.Real, 0, None, closed="left")],
        "ftrl_beta": [Interval(numbers.Real, 0, None, closed="left")],
        "l1_linear": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_linear": [Interval(numbers.Real, 0, None, closed="left")],
        "eig_max_iter": [Interval(numbers.Integral, 0, None, closed="left")],
        "eig_tol": [Interval(numbers.Real, 0, None, closed="neither")],
        "sketch_size": [Interval(numbers.Integral, 2, None, closed="left"), StrOptions({"auto"})],
        "memory_budget_mb": [Interval(numbers.Real, 0, None, closed="neither")],
    }

    def __init__(self, learner="ftrl", *, trace_bound="auto", learning_rate="auto",
                 learning_rate_pairwise=1.0, power_t=0.5, ftrl_beta=1.0, l1_linear=0.0,
                 reg_linear=0.0, fit_intercept=True, eig_max_iter=3, eig_tol=1e-3,
                 sketch_size="auto",
                 memory_budget_mb=DEFAULT_BUDGET_MB, standardize="auto", n_iter=1, shuffle=True,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=2, tol=1e-4,
                 warm_start=False,
                 random_state=None, verbose=0):
        self.learner = learner
        self.trace_bound = trace_bound
        self.learning_rate = learning_rate
        self.learning_rate_pairwise = learning_rate_pairwise
        self.power_t = power_t
        self.ftrl_beta = ftrl_beta
        self.l1_linear = l1_linear
        self.reg_linear = reg_linear
        self.fit_intercept = fit_intercept
        self.eig_max_iter = eig_max_iter
        self.eig_tol = eig_tol
        self.sketch_size = sketch_size
        self.memory_budget_mb = memory_budget_mb
        self.standardize = standardize
        self.n_iter = n_iter
        self.shuffle = shuffle
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.warm_start = warm_start
        self.random_state = random_state
        self.verbose = verbose

    def _new_learner(self, n_features, rng):
        st = FTRLSettings(learning_rate=self._linear_rate(), ftrl_beta=self.ftrl_beta,
                          l1_linear=self.l1_linear, reg_linear=self.reg_linear,
                          learning_rate_pairwise=self.learning_rate_pairwise,
                          power_t=self.power_t, trace_bound=self._trace_bound(),
                          eig_max_iter=self.eig_max_iter, eig_tol=self.eig_tol,
                          budget_mb=self.memory_budget_mb, sketch_size=self.sketch_size)
        return CFMFTRLLearner(n_features, st, self._loss_code())

    def _resolve_auto(self, X, y, sw):
        # the linear rate first: the candidates of trace_bound="auto" are run with it
        if self.learning_rate == "auto":
            self.learning_rate_ = AUTO_LINEAR_RATE * target_spread(y, sw, self._is_classifier())
        else:
            self.learning_rate_ = float(self.learning_rate)
        super()._resolve_auto(X, y, sw)

    def _linear_rate(self):
        if self.learning_rate == "auto":
            return float(self.learning_rate_)
        return float(self.learning_rate)

    def _check_loaded_state(self):
        check_loaded_float(self, "learning_rate_", self.learning_rate == "auto")
        super()._check_loaded_state()

    def _times_interactions(self, u):
        W = self._learner().matrix()  # 1/2 sum_{j != l} W_jl z_j z_l: W less its diagonal
        return W @ u - np.diag(W) * u

    def interaction_matrix(self):
        """The learned d x d positive semidefinite W in the coordinates of X (dense; meant for
        small d): the learner's times ``x_scale_ ** 2`` (divided by ``scale_`` on both sides
        with ``standardize``)."""
        check_is_fitted(self)
        factor = self._coordinates()[1]
        return self._learner().matrix() * np.outer(factor, factor)


_CFM_DOC = """
    The convex factorization machine of Yamada et al. 2017

        f(x) = w0 + <w, x> + 1/2 sum_{j != l} W_jl x_j x_l,   W >= 0,  tr W <= trace_bound

    learned online by FTRL (the CFM-FTRL baseline of Zhang et al. 2018, §4.1): W by lazy projection
    of the accumulated gradient onto the positive semidefinite trace simplex, w0 and w by
    per-coordinate FTRL-Proximal.

    Parameters
    ----------
    learner : {"ftrl"}, default="ftrl"
    trace_bound : float or "auto", default="auto"
        Trace bound of W (Yamada et al.'s (2017) eta); "auto" as in :class:`CCFMRegressor` (on rows
        of mean ||x||^2 = 1 the candidates are 2 s x 4^k).
    learning_rate : float or "auto", default="auto"
        FTRL-Proximal alpha of w0 and w; "auto": 0.5 x the standard deviation of the targets
        of the first batch (regression), 0.5 (classification): a weight moves by about alpha
        per round whatever the gradients' scale, so alpha carries the unit of y
        (``learning_rate_``).
    fit_intercept : bool, default=True
        Add the running constant of the targets outside the learner, as in
        :class:`CCFMRegressor` (``intercept_``); w0 learns what remains.
    learning_rate_pairwise, power_t : float, default=1.0, 0.5
        W_{t+1} = Proj(-eta_t S_t), eta_t = learning_rate_pairwise / t ** power_t.
    ftrl_beta, l1_linear, reg_linear : float, default=1.0, 0.0, 0.0
        FTRL-Proximal beta and L1 / L2 penalties of w0 and w.
    eig_max_iter, eig_tol : int, float, default=3, 1e-3
        For d above 400, the projection uses a refined partial eigendecomposition (this many
        refinement products per round at most, to this relative residual). The lazy
        projection moves the tracked subspace little per round, so a few products reach a
        residual whose eigenvalue error (its square) is far below the model's; 10 and 1e-6
        (the earlier defaults) cost about 3 times the CPU on MovieLens-100K for the
        same RMSE to 4 digits (benchmarks/RESULTS.md).
    %(online_standardize)s
    sketch_size, memory_budget_mb, n_iter, shuffle, warm_start, random_state, verbose :
        As in :class:`CCFMRegressor`.
    early_stopping, validation_fraction, n_iter_no_change, tol :
        Early stopping of ``fit``'s passes, as in :class:`CCFMRegressor`.

    Attributes
    ----------
    w0_, w_ : float, ndarray of shape (n_features,)
    mean_, scale_ : ndarray of shape (n_features_in_,)
        With ``standardize`` on a dense X (or True): the learner sees (x - mean_) / scale_
        (then times ``x_scale_``).
    trace_bound_, x_scale_ : float
        As in :class:`CCFMRegressor` (``w_`` and :meth:`interaction_matrix` are in the
        coordinates of X).
    learner_, n_rounds_, info_, state_*_, n_features_in_ :
        As in :class:`CCFMRegressor`.

    References
    ----------
    M. Yamada et al. Convex factorization machine for toxicogenomics prediction. KDD 2017,
    Eq. 1-2. W. Zhang, X. Lin, P. Zhao. Online compact convexified factorization machine.
    WWW 2018, §4.1.
"""


@fill_doc
class OnlineCFMRegressor(_RegressorRange, _OnlineCFMBase):
    __doc__ = (add_to_section(
    """Convex factorization machine regressor learned online by FTRL.
""" + _CFM_DOC, "Parameters", """    clip_predictions : bool, default=True
""") + """
    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import OnlineCFMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 5)); y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> m = OnlineCFMRegressor(trace_bound=2.0, random_state=0).fit(X, y)
    >>> bool(np.sqrt(np.mean((m.predict(X) - y) ** 2)) < 0.9 * y.std())
    True
    """)

    _parameter_constraints = {**_OnlineCFMBase._parameter_constraints,
                              "clip_predictions": ["boolean"]}

    def __init__(self, learner="ftrl", *, trace_bound="auto", learning_rate="auto",
                 learning_rate_pairwise=1.0, power_t=0.5, ftrl_beta=1.0, l1_linear=0.0,
                 reg_linear=0.0, fit_intercept=True, eig_max_iter=3, eig_tol=1e-3,
                 sketch_size="auto",
                 memory_budget_mb=DEFAULT_BUDGET_MB, standardize="auto", n_iter=1, shuffle=True,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=2, tol=1e-4,
                 clip_predictions=True, warm_start=False, random_state=None, verbose=0):
        super().__init__(learner, trace_bound=trace_bound, learning_rate=learning_rate,
                         learning_rate_pairwise=learning_rate_pairwise, power_t=power_t,
                         ftrl_beta=ftrl_beta, l1_linear=l1_linear, reg_linear=reg_linear,
                         fit_intercept=fit_intercept,
                         eig_max_iter=eig_max_iter, eig_tol=eig_tol, sketch_size=sketch_size,
                         memory_budget_mb=memory_budget_mb, standardize=standardize,
                         n_iter=n_iter, shuffle=shuffle,
                         early_stopping=early_stopping,
                         validation_fraction=validation_fraction,
                         n_iter_no_change=n_iter_no_change, tol=tol,
                         warm_start=warm_start, random_state=random_state, verbose=verbose)
        self.clip_predictions = clip_predictions


@fill_doc
class OnlineCFMClassifier(_OnlineClassifier, _OnlineCFMBase):
    __doc__ = (add_to_section(
    """Convex factorization machine binary classifier (logistic loss) learned
    online by FTRL; any two labels.
""" + _CFM_DOC, "Attributes", """    classes_ : ndarray of shape (2,)
""") + """
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
