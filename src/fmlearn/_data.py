"""Array plumbing between user input and the compiled kernels.

:func:`check_sparse_structure` is the structural gate every sparse input passes before any
SciPy conversion or compiled kernel touches it (the estimators' validators, :func:`to_csr` /
:func:`to_csc`, the stream and Dask readers call it). The other functions take already-validated
NumPy/SciPy objects and return the raw arrays that kernels consume (``indptr`` as int64,
``indices`` as int32, ``data`` in the model dtype), or small derived data sets (duplicate rows
merged into weights). No estimator logic lives here.
"""

import numpy as np
import scipy.sparse as sp


def _check_compressed(X, what):
    # CSR / CSC / BSR: indptr over the major axis, indices over the minor one (in blocks).
    major, minor = (0, 1) if X.format in ("csr", "bsr") else (1, 0)
    block = X.blocksize if X.format == "bsr" else (1, 1)
    n_major = X.shape[major] // block[major]
    n_minor = X.shape[minor] // block[minor]
    indptr, indices, data = X.indptr, X.indices, X.data
    for name, arr in (("indptr", indptr), ("indices", indices)):
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise ValueError(f"{what} ({X.format}) is malformed: {name} must be a 1-D integer "
                             f"array, got {getattr(arr, 'dtype', type(arr).__name__)} of shape "
                             f"{getattr(arr, 'shape', None)}")
    if not isinstance(data, np.ndarray) or data.ndim != (3 if X.format == "bsr" else 1):
        raise ValueError(f"{what} ({X.format}) is malformed: data has shape "
                         f"{getattr(data, 'shape', None)}")
    if indptr.shape[0] != n_major + 1:
        raise ValueError(f"{what} ({X.format}) is malformed: indptr has {indptr.shape[0]} "
                         f"entries, expected {n_major + 1} (shape {X.shape})")
    if indptr[0] != 0:
        raise ValueError(f"{what} ({X.format}) is malformed: indptr starts at {indptr[0]}, "
                         f"not 0")
    nnz = int(indptr[-1])
    if indices.shape[0] != data.shape[0] or nnz > indices.shape[0]:
        raise ValueError(f"{what} ({X.format}) is malformed: indptr ends at {nnz} with "
                         f"{indices.shape[0]} indices and {data.shape[0]} values (need "
                         f"equal lengths >= the last indptr entry)")
    if n_major and np.any(indptr[1:] < indptr[:-1]):
        p = int(np.flatnonzero(indptr[1:] < indptr[:-1])[0])
        raise ValueError(f"{what} ({X.format}) is malformed: indptr decreases at position "
                         f"{p + 1} ({indptr[p]} then {indptr[p + 1]})")
    if nnz:
        idx = indices[:nnz]
        lo, hi = idx.min(), idx.max()
        if lo < 0 or hi >= n_minor:
            bad = int(lo) if lo < 0 else int(hi)
            axis = "column" if minor == 1 else "row"
            raise ValueError(f"{what} ({X.format}) is malformed: {axis} index {bad} is outside "
                             f"[0, {n_minor}) for shape {X.shape}")


def check_sparse_structure(X, what="X"):
    """Check the structure of a SciPy sparse matrix or array in O(nnz); raise ``ValueError``.

    SciPy builds a CSR/CSC matrix from user arrays after a cheap check only
    (``check_format(full_check=False)``), and its conversions and every compiled kernel then
    index with ``indices`` unchecked: an index out of range crashes the process. This gate
    checks, for CSR, CSC and BSR: ``indptr`` one-dimensional of length ``n_major + 1``,
    starting at 0, never decreasing, ending within the lengths of ``indices`` and ``data``
    (which must be equal); every stored index in ``[0, n_minor)``. COO: ``row`` / ``col`` of
    the length of ``data`` and inside the shape. Other formats (LIL, DOK, DIA) are built by
    Python code that checks its indices. Non-finite values are left to the callers' finiteness
    checks (they name the estimator's input).

    Dense input and ``None`` pass unchanged. Returns ``X``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> bad = sp.csr_matrix((np.ones(1), np.array([7]), np.array([0, 1])), shape=(1, 5))
    >>> check_sparse_structure(bad)
    Traceback (most recent call last):
    ...
    ValueError: X (csr) is malformed: column index 7 is outside [0, 5) for shape (1, 5)
    """
    if not sp.issparse(X):
        return X
    if len(X.shape) != 2 or min(X.shape) < 0:
        raise ValueError(f"{what} has an invalid shape {X.shape}")
    if X.format in ("csr", "csc", "bsr"):
        _check_compressed(X, what)
    elif X.format == "coo":
        row, col = X.coords if hasattr(X, "coords") else (X.row, X.col)
        n = X.data.shape[0]
        if row.shape != (n,) or col.shape != (n,):
            raise ValueError(f"{what} (coo) is malformed: row, col and data differ in length")
        for name, arr, bound in (("row", row, X.shape[0]), ("column", col, X.shape[1])):
            if n and (arr.min() < 0 or arr.max() >= bound):
                bad = int(arr.min()) if arr.min() < 0 else int(arr.max())
                raise ValueError(f"{what} (coo) is malformed: {name} index {bad} is outside "
                                 f"[0, {bound}) for shape {X.shape}")
    return X


