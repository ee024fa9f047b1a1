"""Duplicate-row kernels of the data plumbing (``fmlearn._data``): hashing rows and grouping
identical ones, for :func:`fmlearn._data.merged_rows` (and the field-aware FM's merge); and
the one-pass square sums of :class:`fmlearn._plan.DataSummary` (:func:`exact_square_sums`)."""

import math

import numpy as np

from ._jit import njit


@njit(cache=True, inline="always")  # a call per row otherwise: 0.05 CPU s more at 8M rows
# (loaded machine)
def _row_hash(indptr, indices, data_bits, y, y_bits, i):
    # 64-bit FNV-1a style mixing of row i's length, its (index, value-bits) pairs and the
    # bits of its target y[i] + 0.0 (-0.0 and +0.0 both hash as +0.0; y finite), read from
    # y_bits, y's view, not through a scratch entry (a store and a load per row: twice the
    # time of the whole hashing pass)
    prime = np.uint64(1099511628211)
    h = np.uint64(14695981039346656037)
    a = indptr[i]
    e = indptr[i + 1]
    h = (h ^ np.uint64(e - a)) * prime
    for p in range(a, e):
        h = (h ^ np.uint64(indices[p])) * prime
        h = (h ^ np.uint64(data_bits[p])) * prime
    yb = y_bits[i]
    if y[i] == 0.0:
        yb = np.uint64(0)
    return (h ^ yb) * prime


@njit(cache=True)
def row_hashes(indptr, indices, data_bits, y_bits):
    """:func:`_row_hash` of every row, the targets given by their bits (``y + 0.0``'s)."""
    n = indptr.shape[0] - 1
    out = np.empty(n, dtype=np.uint64)
    y = y_bits.view(np.float64)
    for i in range(n):
        out[i] = _row_hash(indptr, indices, data_bits, y, y_bits, i)
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


# Runs of equal top halves longer than this are ordered by a merge sort, shorter ones by
# insertion (:func:`hash_argsort`).
_RUN_INSERTION = 32


@njit(cache=True)
def hash_argsort(keys):
    """``(order, top)``: ``order`` (int32) is ``np.argsort(keys, kind="stable")`` of uint64
    ``keys`` and ``top[t]`` (uint32) the top half of key ``order[t]``, for keys whose top 32
    bits are nearly distinct (:func:`row_keys`: a row's first feature and its hash's top
    bits).

    A least-significant-digit radix sort (8-bit digits: a pass's 256 write streams stay in
    the L1/L2 caches and TLB) of the top halves only -- 4 passes moving 8 bytes per key
    instead of a whole-key radix sort's 8 passes moving 12 -- then each run of equal top
    halves (rare: rows of one first feature whose hashes agree in their top bits, and
    duplicate rows) ordered stably by the bottom halves; the same order as the sort of the
    whole keys, bit for bit. On 8,000,000 keys (one thread, loaded machine) 0.19 CPU s
    against 0.31 for the whole-key radix sort it replaces and 1.2-1.3 for ``np.argsort``,
    with two 4-byte key buffers instead of two 8-byte ones (one of them a copy)."""
    n = keys.shape[0]
    nb = 256
    n_pass = 4
    count = np.zeros((n_pass, nb + 1), dtype=np.int64)
    for i in range(n):
        k = keys[i] >> np.uint64(32)
        for s in range(n_pass):
            count[s, ((k >> np.uint64(8 * s)) & np.uint64(255)) + 1] += 1
    ka = np.empty(n, dtype=np.uint32)
    kb = np.empty(n, dtype=np.uint32)
    ia = np.arange(n).astype(np.int32)
    ib = np.empty(n, dtype=np.int32)
    for i in range(n):
        ka[i] = np.uint32(keys[i] >> np.uint64(32))
    for s in range(n_pass):
        c = count[s]
        if c.max() == n:  # every key has the same digit here
            continue
        for b in range(nb):
            c[b + 1] += c[b]
        shift = np.uint32(8 * s)
        for i in range(n):
            d = (ka[i] >> shift) & np.uint32(255)
            p = c[d]
            c[d] = p + 1
            kb[p] = ka[i]
            ib[p] = ia[i]
        ka, kb = kb, ka
        ia, ib = ib, ia
    # runs of equal top halves: stably by the bottom halves (the positions within a run are
    # increasing, as the radix sort is stable)
    low = np.uint64(0xFFFFFFFF)
    t = 0
    while t < n:
        e = t + 1
        while e < n and ka[e] == ka[t]:
            e += 1
        m = e - t
        if m > _RUN_INSERTION:
            lows = np.empty(m, dtype=np.uint64)
            for a in range(m):
                lows[a] = keys[ia[t + a]] & low
            perm = np.argsort(lows, kind="mergesort")
            run = ia[t:e].copy()
            for a in range(m):
                ia[t + a] = run[perm[a]]
        elif m > 1:
            for a in range(t + 1, e):
                v = ia[a]
                kv = keys[v] & low
                b = a
                while b > t and (keys[ia[b - 1]] & low) > kv:
                    ia[b] = ia[b - 1]
                    b -= 1
                ia[b] = v
        t = e
    return ia, ka


