"""Duplicate-row kernels of the data plumbing (``fmlearn._data``): hashing rows and grouping
identical ones, for :func:`fmlearn._data.merge_duplicate_rows`; and the one-pass square sums of
:class:`fmlearn._plan.DataSummary` (:func:`exact_square_sums`)."""

import math

import numpy as np
from numba import njit


@njit(cache=True)
def row_hashes(indptr, indices, data_bits, y_bits):
    # 64-bit FNV-1a style mixing of each row's (index, value-bits) pairs and its target.
    n = indptr.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    prime = np.uint64(1099511628211)
    for i in range(n):
        h = np.uint64(14695981039346656037)
        h = (h ^ np.uint64(indptr[i + 1] - indptr[i])) * prime
        for p in range(indptr[i], indptr[i + 1]):
            h = (h ^ np.uint64(indices[p])) * prime
            h = (h ^ np.uint64(data_bits[p])) * prime
        h = (h ^ y_bits[i]) * prime
        out[i] = h
    return out


@njit(cache=True)
def same_row(indptr, indices, data, y, a, b):
    if y[a] != y[b]:
        return False
    la = indptr[a + 1] - indptr[a]
    if la != indptr[b + 1] - indptr[b]:
        return False
    for t in range(la):
        pa = indptr[a] + t
        pb = indptr[b] + t
        if indices[pa] != indices[pb] or data[pa] != data[pb]:
            return False
    return True


@njit(cache=True)
def group_sorted(order, h, indptr, indices, data, y):
    n = order.shape[0]
    group = np.empty(n, dtype=np.int64)
    reps = np.empty(n, dtype=np.int64)
    g = -1
    for t in range(n):
        i = order[t]
        if g >= 0 and h[i] == h[reps[g]] and same_row(indptr, indices, data, y, reps[g], i):
            group[t] = g
        else:
            g += 1
            reps[g] = i
            group[t] = g
    return group, reps[: g + 1]


# Bits per digit of the radix sort: 256 buckets, eight passes over 64-bit keys. On 8,000,000
# keys (one thread, loaded machine) 8 bits took 0.26-0.33 CPU s, 7 bits 0.28-0.34, 9 bits
# 0.37-0.39, 11 bits 0.48: a pass's 256 write streams stay in the L1/L2 caches and TLB.
_DIGIT = 8


@njit(cache=True)
def radix_argsort(keys):
    """``(order, sorted keys)`` of uint64 ``keys``: ``order`` (int32) is what
    ``np.argsort(keys, kind="stable")`` returns, by a least-significant-digit radix sort
    (8 passes of 8 bits; a pass whose digit is the same for every key is skipped): 0.26-0.33
    CPU s on 8,000,000 keys against 1.2-1.3 for ``np.argsort``. ``keys`` is left unchanged
    (:func:`radix_argsort_inplace` sorts a buffer the caller gives up)."""
    return radix_argsort_inplace(keys.copy())


@njit(cache=True)
def radix_argsort_inplace(keys):
    """:func:`radix_argsort` using ``keys`` itself as one of its two key buffers (the caller
    gives it up: its content is undefined afterwards; the sorted keys are returned): one copy
    of the keys less at the peak of the duplicate merge (64 MB at 8,000,000 rows)."""
    n = keys.shape[0]
    nb = 1 << _DIGIT
    mask = np.uint64(nb - 1)
    n_pass = (64 + _DIGIT - 1) // _DIGIT
    count = np.zeros((n_pass, nb + 1), dtype=np.int64)
    for i in range(n):
        k = keys[i]
        for s in range(n_pass):
            count[s, ((k >> np.uint64(s * _DIGIT)) & mask) + 1] += 1
    ka = keys
    ia = np.arange(n).astype(np.int32)
    kb = np.empty_like(ka)
    ib = np.empty_like(ia)
    for s in range(n_pass):
        c = count[s]
        if c.max() == n:  # every key has the same digit here
            continue
        for b in range(nb):
            c[b + 1] += c[b]
        shift = np.uint64(s * _DIGIT)
        for i in range(n):
            d = (ka[i] >> shift) & mask
            p = c[d]
            c[d] = p + 1
            kb[p] = ka[i]
            ib[p] = ia[i]
        ka, kb = kb, ka
        ia, ib = ib, ia
    return ia, ka


@njit(cache=True)
def group_keys(order, skeys, src, indptr, indices, data, y):
    """:func:`group_sorted` from the sorted keys (``skeys[t]`` is the key of ``order[t]``) in
    place of the hashes: rows equal in content have equal keys, so comparing the keys of
    consecutive rows (no random access) then their content groups exactly as comparing their
    hashes does. Row ``order[t]`` is row ``src[order[t]]`` of the CSR arrays (``src`` empty:
    itself). Returns ``group`` (int32, per sorted position) and ``reps`` (int64, each group's
    first row, an index into ``order``'s range; ``order``'s dtype: int32 from the radix sort,
    4 bytes per row less than int64)."""
    n = order.shape[0]
    group = np.empty(n, dtype=np.int32)
    reps = np.empty(n, dtype=order.dtype)
    g = -1
    start = 0
    for t in range(n):
        i = order[t]
        same = False
        if g >= 0 and skeys[t] == skeys[start]:
            a = reps[g] if src.shape[0] == 0 else src[reps[g]]
            b = i if src.shape[0] == 0 else src[i]
            same = same_row(indptr, indices, data, y, a, b)
        if same:
            group[t] = g
        else:
            g += 1
            reps[g] = i
            start = t
            group[t] = g
    return group, reps[: g + 1]


