"""fmlearn.kernels.dedup: the one-kernel duplicate merge of ``merged_rows``
(``first_feature_groups``: a counting sort by first feature, buckets sorted by hash) against a
slow pure-Python oracle of the stable sort of the keys and the grouping; its pieces (the bucket
sort's fallback, the ordering of runs of equal top halves) against NumPy."""

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn._data import merge_duplicate_rows, merged_rows, raw, to_csr
from fmlearn.kernels import dedup

_P, _M = 1099511628211, 2**64 - 1


def _fnv(idx, bits, ybits):
    h = ((14695981039346656037 ^ len(idx)) * _P) & _M
    for j, v in zip(idx, bits, strict=True):
        h = ((h ^ int(j)) * _P) & _M
        h = ((h ^ int(v)) * _P) & _M
    return ((h ^ ybits) * _P) & _M


def oracle(X, y, sw, subset=None, by_first=True):
    """merged_rows' (rows, weights) from its definition: the keys (first feature + 1 above the
    FNV hash's top bits, -0.0 hashed as +0.0; not ``by_first``: the hash) sorted stably,
    consecutive identical rows (content and target) merged, weights summed in sorted order
    (unit weights counted)."""
    n = X.shape[0]
    keep = np.ones(n, bool) if sw is None else sw > 0
    if subset is not None:
        keep &= np.isin(np.arange(n), subset)
    src = np.flatnonzero(keep)
    b = max(1, int(X.shape[1] + 1).bit_length())
    bits = X.data.view(np.uint32 if X.dtype == np.float32 else np.uint64)
    keys, content = {}, {}
    for i in src:
        a, e = X.indptr[i], X.indptr[i + 1]
        yi = float(y[i]) + 0.0
        ybits = int(np.array([yi]).view(np.uint64)[0])
        h = _fnv(X.indices[a:e], bits[a:e], ybits)
        first = int(X.indices[a]) + 1 if e > a else 0
        keys[i] = (first << (64 - b)) | (h >> b) if by_first else h
        content[i] = (tuple(X.indices[a:e]), tuple(X.data[a:e]), yi)
    order = sorted(src, key=lambda i: (keys[i], i))
    rows, w = [], []
    for i in order:
        wt = 1.0 if sw is None else float(sw[i])
        if rows and keys[i] == keys[rows[-1]] and content[i] == content[rows[-1]]:
            w[-1] += wt
        else:
            rows.append(i)
            w.append(wt)
    return np.array(rows), np.array(w)


def _data(dtype, rng, n=500, d=30):
    """Rows from a small pool (duplicates), empty rows, targets 0, -0.0 and others."""
    pool = sp.random(40, d, density=0.1, random_state=5, format="csr", dtype=np.float64)
    pool.data = np.round(pool.data * 4) / 2 + 0.5
    pool = sp.vstack([pool, sp.csr_matrix((1, d))]).tocsr()
    X = to_csr(pool[rng.integers(0, pool.shape[0], n)], dtype)
    y = rng.integers(0, 3, n).astype(np.float64)
    y[rng.random(n) < 0.1] = -0.0
    return X, y


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("weights", [None, "unit", "mixed"])
@pytest.mark.parametrize("subset", [False, True])
def test_merged_rows_equals_the_oracle(dtype, weights, subset):
    rng = np.random.default_rng(7)
    X, y = _data(dtype, rng)
    sw = {None: None, "unit": np.ones(X.shape[0]),
          "mixed": rng.choice([0.0, 0.5, 1.0, 3.0], X.shape[0])}[weights]
    sub = np.sort(rng.choice(X.shape[0], 300, replace=False)) if subset else None
    rows, yr, w, keep = merged_rows(X, y, sw, group_by_first=True, subset=sub)
    want_rows, want_w = oracle(X, y, sw, sub)
    assert rows.dtype == np.int32 and np.array_equal(rows, want_rows)
    assert np.array_equal(yr, y[want_rows])
    assert want_rows.shape[0] < (X.shape[0] if sub is None else sub.shape[0])  # merged
    assert np.array_equal(np.asarray(w).view(np.uint64), want_w.view(np.uint64))


