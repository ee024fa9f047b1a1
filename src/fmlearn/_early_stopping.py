"""Early stopping on a validation set, for every iterative estimator.

scikit-learn's names and meanings (``SGDClassifier``, ``HistGradientBoostingClassifier``):

``early_stopping`` : "auto", bool
    Whether a validation score decides when to stop. ``"auto"`` (HistGradientBoosting's rule):
    on when ``fit`` is given an ``eval_set``, or when the training set has more than
    :data:`AUTO_MIN_SAMPLES` rows.
``validation_fraction`` : float in (0, 1)
    Share of the training rows set aside as the validation set when no ``eval_set`` is given
    (stratified by class for a classifier, drawn from ``random_state``); they are not trained
    on.
``n_iter_no_change`` : int >= 1
    Stop after this many consecutive iterations without an improvement of more than ``tol``.
``tol`` : float >= 0
    The improvement that counts, in the units of the score: an iteration improves when its
    loss is below the best so far minus ``tol`` (SGDClassifier's rule, for a loss).

Unlike scikit-learn's SGD, the model kept is the one of the best iteration (LIBFFM's
``--auto-stop``: Juan et al. 2016 stop at the first epoch whose validation loss rises and keep
the previous model), so stopping late never costs accuracy; ``n_iter_no_change=1, tol=0`` is
LIBFFM's rule exactly.

What lives here: the parameters' constraints (:data:`PARAMETER_CONSTRAINTS`), their
resolution for one fit (:func:`resolve_stopping` -> :class:`StoppingRule`, or
:func:`rule_of_params` from an estimator's ``get_params()``), the validation split
(:func:`validation_split`, :func:`split_rows` for validated rows), the scores
(:data:`SCORES`), :class:`EarlyStopping`, the live record of one fit (history, the rule, the
best state, a callback that may stop the run), and :func:`split_rhat`, the convergence
diagnostic of a Markov chain (the MCMC solvers have no early stop). An estimator builds the
rule in its plan and hands the monitor to its solver, which calls
:meth:`EarlyStopping.end_iteration` once per iteration (or :meth:`EarlyStopping.observe` when
the family keeps its own history and only needs the rule's decision).

The families use it as follows: the field-aware FM (its AdaGrad epochs), the classic FM (SGD
epochs and ALS sweeps; MCMC reports :func:`split_rhat` instead), the online learners (passes
of ``fit``), the convex FM (Hazan's iterations) and the generalized FM / iFM (passes over the
rows). A family whose ``tol`` already means something else (the convex FM's duality gap, the
generalized FM's relative change) keeps that meaning and takes the improvement margin from
``n_iter_no_change`` alone (``tol=0`` in the rule: any improvement counts).
"""

import numbers
from dataclasses import dataclass

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

__all__ = ["AUTO_MIN_SAMPLES", "DeferredEvalSet", "EarlyStopping", "PARAMETER_CONSTRAINTS",
           "SCORES",
           "StoppingRule", "resolve_stopping", "rule_of_params", "split_index", "split_rhat",
           "split_rows", "validation_split"]

#: ``early_stopping="auto"`` turns early stopping on above this many training rows
#: (HistGradientBoosting's threshold).
AUTO_MIN_SAMPLES = 10_000

PARAMETER_CONSTRAINTS = {
    "early_stopping": [StrOptions({"auto"}), "boolean"],
    "validation_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
    "n_iter_no_change": [Interval(numbers.Integral, 1, None, closed="left")],
    "tol": [Interval(numbers.Real, 0, None, closed="left")],
}


def _weighted_mean(values, sample_weight):
    if sample_weight is None:
        return float(np.mean(values))
    return float(np.average(values, weights=sample_weight))


def log_loss_of_margins(y, score, sample_weight=None):
    """Mean logistic loss log(1 + exp(-y s)) of margins ``score`` against labels y in
    {-1, +1} (``sklearn.metrics.log_loss`` of the sigmoid, without its clipping)."""
    return _weighted_mean(np.logaddexp(0.0, -np.asarray(y) * np.asarray(score)), sample_weight)


def squared_error(y, score, sample_weight=None):
    """Mean squared error of the predictions ``score``."""
    r = np.asarray(score, dtype=np.float64) - np.asarray(y, dtype=np.float64)
    return _weighted_mean(r * r, sample_weight)


