"""Streaming (prequential) metrics: running values updated one batch of predictions at a time;
and the ranking metrics of implicit-feedback recommenders (precision@k, recall@k, NDCG@k, MAP@k,
per-user AUC: :func:`ranking_metrics`, defined in :mod:`fmlearn._ranking_metrics`).

scikit-learn computes RMSE, error rate, AUC and log-loss of a finished array; a prequential
evaluation needs them *as the stream goes*: after every batch, the metric of all predictions
so far. Each class here keeps O(1) running sums (AUC keeps the scores, as exact AUC needs them,
and evaluates with :func:`sklearn.metrics.roc_auc_score`). ``scores`` are predictions for
regression and margins (decision values, positive for the second class) for classification;
``y`` holds targets, or labels encoded as {-1, +1}.

Examples
--------
>>> import numpy as np
>>> from fmlearn.metrics import make_metric
>>> m = make_metric("rmse")
>>> round(m.update(np.array([1.0, 2.0]), np.array([1.0, 4.0])).value, 4)
1.4142
>>> round(m.update(np.array([0.0]), np.array([0.0])).value, 4)
1.1547
"""

import numpy as np
from scipy.special import expit

from ._ranking_metrics import (
    map_at_k,
    ndcg_at_k,
    precision_at_k,
    ranking_auc,
    ranking_metrics,
    recall_at_k,
)

__all__ = ["METRICS", "make_metric", "StreamingMetric", "precision_at_k", "recall_at_k",
           "ndcg_at_k", "map_at_k", "ranking_auc", "ranking_metrics"]


class StreamingMetric:
    """Base class: ``update(y, scores, sample_weight=None)`` then read ``value``."""

    name = ""
    task = ""  # "regression" or "classification"
    greater_is_better = False

    def __init__(self):
        self.total = 0.0
        self.weight = 0.0

    def update(self, y, scores, sample_weight=None):
        y = np.asarray(y, dtype=np.float64)
        scores = np.asarray(scores, dtype=np.float64)
        w = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, float)
        self.total += float(np.sum(w * self._terms(y, scores)))
        self.weight += float(np.sum(w))
        return self

    def _terms(self, y, scores):  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def value(self):
        return self._finish(self.total / self.weight) if self.weight > 0 else float("nan")

    def _finish(self, mean):
        return mean


class StreamingRMSE(StreamingMetric):
    name = "rmse"
    task = "regression"

    def _terms(self, y, scores):
        return (scores - y) ** 2

    def _finish(self, mean):
        return float(np.sqrt(mean))


class StreamingMAE(StreamingMetric):
    name = "mae"
    task = "regression"

    def _terms(self, y, scores):
        return np.abs(scores - y)


class StreamingErrorRate(StreamingMetric):
    """Share of margins whose sign disagrees with the label (a zero margin predicts the first
    class, as the classifiers' ``predict`` does)."""

    name = "error_rate"
    task = "classification"

    def _terms(self, y, scores):
        return (np.where(scores > 0, 1.0, -1.0) != y).astype(np.float64)


class StreamingLogLoss(StreamingMetric):
    """Mean logistic loss log(1 + exp(-y s)) of the margins (natural log)."""

    name = "log_loss"
    task = "classification"

    def _terms(self, y, scores):
        return np.logaddexp(0.0, -y * scores)


class StreamingAUC(StreamingMetric):
    """Exact area under the ROC curve of all scores so far (keeps them: 16 bytes per row)."""

    name = "auc"
    task = "classification"
    greater_is_better = True

    def __init__(self):
        super().__init__()
        self._y = []
        self._s = []
        self._w = []

    def update(self, y, scores, sample_weight=None):
        y = np.asarray(y, dtype=np.float64)
        self._y.append(y)
        self._s.append(np.asarray(scores, dtype=np.float64))
        self._w.append(np.ones_like(y) if sample_weight is None
                       else np.asarray(sample_weight, dtype=np.float64))
        self.weight += float(np.sum(self._w[-1]))
        return self

    @property
    def value(self):
        from sklearn.metrics import roc_auc_score

        if not self._y:
            return float("nan")
        y = np.concatenate(self._y)
        if np.unique(y).shape[0] < 2:
            return float("nan")
        return float(roc_auc_score(y, np.concatenate(self._s),
                                   sample_weight=np.concatenate(self._w)))


METRICS = {cls.name: cls for cls in (StreamingRMSE, StreamingMAE, StreamingErrorRate,
                                     StreamingLogLoss, StreamingAUC)}


def make_metric(name):
    """A fresh streaming metric by name: ``"rmse"``, ``"mae"``, ``"error_rate"``, ``"auc"``,
    ``"log_loss"``."""
    try:
        return METRICS[name]()
    except KeyError:
        raise ValueError(f"unknown metric {name!r}; expected one of {sorted(METRICS)}") from None


def probability(scores):
    """P(second class) of logistic margins."""
    return expit(scores)
