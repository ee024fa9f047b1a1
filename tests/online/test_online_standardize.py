"""``standardize`` of the online estimators (fmlearn.online._base): the defaults learn on raw,
unscaled dense features; the statistics come from the first batch and stay frozen; they are
saved and checked on load; a failing call changes nothing; the fitted model in the
coordinates of X gives the predictions."""

import numpy as np
import pytest
import scipy.sparse as sp
from online_cases import assert_same_dict, snapshot_dict

from fmlearn import (
    CCFMClassifier,
    CCFMRegressor,
    OnlineCFMClassifier,
    OnlineCFMRegressor,
    OnlineFMClassifier,
    OnlineFMRegressor,
    load,
)

REGRESSORS = [OnlineFMRegressor, OnlineCFMRegressor, CCFMRegressor]
CLASSIFIERS = [OnlineFMClassifier, OnlineCFMClassifier, CCFMClassifier]
SIGMA = 0.5  # the noise of the regression targets


def unscaled(n=3000, seed=0):
    """Features on very different scales and far from 0 (a column around 5e3 of spread 1e3,
    one around 3e-2 of spread 1e-2, two of unit spread around 10), and the standardised
    features z the targets are made from: y = 2 z0 - 1.5 z1 + z2 + 0.5 z0 z3 + noise."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 4))
    X = np.column_stack([5e3 + 1e3 * z[:, 0], 3e-2 + 1e-2 * z[:, 1], 10 + z[:, 2],
                         10 + z[:, 3]])
    f = 2 * z[:, 0] - 1.5 * z[:, 1] + z[:, 2] + 0.5 * z[:, 0] * z[:, 3]
    return X, f, rng


@pytest.mark.parametrize("cls", REGRESSORS)
def test_default_regressor_learns_raw_unscaled_features(cls):
    """The signal f has variance 4 + 2.25 + 1 + 0.25 = 7.5, the noise SIGMA^2: the mean
    predicts with RMSE sqrt(7.5 + 0.25) = 2.78, the true model with 0.5. The default must close
    at least 80% of the gap between them on held-out rows."""
    X, f, rng = unscaled()
    y = f + SIGMA * rng.normal(size=f.shape[0])
    tr, te = slice(0, 2000), slice(2000, None)
    m = cls(random_state=0).fit(X[tr], y[tr])
    rmse = np.sqrt(np.mean((m.predict(X[te]) - y[te]) ** 2))
    mean = np.sqrt(np.mean((y[tr].mean() - y[te]) ** 2))
    assert rmse <= SIGMA + 0.2 * (mean - SIGMA), (rmse, mean)
    assert m.mean_.shape == (4,) and m.scale_.shape == (4,)


@pytest.mark.parametrize("cls", CLASSIFIERS)
def test_default_classifier_learns_raw_unscaled_features(cls):
    """Labels of a logistic model on the signal f (slope 3): the Bayes error is E[sigmoid(-3|f|)]
    (about 0.07 here), the majority class's about 0.5. The default must close at least 70% of
    the gap on held-out rows."""
    X, f, rng = unscaled()
    p = 1 / (1 + np.exp(-3 * f))
    y = (rng.random(f.shape[0]) < p).astype(int)
    bayes = float(np.mean(1 / (1 + np.exp(3 * np.abs(f)))))
    tr, te = slice(0, 2000), slice(2000, None)
    m = cls(random_state=0).fit(X[tr], y[tr])
    err = np.mean(m.predict(X[te]) != y[te])
    majority = np.mean(y[te] != np.bincount(y[tr]).argmax())
    assert err <= bayes + 0.3 * (majority - bayes), (err, bayes, majority)


@pytest.mark.parametrize("cls", [OnlineFMRegressor, OnlineCFMRegressor, CCFMRegressor])
def test_statistics_are_frozen_after_the_first_batch(cls):
    X, f, rng = unscaled(600)
    y = f + SIGMA * rng.normal(size=f.shape[0])
    m = cls(random_state=0).partial_fit(X[:100], y[:100])
    mean, scale = m.mean_.copy(), m.scale_.copy()
    np.testing.assert_allclose(mean, X[:100].mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(scale, X[:100].std(axis=0), rtol=1e-12)
    m.partial_fit(X[100:] * 3.0 + 7.0, y[100:])  # a batch of another scale
    np.testing.assert_array_equal(m.mean_, mean)
    np.testing.assert_array_equal(m.scale_, scale)
    # partial_fit after fit keeps fit's statistics; a fresh fit derives them again
    m = cls(random_state=0).fit(X, y)
    mean = m.mean_.copy()
    m.partial_fit(X[:50] * 10.0, y[:50])
    np.testing.assert_array_equal(m.mean_, mean)
    m.fit(X[:100], y[:100])
    np.testing.assert_allclose(m.mean_, X[:100].mean(axis=0), rtol=1e-12)
    # warm_start keeps them
    m.set_params(warm_start=True).fit(X[100:] * 2.0, y[100:])
    np.testing.assert_allclose(m.mean_, X[:100].mean(axis=0), rtol=1e-12)


def test_sparse_input_is_learned_as_given_and_true_centres_it():
    X, f, rng = unscaled(400)
    y = f + SIGMA * rng.normal(size=f.shape[0])
    Xs = sp.csr_matrix(X)
    a = OnlineFMRegressor(random_state=0).fit(Xs, y)
    b = OnlineFMRegressor(standardize=False, random_state=0).fit(Xs, y)
    assert "mean_" not in vars(a)
    np.testing.assert_array_equal(a.predict(Xs), b.predict(Xs))
    c = OnlineFMRegressor(standardize=True, random_state=0).fit(Xs, y)
    d = OnlineFMRegressor(random_state=0).fit(X, y)
    np.testing.assert_allclose(c.mean_, d.mean_, rtol=1e-12)
    np.testing.assert_allclose(c.predict(Xs), d.predict(X), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("cls", REGRESSORS + CLASSIFIERS)
def test_same_random_state_same_model(cls):
    X, f, rng = unscaled(500)
    y = (f > 0).astype(int) if cls in CLASSIFIERS else f
    a = cls(random_state=3).fit(X, y)
    b = cls(random_state=3).fit(X, y)
    np.testing.assert_array_equal(a.decision_function(X) if cls in CLASSIFIERS
                                  else a.predict(X),
                                  b.decision_function(X) if cls in CLASSIFIERS
                                  else b.predict(X))


@pytest.mark.parametrize("cls", [OnlineFMClassifier, OnlineCFMRegressor, CCFMClassifier])
def test_save_load_round_trip_and_crafted_statistics(cls, tmp_path):
    X, f, rng = unscaled(500)
    y = (f > 0).astype(int) if cls in CLASSIFIERS else f
    m = cls(random_state=0).fit(X, y)
    path = tmp_path / "m.fmlearn"
    m.save(path)
    back = load(path)
    np.testing.assert_array_equal(back.mean_, m.mean_)
    np.testing.assert_array_equal(back.scale_, m.scale_)
    np.testing.assert_array_equal(back.predict(X), m.predict(X))
    back.partial_fit(X[:20], y[:20])  # the stream goes on with the saved statistics
    m.partial_fit(X[:20], y[:20])
    np.testing.assert_array_equal(back.predict(X), m.predict(X))
    for name, value in (("scale_", -m.scale_), ("scale_", m.scale_[:-1]),
                        ("mean_", np.full(4, np.inf))):
        bad = load(path)
        setattr(bad, name, value)
        bad.save(tmp_path / "bad.fmlearn")
        with pytest.raises(ValueError, match=name):
            load(tmp_path / "bad.fmlearn")


@pytest.mark.parametrize("cls", [OnlineFMRegressor, OnlineCFMClassifier, CCFMRegressor])
def test_failing_call_leaves_the_estimator_unchanged(cls):
    X, f, rng = unscaled(300)
    y = (f > 0).astype(int) if cls in CLASSIFIERS else f
    m = cls(random_state=0)
    bad = X[:50].copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError):
        m.partial_fit(bad, y[:50])
    assert "mean_" not in vars(m)
    m.partial_fit(X[:100], y[:100])
    before = snapshot_dict(m)
    with pytest.raises(ValueError):
        m.partial_fit(bad, y[:50])
    huge = X[100:150].copy()
    huge[:, 1] = 1e307  # finite, but (x - mean) / scale (scale about 1e-2) overflows
    with pytest.raises(ValueError, match="overflow"):
        m.partial_fit(huge, y[100:150])
    assert_same_dict(m, before)


def test_fitted_model_in_the_coordinates_of_x_gives_the_predictions():
    X, f, rng = unscaled(800)
    y = f + SIGMA * rng.normal(size=f.shape[0])
    fm = OnlineFMRegressor(random_state=0, clip_predictions=False).fit(X, y)
    q = X @ fm.V_
    pair = 0.5 * ((q ** 2).sum(axis=1) - (X ** 2) @ (fm.V_ ** 2).sum(axis=1))
    np.testing.assert_allclose(fm.w0_ + X @ fm.w_ + pair, fm.predict(X), rtol=1e-6, atol=1e-6)

    cfm = OnlineCFMRegressor(random_state=0, clip_predictions=False).fit(X, y)
    W = cfm.interaction_matrix()
    quad = np.einsum("ij,jk,ik->i", X, W - np.diag(np.diag(W)), X)
    np.testing.assert_allclose(cfm.intercept_ + cfm.w0_ + X @ cfm.w_ + 0.5 * quad,
                               cfm.predict(X), rtol=1e-6, atol=1e-6)

    for si in (True, False):
        cc = CCFMRegressor(random_state=0, clip_predictions=False, self_interaction=si)
        cc.fit(X, y)
        C = cc.augmented_matrix()
        Xh = np.column_stack([X, np.ones(X.shape[0])])
        Z = C if si else C - np.diag(np.concatenate([np.diag(C)[:-1], [0.0]]))
        pred = cc.intercept_ + 0.5 * np.einsum("ij,jk,ik->i", Xh, Z, Xh)
        np.testing.assert_allclose(pred, cc.predict(X), rtol=1e-6, atol=1e-6)
