"""The per-iteration history of the classic FM's fits (:mod:`fmlearn.fm`).

``history_`` records the solver seconds of every iteration (compilation excluded), and on
request (``verbose``, ``eval_set`` or a fit ``callback``) the train / validation metric and,
for ALS and MCMC, libFM's running averages of the predictions; the progress bar and the user's
callback are fed from the same place. A :class:`FitRecorder` lives as long as one call: it
reads the plan (:class:`fmlearn.fm._plan.ClassicFMPlan`: the metric, the clip range) and keeps
its clock in the plan's run context, never on the estimator.

Early stopping (:mod:`fmlearn._early_stopping`, the rule in the plan's ``stopping``): the
recorder scores the validation rows after each SGD epoch or ALS sweep
(``history_["val_loss"]``), lets the shared :class:`~fmlearn._early_stopping.EarlyStopping`
monitor decide, keeps the best iteration's model, and tells the solver to stop through the
callback's return value (as it does when the user's callback returns True). For MCMC it keeps
the predictions of the validation rows after burn-in and reports their split R-hat.
"""

import sys

import numpy as np
from scipy.special import ndtr

from .._early_stopping import SCORES, EarlyStopping, split_rhat
from ..kernels.predict import fm_predict_csr

__all__ = ["FitRecorder", "fm_metric"]


def fm_metric(pred, y, sw, clip, classifier):
    """The metric of ``history_``: the error rate of the margins ``pred`` (classifier, labels
    ``y`` in {-1, +1}), else the weighted RMSE of the predictions clipped to ``clip``.

    The RMSE is computed in fewer passes over the arrays than ``np.average`` and without BLAS
    (whose threads made np.dot take milliseconds per call on a busy machine)."""
    if classifier:
        return float(np.average(np.sign(pred) != y, weights=sw))
    lo, hi = clip
    r = np.clip(pred, lo, hi)
    r -= y
    if sw is None:
        return float(np.sqrt(np.einsum("i,i->", r, r) / r.shape[0]))
    return float(np.sqrt(np.einsum("i,i,i->", sw, r, r) / np.sum(sw)))


