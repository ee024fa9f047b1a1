"""The compact convexified FM (Zhang et al. 2018, §3.1) learned online: :class:`CCFMRegressor` and
:class:`CCFMClassifier`, with the learners OCCFM (``"ocg"``, Zhang et al. 2018, Algorithm 2) and the
projected baselines ``"ogd"``, ``"pa"``, ``"ftrl"`` (Zhang et al. 2018, §4.1)."""

import inspect
import numbers

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._docs import add_to_section, fill_doc
from ..solvers._online_common import DEFAULT_BUDGET_MB
from ..solvers.ftrl import CCFMFTRLLearner, FTRLSettings
from ..solvers.ocg import OCGLearner, OCGSettings
from ..solvers.ogd import CCFMOGDLearner, OGDSettings
from ..solvers.pa import CCFMPALearner, PASettings
from . import _trace
from ._base import (
    MAX_SCALE,
    _OnlineBase,
    _OnlineClassifier,
    _RegressorRange,
    check_loaded_float,
    input_coordinates,
    sample_weights,
)
from ._platt import platt_link
from ._trace import (
    AUTO_OCG_SHARE,
    AUTO_TRACE_ROWS,
    TRACE_BOUND_CONSTRAINT,
    TraceBounded,
    row_norms2,
    sample_rows,
)

# What "auto" means for each learner (docs/online.md): the tracked eigen-step of OCCFM is
# refined loosely (its errors are those of a conditional-gradient oracle), the projection of
# FTRL tightly (its error moves the iterate directly); OCCFM adds one direction to C per round,
# the projected learners one per feature of a row, hence their larger rank caps.
AUTO = {
    "ocg": {"eig_max_iter": 4, "eig_tol": 1e-2, "max_rank": 16},
    "ogd": {"max_rank": 128},
    "pa": {"max_rank": 128},
    "ftrl": {"eig_max_iter": 10, "eig_tol": 1e-6},
}


# learning_rate="auto" of OCCFM's classifier: this many times the step of least regret bound
# (:func:`auto_step`). The bound's step is a worst case (|l'| at its start, every round); 1x
# it left the scores of a generated imbalanced text set under the intercept (1 of 41
# positives predicted), 16x-32x gave 30-31 of 41 with ``self_interaction=False`` (measured in
# benchmarks/RESULTS.md, "Imbalanced sparse text")
AUTO_STEP_FACTOR = 32.0


def auto_step(trace_bound, grad2, rounds):
    """``learning_rate="auto"`` of ``CCFMClassifier("ocg")``: eta from the bound delta, the
    gradients' scale G^2 (``grad2``, the mean squared Frobenius norm of a round's gradient)
    and the T ``rounds`` of the first batch (why: :meth:`_CCFMBase._rows_scaled`).

    F_t(C) = eta <S_t, C> + ||C||_F^2 (Zhang et al. 2018, Alg. 2 line 4) is the objective of FTRL
    with the regularizer ||C||_F^2 / (2 alpha), alpha = eta / 2, whose regret against any C in the
    ball (Frobenius radius D <= ||C||_tr <= delta) is at most D^2 / (2 alpha) + alpha / 2
    sum_t ||g_t||_F^2 (Orabona 2019, Corollary 7.9), least at alpha = delta / (G sqrt T):
    eta = 2 delta / (G sqrt T), times AUTO_STEP_FACTOR."""
    return AUTO_STEP_FACTOR * 2.0 * trace_bound / (np.sqrt(grad2) * np.sqrt(rounds))


