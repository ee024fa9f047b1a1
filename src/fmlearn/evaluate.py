"""Prequential ("test, then train") evaluation of online learners (Zhang et al. 2018, §4.1
protocol).

Every row is first predicted by the current model, then learned. The metrics of those
predictions, accumulated over the stream, are the online performance reported by online-learning
papers; their values after every batch form the learning curves (and, against the learning
time, the loss-versus-time curves of Zhang et al. 2018, Fig. 1-2).
"""

import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ._base import progress
from ._data import check_sparse_structure
from .metrics import make_metric

__all__ = ["PrequentialResult", "evaluate_prequential"]


@dataclass
class PrequentialResult:
    """Outcome of :func:`evaluate_prequential`.

    Attributes
    ----------
    metrics : dict
        Final value of each metric over the whole stream.
    n_rows : ndarray of int
        Rows seen at each checkpoint (after each batch).
    curves : dict of ndarray
        Each metric's value over all rows seen so far, at each checkpoint.
    elapsed : ndarray
        Seconds spent learning (and predicting) up to each checkpoint, excluding the metric
        bookkeeping and the compilation (``compile_time``).
    predictions : ndarray or None
        The score predicted for every row before it was learned (``keep_predictions``).
    compile_time : float
        Seconds of the warm-up before the stream (``warm_up=True``): numba compiling the
        learner's kernels on a cold cache, or loading them from the cache. Not learning time,
        so not part of ``elapsed`` or ``rows_per_second``.
    """

    metrics: dict
    n_rows: np.ndarray
    curves: dict
    elapsed: np.ndarray
    predictions: np.ndarray = None
    labels: np.ndarray = field(default=None, repr=False)
    compile_time: float = 0.0

    @property
    def rows_per_second(self):
        """Rows learned per second of learning (compilation excluded)."""
        return float(self.n_rows[-1] / self.elapsed[-1]) if self.elapsed[-1] > 0 else np.inf

    def plot(self, path=None, title=None, against="rows"):
        """Learning curves (one panel per metric) against ``"rows"`` or ``"time"``; saved as a
        PNG at ``path`` when given. Needs matplotlib (``pip install 'fmlearn[plot]'``).

        Returns the matplotlib figure."""
        try:
            import matplotlib

            matplotlib.use("Agg", force=False)
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError("plots need matplotlib: pip install 'fmlearn[plot]'") from None
        names = list(self.curves)
        fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.2), squeeze=False)
        x = self.n_rows if against == "rows" else self.elapsed
        for ax, name in zip(axes[0], names, strict=True):
            ax.plot(x, self.curves[name])
            ax.set_xlabel("rows seen" if against == "rows" else "seconds")
            ax.set_ylabel(name)
            ax.grid(alpha=0.3)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120, bbox_inches="tight")
            plt.close(fig)
        return fig


def _batches(stream, batch_size):
    """Yield (X, y, sample_weight) batches from an (X, y[, w]) tuple or an iterable of them."""
    if isinstance(stream, tuple) and len(stream) in (2, 3) and not isinstance(stream[0], tuple):
        X, y = stream[0], np.asarray(stream[1])
        w = None if len(stream) == 2 or stream[2] is None else np.asarray(stream[2])
        n = X.shape[0] if hasattr(X, "shape") else len(X)
        if sp.issparse(X):
            X = check_sparse_structure(X).tocsr()
        for start in range(0, n, batch_size):
            sl = slice(start, start + batch_size)
            yield X[sl], y[sl], None if w is None else w[sl]
        return
    for item in stream:
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise ValueError("a stream yields (X_batch, y_batch) or (X_batch, y_batch, "
                             f"sample_weight) tuples; got {type(item).__name__}")
        yield item[0], np.asarray(item[1]), (None if len(item) == 2 else item[2])