@njit(cache=True)
def group_hashed(order, top, keys, src, indptr, indices, data, y):
    """:func:`group_sorted` after :func:`hash_argsort`, from the keys in place of the hashes:
    rows equal in content have equal keys, so comparing the keys of consecutive rows then
    their content groups exactly as comparing their hashes does; the sorted top halves
    ``top`` rule most pairs out without reading ``keys`` (in the original order) at random.
    Row ``order[t]`` is row ``src[order[t]]`` of the CSR arrays (``src`` empty: itself).
    Returns ``group`` (int32, per sorted position) and ``reps`` (each group's first row, an
    index into ``order``'s range, in ``order``'s dtype)."""
    n = order.shape[0]
    group = np.empty(n, dtype=np.int32)
    reps = np.empty(n, dtype=order.dtype)
    g = -1
    start = 0
    for t in range(n):
        i = order[t]
        same = False
        if g >= 0 and top[t] == top[start] and keys[i] == keys[order[start]]:
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
    y_bits = y.view(np.uint64)
    ub = np.uint64(b)
    top = np.uint64(64 - b)
    for r in range(n):
        i = r if src.shape[0] == 0 else src[r]
        h = _row_hash(indptr, indices, data_bits, y, y_bits, i)
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
    :func:`fmlearn._plan.pair_stats` in one pass over CSR rows with weights ``sw`` (empty:
    unit weights, without an n-long array of ones), without their O(nnz) temporaries; ``ok``
    is True when the three sums are exact.

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
        s = 1.0 if sw.shape[0] == 0 else sw[i]
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
def target_moments(y, rows, sw):
    """``(min, max, sum_r s_r t_r, sum_r s_r t_r^2)`` of the targets ``t_r = y[rows[r]]``
    (an empty ``rows``: ``y[r]``) with weights ``s_r = sw[r]`` (an empty ``sw``: 1), in one
    pass in r's order: what :class:`fmlearn._plan.DataSummary` records of a fit's targets.

    Replaces NumPy's ``min``, ``max``, ``sw @ y`` and ``sw @ (y * y)`` on the gathered
    targets: no gathered copy, no squares' temporary and no array of unit weights (three
    n-long arrays: 24 bytes per row, whose first touch costs page faults), and no BLAS call,
    which wakes OpenBLAS's threads to spin on the idle core (about 0.1 CPU s after a dot
    product of 8,000,000 entries) and sums in an order that depends on the machine's BLAS
    kernel. The sums here are sequential, so the same doubles on every machine; exact (equal
    to any other order's) when the targets and weights are small integers (ratings).
    In an ALS fit of 8,000,000 rows (the targets read through the fit's row index, in random
    order): 0.068-0.076 CPU s (six fits, quiet machine), where the gather of
    ``fmlearn._data.merged_rows`` took 0.09 and the NumPy route 0.25-0.30 more (the squares
    and the unit weights faulted in, BLAS's spin; one process each, before other work ran
    beside them)."""
    n = rows.shape[0] if rows.shape[0] else y.shape[0]
    lo, hi, total, total_sq = np.inf, -np.inf, 0.0, 0.0
    for r in range(n):
        lo, hi, total, total_sq = _moment_step(
            lo, hi, total, total_sq, y[rows[r]] if rows.shape[0] else y[r],
            1.0 if sw.shape[0] == 0 else sw[r])
    return lo, hi, total, total_sq


