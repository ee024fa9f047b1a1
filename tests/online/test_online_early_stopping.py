"""Early stopping and stopping callbacks in the online learners' ``fit`` (passes over the
rows; the shared rule of fmlearn._early_stopping)."""

import numpy as np
import pytest

from fmlearn import CCFMRegressor, OnlineCFMClassifier, OnlineFMRegressor


def _data(seed=0, n=400, d=30):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X[:, 0] * X[:, 1] + X[:, 2] + 0.5 * rng.normal(size=n)
    return X[:300], y[:300], X[300:], y[300:]


@pytest.mark.parametrize("Est", [OnlineFMRegressor, CCFMRegressor])
def test_fit_stops_on_the_validation_loss_and_keeps_the_best_pass(Est):
    X, y, Xv, yv = _data()
    m = Est(n_iter=40, early_stopping=True, n_iter_no_change=2, tol=0.0, random_state=0)
    m.fit(X, y, eval_set=(Xv, yv))
    val = m.history_["val"]
    assert m.early_stopping_ and len(val) == m.n_iter_
    best = int(np.argmin(val))
    assert m.best_iteration_ == best + 1
    assert m.n_iter_ == 40 or m.n_iter_ == best + 1 + 2
    # the model kept is the best pass's: its validation MSE is the recorded minimum
    mse = float(np.mean((m.predict(Xv) - yv) ** 2))
    assert mse == pytest.approx(val[best], rel=1e-9)


def test_callback_returning_true_ends_fit_after_that_pass():
    X, y, Xv, _ = _data()
    m = OnlineFMRegressor(n_iter=40, random_state=0).fit(X, y, callback=lambda i, h: i == 2)
    assert m.n_iter_ == 3 and len(m.history_["iter_time"]) == 3
    ref = OnlineFMRegressor(n_iter=3, random_state=0).fit(X, y)
    np.testing.assert_array_equal(m.predict(Xv), ref.predict(Xv))


def test_classifier_carves_a_stratified_validation_fraction():
    X, y, _, _ = _data(1)
    yc = np.where(X[:, 0] * X[:, 1] > 0, "p", "n")
    c = OnlineCFMClassifier(n_iter=30, early_stopping=True, validation_fraction=0.2,
                            random_state=0).fit(X, yc)
    assert c.history_["metric"] == "log_loss" and len(c.history_["val"]) == c.n_iter_
    assert c.best_iteration_ == int(np.argmin(c.history_["val"])) + 1
    assert c.n_iter_ < 30 or c.best_iteration_ is not None


def test_fit_without_options_has_no_validation():
    X, y, _, _ = _data()
    m = OnlineFMRegressor(n_iter=2, random_state=0).fit(X, y)
    assert m.n_iter_ == 2 and not m.early_stopping_ and "val" not in m.history_
