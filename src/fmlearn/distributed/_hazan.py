"""The convex FM (Hazan's algorithm, Yamada et al. 2017, Algorithm 1) on Dask.

:func:`fmlearn.solvers.hazan.hazan_solver` touches rows only through block functions
(``fn(data, vectors, *args) -> tuple of sums``) called on "rows" with two methods: ``reduce``
(the sums of all blocks) and ``update`` (the same, keeping the n-vectors the function stored).
:class:`DaskRows` is such rows with every block on a Dask worker: the block's
:class:`~fmlearn.solvers.hazan.CFMData` (X, X^T, X o X, y, weights, the group slices) and its
n-vectors (the cached quadratic predictions q, the predictions f, the gradient weights g, the
atom's q(p p^T)) stay where they were built; a call sends each block's task the function and
its d-length arguments and adds the returned sums on the client in block order. So the
Lanczos matvecs of the eigen-step, the conjugate-gradient products of the linear part, the
exact line search and the logistic refit are map-reduces over row blocks, while the client runs
the very same ARPACK, CG, L-BFGS and atom code as the in-memory fit and holds d-vectors only
(the atoms, the linear part, Lanczos and CG vectors, the arguments of the tasks in flight),
never a row. The fit equals the in-memory one up to
the order of floating-point summation.

A block's state is immutable: an ``update`` makes a new task result (data shared, the vector
dictionary copied) and the client drops the previous one, so the cluster holds one version of
the n-vectors per block.
"""

import dask
import numpy as np
from dask.delayed import Delayed
from sklearn.base import is_classifier

from .._base import failure_atomic
from .._data import to_csr
from .._plan import validate_params
from ..convex import begin_rows, fit_rows, is_convex_fm
from ..solvers.hazan import cfm_data
from ._common import active_client, is_frame, prepare_block, row_arrays

__all__ = ["DaskRows", "fit_convex"]


# -- work done on the workers ------------------------------------------------------------------
def _checked_block(part, index, dtype, n_features, classifier):
    """Partition ``index`` validated (``prepare_block``), as canonical CSR."""
    where = f"partition {index}"
    if not isinstance(part, (tuple, list)) or len(part) not in (2, 3):
        raise TypeError(f"{where} must be an (X, y) or (X, y, sample_weight) block, got "
                        f"{type(part).__name__}")
    X, y = part[0], part[1]
    sw = part[2] if len(part) == 3 else None
    if dtype is None:  # the block's own float dtype, as fit's validation keeps it
        kind = getattr(X, "dtype", None)
        dtype = np.dtype(kind) if kind in (np.float32, np.float64) else np.dtype(np.float64)
    X, y, sw = prepare_block(X, y, sw, dtype, where, n_features=n_features,
                             y_numeric=not classifier)
    return to_csr(X, dtype), y, sw


def _summary(block, classifier):
    """Rows, width, dtype, sum of weights and the labels (classifier) or the target range."""
    X, y, sw = block
    if classifier:
        labels = np.unique(y)
    else:
        labels = (float(y.min()), float(y.max())) if y.shape[0] else None
    return X.shape[0], X.shape[1], np.dtype(X.dtype).name, float(sw.sum()), labels


def _block_state(block, classes, groups):
    """(CFMData, vectors) of one partition; a classifier's labels encoded to -1 / +1."""
    X, y, sw = block
    if classes is not None:
        y = np.where(y == classes[1], 1.0, -1.0)
    return cfm_data(X, y, sw, groups), {}


def _reduce_block(state, fn, args):
    return fn(state[0], state[1], *args)


def _update_block(state, fn, args):
    vec = dict(state[1])
    out = fn(state[0], vec, *args)
    return state[0], vec, out


def _sums(block):
    return block[2]


def _add(parts):
    """Entry-wise sum of the blocks' tuples, in block order."""
    out = list(parts[0])
    for p in parts[1:]:
        for i, v in enumerate(p):
            out[i] = out[i] + v
    return tuple(out)


# -- where the blocks live ---------------------------------------------------------------------
class _InProcess:
    """No distributed client: every block computed by Dask's local scheduler and kept in this
    process (for small data, examples and tests)."""

    def load(self, parts):
        return [p.compute() if isinstance(p, Delayed) else p for p in parts]

    def submit(self, i, fn, *args):
        return fn(*args)

    def gather(self, futures):
        return list(futures)

    def release(self, futures):
        pass


class _OnCluster:
    """A distributed client: block ``i`` lives on worker ``i mod n_workers`` (allowed to move
    if that worker is lost); every task on a block runs where the block is."""

    def __init__(self, client):
        self.client = client
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise RuntimeError("the Dask cluster has no workers")
        self.workers = workers

    def _where(self, i):
        return [self.workers[i % len(self.workers)]]

    def load(self, parts):
        return list(self.client.compute(list(parts)))

    def submit(self, i, fn, *args):
        return self.client.submit(fn, *args, pure=False, workers=self._where(i),
                                  allow_other_workers=True)

    def gather(self, futures):
        return list(self.client.gather(list(futures)))

    def release(self, futures):
        for f in futures:
            f.release()


