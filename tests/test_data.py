"""fmlearn._data: the merged-row index of the coordinate solvers against the merged copy it
replaces (``merge_duplicate_rows``, the oracle), and the no-copy path of canonical CSR input."""

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn._data import canonical_csr, merge_duplicate_rows, merged_rows, to_csr
from fmlearn.kernels.dedup import hash_argsort
from fmlearn.solvers._fm_common import FMState, RowTargets, column_data, place_dtype


def _rows_with_duplicates(dtype, rng, n=600, d=40):
    """Rows drawn from a small pool (many exact duplicates), some with other targets, some
    empty, some weights zero; values not all 1."""
    pool = sp.random(50, d, density=0.08, random_state=3, format="csr", dtype=np.float64)
    pool.data = np.round(pool.data * 4) / 2 + 0.5  # a few distinct values, no zeros
    pool = sp.vstack([pool, sp.csr_matrix((1, d))]).tocsr()  # an empty row
    X = to_csr(pool[rng.integers(0, pool.shape[0], n)], dtype)
    y = rng.integers(0, 3, n).astype(np.float64)  # duplicates of a row with other targets
    y[rng.random(n) < 0.05] = -0.0  # -0.0 and 0.0 are one target
    sw = rng.choice([0.0, 0.5, 1.0, 2.0], n, p=[0.2, 0.2, 0.4, 0.2])
    return X, y, sw


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("by_first", [True, False])
@pytest.mark.parametrize("zeros", [True, False, "unit"])
def test_merged_rows_equals_merge_duplicate_rows(dtype, by_first, zeros):
    rng = np.random.default_rng(0)
    X, y, sw = _rows_with_duplicates(dtype, rng)
    if not zeros:
        sw[sw == 0] = 1.5
    elif zeros == "unit":  # unit weights: the summed weights are counted, not added
        sw[:] = 1.0
    Xm, ym, wm = merge_duplicate_rows(X, y, sw, group_by_first=by_first)
    rows, yr, wr, keep = merged_rows(X, y, sw, group_by_first=by_first)
    assert rows.dtype == np.int32 and Xm.shape[0] < X.shape[0]
    Xr = X[rows]
    # the same rows, in the same order, with the same targets and (bit for bit) weights
    assert np.array_equal(Xr.indptr, Xm.indptr) and np.array_equal(Xr.indices, Xm.indices)
    assert np.array_equal(Xr.data, Xm.data) and Xr.data.dtype == dtype
    assert np.array_equal(yr, ym) and np.array_equal(wr.view(np.uint64), wm.view(np.uint64))
    if zeros is True:
        assert np.array_equal(keep, sw > 0) and np.all(sw[rows] > 0)
    else:
        assert keep is None


@pytest.mark.parametrize("merged", [True, False])
def test_merged_rows_without_weights_equal_unit_weights(merged):
    # sample_weight=None (the fits without weights): the rows, targets and counts of unit
    # weights; None for the weights when nothing was merged (no n ones kept)
    rng = np.random.default_rng(2)
    X, y, _ = _rows_with_duplicates(np.float64, rng)
    if not merged:
        X, y, _ = merge_duplicate_rows(X, y, np.ones(X.shape[0]))
    rows, yr, wr, keep = merged_rows(X, y, np.ones(X.shape[0]))
    rows0, yr0, wr0, keep0 = merged_rows(X, y, None)
    assert np.array_equal(rows0, rows) and np.array_equal(yr0, yr)
    assert keep is None and keep0 is None
    if merged:
        assert np.array_equal(wr0, wr) and wr0.max() > 1
        return
    assert wr0 is None and np.all(wr == 1.0)
    data = column_data(X, yr0, wr0, rows0, keep0)  # one entry for the unit weights
    assert data.cols.unit and data.cols.sw.shape == (1,)
    assert data.sw.shape == (rows0.shape[0],) and np.all(data.sw == 1.0)


def test_merged_rows_rejects_all_zero_weights():
    X = to_csr(sp.eye(4, format="csr"))
    with pytest.raises(ValueError, match="all sample weights are zero"):
        merged_rows(X, np.ones(4), np.zeros(4))


def test_hash_argsort_is_a_stable_argsort():
    # the top halves radix-sorted, runs of equal top halves by the bottom halves: insertion
    # (short runs) and merge sort (long runs), ties between whole keys kept in input order
    rng = np.random.default_rng(1)
    low = rng.integers(0, 100, 5000).astype(np.uint64)
    for keys in (rng.integers(0, 2**63, 5000, dtype=np.uint64) * np.uint64(2),  # top bit too
                 rng.integers(0, 7, 5000).astype(np.uint64) << np.uint64(40),  # ties only
                 (rng.integers(0, 7, 5000).astype(np.uint64) << np.uint64(40)) | low,  # long
                 (rng.integers(0, 1000, 5000).astype(np.uint64) << np.uint64(32)) | low,
                 np.zeros(10, dtype=np.uint64), np.zeros(0, dtype=np.uint64)):
        order, top = hash_argsort(keys)
        want = np.argsort(keys, kind="stable")
        assert np.array_equal(order, want)
        assert np.array_equal(top, (keys[want] >> np.uint64(32)).astype(np.uint32))


