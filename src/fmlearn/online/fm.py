"""The classic FM (Rendle 2010) learned online: :class:`OnlineFMRegressor` and
:class:`OnlineFMClassifier` with FTRL-Proximal (FM-FTRL), OGD or PA (the FM-* baselines of seed
Zhang et al. 2018, §4.1). A one-row ``partial_fit`` costs O(nnz k)."""

import numbers

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from .._docs import add_to_section, fill_doc
from .._renamed import Renamed
from ..solvers.ftrl import FMFTRLLearner, FTRLSettings
from ..solvers.ogd import FMOGDLearner, OGDSettings
from ..solvers.pa import FMPALearner, PASettings
from ._base import (
    AUTO_LINEAR_RATE,
    _LinearPart,
    _OnlineBase,
    _OnlineClassifier,
    _RegressorRange,
    check_loaded_float,
    fitted_array,
    target_spread,
    value_scale,
)

# learning_rate="auto" of OGD and PA: OGD's eta (FMRegressor's SGD: 0.01, a constant step over
# many epochs; one pass over a stream wants a larger, decaying one); PA has no step. FTRL's is
# derived from the data (:meth:`_OnlineFMBase._resolve_auto`).
AUTO_LEARNING_RATE = {"ogd": 0.05, "pa": None}
# FTRL's alpha before it was derived from the data: the value of models saved without
# ``learning_rate_``
LEGACY_FTRL_RATE = 0.1


