"""Relational input: rows that share blocks of features (Rendle 2013, "Scaling factorization
machines to relational data", VLDB; libFM's ``-relation``, myFM's ``RelationBlock``).

In recommender data most of a row's features repeat: every rating of a user carries the
user's features (the user id, and SVD++-style the ids of every item the user rated), every
rating of an item the item's. Written as one flat matrix, a user's features are stored and
computed once per rating; a :class:`RelationData` stores them once per user:

    x_i = [ X[i] | X_1[b_1(i)] | X_2[b_2(i)] | ... ]

``X`` holds the row-level features (one row per sample, possibly no column), each
:class:`RelationBlock` r a matrix ``X_r`` (one row per distinct block: a user, an item) and
the index ``b_r(i)`` of sample i's row in it. The expanded row ``x_i`` is the concatenation,
in this column order; a model fitted on a :class:`RelationData` is the model of the expanded
matrix (``to_csr``), with ``n_features_in_ = X.shape[1] + sum_r X_r.shape[1]``.

``FMRegressor`` / ``FMClassifier`` accept a :class:`RelationData` wherever they take ``X``
(``fit``, ``predict``, ``predict_proba``, ``eval_set``, ``warm_start``); their ALS and MCMC
solvers then compute per block row (``fmlearn.kernels.cd_relation``), and predictions cost
O(nnz(X) + sum_r nnz(X_r) + n * n_blocks) per factor instead of O(nnz of the expanded
matrix). A model fitted on either form predicts both. The object is an X-like container rather
than a keyword of ``fit`` so that it passes through scikit-learn's row indexing
(``cross_val_score``, ``train_test_split`` slice its samples, keeping the blocks whole) and
``predict`` needs no extra argument.

This module is shared infrastructure: it imports no model family, and holds the checks that
every entry point (estimators, CLI, Dask backend) runs before anything reaches a kernel.
"""

import numbers

import numpy as np
import scipy.sparse as sp

from ._data import check_sparse_structure, to_csr

__all__ = ["RelationBlock", "RelationData", "check_relation_data", "is_relation_data"]

_FLOATS = (np.float64, np.float32)


def _float_dtype(*arrays):
    """float32 when every part is float32 (as scikit-learn keeps float32 input), else float64."""
    return (np.dtype(np.float32) if all(getattr(a, "dtype", None) == np.float32 for a in arrays)
            else np.dtype(np.float64))


def _shape2(X, what):
    shape = getattr(X, "shape", None)
    if shape is None:
        try:
            X = np.asarray(X)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what} must be a 2-D array or sparse matrix: {exc}") from None
        shape = X.shape
    if len(shape) != 2:
        raise ValueError(f"{what} must be 2-D, got shape {tuple(shape)}")
    return X, (int(shape[0]), int(shape[1]))


class RelationBlock:
    """One block of shared features: the matrix ``X`` of the distinct blocks and, per sample,
    the index of its block row.

    Parameters
    ----------
    indices : array-like of int, shape (n_samples,)
        Sample i uses row ``indices[i]`` of ``X`` (0 <= indices[i] < X.shape[0]).
    X : {array-like, sparse matrix} of shape (n_block_rows, n_block_features)
        The block's feature rows (e.g. one per user: the user's one-hot id and the items the
        user rated). Rows no sample uses are allowed (they cost nothing in a fit).

    Attributes
    ----------
    n_block_rows, n_features : int

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import RelationBlock
    >>> users = RelationBlock([0, 0, 1], np.eye(2))   # three samples, two users
    >>> users.n_block_rows, users.n_features
    (2, 2)
    """

    def __init__(self, indices, X):
        idx = np.asarray(indices)
        if idx.ndim != 1:
            raise ValueError(f"RelationBlock indices must be 1-D, got shape {idx.shape}")
        if idx.size and not (np.issubdtype(idx.dtype, np.integer) or (
                idx.dtype.kind == "f" and np.all(np.isfinite(idx))
                and np.all(idx == np.round(idx)))):
            raise ValueError(f"RelationBlock indices must be integers, got dtype {idx.dtype}")
        check_sparse_structure(X, "RelationBlock X")
        X, shape = _shape2(X, "RelationBlock X")
        self.indices = idx
        self.X = X
        self.n_block_rows, self.n_features = shape
        _check_index(idx, self.n_block_rows, "RelationBlock")

    def __len__(self):
        return self.indices.shape[0]

    def __repr__(self):
        return (f"RelationBlock({self.indices.shape[0]} samples -> {self.n_block_rows} block "
                f"rows x {self.n_features} features)")


