"""fmlearn.kernels.cd_layout: the row-wise colouring against the column-wise greedy colouring
(the oracle), its per-feature counts, and the class counts :func:`column_data` takes from
them against :func:`class_counts`' pass."""

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn._data import raw, to_csr
from fmlearn.kernels.cd import greedy_coloring
from fmlearn.kernels.cd_layout import class_counts, coloring_rounds
from fmlearn.solvers import _fm_common as fm_common

_NONE = np.zeros(0, dtype=np.bool_)


def _greedy(X):
    csr, csc = raw(X), raw(X.tocsc())
    return greedy_coloring(csc[0], csc[1], csr[0], csr[1], X.shape[1])


def _pairs(firsts, seconds, d):
    n = len(firsts)
    return to_csr(sp.csr_matrix((np.ones(2 * n), np.column_stack([firsts, seconds]).ravel(),
                                 np.arange(0, 2 * n + 1, 2)), shape=(n, d)), np.float64)


def _cases(rng):
    """Two one-hot fields (settled in round one), rows of two where a feature stands both
    first and second (round one's colours are not the greedy ones: rows (0, 1), (1, 2) give
    feature 2 colour 1 in round one, 0 in the greedy colouring), three one-hot fields, sparse
    random rows."""
    n = 120
    yield "two fields", _pairs(rng.integers(0, 12, n), rng.integers(12, 30, n), 30)
    yield "chain", _pairs([0, 1, 3], [1, 2, 4], 5)
    a = rng.integers(0, 20, (n, 2))
    a = np.sort(a[a[:, 0] != a[:, 1]], axis=1)
    yield "pairs", _pairs(a[:, 0], a[:, 1], 20)
    f = np.column_stack([rng.integers(0, 5, n), rng.integers(5, 9, n), rng.integers(9, 15, n)])
    yield "three fields", to_csr(sp.csr_matrix((np.ones(3 * n), f.ravel(),
                                                np.arange(0, 3 * n + 1, 3)), shape=(n, 15)),
                                 np.float64)
    yield "sparse", to_csr(sp.random(n, 25, density=0.08, random_state=5, format="csr"),
                           np.float64)


@pytest.mark.parametrize("masked", [False, True])
def test_coloring_rounds_is_the_greedy_colouring_and_counts_the_features(masked):
    rng = np.random.default_rng(0)
    seen = set()
    for name, X in _cases(rng):
        n, d = X.shape
        keep = rng.random(n) < 0.7 if masked else _NONE
        kept = X[np.flatnonzero(keep)] if masked else X
        fcount = np.zeros(d, dtype=np.int64)
        color, n_colors, ok = coloring_rounds(X.indptr, X.indices, keep, d, 8, fcount)
        assert np.array_equal(fcount, np.bincount(kept.indices, minlength=d)), name
        if not ok:  # not settled in 8 rounds: the caller runs the greedy colouring
            continue
        seen.add(name)
        want, n_want = _greedy(kept)
        assert n_colors == n_want and np.array_equal(color, want), name
    assert {"two fields", "chain", "pairs", "three fields"} <= seen
    # the chain is the case round one alone gets wrong
    X = _pairs([0, 1], [1, 2], 3)
    color, _, ok = coloring_rounds(X.indptr, X.indices, _NONE, 3, 8, np.zeros(0, np.int64))
    assert ok and color.tolist() == [0, 1, 0]


def test_class_counts_from_the_colouring_equal_class_counts():
    # column_data sums the colouring's per-feature counts by class instead of class_counts'
    # pass when the fit rows are the kept rows; every class all ones only when every value is 1
    rng = np.random.default_rng(1)
    for name, X in _cases(rng):
        X.data[:] = 1.0  # the sparse rows' values too
        d = X.shape[1]
        fcount = np.zeros(d, dtype=np.int64)
        order, color_ptr, color = fm_common._colour_classes(X, np.zeros(0, np.int32), None,
                                                            fcount)
        want = class_counts(X.indptr, X.indices, X.data, np.zeros(0, np.int32), color,
                            color_ptr.shape[0] - 1)
        got = fm_common._counts_of(fcount, color, color_ptr, X.data)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), name
        assert want[1].all()
        scaled = X.data.copy()
        scaled[-1] = 2.0
        assert fm_common._counts_of(fcount, color, color_ptr, scaled) is None  # counted then
        fcount[:] = -1  # not counted (the colouring did not run)
        assert fm_common._counts_of(fcount, color, color_ptr, X.data) is None


