"""Array plumbing between validated user input and the compiled kernels.

Everything here takes already-validated NumPy/SciPy objects and returns the raw arrays that
kernels consume (``indptr`` as int64, ``indices`` as int32, ``data`` in the model dtype), or
small derived data sets (duplicate rows merged into weights). No estimator logic lives here.
"""

import numpy as np
import scipy.sparse as sp


def to_csr(X, dtype=None):
    """Return ``X`` as a canonical CSR matrix: sorted indices, no explicit zeros, int32 indices.

    A dense array is converted (its zeros are dropped). The input is never modified.
    """
    if dtype is None:
        dtype = X.dtype
    if sp.issparse(X):
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
    big = X.nnz >= np.iinfo(np.int32).max
    X.indptr = X.indptr.astype(np.int64 if big else np.int32, copy=False)
    return X


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
    """
    keep = np.flatnonzero(sample_weight > 0)
    if keep.shape[0] < X.shape[0]:
        X, y, sample_weight = X[keep], y[keep], sample_weight[keep]
    if X.shape[0] == 0:
        raise ValueError("all sample weights are zero: there is nothing to fit")
    from .kernels.rows import group_sorted, row_hashes  # numba only when a fit runs

    indptr, indices, data = raw(X)
    yy = np.ascontiguousarray(y, dtype=np.float64) + 0.0  # maps -0.0 to +0.0
    bits = np.uint32 if data.dtype == np.float32 else np.uint64
    h = row_hashes(indptr, indices, data.view(bits), yy.view(np.uint64))
    key = h
    if group_by_first:
        # One uint64 key: (first feature + 1) in the high bits, the hash's top bits below.
        first = np.zeros(X.shape[0], dtype=np.uint64)
        nonempty = np.diff(indptr) > 0
        first[nonempty] = indices[indptr[:-1][nonempty]].astype(np.uint64) + np.uint64(1)
        b = np.uint64(max(1, int(X.shape[1] + 1).bit_length()))
        key = (first << (np.uint64(64) - b)) | (h >> b)
    order = np.argsort(key, kind="stable")
    group, reps = group_sorted(order, h, indptr, indices, data, yy)
    w = np.bincount(group, weights=np.asarray(sample_weight, dtype=np.float64)[order])
    Xm = _small_index_dtype(X[reps])
    return Xm, y[reps], w