def _check_index(idx, n_rows, what):
    """A block index out of range is an error naming the sample."""
    if idx.size == 0:
        return
    lo, hi = idx.min(), idx.max()
    if lo < 0 or hi >= n_rows:
        bad = np.flatnonzero((idx < 0) | (idx >= n_rows))[0]
        raise ValueError(f"{what}: sample {int(bad)} has block index {int(idx[bad])}, outside "
                         f"[0, {n_rows}) (the block matrix has {n_rows} rows)")


class RelationData:
    """Samples whose features are row-level features plus rows of shared blocks.

    The expanded sample i is ``[X[i], blocks[0].X[blocks[0].indices[i]], ...]`` (see the
    module docstring); a fit or a prediction on a :class:`RelationData` equals the same on
    :meth:`to_csr` (ALS and the MCMC regression chain up to the order of floating-point
    summation), with each block row's part of the sums computed once.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_row_features) or None
        Row-level features (e.g. the date of a rating). None: no row-level feature (then the
        number of samples comes from the blocks, and there must be at least one).
    blocks : sequence of RelationBlock
        Each with ``n_samples`` indices.

    Attributes
    ----------
    shape : (n_samples, n_features)
        ``n_features = n_row_features + sum of the blocks' n_features``.
    layout : tuple of int
        ``(n_row_features, n_features of block 0, ...)``: the column ranges of the expanded
        matrix. A model fitted on relational data records it (``relation_features_``) and
        refuses blocks of other widths.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from fmlearn import RelationBlock, RelationData
    >>> users = RelationBlock([0, 0, 1], sp.identity(2, format="csr"))
    >>> items = RelationBlock([2, 0, 1], sp.identity(3, format="csr"))
    >>> Xr = RelationData(None, [users, items])
    >>> Xr.shape, Xr.layout
    ((3, 5), (0, 2, 3))
    >>> Xr.to_csr().toarray()
    array([[1., 0., 0., 0., 1.],
           [1., 0., 1., 0., 0.],
           [0., 1., 0., 1., 0.]])
    """

    ndim = 2

    def __init__(self, X, blocks):
        blocks = list(blocks) if blocks is not None else []
        for r, b in enumerate(blocks):
            if not isinstance(b, RelationBlock):
                raise TypeError(f"blocks[{r}] must be a RelationBlock, got {type(b).__name__}")
        if X is None:
            if not blocks:
                raise ValueError("RelationData needs row-level features X or at least one block")
            X = sp.csr_matrix((len(blocks[0]), 0), dtype=_float_dtype(*(b.X for b in blocks)))
        check_sparse_structure(X, "RelationData X")
        X, (n, _) = _shape2(X, "RelationData X")
        for r, b in enumerate(blocks):
            if len(b) != n:
                raise ValueError(f"block {r} has {len(b)} indices but X has {n} samples "
                                 "(one block index per sample)")
        self.X = X
        self.blocks = blocks

    # -- array-like --------------------------------------------------------------------------
    @property
    def layout(self):
        return (int(self.X.shape[1]),) + tuple(int(b.n_features) for b in self.blocks)

    @property
    def shape(self):
        return (int(self.X.shape[0]), int(sum(self.layout)))

    @property
    def n_blocks(self):
        return len(self.blocks)

    @property
    def dtype(self):
        return _float_dtype(self.X, *(b.X for b in self.blocks))

    @property
    def nnz(self):
        """Stored values a prediction reads per call: the row-level features' plus one block
        index per sample and block (each block row's sums are computed once)."""
        own = self.X.nnz if sp.issparse(self.X) else int(np.count_nonzero(self.X))
        return int(own) + self.shape[0] * len(self.blocks)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        parts = ", ".join(f"{b.n_block_rows}x{b.n_features}" for b in self.blocks)
        return (f"RelationData({self.shape[0]} samples, {self.X.shape[1]} row features, "
                f"blocks [{parts}])")

    def __getitem__(self, key):
        """Samples ``key`` (an int, slice, integer or boolean array; scikit-learn's
        ``X[key, ...]`` too), with every block kept whole."""
        if isinstance(key, tuple):
            if len(key) == 2 and key[1] is Ellipsis:
                key = key[0]
            else:
                raise IndexError("RelationData is indexed by samples only (X[rows])")
        if isinstance(key, numbers.Integral):
            key = [int(key)]
        if not isinstance(key, slice):
            key = np.asarray(key)
            if key.dtype == bool:
                if key.shape != (self.shape[0],):
                    raise IndexError(f"boolean index of shape {key.shape} for "
                                     f"{self.shape[0]} samples")
                key = np.flatnonzero(key)
            elif key.size and not np.issubdtype(key.dtype, np.integer):
                raise IndexError(f"samples must be selected by integers, slices or booleans, "
                                 f"got dtype {key.dtype}")
            key = key.astype(np.intp)
        X = self.X
        if sp.issparse(X):
            X = X.tocsr()[key]
        else:
            X = np.asarray(X)[key]
        return RelationData(X, [RelationBlock(b.indices[key], b.X) for b in self.blocks])

    def to_csr(self):
        """The expanded matrix (CSR), one row per sample: ``[X, X_1[b_1], ...]``."""
        parts = [sp.csr_matrix(self.X)]
        for b in self.blocks:
            parts.append(sp.csr_matrix(b.X)[np.asarray(b.indices, dtype=np.intp)])
        return sp.hstack(parts, format="csr", dtype=self.dtype)

    def toarray(self):
        """The expanded matrix as a dense array (small data and messages only)."""
        return self.to_csr().toarray()

    def block_groups(self, row_groups=None):
        """One feature group per part -- the row-level features (or ``row_groups``, one id per
        row-level feature), then each block -- as the ``groups`` of an FM estimator: the
        default grouping of libFM's ``-relation`` (each relation's features get a group of
        their own)."""
        d0 = self.X.shape[1]
        if row_groups is None:
            head = np.zeros(d0, dtype=np.int64)
            first = 1 if d0 else 0
        else:
            head = np.asarray(row_groups, dtype=np.int64)
            if head.shape != (d0,):
                raise ValueError(f"row_groups must hold one id per row-level feature ({d0}), "
                                 f"got shape {head.shape}")
            first = int(head.max()) + 1 if d0 else 0
        ids = [head] + [np.full(b.n_features, first + r, dtype=np.int64)
                        for r, b in enumerate(self.blocks)]
        return np.concatenate(ids)


