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
resolution for one fit (:func:`resolve_stopping` -> :class:`StoppingRule`), the validation
split (:func:`validation_split`), the scores (:data:`SCORES`), and :class:`EarlyStopping`,
the live record of one fit (history, the rule, the best state, a callback that may stop the
run). An estimator builds the rule in its plan and hands the monitor to its solver, which
calls :meth:`EarlyStopping.end_iteration` once per iteration.
"""

import numbers
from dataclasses import dataclass

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

__all__ = ["AUTO_MIN_SAMPLES", "EarlyStopping", "PARAMETER_CONSTRAINTS", "SCORES",
           "StoppingRule", "resolve_stopping", "validation_split"]

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
        if self.callback is not None and self.callback(iteration, h) is True:
            stop = True
        return stop

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
