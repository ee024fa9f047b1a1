"""kernels/steps.py: the per-row protocol (weights as repeated rows, prequential output, the
limit check, the round counter) and the FTRL-Proximal coordinate step."""

import math

import numpy as np
import pytest
from numba import njit

from fmlearn.kernels.steps import (
    BAD_PREDICTION,
    OK,
    Rows,
    ftrl_scalar,
    invscaling,
    run_rows,
)
from fmlearn.solvers.ftrl import FMFTRLLearner, FTRLSettings
from fmlearn.solvers.ogd import FMOGDLearner, OGDSettings


def test_ftrl_scalar_is_mcmahan_algorithm_1():
    z, n, w = 0.3, 2.0, -0.1
    g, alpha, beta, l1, l2 = 0.7, 0.2, 1.0, 0.05, 0.3
    sigma = (math.sqrt(n + g * g) - math.sqrt(n)) / alpha
    z2 = z + g - sigma * w
    n2 = n + g * g
    w2 = -(z2 - np.sign(z2) * l1) / ((beta + math.sqrt(n2)) / alpha + l2)
    assert ftrl_scalar(z, n, w, g, alpha, beta, l1, l2) == pytest.approx((z2, n2, w2))
    assert ftrl_scalar(0.0, 0.0, 0.0, 0.01, alpha, beta, 0.05, 0.0)[2] == 0.0  # inside the L1
    assert invscaling(2.0, 0.5, 4) == pytest.approx(1.0)


@njit
def _predict(state, cfg, work, rows, i):
    return state.w[0] + rows.data[i]


@njit
def _update(state, cfg, work, rows, i, pred, scale):
    state.w[0] += scale
    return 0


@njit
def _learn(rows, state, limit):
    return run_rows(rows, state, None, None, _predict, _update, limit)


def test_protocol_repeats_weighted_rows_and_records_the_prediction_before_updating():
    from collections import namedtuple

    State = namedtuple("State", "t w")
    st = State(np.zeros(1, np.int64), np.zeros(1))
    sw = np.array([1.0, 2.5, 0.0, 1.0])
    rows = Rows(np.arange(5, dtype=np.int64), np.zeros(4, np.int32), np.zeros(4), np.zeros(4),
                sw, np.arange(4, dtype=np.int64), np.empty(4), np.zeros(4))
    status, row = _learn(rows, st, 1e10)
    assert (status, row) == (OK, -1)
    # row 1 (weight 2.5) is 3 rounds of 2.5 / 3; row 2 (weight 0) is predicted, not learned
    assert st.t[0] == 1 + 3 + 1
    np.testing.assert_allclose(rows.out, [0.0, 1.0, 3.5, 3.5])
    assert st.w[0] == pytest.approx(4.5)
    status, row = _learn(rows._replace(order=np.array([3], np.int64)), st, 1.0)
    assert (status, row) == (BAD_PREDICTION, 3) and st.t[0] == 5


@pytest.mark.parametrize("cls", [FMOGDLearner, FMFTRLLearner])
def test_a_call_changes_only_the_rows_of_its_features(cls):
    # one row touches its own features: every other row of w, V (and z, n) is left as it was,
    # and the snapshot that undoes a call holds just those rows
    rng = np.random.default_rng(0)
    st = OGDSettings(learning_rate=0.1) if cls is FMOGDLearner else FTRLSettings()
    L = cls(1000, 4, 0.1, rng, 0, st)
    before = {k: v.copy() for k, v in L.arrays().items()}
    idx = np.array([3, 70, 999], np.int32)
    csr = (np.array([0, 3], np.int64), idx, np.array([1.0, -2.0, 0.5]))
    snap = L.snapshot(idx)
    assert snap["V"].shape == (3, 4)
    L.learn(csr, np.array([1.0]), np.ones(1), np.arange(1), np.empty(1))
    for key, arr in L.arrays().items():
        if arr.shape[:1] == (1000,):
            other = np.setdiff1d(np.arange(1000), idx)
            np.testing.assert_array_equal(arr[other], before[key][other])
    L.restore(snap)
    for key, arr in L.arrays().items():
        np.testing.assert_array_equal(arr, before[key])