def evaluate_prequential(estimator, stream, metrics=None, *, batch_size=1000, classes=None,
                         keep_predictions=False, verbose=0, total=None, warm_up=True):
    """Predict each row with the current model, then learn it; report metrics and curves.

    Parameters
    ----------
    estimator : estimator with ``partial_fit``
        fmlearn's online estimators learn each batch in one compiled loop that records the
        prediction made before every row's update. Any other estimator with ``partial_fit``
        (and ``predict`` / ``decision_function``) is driven row by row (slow); rows it cannot
        predict yet (before its first ``partial_fit``) are left out of the metrics.
    stream : (X, y) or (X, y, sample_weight), or an iterable of such batches
        A tuple of arrays is cut into batches of ``batch_size`` rows, in order.
    metrics : list of str, default=None
        Any of ``"rmse"``, ``"mae"`` (regression), ``"error_rate"``, ``"auc"``, ``"log_loss"``
        (classification). Default: ``["rmse"]`` for a regressor, ``["error_rate", "auc"]`` for
        a classifier.
    batch_size : int, default=1000
        Rows per batch (and per checkpoint of the curves) when ``stream`` is a tuple.
    classes : array-like, default=None
        Both labels, for classifiers whose first batch may hold only one of them.
    keep_predictions : bool, default=False
        Keep every prequential score in the result.
    verbose : int, default=0
        Show a progress bar (rows) with the running metrics.
    total : int, default=None
        Length of the stream for the progress bar, when ``stream`` is an iterable.
    warm_up : bool, default=True
        Before the stream, run a throw-away copy of the estimator (``sklearn.base.clone``) on
        the first few rows, so that the first call's compilation is timed apart
        (``compile_time``) and not counted as learning. The estimator itself is not touched.

    Returns
    -------
    PrequentialResult

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import CCFMClassifier, evaluate_prequential
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(3000, 4)); y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> res = evaluate_prequential(CCFMClassifier(trace_bound=50.0, gamma_power=1.0), (X, y),
    ...                            metrics=["error_rate", "auc"])
    >>> bool(res.metrics["error_rate"] < 0.2), res.curves["auc"].shape
    (True, (3,))
    """
    from sklearn.base import is_classifier

    if not hasattr(estimator, "partial_fit"):
        raise TypeError(f"{type(estimator).__name__} has no partial_fit: it cannot learn online")
    clf = is_classifier(estimator)
    if metrics is None:
        metrics = ["error_rate", "auc"] if clf else ["rmse"]
    if isinstance(metrics, str):
        metrics = [metrics]
    trackers = {name: make_metric(name) for name in metrics}
    for name, m in trackers.items():
        if m.task != ("classification" if clf else "regression"):
            raise ValueError(f"metric {name!r} is for {m.task}, but {type(estimator).__name__} "
                             f"is a {'classifier' if clf else 'regressor'}")
    if (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer))
            or batch_size < 1):
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if total is None and isinstance(stream, tuple) and len(stream) in (2, 3):
        total = stream[0].shape[0] if hasattr(stream[0], "shape") else len(stream[0])
    family = _online_family(estimator)  # None: learn row by row through partial_fit
    seen_classes = None if classes is None else np.unique(np.asarray(classes))
    n_rows, elapsed, curves = [], [], {name: [] for name in metrics}
    kept_scores, kept_labels = [], []
    n_seen = 0
    learn_time = 0.0
    compile_time = 0.0
    bar = progress(verbose, total, f"prequential {type(estimator).__name__}")
    with bar:
        for X, y, w in _batches(stream, batch_size):
            if clf and seen_classes is None:
                seen_classes = np.unique(y)
            if family and warm_up and not n_rows:
                compile_time = _compile_on_copy(family, estimator, X, y, w,
                                                seen_classes if clf else None)
            t0 = time.perf_counter()
            if family:
                kw = {"classes": seen_classes} if clf else {}
                scores = family.prequential_scores(estimator, X, y, w, **kw)
                valid = np.ones(scores.shape[0], dtype=bool)
            else:
                scores, valid = _row_by_row(estimator, X, y, w, clf, seen_classes)
            learn_time += time.perf_counter() - t0
            if clf:
                target = np.where(y == estimator.classes_[1], 1.0, -1.0)
            else:
                target = np.asarray(y, dtype=np.float64)
            ww = None if w is None else np.asarray(w, dtype=np.float64)[valid]
            for m in trackers.values():
                m.update(target[valid], scores[valid], ww)
            n_seen += scores.shape[0]
            n_rows.append(n_seen)
            elapsed.append(learn_time)
            for name, m in trackers.items():
                curves[name].append(m.value)
            if keep_predictions:
                kept_scores.append(np.where(valid, scores, np.nan))
                kept_labels.append(target)
            bar.update(scores.shape[0])
            bar.set_postfix({name: f"{vals[-1]:.4f}" for name, vals in curves.items()})
    if not n_rows:
        raise ValueError("the stream is empty")
    return PrequentialResult(
        metrics={name: m.value for name, m in trackers.items()},
        n_rows=np.asarray(n_rows),
        curves={name: np.asarray(v) for name, v in curves.items()},
        elapsed=np.asarray(elapsed),
        predictions=np.concatenate(kept_scores) if keep_predictions else None,
        labels=np.concatenate(kept_labels) if keep_predictions else None,
        compile_time=compile_time,
    )