def test_merged_rows_without_duplicates_keeps_no_weights():
    # unit weights and nothing merged: no weights (None), every row once, in key order
    rng = np.random.default_rng(3)
    X = to_csr(sp.random(200, 50, density=0.1, random_state=1, format="csr"))
    y = rng.standard_normal(200)
    rows, _, w, keep = merged_rows(X, y, None)
    want_rows, _ = oracle(X, y, None)
    assert w is None and keep is None and np.array_equal(rows, want_rows)
    rows, _, w, _ = merged_rows(X, y, None, subset=np.arange(0, 200, 2))  # ones when subset
    want_rows, want_w = oracle(X, y, None, np.arange(0, 200, 2))
    assert np.array_equal(rows, want_rows) and np.array_equal(w, want_w)


def _colliding_rows():
    """Rows of one first feature whose hashes agree in their top 32 bits and differ below, as
    pairs of row numbers of 2^18 candidate rows (values differing in a few mantissa bits:
    FNV-1a's top bits mix them poorly, so such pairs are many)."""
    j = np.repeat(np.arange(1, 257), 1024)
    v = 1.0 + np.tile(np.arange(1024), 256) / 1024.0
    n = j.shape[0]
    C = sp.csr_matrix((np.column_stack([np.ones(n), v]).ravel(),
                       np.column_stack([np.zeros(n, int), j]).ravel(),
                       np.arange(0, 2 * n + 1, 2)), shape=(n, 257))
    indptr, indices, data = raw(to_csr(C))
    h = dedup.row_hashes(indptr, indices, data.view(np.uint64), np.ones(n).view(np.uint64))
    top = h >> np.uint64(32)
    o = np.argsort(top, kind="stable")
    same = np.flatnonzero((top[o][1:] == top[o][:-1]) & (h[o][1:] != h[o][:-1]))
    return C, [(o[s], o[s + 1]) for s in same]


def test_rows_whose_hashes_agree_in_their_top_halves_are_ordered_by_the_whole_key():
    C, pairs = _colliding_rows()
    assert len(pairs) >= 2
    rng = np.random.default_rng(0)
    pick = np.array([r for p in pairs[:20] for r in p] + list(rng.integers(0, C.shape[0], 60)))
    pick = rng.permutation(np.repeat(pick, rng.integers(1, 4, pick.shape[0])))
    X = to_csr(C[pick])
    y, sw = np.ones(X.shape[0]), rng.choice([0.0, 1.0, 2.0], X.shape[0])
    for weights in (None, sw):
        rows, _, w, _ = merged_rows(X, y, weights)
        want_rows, want_w = oracle(X, y, weights)
        assert np.array_equal(rows, want_rows)
        assert np.array_equal(w, want_w)


def test_a_bucket_too_large_takes_the_radix_path(monkeypatch):
    rng = np.random.default_rng(1)
    X, y = _data(np.float64, rng)
    sw = rng.choice([0.0, 1.0, 2.5], X.shape[0])
    data = X.data.view(np.uint64)
    ok, _, _ = dedup.first_feature_groups(X.indptr, X.indices, X.data, data, y,
                                          np.zeros(0, np.int32), X.shape[0], X.shape[1], 5,
                                          np.zeros(0), True, 10)
    assert not ok
    monkeypatch.setattr(dedup, "MAX_BUCKET", 10)
    for weights in (None, sw):
        rows, _, w, _ = merged_rows(X, y, weights)
        want_rows, want_w = oracle(X, y, weights)
        assert np.array_equal(rows, want_rows) and np.array_equal(w, want_w)


def test_sort_bucket_sorts_any_distinct_values():
    # near-uniform values (the scatter by top bits then insertion) and values whose top bits
    # all agree in reverse order (insertion past its budget: the full sort)
    rng = np.random.default_rng(2)
    sub = np.zeros((1 << 16) + 1, dtype=np.int64)
    for a in (rng.permutation(2**63 + np.arange(3000, dtype=np.uint64) * np.uint64(2**50)),
              np.arange(5000, dtype=np.uint64)[::-1].copy(),
              np.unique(rng.integers(0, 2**63, 700, dtype=np.uint64))[::-1].copy(),
              np.array([5, 3], dtype=np.uint64)):
        lo = 3
        buf = np.concatenate([np.zeros(lo, np.uint64), a])
        sc = np.zeros(a.shape[0], np.uint64)
        dedup._sort_bucket(buf, lo, lo + a.shape[0], sc, sub)
        assert np.array_equal(sc, np.sort(a))