def canonical_csr_or_none(X, n_features, dtype=np.float64):
    """``X`` itself, checked in O(nnz) and not copied, when it is already what :func:`to_csr`
    would return for a model of ``n_features`` columns: a CSR matrix of ``dtype`` with that many
    columns, at least one row, sorted indices without duplicates, no explicit zeros and finite
    values. ``None`` when ``X`` is of another kind (the general validation then converts it or
    raises its usual error).

    The fast path of a fitted streaming estimator: a one-row ``partial_fit`` pays for its row
    only. A malformed structure raises here (:func:`check_sparse_structure`) exactly as on the
    general path.
    """
    if not (sp.issparse(X) and X.format == "csr" and X.dtype == dtype
            and X.ndim == 2 and X.shape[0] >= 1 and X.shape[1] == n_features):
        return None
    check_sparse_structure(X)
    data = X.data[:X.indptr[-1]]
    if (data.shape[0] != X.data.shape[0] or not X.has_canonical_format
            or not np.isfinite(data).all() or not data.all()):
        return None
    return X


def canonical_csr(X, dtype):
    """``X`` itself when it is a CSR matrix that :func:`to_csr` would return unchanged (``dtype``,
    int32 indices, sorted without duplicates, no stored zeros), else :func:`to_csr`'s copy.

    For the ALS / MCMC fits, which read the rows in place through a row index
    (:func:`merged_rows`): a canonical input is never copied. ``X`` must have passed the
    estimator's validation (structure, finite values)."""
    if (sp.issparse(X) and X.format == "csr" and X.dtype == dtype
            and max(X.shape) < np.iinfo(np.int32).max
            and X.has_canonical_format and X.data.shape[0] == X.indptr[-1] and X.data.all()):
        if X.indices.dtype == np.int32 and X.indptr.dtype == _indptr_dtype(X.nnz):
            return X  # the index dtypes of to_csr's copy: the kernels compile no other variant
        # canonical but with wider indices (e.g. int64 from a file reader): narrow the index
        # arrays only and share the values (4 bytes per non-zero instead of 12 + a merge pass)
        out = sp.csr_matrix(X.shape, dtype=dtype)
        out.data = X.data
        out.indices = X.indices.astype(np.int32)
        out.indptr = X.indptr.astype(_indptr_dtype(X.nnz))
        out.has_sorted_indices = True
        out.has_canonical_format = True
        return out
    return to_csr(X, dtype)