@njit(cache=True, inline="always")
def _moment_step(lo, hi, total, total_sq, t, s):
    # target_moments' running (min, max, sum, sum of squares) with target t of weight s
    # -0.0 as +0.0 in the range: it does not depend on the rows' order
    return min(lo, t + 0.0), max(hi, t + 0.0), total + s * t, total_sq + s * (t * t)


@njit(cache=True)
def true_positions(mask):
    """``np.flatnonzero(mask).astype(np.int32)`` for a bool ``mask`` of fewer than 2^31
    entries, without the int64 positions (a count pass, then the int32 positions only)."""
    m = 0
    for i in range(mask.shape[0]):
        m += mask[i]
    out = np.empty(m, dtype=np.int32)
    m = 0
    for i in range(mask.shape[0]):
        if mask[i]:
            out[m] = i
            m += 1
    return out


@njit(cache=True)
def take(values, index):
    """``values[index]`` for float64 ``values`` and an int32 ``index``, without NumPy's
    conversion of the index to intp (a pass and 8 bytes per entry): the merged rows' targets
    (0.11 against 0.12-0.25 CPU s at 8,000,000 rows in random order)."""
    out = np.empty(index.shape[0], dtype=values.dtype)
    for r in range(index.shape[0]):
        out[r] = values[index[r]]
    return out


# Largest bucket of rows sharing a first feature that :func:`first_feature_groups` sorts (its
# per-bucket sub-digit has at most 16 bits); a larger one (e.g. a column present in every
# row, first) makes it decline, and the caller takes the radix path.
MAX_BUCKET = 1 << 20
# Runs of equal hash top halves longer than this are merge-sorted by the rest of the key,
# shorter ones insertion-sorted.
_SMALL_RUN = 32


@njit(cache=True)
def _insertion_sort(a, lo, hi, budget):
    # a[lo:hi] sorted in place; False (a[lo:hi] a permutation of itself) when more than
    # ``budget`` moves would be needed
    moves = 0
    for t in range(lo + 1, hi):
        v = a[t]
        c = t
        while c > lo and a[c - 1] > v:
            a[c] = a[c - 1]
            c -= 1
        a[c] = v
        moves += t - c
        if moves > budget:
            return False
    return True


@njit(cache=True)
def _sort_bucket(a, lo, hi, sc, sub):
    # the distinct uint64 a[lo:hi] sorted into sc[:hi - lo]: a counting scatter by the top k
    # bits (uniform hashes: about one value per sub-bucket), then an insertion sort of the
    # nearly sorted whole, or a full sort when that would take more than 8 moves a value
    m = hi - lo
    k = 0
    while (1 << k) < m and k < 16:
        k += 1
    if k < 3:
        for t in range(m):
            sc[t] = a[lo + t]
    else:
        nk = 1 << k
        sub[:nk + 1] = 0
        shift = np.uint64(64 - k)
        for t in range(lo, hi):
            sub[(a[t] >> shift) + 1] += 1
        for c in range(nk):
            sub[c + 1] += sub[c]
        for t in range(lo, hi):
            c = a[t] >> shift
            p = sub[c]
            sub[c] = p + 1
            sc[p] = a[t]
    if not _insertion_sort(sc, 0, m, 8 * m + 64):
        sc[:m] = np.sort(sc[:m])


