"""Building the row layout of the coordinate sweep (:data:`fmlearn.kernels.cd.Columns`) from CSR
rows, without copying them: the colouring of the features, the entries of each colour class
in row order, and the predictions of the rows for the sweep's row state.

The fit's rows are rows of a *source* CSR matrix (the user's, when it is already canonical)
through an index: fit row r is source row ``rows[r]`` (an empty ``rows`` means row r itself).
So the canonical order and the merged duplicates of ``fmlearn._data.merged_rows`` cost an
index of 4 bytes per row instead of a copy of the matrix.
"""

import numpy as np

from ._jit import njit
from .predict import _pair, _row


@njit(cache=True, nogil=True)
def _src(rows, r):
    return r if rows.shape[0] == 0 else rows[r]


@njit(cache=True)
def inverse_rows(rows, n_src):
    """``inv`` (n_src, ``rows``' dtype): ``inv[rows[r]] = r``, -1 for the source rows no fit row
    reads; one pass, without the n-long ``arange`` of NumPy's ``inv[rows] = arange(n)``
    (8,000,000 rows in random order: 0.04-0.07 against 0.08-0.09 CPU s, loaded machine).
    ``rows`` must index rows below ``n_src`` (``fmlearn._data.merged_rows`` gives such)."""
    inv = np.full(n_src, -1, dtype=rows.dtype)
    for r in range(rows.shape[0]):
        inv[rows[r]] = r
    return inv


@njit(cache=True)
def rows_cooccurrence_work(indptr, inv):
    """sum_r nnz_r^2 over the fit rows: the cost of the feature co-occurrence graph. Reads the
    source rows in order; source row u counts when ``inv[u] >= 0`` (an empty ``inv``: all)."""
    total = 0
    for u in range(indptr.shape[0] - 1):
        if inv.shape[0] and inv[u] < 0:
            continue
        m = indptr[u + 1] - indptr[u]
        total += m * m
    return total


@njit(cache=True)
def coloring_rounds(indptr, indices, keep, n_features, max_rounds, fcount):
    """The greedy colouring of :func:`fmlearn.kernels.cd.greedy_coloring` (features in index
    order, each the smallest colour unused by its lower-index neighbours) computed by rounds
    over the rows instead of a pass over the columns.

    The greedy colouring is the one solution of color[j] = mex {color[l] : l < j shares a row
    with j} (by induction on j). Each round recomputes every colour from the previous
    round's by one streaming pass over the rows, a feature's lower neighbours' colours kept
    as a 64-bit mask; after round t every feature whose chain of lower neighbours is shorter
    than t has its final colour, and a round that changes nothing has reached the solution.
    Rows with ``keep[i]`` False are left out (an empty ``keep``: none).

    Two one-hot fields settle in round one, without the second round's pass: from colours
    all 0, round one gives colour 1 to the features H that stand second in a row and 0 to
    the others. When no kept row has more than two entries and no feature standing first in
    a row of two is in H, round two would give each second feature b the mask of its first
    features' colours, all 0, so colour 1 again, and every other feature colour 0: nothing
    changes, and round one's colours are the solution (the check is O(d) after the pass).
    Other data (a field that follows two others, rows of three) run the rounds as before.

    ``fcount`` (int64, n_features, zero; empty: not counted) gets each feature's entries in
    the kept rows, read in round one (the classes' sizes, :func:`class_counts`' ``count``,
    are its sums by colour when the fit's rows are the kept rows).

    Returns ``(color, n_colors, ok)``; ``ok`` is False when a colour reached 64 or
    ``max_rounds`` rounds did not settle (the caller then runs the column-wise greedy
    colouring).
    """
    color = np.zeros(n_features, dtype=np.int64)
    mask = np.zeros(n_features, dtype=np.uint64)
    first = np.zeros(n_features, dtype=np.bool_)  # stands first in a kept row of two
    n = indptr.shape[0] - 1
    one = np.uint64(1)
    pairs = max_rounds >= 2  # no kept row of more than two entries (so far)
    for t in range(max_rounds):
        mask[:] = 0
        if t == 0:  # every colour 0: each entry after a row's first gets bit 0
            for i in range(n):
                if keep.shape[0] and not keep[i]:
                    continue
                lo, hi = indptr[i], indptr[i + 1]
                if fcount.shape[0]:
                    for a in range(lo, hi):
                        fcount[indices[a]] += 1
                if hi - lo == 2:
                    first[indices[lo]] = True
                elif hi - lo > 2:
                    pairs = False
                for b in range(lo + 1, hi):
                    mask[indices[b]] |= one
        else:
            for i in range(n):
                if keep.shape[0] and not keep[i]:
                    continue
                for a in range(indptr[i], indptr[i + 1]):
                    bit = one << np.uint64(color[indices[a]])
                    for b in range(a + 1, indptr[i + 1]):
                        mask[indices[b]] |= bit
        changed = False
        n_colors = 0
        for j in range(n_features):
            m = mask[j]
            c = 0
            while c < 64 and (m >> np.uint64(c)) & one:
                c += 1
            if c >= 63:
                return color, 0, False
            if c != color[j]:
                changed = True
                color[j] = c
            if c + 1 > n_colors:
                n_colors = c + 1
        if not changed:
            return color, n_colors, True
        if t == 0 and pairs:
            settled = True
            for j in range(n_features):
                if first[j] and color[j] == 1:
                    settled = False
                    break
            if settled:  # round two would change nothing (see above)
                return color, n_colors, True
    return color, 0, False


