"""Failure atomicity (issue 10, deliverable 2): a fit, partial_fit or warm start that raises
leaves every attribute of a batch estimator exactly as before.

For each batch estimator (classic FM with each solver, GFM, iFM, sensing, convex FM) and each
failure kind: divergence on wider data or new labels under warm start (the issue's repro: the
old code kept the new ``n_features_in_`` / ``classes_`` and then read out of bounds), bad input
found after validation already looked at X, and an interrupt raised late (after the solver
has written part of the new state). The whole ``__dict__`` is compared, arrays exactly.
The online estimators' ``partial_fit`` keeps its own transaction (branch ``online``).
"""

import math
import warnings

import numpy as np
import pytest

import fmlearn
import fmlearn._base as base
from fmlearn.exceptions import DivergenceError
from hardening import data, estimators, fitted, is_online

BATCH = sorted(name for name in estimators() if not is_online(name))

# A method each family calls at the end of a step, when part of the new state is written.
LATE_HOOK = {
    "FMRanker": "_store",
    "FM": "_store",
    "FFM": "_publish",
    "GFM": "_store_state",
    "IFM": "_store_state",
    "Symmetric": "_store_state",
    "Phase": "_store_state",
    "Asymmetric": "_store",
}


def _same(a, b, where):
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b, strict=True)):
            _same(u, v, f"{where}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), where
    else:
        assert a is b or a == b, where


def assert_unchanged(before, est):
    after = vars(est)
    assert set(after) == set(before), (set(after) ^ set(before))
    for name in before:
        _same(before[name], after[name], name)


def _snapshot(est):
    return base._snapshot(vars(est))


def _call(est, method, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(est, method)(X, y, **kw)


def _wider_failing(name, scale=1e160, labels=False):
    _, kind = estimators()[name]
    X2, y2 = data(kind, d=8, seed=1)
    if labels:  # new labels the model never saw
        y2 = np.where(y2 > 0, 5.0, 7.0)
    return X2 * scale, y2


@pytest.mark.parametrize("name", BATCH)
def test_diverging_warm_start_on_wider_data_keeps_the_model(name):
    model, X, y = fitted(name)
    model.set_params(warm_start=True)
    before = _snapshot(model)
    pred = model.predict(X)
    X2, y2 = _wider_failing(name, labels=estimators()[name][1] == "clf")
    # Diverges, or is refused as too large for the squares the one-pass moments need: either
    # way the call fails after validation has seen the new width.
    with pytest.raises((DivergenceError, ValueError)):
        _call(model, "fit", X2, y2)
    assert_unchanged(before, model)
    # and the model still works on its own data (the old bug: it refused it, or segfaulted)
    np.testing.assert_array_equal(model.predict(X), pred)


@pytest.mark.parametrize("name", BATCH)
def test_bad_input_found_late_keeps_the_model(name):
    model, X, y = fitted(name)
    model.set_params(warm_start=True)
    before = _snapshot(model)
    X2, y2 = _wider_failing(name, scale=1.0, labels=estimators()[name][1] == "clf")
    # X and y pass validation (which records the new width and labels); the weights do not
    with pytest.raises(ValueError, match="sample_weight"):
        _call(model, "fit", X2, y2, sample_weight=-np.ones(X2.shape[0]))
    assert_unchanged(before, model)
    if hasattr(model, "partial_fit"):
        with pytest.raises(ValueError):
            _call(model, "partial_fit", X2, y2)
        assert_unchanged(before, model)


@pytest.mark.parametrize("method", ["fit", "partial_fit"])
@pytest.mark.parametrize("name", BATCH)
def test_interrupt_after_the_solver_wrote_state_keeps_the_model(name, method, monkeypatch):
    model, X, y = fitted(name)
    if not hasattr(model, method):
        pytest.skip(f"{name} has no {method}")
    model.set_params(warm_start=True)
    before = _snapshot(model)
    cls = type(model)
    hook = next((h for prefix, h in LATE_HOOK.items() if name.startswith(prefix)), None)
    # the classic FM writes its learned attributes in its plan's commit (there is no _store)
    if name.startswith(("FMRegressor", "FMClassifier")):
        from fmlearn.fm._plan import ClassicFMPlan as cls

        hook = "commit"
    if hook is not None:
        original = getattr(cls, hook)

        def interrupted(self, *args, **kwargs):
            original(self, *args, **kwargs)  # the new state is (partly) written
            raise KeyboardInterrupt

        monkeypatch.setattr(cls, hook, interrupted)
    else:  # convex: the solver returns, then Ctrl-C arrives
        import fmlearn.convex as convex

        solver = convex.hazan_solver

        def interrupted(*args, **kwargs):
            solver(*args, **kwargs)
            raise KeyboardInterrupt

        monkeypatch.setattr(convex, "hazan_solver", interrupted)
    X2, y2 = _wider_failing(name, scale=1.0)
    if method == "partial_fit":
        X2, y2 = X[:200], y[:200]  # same width: the step itself is interrupted
    with pytest.raises(KeyboardInterrupt):
        _call(model, method, X2, y2)
    assert_unchanged(before, model)


@pytest.mark.parametrize("name", ["FMRegressor-sgd", "FMClassifier-sgd", "GFMRegressor",
                                  "AsymmetricRankOneSensing"])
def test_diverging_partial_fit_keeps_the_model(name):
    model, X, y = fitted(name)
    before = _snapshot(model)
    with pytest.raises(DivergenceError):
        _call(model, "partial_fit", X * 1e160, y)
    assert_unchanged(before, model)


def test_first_fit_that_fails_leaves_a_fresh_estimator():
    est = fmlearn.FMRegressor(solver="sgd", n_iter=3)
    before = _snapshot(est)
    X, y = data("reg")
    with pytest.raises(DivergenceError):
        est.fit(X * 1e160, y)
    assert_unchanged(before, est)
    assert not hasattr(est, "n_features_in_")


def test_success_keeps_user_objects_and_failure_restores_copies():
    rs = np.random.RandomState(0)
    est = fmlearn.FMRegressor(solver="als", n_iter=2, random_state=rs)
    X, y = data("reg")
    est.fit(X, y)
    w = est.w_
    with pytest.raises(DivergenceError):
        est.fit(X * 1e160, y)
    assert est.random_state is rs  # a parameter is never replaced by a copy
    np.testing.assert_array_equal(est.w_, w)
