"""fmlearn._early_stopping, the early stopping shared by the iterative estimators: the
resolution of "auto", scikit-learn's stopping rule (SGDClassifier's, on a validation score),
the best state kept, the callback, and the stratified validation split."""

import numpy as np
import pytest

from fmlearn._early_stopping import (
    AUTO_MIN_SAMPLES,
    SCORES,
    EarlyStopping,
    resolve_stopping,
    validation_split,
)


def _rule(**kw):
    base = dict(early_stopping=True, validation_fraction=0.1, n_iter_no_change=2, tol=0.0,
                score="log_loss", n_samples=100, has_eval_set=False)
    base.update(kw)
    return resolve_stopping(**base)


def _run(rule, scores, callback=None):
    """Feed validation scores to a monitor whose 'state' is the iteration number; return
    (iterations run, monitor)."""
    state = {"it": None}
    mon = EarlyStopping(rule, callback=callback, copy_state=lambda: state["it"])
    for it, val in enumerate(scores):
        state["it"] = it
        if mon.end_iteration(it, seconds=0.0, train=1.0, val=val):
            return it + 1, mon
    return len(scores), mon


def test_auto_follows_histgradientboosting():
    assert not _rule(early_stopping="auto", n_samples=AUTO_MIN_SAMPLES).active
    assert _rule(early_stopping="auto", n_samples=AUTO_MIN_SAMPLES + 1).active
    with_eval = _rule(early_stopping="auto", n_samples=10, has_eval_set=True)
    assert with_eval.active and not with_eval.split
    assert _rule(early_stopping=True).split
    off = _rule(early_stopping=False, has_eval_set=True)
    assert not off.active and not off.split


def test_rule_stops_after_n_iter_no_change_and_keeps_the_best():
    # improvements: 0.5, 0.4, 0.39 (> tol 0.005 below 0.4? no: 0.01 > 0.005, yes), then 2 without
    scores = [0.5, 0.4, 0.39, 0.392, 0.391, 0.2]
    n, mon = _run(_rule(n_iter_no_change=2, tol=0.005), scores)
    assert n == 5 and mon.stopped_early
    assert mon.best_iteration == 2 and mon.best_state == 2 and mon.best_score == 0.39
    # an improvement smaller than tol counts as none, but is still the best model
    n, mon = _run(_rule(n_iter_no_change=2, tol=0.05), [0.5, 0.48, 0.47, 0.1])
    assert n == 3 and mon.best_iteration == 2


def test_libffm_auto_stop_is_one_iteration_without_change():
    """LIBFFM's --auto-stop: stop at the first rise and keep the previous model."""
    n, mon = _run(_rule(n_iter_no_change=1, tol=0.0), [0.5, 0.4, 0.3, 0.31, 0.2])
    assert n == 4 and mon.best_iteration == 2 and mon.keeps_best()


def test_greater_is_better_scores():
    n, mon = _run(_rule(score="roc_auc", n_iter_no_change=1), [0.7, 0.8, 0.79, 0.9])
    assert n == 3 and mon.best_iteration == 1


def test_inactive_rule_only_records_and_callback_can_stop():
    calls = []

    def callback(it, history):
        calls.append((it, list(history["val"])))
        return it == 2

    n, mon = _run(_rule(early_stopping=False), [0.5, 0.6, 0.7, 0.8], callback=callback)
    assert n == 3 and not mon.keeps_best() and not mon.stopped_early
    assert calls[-1] == (2, [0.5, 0.6, 0.7])
    assert mon.history["metric"] == "log_loss" and len(mon.history["train"]) == 3


def test_callback_stops_on_a_numpy_true():
    # a comparison of numpy scores returns numpy's bool_, which is not the object True
    n, _ = _run(_rule(early_stopping=False), [0.5, 0.4, 0.3, 0.2],
                callback=lambda it, h: np.float64(h["val"][-1]) < 0.35)
    assert n == 3


def test_non_finite_score_counts_as_no_improvement():
    n, mon = _run(_rule(n_iter_no_change=2), [0.5, np.nan, np.inf, 0.1])
    assert n == 3 and mon.best_iteration == 0


def test_callback_must_be_callable():
    with pytest.raises(TypeError, match="callback must be callable"):
        EarlyStopping(_rule(), callback=3)


def test_unknown_score_is_refused():
    with pytest.raises(ValueError, match="unknown validation score"):
        _rule(score="accuracy")


def test_validation_split_is_stratified_disjoint_and_seeded():
    y = np.array([1] * 30 + [-1] * 70)
    train, val = validation_split(100, 0.2, 7, y)
    assert val.shape[0] == 20 and np.sum(y[val] == 1) == 6  # the class shares are kept
    assert np.intersect1d(train, val).shape[0] == 0 and train.shape[0] + val.shape[0] == 100
    again = validation_split(100, 0.2, 7, y)
    np.testing.assert_array_equal(val, again[1])
    assert not np.array_equal(val, validation_split(100, 0.2, 8, y)[1])


def test_validation_split_refuses_empty_sides_and_single_row_classes():
    with pytest.raises(ValueError, match="early stopping needs both"):
        validation_split(1, 0.5, 0)
    with pytest.raises(ValueError, match="stratified validation set"):
        validation_split(10, 0.2, 0, np.array([1] + [0] * 9))


def test_scores_agree_with_scikit_learn():
    from sklearn.metrics import log_loss, mean_squared_error, roc_auc_score

    rng = np.random.default_rng(0)
    y = np.where(rng.random(200) < 0.3, 1.0, -1.0)
    s = rng.normal(size=200)
    w = rng.random(200)
    p = 1 / (1 + np.exp(-s))
    assert SCORES["log_loss"][0](y, s, w) == pytest.approx(log_loss(y > 0, p, sample_weight=w))
    assert SCORES["roc_auc"][0](y, s) == pytest.approx(roc_auc_score(y > 0, s))
    assert SCORES["squared_error"][0](y, s, w) == pytest.approx(
        mean_squared_error(y, s, sample_weight=w))


def test_split_rhat_against_its_definition():
    from fmlearn._early_stopping import split_rhat

    rng = np.random.default_rng(0)
    iid = rng.normal(size=(2000, 3))
    assert np.all(np.abs(split_rhat(iid) - 1.0) < 0.01)
    drift = np.linspace(0.0, 10.0, 200)[:, None] + rng.normal(size=(200, 1))
    assert split_rhat(drift)[0] > 2.0
    # hand computation: halves [1, 2], [3, 4]: W = 0.5, B = 2 * var([1.5, 3.5]) = 4,
    # var+ = (1/2) 0.5 + 4 / 2 = 2.25, R-hat = sqrt(2.25 / 0.5)
    np.testing.assert_allclose(split_rhat(np.array([[1.0], [2.0], [3.0], [4.0]])),
                               [np.sqrt(4.5)])
    assert np.isnan(split_rhat(np.ones((3, 1))))[0]
