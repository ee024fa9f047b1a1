"""``fmlearn.solvers._fm_common``: the fused merge and layout of user x item rows
(``pair_rows``) against the separate passes (``merged_rows``, then ``column_data``'s), and the
fits through it against the fits without it."""

import numpy as np
import pytest
import scipy.sparse as sp

import fmlearn.fm as fm_mod
from fmlearn import FMClassifier, FMRegressor
from fmlearn._data import merged_rows, to_csr
from fmlearn._plan import _target_stats
from fmlearn.solvers import _fm_common as fm_common


def _user_item(rng, n=800, users=30, items=25, dtype=np.float64):
    u, i = rng.integers(0, users, n), rng.integers(0, items, n)  # duplicates among them
    X = sp.csr_matrix((np.ones(2 * n), np.column_stack([u, users + i]).ravel(),
                       np.arange(0, 2 * n + 1, 2)), shape=(n, users + items))
    return to_csr(X, dtype), rng.choice([0.0, -0.0, 1.0, 3.5, 4.0], n)


@pytest.mark.parametrize("case", ["duplicates", "distinct", "weights", "float32"])
def test_pair_rows_equal_the_merge_and_the_layout(case):
    rng = np.random.default_rng(11)
    X, y = _user_item(rng, dtype=np.float32 if case == "float32" else np.float64)
    if case == "distinct":
        keep = np.sort(np.unique(X.toarray(), axis=0, return_index=True)[1])
        X, y = to_csr(X[keep]), y[keep]
    sw = rng.choice([0.5, 1.0, 2.0], X.shape[0]) if case == "weights" else None
    rows, w, pairs, moments = fm_common.pair_rows(X, y, sw)
    want_rows, _, want_w, keep = merged_rows(X, y, sw, targets=False)
    assert keep is None and np.array_equal(rows, want_rows) and rows.dtype == want_rows.dtype
    assert (w is None) == (want_w is None) and (w is None or np.array_equal(w, want_w))
    assert (w is None) == (case == "distinct")
    assert moments == _target_stats(y, w, rows=rows, unit_weights=w is None)
    targets = fm_common.RowTargets(y, rows)
    got = fm_common.column_data(X, targets, w, rows, None, pairs)
    want = fm_common.column_data(X, targets, w, rows, None)
    assert got.fields and got.held is pairs.E
    for field in want.cols._fields:
        a, b = np.asarray(getattr(want.cols, field)), np.asarray(getattr(got.cols, field))
        assert a.dtype == b.dtype and np.array_equal(a, b), field
    for field in ("order", "color_ptr", "eptr", "roff", "xoff", "bidx", "bptr"):
        assert np.array_equal(getattr(want.plan, field), getattr(got.plan, field)), field
    d = X.shape[1]
    state = fm_common.FMState(0.3, rng.standard_normal(d).astype(X.dtype),
                              rng.standard_normal((d, 4)).astype(X.dtype))
    E = got.row_state(state, targets)  # the held array, its targets in place
    assert E is pairs.E and got.held is None
    assert np.array_equal(E, want.row_state(state, targets))
    assert np.array_equal(got.row_state(state, targets), E)  # a fresh one next time
    zeros = np.zeros(rows.shape[0])
    assert np.array_equal(fm_common.column_data(X, targets, w, rows, None, pairs).row_state(
        state, zeros, loss_code=1), want.row_state(state, zeros, loss_code=1))


def test_pair_rows_leave_other_rows_to_the_separate_passes():
    rng = np.random.default_rng(12)
    X, y = _user_item(rng)
    scaled = X.copy()
    scaled.data[5] = 2.0
    three = to_csr(sp.hstack([X, sp.csr_matrix(np.ones((X.shape[0], 1)))]).tocsr())
    zero_weight = np.ones(X.shape[0])
    zero_weight[3] = 0.0
    assert fm_common.pair_rows(X, y, None) is not None
    for args in ((scaled, y, None), (three, y, None), (X, y, zero_weight),
                 (X, y.astype(np.float32), None), (X, y[::-1], None)):
        assert fm_common.pair_rows(*args) is None


@pytest.mark.parametrize("est", [
    FMRegressor(solver="als", n_iter=4),
    FMRegressor(solver="mcmc", n_iter=4),
    FMRegressor(solver="als", n_iter=4, init_stdev=0.05),
    FMClassifier(solver="als", n_iter=4),
    FMClassifier(solver="mcmc", n_iter=4),
])
@pytest.mark.parametrize("weighted", [False, True])
def test_fit_through_pair_rows_is_the_fit_without(monkeypatch, est, weighted):
    rng = np.random.default_rng(13)
    X, y = _user_item(rng)
    if isinstance(est, FMClassifier):
        y = (y > 2).astype(float)
    sw = rng.choice([0.5, 1.0, 2.0], X.shape[0]) if weighted else None
    est = est.set_params(random_state=0, n_jobs=1)
    taken = []
    real = fm_mod.pair_rows
    monkeypatch.setattr(fm_mod, "pair_rows", lambda *a: taken.append(real(*a)) or taken[-1])
    got = est.__class__(**est.get_params()).fit(X, y, sample_weight=sw)
    assert len(taken) == 1 and taken[0] is not None  # the fused path was taken
    monkeypatch.setattr(fm_mod, "pair_rows", lambda *a: None)
    want = est.__class__(**est.get_params()).fit(X, y, sample_weight=sw)
    for name in ("w0_", "w_", "V_"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert np.array_equal(got.predict(X), want.predict(X))
