"""OnlineFMRegressor / OnlineFMClassifier (fmlearn.online.fm): the classic FM's online learners
against NumPy oracles, OGD as FMRegressor's SGD (one kernel), divergence."""

import numpy as np
import online_reference as ref
import pytest
from online_cases import LOSS

from fmlearn import FMClassifier, FMRegressor, OnlineFMClassifier, OnlineFMRegressor
from fmlearn.exceptions import DivergenceError
from fmlearn.losses import SQUARED
from fmlearn.solvers.ftrl import FMFTRLLearner, FTRLSettings
from fmlearn.solvers.ogd import FMOGDLearner, OGDSettings
from fmlearn.solvers.pa import FMPALearner, PASettings


@pytest.mark.parametrize("learner", ["ogd", "pa", "ftrl"])
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_classic_fm_learners_match_oracle(learner, loss, stream, learn_rows):
    rng = np.random.default_rng(8)
    X, y = stream(150, 9, 0.4, rng, loss)
    cls = {"ogd": FMOGDLearner, "pa": FMPALearner, "ftrl": FMFTRLLearner}[learner]
    st = {"ogd": OGDSettings(learning_rate=0.05, implicit_sgd=False), "pa": PASettings(pa_c=0.1),
          "ftrl": FTRLSettings(learning_rate=0.1, ftrl_beta=1.0, learning_rate_pairwise=0.05,
                               ftrl_beta_pairwise=1.0)}[learner]
    L = cls(9, 3, 0.1, np.random.RandomState(0), LOSS[loss], st)
    V0 = L.state.V.copy()
    out = learn_rows(L, X, y)
    p_ref, w0, w, V = ref.fm_online(X, y, learner, V0, loss)
    np.testing.assert_allclose(out, p_ref, atol=1e-10)
    np.testing.assert_allclose(L.state.V, V, atol=1e-10)
    np.testing.assert_allclose(L.state.w, w, atol=1e-10)
    assert L.state.w0[0] == pytest.approx(w0, abs=1e-10)


def test_implicit_ogd_step_matches_oracle(stream, learn_rows):
    rng = np.random.default_rng(9)
    X, y = stream(100, 6, 0.5, rng)
    L = FMOGDLearner(6, 2, 0.1, np.random.RandomState(1), SQUARED, OGDSettings(learning_rate=0.5))
    V0 = L.state.V.copy()
    out = learn_rows(L, X, y)
    p_ref, *_ = ref.fm_online(X, y, "ogd", V0, eta0=0.5, implicit=True)
    np.testing.assert_allclose(out, p_ref, atol=1e-10)


def test_divergence_stops_and_keeps_the_previous_model(regression_data):
    X, y = regression_data(seed=9)
    m = OnlineFMRegressor("ogd", standardize=False, learning_rate=5.0, power_t=0.0,
                          implicit_sgd=False, n_factors=4, random_state=0, shuffle=False)
    m.partial_fit(X[:5] * 0.01, y[:5])
    before = {k: np.array(v, copy=True) for k, v in vars(m).items()
              if k.startswith("state_") and isinstance(v, np.ndarray)}
    with pytest.raises(DivergenceError, match="learning_rate"):
        m.partial_fit(X * 100, y * 100)
    for k, v in before.items():
        np.testing.assert_array_equal(getattr(m, k), v)



@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("settings", [
    {},  # the online defaults, spelled out for FMRegressor (init_stdev: FM's "auto" at step
    # 0.05 is min(0.1, sqrt(0.05 / 2)) = 0.1, the online default)
    {"learning_rate": 0.02, "lr_schedule": "constant", "implicit_sgd": False,
     "reg_bias": 0.01, "reg_linear": 0.02, "reg_pairwise": 0.03, "init_stdev": 0.2},
])
def test_ogd_is_fm_sgd_bit_for_bit(task, settings, stream):
    # one learner: the same rows through OnlineFM*("ogd").partial_fit and FM*(solver="sgd")
    # .partial_fit, in batches and single rows, with weights, give the same bits
    X, y = stream(300, 25, 0.2, np.random.default_rng(21),
                  "squared" if task == "regression" else "logistic")
    sw = np.random.default_rng(22).choice([0.0, 0.5, 1.0, 2.5], size=300)
    shared = {"learning_rate": 0.05, "lr_schedule": "invscaling", **settings}
    if task == "regression":
        online = OnlineFMRegressor("ogd", n_factors=4, clip_predictions=False, random_state=3,
                                   **shared)
        batch = FMRegressor(4, solver="sgd", clip_predictions=False, random_state=3, **shared)
    else:
        online = OnlineFMClassifier("ogd", n_factors=4, random_state=3, **shared)
        batch = FMClassifier(4, solver="sgd", random_state=3, **shared)
    kw = {} if task == "regression" else {"classes": [-1.0, 1.0]}
    cuts = [0, 1, 2, 70, 71, 200, 300]
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        online.partial_fit(X[a:b], y[a:b], sample_weight=sw[a:b], **kw)
        batch.partial_fit(X[a:b], y[a:b], sample_weight=sw[a:b], **kw)
    assert online.n_rounds_ == batch.t_ > 300
    assert online.w0_ == batch.w0_
    np.testing.assert_array_equal(online.w_, batch.w_)
    np.testing.assert_array_equal(online.V_, batch.V_)
    assert np.abs(online.V_).max() > 0 and np.abs(online.w_).max() > 0  # it learned


def test_ogd_schedule_and_step_follow_the_parameters(stream, learn_rows):
    # a constant step equals the inverse-scaling one with power_t = 0; the schedule is honoured
    X, y = stream(80, 6, 0.5, np.random.default_rng(23))
    fits = [OnlineFMRegressor("ogd", n_factors=2, random_state=0, shuffle=False, **kw).fit(X, y)
            for kw in ({"lr_schedule": "constant"}, {"power_t": 0.0}, {})]
    np.testing.assert_array_equal(fits[0].V_, fits[1].V_)
    assert not np.array_equal(fits[0].V_, fits[2].V_)