def test_canonical_csr_is_not_copied_and_others_are():
    X = to_csr(sp.random(30, 9, density=0.3, random_state=0, format="csr"))
    assert canonical_csr(X, np.float64) is X
    unsorted = X.copy()
    unsorted.indices[:2] = unsorted.indices[:2][::-1] if X.indptr[1] >= 2 else unsorted.indices[:2]
    unsorted.has_sorted_indices = False
    stored_zero = X.copy()
    stored_zero.data[0] = 0.0
    wide = X.copy()
    wide.indices = wide.indices.astype(np.int64)
    for other, dtype in ((X, np.float32), (unsorted, np.float64), (stored_zero, np.float64),
                         (wide, np.float64), (X.toarray(), np.float64), (X.tocoo(), np.float64)):
        got = canonical_csr(other, dtype)
        assert got is not other and got.has_canonical_format and got.dtype == dtype
        want = to_csr(other, dtype)
        assert (got != want).nnz == 0 and np.array_equal(got.indptr, want.indptr)
        assert got.indices.dtype == want.indices.dtype and got.indptr.dtype == want.indptr.dtype
    # canonical but with int64 indices (a file reader's): only the index arrays are narrowed,
    # the values are the user's (not copied)
    wide.indptr = wide.indptr.astype(np.int64)
    got = canonical_csr(wide, np.float64)
    assert got.data is wide.data and got.indices.dtype == got.indptr.dtype == np.int32


def _one_hot_with_duplicates(dtype, rng, n=800, users=30, items=20):
    """User x item one-hot rows (every colour class covers every row), repeated pairs, a
    scaled item value in some rows, some weights zero."""
    u, i = rng.integers(0, users, n), rng.integers(0, items, n)
    vals = np.where(rng.random(n) < 0.3, 2.0, 1.0)
    X = sp.csr_matrix((np.column_stack([np.ones(n), vals]).ravel(),
                       np.column_stack([u, users + i]).ravel(), np.arange(0, 2 * n + 1, 2)),
                      shape=(n, users + items))
    sw = rng.choice([0.0, 1.0, 2.0], n, p=[0.2, 0.5, 0.3])
    return to_csr(X, dtype), rng.integers(1, 3, n).astype(np.float64), sw


@pytest.mark.parametrize("make", [_rows_with_duplicates, _one_hot_with_duplicates])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_column_data_through_a_row_index_equals_the_merged_copy(make, dtype):
    rng = np.random.default_rng(2)
    X, y, sw = make(dtype, rng)
    Xm, ym, wm = merge_duplicate_rows(X, y, sw)
    rows, yr, wr, keep = merged_rows(X, y, sw)
    a, b = column_data(Xm, ym, wm), column_data(X, yr, wr, rows, keep)
    # one-hot fields take the source-order fill (every class in every row), the others not
    assert np.all(b.plan.roff < 0) == (make is _one_hot_with_duplicates)
    for name in a.cols._fields:
        assert np.array_equal(getattr(a.cols, name), getattr(b.cols, name)), name
    for name in ("order", "color_ptr", "eptr", "roff", "xoff", "bidx", "bptr"):
        assert np.array_equal(getattr(a.plan, name), getattr(b.plan, name)), name
    V = rng.standard_normal((X.shape[1], 3))
    state = FMState(0.3, rng.standard_normal(X.shape[1]), V)
    assert np.array_equal(a.predict(state), b.predict(state))


@pytest.mark.parametrize("make", [_rows_with_duplicates, _one_hot_with_duplicates])
@pytest.mark.parametrize("drop", [True, False])
@pytest.mark.parametrize("in_place", [True, False])
def test_row_state_is_the_prediction_less_the_target_row_for_row(make, drop, in_place):
    # The row cache is filled by predicting the source rows in their order and gathering them
    # in the fit's: bit for bit fm_predict_csr on the merged copy (the oracle), less the
    # target; the work columns zero. With drop=False every weight is positive and no row
    # repeats, so the fit rows are a permutation of the source rows (E is its own scratch).
    # in_place: the targets read through the row index (RowTargets, what a fit passes: no
    # n-long copy of them is stored) instead of the gathered copy.
    from fmlearn._data import raw
    from fmlearn.kernels.predict import fm_predict_csr

    rng = np.random.default_rng(4)
    X, y, sw = make(np.float64, rng)
    if not drop:
        _, first = np.unique(X.toarray(), axis=0, return_index=True)
        X, y, sw = X[np.sort(first)], y[np.sort(first)], np.full(first.shape[0], 2.0)
    Xm, ym, wm = merge_duplicate_rows(X, y, sw)
    rows, yr, wr, keep = merged_rows(X, y, sw)
    assert (rows.shape[0] == X.shape[0]) == (not drop)
    targets = RowTargets.of(y, rows, yr) if in_place else yr
    assert isinstance(targets, RowTargets) == in_place
    data = column_data(X, targets, wr, rows, keep)
    assert (data.row_targets is targets if in_place else data.row_targets is None)
    assert data.n_samples == ym.shape[0]
    assert (data.cols.y.shape[0] == 0) == in_place  # nothing stored per row
    assert np.array_equal(data.y, ym)
    state = FMState(0.3, rng.standard_normal(X.shape[1]), rng.standard_normal((X.shape[1], 3)))
    pred = np.empty(Xm.shape[0])
    fm_predict_csr(*raw(Xm), state.w0, state.w, state.V, pred)
    E = data.row_state(state, data.targets)
    assert np.array_equal(E[:, 0], pred - ym) and not E[:, 1:].any()
    assert np.array_equal(data.predict(state), pred)
    E[:, 0] = 7.0
    E[:, 1:] = 5.0  # refresh rewrites the residuals only
    data.refresh(E, state, data.targets)
    assert np.array_equal(E[:, 0], pred - ym) and np.all(E[:, 1:] == 5.0)
    E = data.row_state(state, np.zeros(ym.shape[0]), loss_code=1)  # logistic: predictions
    assert np.array_equal(E[:, 0], pred)