@pytest.mark.parametrize("length", [5, 40])
def test_order_run_is_a_stable_sort_by_the_rest_of_the_key(length):
    # a run declared of equal top halves, rows increasing, with duplicates: ordered by the
    # keys' rest (recomputed, as row_keys), ties in row order (insertion and merge sort)
    rng = np.random.default_rng(length)
    X, y = _data(np.float64, rng, n=200)
    rows = np.sort(rng.choice(200, length, replace=False))
    rows[1::4] = rows[::4][: rows[1::4].shape[0]]  # repeated rows
    rows = np.sort(rows)
    b = 6
    keys = dedup.row_keys(X.indptr, X.indices, X.data.view(np.uint64), y,
                          np.zeros(0, np.int32), 200, b, False)
    want = rows[np.argsort(keys[rows] >> np.uint64(b), kind="stable")]
    sc = (np.uint64(7) << np.uint64(32)) | rows.astype(np.uint64)
    kp = np.zeros(length, np.uint64)
    dedup._order_run(sc, kp, 0, length, X.indptr, X.indices, X.data.view(np.uint64), y,
                     y.view(np.uint64), np.uint64(b), np.zeros(0, np.int32))
    assert np.array_equal((sc & np.uint64(0xFFFFFFFF)).astype(np.int64), want)
    # the low halves as places in a row map (pair_groups' buckets): the same order of rows
    rowmap = rows[::-1].astype(np.int32).copy()  # place p holds row rowmap[p]
    sc = (np.uint64(7) << np.uint64(32)) | (length - 1 - np.arange(length)).astype(np.uint64)
    dedup._order_run(sc, kp, 0, length, X.indptr, X.indices, X.data.view(np.uint64), y,
                     y.view(np.uint64), np.uint64(b), rowmap)
    assert np.array_equal(rowmap[(sc & np.uint64(0xFFFFFFFF)).astype(np.int64)], want)


@pytest.mark.parametrize("by_first", [True, False])
@pytest.mark.parametrize("weights", ["unit", "mixed"])
def test_merge_duplicate_rows_equals_the_oracle(by_first, weights):
    # the copying twin (SGD and the other solvers): the oracle's rows copied, with their
    # targets and summed weights in a float64 array of its own
    rng = np.random.default_rng(4)
    X, y = _data(np.float32, rng)
    sw = np.ones(X.shape[0]) if weights == "unit" else rng.choice([0.0, 1.0, 2.0], X.shape[0])
    Xm, ym, wm = merge_duplicate_rows(X, y, sw, group_by_first=by_first)
    want_rows, want_w = oracle(X, y, sw, by_first=by_first)
    assert want_rows.shape[0] < X.shape[0]  # merged
    assert Xm.dtype == np.float32 and Xm.indices.dtype == np.int32
    assert (X[want_rows] != Xm).nnz == 0 and np.array_equal(Xm.indptr, X[want_rows].indptr)
    assert np.array_equal(ym, y[want_rows])
    assert wm.dtype == np.float64 and np.array_equal(wm, want_w)
    assert not np.shares_memory(wm, sw)
    # nothing merged: unit weights come back as ones of their own
    ones = np.ones(want_rows.shape[0])
    _, _, wu = merge_duplicate_rows(X[want_rows], y[want_rows], ones, group_by_first=by_first)
    assert wu.shape == ones.shape and np.all(wu == 1.0) and not np.shares_memory(wu, ones)
    with pytest.raises(ValueError, match="all sample weights are zero"):
        merge_duplicate_rows(X, y, np.zeros(X.shape[0]), group_by_first=by_first)


