"""The classic FM's fit plan (:class:`ClassicFMPlan`): the one hand-off from the estimators
(:class:`fmlearn.FMRegressor`, :class:`fmlearn.FMClassifier`) to the SGD, ALS and MCMC
solvers.

Every entry point builds it the same way -- ``fit``, ``partial_fit``, ``fit(contrasts=C)``
(:mod:`fmlearn.fm._contrasts`), :func:`fmlearn.stream.fit_stream` through ``partial_fit``, and
the Dask backend (:func:`fmlearn.distributed.fit`) -- with :meth:`ClassicFMPlan.build` from
the estimator's parameters, a :class:`~fmlearn._plan.DataSummary` of the training rows and the
fitted state a warm start continues; and writes the result back with
:meth:`ClassicFMPlan.commit`. The plan resolves everything "auto" (``init_stdev``,
``average_epochs``, the MCMC burn-in, kept samples and over-relaxation), checks the feature
groups against the penalties, builds :class:`~fmlearn.solvers.sgd.SGDSettings`,
:class:`~fmlearn.solvers.als.ALSSettings` and :class:`~fmlearn.solvers.mcmc.MCMCSettings`
(each here only, by keyword), draws the random seed and the initial state, and picks the MCMC
chain to continue. It imports no estimator module.
"""

from dataclasses import dataclass

import numpy as np
from sklearn.base import is_classifier
from sklearn.utils import check_random_state

from .._early_stopping import rule_of_params
from .._plan import FitPlan
from ..exceptions import DivergenceError
from ..kernels.losses import LOSS_CODES
from ..solvers._fm_common import FMState, auto_init_stdev, check_groups, init_state
from ..solvers.als import ALSSettings
from ..solvers.mcmc import Chain, MCMCSettings
from ._mcmc import chain_attributes, chain_for_warm_start, mcmc_settings

__all__ = ["CONTRAST_ATTRIBUTES", "MODES", "ClassicFMPlan", "stopping_rule"]

#: The entry points a plan is built for: "fit" (in memory or Dask ALS/MCMC), "contrasts"
#: (``fit(..., contrasts=C)``), "partial_fit" (one SGD epoch over the given rows, in order)
#: and "epochs" (the Dask SGD fit: every round one epoch per partition).
MODES = ("fit", "contrasts", "partial_fit", "epochs")

#: Attributes that only a fit on contrasts sets (a fit on rows removes them).
CONTRAST_ATTRIBUTES = ("contrasts_fitted_", "intercept_fitted_")

#: Attributes of the variational posterior (``solver="vb"``; a fit by another solver removes
#: them, a variational fit removes the MCMC chain's).
VB_ATTRIBUTES = ("w_var_", "V_var_", "vb_")
MCMC_ATTRIBUTES = ("samples_w0_", "samples_w_", "samples_V_", "chain_")