def merged_rows(X, y, sample_weight, group_by_first=True, subset=None, targets=True):
    """:func:`merge_duplicate_rows` as an index into ``X``'s rows: ``(rows, y, sample_weight,
    keep)`` where the merged data set's row r is row ``rows[r]`` of ``X`` (int32), with target
    ``y[r]`` and the summed weight ``sample_weight[r]``; ``keep`` (bool per row of ``X``) marks
    the rows of positive weight (within ``subset``), or is None when every row has one. The
    same rows in the same order as :func:`merge_duplicate_rows` (bit for bit: the same keys,
    sorted stably), without a copy of ``X``: 4 bytes per row instead of the rows. With
    ``subset`` (sorted row indices), those of ``merge_duplicate_rows(X[subset], y[subset],
    sample_weight[subset])``, as indices into ``X``.

    With ``group_by_first`` (the ALS / MCMC fits) and at most 65,536 columns, one kernel
    (:func:`fmlearn.kernels.dedup.first_feature_groups`) counting-sorts the rows by their
    first feature and sorts, orders and groups each bucket while it is in the cache: 12 bytes
    of fresh memory per row instead of 32 (48 with merged unit weights) for the keys, their
    radix sort (:func:`fmlearn.kernels.dedup.hash_argsort`) and the grouping, which remain
    the path of other calls (and of a first feature shared by over a million rows). At
    8,000,000 user x item rows in random order (4,000 users, no duplicates) 0.222
    (0.204-0.254) CPU s and 23,000 page faults, where 729dd44's three kernels and its gather
    of the targets took 0.412 (0.401-0.441) and 94,000 (``benchmarks/bench_merged_rows.py``:
    fresh processes, 5 alternated repetitions, quiet machine, load 0.97).

    Parameters
    ----------
    X : csr_matrix, canonical (see :func:`to_csr`)
    y : ndarray of shape (n_samples,)
    sample_weight : ndarray of shape (n_samples,) or None
        None: unit weights, never materialised; the returned ``sample_weight`` is then None
        when no row was merged or left out (every fit row has weight 1).
    group_by_first : bool, default=True
    subset : ndarray of sorted row indices, optional
        Only these rows (the training part of an early-stopping split, not copied).
    targets : bool, default=True
        False: the returned ``y`` is None (a caller that reads ``y[rows]`` in place; the
        gathered copy costs 8 bytes per row and a pass).
    """
    from .kernels.dedup import MAX_BUCKET, first_feature_groups, take

    unit, sw = sample_weight is None, None
    if not unit:
        sw = np.asarray(sample_weight, dtype=np.float64)
        unit = bool(np.all(sw == 1.0))
    keep = None if unit else sw > 0  # unit weights: every row kept, no mask
    if subset is not None:  # only these rows (the training part of a split)
        inside = np.zeros(X.shape[0], dtype=bool)
        inside[subset] = True
        keep = inside if keep is None else keep & inside
        del inside
    src = np.zeros(0, dtype=np.int32)
    n = X.shape[0]
    if keep is not None and not keep.all():
        if n < 2**31:  # int32 directly: no int64 positions (8 bytes a row) then a cast
            from .kernels.dedup import true_positions

            src = true_positions(keep)
        else:  # pragma: no cover - beyond int32 row numbers
            src = np.flatnonzero(keep)
        n = src.shape[0]
    else:
        keep = None
    if n == 0:
        raise ValueError("all sample weights are zero: there is nothing to fit")
    indptr, indices, data = X.indptr, X.indices, X.data
    yy = np.ascontiguousarray(y, dtype=np.float64)  # the kernels map -0.0 to +0.0 themselves
    bits = np.uint32 if data.dtype == np.float32 else np.uint64
    b = max(1, int(X.shape[1] + 1).bit_length())
    ok = False
    if group_by_first and X.shape[0] < 2**31 and X.shape[1] <= _COUNTING_SORT_COLUMNS:
        ok, rows, w = first_feature_groups(indptr, indices, data, data.view(bits), yy, src, n,
                                           X.shape[1], b, np.zeros(0) if unit else sw, unit,
                                           MAX_BUCKET)
    if ok:  # counting sort by first feature, buckets by hash, grouped in one kernel
        if 2 * rows.shape[0] <= n:  # few groups: not the n-long buffer they were written in
            rows = rows.copy()
        if unit and w.shape[0] == 0:  # nothing merged
            if rows.shape[0] == n and src.shape[0] == 0:  # nor dropped: all ones
                w = sw  # None without weights (as below)
            else:
                w = np.ones(rows.shape[0])
    else:
        rows, w = _merged_by_keys(X, yy, sw, unit, src, n, b, bits, group_by_first)
    rows = rows.astype(np.int32 if X.shape[0] < 2**31 else np.int64, copy=False)
    if not targets:
        return rows, None, w, keep
    y = np.asarray(y)
    if y.dtype == np.float64 and y.ndim == 1 and rows.dtype == np.int32:
        return rows, take(y, rows), w, keep
    return rows, y[rows], w, keep


# the columns up to which merged_rows counting-sorts by the first feature: its histogram
# stays small and its scatter's write streams few (8,000,000 rows in random order: with
# 4,000 first features 0.21 against 0.23 CPU s for the radix path, 16,000 and 50,000 on
# par, 125,000 0.28 against 0.26 and 1,000,000 0.57 against 0.27; in one process, the
# pages already faulted in, so the fewer fresh pages are not counted; loaded machine)
_COUNTING_SORT_COLUMNS = 1 << 16


def _merged_by_keys(X, yy, sw, unit, src, n, b, bits, group_by_first):
    # merged_rows' general path: the keys of every row, sorted, then grouped
    from .kernels.dedup import group_hashed, group_weights, hash_argsort, row_keys

    indptr, indices, data = X.indptr, X.indices, X.data
    key = row_keys(indptr, indices, data.view(bits), yy, src, n, b, group_by_first)
    if n < 2**31:  # radix sort of the keys' top halves, runs of equal ones by the rest
        order, top = hash_argsort(key)
    else:  # pragma: no cover - beyond the int32 positions of the radix sort
        order = np.argsort(key, kind="stable")
        top = (key[order] >> np.uint64(32)).astype(np.uint32)
    group, reps = group_hashed(order, top, key, src, indptr, indices, data, yy)
    del key, top
    if unit:  # the same sums of ones, without reading sw in sorted order
        if reps.shape[0] == n and src.shape[0] == 0:  # nothing merged or dropped: all ones
            # (8 bytes per row less for the fit; the solvers only read the weights)
            w = sw
        else:
            w = np.bincount(group, minlength=reps.shape[0]).astype(np.float64)
    else:
        w = group_weights(group, order, src, sw, reps.shape[0])
    del group, order
    rows = reps if src.shape[0] == 0 else src[reps]
    return rows, w


