"""Ordered probit factorization machine (:class:`FMOrdinalRegressor`), sampled by MCMC.

Why an estimator of its own rather than a ``loss=`` of :class:`fmlearn.FMClassifier`: an
ordinal model is judged on numbers (the RMSE of the expected rating, as in myFM's ordered
probit), so it is a scikit-learn regressor (``predict`` the posterior expected label,
``score`` R^2) that also gives the class probabilities (``predict_proba``); its labels must be
ordered integers, and it has one solver (MCMC) and no logistic loss, so the classifier's
parameters (``solver``, the SGD settings) would mean nothing for it. The sampler lives in
:mod:`fmlearn.solvers.ordinal`.
"""

import numbers
import time

import numpy as np
from sklearn.base import RegressorMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from .._base import BaseFM, check_sample_weight, failure_atomic
from .._data import merge_duplicate_rows, raw, to_csr
from .._docs import fill_doc
from .._early_stopping import split_rhat
from .._plan import check_callback, square_stats
from .._threads import n_threads
from ..exceptions import DivergenceError
from ..kernels.predict import fm_predict_csr
from ..solvers._fm_common import (
    FMState,
    auto_init_stdev,
    check_groups,
    column_data,
    init_state,
)
from ..solvers.mcmc import Chain
from ..solvers.ordinal import (
    W0_PRECISION,
    CutPoints,
    initial_cut_points,
    level_proba,
    ordinal_proba,
    ordinal_solver,
)
from ._mcmc import chain_attributes, check_loaded_chain, fitted_chain, mcmc_settings

__all__ = ["FMOrdinalRegressor"]

#: Over-relaxation of the sweep's Gaussian draws of w and V once the chain has settled (as
#: :class:`FMRegressor`'s ``overrelaxation``): 0, Gibbs draws. On a validation split of
#: MovieLens-100K's training rows (60,000 / 15,000 of splits 0 and 1, 200 sweeps) -0.9, the
#: regressor's choice, predicted worse: RMSE 0.9294 / 0.9266 against 0.9169 / 0.9241.
ORDINAL_OVERRELAXATION = 0.0
#: ``n_burn_in=None`` discards the first ``n_iter // BURN_IN_SHARE`` sweeps. On the same
#: validation split (200 sweeps) discarding 50 or 100 sweeps predicted better than the
#: regressor's default 10: RMSE 0.9145 / 0.9213 (50) and 0.9142 / 0.9220 (100) against
#: 0.9169 / 0.9241 (10); the factors need tens of sweeps to grow from their small start.
BURN_IN_SHARE = 4


def ordinal_levels(y):
    """The sorted distinct labels of ``y`` (float64) and each row's class index, or a
    ``ValueError`` naming the problem: labels that are not integers, one level only, or a gap
    (an integer between the smallest and largest label that no row has)."""
    y = np.asarray(y, dtype=np.float64)
    if not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
        bad = y[~(np.isfinite(y) & (y == np.round(y)))][:3]
        raise ValueError(f"FMOrdinalRegressor needs integer ordinal labels (such as ratings "
                         f"1..5); y holds {bad.tolist()}")
    levels, index = np.unique(y, return_inverse=True)
    if levels.shape[0] < 2:
        raise ValueError(f"FMOrdinalRegressor needs labels of two levels or more; y has only "
                         f"one class (level {levels[0]:g})")
    if np.any(np.diff(levels) != 1):
        missing = np.setdiff1d(np.arange(levels[0], levels[-1] + 1), levels)
        raise ValueError(
            f"ordinal labels with a gap: no row has the level(s) {missing[:10].tolist()} "
            f"between {levels[0]:g} and {levels[-1]:g}. The levels must be consecutive "
            "integers; if the missing ones are not categories, re-code y (for example "
            "np.unique(y, return_inverse=True)[1])")
    return levels, index.astype(np.int64)