class DaskRows:
    """Rows of the convex FM held in blocks on Dask workers, for
    :func:`fmlearn.solvers.hazan.hazan_solver` (see the module docstring).

    Parameters
    ----------
    where : the executor holding the blocks (on a cluster or in this process)
    blocks : list of futures (or in-memory states) of ``(CFMData, vectors)``
    n_features : int
    groups : list of ndarray or None
        The interaction groups' feature indices (the blocks hold the column slices).
    """

    def __init__(self, where, blocks, n_features, groups=None):
        self._where = where
        self._blocks = list(blocks)
        self.n_features = int(n_features)
        self.groups = groups
        self.rounds = 0  # map-reduce rounds so far (each one task per block)

    def reduce(self, fn, *args):
        w = self._where
        self.rounds += 1
        futures = [w.submit(i, _reduce_block, b, fn, args) for i, b in enumerate(self._blocks)]
        return _add(w.gather(futures))

    def update(self, fn, *args):
        w = self._where
        self.rounds += 1
        new = [w.submit(i, _update_block, b, fn, args) for i, b in enumerate(self._blocks)]
        sums = w.gather([w.submit(i, _sums, b) for i, b in enumerate(new)])
        w.release(self._blocks)
        self._blocks = new
        return _add(sums)

    def close(self):
        """Release the blocks on the cluster."""
        self._where.release(self._blocks)
        self._blocks = []


# -- input -----------------------------------------------------------------------------------
def _partitions(X, y, sample_weight):
    """(list of delayed partitions (X, y[, sw]), width or None, dtype or None, head of X for
    the feature names)."""
    import dask.bag as db

    from ._files import SvmlightFiles

    if isinstance(X, SvmlightFiles):  # fmlearn.distributed.read_svmlight: a file a partition
        if y is not None or sample_weight is not None:
            raise ValueError("svmlight files hold their targets: pass y=None")
        return X.partitions(), X.n_features, X.dtype, None
    if isinstance(X, db.Bag) or (isinstance(X, (list, tuple)) and len(X)
                                 and all(isinstance(t, Delayed) for t in X)):
        if y is not None or sample_weight is not None:
            raise ValueError("with a list of delayed blocks, y and sample_weight are part of "
                             "each block: pass y=None")
        parts = X.to_delayed() if isinstance(X, db.Bag) else list(X)
        if isinstance(X, db.Bag):
            parts = [dask.delayed(_single)(p) for p in parts]
        return parts, None, None, None
    if not (dask.is_dask_collection(X) or is_frame(X)):
        raise TypeError(f"fit_convex expects a Dask array or DataFrame with y, or a list of "
                        f"delayed (X, y[, sample_weight]) blocks; got {type(X).__name__}")
    head = X._meta if is_frame(X) else None
    X, y, sw = row_arrays(X, y, sample_weight, need_lengths=False)
    xs, ys = X.to_delayed().ravel(), y.to_delayed().ravel()
    ws = [None] * len(xs) if sw is None else sw.to_delayed().ravel()
    parts = [dask.delayed(tuple)([a, b, c]) for a, b, c in zip(xs, ys, ws, strict=True)]
    dtype = np.dtype(X.dtype) if np.dtype(X.dtype) in (np.float32, np.float64) else np.float64
    return parts, int(X.shape[1]), np.dtype(dtype), head


def _single(items):
    items = list(items)
    if len(items) != 1:
        raise ValueError(f"a Bag partition must hold one (X, y[, sample_weight]) block, got "
                         f"{len(items)}")
    return items[0]


def dispatch_convex(estimator, X, y, sample_weight, client, checkpoint):
    """:func:`fmlearn.distributed.fit` for a convex FM: :func:`fit_convex`; None for any other
    estimator (``fit`` then goes on)."""
    if not is_convex_fm(estimator):
        return None
    if checkpoint is not None:
        raise ValueError("checkpoint= is not supported for the convex FM (an iteration of "
                         "Hazan's algorithm is cheap to redo: fit again with warm_start=True "
                         "from a saved model instead)")
    return fit_convex(estimator, X, y, sample_weight, client=client)


def _convex_estimator(estimator):
    if not is_convex_fm(estimator):
        raise TypeError(f"fit_convex trains ConvexFMRegressor / ConvexFMClassifier, not "
                        f"{type(estimator).__name__}")


