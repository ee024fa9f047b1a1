"""Defaults that learn (issue 14, item 2): the batch estimators with their default parameters
(only ``random_state`` set) beat the trivial baseline (the training mean's RMSE, the majority
class's error rate) by at least 10% on held-out rows, whatever the units of X and y and the
class balance. The targets are mostly pairwise (y = x0 x1 + x2 x3 + 0.3 x4): a default whose
trace bound or initial scale ignores the units fits only the linear part, and fails."""

import numpy as np
import pytest

import fmlearn

N_TRAIN, N_TEST, D = 600, 1500, 6
BAR = 0.9


def _features(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_TRAIN + N_TEST, D))
    score = X[:, 0] * X[:, 1] + X[:, 2] * X[:, 3] + 0.3 * X[:, 4]
    return X, score, rng


def _regression(x_scale, y_scale):
    X, score, rng = _features()
    y = score + 0.1 * rng.standard_normal(score.shape[0])
    return X * x_scale, y * y_scale


def _classification(x_scale, positive_share):
    X, score, _ = _features(1)
    # The share of positives is set on the whole sample, so train and test have the same one.
    y = (score > np.quantile(score, 1.0 - positive_share)).astype(int)
    return X * x_scale, y


def _split(X, y):
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]


REGRESSORS = [fmlearn.FMRegressor, fmlearn.GFMRegressor, fmlearn.IFMRegressor,
              fmlearn.ConvexFMRegressor]
CLASSIFIERS = [fmlearn.FMClassifier, fmlearn.ConvexFMClassifier]


@pytest.mark.parametrize("x_scale", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("y_scale", [1e-2, 1.0, 1e2])
@pytest.mark.parametrize("cls", REGRESSORS, ids=lambda c: c.__name__)
def test_regressor_defaults_beat_the_mean(cls, x_scale, y_scale):
    Xtr, ytr, Xte, yte = _split(*_regression(x_scale, y_scale))
    model = cls(random_state=0).fit(Xtr, ytr)
    rmse = np.sqrt(np.mean((model.predict(Xte) - yte) ** 2))
    baseline = np.sqrt(np.mean((ytr.mean() - yte) ** 2))
    assert rmse <= BAR * baseline, (rmse, baseline)


@pytest.mark.parametrize("x_scale", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("positive_share", [0.5, 0.1, 0.03])
@pytest.mark.parametrize("cls", CLASSIFIERS, ids=lambda c: c.__name__)
def test_classifier_defaults_beat_the_majority(cls, x_scale, positive_share):
    Xtr, ytr, Xte, yte = _split(*_classification(x_scale, positive_share))
    model = cls(random_state=0).fit(Xtr, ytr)
    pred = model.predict(Xte)
    error = np.mean(pred != yte)
    majority = np.bincount(ytr).argmax()
    baseline = np.mean(yte != majority)
    assert error <= BAR * baseline, (error, baseline)
    # The decision is not the majority class: positives are predicted where they are.
    assert np.sum(pred[yte == 1] == 1) >= 0.5 * np.sum(yte == 1)