class _CCFMBase(TraceBounded, _OnlineBase):
    # 0.1 names: until 0.3
    _renamed_params = {"delta": "trace_bound", "eta": "learning_rate",
                       "eig_iter": "eig_max_iter"}
    _column_scaled = True  # trace_bound="auto" rescales the columns too (online/_trace.py)
    _parameter_constraints = {
        **_OnlineBase._common_constraints,
        "learner": [StrOptions({"ocg", "ogd", "pa", "ftrl"})],
        "trace_bound": TRACE_BOUND_CONSTRAINT,
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither"),
                          StrOptions({"auto"})],
        "gamma_power": [Interval(numbers.Real, 0, None, closed="left")],
        "gamma_offset": [Interval(numbers.Real, 0, None, closed="left")],
        "power_t": [Interval(numbers.Real, 0, None, closed="left")],
        "pa_c": [Interval(numbers.Real, 0, None, closed="neither")],
        "epsilon": [Interval(numbers.Real, 0, None, closed="left")],
        "self_interaction": ["boolean"],
        "fit_intercept": ["boolean"],
        "eig_max_iter": [Interval(numbers.Integral, 0, None, closed="left"), StrOptions({"auto"})],
        "eig_tol": [Interval(numbers.Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "max_rank": [Interval(numbers.Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "sketch_size": [Interval(numbers.Integral, 2, None, closed="left"), StrOptions({"auto"})],
        "memory_budget_mb": [Interval(numbers.Real, 0, None, closed="neither")],
    }

    def __init__(self, learner="ocg", *, trace_bound="auto", learning_rate=1.0, gamma_power=1.0,
                 gamma_offset=0.0, power_t=0.5, pa_c=1.0, epsilon=0.0, self_interaction=True,
                 fit_intercept=True, eig_max_iter="auto", eig_tol="auto", max_rank="auto",
                 sketch_size="auto",
                 memory_budget_mb=DEFAULT_BUDGET_MB, standardize="auto", n_iter=1, shuffle=True,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=2, tol=1e-4,
                 warm_start=False,
                 random_state=None, verbose=0):
        self.learner = learner
        self.trace_bound = trace_bound
        self.learning_rate = learning_rate
        self.gamma_power = gamma_power
        self.gamma_offset = gamma_offset
        self.power_t = power_t
        self.pa_c = pa_c
        self.epsilon = epsilon
        self.self_interaction = self_interaction
        self.fit_intercept = fit_intercept
        self.eig_max_iter = eig_max_iter
        self.eig_tol = eig_tol
        self.max_rank = max_rank
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

    def _resolved(self, name):
        value = getattr(self, name)
        return AUTO[self.learner][name] if value == "auto" else value

    def _scan_rows(self, n):
        """OCCFM's candidates run on AUTO_OCG_SHARE of the first batch's n rows, at least
        AUTO_OCG_MIN_ROWS, spread evenly (online/_trace.py, "OCCFM's scan"); the projected
        learners' on the usual sample."""
        if self.learner != "ocg":
            return super()._scan_rows(n)
        rows = max(int(np.ceil(AUTO_OCG_SHARE * n)), _trace.AUTO_OCG_MIN_ROWS)
        return sample_rows(n, min(AUTO_TRACE_ROWS, rows))

    def _validate_params(self):
        super()._validate_params()
        if self.learning_rate == "auto" and self.learner != "ocg":
            raise ValueError(f"learning_rate='auto' is derived for learner='ocg' only; give "
                             f"learner={self.learner!r} a number (default 1.0)")

    def _auto_step(self):
        """Whether the step is derived from the data (the classifier's ``"auto"``)."""
        return (self.learning_rate == "auto" and self.learner == "ocg"
                and self._is_classifier())

    def _rows_scaled(self, X, y, sw):
        """``learning_rate="auto"`` (``CCFMClassifier("ocg")``; not the default):
        eta derived from the bound and the gradients' scale of the first batch
        (:func:`auto_step`), AUTO_STEP_FACTOR x the step of least regret bound of the FTRL
        objective OCCFM tracks.

        Why: with a constant eta = 1, OCCFM tracks the minimiser of eta <S_t, C> + ||C||_F^2
        (Zhang et al. 2018, Alg. 2 line 4), a ridge of weight 2 / eta on C whatever the bound and
        the data's scale: on an imbalanced sparse text set (5% positives) C stayed far inside
        its ball and the scores under the intercept's log-odds -2.9: AUC 0.99 and no
        positive predicted (benchmarks/RESULTS.md, "Imbalanced sparse text"). The derived
        step scales with delta, so C can reach its ball. G^2 = E l'^2 E (||x^||^2 / 2)^2:
        the logistic loss's squared slope at the model the learner starts from
        (:meth:`_loss_slope2`) times the weighted mean over the rows, as the learner sees
        them, of the squared Frobenius norm of 1/2 x^ x^'; T is the first batch's total
        weight (at least 1), so ``fit`` and one ``partial_fit`` on the same rows agree;
        later batches keep the step (``learning_rate_``). The candidates of
        ``trace_bound="auto"`` are each run with the step of their own bound.

        Not the default: it raised the default's test error on IJCNN1 (scaled: 0.040 to
        0.068-0.084), and with ``self_interaction=True`` the number of positives it predicts
        on the text set is bimodal in eta (on rows of unit norm, sum_j Z_jj x_j^2 acts as a
        second intercept inside the ball whose sign flips between nearby steps).
        Measured: benchmarks/RESULTS.md."""
        self.__dict__.pop("learning_rate_", None)
        if not self._auto_step():
            return
        norm2 = row_norms2(X) * self._x_scale() ** 2 + 1.0
        p = sample_weights(sw)
        with np.errstate(over="ignore"):
            grad2 = float(np.dot(p, (norm2 / 2.0) ** 2)) * self._loss_slope2(y, sw)
        self._grad_scale = (grad2, max(float(sw.sum()), 1.0))

    def _loss_slope2(self, y, sw):
        """E l'^2 of the logistic loss at the model the learner starts from: the intercept's
        constant log-odds (``fit_intercept``), p (1 - p) with p = (w+ + 1) / (w + 2) the
        positives' add-one share of the weight w, as the intercept counts them; or 0 (1/4)."""
        if not self._intercept_outside():
            return 0.25
        pos = (float(np.dot(sw, y > 0)) + 1.0) / (float(sw.sum()) + 2.0)
        return pos * (1.0 - pos)

    def _resolve_auto(self, X, y, sw):
        self.__dict__.pop("_grad_scale", None)
        super()._resolve_auto(X, y, sw)
        if "_grad_scale" in self.__dict__:
            step = self._step()
            del self._grad_scale
            if not 1 / MAX_SCALE < step < MAX_SCALE:
                raise ValueError("learning_rate='auto': the rows' norms are too large or "
                                 "too small for a step in float64; rescale X or give "
                                 "learning_rate")
            self.learning_rate_ = step

    def _step(self):
        """The learner's step: the parameter, or the value ``"auto"`` resolved to (during
        the choice of the bound, the step of the candidate)."""
        if not self._auto_step():
            return float(self.learning_rate)  # "auto" elsewhere is refused (_validate_params)
        scale = self.__dict__.get("_grad_scale")
        if scale is not None:
            return float(auto_step(self._trace_bound(), *scale))
        if "learning_rate_" not in self.__dict__:
            raise ValueError("learning_rate='auto' but the model has no learning_rate_ "
                             "(it was fitted with another learning_rate or learner); fit again")
        return float(self.learning_rate_)

    def _check_loaded_state(self):
        check_loaded_float(self, "learning_rate_", self._auto_step())
        super()._check_loaded_state()

    def _new_learner(self, n_features, rng):
        loss = self._loss_code()
        si = self.self_interaction
        budget = self.memory_budget_mb
        if self.learner == "ocg":
            st = OCGSettings(learning_rate=self._step(), trace_bound=self._trace_bound(),
                             gamma_power=self.gamma_power, gamma_offset=self.gamma_offset,
                             eig_max_iter=self._resolved("eig_max_iter"),
                             eig_tol=self._resolved("eig_tol"),
                             max_rank=self._resolved("max_rank"), budget_mb=budget,
                             sketch_size=self.sketch_size,
                             seed_key=self._seed_key(rng) if rng is not None else 0)
            return OCGLearner(n_features, st, loss, si)
        if self.learner == "ogd":
            st = OGDSettings(learning_rate=self._step(), power_t=self.power_t,
                             trace_bound=self._trace_bound(), max_rank=self._resolved("max_rank"),
                             budget_mb=budget)
            return CCFMOGDLearner(n_features, st, loss, si)
        if self.learner == "pa":
            st = PASettings(pa_c=self.pa_c, epsilon=self.epsilon, trace_bound=self._trace_bound(),
                            max_rank=self._resolved("max_rank"), budget_mb=budget)
            return CCFMPALearner(n_features, st, loss, si)
        st = FTRLSettings(learning_rate_pairwise=self._step(), power_t=self.power_t,
                          trace_bound=self._trace_bound(),
                          eig_max_iter=self._resolved("eig_max_iter"),
                          eig_tol=self._resolved("eig_tol"), budget_mb=budget,
                          sketch_size=self.sketch_size)
        return CCFMFTRLLearner(n_features, st, loss, si)

    def augmented_matrix(self):
        """The learned (d+1) x (d+1) matrix C = [[Z, w], [w', 2 w0]] as a dense array.

        Meant for small d (it allocates (d+1)^2 floats). In the coordinates of X: the
        learner's matrix with its rows and columns of the features times ``x_scale_`` (and
        feature j's divided by ``col_scale_[j]`` and ``scale_[j]``; with a centring ``mean_``,
        w and w0 take the terms the centring moved: 1/2 x^' C x^ is the prediction on X as
        given); with ``fit_intercept`` the prediction adds ``intercept_``."""
        check_is_fitted(self)
        M = self._learner().matrix()
        mean, f = self._coordinates()
        if np.all(f == 1.0) and not np.any(mean):
            return M
        M = np.array(M, copy=True)
        Z, w, w0 = M[:-1, :-1], M[:-1, -1], M[-1, -1] / 2.0
        # the terms Z_jj z_j^2 are in the model only with self_interaction
        diag = np.zeros(Z.shape[0]) if self.self_interaction else np.diag(Z).copy()
        w0, w = input_coordinates(w0, w, lambda u: Z @ u - diag * u, mean, f)
        M[:-1, :-1] *= np.outer(f, f)
        M[:-1, -1] = M[-1, :-1] = w
        M[-1, -1] = 2.0 * w0
        return M

    def trace_norm(self):
        """||C||_tr of the learner's matrix (at most ``trace_bound_``; on the rows with the
        columns divided by ``col_scale_`` and times ``x_scale_``)."""
        check_is_fitted(self)
        return self._learner().trace_norm()


def _base_params(values):
    """The arguments of ``_CCFMBase.__init__`` among a subclass's ``__init__`` locals."""
    return {name: values[name] for name in _BASE_NAMES}


_BASE_NAMES = tuple(inspect.signature(_CCFMBase.__init__).parameters)[1:]


_CCFM_DOC = """
    The compact convexified factorization machine (Zhang et al. 2018, §3.1) predicts

        y^(x) = 1/2 x^' C x^ = w0 + <w, x> + 1/2 x' Z x,     x^ = [x; 1],  C = [[Z, w], [w', 2 w0]]

    with C symmetric in the trace-norm ball ||C||_tr <= delta: one convex compact decision set
    and a loss convex in C, as online convex optimization requires. With
    ``self_interaction=False`` the terms Z_jj x_j^2 are left out (Zhang et al. 2018, §3.1 remark;
    the bias entry 2 w0 is kept, which the printed formula <C, x^x^' - diag(x^ o x^)> would drop).

    Parameters
    ----------
    learner : {"ocg", "ogd", "pa", "ftrl"}, default="ocg"
        ``"ocg"``: OCCFM, online conditional gradient (Zhang et al. 2018, Algorithm 2): no
        projection, one eigenvector per round. ``"ogd"``: projected online gradient descent;
        ``"pa"``: projected passive-aggressive (PA-I); ``"ftrl"``: FTRL with lazy projection (Zhang
        et al. 2018, §4.1 baselines); these project exactly onto the ball by eigendecomposition
        every round.
    trace_bound : float or "auto", default="auto"
        The trace-norm bound delta of C (Zhang et al. 2018 use 10 on MovieLens
        and 300 on IJCNN1). "auto":
        derived from the first batch (each column rescaled to a unit root mean square of its
        non-zero values, the trace norm not being invariant to column scaling, when that
        brings the rows to a common norm (rows of one norm, as tf-idf's, are left as given),
        and the rows to
        mean ||x||^2 = 1, then the bound of
        smallest prequential loss among 4^k x the targets' standard deviation, or 4^k for a
        classifier, k = 0..5, run side by side on up to 8,000 of its rows; the rule and its
        reasoning: :mod:`fmlearn.online._trace`). A number is used as given, on X as given.
    learning_rate : float or "auto", default=1.0
        ``"ocg"``: the weight eta of the accumulated gradient in F_t (Zhang et al. 2018, Alg. 2 line
        4); the theory's D / (4 G T^(3/4)) is far too small in practice (see docs/online.md).
        ``"ogd"``, ``"ftrl"``: the step size eta_t = learning_rate / t ** power_t. ``"auto"``
        (:class:`CCFMClassifier`, ``"ocg"`` only; refused for the other learners): 32 x the
        step of least regret bound, 2 delta / (G sqrt T), derived from the bound, the logistic
        loss's slope and the rows of the first batch (fitted ``learning_rate_``; the rule and
        why it is not the default: ``_CCFMBase._rows_scaled`` in :mod:`fmlearn.online.ccfm`).
    gamma_power, gamma_offset : float, default=1.0, 0.0
        ``"ocg"``: gamma_t = min(1, (t + gamma_offset) ** -gamma_power). Zhang et al. 2018 print
        power 1/2 (Algorithm 2 line 7, footnote), whose final iterate keeps a weight t^-1/2 on the
        latest rank-one step and is noisy: on MovieLens-100K its default test RMSE was 1.042
        (ratio 0.925 to the mean's). With power 1, C_t = (1/t) sum_s delta sign(theta_s)
        q_s q_s' is the running average of the conditional-gradient atoms (an averaged iterate,
        as online-to-batch conversion prescribes): 0.958 on MovieLens, and lower test error on
        Abalone, IJCNN1 and Adult raw (benchmarks/RESULTS.md, "Online defaults that learn").
    power_t : float, default=0.5
        ``"ogd"``, ``"ftrl"``: decay of the step size (Zhang et al. 2018: 1/sqrt(t)).
    pa_c : float, default=1.0
        ``"pa"``: aggressiveness (largest step).
    epsilon : float, default=0.0
        ``"pa"`` regression: width of the insensitive zone.
    self_interaction : bool, default=True
        Model the terms x_j^2 (Zhang et al.'s (2018) CCFM does).
    fit_intercept : bool, default=True
        Add a constant b outside the trace-norm ball: y^(x) = b + 1/2 x^' C x^, b the running
        mean of the targets seen (regression) or their add-one log-odds
        log((n+ + 1) / (n- + 1)) (classification), each row learned with the b of the rows
        before it. In Zhang et al.'s (2018) model the constant is the entry 2 w0 of C, inside the
        ball: on MovieLens (mean rating 3.5) it takes 7 of the default bound's 10, and on an
        imbalanced set (5% positives, log-odds -2.9) the conditional-gradient steps, one rank-one
        direction per round, rarely spend mass on it, so the default decision was the
        majority class. ``False``: Zhang et al.'s (2018) model exactly.
    eig_max_iter : int or "auto", default="auto"
        ``"ocg"`` (auto: 4): the eigenvector comes from a small tracked subspace expanded with
        each row; while its residual ||H q - theta q|| exceeds ``eig_tol * |theta|``, up to this
        many Davidson steps (one product with S each) refine it; 0 skips refinement. For
        d + 1 <= 64 the step is Lanczos on the whole matrix to a relative residual of 1e-4
        instead. ``"ftrl"`` (auto: 10): refinement steps of the partial eigendecomposition that
        projects (d + 1 > 400).
    eig_tol : float or "auto", default="auto"
        Relative residual at which refinement stops (auto: 1e-2 for ``"ocg"``, 1e-6 for
        ``"ftrl"``).
    max_rank : int or "auto", default="auto"
        Rank cap of C kept as a basis and a small core (auto: 16 for ``"ocg"``, 128 for
        ``"ogd"``/``"pa"``); when the cap reaches d+1, C is kept dense. Directions beyond the
        cap are dropped by smallest |eigenvalue| (their trace mass is reported in ``info_``).
    sketch_size : int or "auto", default="auto"
        ``"ocg"``, ``"ftrl"``: the accumulated gradient S is kept exactly on the pattern of the
        feature pairs seen while that pattern has at most 4 * sketch_size * (d + 1) entries;
        beyond, as a Frequent Directions sketch of 2 * sketch_size rows per sign, which bounds
        the cost and memory of a round (auto: 32, lowered to fit ``memory_budget_mb``). The
        sketch's spectral error bound is reported in ``info_["sketch_error_bound"]``.
    memory_budget_mb : float, default=256
        Memory the basis of C, the tracked subspace and S may take; the rank cap and the sketch
        are lowered to fit, and a ``MemoryError`` names the need when even the smallest do not.
    %(online_standardize)s
    n_iter : int, default=1
        Passes over the data in ``fit``.
    shuffle : bool, default=True
        ``fit`` visits the rows in a fresh random order each pass (identical rows merged into
        one weighted row, visited as consecutive rounds); ``False`` keeps the given order, so
        that ``fit`` equals one ``partial_fit`` on the same rows.
    early_stopping, validation_fraction, n_iter_no_change, tol : default=False, 0.1, 2, 1e-4
        Early stopping of ``fit``'s passes: after each pass the validation rows (the
        ``eval_set`` of :meth:`fit`, else ``validation_fraction`` of the rows, not learned)
        are scored (the mean squared error of the clipped predictions, or the classifier's
        mean log loss of the margins: ``history_["val"]``); ``fit`` stops after
        ``n_iter_no_change`` passes without an improvement of more than ``tol`` and keeps the
        best pass's model (``best_iteration_``). "auto": on with an ``eval_set`` or more than
        10,000 rows. See docs/early-stopping.md.
    warm_start : bool, default=False
        ``fit`` continues from the current state.
    random_state : int, RandomState or None, default=None
        Order of the rows in ``fit``; for ``"ocg"`` on small d also the pseudo-random part of
        the Lanczos start vectors (``None`` and 0 give the same).
    verbose : int, default=0
        Show a progress bar.
"""

_CCFM_ATTRS = """
    Attributes
    ----------
    learner_ : str
        The learner whose state is stored.
    trace_bound_ : float
        The bound in use (``trace_bound``, or the value "auto" chose).
    x_scale_ : float
        The factor the learner's rows are multiplied by (1.0 unless ``trace_bound="auto"``).
    mean_, scale_ : ndarray of shape (n_features_in_,)
        With ``standardize`` on a dense X (or True): the learner sees (x - mean_) / scale_
        (then times ``x_scale_``).
    learning_rate_ : float
        ``CCFMClassifier("ocg", learning_rate="auto")`` only: the step in use.
    col_scale_ : ndarray of shape (n_features_in_,)
        With ``trace_bound="auto"`` only, when dividing the columns brings the rows to a
        common norm (absent for rows already of one norm, as tf-idf's): the divisor of each
        column of the learner's rows, the root mean square of its non-zero values in the first
        batch (1 for a column without one); applied before ``x_scale_``.
    intercept_ : float
        The constant b (0.0 with ``fit_intercept=False``); ``intercept_stats_`` holds the
        two weighted counts it comes from.
    n_rounds_ : int
        Rounds learned so far (a row of weight s counts ceil(s) rounds).
    info_ : dict
        Diagnostics (over the model's life): trace mass dropped by the rank cap, rounds whose
        eigenvector stopped above ``eig_tol``, Davidson steps, whether S is sketched and the
        sketch's error bound.
    state_*_ : ndarrays
        The learner's state by name (``state_C_U_``, ``state_S_data_``, ``state_tr_B_``, ...;
        docs/model-format.md lists them).
    n_features_in_ : int

    References
    ----------
    W. Zhang, X. Lin, P. Zhao. Online compact convexified factorization machine. WWW 2018
    (Zhang et al. 2018): §3.1 (CCFM), Algorithm 2 and Theorems 1-3 (OCCFM), §4.1 (baselines).
    E. Hazan. Introduction to online convex optimization, 2016 (OCG).
    M. Ghashami, E. Liberty, J. M. Phillips, D. P. Woodruff. Frequent directions: simple and
    deterministic matrix sketching. SIAM J. Comput. 45(5), 2016.
"""


@fill_doc
class CCFMRegressor(_RegressorRange, _CCFMBase):
    __doc__ = (add_to_section(add_to_section(
    """Compact convexified factorization machine for regression (squared loss),
    learned online.
""" + _CCFM_DOC + _CCFM_ATTRS, "Parameters", """    clip_predictions : bool, default=True
        Clip predictions to the range of the training targets (prequential predictions to
        the range of the targets seen before each row).
"""), "Attributes", """    y_range_ : list of two floats
""") + """
    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import CCFMRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 5)); y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> m = CCFMRegressor(trace_bound=5.0, gamma_power=1.0, random_state=0).fit(X, y)
    >>> bool(np.sqrt(np.mean((m.predict(X) - y) ** 2)) < 0.6 * y.std())
    True
    """)

    _parameter_constraints = {**_CCFMBase._parameter_constraints,
                              "learning_rate": [Interval(numbers.Real, 0, None,
                                                         closed="neither")],
                              "clip_predictions": ["boolean"]}

    def __init__(self, learner="ocg", *, trace_bound="auto", learning_rate=1.0, gamma_power=1.0,
                 gamma_offset=0.0, power_t=0.5, pa_c=1.0, epsilon=0.0, self_interaction=True,
                 fit_intercept=True, eig_max_iter="auto", eig_tol="auto", max_rank="auto",
                 sketch_size="auto",
                 memory_budget_mb=DEFAULT_BUDGET_MB, standardize="auto", n_iter=1, shuffle=True,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=2, tol=1e-4,
                 clip_predictions=True, warm_start=False, random_state=None, verbose=0):
        super().__init__(**_base_params(locals()))
        self.clip_predictions = clip_predictions


@fill_doc
class CCFMClassifier(_OnlineClassifier, _CCFMBase):
    __doc__ = (add_to_section(add_to_section(
    """Compact convexified factorization machine for binary classification
    (logistic loss), learned online. Any two labels; ``decision_function`` is
    a y^(x) + b for ``classes_[1]`` (Platt's link, ``calibration``; y^(x) itself with
    ``calibration=None``) and ``predict_proba`` its sigmoid.
""" + _CCFM_DOC + _CCFM_ATTRS, "Parameters", """    calibration : {"platt"} or None, default="platt"
        ``"platt"``: after the passes of ``fit``, the decision is a y^(x) + b with the scale
        a >= 0 and the constant b fitted by weighted logistic regression of the training
        labels on the final model's training scores y^(x) (Newton's method on the two
        parameters, Platt's smoothed targets; Platt 1999). C stays in its trace-norm ball and
        the intercept is unchanged: (a, b) is a separate two-parameter link. Why: OCCFM's
        final C ranks well but its scores are compressed, not shifted: on a generated
        imbalanced tf-idf set (5% positives) the default reached AUC 0.98 and predicted 0
        positives; refitting b alone still gave 0, and no step rule gave a count stable
        across row orders; with the fitted a (about 8-10; about 200 for ``"ftrl"``) and b the
        default predicts 22-26 of 41 and 19-22 of 30 held-out positives for three row orders,
        the AUC unchanged (benchmarks/RESULTS.md, "CCFMClassifier's default link"; J. Platt,
        Probabilistic outputs for support vector machines, 1999). When the scores rank backwards
        the fit keeps a = 0 (the minimiser over a >= 0; the order is never flipped) and the
        decision is the classes' log-odds. ``partial_fit`` refits (a, b) on each call's rows
        when they hold both classes and their scores differ, and keeps the previous link
        otherwise ((1, 0) before any), so that one ``partial_fit`` equals ``fit`` with
        ``shuffle=False`` on the same rows; one-row calls keep y^(x) as the decision.
        Prequential scores (``fmlearn.evaluate``) are the learner's y^(x) before each row.
        ``None``: the decision is y^(x).
"""), "Attributes", """    calibration_scale_, calibration_offset_ : float
        ``calibration="platt"`` only: the link's a (>= 0) and b.
    classes_ : ndarray of shape (2,)
""") + """
    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import CCFMClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 4)); y = np.where(X[:, 0] * X[:, 1] > 0, "yes", "no")
    >>> clf = CCFMClassifier(trace_bound=50.0, gamma_power=1.0, random_state=0).fit(X, y)
    >>> bool((clf.predict(X) == y).mean() > 0.9)
    True
    """)

    _parameter_constraints = {**_CCFMBase._parameter_constraints,
                              "calibration": [StrOptions({"platt"}), None]}
    # model files written before the link existed were fitted without it (fmlearn.io)
    _params_before = {"calibration": None, "standardize": False}

    def __init__(self, learner="ocg", *, trace_bound="auto", learning_rate=1.0, gamma_power=1.0,
                 gamma_offset=0.0, power_t=0.5, pa_c=1.0, epsilon=0.0, self_interaction=True,
                 fit_intercept=True, eig_max_iter="auto", eig_tol="auto", max_rank="auto",
                 sketch_size="auto", memory_budget_mb=DEFAULT_BUDGET_MB, standardize="auto",
                 n_iter=1, shuffle=True,
                 early_stopping=False, validation_fraction=0.1, n_iter_no_change=2, tol=1e-4,
                 calibration="platt", warm_start=False, random_state=None, verbose=0):
        super().__init__(**_base_params(locals()))
        self.calibration = calibration

    def _fit_link(self, X, y, sw):
        """Platt's (a, b) on the rows just learned (``calibration``); kept when they give
        nothing to fit (one class, or scores without spread), (1, 0) before any."""
        if self.calibration is None:
            self.__dict__.pop("calibration_scale_", None)
            self.__dict__.pop("calibration_offset_", None)
            return
        link = platt_link(self._learned_scores(X), y, sw)
        if link is None:
            link = (self.__dict__.get("calibration_scale_", 1.0),
                    self.__dict__.get("calibration_offset_", 0.0))
        self.calibration_scale_, self.calibration_offset_ = map(float, link)

    def _raw_predict(self, X):
        scores = super()._raw_predict(X)
        if self.calibration is None:
            return scores
        if "calibration_scale_" not in self.__dict__:
            raise ValueError("calibration='platt' but the model has no calibration_scale_ "
                             "(it was fitted with calibration=None); fit again or set "
                             "calibration=None")
        return self.calibration_scale_ * scores + self.calibration_offset_

    def _check_loaded_state(self):
        link = [self.__dict__.get(k) for k in ("calibration_scale_", "calibration_offset_")]
        if self.calibration is not None or link != [None, None]:
            if not all(isinstance(v, float) and abs(v) < MAX_SCALE for v in link) \
                    or not link[0] >= 0:
                raise ValueError(f"calibration_scale_, calibration_offset_ = {link!r} must be "
                                 f"finite floats, the scale non-negative")
        super()._check_loaded_state()