def to_csr(X, dtype=None):
    """Return ``X`` as a canonical CSR matrix: sorted indices, no explicit zeros, int32 indices.

    A dense array is converted (its zeros are dropped). The input is never modified. A sparse
    input's structure is checked first (:func:`check_sparse_structure`).
    """
    if dtype is None:
        dtype = X.dtype
    if sp.issparse(X):
        check_sparse_structure(X)
        X = sp.csr_matrix(X, dtype=dtype, copy=True)
        X.sum_duplicates()  # also sorts indices
        X.eliminate_zeros()
    else:
        X = sp.csr_matrix(np.asarray(X, dtype=dtype))
    return _small_index_dtype(X)


def to_csc(X, dtype=None):
    """Column-major twin of :func:`to_csr`, for column-wise solvers (ALS, MCMC)."""
    if dtype is None:
        dtype = X.dtype
    if sp.issparse(X):
        check_sparse_structure(X)
        X = sp.csc_matrix(X, dtype=dtype, copy=True)
        X.sum_duplicates()
        X.eliminate_zeros()
    else:
        X = sp.csc_matrix(np.asarray(X, dtype=dtype))
    return _small_index_dtype(X)


def _small_index_dtype(X):
    # int32 indices for the kernels; indptr int32 too while nnz allows, because SciPy converts
    # mixed index dtypes on every product (twice as slow). ``raw`` widens indptr to int64.
    if max(X.shape) >= np.iinfo(np.int32).max:
        raise ValueError(f"shape {X.shape} exceeds the int32 index range of the kernels")
    X.indices = X.indices.astype(np.int32, copy=False)
    X.indptr = X.indptr.astype(_indptr_dtype(X.nnz), copy=False)
    return X


def _indptr_dtype(nnz):
    return np.int64 if nnz >= np.iinfo(np.int32).max else np.int32


def raw(X):
    """``(indptr, indices, data)`` of a CSR or CSC matrix with the kernels' index dtypes
    (indptr int64, indices int32)."""
    return (
        np.ascontiguousarray(X.indptr, dtype=np.int64),
        np.ascontiguousarray(X.indices, dtype=np.int32),
        np.ascontiguousarray(X.data),
    )


def merge_duplicate_rows(X, y, sample_weight, group_by_first=True):
    """Merge rows identical in ``X`` and ``y`` into one row carrying the summed weight.

    Rows of zero weight are dropped first. The result comes in a canonical order that depends
    on the rows' content only (a hash of each row; with ``group_by_first``, rows sorted by
    their first feature index first), so it is the same whatever the order of the input rows.
    For a sum of per-row losses this is an exact rewriting of the problem; it makes a fit on
    repeated rows equal to a fit on weighted rows and a fit independent of row order.
    Grouping rows by their first feature (the user, in one-hot user/item data) lets the
    column-wise solvers visit that feature's rows contiguously; a row-wise solver (SGD) wants
    the hash order, whose blocks are random subsets of the rows.

    Parameters
    ----------
    X : csr_matrix, canonical (see :func:`to_csr`)
    y : ndarray of shape (n_samples,)
    sample_weight : ndarray of shape (n_samples,)
    group_by_first : bool, default=True

    Returns
    -------
    X, y, sample_weight : merged data, ``sample_weight`` float64.

    :func:`merged_rows`' rows (the same keys and order, its radix sort of the keys in place of
    ``np.argsort``), copied: 2,000,000 one-hot rows (two entries each, unit weights, hash
    order) 0.27 (0.26-0.27) CPU s against 0.56 (0.51-0.69) for the ``np.argsort`` path it
    replaces, the same arrays (a fresh process each, 3 alternated repetitions against
    1c333f9, load 0.5-0.6).
    """
    rows, _, w, _ = merged_rows(X, y, sample_weight, group_by_first=group_by_first,
                                targets=False)
    if w is None or np.shares_memory(w, sample_weight):  # unit weights, nothing merged
        w = np.ones(rows.shape[0])
    return _small_index_dtype(X[rows]), np.asarray(y)[rows], w
