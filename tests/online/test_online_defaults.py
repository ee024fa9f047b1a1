"""Defaults that learn (issue 14, item 2): the trace-bounded online estimators with their
default parameters beat the trivial baseline (the training mean / majority class) by 10% on
held-out rows of generated data of several feature and target scales and class balances;
``trace_bound="auto"`` is equivariant where the model is."""

import numpy as np
import pytest

from fmlearn import CCFMClassifier, CCFMRegressor, OnlineCFMClassifier, OnlineCFMRegressor

N_TRAIN, N_TEST, D = 3000, 1500, 6


def _features(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_TRAIN + N_TEST, D))
    X[rng.random(X.shape) < 0.3] = 0.0  # some sparsity
    return X, rng


def regression(x_scale, y_scale, seed=0):
    """y = 5 + <beta, x> + x0 x1 + noise: an intercept, a linear part and an interaction."""
    X, rng = _features(seed)
    beta = rng.normal(size=D)
    y = 5.0 + X @ beta + X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=X.shape[0])
    return X * x_scale, y * y_scale


def classification(pos_rate, x_scale, seed=0):
    """Labels from a linear + interaction score thresholded at its (1 - pos_rate) quantile."""
    X, rng = _features(seed)
    score = X @ rng.normal(size=D) + 0.5 * X[:, 0] * X[:, 1]
    y = (score > np.quantile(score, 1.0 - pos_rate)).astype(int)
    return X * x_scale, y


def _split(X, y):
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]