@njit(cache=True)
def group_weights(group, order, src, sw, n_groups):
    """Sum of the weights ``sw[src[order[t]]]`` per group, in sorted order (``np.bincount``'s
    order)."""
    w = np.zeros(n_groups)
    for t in range(group.shape[0]):
        i = order[t]
        w[group[t]] += sw[i if src.shape[0] == 0 else src[i]]
    return w


@njit(cache=True)
def row_keys(indptr, indices, data_bits, y, src, n, b, by_first):
    """The sort keys of :func:`fmlearn._data.merged_rows` for rows ``src[r]`` (``src`` empty:
    r), r < n: the row's hash (:func:`row_hashes` of the targets ``y + 0.0``, which maps -0.0
    to +0.0, without a copy of ``y``), or with ``by_first`` the row's first feature + 1 in the
    top ``b`` bits and the hash's top 64 - b bits below."""
    out = np.empty(n, dtype=np.uint64)
    yv = np.empty(1, dtype=np.float64)
    y_bits = yv.view(np.uint64)
    prime = np.uint64(1099511628211)
    ub = np.uint64(b)
    top = np.uint64(64 - b)
    for r in range(n):
        i = r if src.shape[0] == 0 else src[r]
        h = np.uint64(14695981039346656037)
        h = (h ^ np.uint64(indptr[i + 1] - indptr[i])) * prime
        for p in range(indptr[i], indptr[i + 1]):
            h = (h ^ np.uint64(indices[p])) * prime
            h = (h ^ np.uint64(data_bits[p])) * prime
        yv[0] = y[i] + 0.0
        h = (h ^ y_bits[0]) * prime
        if by_first:
            first = np.uint64(0)
            if indptr[i + 1] > indptr[i]:
                first = np.uint64(indices[indptr[i]]) + np.uint64(1)
            h = (first << top) | (h >> ub)
        out[r] = h
    return out


# Below this magnitude every integer is a double and a sum of non-negative integers (or
# halves) is exact in any order.
_EXACT = 2.0 ** 52


@njit(cache=True)
def exact_square_sums(indptr, data, sw):
    """``(ok, sum_sq, n_nonzero, sum_pairs)`` of :func:`fmlearn._plan.square_stats` and
    :func:`fmlearn._plan.pair_stats` in one pass over CSR rows with weights ``sw``, without
    their O(nnz) temporaries; ``ok`` is True when the three sums are exact.

    They are exact when every value and weight is an integer and every partial sum stays below
    2^52: each term (s_i x_ij^2, s_i, s_i (s2_i^2 - s4_i) / 2 with s2_i, s4_i a row's sums of
    x^2 and x^4) is then an integer or a half, non-negative, so every order of summation --
    NumPy's pairwise dot products included -- gives the same double. One-hot and count data
    with unit or integer weights qualify; otherwise the caller computes the sums as before (the
    order of NumPy's sums decides their last bits, and the initial state depends on them)."""
    n = indptr.shape[0] - 1
    sum_sq = 0.0
    n_nonzero = 0.0
    sum_pairs = 0.0
    for i in range(n):
        s = sw[i]
        if not (s >= 0 and s == math.floor(s) and s < _EXACT):
            return False, 0.0, 0.0, 0.0
        s2 = 0.0
        s4 = 0.0
        nz = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            x = data[p]
            if not (x == math.floor(x) and abs(x) < _EXACT):
                return False, 0.0, 0.0, 0.0
            q = x * x
            s2 += q
            s4 += q * q
            nz += 1.0 if x != 0 else 0.0
        if not (s2 * s2 < _EXACT):
            return False, 0.0, 0.0, 0.0
        sum_sq += s * s2
        n_nonzero += s * nz
        sum_pairs += s * max(0.5 * (s2 * s2 - s4), 0.0)
    if not (sum_sq < _EXACT and n_nonzero < _EXACT and sum_pairs < _EXACT):
        return False, 0.0, 0.0, 0.0
    return True, sum_sq, n_nonzero, sum_pairs


@njit(cache=True)
def take(values, index):
    """``values[index]`` for float64 ``values`` and an int32 ``index``, without NumPy's
    conversion of the index to intp (a pass and 8 bytes per entry): the merged rows' targets
    (0.11 against 0.12-0.25 CPU s at 8,000,000 rows in random order)."""
    out = np.empty(index.shape[0], dtype=values.dtype)
    for r in range(index.shape[0]):
        out[r] = values[index[r]]
    return out
