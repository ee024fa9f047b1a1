"""Stream the blocks of a Dask collection to the client, each computed on the cluster, for
:func:`fmlearn.stream.fit_stream` (out-of-core ``partial_fit`` from a cluster)."""

from collections import deque

import dask
import numpy as np
from dask import delayed
from dask.delayed import Delayed

from ._common import active_client, is_frame, row_arrays


def _array_block(X, y, sw):
    X = np.asarray(X) if not hasattr(X, "tocsr") else X
    y = np.asarray(y)
    return (X, y) if sw is None else (X, y, np.asarray(sw, dtype=np.float64))


def _as_list(part):
    return list(part)


class DaskBlocks:
    """A re-iterable stream of in-memory ``(X, y[, sample_weight])`` blocks of a Dask
    collection (see :func:`blocks`). Every iteration computes the blocks again, in order."""

    def __init__(self, tasks, expand, client, prefetch, n_blocks):
        self._tasks = tasks
        self._expand = expand
        self.client = client
        self.prefetch = prefetch
        self.n_blocks = n_blocks

    def __len__(self):
        return self.n_blocks

    def _results(self):
        client = active_client(self.client)
        if client is None:
            for t in self._tasks:
                yield dask.compute(t)[0]
            return
        # Keep `prefetch` blocks in flight so that the cluster computes the next blocks while
        # the client trains on this one.
        pending = deque()
        tasks = iter(self._tasks)
        for t in tasks:
            pending.append(client.compute(t))
            if len(pending) > self.prefetch:
                break
        while pending:
            fut = pending.popleft()
            nxt = next(tasks, None)
            if nxt is not None:
                pending.append(client.compute(nxt))
            out = fut.result()
            fut.release()
            yield out

    def __iter__(self):
        for res in self._results():
            if self._expand:
                yield from res
            else:
                yield res


def blocks(X, y=None, sample_weight=None, *, client=None, prefetch=1):
    """The blocks of a Dask collection as a re-iterable stream of in-memory batches.

    Each block is computed on the cluster (a distributed client if one is given or running,
    else Dask's local scheduler) and fetched to the client one after another, with
    ``prefetch`` blocks computed ahead. Pass the result to :func:`fmlearn.stream.fit_stream`,
    which re-cuts the blocks into the estimator's batches and calls ``partial_fit``; the client
    holds at most ``prefetch + 1`` blocks plus two batches.

    Parameters
    ----------
    X : dask.array.Array, Dask DataFrame, dask.bag.Bag or list of dask.delayed
        * A 2-D Dask array (dense or scipy.sparse blocks; its row chunks are the blocks) or a
          Dask DataFrame (its partitions) with ``y`` (and ``sample_weight``) partitioned alike.
        * A Bag whose elements are ``(X, y)`` or ``(X, y, sample_weight)`` blocks, or a list of
          delayed objects each computing such a block; then ``y`` must be None.
    y, sample_weight : Dask array / Series or in-memory array, optional
    client : distributed.Client, optional
        Defaults to the running client, if any.
    prefetch : int, default=1
        Blocks computed ahead of the one being consumed (distributed client only).

    Returns
    -------
    DaskBlocks
        Iterable of ``(X, y)`` (or ``(X, y, sample_weight)``) in block order; iterating again
        recomputes the blocks (one epoch each).

    Examples
    --------
    >>> import dask
    >>> import dask.array as da
    >>> from fmlearn import GFMRegressor
    >>> from fmlearn.datasets import make_gfm
    >>> from fmlearn.distributed import blocks
    >>> from fmlearn.stream import fit_stream
    >>> X, y, _ = make_gfm(6000, 20, 2, random_state=0)
    >>> Xd, yd = da.from_array(X, chunks=(700, 20)), da.from_array(y, chunks=700)
    >>> with dask.config.set(scheduler="synchronous"):
    ...     m = fit_stream(GFMRegressor(2, batch_size=1000, random_state=0), blocks(Xd, yd))
    >>> m.n_batches_
    6
    """
    if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
        raise ValueError(f"prefetch must be an int >= 0, got {prefetch!r}")
    import dask.bag as db

    if isinstance(X, db.Bag) or (isinstance(X, (list, tuple)) and len(X)
                                 and all(isinstance(t, Delayed) for t in X)):
        if y is not None or sample_weight is not None:
            raise ValueError("with a Bag or a list of delayed blocks, y and sample_weight are "
                             "part of each block: pass y=None")
        if isinstance(X, db.Bag):
            tasks = [delayed(_as_list)(p) for p in X.to_delayed()]
            return DaskBlocks(tasks, True, client, prefetch, X.npartitions)
        return DaskBlocks(list(X), False, client, prefetch, len(X))
    if not (dask.is_dask_collection(X) or is_frame(X)):
        raise TypeError(f"blocks expects a Dask collection, got {type(X).__name__}")
    X, y, sw = row_arrays(X, y, sample_weight, need_lengths=False)
    xs = X.to_delayed().ravel()
    ys = y.to_delayed().ravel()
    ws = [None] * len(xs) if sw is None else sw.to_delayed().ravel()
    tasks = [delayed(_array_block)(a, b, c) for a, b, c in zip(xs, ys, ws, strict=True)]
    return DaskBlocks(tasks, False, client, prefetch, len(tasks))