class _OnlineFMBase(_LinearPart, _OnlineBase):
    # 0.1 names (FTRL's alpha/beta/l1/l2 per block; "eta" the OGD step): until 0.3
    _renamed_params = {
        "eta": Renamed("learning_rate", frozenset({"ogd"})),
        "ftrl_alpha": Renamed("learning_rate", frozenset({"ftrl"})),
        "alpha": Renamed("learning_rate", frozenset({"ftrl"})),
        "ftrl_alpha_v": "learning_rate_pairwise", "alpha_v": "learning_rate_pairwise",
        "beta": "ftrl_beta", "ftrl_beta_v": "ftrl_beta_pairwise", "beta_v": "ftrl_beta_pairwise",
        "l1": "l1_linear", "l1_v": "l1_pairwise",
        "l2": Renamed("reg_linear", frozenset({"ftrl"})),
        "l2_v": Renamed("reg_pairwise", frozenset({"ftrl"})),
        "implicit": "implicit_sgd",
    }
    _parameter_constraints = {
        **_OnlineBase._common_constraints,
        "learner": [StrOptions({"ftrl", "ogd", "pa"})],
        "n_factors": [Interval(numbers.Integral, 0, None, closed="left")],
        "init_stdev": [Interval(numbers.Real, 0, None, closed="left")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither"),
                          StrOptions({"auto"})],
        "learning_rate_pairwise": [Interval(numbers.Real, 0, None, closed="neither")],
        "power_t": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_bias": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_linear": [Interval(numbers.Real, 0, None, closed="left")],
        "reg_pairwise": [Interval(numbers.Real, 0, None, closed="left")],
        "l1_linear": [Interval(numbers.Real, 0, None, closed="left")],
        "l1_pairwise": [Interval(numbers.Real, 0, None, closed="left")],
        "pa_c": [Interval(numbers.Real, 0, None, closed="neither")],
        "epsilon": [Interval(numbers.Real, 0, None, closed="left")],
        "ftrl_beta": [Interval(numbers.Real, 0, None, closed="left")],
        "ftrl_beta_pairwise": [Interval(numbers.Real, 0, None, closed="neither")],
        "implicit_sgd": ["boolean"],
        "lr_schedule": [StrOptions({"constant", "invscaling"})],
    }

    def __init__(self, learner="ftrl", *, n_factors=8, init_stdev=0.1, learning_rate="auto",
                 learning_rate_pairwise=0.05, power_t=0.5, reg_bias=0.0, reg_linear=0.0,
                 reg_pairwise=0.0, l1_linear=0.0, l1_pairwise=0.0, pa_c=0.1, epsilon=0.0,
                 ftrl_beta=1.0, ftrl_beta_pairwise=1.0, implicit_sgd=True,
                 lr_schedule="invscaling", standardize="auto", n_iter=1, shuffle=True,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=2, tol=1e-4,
                 warm_start=False, random_state=None, verbose=0):
        self.learner = learner
        self.n_factors = n_factors
        self.init_stdev = init_stdev
        self.learning_rate = learning_rate
        self.learning_rate_pairwise = learning_rate_pairwise
        self.power_t = power_t
        self.reg_bias = reg_bias
        self.reg_linear = reg_linear
        self.reg_pairwise = reg_pairwise
        self.l1_linear = l1_linear
        self.l1_pairwise = l1_pairwise
        self.pa_c = pa_c
        self.epsilon = epsilon
        self.ftrl_beta = ftrl_beta
        self.ftrl_beta_pairwise = ftrl_beta_pairwise
        self.implicit_sgd = implicit_sgd
        self.lr_schedule = lr_schedule
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
        if rng is not None:
            # FMRegressor / FMClassifier draw the key of their epoch shuffles before the
            # factors: the same draws here give the same initial model for one random_state
            rng.randint(np.iinfo(np.int32).max)
        args = (n_features, self.n_factors, self.init_stdev, rng, self._loss_code())
        lr = self._linear_rate()
        if self.learner == "ftrl":
            st = FTRLSettings(learning_rate=lr, ftrl_beta=self.ftrl_beta,
                              l1_linear=self.l1_linear, reg_bias=self.reg_bias,
                              reg_linear=self.reg_linear,
                              learning_rate_pairwise=self.learning_rate_pairwise,
                              ftrl_beta_pairwise=self.ftrl_beta_pairwise,
                              l1_pairwise=self.l1_pairwise, reg_pairwise=self.reg_pairwise)
            return FMFTRLLearner(*args, st)
        if self.learner == "ogd":
            st = OGDSettings(learning_rate=lr, power_t=self.power_t, reg_bias=self.reg_bias,
                             reg_linear=self.reg_linear, reg_pairwise=self.reg_pairwise,
                             implicit_sgd=self.implicit_sgd, lr_schedule=self.lr_schedule)
            return FMOGDLearner(*args, st)
        return FMPALearner(*args, PASettings(pa_c=self.pa_c, epsilon=self.epsilon))

    def _auto_ftrl(self):
        return self.learning_rate == "auto" and self.learner == "ftrl"

    def _resolve_auto(self, X, y, sw):
        """``learning_rate="auto"`` with FTRL: the learner sees the rows times
        ``x_scale_`` = 1 / the root mean square of the first batch's non-zero feature values, and
        alpha of (w0, w) is ``learning_rate_`` = AUTO_LINEAR_RATE x the targets' spread (their
        standard deviation; 1 log-odds for a classifier).

        Why: FTRL-Proximal moves each weight by about alpha per round, at most about
        alpha sqrt(m) over the m rows a feature occurs in, whatever the gradients' scale. A
        constant alpha therefore fixes the weights' reachable size in the units of X and y:
        with alpha = 0.1 on tf-idf rows (values ~0.15) the keyword weights of an imbalanced
        text set stayed far below the log-odds they need, so the model ranked well (AUC 0.98)
        yet its decision stayed under the intercept's -2.9 (no positive predicted); on
        standardised one-hot columns (values 10-100) the same alpha overshoots (MovieLens RMSE
        1.73 against the mean's 1.13). On rows of unit typical value and alpha in the unit of
        y, a weight reaches the size its feature needs in a few rounds. One-hot (values 1)
        keeps x_scale_ = 1. The factors' alpha (``learning_rate_pairwise``) acts on the same
        rescaled rows."""
        if self._auto_ftrl():
            self.x_scale_ = value_scale(X, sw)
            self.learning_rate_ = AUTO_LINEAR_RATE * target_spread(y, sw, self._is_classifier())
        else:
            self.x_scale_ = 1.0
            self.__dict__.pop("learning_rate_", None)

    def _linear_rate(self):
        if self.learning_rate != "auto":
            return float(self.learning_rate)
        if self.learner == "ftrl":
            return float(self.__dict__.get("learning_rate_", LEGACY_FTRL_RATE))
        return AUTO_LEARNING_RATE[self.learner]

    def _check_loaded_state(self):
        check_loaded_float(self, "learning_rate_", False)
        super()._check_loaded_state()

    def _check_compatible(self, learner):
        if learner.state.V.shape[1] != self.n_factors:
            raise ValueError(f"the model was fitted with n_factors={learner.state.V.shape[1]}; "
                             "fit again to change it")

    def _divergence_hint(self):
        hints = {"ogd": "lower learning_rate", "pa": "lower pa_c",
                 "ftrl": "lower learning_rate / learning_rate_pairwise"}
        return hints[self.learner] + " or rescale the features"

    def _times_interactions(self, u):
        V = fitted_array(self, "V")  # sum_{j<l} <v_j, v_l> z_j z_l: W = V V' less its diagonal
        return V @ (V.T @ u) - (V * V).sum(axis=1) * u

    @property
    def V_(self):
        """The factors of the original features (the learner's times ``x_scale_`` /
        ``scale_``)."""
        V = fitted_array(self, "V")
        factor = self._coordinates()[1]
        return V if np.all(factor == 1.0) else V * factor[:, None]