@njit(cache=True)
def all_ones(data):
    """Whether every value is 1 (stops at the first that is not)."""
    for p in range(data.shape[0]):
        if data[p] != 1.0:
            return False
    return True


@njit(cache=True)
def fill_fields(indptr, indices, inv, n_features, m, etpos):
    """The colouring and the class-major entries of ``m`` one-hot fields in one pass over the
    source rows (every source row a fit row: source row u is fit row ``inv[u]``, an empty
    ``inv``: u), when every row has ``m`` entries and every feature stands at the same place
    p(j) in every row it is in. Then :func:`coloring_rounds` gives feature j colour p(j) (by
    induction on the rounds: from colours 0, round t gives min(p(j), t), since the entries
    before j in any of its rows stand at places 0, ..., p(j) - 1; round m changes nothing),
    0 to the features in no row, every row has one entry in each of the m classes, and the
    entry of class c in fit row r goes to ``etpos[c n + r]``. Writes the entries' *features*
    there (the caller maps them to their places in their class once the classes are known;
    ``etpos`` must hold ``n_features - 1``). Returns ``(place, ok)``: ``place[j]`` p(j), -1
    for the features in no row; ``ok`` False, as soon as a row breaks the shape, leaves
    ``etpos`` partly written (the caller then runs :func:`coloring_rounds` and the fill)."""
    n = etpos.shape[0] // m
    place = np.full(n_features, -1, dtype=np.int64)
    for u in range(indptr.shape[0] - 1):
        lo = indptr[u]
        if indptr[u + 1] - lo != m:
            return place, False
        r = u if inv.shape[0] == 0 else inv[u]
        for c in range(m):
            j = indices[lo + c]
            if place[j] != c:
                if place[j] >= 0:
                    return place, False
                place[j] = c
            etpos[c * n + r] = j
    return place, True


@njit(cache=True, nogil=True)
def to_places(etpos, pos):
    """``etpos[i] = pos[etpos[i]]``: the features :func:`fill_fields` wrote, as their places."""
    for i in range(etpos.shape[0]):
        etpos[i] = pos[etpos[i]]