@pytest.mark.parametrize("zero_weights", [False, True])
def test_column_data_counted_by_the_colouring_equals_the_merged_copy(zero_weights):
    # distinct one-hot rows (no row merged), some of weight zero: the fit rows are the kept
    # rows, so column_data takes the classes' counts from the colouring (with and without a
    # keep mask); its layout equals that of the copy of the kept rows in the fit's order
    from fmlearn._data import merge_duplicate_rows, merged_rows

    rng = np.random.default_rng(3)
    users, items = 25, 16
    pairs = rng.permutation(users * items)[:300]
    X = _pairs(pairs // items, users + pairs % items, users + items)
    y = rng.standard_normal(X.shape[0])
    sw = np.where(rng.random(X.shape[0]) < 0.2, 0.0, 1.5) if zero_weights else None
    rows, yr, wr, keep = merged_rows(X, y, sw)
    assert (keep is not None) == zero_weights and rows.shape[0] == (
        X.shape[0] if keep is None else keep.sum())
    Xm, ym, wm = merge_duplicate_rows(X, y, np.ones(X.shape[0]) if sw is None else sw)
    a = fm_common.column_data(Xm, ym, wm)
    b = fm_common.column_data(X, yr, wr, rows, keep)
    for name in ("etpos", "erow", "ex"):
        assert np.array_equal(getattr(a.cols, name), getattr(b.cols, name)), name
    for name in ("order", "color_ptr", "eptr", "roff", "xoff", "bidx"):
        assert np.array_equal(getattr(a.plan, name), getattr(b.plan, name)), name
    assert a.plan.color_ptr.shape[0] == 3 and np.all(b.plan.eptr == [0, rows.shape[0],
                                                                     2 * rows.shape[0]])


def test_field_pass_and_its_row_state_equal_the_general_passes(monkeypatch):
    # column_data lays out rows of one-hot fields in one pass (kernels.cd_layout.
    # fill_fields): the same arrays as the colouring's and the fill's passes (the oracle, with
    # that pass turned off); rows it does not fit (a feature first in one row and second in
    # another, a value not 1) go the general way at whatever row shows it
    from fmlearn._data import merged_rows

    rng = np.random.default_rng(4)
    users, items = 30, 12
    pairs = rng.permutation(users * items)[:250]
    one_hot = _pairs(pairs // items, users + pairs % items, users + items)
    chained = _pairs(np.r_[pairs // items, users + 2], np.r_[users + pairs % items, users + 5],
                     users + items)  # item 2 stands first in the last row
    scaled = one_hot.copy()
    scaled.data[7] = 2.0
    three = next(X for name, X in _cases(rng) if name == "three fields")
    real = fm_common._field_layout
    taken = []
    monkeypatch.setattr(fm_common, "_field_layout",
                        lambda *a: taken.append(real(*a) is not None) or real(*a))
    for name, X in (("one-hot", one_hot), ("chained", chained), ("scaled", scaled),
                    ("three", three)):
        y = rng.standard_normal(X.shape[0])
        rows, yr, wr, keep = merged_rows(X, y, None)
        assert keep is None and rows.shape[0] == X.shape[0], name  # a permutation
        taken.clear()
        got = fm_common.column_data(X, yr, wr, rows, keep)
        assert taken == [name in ("one-hot", "three")], name
        with monkeypatch.context() as m:
            m.setattr(fm_common, "_field_layout", lambda *a: None)
            want = fm_common.column_data(X, yr, wr, rows, keep)
        for field in want.cols._fields:
            a, b = np.asarray(getattr(want.cols, field)), np.asarray(getattr(got.cols, field))
            assert a.dtype == b.dtype and np.array_equal(a, b), (name, field)
        for field in ("order", "color_ptr", "eptr", "roff", "xoff", "bidx", "bptr"):
            assert np.array_equal(getattr(want.plan, field), getattr(got.plan, field)), name
        assert got.fields == (name in ("one-hot", "three")) and not want.fields
        # the row state from the layout's entries in fit order (field_row_state): bit for
        # bit the one from the CSR rows (row_state_at, fm_predict_csr's arithmetic), targets
        # read in place or gathered, squared or logistic, and its refresh and predictions
        d = X.shape[1]
        state = fm_common.FMState(0.3, rng.standard_normal(d), rng.standard_normal((d, 4)))
        for targets in (fm_common.RowTargets.of(y, rows, yr), yr):
            E = got.row_state(state, targets)
            assert np.array_equal(E, want.row_state(state, targets)), name
            assert not E[:, 1:].any()
            E[:, 0], E[:, 1:] = 7.0, 5.0
            got.refresh(E, state, targets)
            assert np.array_equal(E[:, 0], want.row_state(state, targets)[:, 0])
            assert np.all(E[:, 1:] == 5.0)  # a refresh leaves the work columns
        zeros = np.zeros(rows.shape[0])
        assert np.array_equal(got.row_state(state, zeros, loss_code=1),
                              want.row_state(state, zeros, loss_code=1))
        assert np.array_equal(got.predict(state), want.predict(state))
