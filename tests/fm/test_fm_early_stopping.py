"""Early stopping, callbacks that stop, the MCMC R-hat and eval_set through a Pipeline for
the classic FM (the shared rule of fmlearn._early_stopping)."""

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline as sk_make_pipeline

from fmlearn import FMClassifier, FMRegressor


def _overfit_data(seed=0, n=120, d=40):
    """Few rows, many features, noisy targets: an unregularised FM overfits, so the
    validation loss has an interior minimum."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + 80, d))
    y = X[:, 0] * X[:, 1] + X[:, 2] + 0.5 * rng.normal(size=n + 80)
    return X[:n], y[:n], X[n:], y[n:]


def _mse(m, X, y):
    return float(np.mean((m.predict(X) - y) ** 2))


@pytest.mark.parametrize("solver,kw", [("als", {}),
                                       ("sgd", {"learning_rate": 0.02, "average_epochs": 1})])
def test_early_stopping_keeps_the_best_iteration(solver, kw):
    X, y, Xv, yv = _overfit_data()
    m = FMRegressor(n_factors=4, solver=solver, n_iter=300, early_stopping=True,
                    n_iter_no_change=3, tol=0.0, random_state=0, **kw)
    m.fit(X, y, eval_set=(Xv, yv))
    losses = m.history_["val_loss"]
    assert m.early_stopping_ and m.n_iter_ < 300 and len(losses) == m.n_iter_
    best = int(np.argmin(losses))
    assert m.best_iteration_ == best + 1 == m.history_["best_iteration"] + 1
    # the rule: stopped n_iter_no_change iterations after the best one
    assert m.n_iter_ == best + 1 + 3
    # the model kept is the best iteration's: its validation loss is the recorded minimum
    # (the same predictions, up to the summation order of predict's kernel)
    assert _mse(m, Xv, yv) == pytest.approx(losses[best], rel=1e-9)
    assert losses[best] < losses[-1]


def test_early_stopping_carves_a_validation_fraction():
    X, y, _, _ = _overfit_data()
    kw = dict(n_factors=4, solver="als", n_iter=300, early_stopping=True, n_iter_no_change=3,
              validation_fraction=0.25, random_state=3)
    a = FMRegressor(**kw).fit(X, y)
    b = FMRegressor(**kw).fit(X, y)
    assert a.n_iter_ < 300 and len(a.history_["val_loss"]) == a.n_iter_
    np.testing.assert_array_equal(a.V_, b.V_)  # the split is drawn from random_state
    # another random_state carves other rows
    assert a.history_["val"] != FMRegressor(**{**kw, "random_state": 4}).fit(X, y).history_["val"]


def test_classifier_early_stopping_on_log_loss():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 30))
    yc = np.where(X[:, 0] * X[:, 1] + 0.8 * rng.normal(size=300) > 0, "a", "b")
    c = FMClassifier(n_factors=4, solver="sgd", learning_rate=0.05, average_epochs=1,
                     n_iter=300, early_stopping=True, n_iter_no_change=3,
                     random_state=0).fit(X[:200], yc[:200], eval_set=(X[200:], yc[200:]))
    assert c.n_iter_ < 300
    p = c.predict_proba(X[200:])[:, 1]
    t = yc[200:] == c.classes_[1]
    log_loss = -np.mean(np.log(np.where(t, p, 1 - p)))
    assert log_loss == pytest.approx(min(c.history_["val_loss"]), rel=1e-6)


def test_fit_without_early_stopping_runs_every_iteration():
    X, y, Xv, yv = _overfit_data()
    m = FMRegressor(n_factors=4, solver="als", n_iter=30, random_state=0)
    m.fit(X, y, eval_set=(Xv, yv))
    assert m.n_iter_ == 30 and not m.early_stopping_ and m.best_iteration_ is None
    assert "val_loss" not in m.history_


@pytest.mark.parametrize("solver,kw", [
    ("als", {}),
    ("sgd", {"learning_rate": 0.02, "average_epochs": 1}),
    ("mcmc", {"n_burn_in": 2, "n_kept_samples": 50}),
])
def test_callback_returning_true_stops_cleanly(solver, kw):
    X, y, Xv, _ = _overfit_data()
    seen = []

    def stop_at_3(i, history):
        seen.append(i)
        return i == 3

    m = FMRegressor(n_factors=3, solver=solver, n_iter=50, random_state=0, **kw)
    m.fit(X, y, callback=stop_at_3)
    assert seen == [0, 1, 2, 3] and m.n_iter_ == 4
    # the model is the one a 4-iteration fit ends with
    ref = FMRegressor(n_factors=3, solver=solver, n_iter=4, random_state=0, **kw).fit(X, y)
    np.testing.assert_allclose(m.predict(Xv), ref.predict(Xv), rtol=1e-12, atol=1e-12)


def test_mcmc_stopped_within_burn_in_predicts():
    X, y, Xv, _ = _overfit_data()
    m = FMRegressor(n_factors=3, n_iter=50, n_burn_in=20, random_state=0)
    m.fit(X, y, callback=lambda i, h: i == 2)
    assert m.n_iter_ == 3 and m.samples_V_.shape[0] == 1
    assert np.all(np.isfinite(m.predict(Xv)))


def test_mcmc_refuses_early_stopping_and_reports_split_rhat():
    X, y, Xv, yv = _overfit_data()
    with pytest.raises(ValueError, match="R-hat"):
        FMRegressor(solver="mcmc", early_stopping=True).fit(X, y)
    m = FMRegressor(n_factors=2, n_iter=60, n_burn_in=10, random_state=0)
    m.fit(X, y, eval_set=(Xv, yv))
    rhat, med = m.history_["val_rhat"], m.history_["val_rhat_median"]
    assert np.isfinite(rhat) and 1.0 - 0.2 < med <= rhat
    short = FMRegressor(n_factors=2, n_iter=12, n_burn_in=10, random_state=0)
    assert np.isnan(short.fit(X, y, eval_set=(Xv, yv)).history_["val_rhat"])


def _table(seed, n):
    rng = np.random.default_rng(seed)
    city = rng.choice(["Oslo", "Rome", "Lima"], size=n)
    x = rng.normal(size=n)
    X = np.empty((n, 2), dtype=object)
    X[:, 0], X[:, 1] = city, x
    y = 2.0 * x + (city == "Oslo") + 0.1 * rng.normal(size=n)
    return X, y


def test_eval_set_through_a_pipeline_is_transformed_by_the_fitted_steps():
    from fmlearn.encoders import TabularEncoder
    from fmlearn.pipeline import Pipeline, make_pipeline

    X, y = _table(0, 300)
    Xv, yv = _table(1, 100)
    enc = {1: "numeric"}
    # scikit-learn's Pipeline passes the raw rows
    with pytest.raises(ValueError, match="could not convert string"):
        sk_make_pipeline(TabularEncoder(enc), FMRegressor(solver="als", n_iter=3)).fit(
            X, y, fmregressor__eval_set=(Xv, yv))
    pipe = make_pipeline(TabularEncoder(enc), FMRegressor(n_factors=2, solver="als",
                                                          n_iter=10, random_state=0))
    assert isinstance(pipe, Pipeline)
    pipe.fit(X, y, fmregressor__eval_set=(Xv, yv))
    fm = pipe[-1]
    assert len(fm.history_["val"]) == 10
    rmse = np.sqrt(np.mean((pipe.predict(Xv) - yv) ** 2))
    assert fm.history_["val"][-1] == pytest.approx(rmse, rel=1e-9)
    # early stopping through the pipeline reads the same transformed rows
    pipe.set_params(fmregressor__early_stopping=True, fmregressor__n_iter=200)
    pipe.fit(X, y, fmregressor__eval_set=(Xv, yv))
    assert pipe[-1].n_iter_ < 200


def test_callback_stops_a_fit_on_contrasts():
    import scipy.sparse as sp

    X, y, _, _ = _overfit_data()
    C = sp.identity(X.shape[0], format="csr")
    m = FMRegressor(n_factors=2, solver="als", n_iter=50, random_state=0)
    m.fit(X, y, contrasts=C, callback=lambda i, h: i == 4)
    assert m.n_iter_ == 5 and len(m.history_["train"]) == 5
    with pytest.raises(ValueError, match="early_stopping"):
        FMRegressor(solver="als", early_stopping=True).fit(X, y, contrasts=C)
