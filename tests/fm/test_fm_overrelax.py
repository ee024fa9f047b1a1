"""The switch of MCMC's over-relaxation (solvers/mcmc.py ``record_sweep``, ``sweep_config``):
Gibbs draws until the chain is found settled by the stated test, over-relaxed draws after."""

import numpy as np
import pytest

from fmlearn import FMClassifier, FMRegressor
from fmlearn._data import to_csr
from fmlearn.datasets import make_fm
from fmlearn.kernels.cd import Config
from fmlearn.losses import SQUARED
from fmlearn.solvers import _fm_common as fm_common
from fmlearn.solvers import mcmc
from fmlearn.solvers.mcmc import SETTLE_TOL, SETTLE_WINDOW, Chain, MCMCSettings, sweep_config

KW = dict(n_iter=80, n_burn_in=0, n_kept_samples=1000, random_state=0)


def _user_item(n=2000, sizes=(40, 30), seed=2):
    X, y, _ = make_fm(n, sum(sizes), 3, x="onehot", n_fields=2, noise=0.2, random_state=seed)
    return to_csr(X), y


def _oracle_settled_at(scales, burn_in):
    """The first sweep t (1-based, after the burn-in) whose last SETTLE_WINDOW scales average
    within SETTLE_TOL of the SETTLE_WINDOW before them (the rule of the docstrings)."""
    W = SETTLE_WINDOW
    for t in range(max(2 * W, burn_in), len(scales) + 1):
        before, after = np.mean(scales[t - 2 * W:t - W]), np.mean(scales[t - W:t])
        if abs(after - before) <= SETTLE_TOL * before:
            return t
    return -1


@pytest.fixture
def gibbs_trace(monkeypatch):
    """The root mean square of (w, V) after every sweep of a plain Gibbs chain."""
    X, y = _user_item()
    scales = []
    record = mcmc.record_sweep

    def spy(chain, state, settings):
        scales.append(np.sqrt((np.sum(state.w ** 2) + np.sum(state.V ** 2)) / state.w.size
                              / (state.V.shape[1] + 1)))
        record(chain, state, settings)

    monkeypatch.setattr(mcmc, "record_sweep", spy)
    gibbs = FMRegressor(3, overrelaxation=0.0, **KW).fit(X, y)
    monkeypatch.undo()
    return X, y, gibbs, np.array(scales)


def test_chain_settles_where_the_stated_test_says(gibbs_trace):
    X, y, gibbs, scales = gibbs_trace
    expected = _oracle_settled_at(scales, 0)
    # the factors grow out of their small start first: not settled at once, but within the run
    assert 2 * SETTLE_WINDOW < expected < KW["n_iter"]
    assert gibbs.chain_["settled_at"] == expected
    # a longer burn-in delays the test to its end
    late = FMRegressor(3, overrelaxation=0.0, **{**KW, "n_burn_in": expected + 5}).fit(X, y)
    assert late.chain_["settled_at"] == _oracle_settled_at(scales, expected + 5)


def test_draws_are_gibbs_until_settled_and_overrelaxed_after(gibbs_trace):
    X, y, gibbs, _ = gibbs_trace
    relaxed = FMRegressor(3, overrelaxation=-0.9, **KW).fit(X, y)
    T = gibbs.chain_["settled_at"]
    assert relaxed.chain_["settled_at"] == T
    # sample s is sweep s + 1 (no burn-in): sweeps 1..T identical, sweep T + 1 on differs
    np.testing.assert_array_equal(relaxed.samples_V_[:T], gibbs.samples_V_[:T])
    np.testing.assert_array_equal(relaxed.samples_w_[:T], gibbs.samples_w_[:T])
    assert np.abs(relaxed.samples_V_[T] - gibbs.samples_V_[T]).max() > 1e-6


def test_sweep_config_relaxes_from_the_settled_sweep_only():
    cfg = Config(SQUARED, 1.0, True, True, True, 0.0, 1.0, 1.0, 1.0, 0.0, -0.9)
    settings = MCMCSettings(100, False, 10, 100, relax=-0.9)
    chain = Chain.start(3)
    chain.t = 50
    assert sweep_config(cfg, chain, settings).relax == 0.0  # not settled
    chain.settled_at = 51
    assert sweep_config(cfg, chain, settings).relax == 0.0  # settles after the next sweep
    chain.settled_at = 50
    assert sweep_config(cfg, chain, settings).relax == -0.9
    assert sweep_config(cfg._replace(relax=0.0), chain, settings).relax == 0.0


