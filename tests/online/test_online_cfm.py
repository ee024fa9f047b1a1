"""OnlineCFMRegressor / OnlineCFMClassifier (fmlearn.online.cfm, seed 004 learned by FTRL):
the learner against its oracle, edge numbers."""

import numpy as np
import online_reference as ref
import pytest

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

