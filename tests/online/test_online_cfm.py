"""OnlineCFMRegressor / OnlineCFMClassifier (fmlearn.online.cfm, seed 004 learned by FTRL):
the learner against its oracle, edge numbers."""

import numpy as np
import online_reference as ref
import pytest

from fmlearn import OnlineCFMClassifier, OnlineCFMRegressor
from fmlearn.exceptions import DivergenceError
from fmlearn.losses import SQUARED
from fmlearn.solvers.ftrl import CFMFTRLLearner, FTRLSettings


def test_cfm_ftrl_matches_oracle(stream, learn_rows):
    rng = np.random.default_rng(7)
    X, y = stream(200, 10, 0.4, rng)
    p_ref, W_ref, lin = ref.cfm_ftrl(X, y, 0.5, 0.5, 2.0, 0.1, 1.0, 0.0, 0.0)
    L = CFMFTRLLearner(10, FTRLSettings(learning_rate_pairwise=0.5, trace_bound=2.0,
                                  learning_rate=0.1, ftrl_beta=1.0), SQUARED)
    out = learn_rows(L, X, y)
    np.testing.assert_allclose(out, p_ref, atol=1e-8)
    np.testing.assert_allclose(L.matrix(), W_ref, atol=1e-8)
    np.testing.assert_allclose(L.state.w, lin[:-1, 2], atol=1e-10)
    assert L.state.w0[0] == pytest.approx(lin[-1, 2], abs=1e-10)
    assert np.linalg.eigvalsh(L.matrix()).min() > -1e-10  # W stays positive semidefinite



def test_overflowing_gradient_is_a_divergence_naming_the_cause(regression_data):
    # x ~ 1e130 and y ~ 1e100: the first predictions are finite but the gradient S overflows to
    # inf, which the projection's eigendecomposition refused with a bare LinAlgError; it must be
    # a DivergenceError that leaves the estimator as it was. x ~ 1e160 (x_j x_l = inf) is
    # refused before any round.
    X, y = regression_data(n=240, d=6, seed=0)
    # (an explicit trace_bound: "auto" rescales the rows, and then nothing overflows)
    m = OnlineCFMRegressor(standardize=False, trace_bound=10.0, random_state=0)
    with pytest.raises(DivergenceError, match="eigendecomposition failed"):
        m.fit(X * 1e130, y * 1e100)
    assert not hasattr(m, "n_features_in_") and not hasattr(m, "learner_")
    with pytest.raises(ValueError, match="too large for the trace-norm bound"):
        OnlineCFMClassifier(standardize=False, trace_bound=10.0).fit(X * 1e160, np.sign(y))
    with pytest.raises(ValueError, match="too large for the trace-norm bound"):
        OnlineCFMClassifier(standardize=False).fit(X * 1e160, np.sign(y))