_FM_DOC = """
    The classic factorization machine (Rendle 2010)

        f(x) = w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l

    learned online by one of the per-row rules that Zhang et al. 2018, §4.1 compares OCCFM with.

    Parameters
    ----------
    learner : {"ftrl", "ogd", "pa"}, default="ftrl"
        ``"ftrl"``: FTRL-Proximal (McMahan et al. 2013) on every coordinate of (w0, w, V), the
        FM-FTRL of Zhang et al. 2018 (after Ta 2015); ``"ogd"``: online gradient descent, which is
        :class:`FMRegressor`'s SGD (the same compiled kernel, the same parameter names; see
        below for the defaults that differ); ``"pa"``: passive-aggressive PA-I on the model
        linearized at the current parameters (hinge / epsilon-insensitive loss).
    n_factors : int, default=8
    init_stdev : float, default=0.1
        Standard deviation of the initial factors (drawn as :class:`FMRegressor` draws them:
        the same ``random_state`` gives the same initial model).
    learning_rate : float or "auto", default="auto"
        ``"ftrl"``: alpha of w0 and w; "auto": derived from the first batch, 0.5 x the
        standard deviation of the targets (1 for a classifier) on the rows rescaled to a root
        mean square non-zero value of 1 (``x_scale_``, ``learning_rate_``; the rule and why:
        ``_resolve_auto`` in :mod:`fmlearn.online.fm`); a number is used as given, on X as
        given. ``"ogd"``: the step size eta (auto: 0.05; :class:`FMRegressor` defaults to
        0.01, a constant step for many epochs).
    learning_rate_pairwise : float, default=0.05
        ``"ftrl"``: alpha of the factors V (on the rescaled rows with
        ``learning_rate="auto"``).
    lr_schedule : {"invscaling", "constant"}, default="invscaling"
        ``"ogd"``: the step of round t (t = 1, 2, ...) is learning_rate / t ** power_t, or
        learning_rate (:class:`FMRegressor` defaults to ``"constant"``).
    power_t : float, default=0.5
        ``"ogd"`` with ``lr_schedule="invscaling"``: the decay of the step size.
    reg_bias, reg_linear, reg_pairwise : float, default=0.0
        ``"ogd"``, ``"ftrl"``: L2 penalties on w0, w, V.
    l1_linear, l1_pairwise : float, default=0.0
        ``"ftrl"``: L1 penalties on (w0, w) and on V.
    pa_c, epsilon : float, default=0.1, 0.0
        ``"pa"`` aggressiveness and insensitive zone (regression).
    ftrl_beta, ftrl_beta_pairwise : float, default=1.0, 1.0
        ``"ftrl"``: beta of (w0, w) and of V (McMahan et al. 2013, Algorithm 1); the factors'
        proximal term is centred at the random initial factors.
    implicit_sgd : bool, default=True
        ``"ogd"``: divide each step by 1 + eta L ||grad f(x)||^2 (the implicit update of the
        linearized loss, as :class:`FMRegressor`'s SGD), which does not overshoot whatever the
        feature scale; for small steps it is the plain gradient step (``False``).
    %(online_standardize)s
    n_iter, shuffle, warm_start, random_state, verbose :
        As in :class:`CCFMRegressor`; ``random_state`` also draws the initial factors.
    early_stopping, validation_fraction, n_iter_no_change, tol :
        Early stopping of ``fit``'s passes, as in :class:`CCFMRegressor`.

    Attributes
    ----------
    w0_, w_, V_ : float, ndarray (n_features,), ndarray (n_features, n_factors)
        The model on the features of X (the learner's w and V times ``x_scale_``).
    mean_, scale_ : ndarray of shape (n_features_in_,)
        With ``standardize`` on a dense X (or True): the learner sees (x - mean_) / scale_
        (then times ``x_scale_``).
    x_scale_ : float
        The factor the learner's rows are multiplied by (1.0 unless ``learning_rate="auto"``
        with ``"ftrl"``).
    learning_rate_ : float
        ``"ftrl"`` with ``learning_rate="auto"``: the alpha of w0 and w in use.
    learner_, n_rounds_, info_, state_*_, n_features_in_ :
        As in :class:`CCFMRegressor` (``state_w0_``, ``state_w_``, ``state_V_``, ``state_t_``
        and for FTRL ``state_z_linear_``, ``state_n_linear_``, ...).

    Notes
    -----
    ``learner="ogd"`` and :class:`FMRegressor` (``solver="sgd"``) are one learner: their
    ``partial_fit`` runs the same compiled step (:func:`fmlearn.kernels.sgd.sgd_epoch`) on the
    rows in the given order, and with the same settings gives bit-identical ``w0_``, ``w_``,
    ``V_``. The names are shared (``learning_rate``, ``lr_schedule``, ``power_t``,
    ``reg_bias``, ``reg_linear``, ``reg_pairwise``, ``implicit_sgd``, ``init_stdev``,
    ``n_factors``); what differs is only defaults and what each estimator is for:

    ================  ===================  ===================
    parameter         OnlineFM*("ogd")     FMRegressor("sgd")
    ================  ===================  ===================
    learning_rate     "auto" (0.05)        0.01
    lr_schedule       "invscaling"         "constant"
    n_iter            1 (passes in fit)    100 (epochs in fit)
    ================  ===================  ===================

    FMRegressor with ``clip_predictions=True`` also clips the prediction inside the step to
    the range of the targets seen (libFM's rule); the online regressor clips only the
    predictions it reports (prequentially: to the targets seen before each row), so the two
    agree exactly with ``clip_predictions=False`` (and always for the classifiers). ``fit``
    differs by design: the online ``fit`` makes ``n_iter`` passes in a fresh random order of
    the rows, FMRegressor shuffles blocks of rows.

    References
    ----------
    S. Rendle. Factorization machines. ICDM 2010.
    H. B. McMahan et al. Ad click prediction: a view from the trenches. KDD 2013.
    K. Crammer et al. Online passive-aggressive algorithms. JMLR 7, 2006.
    A.-P. Ta. Factorization machines with follow-the-regularized-leader for CTR prediction in
    display advertising. IEEE Big Data 2015.
"""