class FMOrdinalRegressor(RegressorMixin, BaseFM):
    """Ordered probit factorization machine for ordinal labels (ratings), sampled by MCMC.

    The FM score f(x) (Rendle 2010) is the mean of a latent z ~ N(f(x), 1), and the label is
    the level whose interval of cut-points holds z (Albert & Chib 1993; myFM's ordered
    probit): P(y = level c | x) = Phi(t_c - f(x)) - Phi(t_{c-1} - f(x)). The Gibbs sampler
    of :class:`FMRegressor` (libFM's priors and hyper-priors) draws w and V given z; the
    cut-points are drawn given f with z integrated out, by a Metropolis-Hastings step around
    their Newton step (Cowles 1996); see :mod:`fmlearn.solvers.ordinal`. The bias w0 is held
    at 0: the cut-points carry the offset.

    Labels must be consecutive integers (such as 1..5); ``predict`` returns the posterior
    expected label, sum_c P(c | x) * level_c (what minimises the squared error),
    ``predict_proba`` the probabilities of the levels ``levels_``, averaged over the kept
    samples.

    Parameters
    ----------
    n_factors : int, default=8
    n_iter : int, default=100
        Gibbs sweeps.
    init_stdev : float or "auto", default="auto"
        Standard deviation of the initial factors ("auto": 0.1 over the root mean square of
        the non-zero feature values, as :class:`FMRegressor`).
    n_burn_in : int or None, default=None
        Sweeps discarded before samples are kept (None: ``n_iter // 4``, 50 of 200 sweeps:
        on a validation split of MovieLens-100K's training rows it predicted better than
        :class:`FMRegressor`'s 10, RMSE -0.002 to -0.003).
    n_kept_samples : int or None, default=None
        At most this many evenly spaced samples are kept for prediction (None: every sample
        after burn-in within 256 MB), as in :class:`FMRegressor`.
    groups : array-like of int or None, default=None
        Feature groups with their own priors, as in :class:`FMRegressor`.
    warm_start : bool, default=False
        Continue the fitted chain (sample, hyper-parameters, cut-points, kept samples) on the
        next ``fit`` when the data have the same features and levels: with the same
        ``n_burn_in``, 50 + 50 sweeps equal 100.
    random_state : int, RandomState or None, default=None
    n_jobs : int or None, default=None
        Threads for the compiled sweep (results do not depend on it).
    verbose : int, default=0
        Unused (accepted for symmetry with the other estimators).

    Attributes
    ----------
    levels_ : ndarray of shape (n_levels,)
        The ordered labels (float64).
    cut_points_ : ndarray of shape (n_levels - 1,)
        The last sample's cut-points t_0 < ... < t_{K-2}.
    samples_cut_points_ : ndarray of shape (S, n_levels - 1)
        The kept samples' cut-points.
    w0_, w_, V_, samples_w0_, samples_w_, samples_V_, chain_, n_iter_, init_stdev_ :
        As in :class:`FMRegressor` (``w0_`` is 0).
    cut_point_acceptance_ : float
        Share of the cut-points' Metropolis-Hastings proposals accepted during the fit.
    history_ : dict
        ``"iter_time"``: seconds of every sweep; with an ``eval_set`` or a ``callback`` of
        :meth:`fit` also ``"train"`` (the RMSE of the sweep's sample's expected label on the
        training rows; ``"metric"`` is ``"rmse"``), and with an ``eval_set`` ``"val"`` (the
        same on the validation rows), ``"val_avg"`` (the RMSE of the running average of the
        class probabilities over all sweeps so far, libFM's report) and ``"val_rhat"`` /
        ``"val_rhat_median"``: the largest and the median over the validation rows of the
        split R-hat of the expected label after burn-in (Gelman et al. 2013; values near 1
        say the chain has settled; NaN with fewer than 4 kept sweeps). MCMC has no early
        stop: a callback may end the chain.
    n_features_in_ : int

    References
    ----------
    J. H. Albert, S. Chib. Bayesian analysis of binary and polychotomous response data.
    JASA 88(422), 1993.
    M. K. Cowles. Accelerating Monte Carlo Markov chain convergence for cumulative-link
    generalized linear models. Statistics and Computing 6, 1996.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import FMOrdinalRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 4))
    >>> y = np.digitize(X[:, 0] + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=400),
    ...                 [-1.0, 0.0, 1.0]) + 1          # levels 1..4
    >>> m = FMOrdinalRegressor(n_factors=2, n_iter=100, random_state=0).fit(X, y)
    >>> m.levels_
    array([1., 2., 3., 4.])
    >>> p = m.predict_proba(X[:3]); p.shape, bool(np.allclose(p.sum(axis=1), 1))
    ((3, 4), True)
    >>> bool(np.sqrt(np.mean((m.predict(X) - y) ** 2)) < 0.6)
    True
    """

    _parameter_constraints = {
        "n_factors": [Interval(numbers.Integral, 0, None, closed="left")],
        "n_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "init_stdev": [Interval(numbers.Real, 0, None, closed="left"), StrOptions({"auto"})],
        "n_burn_in": [Interval(numbers.Integral, 0, None, closed="left"), None],
        "n_kept_samples": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "groups": ["array-like", None],
        "warm_start": ["boolean"],
        "random_state": ["random_state"],
        "n_jobs": [Interval(numbers.Integral, -1, None, closed="left"), None],
        "verbose": ["verbose"],
    }

    def __init__(self, n_factors=8, *, n_iter=100, init_stdev="auto", n_burn_in=None,
                 n_kept_samples=None, groups=None, warm_start=False, random_state=None,
                 n_jobs=None, verbose=0):
        self.n_factors = n_factors
        self.n_iter = n_iter
        self.init_stdev = init_stdev
        self.n_burn_in = n_burn_in
        self.n_kept_samples = n_kept_samples
        self.groups = groups
        self.warm_start = warm_start
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    @fill_doc
    @failure_atomic
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None, eval_set=None, callback=None):
        """Fit the model by ``n_iter`` Gibbs sweeps.

        Parameters
        ----------
        %(fit_data)s
        eval_set : (X_val, y_val), optional
            Held-out rows scored after every sweep (``history_``: the RMSE of the expected
            label, its running average and the chain's split R-hat). Labels outside the
            training levels are allowed (they only enter the RMSE).
        callback : callable, optional
            ``callback(i, history)`` after sweep ``i`` (from 0); returning True ends the
            chain there (``n_iter_`` says how many sweeps ran).
        """
        callback = check_callback(callback)
        X, y = self._validate_X_y(X, y, reset=True, y_numeric=True)
        levels, yi = ordinal_levels(y)
        sw = check_sample_weight(sample_weight, X.shape[0])
        ev = self._validate_eval_set(eval_set)
        X = to_csr(X, X.dtype)
        d, k, dtype = X.shape[1], self.n_factors, X.dtype
        groups = check_groups(self.groups, d)
        n_groups = 1 if groups is None else groups[1].shape[0]
        if self.init_stdev == "auto":
            indptr, _, data = raw(X)
            init_stdev = auto_init_stdev(*square_stats(indptr, data, sw))
        else:
            init_stdev = float(self.init_stdev)
        X, yi_f, sw = merge_duplicate_rows(X, yi.astype(np.float64), sw)
        yi = yi_f.astype(np.int64)
        present = np.bincount(yi, sw, minlength=levels.shape[0]) > 0
        if not present.all():  # only rows of zero weight had these levels
            raise ValueError(f"the level(s) {levels[~present].tolist()} have rows of zero "
                             "weight only: every level needs a positive weight")
        rs = check_random_state(self.random_state)
        seed = int(rs.randint(np.iinfo(np.int32).max))
        state = init_state(d, k, init_stdev, rs, dtype, random_linear=True)
        burn = self.n_burn_in if self.n_burn_in is not None else self.n_iter // BURN_IN_SHARE
        p = {"n_iter": self.n_iter, "n_burn_in": burn,
             "n_kept_samples": self.n_kept_samples, "n_factors": k,
             "overrelaxation": ORDINAL_OVERRELAXATION,
             "reg_bias": W0_PRECISION}
        settings = mcmc_settings(p, True, d, dtype, groups)
        warm = self._continues(levels, d, k, n_groups, dtype)
        if warm:  # the fitted chain, as one long run
            init_stdev = self.init_stdev_
            state = FMState(0.0, self.w_.copy(), self.V_.copy())
            chain = fitted_chain(self)
            chain.samples = tuple(a.copy() for a in chain.samples)
            cuts = CutPoints(self.cut_points_.copy(), samples=self.samples_cut_points_.copy())
        else:
            chain = Chain.start(k, n_groups)
            cuts = CutPoints(initial_cut_points(yi, sw, levels.shape[0]))
        data = column_data(X, yi_f, sw)
        recorder = _SweepHistory(levels, levels[yi], sw, ev, dtype, state, cuts, chain,
                                 burn, callback)
        with n_threads(self.n_jobs):
            state, n_done, info = ordinal_solver(data, state, chain, cuts, settings, seed,
                                                 recorder)
        if info["diverged"]:
            raise DivergenceError(info["diverged"] + "; the estimator keeps its previous state")
        self._store(levels, dtype, n_done, init_stdev, state, chain, cuts)
        self.history_ = recorder.finish()
        return self

    def _store(self, levels, dtype, n_done, init_stdev, state, chain, cuts):
        """Write a finished run's learned attributes (the last step of ``fit``)."""
        self.levels_ = levels
        self.dtype_ = np.dtype(dtype).name
        self.n_iter_ = n_done
        self.init_stdev_ = float(init_stdev)
        self.w0_ = 0.0
        self.w_ = state.w
        self.V_ = state.V
        for name, value in chain_attributes(chain, state).items():
            setattr(self, name, value)
        S = self.samples_w0_.shape[0]
        self.samples_cut_points_ = (cuts.samples[:S].copy() if chain.n_samples
                                    else cuts.value[None].copy())
        self.cut_points_ = cuts.value.copy()
        self.cut_point_acceptance_ = cuts.n_accepted / max(cuts.n_proposed, 1)

    def _continues(self, levels, d, k, n_groups, dtype):
        """Whether this fit continues the fitted chain (``warm_start`` on a model of the same
        features, levels, factors, groups and dtype)."""
        return bool(self.warm_start and hasattr(self, "chain_")
                    and np.array_equal(getattr(self, "levels_", ()), levels)
                    and self.V_.shape == (d, k) and self.V_.dtype == dtype
                    and np.shape(self.chain_["lambda_w"]) == (n_groups,))

    def _raw_predict(self, X):
        indptr, indices, data = raw(to_csr(X, self._model_dtype()))
        with n_threads(self.n_jobs):
            return ordinal_proba(indptr, indices, data,
                                 (self.samples_w0_, self.samples_w_, self.samples_V_),
                                 self.samples_cut_points_)

    def predict_proba(self, X):
        """Posterior probabilities of the levels, shape (n_samples, n_levels), columns ordered
        as ``levels_``; each row sums to 1."""
        return self._scores(X)

    def predict(self, X):
        """The posterior expected label sum_c P(level c | x) * level_c, shape (n_samples,)."""
        return self.predict_proba(X) @ self.levels_

    def _check_loaded_state(self):
        d = int(self.n_features_in_)
        k = self.n_factors
        groups = check_groups(self.groups, d)
        n_groups = 1 if groups is None else groups[1].shape[0]
        levels = np.asarray(self.levels_)
        if (levels.ndim != 1 or levels.shape[0] < 2 or levels.dtype.kind != "f"
                or np.any(np.diff(levels) != 1)):
            raise ValueError("levels_ must hold two or more consecutive integers")
        if self.w_.shape != (d,) or self.V_.shape != (d, k):
            raise ValueError(f"w_ {self.w_.shape} / V_ {self.V_.shape} do not match "
                             f"n_features_in_={d}, n_factors={k}")
        for name in ("w_", "V_", "samples_w_", "samples_V_"):
            if getattr(self, name).dtype != np.dtype(self.dtype_):
                raise ValueError(f"{name} has dtype {getattr(self, name).dtype}, "
                                 f"expected {self.dtype_}")
        check_loaded_chain(self, d, k, n_groups)
        S = self.samples_w0_.shape[0]
        K1 = levels.shape[0] - 1
        cuts = np.asarray(self.samples_cut_points_)
        if (cuts.shape != (S, K1) or np.shape(self.cut_points_) != (K1,)
                or np.any(np.diff(cuts, axis=1) <= 0)
                or np.any(np.diff(self.cut_points_) <= 0)):
            raise ValueError(f"cut-points must be {K1} increasing values per kept sample "
                             f"({S} samples)")
        if not (np.all(np.isfinite(self.w_)) and np.all(np.isfinite(self.V_))
                and np.all(np.isfinite(cuts))):
            raise ValueError("model parameters contain NaN or infinity")


