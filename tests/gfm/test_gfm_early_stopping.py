"""Early stopping of the gFM / iFM passes over the batches (the shared rule of
fmlearn._early_stopping; the passes' own ``tol`` keeps its meaning)."""

import warnings

import numpy as np
import pytest

from fmlearn import GFMRegressor, IFMRegressor
from fmlearn.datasets import make_gfm


@pytest.mark.parametrize("Est", [GFMRegressor, IFMRegressor])
def test_passes_stop_on_the_validation_loss_and_keep_the_best(Est):
    X, y, _ = make_gfm(3000, 20, 2, random_state=0)
    y = y + np.random.default_rng(0).normal(size=y.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = Est(n_factors=2, batch_size=1000, max_iter=40, tol=None, random_state=0).fit(
            X[:2000], y[:2000], eval_set=(X[2000:], y[2000:]))
        m = Est(n_factors=2, batch_size=1000, max_iter=40, tol=None, early_stopping=True,
                n_iter_no_change=2, random_state=0).fit(X[:2000], y[:2000],
                                                        eval_set=(X[2000:], y[2000:]))
    assert full.n_passes_ == 40 and not full.early_stopping_
    losses = m.history_["val_loss"]
    assert m.early_stopping_ and m.n_passes_ < 40 and len(losses) == m.n_passes_
    best = int(np.argmin(losses))
    assert m.best_iteration_ == best + 1 and m.n_passes_ == best + 1 + 2
    mse = float(np.mean((m.predict(X[2000:]) - y[2000:]) ** 2))
    assert mse == pytest.approx(losses[best], rel=1e-9)


def test_validation_fraction_is_carved_from_the_rows():
    X, y, _ = make_gfm(3000, 20, 2, random_state=1)
    y = y + np.random.default_rng(1).normal(size=y.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = GFMRegressor(n_factors=2, batch_size=500, max_iter=40, tol=None,
                         early_stopping=True, validation_fraction=0.2,
                         random_state=0).fit(X, y)
    # 2400 training rows in batches of 500: 4 batches per pass
    assert m.n_iter_ == 4 * m.n_passes_ and m.n_passes_ < 40
    assert len(m.history_["val_loss"]) == m.n_passes_
