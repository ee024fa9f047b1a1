"""Classic factorization machines (Rendle 2010) trained by SGD, ALS or MCMC as in libFM.

    f(x) = w0 + sum_j w_j x_j + sum_{j<l} <v_j, v_l> x_j x_l,     V in R^{d x k}

Every seed paper compares against this model; the solvers follow libFM 1.4 (Rendle 2012,
"Factorization Machines with libFM", ACM TIST 3(3)).
"""

import numbers
import time

import numba
import numpy as np
from scipy.special import ndtri
from sklearn.base import _fit_context, is_classifier
from sklearn.utils import check_random_state
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import Interval, StrOptions

from ._base import BaseFM, FMClassifierMixin, FMRegressorMixin, failure_atomic, progress
from ._data import merge_duplicate_rows, raw, to_csr
from ._docs import fill_doc
from ._fm_contrasts import ClassicFMContrastMixin
from ._fm_history import FMHistoryMixin
from ._fm_mcmc import MCMCChainMixin
from ._threads import n_threads
from .exceptions import DivergenceError
from .kernels.predict import fm_predict_csr, fm_predict_samples_csr
from .losses import LOSS_CODES
from .solvers._fm_common import (
    FMState,
    auto_init_stdev,
    check_groups,
    column_data,
    init_state,
    square_stats,
)
from .solvers.als import ALSSettings, als_solver
from .solvers.mcmc import mcmc_solver
from .solvers.sgd import SGDSettings, sgd_init_stdev, sgd_solver


def _solver_is_sgd(est):
    if est.solver != "sgd":
        raise AttributeError(
            f"partial_fit is only available with solver='sgd' (this estimator has "
            f"solver={est.solver!r}); ALS and MCMC sweep over the whole data set"
        )
    return True