@dataclass(frozen=True, kw_only=True, eq=False)
class ClassicFMPlan(FitPlan):
    """Everything a classic-FM fit runs with, resolved once (see the module docstring).

    Attributes
    ----------
    mode : str
        One of :data:`MODES`.
    solver : str
        "sgd", "als", "mcmc" or "vb" (``partial_fit``: "sgd").
    classifier : bool
    loss : str
        "squared" or "logistic" (the classifier's SGD and ALS; MCMC's probit is ``probit``).
    n_iter, n_factors : int
    init_stdev : float
        The resolved ``init_stdev`` (stored as ``init_stdev_``).
    average_epochs : int
        The resolved ``average_epochs`` (SGD's tail average).
    groups : tuple or None
        ``(group, group_size)`` of :func:`fmlearn.solvers._fm_common.check_groups`.
    y_range : list or None
        The targets' range a regressor records (``y_range_``; widened by a warm start).
    clip : (float, float)
        The range predictions are clipped to during the fit (the train metric, SGD's steps).
    sgd, als, mcmc, vb : settings or None
        The solver's settings (only the one of ``solver``).
    state : FMState
        The initial model (a copy of the fitted one for a warm start), updated in place by the
        solver.
    warm : bool
        Whether ``state`` continues the fitted model.
    chain : Chain or None
        MCMC: the chain to continue (warm start) or a new one.
    posterior : VBPosterior or None
        VB: the variational factors besides the means (a copy of the fitted ones for a warm
        start), updated in place by the solver.
    t : int
        SGD: the steps taken so far (the step size schedule's clock).
    n_jobs : int or None
    verbose : int
    stopping : StoppingRule or None
        The early-stopping rule of a ``fit`` (:func:`stopping_rule`); None for the other
        modes and for the Dask backend, which runs every iteration.
    """

    mode: str
    solver: str
    classifier: bool
    loss: str
    n_iter: int
    n_factors: int
    init_stdev: float
    average_epochs: int
    groups: object
    y_range: object
    clip: tuple
    state: FMState
    warm: bool
    # the SGD and VB solvers (and their kernels) are imported by the fits that use them
    sgd: "SGDSettings" = None  # noqa: F821
    als: ALSSettings = None
    mcmc: MCMCSettings = None
    vb: "VBSettings" = None  # noqa: F821
    chain: Chain = None
    posterior: "VBPosterior" = None  # noqa: F821
    t: int = 0
    n_jobs: object = None
    verbose: int = 0
    stopping: object = None

    @property
    def probit(self):
        """The probit classifier of MCMC and VB (the other classifiers minimise the logistic
        loss)."""
        return self.classifier and self.solver in ("mcmc", "vb")

    @property
    def n_groups(self):
        return 1 if self.groups is None else self.groups[1].shape[0]

    @property
    def metric(self):
        """The name of the metric in ``history_``."""
        return "error_rate" if self.classifier else "rmse"

    # -- building ----------------------------------------------------------------------------
    @classmethod
    def build(cls, est, summary, *, mode="fit", context=None, stopping=None):
        """The plan of a call of ``mode`` (:data:`MODES`) on data summarised by ``summary``.

        Reads ``est.get_params()`` and, for a warm start or a further ``partial_fit``, the
        fitted attributes (``w0_``, ``w_``, ``V_``, ``t_``, ``chain_``, the kept samples,
        ``y_range_``). Raises ``ValueError`` on groups or per-group penalties that do not fit
        the data. Draws the seed, then the initial state, from ``random_state``.
        ``stopping``: the early-stopping rule (:func:`stopping_rule`, resolved on all the rows
        before the validation rows are carved out).
        """
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        p = est.get_params(deep=False)
        classifier = is_classifier(est)
        loss = "logistic" if classifier else "squared"
        solver = "sgd" if mode == "partial_fit" else p["solver"]
        if solver == "vb" and mode != "fit":
            raise ValueError(f"solver='vb' fits rows in memory; {_VB_MODES[mode]}")
        d, k, dtype = summary.n_features, p["n_factors"], np.dtype(summary.dtype)
        first = mode != "partial_fit" or not hasattr(est, "w_")
        groups = None if mode == "partial_fit" else _groups(p, solver, d)
        y_range = None
        clip = (-np.inf, np.inf)
        if not classifier:
            y_range = summary.y_range
            extend = p["warm_start"] if mode in ("fit", "epochs") else not first
            if mode != "contrasts" and extend and hasattr(est, "y_range_"):
                y_range = [min(y_range[0], est.y_range_[0]), max(y_range[1], est.y_range_[1])]
            if mode != "contrasts" and p.get("clip_predictions", False):
                clip = (y_range[0], y_range[1])
        if p["init_stdev"] != "auto":
            init_stdev = float(p["init_stdev"])
        elif solver == "sgd":  # from the settings, not X (fit equals partial_fit on batches)
            from ..solvers.sgd import sgd_init_stdev

            init_stdev = sgd_init_stdev(p["learning_rate"])
        else:
            spread = 1.0 if classifier else summary.y_std  # a unit of log-odds / probit
            init_stdev = auto_init_stdev(*summary.squares, summary.mean_pairs, k, spread)
        n_iter = p["n_iter"]
        average = p["average_epochs"]
        average = -(-n_iter // 10) if average == "auto" else average  # the last tenth, rounded up
        rs = check_random_state(p["random_state"])
        seed = int(rs.randint(np.iinfo(np.int32).max))  # keys the solvers' per-step streams
        if mode == "partial_fit":
            t = 0 if first else est.t_
            warm = not first
            state = (FMState(float(est.w0_), est.w_.copy(), est.V_.copy()) if warm else
                     init_state(d, k, init_stdev, rs, dtype))
        else:
            t = int(est.t_) if p["warm_start"] and hasattr(est, "t_") else 0
            state = _fitted_state(est, solver) if p["warm_start"] else None
            warm = state is not None and state.V.shape == (d, k)
            if warm:
                state = FMState(state.w0, state.w.astype(dtype), state.V.astype(dtype))
            else:
                state = init_state(d, k, init_stdev, rs, dtype, random_linear=solver == "mcmc")
        kw = {}
        if solver == "sgd":
            from ..solvers.sgd import SGDSettings

            kw["sgd"] = SGDSettings(
                n_iter=n_iter if mode in ("fit", "contrasts") else 1,
                loss_code=LOSS_CODES[loss], learning_rate=p["learning_rate"],
                schedule=p["lr_schedule"], power_t=p["power_t"], reg_bias=p["reg_bias"],
                reg_linear=p["reg_linear"], reg_pairwise=p["reg_pairwise"],
                shuffle=p["shuffle"] and mode != "partial_fit", implicit=p["implicit_sgd"],
                clip_lo=clip[0], clip_hi=clip[1],
                average=average if mode in ("fit", "contrasts") else 1)
        elif solver == "vb":
            from ..solvers.vb import VBSettings

            kw["vb"] = VBSettings(n_iter=n_iter, probit=classifier, reg_bias=p["reg_bias"],
                                  groups=groups)
            kw["posterior"] = _posterior(est, p, state, warm, groups, init_stdev)
        elif solver == "als":
            kw["als"] = ALSSettings(n_iter=n_iter, loss=loss, loss_code=LOSS_CODES[loss],
                                    reg_bias=p["reg_bias"], reg_linear=p["reg_linear"],
                                    reg_pairwise=p["reg_pairwise"], groups=groups)
        else:
            kw["mcmc"] = mcmc_settings(p, classifier, d, dtype, groups)
            n_groups = 1 if groups is None else groups[1].shape[0]
            kw["chain"] = chain_for_warm_start(est, p, state, n_groups)
        extra = {} if context is None else {"context": context}
        return cls(summary=summary, seed=seed, mode=mode, solver=solver, classifier=classifier,
                   loss=loss, n_iter=n_iter, n_factors=k, init_stdev=init_stdev,
                   average_epochs=average, groups=groups, y_range=y_range, clip=clip,
                   state=state, warm=warm, t=t, n_jobs=p["n_jobs"], verbose=p["verbose"],
                   stopping=stopping, **kw, **extra)

    # -- committing ----------------------------------------------------------------------------
    def commit(self, est, state, n_done, *, chain=None, t=None, history=None, posterior=None,
               best_iteration=None):
        """Write a run's result to the estimator: the model (``w0_``, ``w_``, ``V_``), the
        iterations (``n_iter_``; ``partial_fit`` adds one), SGD's step count ``t_``, MCMC's
        kept samples and chain, the data attributes (``dtype_``, a regressor's ``y_range_``),
        ``init_stdev_``, ``solver_`` and ``history_`` (when given), and after an in-memory
        ``fit`` whether early stopping ran (``early_stopping_``) and the iteration whose model
        was kept (``best_iteration_``, from 1, or None). A fit on rows removes what an earlier
        fit on contrasts recorded (:data:`CONTRAST_ATTRIBUTES`)."""
        if self.mode != "contrasts":  # a model of rows: what a fit on contrasts set goes
            for name in CONTRAST_ATTRIBUTES:
                est.__dict__.pop(name, None)
        est.dtype_ = self.summary.dtype
        if self.y_range is not None:
            est.y_range_ = self.y_range
        if t is not None:
            est.t_ = t
        if self.mode == "partial_fit":
            n_done = getattr(est, "n_iter_", 0) + n_done
        est.n_iter_ = n_done
        est.w0_ = float(state.w0)
        est.w_ = state.w
        est.V_ = state.V
        if chain is not None:
            for name, value in chain_attributes(chain, state).items():
                setattr(est, name, value)
        for name in (MCMC_ATTRIBUTES if posterior is not None else VB_ATTRIBUTES):
            est.__dict__.pop(name, None)
        if posterior is not None:
            est.w_var_ = posterior.w_var
            est.V_var_ = posterior.V_var
            est.vb_ = posterior.attributes()
        est.init_stdev_ = self.init_stdev
        if history is not None:
            est.history_ = history
        est.solver_ = self.solver
        if self.stopping is not None:
            est.early_stopping_ = bool(self.stopping.active)
            est.best_iteration_ = best_iteration
        elif self.mode != "partial_fit":
            est.__dict__.pop("early_stopping_", None)
            est.__dict__.pop("best_iteration_", None)


def summary_reads(est):
    """``(squares, spread)``: whether :meth:`ClassicFMPlan.build` reads, for a ``fit`` of
    ``est``, the data summary's square sums (:attr:`DataSummary.squares`,
    :attr:`DataSummary.mean_pairs`) and the targets' spread (:attr:`DataSummary.y_std`)
    beside the counts and the targets' range. Both scale ``init_stdev="auto"`` for ALS,
    MCMC and VB (SGD's comes from its settings), the spread only for a regressor (a
    classifier's is one unit); with ``init_stdev`` given, the fit needs neither, and
    ``fmlearn.fm`` skips the pass over the values and the targets' gather through the fit's
    row index (at 8,000,000 rows 0.042 CPU s, ``benchmarks/bench_setup_ab.py``, and
    0.064-0.071, the gather timed alone in two fits of one process: not side by side)."""
    p = est.get_params(deep=False)
    auto = isinstance(p["init_stdev"], str) and p["solver"] != "sgd"
    return auto, auto and not is_classifier(est)

def stopping_rule(est, n_samples, has_eval_set):
    """The early-stopping rule (:class:`fmlearn._early_stopping.StoppingRule`) of a ``fit`` of
    ``est`` on ``n_samples`` rows: the validation score is the mean squared error (regressor)
    or the mean log loss of the margins (classifier, SGD and ALS's logistic loss), recorded in
    ``history_["val_loss"]``. MCMC has no early stop (``early_stopping=True`` is refused,
    "auto" resolves to off); its ``history_`` reports the split R-hat of the predictions on
    the ``eval_set`` instead."""
    p = est.get_params(deep=False)
    classifier = is_classifier(est)
    if p["solver"] == "mcmc":
        if p["early_stopping"] is True:
            raise ValueError("solver='mcmc' has no early stopping: a Gibbs chain does not "
                             "descend a validation loss; pass an eval_set to get the split "
                             "R-hat of its predictions in history_['val_rhat'] and choose "
                             "n_iter from it (or use solver='als' or 'sgd')")
        p = dict(p, early_stopping=False)
    elif p["solver"] == "vb" and p["early_stopping"] == "auto":
        # VB ascends its bound on every row, as MCMC samples: "auto" is off (True stops on
        # the validation loss of the posterior means, the means of the best sweep kept)
        p = dict(p, early_stopping=False)
    return rule_of_params(p, score="log_loss" if classifier else "squared_error",
                          n_samples=n_samples, has_eval_set=has_eval_set)


# What to use instead of solver="vb" in the entry points it does not run in.
_VB_MODES = {"contrasts": "fit(contrasts=C) runs solver='mcmc' (the same posterior, sampled), "
                          "'als' or 'sgd'",
             "epochs": "the Dask backend runs solver='als', 'mcmc' or 'sgd'",
             "partial_fit": "partial_fit runs solver='sgd'"}


def _posterior(est, p, state, warm, groups, init_stdev):
    """The variational factors a VB fit starts from: a copy of the fitted ones when a warm
    start continues a VB model of the same shape and groups, else variances init_stdev^2."""
    from ..solvers.vb import VBPosterior

    d, k = state.V.shape
    n_groups = 1 if groups is None else groups[1].shape[0]
    vb = getattr(est, "vb_", None)
    if (warm and vb is not None and getattr(est, "solver_", None) == "vb"
            and np.shape(vb["lambda_w"]) == (n_groups,)):
        return VBPosterior.from_attributes(vb, est.w_var_.astype(state.w.dtype),
                                           est.V_var_.astype(state.V.dtype))
    return VBPosterior.start(d, k, n_groups, init_stdev ** 2, state.V.dtype)


def _groups(p, solver, n_features):
    """``(group, group_size)`` from ``groups`` (or None), with the penalties checked against
    the number of groups; raises ValueError naming the problem."""
    groups = check_groups(p["groups"], n_features)
    n_groups = 1 if groups is None else groups[1].shape[0]
    for name in ("reg_linear", "reg_pairwise"):
        value = p[name]
        if np.ndim(value) == 0:
            continue
        arr = np.asarray(value, dtype=np.float64)
        if solver != "als":
            raise ValueError(f"{name} with one value per group is used by solver='als' "
                             f"only (MCMC learns the per-group priors; SGD takes one "
                             f"value); got {arr.shape[0]} values with "
                             f"solver={solver!r}")
        if arr.shape != (n_groups,):
            raise ValueError(f"{name} must be a number or hold one value per group "
                             f"({n_groups}), got shape {arr.shape}")
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ValueError(f"{name} must hold finite non-negative values")
    if groups is not None and solver == "sgd":
        raise ValueError("groups set the priors of solver='mcmc' and the penalties of "
                         "solver='als'; solver='sgd' has no per-group settings")
    return groups


def _fitted_state(est, solver):
    """A copy of the fitted model when it was fitted by ``solver``, else None."""
    if hasattr(est, "w_") and getattr(est, "solver_", None) == solver:
        return FMState(float(est.w0_), est.w_.copy(), est.V_.copy())
    return None


def raise_diverged(info):
    """The ``DivergenceError`` of a solver's ``info["diverged"]`` (when set)."""
    if info["diverged"]:
        raise DivergenceError(info["diverged"] + "; the estimator keeps its previous state")
