"""Index encoders that turn tensor completion and multi-view completion into FM regression
(Yamada et al. 2017, §2.5 and §4.3).

Both map rows of integer indices to sparse one-hot feature rows, so that completing a tensor
(or a set of views) is ``model.fit(enc.fit_transform(indices), values)`` followed by
``model.predict(enc.transform(new_indices))``. They learn nothing from the values; ``fit``
only fixes the sizes (given, or one past the largest index seen), so new indices encode into
the same columns.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted


def _check_indices(X, n_cols, name):
    try:
        arr = np.asarray(X)
    except Exception as exc:  # pragma: no cover - numpy raises many types here
        raise TypeError(f"{name} expects an integer array of indices: {exc}") from None
    if arr.ndim != 2 or arr.shape[1] != n_cols:
        raise ValueError(f"{name} expects an array of shape (n_samples, {n_cols}), "
                         f"got shape {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name}: indices must be whole numbers")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: indices must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise ValueError(f"{name}: indices must be non-negative")
    return arr


def _check_sizes(sizes, n, name):
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) != n or any(s < 1 for s in sizes):
        raise ValueError(f"{name} must hold {n} positive integers, got {sizes}")
    return sizes


#: Output columns at most: the column indices of the FM kernels (and of the rows made here)
#: are int32.
MAX_FEATURES_OUT = np.iinfo(np.int32).max - 1


def _check_width(d, name):
    if d > MAX_FEATURES_OUT:
        raise ValueError(f"{name} would make {d} feature columns, more than the "
                         f"{MAX_FEATURES_OUT} the FM kernels index (32-bit)")


def _same_state(est, ref, names):
    """``est``'s attributes ``names`` equal those of ``ref`` (a fresh fit); else ValueError."""
    for name in names:
        a, b = getattr(est, name), getattr(ref, name)
        if isinstance(b, list):
            ok = isinstance(a, (list, tuple)) and len(a) == len(b) and all(
                np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b, strict=True))
        elif isinstance(b, np.ndarray):
            ok = isinstance(a, np.ndarray) and a.dtype.kind in "iu" and np.array_equal(a, b)
        else:
            ok = type(a) is type(b) and a == b
        if not ok:
            raise ValueError(f"{name} does not match the layout of the parameters")


def _one_hot_rows(cols, d):
    """CSR with a 1 at ``cols[i, k]`` for every row i and every k (distinct columns per row)."""
    n, k = cols.shape
    indptr = np.arange(0, n * k + 1, k, dtype=np.int64)
    order = np.argsort(cols, axis=1, kind="stable")
    indices = np.take_along_axis(cols, order, axis=1).ravel().astype(np.int32)
    return sp.csr_matrix((np.ones(n * k), indices, indptr), shape=(n, d))