@fill_doc
class OnlineFMRegressor(_RegressorRange, _OnlineFMBase):
    __doc__ = (add_to_section(
    """Factorization machine regressor learned online (FTRL, OGD or PA).
""" + _FM_DOC, "Parameters", """    clip_predictions : bool, default=True
        As in :class:`CCFMRegressor`.
""") + """
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

    def __init__(self, learner="ftrl", *, n_factors=8, init_stdev=0.1, learning_rate="auto",
                 learning_rate_pairwise=0.05, power_t=0.5, reg_bias=0.0, reg_linear=0.0,
                 reg_pairwise=0.0, l1_linear=0.0, l1_pairwise=0.0, pa_c=0.1, epsilon=0.0,
                 ftrl_beta=1.0, ftrl_beta_pairwise=1.0, implicit_sgd=True,
                 lr_schedule="invscaling", standardize="auto", n_iter=1, shuffle=True,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=2, tol=1e-4,
                 clip_predictions=True, warm_start=False, random_state=None, verbose=0):
        super().__init__(learner, n_factors=n_factors, init_stdev=init_stdev,
                         learning_rate=learning_rate,
                         learning_rate_pairwise=learning_rate_pairwise, power_t=power_t,
                         reg_bias=reg_bias, reg_linear=reg_linear, reg_pairwise=reg_pairwise,
                         l1_linear=l1_linear, l1_pairwise=l1_pairwise, pa_c=pa_c,
                         epsilon=epsilon, ftrl_beta=ftrl_beta,
                         ftrl_beta_pairwise=ftrl_beta_pairwise, implicit_sgd=implicit_sgd,
                         lr_schedule=lr_schedule, standardize=standardize, n_iter=n_iter,
                         shuffle=shuffle,
                         early_stopping=early_stopping,
                         validation_fraction=validation_fraction,
                         n_iter_no_change=n_iter_no_change, tol=tol,
                         warm_start=warm_start, random_state=random_state, verbose=verbose)
        self.clip_predictions = clip_predictions


@fill_doc
class OnlineFMClassifier(_OnlineClassifier, _OnlineFMBase):
    __doc__ = (add_to_section(
    """Factorization machine binary classifier learned online (FTRL, OGD or PA);
    logistic loss for FTRL and OGD, hinge loss for PA; any two labels.
""" + _FM_DOC, "Attributes", """    classes_ : ndarray of shape (2,)
""") + """
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