def test_row_targets_only_for_float64_vectors_and_int32_indices():
    # anything else keeps the gathered copy it is given (the kernels read float64 by int32)
    y, rows = np.arange(5.0), np.array([4, 0, 2], dtype=np.int32)
    taken = y[rows]
    assert isinstance(RowTargets.of(y, rows, taken), RowTargets)
    assert np.array_equal(np.asarray(RowTargets.of(y, rows, taken)), taken)
    for args in ((y.astype(np.float32), rows), (y[::2], rows[:2]), (y, rows.astype(np.int64)),
                 (y, np.zeros(0, dtype=np.int32))):
        assert RowTargets.of(*args, taken) is taken


def test_place_dtype_is_uint16_up_to_65536_features_per_class():
    # the places 0..size-1 of a class's features fit uint16 up to 65,536 features
    assert place_dtype(np.array([0, 3, 65539])) == np.uint16
    assert place_dtype(np.array([0, 65537])) == np.int32
    assert place_dtype(np.array([0])) == np.uint16
    X, y, sw = _one_hot_with_duplicates(np.float64, np.random.default_rng(1))
    data = column_data(X, y, sw)
    assert data.cols.etpos.dtype == np.uint16
    # the oracle: class c's q-th entry is the feature of class c in row q (every class
    # covers every row of one-hot fields), at its place in the class
    order, ptr, eptr = data.plan.order, data.plan.color_ptr, data.plan.eptr
    for c in range(ptr.shape[0] - 1):
        feats = order[ptr[c] + data.cols.etpos[eptr[c]:eptr[c + 1]].astype(np.int64)]
        in_class = np.isin(X.indices, order[ptr[c]:ptr[c + 1]])
        assert np.array_equal(feats, X.indices[in_class])


@pytest.mark.parametrize("solver", ["als"])
@pytest.mark.parametrize("kind", ["one_hot", "real", "weighted", "classifier"])
def test_a_split_read_through_an_index_fits_what_the_copied_rows_fit(solver, kind):
    # Early stopping's training rows are read in place through an index (no copy of X): the
    # fit is bit for bit the fit on the copied training rows with the carved-out rows as its
    # eval_set (the same seed draws the same split), whatever the summary's route (exact sums
    # of integer values, NumPy's sums of real ones).
    from sklearn.utils import check_random_state

    from fmlearn import FMClassifier, FMRegressor
    from fmlearn._early_stopping import validation_split

    rng = np.random.default_rng(7)
    X, y, sw = _one_hot_with_duplicates(np.float64, rng)
    sw = np.ones(X.shape[0]) if kind != "weighted" else sw + 0.5
    if kind == "real":
        X = X.copy()
        X.data = rng.uniform(0.5, 2.0, X.nnz)
    if kind == "classifier":
        y = np.where(y > 1.5, 1, 0)
    Est = FMClassifier if kind == "classifier" else FMRegressor
    params = dict(solver=solver, n_factors=3, n_iter=6, random_state=3, early_stopping=True,
                  n_iter_no_change=2)
    seed = int(check_random_state(3).randint(np.iinfo(np.int32).max))
    train, val = validation_split(X.shape[0], Est().validation_fraction, seed,
                                  y if kind == "classifier" else None)
    sw[val] = 1.0  # an eval_set has no weights: the carved-out rows weigh 1 on both sides
    a = Est(**params).fit(X, y, sample_weight=sw)
    b = Est(**params).fit(X[train], y[train], sample_weight=sw[train],
                          eval_set=(X[val], y[val]))
    assert a.n_iter_ == b.n_iter_ and a.init_stdev_ == b.init_stdev_
    assert a.w0_ == b.w0_ and np.array_equal(a.w_, b.w_) and np.array_equal(a.V_, b.V_)