# -- the driver --------------------------------------------------------------------------------
def fit_convex(estimator, X, y=None, sample_weight=None, *, eval_set=None, client=None):
    """Fit a convex FM (Hazan's algorithm) on data held by a Dask cluster.

    Equivalent to ``estimator.fit(X, y, sample_weight)`` with the data in memory (same
    parameters, same ``random_state``, same warm start) and equal to it up to the order of
    floating-point summation (tested to 1e-8 relative): every O(nnz) operation of the
    algorithm -- the Lanczos matvecs of the eigen-step, the conjugate-gradient products of the
    linear part (``reg_linear``, ``linear_features``), the exact line search, the logistic
    refit -- runs on the workers as a map over the row partitions and a sum on the client, with
    each partition's rows and cached predictions kept on one worker; the client runs the same
    eigen-solver, CG, L-BFGS and atom updates as ``fit`` and holds d-vectors only (atoms,
    solver vectors, task arguments; no row). Each map-reduce is one round trip to the
    workers: an iteration costs a few dozen (Lanczos matvecs + CG products), so the Dask path
    pays when the rows do not fit the client or their products take longer than a round trip
    (benchmarks/RESULTS.md).

    Parameters
    ----------
    estimator : ConvexFMRegressor or ConvexFMClassifier
        Fitted in place and returned; on an error it is left as it was.
    X : dask.array.Array, Dask DataFrame, read_svmlight files, list of dask.delayed, Bag
        A 2-D Dask array (dense or scipy.sparse blocks; its row chunks are the partitions) or
        DataFrame with ``y`` (and ``sample_weight``) partitioned alike; or
        :func:`fmlearn.distributed.read_svmlight` files (a partition per file, read on the
        workers); or delayed objects (a Bag: one per partition) each computing an ``(X, y)``
        or ``(X, y, sample_weight)`` block, with ``y=None``. Every partition must have the same
        number of columns; empty partitions are allowed.
    y, sample_weight : Dask array / Series or in-memory array, optional
    eval_set : (X_val, y_val) in memory, optional
        Scored every iteration as by ``fit`` (``history_["val"]``).
    client : distributed.Client, optional
        Default: the running client; without one the partitions are computed by Dask's local
        scheduler and kept in this process.

    Returns
    -------
    estimator

    Examples
    --------
    >>> import dask
    >>> import dask.array as da
    >>> import numpy as np
    >>> from fmlearn import ConvexFMRegressor
    >>> from fmlearn.distributed import fit_convex
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 40)); y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> Xd, yd = da.from_array(X, chunks=(150, 40)), da.from_array(y, chunks=150)
    >>> est = ConvexFMRegressor(trace_bound=2.0, max_iter=10, tol=0, random_state=0)
    >>> with dask.config.set(scheduler="synchronous"):
    ...     m = fit_convex(est, Xd, yd)
    >>> ref = ConvexFMRegressor(trace_bound=2.0, max_iter=10, tol=0, random_state=0).fit(X, y)
    >>> bool(np.allclose(m.predict(X), ref.predict(X), rtol=1e-8, atol=1e-10))
    True
    """
    _convex_estimator(estimator)
    return _fit(estimator, X, y, sample_weight, eval_set, client)


@failure_atomic
def _fit(estimator, X, y, sample_weight, eval_set, client):
    validate_params(estimator)
    classifier = is_classifier(estimator)
    parts, d, dtype, head = _partitions(X, y, sample_weight)
    client = active_client(client)
    where = _OnCluster(client) if client is not None else _InProcess()
    loaded = where.load(parts)
    blocks = [where.submit(i, _checked_block, p, i, dtype, d, classifier)
              for i, p in enumerate(loaded)]
    where.release(loaded)
    summaries = where.gather([where.submit(i, _summary, b, classifier)
                              for i, b in enumerate(blocks)])
    try:
        rows = _rows(estimator, where, blocks, summaries, d, head, classifier)
    except BaseException:
        where.release(blocks)
        raise
    try:
        fit_rows(estimator, rows, eval_set)
    finally:
        rows.close()
    return estimator


def _rows(estimator, where, blocks, summaries, d, head, classifier):
    """Check the partitions' summaries, record what ``fit`` records before the solver
    (n_features_in_, dtype_, classes_ or y_range_) and build the blocks' CFMData."""
    if not summaries:
        raise ValueError("X has no partitions")
    widths = sorted({s[1] for s in summaries})
    if len(widths) > 1:
        raise ValueError(f"the partitions have different widths {widths}: every partition must "
                         "have the same number of columns (read every file with the same "
                         "n_features)")
    d = widths[0] if d is None else d
    if sum(s[0] for s in summaries) == 0 or sum(s[3] for s in summaries) <= 0:
        raise ValueError("all sample weights are zero (or X has no rows): there is nothing to "
                         "fit")
    dtypes = {s[2] for s in summaries}
    dtype = dtypes.pop() if len(dtypes) == 1 else "float64"
    if classifier:
        labels = np.unique(np.concatenate([s[4] for s in summaries]))
        groups = begin_rows(estimator, d, dtype, labels=labels, head=head)
        classes = estimator.classes_
    else:
        ranges = np.array([s[4] for s in summaries if s[4] is not None])
        groups = begin_rows(estimator, d, dtype, target_range=ranges.ravel(), head=head)
        classes = None
    states = [where.submit(i, _block_state, b, classes, groups) for i, b in enumerate(blocks)]
    where.release(blocks)
    return DaskRows(where, states, d, groups)

