"""fmlearn.solvers.sgd: tail averaging of the epochs' models (against the mean of snapshots
taken by a callback, and its effect on a planted model) and the block-order epoch (against
the expanded row order)."""

import numpy as np
import pytest

from fmlearn import FMRegressor
from fmlearn.datasets import make_fm
from fmlearn.datasets._synthetic import fm_scores
from fmlearn.solvers._fm_common import FMState
from fmlearn.solvers.sgd import SGDSettings, block_shuffle, sgd_solver


def _problem(n=600, d=30, k=3, seed=0):
    X, y, _ = make_fm(n, d, k, x="sparse", density=0.2, noise=0.3, random_state=seed)
    X = X.tocsr()
    return (X.indptr, X.indices, X.data), y


def _state(d, k, seed=1):
    rng = np.random.default_rng(seed)
    return FMState(0.0, np.zeros(d), rng.normal(0, 0.1, (d, k)))


@pytest.mark.parametrize("average", [2, 5])
def test_tail_average_is_the_mean_of_the_last_epochs_models(average):
    csr, y = _problem()
    d, k, n_iter = 30, 3, 8
    settings = SGDSettings(n_iter, 0, 0.02, "constant", 0.5, 0.0, 0.01, 0.01, True, True)
    state = _state(d, k)
    snaps = []

    def snap(it):
        snaps.append((state.w0, state.w.copy(), state.V.copy()))
        return False

    sw = np.ones(y.shape[0])
    sgd_solver(csr, y, sw, state, 0, settings, 3, snap)
    settings.average = average
    avg, t, n_done, info = sgd_solver(csr, y, sw, _state(d, k), 0, settings, 3)
    assert n_done == n_iter and info["diverged"] is None
    tail = snaps[-average:]
    np.testing.assert_allclose(avg.w0, np.mean([s[0] for s in tail]), rtol=1e-12)
    np.testing.assert_allclose(avg.w, np.mean([s[1] for s in tail], axis=0), rtol=1e-12,
                               atol=1e-15)
    np.testing.assert_allclose(avg.V, np.mean([s[2] for s in tail], axis=0), rtol=1e-12,
                               atol=1e-15)


def test_tail_average_lowers_the_error_of_constant_step_sgd():
    # A planted FM with noise and a large constant step: the last iterate keeps moving around
    # the optimum, the mean of the last epochs' models is closer to the noise-free f.
    X, y, truth = make_fm(5000, 20, 3, x="gaussian", noise=0.5, random_state=4)
    X, y, Xt = X[:3000], y[:3000], X[3000:]
    f = fm_scores(Xt, truth.w0, truth.w, truth.V)
    errs = {}
    for average in (1, 10):
        est = FMRegressor(3, solver="sgd", n_iter=40, learning_rate=0.02, reg_pairwise=0.01,
                          average_epochs=average, random_state=0).fit(X, y)
        errs[average] = np.sqrt(np.mean((est.predict(Xt) - f) ** 2))
    assert errs[10] < 0.7 * errs[1], errs  # measured: 0.18 against 0.36


def test_auto_averages_a_tenth_of_the_epochs():
    X, y, _ = make_fm(200, 30, 3, x="sparse", density=0.2, noise=0.3, random_state=0)
    for n_iter, m in ((10, 1), (11, 2), (100, 10)):
        a = FMRegressor(3, solver="sgd", n_iter=n_iter, random_state=0).fit(X, y)
        b = FMRegressor(3, solver="sgd", n_iter=n_iter, average_epochs=m,
                        random_state=0).fit(X, y)
        np.testing.assert_array_equal(a.V_, b.V_)


def test_block_order_equals_the_expanded_row_order():
    # sgd_solver visits blocks of rows in the order of a permutation of the blocks; that is
    # the order block_shuffle writes out row by row
    n = 1000
    rng = np.random.default_rng([7, 0])
    blocks = np.random.default_rng([7, 0]).permutation(-(-n // 256))
    rows = block_shuffle(n, rng)
    expanded = np.concatenate([np.arange(b * 256, min(n, (b + 1) * 256)) for b in blocks])
    np.testing.assert_array_equal(rows, expanded)