@njit(cache=True)
def _order_run(sc, kp, t, e, indptr, indices, data_bits, y, y_bits, ub, rowmap):
    # sc[t:e] (packed top half and row, equal top halves, increasing rows) ordered stably
    # by the keys' rest (the hashes shifted by ub, recomputed into kp); the low halves are
    # the rows, or with a non-empty rowmap the places of the rows in it
    low = np.uint64(0xFFFFFFFF)
    same = True
    for a in range(t, e):
        i = np.int64(sc[a] & low)
        if rowmap.shape[0]:
            i = np.int64(rowmap[i])
        kp[a] = _row_hash(indptr, indices, data_bits, y, y_bits, i) >> ub
        same = same and kp[a] == kp[t]
    if same:  # duplicate rows: already in order
        return
    if e - t > _SMALL_RUN:
        perm = np.argsort(kp[t:e], kind="mergesort")
        run = sc[t:e].copy()
        for a in range(e - t):
            sc[t + a] = run[perm[a]]
        return
    for a in range(t + 1, e):
        v = kp[a]
        o = sc[a]
        c = a
        while c > t and kp[c - 1] > v:
            kp[c] = kp[c - 1]
            sc[c] = sc[c - 1]
            c -= 1
        kp[c] = v
        sc[c] = o


@njit(cache=True, inline="always")
def _group_bucket(sc, kp, m, rowmap, indptr, indices, data, data_bits, y, y_bits, ub, sw,
                  unit, rows, w, g, merged, n, firsts):
    # The grouping of a bucket sorted into sc[:m] (low halves: rows, or with a non-empty
    # rowmap their places in it), in one pass: each run of equal top halves (duplicate rows,
    # rare collisions) ordered stably by the rest of the key, recomputed (the rows in a run
    # are increasing), when it starts; then consecutive identical rows grouped (within the
    # bucket: rows of other first features differ), the weights summed in sorted order
    # (unit: the sizes, in w from the first merge on). A new group's first row goes to
    # rows[g], the low half of its key to firsts (from 0). Returns (g, merged, w).
    low = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    run_end = 0
    start = -1
    k = 0
    for t in range(m):
        if t >= run_end:
            e = t + 1
            while e < m and (sc[e] >> s32) == (sc[t] >> s32):
                e += 1
            if e - t > 1:
                _order_run(sc, kp, t, e, indptr, indices, data_bits, y, y_bits, ub, rowmap)
            run_end = e
        q = np.int64(sc[t] & low)
        i = np.int64(rowmap[q]) if rowmap.shape[0] else q
        wt = 1.0 if unit else sw[i]
        if start >= 0 and (sc[t] >> s32) == (sc[start] >> s32) \
                and same_row(indptr, indices, data, y, rows[g - 1], i):
            if not merged:
                merged = True
                if unit:
                    w = np.empty(n)
                    w[:g] = 1.0
            w[g - 1] += wt
        else:
            if merged or not unit:
                w[g] = wt
            rows[g] = i
            firsts[k] = q
            k += 1
            g += 1
            start = t
    return g, merged, w


