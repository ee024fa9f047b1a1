"""The plan of one :class:`~fmlearn.ranking.FMRanker` fit: every setting resolved, in one place.

:func:`make_plan` turns the estimator's ``get_params()`` and a summary of the data
(:class:`~fmlearn.ranking._data.EventData`) into a frozen :class:`RankPlan`: "auto" values
resolved, the solver's settings built by keyword (:class:`SampledSettings` or
:class:`ICDSettings`). The solvers read the plan, never the estimator; :class:`RunContext`
carries what is live during a fit (the clock, the callback, the progress bar, the history), so
nothing fit-time is left on the estimator. ``FMRanker`` stores ``plan.resolved()`` as its
``settings_`` attribute: a saved model says what it ran.
"""

import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

__all__ = ["SampledSettings", "ICDSettings", "RankPlan", "RunContext", "make_plan",
           "DEFAULTS"]

#: What "auto" resolves to, per loss: chosen on validation cuts (20% of each user's training
#: events) of MovieLens-100K's per-user 80/20 splits, seeds 0, 1, 2, k = 32 (see
#: benchmarks/bench_ranking.py ``validate`` and docs/recommend.md). The squared loss's
#: penalties are relative to each feature's total pair weight (see FMRanker).
DEFAULTS = {
    "warp": {"learning_rate": 0.03, "reg_linear": 1e-4, "reg_pairwise": 1e-4, "n_iter": 30},
    "bpr": {"learning_rate": 0.1, "reg_linear": 0.01, "reg_pairwise": 0.01, "n_iter": 30},
    "squared": {"learning_rate": None, "reg_linear": 0.1, "reg_pairwise": 0.03, "n_iter": 10},
}
#: init_stdev="auto" is INIT_SCALE / sqrt(n_factors).
INIT_SCALE = 0.05


@dataclass(frozen=True)
class SampledSettings:
    """Settings of :func:`fmlearn.ranking.solvers.sampled.sampled_solver` (BPR, WARP)."""

    loss: str
    adagrad: bool
    learning_rate: float
    reg_linear: float
    reg_pairwise: float
    max_sampled: int
    negative_sampling: str
    n_iter: int


@dataclass(frozen=True)
class ICDSettings:
    """Settings of :func:`fmlearn.ranking.solvers.icd.icd_solver` (all-negatives squared
    loss)."""

    negative_weight: float
    reg_bias: float
    reg_linear: float
    reg_pairwise: float
    n_iter: int


@dataclass(frozen=True)
class RankPlan:
    """Everything a fit runs with, resolved."""

    loss: str
    solver: str
    n_factors: int
    init_stdev: float
    warm_start: bool
    settings: object  # SampledSettings | ICDSettings
    n_features: int
    n_contexts: int
    n_items: int
    n_events: int

    def resolved(self):
        """The resolved settings as a plain dict (stored as ``FMRanker.settings_``)."""
        out = {"loss": self.loss, "solver": self.solver, "n_factors": self.n_factors,
               "init_stdev": self.init_stdev}
        out.update(asdict(self.settings))
        return out


@dataclass
class RunContext:
    """What is live during one fit: the callback, the progress bar, the history being
    recorded and the clock of the current iteration."""

    callback: object = None
    bar: object = None
    tracking: bool = False  # a per-iteration loss is wanted (progress bar or callback)
    history: dict = field(default_factory=lambda: {"loss": [], "iter_time": []})
    clock: float = 0.0

    def start(self):
        """Start the clock of an iteration (after the kernels are compiled)."""
        self.clock = time.process_time()

    def end_iteration(self, i, loss):
        """Record iteration ``i`` (its objective and CPU seconds) and report it; returns True
        when the callback asks to stop."""
        self.history["iter_time"].append(time.process_time() - self.clock)
        self.history["loss"].append(float(loss))
        if self.bar is not None:
            self.bar.update(1)
            if np.isfinite(loss):
                self.bar.set_postfix(loss=f"{loss:.5g}")
        stop = False
        if self.callback is not None:
            stop = bool(self.callback(i, self.history))
        self.start()
        return stop


def _auto(value, loss, name):
    return DEFAULTS[loss][name] if isinstance(value, str) and value == "auto" else value


def make_plan(params, data):
    """The :class:`RankPlan` of ``params`` (``FMRanker.get_params()``) on ``data``.

    Raises ``ValueError`` for combinations no solver runs (a loss with a solver of the other
    kind).
    """
    loss = params["loss"]
    solver = params["solver"]
    sampled = loss in ("bpr", "warp")
    if solver == "auto":
        solver = "adagrad" if sampled else "icd"
    if sampled and solver == "icd":
        raise ValueError(f"solver='icd' minimises the all-negatives squared loss "
                         f"(loss='squared'); loss={loss!r} samples negatives: use solver="
                         "'adagrad' or 'sgd'")
    if not sampled and solver != "icd":
        raise ValueError(f"loss='squared' is the loss over every (context, item) pair, solved "
                         f"by coordinate descent (solver='icd'), not by solver={solver!r}")
    k = int(params["n_factors"])
    init = params["init_stdev"]
    init = INIT_SCALE / math.sqrt(max(k, 1)) if init == "auto" else float(init)
    reg_linear = float(_auto(params["reg_linear"], loss, "reg_linear"))
    reg_pairwise = float(_auto(params["reg_pairwise"], loss, "reg_pairwise"))
    n_iter = int(_auto(params["n_iter"], loss, "n_iter"))
    if sampled:
        settings = SampledSettings(
            loss=loss, adagrad=solver == "adagrad",
            learning_rate=float(_auto(params["learning_rate"], loss, "learning_rate")),
            reg_linear=reg_linear, reg_pairwise=reg_pairwise,
            max_sampled=int(params["max_sampled"]),
            negative_sampling=params["negative_sampling"], n_iter=n_iter)
    else:
        settings = ICDSettings(
            negative_weight=float(params["negative_weight"]), reg_bias=float(params["reg_bias"]),
            reg_linear=reg_linear, reg_pairwise=reg_pairwise, n_iter=n_iter)
    return RankPlan(loss=loss, solver=solver, n_factors=k, init_stdev=init,
                    warm_start=bool(params["warm_start"]), settings=settings,
                    n_features=data.n_features, n_contexts=data.n_contexts,
                    n_items=data.n_items, n_events=data.n_events)