@njit(cache=True)
def class_counts(indptr, indices, data, inv, color, n_colors):
    """Entries per colour class over the fit rows, and whether every value of a class is 1.

    Reads the source rows in their own order (streaming; the fit's order would jump through
    them): source row u is a fit row when ``inv[u] >= 0`` (an empty ``inv``: every row)."""
    count = np.zeros(n_colors, dtype=np.int64)
    ones = np.ones(n_colors, dtype=np.bool_)
    for u in range(indptr.shape[0] - 1):
        if inv.shape[0] and inv[u] < 0:
            continue
        for p in range(indptr[u], indptr[u + 1]):
            c = color[indices[p]]
            count[c] += 1
            if data[p] != 1.0:
                ones[c] = False
    return count, ones


@njit(cache=True)
def fill_dense_classes(indptr, indices, data, inv, color, pos, eptr, xoff, etpos, ex):
    """:func:`fill_classes` when every class has one entry in every fit row: the entry of class
    c in fit row r goes to place r of the class, so the source rows are read in their own order
    (streaming) and each entry written to its place (source row u is fit row ``inv[u]``, none
    when negative; an empty ``inv``: row u itself)."""
    for u in range(indptr.shape[0] - 1):
        r = u
        if inv.shape[0]:
            r = inv[u]
            if r < 0:
                continue
        for p in range(indptr[u], indptr[u + 1]):
            j = indices[p]
            c = color[j]
            etpos[eptr[c] + r] = pos[j]
            if xoff[c] >= 0:
                ex[xoff[c] + r] = data[p]


@njit(cache=True)
def fill_classes(indptr, indices, data, rows, n, color, pos, eptr, roff, xoff, etpos, erow, ex):
    """Write every entry of the fit rows into its colour class, rows in order (see
    :data:`fmlearn.kernels.cd.Columns`)."""
    n_colors = eptr.shape[0] - 1
    fill = np.zeros(n_colors, dtype=np.int64)
    for r in range(n):
        u = _src(rows, r)
        for p in range(indptr[u], indptr[u + 1]):
            j = indices[p]
            c = color[j]
            q = fill[c]
            fill[c] = q + 1
            etpos[eptr[c] + q] = pos[j]
            if roff[c] >= 0:
                erow[roff[c] + q] = r
            if xoff[c] >= 0:
                ex[xoff[c] + q] = data[p]


@njit(cache=True)
def row_state_at(indptr, indices, data, rows, w0, w, V, y, by_source, squared, E, S, sc,
                 zero_work):
    """Fill column 0 of the row cache ``E`` (n, 3) of :mod:`fmlearn.kernels.cd`: ``E[r, 0]``
    the prediction of fit row r (source row ``rows[r]``; an empty ``rows``: row r), less
    its target when ``squared``: ``y[r]``, or with ``by_source`` ``y[rows[r]]`` (the source
    rows' targets, subtracted in the source pass, which reads them in their order: the same
    operands as with the gathered targets); with ``zero_work`` also ``E[r, 1] = E[r, 2] = 0``.

    Two streaming passes instead of one pass with a random write per row: the predictions of
    every source row in source order into column ``sc`` of ``S`` (``S[u, sc]``, row for row
    the arithmetic of :func:`fmlearn.kernels.predict.fm_predict_csr`), then ``E[r, 0]``
    gathered in fit order (independent reads, which the CPU overlaps; the random *write* per
    row of a pass through the inverse index cost 3x as much: 0.17 against 0.05 CPU s at
    2,000,000 rows). ``S`` may be ``E`` itself with ``sc = 2`` when the fit rows
    are a permutation of the source rows and ``zero_work`` is set (no memory of its own);
    else an (n_source, 1) scratch array."""
    k = V.shape[1]
    q = np.empty(k)
    qq = np.empty(k)
    at_source = squared and by_source  # pred - target in the source pass, streaming y
    for u in range(indptr.shape[0] - 1):
        f = _row(indptr, indices, data, u, w0, w, V, q, qq)
        S[u, sc] = f - y[u] if at_source else f
    n = E.shape[0]
    for r in range(n):
        f = S[_src(rows, r), sc]
        E[r, 0] = f - y[r] if squared and not by_source else f
    if zero_work:
        for r in range(n):
            E[r, 1] = 0.0
            E[r, 2] = 0.0
    return E