@njit(cache=True)
def first_feature_groups(indptr, indices, data, data_bits, y, src, n, d, b, sw, unit,
                         max_bucket):
    """The merge of :func:`fmlearn._data.merged_rows` with ``group_by_first``, in one kernel:
    ``(ok, rows, w)``, the first row (of ``X``) of each group of identical rows in the order
    of the stable sort of :func:`row_keys`' keys, and the groups' summed weights ``sw[row]``
    (``unit``: their sizes; ``w`` is empty when no group has two rows). Rows ``src[r]``
    (``src`` empty: r), r < n, of a CSR matrix of ``d`` columns and fewer than 2^31 rows;
    ``b`` as for :func:`row_keys`. ``ok`` is False (and nothing computed) when more than
    ``max_bucket`` rows (at most ``MAX_BUCKET``) share a first feature.

    It replaces :func:`row_keys`, :func:`hash_argsort`, :func:`group_hashed` and
    :func:`group_weights` (the same rows, order and weights, bit for bit) with fewer passes
    over less fresh memory (12 bytes a row instead of 32, 48 with merged unit weights), for
    a first feature shared by at most ``max_bucket`` rows (the radix sort does not care) and
    few distinct first features (``fmlearn._data`` bounds the columns: the scatter's write
    streams are one per first feature). A key is the row's first
    feature + 1 above its hash's top bits, so the stable sort of the keys is a counting sort
    of the rows by first feature: one pass hashes the rows (the hashes' top halves, 4 bytes
    a row) and counts the first features, a second one scatters (top half, row) pairs,
    packed in one uint64, by first feature -- sorting a bucket's distinct packed values is
    the stable sort of its top halves. Each bucket (small and cache-resident in user x item
    data) is then sorted (:func:`_sort_bucket`), its runs of equal top halves (duplicate
    rows, rare collisions) ordered stably by the rest of the key, recomputed, and its rows
    grouped while it is in the cache; the groups' first rows are written over the hashes'
    buffer, which becomes ``rows``. The row hash reads the targets' bits through a view
    (``y`` finite, -0.0 hashed as +0.0), so ``y`` must be contiguous.

    At 8,000,000 user x item rows in random order (4,000 users; one thread), in a fit's
    set-up: 0.228 (0.217-0.262) CPU s, where :func:`row_keys`, :func:`hash_argsort` and
    :func:`group_hashed` took 0.086, 0.185 and 0.039 (medians; ``benchmarks/bench_setup_ab.py``
    against 729dd44, 5 alternated fresh processes, load 0.8-1.0); 23,000 page faults
    instead of 78,000 (``benchmarks/bench_merged_rows.py``)."""
    y_bits = y.view(np.uint64)
    count = np.zeros(d + 2, dtype=np.int64)
    hb = np.empty(n, dtype=np.uint32)
    if src.shape[0] == 0:  # the rows themselves (a test of src per row: 0.01 CPU s more)
        for i in range(n):
            f = 0
            if indptr[i + 1] > indptr[i]:
                f = indices[indptr[i]] + 1
            count[f + 1] += 1
            hb[i] = np.uint32(_row_hash(indptr, indices, data_bits, y, y_bits, i)
                              >> np.uint64(32))
    else:
        for r in range(n):
            i = src[r]
            f = 0
            if indptr[i + 1] > indptr[i]:
                f = indices[indptr[i]] + 1
            count[f + 1] += 1
            hb[r] = np.uint32(_row_hash(indptr, indices, data_bits, y, y_bits, i)
                              >> np.uint64(32))
    big = 0
    for f in range(d + 1):
        big = max(big, count[f + 1])
        count[f + 1] += count[f]
    if big > max_bucket:
        return False, np.zeros(0, dtype=np.int32), np.zeros(0)
    sb = np.empty(n, dtype=np.uint64)  # (top half, row) by first feature
    pos = count[:d + 1].copy()
    if src.shape[0] == 0:
        for i in range(n):
            f = 0
            if indptr[i + 1] > indptr[i]:
                f = indices[indptr[i]] + 1
            p = pos[f]
            pos[f] = p + 1
            sb[p] = (np.uint64(hb[i]) << np.uint64(32)) | np.uint64(i)
    else:
        for r in range(n):
            i = src[r]
            f = 0
            if indptr[i + 1] > indptr[i]:
                f = indices[indptr[i]] + 1
            p = pos[f]
            pos[f] = p + 1
            sb[p] = (np.uint64(hb[r]) << np.uint64(32)) | np.uint64(i)
    rows = hb.view(np.int32)  # the groups' first rows, over the consumed hashes
    sc = np.empty(big, dtype=np.uint64)
    kp = np.empty(big, dtype=np.uint64)
    nk = 1
    while nk < big and nk < (1 << 16):
        nk *= 2
    sub = np.zeros(nk + 1, dtype=np.int64)  # _sort_bucket's sub-buckets, at most nk
    no_map = np.zeros(0, dtype=np.int32)
    firsts = np.empty(big, dtype=np.int64)
    w = np.empty(n if not unit else 0)
    merged = False
    ub = np.uint64(b)
    g = 0
    for f in range(d + 1):
        lo = count[f]
        m = count[f + 1] - lo
        if m == 0:
            continue
        _sort_bucket(sb, lo, lo + m, sc, sub)
        g, merged, w = _group_bucket(sc, kp, m, no_map, indptr, indices, data, data_bits, y,
                                     y_bits, ub, sw, unit, rows, w, g, merged, n, firsts)
    if unit and not merged:
        return True, rows[:g], np.zeros(0)
    return True, rows[:g], w[:g]