@pytest.mark.parametrize("cls", [CCFMRegressor, OnlineCFMRegressor])
@pytest.mark.parametrize("x_scale", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("y_scale", [1e-2, 1.0, 1e2])
def test_regressor_defaults_beat_the_mean(cls, x_scale, y_scale):
    Xtr, ytr, Xte, yte = _split(*regression(x_scale, y_scale))
    m = cls(random_state=0).fit(Xtr, ytr)
    rmse = np.sqrt(np.mean((m.predict(Xte) - yte) ** 2))
    baseline = np.sqrt(np.mean((ytr.mean() - yte) ** 2))
    assert rmse <= 0.9 * baseline, (rmse, baseline, m.trace_bound_)


@pytest.mark.parametrize("cls", [CCFMClassifier, OnlineCFMClassifier])
@pytest.mark.parametrize("x_scale", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("pos_rate", [0.5, 0.1, 0.03])
def test_classifier_defaults_beat_the_majority(cls, x_scale, pos_rate):
    Xtr, ytr, Xte, yte = _split(*classification(pos_rate, x_scale))
    m = cls(random_state=0).fit(Xtr, ytr)
    pred = m.predict(Xte)
    err = np.mean(pred != yte)
    majority = np.mean(yte != np.bincount(ytr).argmax())
    assert err <= 0.9 * majority, (err, majority, m.trace_bound_)
    # the default decision is not the majority class: positives of the order of the true ones
    assert yte.sum() / 3 <= pred.sum() <= 3 * yte.sum(), (pred.sum(), yte.sum())


@pytest.mark.parametrize("cls", [CCFMRegressor, OnlineCFMRegressor])
def test_auto_rule_is_equivariant_in_the_scales_of_x_and_y(cls):
    """X -> 1000 X, y -> 100 y: the rows are rescaled to mean squared norm 1, and what the
    rule derives from y (the bound, the intercept, OnlineCFM's linear rate) scales with y.
    (The learners' paths are equivariant in exact arithmetic only: OCCFM's eigenvector choice
    flips on near ties, so rounding differences of 1e-16 change its path; predictions are
    compared by their errors.)"""
    X, y = regression(1.0, 1.0)
    Xtr, ytr, Xte, yte = _split(X, y)
    a = cls(random_state=0).fit(Xtr, ytr)
    b = cls(random_state=0).fit(Xtr * 1e3, ytr * 1e2)
    np.testing.assert_allclose(b.trace_bound_, 100 * a.trace_bound_, rtol=1e-12)
    np.testing.assert_allclose(b.x_scale_, a.x_scale_ / 1e3, rtol=1e-12)
    np.testing.assert_allclose(b.intercept_, 100 * a.intercept_, rtol=1e-12)
    if cls is OnlineCFMRegressor:
        np.testing.assert_allclose(b.learning_rate_, 100 * a.learning_rate_, rtol=1e-12)
    rmse_a = np.sqrt(np.mean((a.predict(Xte) - yte) ** 2))
    rmse_b = np.sqrt(np.mean((b.predict(Xte * 1e3) / 100 - yte) ** 2))
    assert abs(rmse_b - rmse_a) <= 0.2 * rmse_a, (rmse_a, rmse_b)


def test_auto_bound_is_chosen_by_prequential_loss_among_the_documented_candidates():
    """The resolved bound is one of delta0 x 4^k (delta0 = the targets' standard deviation
    on rows of mean squared norm 1), and an explicit bound is kept as given."""
    Xtr, ytr, _, _ = _split(*regression(1.0, 1.0))
    m = CCFMRegressor(random_state=0).fit(Xtr, ytr)
    ratios = m.trace_bound_ / ytr.std() / 4.0 ** np.arange(6)
    assert np.isclose(ratios, 1.0, rtol=1e-9).any(), m.trace_bound_
    np.testing.assert_allclose(m.x_scale_, 1 / np.sqrt(np.mean(np.sum(Xtr ** 2, axis=1))))
    e = CCFMRegressor(trace_bound=7.0, random_state=0).fit(Xtr, ytr)
    assert e.trace_bound_ == 7.0 and e.x_scale_ == 1.0


@pytest.mark.parametrize("cls", [CCFMRegressor, CCFMClassifier])
def test_intercept_is_the_running_constant_of_the_targets(cls):
    """fit_intercept: the intercept after the rows is the mean of y (regression) or the
    add-one log-odds of the classes (classification), and predictions include it."""
    X, y = (regression(1.0, 1.0) if cls is CCFMRegressor else classification(0.1, 1.0))
    m = cls(random_state=0).fit(X, y)
    if cls is CCFMRegressor:
        assert np.isclose(m.intercept_, y.mean(), rtol=1e-12)
    else:
        assert np.isclose(m.intercept_, np.log((y.sum() + 1) / ((1 - y).sum() + 1)))
    off = cls(fit_intercept=False, trace_bound=m.trace_bound_, random_state=0).fit(X, y)
    assert off.intercept_ == 0.0


@pytest.mark.parametrize("cls", [CCFMRegressor, OnlineCFMRegressor])
def test_resolved_values_round_trip_and_crafted_ones_are_refused(cls, tmp_path):
    import json
    import zipfile

    import fmlearn
    from fmlearn.exceptions import ModelFileError
    from fmlearn.io import manifest_digest

    Xtr, ytr, Xte, _ = _split(*regression(1e3, 1e2))
    m = cls(random_state=0).fit(Xtr[:500], ytr[:500])
    m.save(tmp_path / "m.fmz")
    back = fmlearn.load(tmp_path / "m.fmz")
    assert (back.trace_bound_, back.x_scale_) == (m.trace_bound_, m.x_scale_)
    np.testing.assert_array_equal(back.predict(Xte), m.predict(Xte))
    with zipfile.ZipFile(tmp_path / "m.fmz") as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    for name, bad in [("trace_bound_", -1.0), ("x_scale_", 0.0), ("intercept_stats_", [-1.0, 0.0])]:
        meta = json.loads(members["fmlearn.json"])
        meta["attributes"][name] = bad
        meta["digest"] = manifest_digest(meta)
        path = tmp_path / f"{name}.fmz"
        with zipfile.ZipFile(path, "w") as zf:
            for n, blob in members.items():
                zf.writestr(n, json.dumps(meta) if n == "fmlearn.json" else blob)
        with pytest.raises(ModelFileError, match=name):
            fmlearn.load(path)