def test_true_positions_are_flatnonzero():
    rng = np.random.default_rng(5)
    for mask in (rng.random(1000) < 0.3, np.zeros(7, bool), np.ones(5, bool), np.zeros(0, bool)):
        got = dedup.true_positions(mask)
        assert got.dtype == np.int32 and np.array_equal(got, np.flatnonzero(mask))


def _pair_rows(rng, n=600, users=25, items=20):
    """Rows of two one-hot fields (user, item) with duplicates; targets with signed zeros."""
    u, i = rng.integers(0, users, n), rng.integers(0, items, n)
    X = to_csr(sp.csr_matrix((np.ones(2 * n), np.column_stack([u, users + i]).ravel(),
                              np.arange(0, 2 * n + 1, 2)), shape=(n, users + items)))
    return X, rng.choice([0.0, -0.0, 1.0, 2.5], n)


def _pair_groups(X, y, sw, max_bucket=dedup.MAX_BUCKET):
    n, d = X.shape
    E = np.full((n, 3), np.nan)
    out = dedup.pair_groups(X.indptr, X.indices, X.data, X.data.view(np.uint64), y, n, d,
                            max(1, int(d + 1).bit_length()), np.zeros(0) if sw is None else sw,
                            sw is None, max_bucket, E)
    return out, E


@pytest.mark.parametrize("case", ["pairs", "distinct", "weights", "collisions"])
def test_pair_groups_is_the_merge_with_its_layout_and_targets(case):
    # the oracle's rows and weights; the fit rows' features in class-major order, their
    # targets in E[:, 0] and target_moments' statistics of them
    rng = np.random.default_rng(9)
    sw = None
    if case == "collisions":  # top halves of the hashes shared (values not 1: the kernel
        # does not read them; pair_rows checks them)
        C, pairs = _colliding_rows()
        pick = np.array([r for p in pairs[:20] for r in p] + list(rng.integers(0, C.shape[0],
                                                                              60)))
        X = to_csr(C[rng.permutation(np.repeat(pick, rng.integers(1, 4, pick.shape[0])))])
        y = np.ones(X.shape[0])
    else:
        X, y = _pair_rows(rng, n=300 if case == "distinct" else 600,
                          users=40 if case == "distinct" else 25)
        if case == "distinct":
            keep = np.unique(X.toarray(), axis=0, return_index=True)[1]
            X, y = to_csr(X[np.sort(keep)]), y[np.sort(keep)]
        if case == "weights":
            sw = rng.choice([0.5, 1.0, 3.0], X.shape[0])
    (ok, rows, w, place, etpos, moments), E = _pair_groups(X, y, sw)
    want_rows, want_w = oracle(X, y, sw)
    assert ok and np.array_equal(rows, want_rows)
    g = rows.shape[0]
    if w.shape[0] == 0:
        assert sw is None and g == X.shape[0] and case in ("distinct", "collisions")
    else:
        assert np.array_equal(w, want_w)
    first, second = X.indices[X.indptr[rows]], X.indices[X.indptr[rows] + 1]
    assert etpos.dtype == np.uint16 and np.array_equal(etpos, np.r_[first, second])
    want_place = np.full(X.shape[1], -1)
    want_place[first], want_place[second] = 0, 1
    assert np.array_equal(place, want_place)
    assert np.array_equal(E[:g, 0], y[rows])
    assert np.array_equal(moments, dedup.target_moments(y, rows.astype(np.int32), w))


def test_pair_groups_refuses_rows_not_of_two_fields():
    rng = np.random.default_rng(10)
    X, y = _pair_rows(rng)
    three = to_csr(sp.hstack([X, sp.csr_matrix(np.ones((X.shape[0], 1)))]).tocsr())
    crossed = X.copy()
    crossed.indices[-2:] = [25, X.shape[1] - 1]  # item 0 (feature 25) standing first
    for bad in (three, to_csr(crossed)):
        (ok, *_), _ = _pair_groups(bad, y, None)
        assert not ok
    (ok, *_), _ = _pair_groups(X, y, None, max_bucket=10)  # buckets of about 24 rows
    assert not ok
