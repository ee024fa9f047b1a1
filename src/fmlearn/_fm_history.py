"""The per-iteration history of the classic FM's fits (:mod:`fmlearn.fm`).

``history_`` records the solver seconds of every iteration (compilation excluded), and on
request (``verbose``, ``eval_set`` or a fit ``callback``) the train / validation metric and,
for ALS and MCMC, libFM's running averages of the predictions; the progress bar and the user's
callback are fed from the same place.
"""

import time

import numpy as np
from scipy.special import ndtr

from .kernels.predict import fm_predict_csr


class FMHistoryMixin:
    """The history helpers of ``_BaseClassicFM`` (see the module docstring)."""

    def _eval_pred(self, evald, state):
        if evald is None:
            return None
        (indptr, indices, data), _ = evald
        out = np.empty(indptr.shape[0] - 1)
        fm_predict_csr(indptr, indices, data, state.w0, state.w, state.V, out)
        return out

    def _start_clock(self):
        # The solvers call this once their kernels are compiled or loaded, before the first
        # iteration: history_["iter_time"] never includes compilation.
        self._clock = time.perf_counter()

    def _record(self, history, bar, train_pred, y, sw, val_pred, evald, extra=None):
        # Solver seconds of the iteration; the evaluation below is not counted.
        history["iter_time"].append(time.perf_counter() - self._clock)
        if train_pred is not None:
            history["train"].append(self._metric(train_pred, y, sw))
        if val_pred is not None:
            history["val"].append(self._metric(val_pred, evald[1]))
        post = {}
        if history["train"]:
            post["train"] = f"{history['train'][-1]:.4f}"
        if history["val"]:
            post["val"] = f"{history['val'][-1]:.4f}"
        if extra:
            post.update(extra)
        bar.set_postfix(post)
        bar.update(1)
        if self._callback is not None:
            self._callback(len(history["iter_time"]) - 1, history)
        self._clock = time.perf_counter()

    def _tracker(self, y, sw, evald, history, bar, probit):
        """The per-sweep callback of ALS and MCMC: solver time always; the train/val metrics
        and libFM's running averages only when asked (``verbose``, ``eval_set`` or a
        ``callback``)."""
        averages = None
        if self.verbose or evald is not None or self._callback is not None:
            averages = _RunningAverages(self, y, sw, evald, history, probit)

        def callback(it, E, target):
            if averages is None:
                history["iter_time"].append(time.perf_counter() - self._clock)
                self._clock = time.perf_counter()
                return False
            pred = E[:, 0] + target
            val = self._eval_pred(evald, self._live)
            extra = averages.add(pred, val)
            self._record(history, bar, pred, y, sw, val, evald, extra)
            return False

        return callback


class _RunningAverages:
    """libFM's report for ALS and MCMC: the metric of the running average of the predictions
    of all iterations so far (of Phi(f) for probit), kept in ``history_["train_avg"]`` and
    ``history_["val_avg"]``."""

    def __init__(self, est, y, sw, evald, history, probit):
        self.est, self.y, self.sw, self.evald, self.probit = est, y, sw, evald, probit
        self.history = history
        self.n = 0
        self.train = np.zeros(y.shape[0])
        self.val = None if evald is None else np.zeros(evald[1].shape[0])

    def _metric(self, total, target, weights):
        p = total / self.n
        if self.probit:
            return float(np.average((p > 0.5) != (target > 0), weights=weights))
        return self.est._metric(p, target, weights)

    def add(self, train_pred, val_pred):
        lo, hi = self.est._clip_range()  # each sample clipped, as in predict (and libFM)
        link = ndtr if self.probit else (lambda p: np.clip(p, lo, hi))
        self.n += 1
        self.train += link(train_pred)
        self.history["train_avg"].append(self._metric(self.train, self.y, self.sw))
        extra = {"avg": f"{self.history['train_avg'][-1]:.4f}"}
        if val_pred is not None:
            self.val += link(val_pred)
            y_val = self.evald[1]
            self.history["val_avg"].append(self._metric(self.val, y_val, None))
            extra["val_avg"] = f"{self.history['val_avg'][-1]:.4f}"
        return extra

