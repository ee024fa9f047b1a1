"""Duplicate-row kernels of the data plumbing (``fmlearn._data``): hashing rows and grouping
identical ones, for :func:`fmlearn._data.merge_duplicate_rows`."""

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