def test_unsettled_chain_draws_exactly_as_gibbs():
    # fewer sweeps than the test needs (2 windows): "auto" is libFM's Gibbs chain bit for bit
    X, y = _user_item()
    kw = dict(n_iter=2 * SETTLE_WINDOW - 1, random_state=3, groups=[40, 30])
    auto = FMRegressor(3, **kw).fit(X, y)
    plain = FMRegressor(3, overrelaxation=0.0, **kw).fit(X, y)
    assert auto.chain_["settled_at"] == -1
    np.testing.assert_array_equal(auto.samples_V_, plain.samples_V_)
    np.testing.assert_array_equal(auto.predict(X), plain.predict(X))


def test_auto_is_gibbs_for_the_probit_classifier():
    X, y = _user_item()
    labels = np.where(y > np.median(y), 1, 0)
    kw = {**KW, "n_iter": 120}  # the probit chain settles later (sweep 92 here)
    auto = FMClassifier(3, **kw).fit(X, labels)
    plain = FMClassifier(3, overrelaxation=0.0, **kw).fit(X, labels)
    assert auto.chain_["settled_at"] >= 0
    np.testing.assert_array_equal(auto.samples_V_, plain.samples_V_)


def test_auto_is_minus_0_9_for_regression():
    X, y = _user_item()
    auto = FMRegressor(3, **KW).fit(X, y)
    fixed = FMRegressor(3, overrelaxation=-0.9, **KW).fit(X, y)
    assert 0 <= auto.chain_["settled_at"] < KW["n_iter"]
    np.testing.assert_array_equal(auto.samples_V_, fixed.samples_V_)


def test_settling_does_not_depend_on_the_thread_count(monkeypatch):
    monkeypatch.setattr(fm_common, "BLOCKED_MIN_ROWS", 0)  # classes gathered in blocks
    monkeypatch.setattr(fm_common, "MIN_PARALLEL_NNZ", 0)
    monkeypatch.setattr(fm_common, "BLOCK_ALIGN", 1)
    X, y = _user_item(3000)
    a = FMRegressor(3, n_jobs=1, groups=[40, 30], **KW).fit(X, y)
    b = FMRegressor(3, n_jobs=2, groups=[40, 30], **KW).fit(X, y)
    assert 0 <= a.chain_["settled_at"] < KW["n_iter"]
    assert a.chain_ == b.chain_
    np.testing.assert_array_equal(a.samples_V_, b.samples_V_)


def test_warm_start_carries_the_settling_test():
    # split before and after the settling sweep: the continued chain equals the long one
    X, y = _user_item()
    long = FMRegressor(3, **KW).fit(X, y)
    T = long.chain_["settled_at"]
    for first in (T - 3, T + 3):
        warm = FMRegressor(3, warm_start=True, **{**KW, "n_iter": first}).fit(X, y)
        warm.set_params(n_iter=KW["n_iter"] - first).fit(X, y)
        assert warm.chain_["settled_at"] == T
        np.testing.assert_allclose(warm.predict(X), long.predict(X), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("key, value", [("settled_at", 10**6), ("settled_at", -2),
                                        ("settled_at", 2.5), ("t", "5"), ("scales", [np.nan]),
                                        ("scales", [1.0] * (2 * SETTLE_WINDOW + 1)),
                                        ("scales", ["x"])])
def test_inconsistent_settling_state_is_refused(key, value):
    X, y = _user_item()
    m = FMRegressor(3, n_iter=5, random_state=0).fit(X, y)
    m.chain_[key] = value
    with pytest.raises(ValueError, match="settled_at / scales"):
        m._check_loaded_state()


def test_model_without_settling_state_loads_as_not_settled(tmp_path):
    # a model file of an earlier version has no settled_at / scales in chain_
    from fmlearn import load

    X, y = _user_item()
    m = FMRegressor(3, n_iter=5, random_state=0).fit(X, y)
    for k in ("settled_at", "scales"):
        m.chain_.pop(k)
    back = load(m.save(tmp_path / "old.fmz"))
    from fmlearn.fm._mcmc import fitted_chain

    assert fitted_chain(back).settled_at == -1
