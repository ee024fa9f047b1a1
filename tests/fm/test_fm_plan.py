"""The classic FM's plan (``fmlearn.fm._plan``): what it reads of the data summary."""

import numpy as np
import pytest
import scipy.sparse as sp

import fmlearn.fm as fm_mod
from fmlearn import FMClassifier, FMRegressor
from fmlearn.fm._plan import summary_reads


@pytest.mark.parametrize("est, reads", [
    (FMRegressor(), (True, True)),
    (FMRegressor(solver="als", init_stdev=0.1), (False, False)),
    (FMRegressor(solver="sgd"), (False, False)),  # SGD's spread comes from its settings
    (FMRegressor(solver="vb"), (True, True)),
    (FMClassifier(solver="als"), (True, False)),  # a classifier's spread: one unit
])
def test_summary_reads(est, reads):
    assert summary_reads(est) == reads


@pytest.mark.parametrize("solver", ["als", "mcmc"])
def test_fit_without_the_summary_it_does_not_read_is_the_same(monkeypatch, solver):
    # with init_stdev given, the fit skips the square sums and reads only the targets'
    # range, from the rows as given (each is a fit row or merged into one with the same
    # target): the same model as with the whole summary, and the range does not depend on
    # the rows' order or on the sign of a zero target
    rng = np.random.default_rng(5)
    users, items, n = 40, 30, 900
    u, i = rng.integers(0, users, n), rng.integers(0, items, n)
    X = sp.csr_matrix((np.ones(2 * n), np.c_[u, users + i].ravel(), np.arange(0, 2 * n + 1, 2)),
                      shape=(n, users + items))
    y = rng.integers(0, 5, n).astype(float)
    y[:3] = -0.0  # signed zeros at the bottom of the range, next to +0.0 targets
    X = sp.vstack([X, X[:50]]).tocsr()  # duplicate rows: merged
    y = np.r_[y, y[:50]]
    params = dict(solver=solver, n_iter=3, init_stdev=0.1, random_state=0, n_jobs=1)
    got = FMRegressor(**params).fit(X, y)
    monkeypatch.setattr(fm_mod, "summary_reads", lambda est: (True, True))
    want = FMRegressor(**params).fit(X, y)
    for name in ("w0_", "w_", "V_", "y_range_"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert got.y_range_ == [0.0, 4.0] and not np.signbit(got.y_range_[0])
    perm = rng.permutation(X.shape[0])
    monkeypatch.undo()
    shuffled = FMRegressor(**params).fit(X[perm], y[perm])
    assert np.array_equal(shuffled.V_, got.V_) and shuffled.y_range_ == got.y_range_