def is_relation_data(X):
    """Whether ``X`` is a :class:`RelationData`."""
    return isinstance(X, RelationData)


def _finite(X, what):
    values = X.data if sp.issparse(X) else X
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{what} contains NaN or infinity")


def check_relation_data(Xr, dtype=None, layout=None, what="X"):
    """The canonical form of a :class:`RelationData` that kernels may trust, or a
    ``ValueError`` naming the part at fault.

    Every part is checked again (the arrays may have been changed since the object was made):
    structure of sparse parts, finite numeric values, one block index per sample and every
    index inside its block. The result holds canonical CSR matrices (:func:`fmlearn._data.
    to_csr`) of ``dtype`` (None: float32 when every part is float32, else float64) and int32
    indices; its arrays are copies, never the caller's. With ``layout`` (a fitted model's
    ``relation_features_``) the widths must match it.
    """
    if not isinstance(Xr, RelationData):
        raise TypeError(f"{what} must be a RelationData, got {type(Xr).__name__}")
    n = Xr.shape[0]
    if n < 1:
        raise ValueError(f"{what} has no sample (0 rows); a minimum of 1 is required")
    dtype = Xr.dtype if dtype is None else np.dtype(dtype)
    if dtype not in _FLOATS:
        raise ValueError(f"dtype must be float64 or float32, got {dtype}")
    X = _numeric(Xr.X, f"{what}: the row-level features X")
    X = to_csr(X, dtype)
    _finite(X, f"{what}: the row-level features X")
    if X.shape[0] != n:
        raise ValueError(f"{what}: X has {X.shape[0]} rows, expected {n}")
    blocks = []
    for r, b in enumerate(Xr.blocks):
        where = f"{what}: block {r}"
        B = _numeric(b.X, f"{where} X")
        B = to_csr(B, dtype)
        _finite(B, f"{where} X")
        idx = np.asarray(b.indices)
        if idx.shape != (n,):
            raise ValueError(f"{where} has {idx.shape[0] if idx.ndim == 1 else idx.shape} "
                             f"indices, expected one per sample ({n})")
        if not np.issubdtype(idx.dtype, np.integer):
            if not (idx.dtype.kind == "f" and np.all(np.isfinite(idx))
                    and np.all(idx == np.round(idx))):
                raise ValueError(f"{where} indices must be integers, got dtype {idx.dtype}")
        _check_index(idx, B.shape[0], where)
        blocks.append(RelationBlock(np.ascontiguousarray(idx, dtype=np.int32), B))
    out = RelationData(X, blocks)
    if layout is not None and tuple(int(v) for v in layout) != out.layout:
        raise ValueError(
            f"{what} has blocks of {_describe(out.layout)}, but the model was fitted on "
            f"{_describe(layout)}: relational data must keep the row-level features and every "
            "block at the width of the fit (pad a block with empty columns to its fitted "
            "width)")
    return out