@njit(cache=True)
def pair_groups(indptr, indices, data, data_bits, y, n, d, b, sw, unit, max_bucket, E):
    """:func:`first_feature_groups` on rows of two one-hot fields (every row two entries,
    each feature at one place in every row it is in; the caller checks that the values are
    1) fused with the layout of ``fmlearn.solvers._fm_common.column_data`` and the gather of
    the targets in the fit's order: ``(ok, rows, w, place, etpos, moments)``, where ``rows``
    and ``w`` are :func:`first_feature_groups`' (the same rows, order and weights, bit for
    bit; ``n`` rows of ``X``, all of them), ``place[j]`` is feature j's place in its rows (-1
    in none), ``etpos`` (uint16, 2 g for g fit rows) holds fit row r's first feature at r
    and its second at g + r (:func:`fmlearn.kernels.cd_layout.fill_fields`' entries),
    ``E[r, 0]`` the target of fit row r (``E``: the (n, 3) float64 row state to be, its
    other columns left as scratch), and ``moments`` :func:`target_moments` of the fit rows'
    targets with weights ``w`` (1 each when ``w`` is empty). ``ok`` False (nothing else
    meaningful, ``E`` possibly written) when a row breaks the shape or a bucket holds more
    than ``max_bucket`` rows.

    ``E`` is the work space: the counting scatter by first feature writes each row's
    record (its packed key, row, second feature and target: 24 bytes, a row of ``E``) at
    its place in its bucket; a bucket's records are copied to the cache, sorted and
    grouped, and fit row g's target written to ``E[g, 0]``, g never past the records
    already read. The key's low half is the record's place in its bucket, which orders the
    bucket's rows as :func:`first_feature_groups`' row numbers do (the scatter keeps the
    rows' order), so the sort is the same. What this replaces: the merge's 8-byte (key, row)
    buffer, the layout's inverse row index and its scatter of the entries by fit row, and
    two gathers of the targets through the fit's row index (the targets' statistics and the
    row state's). 8,000,000 user x item rows in random order, in a fit's set-up
    (``benchmarks/bench_setup_ab.py --reps 5`` against e3df2b0, fresh processes alternated,
    load 1.03-1.06): 0.565 (0.324-0.697) CPU s, the first touch of the row state's 192 MB
    on huge pages included (up to 0.43 s of it: 192 MB of fresh huge pages took 0.434
    (0.022-0.439) CPU s to write once in ``benchmarks/bench_first_touch.py``),
    where the separate passes took 0.222 (merge), 0.170 (layout), about 0.07 (the targets'
    statistics) and 0.372 (0.256-0.480) (the row state, its first touch included)."""
    y_bits = y.view(np.uint64)
    no = (False, np.zeros(0, dtype=np.int32), np.zeros(0), np.zeros(0, dtype=np.int8),
          np.zeros(0, dtype=np.uint16), np.zeros(4))
    count = np.zeros(d + 2, dtype=np.int64)
    place = np.full(d, -1, dtype=np.int8)
    hb = np.empty(n, dtype=np.uint32)
    for i in range(n):
        a = indptr[i]
        if indptr[i + 1] - a != 2:
            return no
        j0 = indices[a]
        j1 = indices[a + 1]
        if place[j0] == 1 or place[j1] == 0:
            return no
        place[j0] = 0
        place[j1] = 1
        count[j0 + 2] += 1
        hb[i] = np.uint32(_row_hash(indptr, indices, data_bits, y, y_bits, i) >> np.uint64(32))
    big = 0
    for f in range(d + 1):
        big = max(big, count[f + 1])
        count[f + 1] += count[f]
    if big > max_bucket:
        return no
    Ef = E.reshape(-1)
    K = Ef.view(np.uint64)
    R = Ef.view(np.int32)
    pos = count[:d + 1].copy()
    for i in range(n):  # the records, by first feature
        a = indptr[i]
        f = indices[a] + 1
        p = pos[f]
        pos[f] = p + 1
        K[3 * p] = (np.uint64(hb[i]) << np.uint64(32)) | np.uint64(p - count[f])
        R[6 * p + 2] = i
        R[6 * p + 3] = indices[a + 1]
        Ef[3 * p + 2] = y[i]
    rows = hb.view(np.int32)  # the groups' first rows, over the consumed hashes
    etpos = np.empty(2 * n, dtype=np.uint16)
    kb = np.empty(big, dtype=np.uint64)
    rb = np.empty(big, dtype=np.int32)
    fb = np.empty(big, dtype=np.int32)
    yb = np.empty(big)
    sc = np.empty(big, dtype=np.uint64)
    kp = np.empty(big, dtype=np.uint64)
    nk = 1
    while nk < big and nk < (1 << 16):
        nk *= 2
    sub = np.zeros(nk + 1, dtype=np.int64)
    firsts = np.empty(big, dtype=np.int64)
    w = np.empty(n if not unit else 0)
    merged = False
    ub = np.uint64(b)
    g = 0
    for f in range(1, d + 1):
        lo = count[f]
        m = count[f + 1] - lo
        if m == 0:
            continue
        for t in range(m):  # the bucket's records, into the cache
            p = lo + t
            kb[t] = K[3 * p]
            rb[t] = R[6 * p + 2]
            fb[t] = R[6 * p + 3]
            yb[t] = Ef[3 * p + 2]
        _sort_bucket(kb, 0, m, sc, sub)
        g0 = g
        g, merged, w = _group_bucket(sc, kp, m, rb, indptr, indices, data, data_bits, y,
                                     y_bits, ub, sw, unit, rows, w, g, merged, n, firsts)
        for r in range(g0, g):  # the new fit rows' entries and targets, from the cache
            q = firsts[r - g0]
            etpos[r] = f - 1
            etpos[n + r] = fb[q]
            Ef[3 * r] = yb[q]
    if g < n:  # merged rows: the second entries after the first g
        for r in range(g):
            etpos[g + r] = etpos[n + r]
    weighted = merged or not unit
    lo_, hi_, total, total_sq = np.inf, -np.inf, 0.0, 0.0
    for r in range(g):
        lo_, hi_, total, total_sq = _moment_step(lo_, hi_, total, total_sq, Ef[3 * r],
                                                 w[r] if weighted else 1.0)
    moments = np.array([lo_, hi_, total, total_sq])
    if not weighted:
        return True, rows[:g], np.zeros(0), place, etpos[:2 * g], moments
    return True, rows[:g], w[:g], place, etpos[:2 * g], moments
