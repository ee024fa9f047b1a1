"""Early stopping of the convex FM's Frank-Wolfe iterations on a validation loss (the shared
rule of fmlearn._early_stopping; the duality gap's ``tol`` keeps its meaning)."""

import numpy as np
import pytest

from fmlearn import ConvexFMClassifier, ConvexFMRegressor


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(400, 30))
    y = X[:, 0] * X[:, 1] + X[:, 2] + 0.5 * rng.normal(size=400)
    return X, y


@pytest.mark.parametrize("compress", [False, True])
def test_stops_and_keeps_the_best_iterate(compress):
    X, y = _data()
    # a loose trace bound: the iterates overfit 300 rows, the validation loss turns up
    m = ConvexFMRegressor(trace_bound=200.0, max_iter=100, tol=0, early_stopping=True,
                          n_iter_no_change=3, compress=compress, random_state=0)
    m.fit(X[:300], y[:300], eval_set=(X[300:], y[300:]))
    losses = m.history_["val_loss"]
    best = int(np.argmin(losses))
    assert m.early_stopping_ and m.n_iter_ < 100 and len(losses) == m.n_iter_
    assert m.best_iteration_ == best and m.n_iter_ == best + 3 + 1
    # the iterate kept is the recorded best: its validation loss (compressing the atoms
    # changes only the rounding)
    mse = float(np.mean((m.predict(X[300:]) - y[300:]) ** 2))
    assert mse == pytest.approx(losses[best], rel=1e-9)
    assert m.objective_ == m.history_["objective"][best]


def test_classifier_carves_a_validation_fraction():
    X, y = _data(1)
    yc = np.where(X[:, 0] * X[:, 1] > 0, "a", "b")
    c = ConvexFMClassifier(trace_bound=50.0, max_iter=60, tol=0, early_stopping=True,
                           random_state=0).fit(X, yc)
    assert len(c.history_["val_loss"]) == c.n_iter_ < 60
    assert c.best_iteration_ == int(np.argmin(c.history_["val_loss"]))