class TensorEncoder(TransformerMixin, BaseEstimator):
    """Tensor completion as a convex FM: index tuples -> the features of Yamada et al. 2017, §2.5.

    For an N-way tensor of shape (n_1, ..., n_N), the entry (i_1, ..., i_N) becomes

        x = [x^(1); ...; x^(N)],   x^(m) = [e_{i_m} (n_m entries); e_{u_m} (prod_{l != m} n_l)]

    where u_m is the column of the entry in the mode-m unfolding (Lemma 2; for N = 3,
    u_1 = j + n_2 k, u_2 = k + n_3 i, u_3 = i + n_1 j, 0-based). With W block-diagonal over
    the modes, 1/2 tr(W (x x^T - diag(x o x))) = sum_m [M_(m)^(m)]_{i_m, u_m} and the trace
    budget bounds the sum of the nuclear norms of the unfoldings (Lemma 3): the convex Tucker
    completion of Eq. 7. Each row has 2N non-zeros; d = sum_m n_m + sum_m prod_{l != m} n_l.

    Lemma 3 makes W block-diagonal over the modes and Eq. 14 puts the bias on the n_m blocks
    only: pass ``interaction_groups=enc.groups_, linear_features=enc.linear_features_`` to
    :class:`~fmlearn.ConvexFMRegressor`. (With one unrestricted W, two modes' unfolding
    indices together identify an entry, and the model memorizes instead of completing.)

    Parameters
    ----------
    shape : tuple of int or None, default=None
        Tensor shape; None learns it from ``fit`` (one past the largest index of each mode).

    Attributes
    ----------
    shape_ : tuple of int
    n_features_out_ : int
    linear_features_ : ndarray of int
        Columns of the n_m blocks (the Eq. 14 bias).
    blocks_ : list of (start, stop)
        Column ranges [e_{i_1} block, unfolding-1 block, e_{i_2} block, ...].
    groups_ : list of ndarray of int
        Columns of each mode (its two blocks): the diagonal blocks of W (Lemma 3).

    References
    ----------
    M. Yamada et al. Convex factorization machine for regression (Yamada et al. 2017),
    §2.5, Eq. 7, 14, Lemma 2-3.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn.encoders import TensorEncoder
    >>> enc = TensorEncoder(shape=(2, 3, 4)).fit(np.zeros((1, 3), dtype=int))
    >>> Xe = enc.transform(np.array([[1, 2, 3]]))
    >>> Xe.shape, Xe.nnz
    ((1, 35), 6)
    """

    def __init__(self, shape=None):
        self.shape = shape

    def fit(self, X, y=None):
        """Fix the tensor shape (``shape`` or learned from the indices ``X``)."""
        if self.shape is not None:
            if isinstance(self.shape, numbers.Integral):
                raise ValueError("shape must be a tuple of mode sizes, not an integer")
            order = len(tuple(self.shape))
            if order < 2:
                raise ValueError(f"a tensor needs at least 2 modes, shape={self.shape}")
            shape = _check_sizes(self.shape, order, "shape")
            _check_indices(X, order, "TensorEncoder.fit")
        else:
            arr = np.asarray(X)
            if arr.ndim != 2 or arr.shape[1] < 2:
                raise ValueError("TensorEncoder.fit expects index tuples of shape "
                                 f"(n_samples, n_modes >= 2), got shape {arr.shape}")
            arr = _check_indices(arr, arr.shape[1], "TensorEncoder.fit")
            if arr.shape[0] == 0:
                raise ValueError("TensorEncoder.fit needs at least one index tuple or a shape")
            shape = tuple(int(v) + 1 for v in arr.max(axis=0))
        N = len(shape)
        _check_width(sum(shape) + sum(int(np.prod([shape[o] for o in range(N) if o != m],
                                                   dtype=object)) for m in range(N)),
                     f"TensorEncoder with shape {shape}")
        self.shape_ = shape
        blocks, start, linear = [], 0, []
        for m in range(N):
            others = int(np.prod([shape[o] for o in range(N) if o != m], dtype=np.int64))
            blocks.append((start, start + shape[m]))
            linear.append(np.arange(start, start + shape[m]))
            start += shape[m]
            blocks.append((start, start + others))
            start += others
        self.blocks_ = blocks
        self.groups_ = [np.arange(blocks[2 * m][0], blocks[2 * m + 1][1]) for m in range(N)]
        self.n_features_out_ = start
        self.linear_features_ = np.concatenate(linear)
        return self

    def _check_loaded_state(self):
        """A loaded encoder (pipeline file) holds exactly the layout of its ``shape_``."""
        shape = self.shape_
        if not isinstance(shape, (tuple, list)) or not all(
                isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in shape):
            raise ValueError(f"shape_ must be a tuple of mode sizes, got {shape!r}")
        if self.shape is not None and tuple(self.shape) != tuple(shape):
            raise ValueError(f"shape_ {tuple(shape)} differs from shape={self.shape}")
        ref = TensorEncoder(shape=tuple(int(v) for v in shape)).fit(
            np.zeros((1, len(shape)), dtype=np.int64))
        _same_state(self, ref, ("blocks_", "groups_", "n_features_out_", "linear_features_"))

    def transform(self, X):
        """CSR features (n_samples, n_features_out_), one row per index tuple."""
        check_is_fitted(self, "shape_")
        shape = self.shape_
        N = len(shape)
        idx = _check_indices(X, N, "TensorEncoder.transform")
        too_big = idx >= np.asarray(shape)
        if np.any(too_big):
            row, mode = np.argwhere(too_big)[0]
            raise ValueError(f"index {idx[row, mode]} of mode {mode} is out of range for "
                             f"shape {shape} (row {row})")
        cols = np.empty((idx.shape[0], 2 * N), dtype=np.int64)
        for m in range(N):
            cols[:, 2 * m] = self.blocks_[2 * m][0] + idx[:, m]
            # Mode-m unfolding column: the other modes in cyclic order m+1, m+2, ..., the
            # first varying fastest (Yamada et al. 2017, Lemma 2).
            u = np.zeros(idx.shape[0], dtype=np.int64)
            radix = 1
            for step in range(1, N):
                o = (m + step) % N
                u += radix * idx[:, o]
                radix *= shape[o]
            cols[:, 2 * m + 1] = self.blocks_[2 * m + 1][0] + u
        return _one_hot_rows(cols, self.n_features_out_)