def roc_auc(y, score, sample_weight=None):
    """Area under the ROC curve of margins ``score`` for labels y in {-1, +1}
    (``sklearn.metrics.roc_auc_score``)."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(np.asarray(y) > 0, score, sample_weight=sample_weight))


#: Validation scores by name: (function(y, score, sample_weight), greater_is_better).
SCORES = {
    "log_loss": (log_loss_of_margins, False),
    "squared_error": (squared_error, False),
    "roc_auc": (roc_auc, True),
}


@dataclass(frozen=True)
class StoppingRule:
    """The resolved early-stopping settings of one fit.

    ``active``: the validation score stops the run and the best iteration's model is kept;
    ``split``: the validation rows are carved out of the training rows (``fraction`` of them),
    else they are the ``eval_set`` (or there are none); ``score``: a key of :data:`SCORES`.
    """

    active: bool
    split: bool
    fraction: float
    n_iter_no_change: int
    tol: float
    score: str

    @property
    def greater_is_better(self):
        return SCORES[self.score][1]


def resolve_stopping(*, early_stopping, validation_fraction, n_iter_no_change, tol, score,
                     n_samples, has_eval_set):
    """The :class:`StoppingRule` of a fit on ``n_samples`` rows (``has_eval_set``: an
    ``eval_set`` was given). Without early stopping an ``eval_set`` is only scored."""
    if score not in SCORES:
        raise ValueError(f"unknown validation score {score!r}; expected one of "
                         f"{sorted(SCORES)}")
    if early_stopping == "auto":
        active = bool(has_eval_set or n_samples > AUTO_MIN_SAMPLES)
    else:
        active = bool(early_stopping)
    return StoppingRule(active=active, split=active and not has_eval_set,
                        fraction=float(validation_fraction),
                        n_iter_no_change=int(n_iter_no_change), tol=float(tol), score=score)


def rule_of_params(params, *, score, n_samples, has_eval_set, tol=None):
    """:func:`resolve_stopping` from an estimator's ``get_params()`` (``early_stopping``,
    ``validation_fraction``, ``n_iter_no_change`` and ``tol``; ``tol`` given here overrides
    the parameter: a family whose ``tol`` means something else passes 0)."""
    return resolve_stopping(
        early_stopping=params["early_stopping"],
        validation_fraction=params["validation_fraction"],
        n_iter_no_change=params["n_iter_no_change"],
        tol=params["tol"] if tol is None else tol, score=score, n_samples=n_samples,
        has_eval_set=has_eval_set)


def split_rows(X, y, sw, rule, random_state, classifier):
    """``(X, y, sw, validation)``: validated rows with ``rule.fraction`` of them carved out
    as ``validation = (X_val, y_val, sw_val)`` when ``rule.split`` (stratified for a
    classifier), else the rows unchanged and ``validation`` None.

    The split's seed is one draw from ``random_state`` (an int, None or a ``RandomState``,
    scikit-learn's convention), made only when a split is made, so that a fit without early
    stopping draws exactly what it drew before. ``sw`` may be None.
    """
    if not rule.split:
        return X, y, sw, None
    train, validation = split_index(X, y, sw, rule, random_state, classifier)
    y = np.asarray(y)
    sw_train = None if sw is None else np.asarray(sw)[train]
    return X[train], y[train], sw_train, validation


def split_index(X, y, sw, rule, random_state, classifier):
    """:func:`split_rows` without copying the training rows: ``(train, validation)``, the
    sorted indices (int64) of the training rows and the carved-out ``(X_val, y_val,
    sw_val)``; the same seed, the same rows. For the solvers that read the training rows in
    place through an index (ALS, MCMC: :func:`fmlearn._data.merged_rows`)."""
    from sklearn.utils import check_random_state

    seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    y = np.asarray(y)
    train, val = validation_split(X.shape[0], rule.fraction, seed, y if classifier else None)
    sw_val = None if sw is None else np.asarray(sw)[val]
    return train, (X[val], y[val], sw_val)


class DeferredEvalSet:
    """An ``eval_set`` that a Pipeline hands to its final estimator before the preceding steps
    have seen the training rows (:class:`fmlearn.pipeline.Pipeline`): :meth:`resolve_eval_set`,
    called by the estimator when it validates its ``eval_set``, transforms ``X_val`` by the
    steps ``head`` (a sub-pipeline, fitted by then) and returns ``(X_val', y_val)``."""

    def __init__(self, head, eval_set):
        try:
            X_val, y_val = eval_set
        except (TypeError, ValueError):
            raise ValueError("eval_set must be a pair (X_val, y_val)") from None
        self.head, self.X_val, self.y_val = head, X_val, y_val

    def resolve_eval_set(self):
        return self.head.transform(self.X_val), self.y_val


def split_rhat(draws):
    """Split R-hat of each column of ``draws`` (n_draws, n_quantities): Gelman et al. 2013
    (BDA3, Section 11.4), the chain cut into two halves whose between- and within-half
    variances are compared; values near 1 (below 1.01-1.1, Vehtari et al. 2021) say the
    chain has settled. NaN where there are fewer than 4 draws; 1 where a quantity does not
    move at all."""
    draws = np.asarray(draws, dtype=np.float64)
    n = draws.shape[0] // 2
    if n < 2:
        return np.full(draws.shape[1:], np.nan)
    # (2, n, q): the first draw of an odd count dropped
    halves = np.stack([draws[-2 * n:-n], draws[-n:]])
    means = halves.mean(axis=1)
    within = halves.var(axis=1, ddof=1).mean(axis=0)
    between = n * means.var(axis=0, ddof=1)
    var_plus = (n - 1) / n * within + between / n
    with np.errstate(divide="ignore", invalid="ignore"):
        rhat = np.sqrt(var_plus / within)
    return np.where(within > 0, rhat, np.where(between > 0, np.inf, 1.0))


def validation_split(n_samples, fraction, seed, y=None):
    """``(train, val)`` row indices (sorted int64): ``fraction`` of ``n_samples`` rows drawn
    for validation, stratified by the labels ``y`` when given (scikit-learn's
    ``train_test_split``, as SGDClassifier does); ``seed`` an int.

    Raises ``ValueError`` naming the problem when either side would be empty, or when a
    stratified split is impossible (a class with a single row).
    """
    from sklearn.model_selection import train_test_split

    n_val = int(np.ceil(fraction * n_samples))
    if n_val < 1 or n_samples - n_val < 1:
        raise ValueError(f"validation_fraction={fraction} of {n_samples} rows leaves "
                         f"{n_val} validation and {n_samples - n_val} training rows; early "
                         "stopping needs both (give more rows, another fraction, or an "
                         "eval_set)")
    idx = np.arange(n_samples)
    try:
        train, val = train_test_split(idx, test_size=n_val, random_state=seed, stratify=y)
    except ValueError as exc:
        raise ValueError(f"cannot carve a stratified validation set of {n_val} rows out of "
                         f"{n_samples}: {exc} (give an eval_set, more rows or another "
                         "validation_fraction)") from None
    return np.sort(train).astype(np.int64), np.sort(val).astype(np.int64)


class EarlyStopping:
    """The live record of one fit: the per-iteration history, the stopping rule, the state of
    the best iteration, and the user's callback.

    Parameters
    ----------
    rule : StoppingRule
    callback : callable or None
        ``callback(iteration, history)`` after each iteration (0-based, the history so far);
        returning ``True`` stops the run (the model kept is then the best one when the rule is
        active, else the current one).
    copy_state : callable or None
        Returns a copy of the solver's current state; called when an iteration becomes the
        best one (only when ``rule.active``).

    Attributes
    ----------
    history : dict
        ``"metric"`` (the validation score's name), ``"train"`` (a training loss the solver
        reports, possibly ``None`` entries), ``"val"`` (validation scores, when there is a
        validation set), ``"iter_time"`` (seconds).
    best_iteration : int or None
        0-based index of the best iteration so far (None before one with a score).
    best_state : object or None
        What ``copy_state`` returned for it.
    """

    def __init__(self, rule, callback=None, copy_state=None):
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
        self.rule = rule
        self.callback = callback
        self.copy_state = copy_state
        self.history = {"metric": rule.score, "train": [], "val": [], "iter_time": []}
        self.best_iteration = None
        self.best_score = None
        self.best_state = None
        self.no_improvement = 0
        self.stopped_early = False

    def _better(self, score, reference):
        if self.rule.greater_is_better:
            return score > reference
        return score < reference

    def end_iteration(self, iteration, *, seconds, train=None, val=None):
        """Record iteration ``iteration`` (0-based) and return True when the run should stop:
        the rule fired (no improvement of more than ``tol`` in ``n_iter_no_change``
        iterations) or the callback asked for it."""
        h = self.history
        h["iter_time"].append(float(seconds))
        h["train"].append(None if train is None else float(train))
        stop = False
        if val is not None:
            val = float(val)
            h["val"].append(val)
            if self.rule.active:
                stop = self._apply_rule(iteration, val)
        # truthy, as every family's callback (numpy's True_ from a comparison stops too)
        if self.callback is not None and bool(self.callback(iteration, h)):
            stop = True
        return stop

    def observe(self, iteration, val):
        """Apply the rule to iteration ``iteration``'s validation score ``val`` (for a family
        that keeps its own history and calls its own callback) and return True when the rule
        says stop; keeps the best state. Does nothing when the rule is not active."""
        if not self.rule.active:
            return False
        return self._apply_rule(iteration, float(val))

    def _apply_rule(self, iteration, val):
        """SGDClassifier's rule on the validation score, and the best state kept."""
        if not np.isfinite(val):
            self.no_improvement += 1
        else:
            first = self.best_score is None
            tol = self.rule.tol
            margin = -tol if self.rule.greater_is_better else tol
            if first or self._better(val, self.best_score - margin):
                self.no_improvement = 0
            else:
                self.no_improvement += 1
            if first or self._better(val, self.best_score):
                self.best_score = val
                self.best_iteration = iteration
                if self.copy_state is not None:
                    self.best_state = self.copy_state()
        if self.no_improvement >= self.rule.n_iter_no_change:
            self.stopped_early = True
            return True
        return False

    def keeps_best(self):
        """Whether the fit must end with the best iteration's state (the rule is active and
        a best state was recorded)."""
        return self.rule.active and self.best_state is not None