class FitRecorder:
    """``history_`` of one fit, its progress bar and the user's callback (see the module
    docstring); ``evald`` is the validated eval set ``(csr arrays, y)`` or None."""

    def __init__(self, plan, bar, evald=None, *, contrasts=False, eval_sw=None):
        self.plan = plan
        self.context = plan.context
        self.bar = bar
        self.evald = evald
        self.eval_sw = eval_sw
        self.monitor = None
        self.chain_preds = None
        if contrasts:
            self.history = {"metric": "rmse", "train": [], "iter_time": []}
        else:
            self.history = {"metric": plan.metric, "train": [], "val": [], "iter_time": []}
            if plan.solver != "sgd":
                self.history.update(train_avg=[], val_avg=[])
            rule = plan.stopping
            if rule is not None and rule.active and evald is not None:
                self.monitor = EarlyStopping(rule, copy_state=plan.state.copy)
                self.history["val_loss"] = []
            if plan.solver == "mcmc" and evald is not None:
                self.chain_preds = []

    @property
    def tracking(self):
        """Whether the metrics are recorded (``verbose``, ``eval_set`` or a callback)."""
        return bool(self.plan.verbose) or self.evald is not None or \
            self.context.callback is not None

    def metric(self, pred, y, sw=None):
        return fm_metric(pred, y, sw, self.plan.clip, self.plan.classifier)

    def eval_pred(self, state):
        if self.evald is None:
            return None
        # a relational eval set (fmlearn.fm._relation) holds the relational kernels' rows;
        # that module is imported only where relational data are used
        rel = sys.modules.get("fmlearn.kernels.cd_relation")
        if rel is not None and isinstance(self.evald[0], rel.RelationRows):
            from ..solvers.relation import predict_relation

            return predict_relation(self.evald[0], state)
        (indptr, indices, data), _ = self.evald
        out = np.empty(indptr.shape[0] - 1)
        fm_predict_csr(indptr, indices, data, state.w0, state.w, state.V, out)
        return out

    def val_loss(self, pred):
        """The early-stopping score of validation predictions: the mean squared error of the
        predictions clipped to the targets' range (as ``predict`` clips them), or the mean
        log loss of the margins."""
        fn = SCORES[self.plan.stopping.score][0]
        if not self.plan.classifier and self.plan.y_range is not None:
            pred = np.clip(pred, *self.plan.y_range)
        return fn(self.evald[1], pred, self.eval_sw)

    def record(self, train_pred, y, sw, val_pred, extra=None):
        """Close an iteration: its solver seconds (the evaluation below is not counted), the
        metrics, the early-stopping rule, the bar, the callback; the clock restarts. Returns
        True when the run should stop (the rule fired, or the user's callback returned True)."""
        history = self.history
        it = len(history["iter_time"])
        history["iter_time"].append(self.context.lap())
        if train_pred is not None:
            history["train"].append(self.metric(train_pred, y, sw))
        stop = False
        if val_pred is not None:
            history["val"].append(self.metric(val_pred, self.evald[1], self.eval_sw))
            if self.monitor is not None:
                loss = self.val_loss(val_pred)
                history["val_loss"].append(loss)
                stop = self.monitor.observe(it, loss)
            if self.chain_preds is not None and self.plan.chain.t > self.plan.mcmc.n_burn_in:
                self.chain_preds.append(val_pred.copy())
        post = {}
        if history["train"]:
            post["train"] = f"{history['train'][-1]:.4f}"
        if history["val"]:
            post["val"] = f"{history['val'][-1]:.4f}"
        if extra:
            post.update(extra)
        self.bar.set_postfix(post)
        self.bar.update(1)
        stop = self.context.notify(it, history) or stop
        self.context.start_clock()
        return stop

    def finish(self, state):
        """End of the run: the best iteration's model written into ``state`` when early
        stopping kept one (``history_["best_iteration"]``, 0-based), and MCMC's split R-hat of
        the validation predictions (``history_["val_rhat"]``: its largest value over the
        rows, NaN with fewer than 4 sweeps after burn-in). Returns the best iteration (from
        1) or None."""
        if self.chain_preds is not None:
            rows = split_rhat(np.array(self.chain_preds)) if self.chain_preds else []
            self.history["val_rhat"] = (float(np.max(rows)) if len(rows) and
                                        not np.isnan(rows).all() else float("nan"))
            self.history["val_rhat_median"] = (float(np.nanmedian(rows)) if len(rows) and
                                               not np.isnan(rows).all() else float("nan"))
        monitor = self.monitor
        if monitor is None or not monitor.keeps_best():
            return None
        best = monitor.best_state
        state.w0 = best.w0
        state.w[...] = best.w
        state.V[...] = best.V
        self.history["best_iteration"] = int(monitor.best_iteration)
        return int(monitor.best_iteration) + 1

    def epoch_callback(self, csr, y, sw, state):
        """SGD's per-epoch callback (the train predictions only when tracking)."""
        track = self.tracking

        def callback(epoch):
            train = None
            if track:
                train = np.empty(csr[0].shape[0] - 1)
                fm_predict_csr(*csr, state.w0, state.w, state.V, train)
            return self.record(train, y, sw, self.eval_pred(state), None)

        return callback

    def sweep_callback(self, y, sw, state):
        """The per-sweep callback of ALS and MCMC: solver time always; the train/val metrics
        and libFM's running averages only when tracking. ``state`` is the live model the
        solver updates in place."""
        self.context.live = state
        averages = None
        if self.tracking:  # the targets as an array (solvers._fm_common.RowTargets: gathered)
            y = np.asarray(y)
            averages = _RunningAverages(self, y, sw)

        def callback(it, E, target):
            if averages is None:
                self.history["iter_time"].append(self.context.lap())
                self.context.start_clock()
                return False
            pred = E[:, 0] + target
            val = self.eval_pred(self.context.live)
            extra = averages.add(pred, val)
            return self.record(pred, y, sw, val, extra)

        return callback

    def contrast_callback(self, data):
        """The per-iteration callback of the contrast solvers: solver seconds always, the
        weighted RMSE of the target residuals with ``verbose`` or a callback (then called with
        the history)."""
        from ..solvers.fm_contrast import target_residuals

        history, bar, ctx = self.history, self.bar, self.context
        verbose = self.plan.verbose

        def record(it, E=None, state=None):
            history["iter_time"].append(ctx.lap())
            if verbose or ctx.callback is not None:
                if E is None:
                    E = target_residuals(data, state)
                rmse = float(np.sqrt(np.dot(data.sw, E * E) / np.sum(data.sw)))
                history["train"].append(rmse)
                bar.set_postfix({"train": f"{rmse:.4f}"})
            bar.update(1)
            stop = ctx.notify(len(history["iter_time"]) - 1, history)
            ctx.start_clock()
            return stop

        return record


class _RunningAverages:
    """libFM's report for ALS and MCMC: the metric of the running average of the predictions
    of all iterations so far (of Phi(f) for probit), kept in ``history_["train_avg"]`` and
    ``history_["val_avg"]``."""

    def __init__(self, recorder, y, sw):
        self.recorder, self.y, self.sw = recorder, y, sw
        self.probit = recorder.plan.probit
        self.history = recorder.history
        self.evald = recorder.evald
        self.n = 0
        self.train = np.zeros(y.shape[0])
        self.val = None if self.evald is None else np.zeros(self.evald[1].shape[0])

    def _metric(self, total, target, weights):
        p = total / self.n
        if self.probit:
            return float(np.average((p > 0.5) != (target > 0), weights=weights))
        return self.recorder.metric(p, target, weights)

    def add(self, train_pred, val_pred):
        lo, hi = self.recorder.plan.clip  # each sample clipped, as in predict (and libFM)
        link = ndtr if self.probit else (lambda p: np.clip(p, lo, hi))
        self.n += 1
        self.train += link(train_pred)
        self.history["train_avg"].append(self._metric(self.train, self.y, self.sw))
        extra = {"avg": f"{self.history['train_avg'][-1]:.4f}"}
        if val_pred is not None:
            self.val += link(val_pred)
            y_val = self.evald[1]
            self.history["val_avg"].append(self._metric(self.val, y_val,
                                                        self.recorder.eval_sw))
            extra["val_avg"] = f"{self.history['val_avg'][-1]:.4f}"
        return extra