class MultiViewEncoder(TransformerMixin, BaseEstimator):
    """Multi-view completion as a convex FM: (block, row, column) -> one-hot (Yamada et al. 2017,
    §4.3).

    Several matrices that share their columns (e.g. drugs) are stacked vertically (A of
    §4.3); each belongs to a view (e.g. gene expression, toxicity). The observed entry
    (b, r, c) of block b becomes

        x = [e_{offset_b + r} (sum of block rows); e_c (n_cols); e_{view of b} (n_views)]

    Parameters
    ----------
    block_rows : sequence of int
        Rows of each stacked matrix (e.g. (1106, 3, 1106, 3, 1106, 3) in §4.3).
    n_cols : int
        Shared number of columns.
    block_views : sequence of int or None, default=None
        View of each block (e.g. (0, 1, 0, 1, 0, 1)); None gives every block its own view.

    Attributes
    ----------
    row_offsets_ : ndarray of int, the first stacked row of each block
    n_views_ : int
    n_features_out_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn.encoders import MultiViewEncoder
    >>> enc = MultiViewEncoder(block_rows=(3, 2), n_cols=4).fit(None)
    >>> enc.transform(np.array([[1, 0, 2]])).indices.tolist()   # row 3 + 0, col 5 + 2, view 9 + 1
    [3, 7, 10]
    """

    def __init__(self, block_rows=(1,), n_cols=1, block_views=None):
        self.block_rows = block_rows
        self.n_cols = n_cols
        self.block_views = block_views

    def fit(self, X=None, y=None):
        """Fix the layout from the parameters (``X`` is not needed)."""
        rows = tuple(self.block_rows)
        rows = _check_sizes(rows, len(rows), "block_rows")
        if not rows:
            raise ValueError("block_rows must list at least one block")
        if not isinstance(self.n_cols, numbers.Integral) or self.n_cols < 1:
            raise ValueError(f"n_cols must be a positive integer, got {self.n_cols!r}")
        if self.block_views is None:
            views = np.arange(len(rows))
        else:
            views = np.asarray(self.block_views)
            if views.shape != (len(rows),) or views.dtype.kind not in "iu" or views.min() < 0:
                raise ValueError("block_views must hold one non-negative integer per block")
        self.row_offsets_ = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64)
        self.n_rows_ = int(np.sum(rows))
        self.block_views_ = views.astype(np.int64)
        self.n_views_ = int(views.max()) + 1
        _check_width(self.n_rows_ + int(self.n_cols) + self.n_views_, "MultiViewEncoder")
        self.n_features_out_ = self.n_rows_ + int(self.n_cols) + self.n_views_
        if X is not None:
            self.transform(X)  # validates the indices
        return self

    def _check_loaded_state(self):
        """A loaded encoder (pipeline file) holds exactly the layout of its parameters."""
        ref = MultiViewEncoder(self.block_rows, self.n_cols, self.block_views).fit()
        _same_state(self, ref, ("row_offsets_", "n_rows_", "block_views_", "n_views_",
                                "n_features_out_"))

    def transform(self, X):
        """CSR features (n_samples, n_features_out_) with three ones per row."""
        check_is_fitted(self, "row_offsets_")
        idx = _check_indices(X, 3, "MultiViewEncoder.transform")
        b, r, c = idx[:, 0], idx[:, 1], idx[:, 2]
        rows = np.asarray(tuple(self.block_rows))
        if np.any(b >= rows.shape[0]):
            raise ValueError(f"block index out of range (there are {rows.shape[0]} blocks)")
        if np.any(r >= rows[b]):
            i = int(np.flatnonzero(r >= rows[b])[0])
            raise ValueError(f"row {r[i]} is out of range for block {b[i]} "
                             f"({rows[b[i]]} rows)")
        if np.any(c >= self.n_cols):
            raise ValueError(f"column index out of range (n_cols={self.n_cols})")
        cols = np.column_stack([self.row_offsets_[b] + r, self.n_rows_ + c,
                                self.n_rows_ + int(self.n_cols) + self.block_views_[b]])
        return _one_hot_rows(cols, self.n_features_out_)
