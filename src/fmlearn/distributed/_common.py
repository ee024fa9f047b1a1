"""Shared plumbing of the Dask backend: which scheduler runs the work, and input collections
turned into row-aligned Dask arrays."""

import numbers

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp

from .._data import check_sparse_structure, to_csr


def active_client(client=None):
    """``client``, else the default distributed client if one is running, else None (then
    Dask's configured local scheduler runs the work)."""
    if client is not None:
        return client
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - distributed is part of the extra
        return None
    try:
        return default_client()
    except ValueError:  # no client running
        return None


class Runner:
    """``persist`` / ``compute`` of lists of delayed tasks on an explicit client, or through
    ``dask.persist`` / ``dask.compute`` (the default client or the local scheduler)."""

    def __init__(self, client=None):
        self.client = client

    def persist(self, tasks):
        if not tasks:
            return []
        if self.client is not None:
            return list(self.client.persist(list(tasks)))
        return list(dask.persist(*tasks))

    def compute(self, tasks):
        return self.result(self.start(tasks))

    def start(self, tasks):
        """Begin computing ``tasks``: futures on a client (non-blocking), else the results."""
        if not tasks:
            return []
        if self.client is not None:
            return self.client.compute(list(tasks))
        return list(dask.compute(*tasks))

    def result(self, started):
        if self.client is not None and started:
            return list(self.client.gather(started))
        return list(started)


def is_frame(obj):
    """A Dask DataFrame or Series (duck-typed: dask.dataframe needs pyarrow)."""
    return dask.is_dask_collection(obj) and hasattr(obj, "to_dask_array")


def _known_rows(x):
    return not any(np.isnan(c) for c in x.chunks[0])


def row_arrays(X, y, sample_weight=None, *, need_lengths=True):
    """``(X, y, sw)`` as Dask arrays with the same row chunks; X 2-D with one column chunk.

    X may be a Dask array (dense or with scipy.sparse blocks) or a Dask DataFrame; y a Dask
    array / Series, or an in-memory array when X's row chunks are known; sample_weight likewise,
    or None.
    """
    if is_frame(X):
        X = X.to_dask_array(lengths=need_lengths)
    if not isinstance(X, da.Array):
        raise TypeError(f"X must be a Dask array or DataFrame, got {type(X).__name__} (wrap "
                        "in-memory data with dask.array.from_array, or use fmlearn.stream)")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got a Dask array of shape {X.shape}")
    if need_lengths and not _known_rows(X):
        X = X.compute_chunk_sizes()
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    y = _aligned(y, X, "y", need_lengths)
    sw = None if sample_weight is None else _aligned(sample_weight, X, "sample_weight",
                                                     need_lengths)
    return X, y, sw


def _aligned(v, X, name, need_lengths):
    if v is None:
        raise ValueError(f"{name} is required")
    if is_frame(v):
        v = v.to_dask_array(lengths=need_lengths)
    if isinstance(v, numbers.Number):
        raise TypeError(f"{name} must be an array, got a scalar")
    if not isinstance(v, da.Array):
        v = np.asarray(v)
        if v.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {v.shape}")
        if not _known_rows(X):
            raise ValueError(f"{name} is in memory but X has unknown row chunks; pass a Dask "
                             "array partitioned like X")
        if v.shape[0] != X.shape[0]:
            raise ValueError(f"{name} has {v.shape[0]} entries but X has {X.shape[0]} rows")
        return da.from_array(v, chunks=(X.chunks[0],))
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got a Dask array of shape {v.shape}")
    if _known_rows(X):
        if need_lengths and not _known_rows(v):
            v = v.compute_chunk_sizes()
        if _known_rows(v):
            if v.shape[0] != X.shape[0]:
                raise ValueError(f"{name} has {v.shape[0]} entries but X has {X.shape[0]} rows")
            if v.chunks[0] != X.chunks[0]:
                v = v.rechunk((X.chunks[0],))
            return v
    if v.numblocks[0] != X.numblocks[0]:
        raise ValueError(f"{name} has {v.numblocks[0]} row blocks but X has {X.numblocks[0]}; "
                         "partition them alike")
    return v


def part_weights(sw, n_rows, where):
    """A partition's sample weights, validated (float64, finite, non-negative, one per row;
    ones when ``sw`` is None); ``where`` names the partition in the error."""
    if sw is None:
        return np.ones(n_rows)
    sw = np.asarray(sw, dtype=np.float64).ravel()
    if sw.shape[0] != n_rows:
        raise ValueError(f"sample_weight has {sw.shape[0]} entries but X has {n_rows} rows "
                         f"({where})")
    if not np.all(np.isfinite(sw)) or np.any(sw < 0):
        raise ValueError(f"sample_weight must be finite and non-negative ({where})")
    return sw


def prepare_block(X, y, sw, dtype, where, *, n_features=None, y_numeric=True):
    """The validated rows of one partition, on the worker that holds it: ``(X, y, sw)`` with X
    dense C-contiguous or canonical CSR in ``dtype``, y float64 (raw labels when not
    ``y_numeric``), sw float64, rows of weight 0 dropped (as the in-memory fits do).

    ``where`` names the partition in the errors; ``n_features``, when given, is the width every
    partition must have (a partition read from its own file may be narrower or wider)."""
    if not hasattr(X, "shape") or len(X.shape) != 2:
        raise TypeError(f"{where}: X must be a 2-D array or sparse matrix, got "
                        f"{type(X).__name__}")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{where}: X has {X.shape[1]} columns but the data have {n_features}; "
                         "every partition must have the same width (read every file with the "
                         "same n_features)")
    if sp.issparse(X):
        check_sparse_structure(X, f"{where}: X")
        X = to_csr(X, dtype)
        finite = np.all(np.isfinite(X.data))
    else:
        X = np.ascontiguousarray(X, dtype=dtype)
        finite = np.all(np.isfinite(X))
    if not finite:
        raise ValueError(f"Input X contains NaN or infinity ({where})")
    y = np.asarray(y).ravel()
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"{where}: y has {y.shape[0]} entries but X has {X.shape[0]} rows")
    if y_numeric:
        y = y.astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise ValueError(f"y contains NaN or infinity ({where})")
    sw = part_weights(sw, X.shape[0], where)
    keep = np.flatnonzero(sw > 0)
    if keep.shape[0] < X.shape[0]:
        X, y, sw = X[keep], y[keep], sw[keep]
    return X, y, sw
