"""The plan of a field-aware FM fit: every setting resolved once, in one place.

:func:`make_plan` turns the estimator's ``get_params()`` and a :class:`DataSummary` of the
training rows into a frozen :class:`FFMPlan` ("auto" resolved, the solver's settings built by
keyword, the seeds drawn from ``random_state``); the solver, streaming and the CLI read the
plan, never the estimator. What changes while a fit runs (the clock, the progress bar, the
early-stopping monitor with the user's callback, the validation rows) lives in a
:class:`RunContext` made per call and dropped when it returns: nothing of a fit stays on the
estimator but its results.
"""

import math
import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from .._early_stopping import StoppingRule, resolve_stopping
from ..losses import LOSS_CODES
from ._fields import n_chunks

#: ``init_stdev="auto"``: the initial factors' standard deviation is this over the square root
#: of the mean pair weight |x_j x_l| of the training rows: libFM's 0.1 for unit pair weights
#: (one-hot rows without normalisation), 0.1 sqrt(m) for normalised rows of m one-hot features.
AUTO_INIT = 0.1

#: LIBFFM's defaults (ffm.h): k, eta, lambda, iterations.
LIBFFM_K = 4
LIBFFM_ETA = 0.2
LIBFFM_LAMBDA = 2e-5
LIBFFM_ITERATIONS = 15


@dataclass(frozen=True)
class DataSummary:
    """What the plan needs to know about the training rows."""

    n_samples: int
    n_features: int
    n_fields: int
    dtype: str
    unique_fields: bool  # no row has two features of one field
    target_bound: float  # the largest |y| (labels: 1)
    mean_pair_weight: float  # mean |x_j x_l| over the pairs of a row (rows as the model sees them)


@dataclass(frozen=True)
class InitSettings:
    """Initial factors: ``"normal"`` with standard deviation ``scale`` (or ``"uniform"`` on
    [0, scale), LIBFFM's start with scale 1 / sqrt(k)); the AdaGrad sums start at 1."""

    kind: str
    scale: float


@dataclass(frozen=True)
class AdaGradSettings:
    """The solver's settings (LIBFFM's learner, Juan et al. 2016 Algorithm 1)."""

    n_iter: int
    loss: int
    learning_rate: float
    reg_bias: float
    reg_linear: float
    reg_pairwise: float
    normalize: bool
    shuffle: bool
    limit: float  # |phi| beyond this is divergence
    unique_fields: bool  # no row has two features of one field


@dataclass(frozen=True)
class FFMPlan:
    """Resolved settings of one fit (or one ``partial_fit`` call)."""

    n_factors: int
    n_chunks: int
    n_fields: int
    dtype: str
    init: InitSettings
    solver: AdaGradSettings
    stopping: Optional[StoppingRule]  # None for partial_fit
    split_seed: int
    shuffle_seed: int


def _seed(rng):
    return 0 if rng is None else int(rng.randint(np.iinfo(np.int32).max))


def make_plan(params, summary, *, classifier, rng, has_eval_set=False, partial=False):
    """The :class:`FFMPlan` of an estimator with parameters ``params`` (``get_params()``) on
    rows described by ``summary``; ``rng`` (a ``RandomState`` from ``random_state``, or None
    when nothing is drawn: a later ``partial_fit``) gives the seeds; ``partial``: one pass
    over the rows in their order, no early stopping."""
    k = int(params["n_factors"])
    loss = "logistic" if classifier else "squared"
    init_stdev = params["init_stdev"]
    if init_stdev == "auto":
        weight = summary.mean_pair_weight
        init_stdev = AUTO_INIT / math.sqrt(weight) if weight > 0 else AUTO_INIT
    init = InitSettings("normal", float(init_stdev))
    solver = AdaGradSettings(
        n_iter=1 if partial else int(params["n_iter"]),
        loss=LOSS_CODES[loss],
        learning_rate=float(params["learning_rate"]),
        reg_bias=float(params["reg_bias"]),
        reg_linear=float(params["reg_linear"]),
        reg_pairwise=float(params["reg_pairwise"]),
        normalize=bool(params["normalize_rows"]),
        shuffle=False if partial else bool(params["shuffle"]),
        limit=1e10 * max(1.0, float(summary.target_bound)),
        unique_fields=summary.unique_fields,
    )
    stopping = None
    if not partial:
        scoring = params.get("scoring", "loss")
        score = ("log_loss" if classifier else "squared_error") if scoring == "loss" else scoring
        stopping = resolve_stopping(
            early_stopping=params["early_stopping"],
            validation_fraction=params["validation_fraction"],
            n_iter_no_change=params["n_iter_no_change"], tol=params["tol"], score=score,
            n_samples=summary.n_samples, has_eval_set=has_eval_set)
    return FFMPlan(n_factors=k, n_chunks=n_chunks(k), n_fields=summary.n_fields,
                   dtype=summary.dtype, init=init, solver=solver, stopping=stopping,
                   split_seed=_seed(rng), shuffle_seed=_seed(rng))


@dataclass
class Validation:
    """Validation rows in the kernels' form and their score: ``score(predictions)``."""

    csr: tuple
    y: np.ndarray
    sw: Optional[np.ndarray]
    score: Callable


@dataclass
class RunContext:
    """The live side of one fit: the early-stopping monitor (history, rule, best state,
    callback), the validation rows, the progress bar, the clock and ``on_start`` (called once
    the kernels are compiled, before the first epoch)."""

    monitor: object = None
    validation: Optional[Validation] = None
    bar: object = None
    clock: Callable = time.perf_counter
    on_start: Optional[Callable] = None