_WARM_UP_ROWS = 32


def _online_family(estimator):
    """The online family's module (:mod:`fmlearn.online._base`, whose compiled prequential
    step learns a batch in one call) when ``estimator`` is one of its estimators, else None.
    A family that is not imported has no estimator here: evaluating another model imports
    nothing of it."""
    family = sys.modules.get(__name__.rpartition(".")[0] + ".online._base")
    return family if family is not None and family.is_online(estimator) else None


def _compile_on_copy(family, estimator, X, y, w, classes):
    """Seconds to run an unfitted copy of ``estimator`` on the first rows of a batch: the
    kernels' compilation (cold numba cache) or loading (warm cache), kept out of the timing of
    the stream. Errors are left to the real call, which reports them on the user's data."""
    from sklearn.base import clone

    t0 = time.perf_counter()
    with warnings.catch_warnings():  # a copy's warnings on a few rows are not the user's
        warnings.simplefilter("ignore")
        try:
            twin = clone(estimator)
            rows = slice(0, _WARM_UP_ROWS)
            kw = {} if classes is None else {"classes": classes}
            family.prequential_scores(twin, X[rows], np.asarray(y)[rows],
                                      None if w is None else np.asarray(w)[rows], **kw)
        except Exception:  # the timed call below raises the same error, with its context
            pass
    return time.perf_counter() - t0


def _row_by_row(estimator, X, y, w, clf, classes):
    """Generic prequential loop for estimators without a compiled path."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    n = X.shape[0]
    scores = np.zeros(n)
    valid = np.zeros(n, dtype=bool)
    for i in range(n):
        xi = X[i:i + 1]
        try:
            check_is_fitted(estimator)
            fitted = True
        except NotFittedError:
            fitted = False
        if fitted:
            if clf:
                if hasattr(estimator, "decision_function"):
                    scores[i] = float(np.ravel(estimator.decision_function(xi))[0])
                else:
                    p = float(estimator.predict_proba(xi)[0, 1])
                    scores[i] = np.log(max(p, 1e-300)) - np.log(max(1 - p, 1e-300))
            else:
                scores[i] = float(np.ravel(estimator.predict(xi))[0])
            valid[i] = True
        kw = {}
        if clf:
            kw["classes"] = classes
        if w is not None:
            kw["sample_weight"] = np.asarray(w)[i:i + 1]
        estimator.partial_fit(xi, y[i:i + 1], **kw)
    return scores, valid