class _SweepHistory:
    """``history_`` of one :meth:`FMOrdinalRegressor.fit` and its user callback: the solver's
    ``callback(it, f)`` (``f`` the training rows' scores of the sweep's sample); the metrics
    are computed only with an eval set or a user callback."""

    def __init__(self, levels, y, sw, ev, dtype, state, cuts, chain, burn, callback):
        self.levels, self.y, self.sw = levels, y, sw
        self.state, self.cuts, self.chain, self.burn = state, cuts, chain, burn
        self.callback = callback
        self.val = None
        self.history = {"metric": "rmse", "iter_time": []}
        if ev is not None or callback is not None:
            self.history["train"] = []
        if ev is not None:
            X_val, y_val = ev
            self.val = (to_csr(X_val, dtype), y_val)
            self.val_sum = np.zeros((y_val.shape[0], levels.shape[0]))
            self.chain_expected = []
            self.history.update(val=[], val_avg=[])
        self.clock = time.perf_counter()

    def _rmse(self, proba, y, sw=None):
        return float(np.sqrt(np.average((proba @ self.levels - y) ** 2, weights=sw)))

    def __call__(self, it, f):
        h = self.history
        h["iter_time"].append(time.perf_counter() - self.clock)
        if "train" in h:
            h["train"].append(self._rmse(level_proba(f, self.cuts.value), self.y, self.sw))
        if self.val is not None:
            X_val, y_val = self.val
            f_val = np.empty(X_val.shape[0])
            fm_predict_csr(X_val.indptr, X_val.indices, X_val.data, 0.0, self.state.w,
                           self.state.V, f_val)
            p = level_proba(f_val, self.cuts.value)
            self.val_sum += p
            h["val"].append(self._rmse(p, y_val))
            h["val_avg"].append(self._rmse(self.val_sum / self.val_sum.sum(axis=1,
                                                                           keepdims=True), y_val))
            if self.chain.t > self.burn:
                self.chain_expected.append(p @ self.levels)
        stop = self.callback is not None and bool(self.callback(it, h))
        self.clock = time.perf_counter()
        return stop

    def finish(self):
        if self.val is not None:
            rows = (split_rhat(np.array(self.chain_expected)) if self.chain_expected
                    else np.array([np.nan]))
            some = len(rows) and not np.isnan(rows).all()
            self.history["val_rhat"] = float(np.nanmax(rows)) if some else float("nan")
            self.history["val_rhat_median"] = float(np.nanmedian(rows)) if some else float("nan")
        return self.history
