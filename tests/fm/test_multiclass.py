"""Multiclass FMClassifier (one-vs-rest inside; fmlearn.fm._multiclass): the same scores as
scikit-learn's OneVsRestClassifier around the binary classifier with every solver, proper
probabilities, a failed call that changes nothing, and the safe model format."""

import numpy as np
import pytest
from sklearn.multiclass import OneVsRestClassifier

import fmlearn
from fmlearn import FMClassifier

SOLVERS = {"sgd": {"n_iter": 10}, "als": {"n_iter": 8, "reg_linear": 0.1, "reg_pairwise": 0.1},
           "mcmc": {"n_iter": 20}, "vb": {"n_iter": 15}}


def _data(seed=0, n=240):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = np.array(["low", "mid", "high"])[np.digitize(X[:, 0] + X[:, 1] * X[:, 2], [-0.5, 0.5])]
    return X, y


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_one_vs_rest_inside_equals_sklearn_wrapper(solver):
    X, y = _data()
    kw = dict(n_factors=2, solver=solver, random_state=0, **SOLVERS[solver])
    ours = FMClassifier(**kw).fit(X, y)
    ovr = OneVsRestClassifier(FMClassifier(**kw)).fit(X, y)
    np.testing.assert_array_equal(ours.classes_, ovr.classes_)
    np.testing.assert_allclose(ours.decision_function(X), ovr.decision_function(X),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(ours.predict(X), ovr.predict(X))
    P = ours.predict_proba(X)
    assert P.shape == (X.shape[0], 3) and np.all(P >= 0)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    assert np.mean(ours.predict(X) == y) > 0.6


def test_failed_multiclass_fit_changes_nothing_and_round_trips(tmp_path):
    X, y = _data()
    clf = FMClassifier(2, solver="als", n_iter=5, random_state=0).fit(X, y)
    before = clf.decision_function(X)
    bad = X.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clf.fit(bad, y)  # a call that fails leaves the fitted model as it was
    np.testing.assert_array_equal(clf.decision_function(X), before)
    assert clf.w_.shape == (3, 4) and clf.V_.shape == (3, 4, 2)
    back = fmlearn.load(clf.save(tmp_path / "m.fmz"))
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))
    np.testing.assert_array_equal(back.classes_, clf.classes_)


def test_binary_only_estimators_name_one_vs_rest():
    X, y = _data()
    with pytest.raises(ValueError, match="OneVsRestClassifier"):
        fmlearn.OnlineFMClassifier().fit(X, y)
