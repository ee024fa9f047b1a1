"""fmlearn._one_pass: the public step shared by fit, partial_fit and fmlearn.distributed
(begin_one_pass -> step -> commit) equals partial_fit, writes nothing before commit, and
resolve_batch_size is the one "auto" rule (also for fit_stream)."""

import numpy as np
import pytest

from fmlearn import GFMRegressor, IFMRegressor, SymmetricRankOneSensing
from fmlearn.datasets import make_gfm
from fmlearn.exceptions import DivergenceError
from fmlearn.solvers.one_pass import AUTO_BATCH_FACTOR, BatchRows
from fmlearn.stream import fit_stream


def test_public_step_equals_partial_fit_and_commits_only_at_the_end():
    X, y, _ = make_gfm(6000, 15, 2, random_state=1)
    ref = GFMRegressor(2, random_state=0)
    for i in range(0, 6000, 2000):
        ref.partial_fit(X[i:i + 2000], y[i:i + 2000])
    est = GFMRegressor(2, random_state=0)
    run = est.begin_one_pass(X[:2], y[:2])
    for i in range(0, 6000, 2000):
        run.step(BatchRows(X[i:i + 2000], y[i:i + 2000], np.ones(2000)))
    assert not hasattr(est, "working_U_")  # nothing written before commit
    run.commit(dtype_="float64", n_iter_=run.n_steps)
    np.testing.assert_array_equal(est.working_V_, ref.working_V_)
    np.testing.assert_array_equal(est.predict(X[:50]), ref.predict(X[:50]))
    assert est.history_["rmse"] == ref.history_["rmse"] and est.n_batches_ == 3


def test_a_diverging_step_raises_and_the_run_keeps_its_state():
    X, y, _ = make_gfm(400, 15, 3, random_state=2)
    est = GFMRegressor(3, random_state=0)
    run = est.begin_one_pass(X, y)
    run.step(BatchRows(X[:200], y[:200], np.ones(200)))
    state = run.state.copy()
    with pytest.raises(DivergenceError, match="keeps its previous state"):
        run.step(BatchRows(X[200:] * 1e6, y[200:], np.ones(200)))
    np.testing.assert_array_equal(run.state.V, state.V)


@pytest.mark.parametrize("est", [GFMRegressor(3), IFMRegressor(3), SymmetricRankOneSensing(3),
                                 GFMRegressor(3, batch_size=777)])
def test_one_auto_batch_rule(est):
    want = 777 if est.batch_size == 777 else AUTO_BATCH_FACTOR * 3 * 20
    assert est.resolve_batch_size(20) == want
    assert est.resolve_batch_size(2) == (777 if est.batch_size == 777 else AUTO_BATCH_FACTOR * 4)
    X, y, _ = make_gfm(2 * want + 5, 20, 3, random_state=0)
    m = fit_stream(est, [(X, y)])
    assert m.stream_history_["batches"] == [2] and m.batch_size_ == want + 5