class _BaseClassicFM(FMHistoryMixin, MCMCChainMixin, BaseFM):
    _parameter_constraints = {
        "n_factors": [Interval(numbers.Integral, 0, None, closed="left")],
        "solver": [StrOptions({"sgd", "als", "mcmc"})],
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
    }

    _loss = "squared"

    def __init__(self, n_factors=8, *, solver="mcmc", n_iter=100, init_stdev="auto", reg_bias=0.0,
                 reg_linear=0.0, reg_pairwise=0.0, learning_rate=0.01, lr_schedule="constant",
                 power_t=0.5, shuffle=True, implicit_sgd=True, average_epochs="auto",
                 n_burn_in=None, n_kept_samples=None, overrelaxation="auto", groups=None,
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
        self.warm_start = warm_start
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    # -- helpers ----------------------------------------------------------------------------
    def _loss_name(self):
        return self._loss

    def _fitted_state(self):
        if hasattr(self, "w_") and getattr(self, "solver_", None) == self.solver:
            return FMState(float(self.w0_), self.w_.copy(), self.V_.copy())
        return None

    def _average_epochs(self):  # SGD: "auto" averages the models of the last tenth of epochs
        return -(-self.n_iter // 10) if self.average_epochs == "auto" else self.average_epochs

    def _init_stdev(self, squares):
        """The initial factors' standard deviation; ``squares`` = :func:`square_stats` of the
        training rows (used by ``init_stdev="auto"``)."""
        if self.init_stdev != "auto":
            return float(self.init_stdev)
        # SGD: from the settings, not X (fit equals partial_fit on batches)
        return sgd_init_stdev(self.learning_rate) if self.solver == "sgd" else auto_init_stdev(
            *squares)

    def _prepare_state(self, n_features, dtype, rs, squares=(0.0, 0)):
        state = self._fitted_state() if self.warm_start else None
        if state is not None and state.V.shape == (n_features, self.n_factors):
            return FMState(state.w0, state.w.astype(dtype), state.V.astype(dtype))
        return init_state(n_features, self.n_factors, self._init_stdev(squares), rs, dtype,
                          random_linear=self.solver == "mcmc")

    def _check_groups(self, n_features):
        """``(group, group_size)`` from ``groups`` (or None), with the penalties checked
        against the number of groups; raises ValueError naming the problem."""
        groups = check_groups(self.groups, n_features)
        n_groups = 1 if groups is None else groups[1].shape[0]
        for name in ("reg_linear", "reg_pairwise"):
            value = getattr(self, name)
            if np.ndim(value) == 0:
                continue
            arr = np.asarray(value, dtype=np.float64)
            if self.solver != "als":
                raise ValueError(f"{name} with one value per group is used by solver='als' "
                                 f"only (MCMC learns the per-group priors; SGD takes one "
                                 f"value); got {arr.shape[0]} values with "
                                 f"solver={self.solver!r}")
            if arr.shape != (n_groups,):
                raise ValueError(f"{name} must be a number or hold one value per group "
                                 f"({n_groups}), got shape {arr.shape}")
            if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise ValueError(f"{name} must hold finite non-negative values")
        if groups is not None and self.solver == "sgd":
            raise ValueError("groups set the priors of solver='mcmc' and the penalties of "
                             "solver='als'; solver='sgd' has no per-group settings")
        return groups

    def _encoded_eval_set(self, eval_set):
        ev = self._validate_eval_set(eval_set)
        if ev is None:
            return None
        return raw(to_csr(ev[0], self.dtype_)), ev[1]

    # -- fit --------------------------------------------------------------------------------
    def _fit(self, X, y, sample_weight, eval_set, classes=None, callback=None):
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
        X, y, sw = self._validate_train(X, y, sample_weight, reset=True, **(
            {"classes": classes} if is_classifier(self) else {}))
        groups = self._check_groups(X.shape[1])
        self.dtype_ = np.dtype(X.dtype).name
        X = to_csr(X, X.dtype)
        squares = square_stats(X.indptr, X.data, sw)
        if self.solver != "sgd" or self.shuffle:
            # An exact rewriting of the weighted loss; makes the fit independent of row order.
            X, y, sw = merge_duplicate_rows(X, y, sw, group_by_first=self.solver != "sgd")
        self._update_clip_range(y, extend=self.warm_start)
        evald = self._encoded_eval_set(eval_set)
        rs = check_random_state(self.random_state)
        seed = int(rs.randint(np.iinfo(np.int32).max))  # keys the solvers' per-step streams
        state = self._prepare_state(X.shape[1], X.dtype, rs, squares)
        history = {"metric": "error_rate" if is_classifier(self) else "rmse",
                   "train": [], "val": [], "iter_time": []}
        if self.solver != "sgd":
            history.update(train_avg=[], val_avg=[])
        bar = progress(self.verbose, self.n_iter, f"{type(self).__name__}[{self.solver}]")
        self._callback = callback
        try:
            with bar, n_threads(self.n_jobs):
                if self.solver == "sgd":
                    self._run_sgd(X, y, sw, state, seed, evald, history, bar)
                elif self.solver == "als":
                    self._run_als(X, y, sw, state, groups, evald, history, bar)
                else:
                    self._run_mcmc(X, y, sw, state, groups, seed, evald, history, bar)
        finally:
            del self._callback
        self.history_ = history
        self.solver_ = self.solver
        return self

    def _metric(self, pred, y, sw=None):
        # The per-sweep metrics of ALS and MCMC: the base class's figures in fewer passes over
        # the arrays, and without BLAS (whose threads made np.dot take milliseconds per call
        # on a busy machine).
        if self._loss != "squared":
            return super()._metric(pred, y, sw)
        lo, hi = self._clip_range()
        r = np.clip(pred, lo, hi)
        r -= y
        if sw is None:
            return float(np.sqrt(np.einsum("i,i->", r, r) / r.shape[0]))
        return float(np.sqrt(np.einsum("i,i,i->", sw, r, r) / np.sum(sw)))

    def _store(self, state):
        self.w0_ = float(state.w0)
        self.w_ = state.w
        self.V_ = state.V

    def _raise_diverged(self, info):
        raise DivergenceError(info["diverged"] + "; the estimator keeps its previous state")

    def _run_sgd(self, X, y, sw, state, seed, evald, history, bar):
        lo, hi = self._clip_range()
        settings = SGDSettings(self.n_iter, LOSS_CODES[self._loss], self.learning_rate,
                               self.lr_schedule, self.power_t, self.reg_bias, self.reg_linear,
                               self.reg_pairwise, self.shuffle, self.implicit_sgd, lo, hi,
                               self._average_epochs())
        csr = raw(X)
        t = int(getattr(self, "t_", 0)) if self.warm_start and hasattr(self, "t_") else 0
        track = bool(self.verbose) or evald is not None or self._callback is not None

        def callback(epoch):
            train = None
            if track:
                train = np.empty(csr[0].shape[0] - 1)
                fm_predict_csr(*csr, state.w0, state.w, state.V, train)
            self._record(history, bar, train, y, sw, self._eval_pred(evald, state), evald)
            return False

        self._clock = time.perf_counter()
        state, t, n_done, info = sgd_solver(csr, y, sw, state, t, settings, seed, callback,
                                            self._start_clock)
        if info["diverged"]:
            self._raise_diverged(info)
        self.t_ = t
        self.n_iter_ = n_done
        self._store(state)

    def _als_settings(self, groups):
        loss = self._loss
        return ALSSettings(self.n_iter, loss, LOSS_CODES[loss], self.reg_bias, self.reg_linear,
                           self.reg_pairwise, groups)

    def _run_als(self, X, y, sw, state, groups, evald, history, bar):
        settings = self._als_settings(groups)
        data = column_data(X, y, sw)
        callback = self._tracker(y, sw, evald, history, bar, probit=False)
        self._live = state
        self._clock = time.perf_counter()
        state, n_done, info = als_solver(data, state, settings, callback, self._start_clock)
        if info["diverged"]:
            self._raise_diverged(info)
        self.n_iter_ = n_done
        self._store(state)

    def _run_mcmc(self, X, y, sw, state, groups, seed, evald, history, bar):
        probit = is_classifier(self)
        chain, settings = self._mcmc_setup(X, state, groups)
        data = column_data(X, y, sw)
        callback = self._tracker(y, sw, evald, history, bar, probit)
        self._live = state
        self._clock = time.perf_counter()
        state, n_done, info = mcmc_solver(data, state, chain, settings, seed, callback,
                                          self._start_clock)
        if info["diverged"]:
            self._raise_diverged(info)
        self._store_mcmc(state, chain, n_done)

    # -- partial_fit (SGD) ------------------------------------------------------------------
    def _partial_fit(self, X, y, sample_weight, classes=None):
        first = not hasattr(self, "w_")
        kw = {"classes": classes} if is_classifier(self) else {}
        X, y, sw = self._validate_train(X, y, sample_weight, reset=first, **kw)
        if first:
            self.dtype_ = np.dtype(X.dtype).name
            self.t_ = 0
        X = to_csr(X, self.dtype_)
        self._update_clip_range(y, extend=not first)
        rs = check_random_state(self.random_state)
        seed = int(rs.randint(np.iinfo(np.int32).max))
        if first:
            state = init_state(X.shape[1], self.n_factors, self._init_stdev(None), rs, X.dtype)
        else:
            state = FMState(float(self.w0_), self.w_.copy(), self.V_.copy())
        lo, hi = self._clip_range()
        settings = SGDSettings(1, LOSS_CODES[self._loss], self.learning_rate, self.lr_schedule,
                               self.power_t, self.reg_bias, self.reg_linear, self.reg_pairwise,
                               False, self.implicit_sgd, lo, hi)
        with n_threads(self.n_jobs):
            state, t, _, info = sgd_solver(raw(X), y, sw, state, self.t_, settings, seed)
        if info["diverged"]:
            self._raise_diverged(info)
        self.t_ = t
        self.n_iter_ = getattr(self, "n_iter_", 0) + 1
        self.solver_ = "sgd"
        self._store(state)
        return self

    # -- prediction -------------------------------------------------------------------------
    def _raw_predict(self, X):
        indptr, indices, data = raw(to_csr(X, self._model_dtype()))
        out = np.empty(indptr.shape[0] - 1)
        with n_threads(self.n_jobs):
            if hasattr(self, "samples_V_") and getattr(self, "solver_", None) == "mcmc":
                probit = is_classifier(self)
                fm_predict_samples_csr(indptr, indices, data, self.samples_w0_, self.samples_w_,
                                       self.samples_V_, probit, self._clip_range(),
                                       numba.get_num_threads(), out)
                if probit:  # back to the margin scale: Phi(decision) = mean_s Phi(f_s)
                    out = ndtri(np.clip(out, 1e-300, 1.0 - 1e-16))
            else:
                fm_predict_csr(indptr, indices, data, self.w0_, self.w_, self.V_, out)
        lo, hi = self._clip_range()
        return np.clip(out, lo, hi)

    def _check_loaded_state(self):
        d = int(self.n_features_in_)
        k = self.n_factors
        if self.w_.shape != (d,) or self.V_.shape != (d, k):
            raise ValueError(f"w_ {self.w_.shape} / V_ {self.V_.shape} do not match "
                             f"n_features_in_={d}, n_factors={k}")
        for name in ("w_", "V_"):
            if getattr(self, name).dtype != np.dtype(self.dtype_):
                raise ValueError(f"{name} has dtype {getattr(self, name).dtype}, "
                                 f"expected {self.dtype_}")
        groups = check_groups(self.groups, d)
        if self.solver_ == "mcmc":
            self._check_loaded_chain(d, k, 1 if groups is None else groups[1].shape[0])
        if not (np.isfinite(self.w0_) and np.all(np.isfinite(self.w_))
                and np.all(np.isfinite(self.V_))):
            raise ValueError("model parameters contain NaN or infinity")
        if is_classifier(self):
            if np.shape(self.classes_) != (2,):
                raise ValueError(f"classes_ must hold two labels, not {np.shape(self.classes_)}")
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
        (0.1 on one-hot data); for SGD ``min(0.1, sqrt(learning_rate / 2))``, the spread of
        constant-step SGD's own iterates (0.05 at libFM's step 0.005; MovieLens-100K test RMSE
        -0.002 against 0.1, benchmarks/RESULTS.md), from the settings only so that ``fit``
        equals ``partial_fit`` on batches.
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
    history_ : dict
        Per-iteration ``"iter_time"`` (solver seconds, evaluation and the compilation of the
        kernels excluded: they are compiled, or loaded from numba's cache, before the first
        iteration's clock starts); with ``verbose``, ``eval_set`` or a fit ``callback`` also
        the ``"train"`` metric (RMSE), with ``eval_set`` the ``"val"`` metric, and for MCMC
        and ALS ``"train_avg"`` and ``"val_avg"``, the RMSE of the running average of the
        predictions of all iterations (libFM's report).
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
                 clip_predictions=True, warm_start=False, random_state=None, n_jobs=None,
                 verbose=0):
        super().__init__(n_factors, solver=solver, n_iter=n_iter, init_stdev=init_stdev,
                         reg_bias=reg_bias, reg_linear=reg_linear, reg_pairwise=reg_pairwise,
                         learning_rate=learning_rate, lr_schedule=lr_schedule, power_t=power_t,
                         shuffle=shuffle, implicit_sgd=implicit_sgd,
                         average_epochs=average_epochs, n_burn_in=n_burn_in,
                         n_kept_samples=n_kept_samples, overrelaxation=overrelaxation,
                         groups=groups,
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
            Held-out data whose RMSE is recorded in ``history_`` after each iteration.
        contrasts : sparse matrix of shape (n_targets, n_samples), optional
            Fit y_g = sum_i C[g, i] f(x_i) (``y`` and ``sample_weight`` then have n_targets
            entries), with any solver; see :meth:`predict_contrasts` and docs/vtec.md.
        callback : callable, optional
            ``callback(i, history)`` is called as iteration ``i`` (from 0) ends, with the
            history so far (the keys of ``history_``, ``"train"`` always recorded): for live
            progress reports. Its return value is ignored.
        """
        if contrasts is not None:
            return self._fit_contrasts(X, y, sample_weight, eval_set, contrasts, callback)
        self._forget_contrasts()
        return self._fit(X, y, sample_weight, eval_set, callback=callback)

    @available_if(_solver_is_sgd)
    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, sample_weight=None):
        """One SGD epoch over the given rows, in the given order (solver="sgd" only)."""
        self._rows_after_contrasts()
        return self._partial_fit(X, y, sample_weight)


class FMClassifier(FMClassifierMixin, _BaseClassicFM):
    """Factorization machine binary classifier (Rendle 2010) with SGD, ALS or MCMC.

    Any two labels are accepted; ``decision_function`` is the FM score of ``classes_[1]``.
    SGD and ALS minimise the logistic loss (ALS by majorization steps that never increase it);
    MCMC samples the probit model of libFM, and ``predict_proba`` is the posterior mean of
    Phi(f(x)) over the kept samples.

    Parameters
    ----------
    Same as :class:`FMRegressor` without ``clip_predictions``.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    w0_, w_, V_, samples_w0_, samples_w_, samples_V_, n_iter_, history_ :
        As in :class:`FMRegressor`; the metric in ``history_`` is the error rate.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import FMClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 4)); y = np.where(X[:, 0] * X[:, 1] > 0, "yes", "no")
    >>> clf = FMClassifier(n_factors=2, n_iter=100, random_state=0).fit(X, y)
    >>> bool((clf.predict(X) == y).mean() > 0.9)
    True
    """

    _loss = "logistic"

    @property
    def _link(self):
        return "probit" if self.solver == "mcmc" else "logistic"

    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, eval_set=None, callback=None):
        """Fit the model (see :meth:`FMRegressor.fit`); ``y`` holds any two labels."""
        return self._fit(X, y, sample_weight, eval_set, callback=callback)

    @available_if(_solver_is_sgd)
    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One SGD epoch over the given rows (solver="sgd" only).

        ``classes`` (both labels) is needed on the first call unless ``y`` holds both.
        """
        return self._partial_fit(X, y, sample_weight, classes=classes)