def _describe(layout):
    layout = [int(v) for v in layout]
    parts = [f"{layout[0]} row-level features"]
    parts += [f"block {r}: {d} features" for r, d in enumerate(layout[1:])]
    return "(" + ", ".join(parts) + ")"


def _numeric(X, what):
    if sp.issparse(X):
        if X.dtype.kind not in "biuf":
            raise ValueError(f"{what} must be numeric, got dtype {X.dtype}")
        return X
    try:
        arr = np.asarray(X)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be numeric: {exc}") from None
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{what} must be numeric, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{what} must be 2-D, got shape {arr.shape}")
    return arr


def relation_square_stats(Xr, sw):
    """``(sum_i s_i |x_i|^2, sum_i s_i nnz(x_i))`` of the expanded rows of a canonical
    :class:`RelationData` (:func:`check_relation_data`) with weights ``sw``, computed per
    block row: what :func:`fmlearn._plan.square_stats` gives on :meth:`RelationData.to_csr`."""
    from ._plan import square_stats

    sw = np.asarray(sw, dtype=np.float64)
    sum_sq, n_nonzero = square_stats(Xr.X.indptr, Xr.X.data, sw)
    parts_sq, parts_nz = [sum_sq], [n_nonzero]
    for b in Xr.blocks:
        weight = np.bincount(b.indices, weights=sw, minlength=b.X.shape[0])
        rows_sq = np.asarray(b.X.multiply(b.X).sum(axis=1), dtype=np.float64).ravel()
        parts_sq.append(float(weight @ rows_sq))
        parts_nz.append(float(weight @ np.diff(b.X.indptr).astype(np.float64)))
    return float(np.sum(parts_sq)), float(np.sum(parts_nz))