@njit(cache=True)
def field_row_state(etpos, order, color_ptr, rows, one, w0, w, V, y, by_source, squared, E,
                   zero_work, held):
    """:func:`row_state_at` on the layout of :func:`fill_fields` (one-hot fields, values
    ``one[0]``, the data's 1; the fit rows a permutation of the source rows): fit row r's
    entries are the features ``order[color_ptr[c] + etpos[c n + r]]`` for c = 0, 1, ...,
    in the order of its CSR row, so a pass in fit order computes the
    predictions with the arithmetic of :func:`fmlearn.kernels.predict.fm_predict_csr` (its
    ``_row``, called on each row's features as a one-row CSR matrix) from the entries and
    writes ``E`` in order: no pass over the CSR rows and no gather of predictions.

    The targets as in :func:`row_state_at`; the source rows' (``by_source``: ``y[rows[r]]``)
    are gathered into ``E[:, 0]`` first by a loop of nothing but the reads (independent, so
    the CPU overlaps them; read inside the arithmetic's loop they cost 0.6 CPU s more at
    8,000,000 rows on a loaded machine), then replaced by the prediction less the target;
    ``held``: ``E[:, 0]`` already holds them (``kernels.dedup.pair_groups`` put them there;
    then, with two fields, the phase took 0.074 (0.073-0.078) CPU s at 8,000,000 rows in a
    fit's set-up, against 0.104 (0.104-0.106) before :func:`fmlearn.kernels.predict._pair`
    computed the factors' terms in a loop of their own: ``benchmarks/bench_setup_ab.py
    --reps 5`` against 1c333f9, load 1.00-1.16).
    8,000,000 rows, the row cache already touched, in one process, quiet machine: 0.205-0.238
    CPU s (0.195-0.208 when it repeated ``_row``'s arithmetic inline; row for row the same
    E). In a fit's set-up, where the first
    touch of the 192 MB row cache on huge pages dominates, the phase took 0.456
    (0.324-0.517) CPU s against 0.464 (0.429-0.559) with :func:`row_state_at`
    (``benchmarks/bench_setup_ab.py``, 5 alternated fresh processes, load 0.8-1.0)."""
    k = V.shape[1]
    q = np.empty(k)
    qq = np.empty(k)
    n = E.shape[0]
    m = color_ptr.shape[0] - 1
    x = one[0]
    staged = squared and (by_source or held)
    if staged and not held:  # a tight loop of independent reads, which the CPU overlaps
        for r in range(n):
            E[r, 0] = y[rows[r]]
    # Two fields (user x item) take a loop of their own: _row's arithmetic in registers. The
    # row's targets and stores are written out in each loop: through an inlined helper this
    # loop took 0.131 CPU s against 0.075 at 8,000,000 rows (the row state touched, one
    # process, the same doubles).
    if m == 2:
        a0, a1 = color_ptr[0], color_ptr[1]
        for r in range(n):
            acc = _pair(w0, w, V, order[a0 + np.int64(etpos[r])],
                        order[a1 + np.int64(etpos[n + r])], x, q)
            if staged:
                acc = acc - E[r, 0]
            elif squared:
                acc = acc - y[r]
            E[r, 0] = acc
            if zero_work:
                E[r, 1] = 0.0
                E[r, 2] = 0.0
        return E
    ptr = np.zeros(2, dtype=np.int64)  # fit row r as a one-row CSR matrix for _row
    ptr[1] = m
    feat = np.empty(m, dtype=np.int64)
    vals = np.full(m, x)
    for r in range(n):
        for c in range(m):
            feat[c] = order[color_ptr[c] + np.int64(etpos[c * n + r])]
        acc = _row(ptr, feat, vals, 0, w0, w, V, q, qq)
        if staged:
            acc = acc - E[r, 0]
        elif squared:
            acc = acc - y[r]
        E[r, 0] = acc
        if zero_work:
            E[r, 1] = 0.0
            E[r, 2] = 0.0
    return E