def relation_pair_stats(Xr, sw):
    """``sum_i s_i sum_{j<l} x_ij^2 x_il^2`` of the expanded rows of a canonical
    :class:`RelationData` with weights ``sw``, from the per-row sums of squares and fourth
    powers of the row-level features and of each block row (the blocks' columns are disjoint):
    what :func:`fmlearn._plan.pair_stats` gives on :meth:`RelationData.to_csr`."""

    def powers(X):
        n = X.shape[0]
        rows = np.repeat(np.arange(n), np.diff(X.indptr))
        sq = np.asarray(X.data, dtype=np.float64) ** 2
        with np.errstate(over="ignore", invalid="ignore"):
            return (np.bincount(rows, weights=sq, minlength=n),
                    np.bincount(rows, weights=sq * sq, minlength=n))

    sw = np.asarray(sw, dtype=np.float64)
    s2, s4 = powers(Xr.X)
    for b in Xr.blocks:
        b2, b4 = powers(b.X)
        s2 = s2 + b2[b.indices]
        s4 = s4 + b4[b.indices]
    with np.errstate(over="ignore", invalid="ignore"):
        return float(sw @ np.maximum(0.5 * (s2 * s2 - s4), 0.0))


def merge_relation_rows(Xr, y, sample_weight):
    """:func:`fmlearn._data.merge_duplicate_rows` for a canonical :class:`RelationData`: rows
    with the same row-level features, the same block indices and the same target merged into
    one row carrying the summed weight, rows of zero weight dropped, in a canonical order that
    depends on the rows' content only: grouped by the index of block 0 (so that a sweep visits
    a user's rows together), within it by the first row-level feature (a day, say: the sweep's
    gather of the row-level features then sums runs of one feature in registers;
    MovieLens-100K's relational MCMC fit took about 5 % less CPU than with the rows in hash
    order within a user), then by the rows' hash (:func:`fmlearn._data.merged_rows`).

    Two samples whose different block indices point to identical block rows stay apart (the
    flat fit would merge them): the same weighted problem, another row order.
    """
    from ._data import _small_index_dtype, merge_duplicate_rows, merged_rows

    n = Xr.shape[0]
    if not Xr.blocks:
        X, y, w = merge_duplicate_rows(Xr.X, y, sample_weight, group_by_first=True)
        return RelationData(X, []), y, w
    # One key row per sample: its sort group (block-0 index and first row-level feature, as
    # one column), the row-level features, and one column per further block holding its
    # index + 1; merged_rows sorts by the first column, then by the rows' hash.
    first = Xr.blocks[0]
    r0 = first.X.shape[0]
    d0 = Xr.X.shape[1]
    B = len(Xr.blocks)
    Xrow = Xr.X
    rows_nnz = np.diff(Xrow.indptr).astype(np.int64)
    idx0 = first.indices.astype(np.int64)
    span = d0 + 1
    if r0 * span + d0 + B >= np.iinfo(np.int32).max:  # too many groups: by block 0 only
        span = 1
    lead = np.zeros(n, dtype=np.int64)
    if span > 1 and Xrow.nnz:
        has = rows_nnz > 0
        lead[has] = Xrow.indices[Xrow.indptr[:-1][has]].astype(np.int64) + 1
    G = r0 * span
    width = 1 + rows_nnz + (B - 1)
    indptr = np.concatenate([[0], np.cumsum(width)]).astype(np.int64)
    indices = np.empty(indptr[-1], dtype=np.int32)
    data = np.empty(indptr[-1], dtype=np.float64)
    start = indptr[:-1]
    indices[start] = idx0 * span + lead
    data[start] = 1.0
    if Xrow.nnz:
        pos = np.repeat(start + 1 - Xrow.indptr[:-1], rows_nnz) + np.arange(Xrow.nnz)
        indices[pos] = G + Xrow.indices
        data[pos] = Xrow.data
    for r in range(1, B):
        p = start + 1 + rows_nnz + (r - 1)
        indices[p] = G + d0 + (r - 1)
        data[p] = Xr.blocks[r].indices.astype(np.float64) + 1.0
    K = _small_index_dtype(sp.csr_matrix((data, indices, indptr), shape=(n, G + d0 + B - 1)))
    rows, y, w, _ = merged_rows(K, y, sample_weight, group_by_first=True)
    if w is None:  # unit weights, nothing merged or dropped
        w = np.ones(rows.shape[0])
    Xm = _small_index_dtype(Xrow[rows])
    blocks = [RelationBlock(np.ascontiguousarray(b.indices[rows], dtype=np.int32), b.X)
              for b in Xr.blocks]
    return RelationData(Xm, blocks), y, w
