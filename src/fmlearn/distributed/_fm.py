"""Exact data-parallel ALS and MCMC for the classic FM (:class:`fmlearn.FMRegressor`,
:class:`fmlearn.FMClassifier`) on a Dask cluster: :func:`fit`, :func:`read_svmlight`.

How a sweep runs (``kernels.cd`` in memory, ``kernels.cd_rows`` here). The coordinate sweep
updates the parameters colour class after colour class (features that never share a row).
A class's update needs the rows only through two class-length sums per feature, and then
changes each row's cache ``E`` by the class's new values. So each partition keeps its rows
and its cache on one worker, and one *round* is: the client sends the changes of the class it
updated last and the current values of the next class; every worker applies the changes to
its rows' cache and returns the next class's sums (:func:`fmlearn.kernels.cd_rows.
class_round`); the client adds the sums in partition order and steps the class. A round
moves O(class size) numbers each way per partition, never a row; a sweep is one round for
w0 (and the noise precision), then one per colour class for w and for each factor.

Where the state lives. Each partition's validated rows are a persisted Dask future (its
lineage goes back to the source: a Dask array, dataframe or files, so Dask recomputes it when
a worker is lost); its cache ``E`` (and the probit's latent targets) live in a registry of the
worker process that built them, keyed by the fit and the partition, and every round's task is
sent to that worker. We chose this over Dask actors (which are not restarted when their
worker dies) and over futures of the state updated by tasks (each round's future would keep
the whole chain of rounds in the scheduler's lineage and count the cache once per round in
the worker's memory accounting). The registry holds nothing that cannot be rebuilt: the cache
is a function of the rows and the model. When a worker dies (its task errs with a lost
state, ``KilledWorker`` or a closed connection) the client puts back the model and chain it
held at the start of the sweep, rebuilds every partition's cache from it (lost rows are
recomputed from their source by Dask) and runs the sweep again with the same random numbers;
the fit then equals an uninterrupted one up to summation order (the rebuilt cache is computed
afresh instead of updated), tested to 1e-8.

Exactness. The colour classes come from a map-reduce over the partitions (each returns the
feature pairs that share one of its rows; the client colours their union with the same greedy
colouring as :func:`fmlearn.solvers._fm_common.column_data`), the random numbers of a sweep
are drawn on the client by the same calls as in memory, and the caches are rebuilt from the
model at the same sweeps (every 10). So ALS and the MCMC regression chain equal the in-memory
fit with the same ``random_state`` up to the order of floating-point summation. The probit
classifier's latent targets are drawn on the workers from a stream keyed by the sweep and the
partition (the in-memory fit draws them in its canonical row order, which a cluster does not
have): the same model, another chain.
"""

import copy
import math
import numbers
import os
import threading
import time
import uuid
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from dask import delayed
from sklearn.base import is_classifier
from sklearn.utils import check_random_state

from .._base import failure_atomic
from .._data import check_sparse_structure, raw, to_csr
from ..exceptions import DivergenceError
from ..kernels.cd import Config, _step, draw_group_hyper, gamma_shapes, greedy_coloring, n_normals
from ..kernels.cd_rows import (
    Apply,
    Gather,
    Rows,
    Step,
    bias_sums,
    class_round,
    class_step,
    row_pairs,
)
from ..losses import SMOOTHNESS, SQUARED
from ..solvers._fm_common import FMState, group_index, predict_rows
from ..solvers.als import fixed_prior
from ..solvers.mcmc import Chain, _keep, _reserve, draw_latent
from ._checkpoint import Checkpointer
from ._common import active_client, is_frame, part_weights, row_arrays

__all__ = ["SvmlightFiles", "fit", "read_svmlight"]

# Sweeps between rebuilds of the row caches from the model (as ALSSettings / MCMCSettings).
REFRESH_EVERY = 10
# Times a sweep is restarted after lost workers before the fit gives up.
MAX_RESTARTS = 3


class StateLost(RuntimeError):
    """A partition's row cache is not on the worker that ran its task (the worker died)."""


# -- the worker side ---------------------------------------------------------------------------
_REGISTRY = {}
_LOCK = threading.Lock()


@dataclass
class _Part:
    rows: Rows
    color: np.ndarray  # each feature's colour class, and its place in the class
    pos: np.ndarray
    E: np.ndarray
    target: np.ndarray  # y (squared loss), 0 (logistic: E[:, 0] is pred) or the latent z
    G: np.ndarray
    H: np.ndarray


def _where(p):
    return f"partition {p}"


def _load_part(X, y, sw, p, n_features, dtype, classes):
    """Validated rows of partition ``p`` (the layer of the in-memory fit, on the worker):
    canonical CSR of ``dtype``, finite values, ``n_features`` columns, labels encoded to
    {-1, +1} for a classifier; rows of weight 0 dropped (as the in-memory fit drops them)."""
    if sp.issparse(X):
        check_sparse_structure(X, f"X ({_where(p)})")
        X = to_csr(X, dtype)
        values = X.data
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X ({_where(p)}) must be 2-D, got shape {X.shape}")
        if X.dtype.kind not in "biuf":
            raise ValueError(f"X ({_where(p)}) must be numeric, got dtype {X.dtype}")
        values = X
        X = to_csr(sp.csr_matrix(X.astype(dtype, copy=False)), dtype)
    if X.shape[1] != n_features:
        raise ValueError(f"{_where(p)} has {X.shape[1]} columns but the data has {n_features}: "
                         "every partition must have the same width (for svmlight files pass "
                         "n_features=)")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"Input X contains NaN or infinity ({_where(p)})")
    y = np.asarray(y).ravel()
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"{_where(p)}: y has {y.shape[0]} entries but X has {X.shape[0]} rows")
    if classes is not None:
        unknown = np.setdiff1d(np.unique(y), classes)
        if unknown.shape[0]:
            raise ValueError(f"y ({_where(p)}) holds labels {unknown.tolist()} outside "
                             f"classes_ {list(classes)}")
        y = np.where(y == classes[1], 1.0, -1.0)
    else:
        if y.dtype.kind not in "biuf":
            raise ValueError(f"y ({_where(p)}) must be numeric, got dtype {y.dtype}")
        y = y.astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise ValueError(f"y contains NaN or infinity ({_where(p)})")
    sw = part_weights(sw, X.shape[0], _where(p))
    keep = np.flatnonzero(sw > 0)
    if keep.shape[0] < X.shape[0]:
        X, y, sw = X[keep], y[keep], sw[keep]
    indptr, indices, data = raw(X)
    return Rows(indptr, indices, data, np.ascontiguousarray(y), np.ascontiguousarray(sw),
                bool(np.all(sw == 1.0)))


def _labels(y):
    return np.unique(np.asarray(y).ravel())


def _scan(rows):
    """Rows, total weight and target range of a partition."""
    n = rows.indptr.shape[0] - 1
    lo = float(rows.y.min()) if n else math.inf
    hi = float(rows.y.max()) if n else -math.inf
    return n, float(rows.sw.sum()), lo, hi


def _pairs(rows, n_features):
    """The distinct codes of the feature pairs that share a row of the partition (its share
    of the co-occurrence graph)."""
    n = rows.indptr.shape[0] - 1
    return np.unique(row_pairs(rows.indptr, rows.indices, n_features, 0, n))


def _color_task(pairs, d):
    """The colouring from every partition's pairs, computed on a worker: the client receives
    d numbers, never the graph."""
    return _coloring(np.unique(np.concatenate(pairs)), d)


def _here():
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return "local"


def _lookup(key):
    part = _REGISTRY.get(key)
    if part is None:
        raise StateLost(f"the row cache of {key[1]} is not on this worker "
                        f"({_here()}); it was lost with its worker")
    return part


def _build(key, rows, w0, w, V, mode, color, pos):
    """Build a partition's row cache from the model (``mode``: "squared", "logistic" or
    "probit") and register it on this worker; returns the worker's address."""
    state = FMState(w0, w, V)
    pred = predict_rows((rows.indptr, rows.indices, rows.data), state)
    if mode == "squared":
        target = rows.y
    else:  # logistic: E[:, 0] is pred; probit: the latent target is drawn by the first round
        target = np.zeros(pred.shape[0])
    E = np.zeros((pred.shape[0], 3))
    E[:, 0] = pred - target
    m = max(1, int(w.shape[0]))
    with _LOCK:
        _REGISTRY[key] = _Part(rows, color, pos, E, target, np.empty(m), np.empty(m))
    return _here()


def _bias_round(key, ap, loss, latent):
    """Apply ``ap``; for the probit chain draw the latent targets (``latent`` = the stream's
    key); return the sums of the w0 step and of the noise precision."""
    t0 = time.process_time()
    part = _lookup(key)
    none = Gather(-1, 0, 1, part.G[:0], SQUARED)
    class_round(part.rows, part.color, part.pos, part.E, ap, none, part.G[:0], part.H[:0])
    if latent is not None:
        n = part.E.shape[0]
        u = 1.0 - np.random.default_rng(latent).random(n)
        pred = part.E[:, 0] + part.target
        part.target = draw_latent(pred, part.rows.y, u)
        part.E[:, 0] = pred - part.target
    return (*bias_sums(part.rows, part.E, loss), time.process_time() - t0)


def _class_round(key, ap, ga, m):
    """Apply ``ap``, gather the sums of ``ga`` (m features); returns them and the task's
    CPU seconds."""
    t0 = time.process_time()
    part = _lookup(key)
    G = part.G[:m]
    H = part.H[:m]
    class_round(part.rows, part.color, part.pos, part.E, ap, ga, G, H)
    return G.copy(), H.copy(), time.process_time() - t0


def _drop(prefix):
    with _LOCK:
        for key in [k for k in _REGISTRY if k[0] == prefix]:
            del _REGISTRY[key]


# -- svmlight files read on the workers --------------------------------------------------------
class SvmlightFiles:
    """svmlight / libsvm files read lazily, one partition per file, on the workers (see
    :func:`read_svmlight`)."""

    def __init__(self, paths, n_features, zero_based, dtype):
        self.paths = list(paths)
        self.n_features = n_features
        self.zero_based = zero_based
        self.dtype = np.dtype(dtype)

    def partitions(self):
        read = delayed(_read_svmlight_file, pure=True)
        return [read(p, self.n_features, self.zero_based, self.dtype) for p in self.paths]


def _read_svmlight_file(path, n_features, zero_based, dtype):
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(path, n_features=n_features, zero_based=zero_based, dtype=dtype)
    return X, y


def read_svmlight(paths, n_features=None, *, zero_based=False, dtype=np.float64):
    """Files in svmlight / libsvm format as the partitions of a distributed fit.

    Nothing is read on the client: each file is one partition, read on a worker by
    :func:`sklearn.datasets.load_svmlight_file` when :func:`fit` needs it (and read again
    there if its worker is lost).

    Parameters
    ----------
    paths : str or list of str
        Paths as the workers see them (a shared file system).
    n_features : int, optional
        Width of every partition. Without it each file's width is its largest index, and
        files of different widths are refused by :func:`fit`.
    zero_based : bool, default=False
        Whether the files' feature indices start at 0 (libsvm's start at 1). Not guessed per
        file: a guess could differ between files and shift their columns.
    dtype : float32 or float64, default=float64

    Returns
    -------
    SvmlightFiles
        Pass it as ``X`` to :func:`fit` (with ``y=None``).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("read_svmlight needs at least one path")
    if n_features is not None and (isinstance(n_features, bool) or not isinstance(
            n_features, numbers.Integral) or n_features < 1):
        raise ValueError(f"n_features must be a positive int or None, got {n_features!r}")
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    return SvmlightFiles(paths, n_features, bool(zero_based), dtype)


# -- the client side ---------------------------------------------------------------------------
def _lost_errors():
    errs = [StateLost]
    try:
        from distributed.comm.core import CommClosedError
        from distributed.scheduler import KilledWorker

        errs += [KilledWorker, CommClosedError]
    except ImportError:  # pragma: no cover - distributed is part of the extra
        pass
    try:
        from distributed.client import FutureCancelledError

        errs.append(FutureCancelledError)
    except ImportError:  # pragma: no cover - older distributed
        pass
    import concurrent.futures

    errs.append(concurrent.futures.CancelledError)
    return tuple(errs)


class _Cluster:
    """Runs the partitions' tasks: on the workers of a distributed client, or in this process
    (no client: the registry of this process, tasks called directly)."""

    def __init__(self, client, parts, prefix, color, pos):
        self.client = client
        self.color = color
        self.pos = pos
        self.prefix = prefix
        self.rows = parts  # futures (client) or Rows
        self.where = [None] * len(parts)
        self.n = 0
        self.rounds = 0
        self.sent = 0  # bytes of the round arguments sent (estimate: their arrays' sizes)

    def _key(self, p):
        return (self.prefix, f"partition {p}")

    def _submit(self, fn, p, *args):
        self.n += 1
        if self.client is None:
            return fn(self._key(p), *args)
        return self.client.submit(fn, self._key(p), *args, key=f"fd-{self.prefix}-{self.n}",
                                  workers=[self.where[p]], allow_other_workers=True,
                                  pure=False)

    def gather(self, futures):
        if self.client is None:
            return list(futures)
        return self.client.gather(list(futures))

    def build(self, state, mode):
        w0, w, V = float(state.w0), state.w, state.V
        if self.client is None:
            out = [_build(self._key(p), r, w0, w, V, mode, self.color, self.pos)
                   for p, r in enumerate(self.rows)]
        else:
            sw, sV, sc, sp_ = self.client.scatter([w, V, self.color, self.pos],
                                                  broadcast=True, hash=False)
            futs = [self.client.submit(_build, self._key(p), r, w0, sw, sV, mode, sc, sp_,
                                       key=f"fd-{self.prefix}-build-{p}-{uuid.uuid4().hex}",
                                       pure=False)
                    for p, r in enumerate(self.rows)]
            out = self.client.gather(futs)
        self.where = list(out)

    def map(self, fn, *args):
        """``fn(key, *args)`` on every partition; results in partition order."""
        self.rounds += 1
        self.sent += sum(a.nbytes for a in _arrays(args)) * len(self.rows)
        return self.gather([self._submit(fn, p, *args) for p in range(len(self.rows))])

    def close(self):
        if self.client is None:
            _drop(self.prefix)
            return
        try:
            self.client.run(_drop, self.prefix)
        except Exception:  # noqa: BLE001 - cleanup on a cluster that may be failing
            pass


def _arrays(obj):
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, tuple):
        for o in obj:
            yield from _arrays(o)


def _partitions(X, y, sample_weight):
    """Delayed ``(X, y, sw)`` blocks, the declared width (None: unknown) and the dtype."""
    if isinstance(X, SvmlightFiles):
        if y is not None or sample_weight is not None:
            raise ValueError("svmlight files hold their targets: pass y=None (and no "
                             "sample_weight)")
        parts = [(b[0], b[1], None) for b in (delayed(_pair, nout=2)(t)
                                              for t in X.partitions())]
        return parts, X.n_features, X.dtype
    import dask

    if not (dask.is_dask_collection(X) or is_frame(X)):
        raise TypeError(f"X must be a Dask array, a Dask DataFrame or read_svmlight(...), got "
                        f"{type(X).__name__}")
    X, y, sw = row_arrays(X, y, sample_weight, need_lengths=False)
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    xs = X.to_delayed().ravel()
    ys = y.to_delayed().ravel()
    ws = [None] * len(xs) if sw is None else sw.to_delayed().ravel()
    width = X.shape[1] if not math.isnan(X.shape[1]) else None
    return list(zip(xs, ys, ws, strict=True)), width, np.dtype(dtype)


def _pair(block):
    return block[0], block[1]


def _width(X):
    return int(X.shape[1])


def _run(client, tasks):
    if client is None:
        import dask

        return list(dask.compute(*tasks))
    return client.gather(client.compute(list(tasks)))


def _persist(client, tasks):
    if client is None:
        import dask

        return list(dask.compute(*tasks))
    # Futures of the partitions, kept in the workers' memory; their lineage goes back to the
    # source, so Dask recomputes a partition whose worker died.
    return list(client.compute(list(tasks)))


def _classes(color):
    """``(pos, classes)``: each feature's place in its class and the classes' features, in
    the order of :func:`fmlearn.solvers._fm_common.column_data` (by colour, then index)."""
    d = color.shape[0]
    n_colors = int(color.max()) + 1 if d else 0
    order = np.argsort(color, kind="stable").astype(np.int64)
    color_ptr = np.searchsorted(color[order], np.arange(n_colors + 1)).astype(np.int64)
    pos = np.empty_like(order)
    pos[order] = np.arange(d) - np.repeat(color_ptr[:-1], np.diff(color_ptr))
    return pos, [order[color_ptr[c]:color_ptr[c + 1]] for c in range(n_colors)]


def _coloring(pairs, d):
    """The greedy colouring (int64, d) of the co-occurrence graph given by its edge codes
    ``j * d + l``, as :func:`fmlearn.solvers._fm_common.column_data` colours the rows: each
    edge is a row of two features, so every feature has the same neighbours and gets the
    same colour."""
    j = pairs // d
    m = pairs.shape[0]
    E = sp.csr_matrix((np.ones(2 * m), np.column_stack([j, pairs - j * d]).ravel(),
                       np.arange(0, 2 * m + 1, 2)), shape=(m, d))
    Ec = E.tocsc()
    color, _ = greedy_coloring(Ec.indptr.astype(np.int64), Ec.indices.astype(np.int64),
                               E.indptr.astype(np.int64), E.indices.astype(np.int64), d)
    return color.astype(np.int64)


def _check_estimator(est):
    from ..fm import FMClassifier, FMRegressor

    if not isinstance(est, (FMRegressor, FMClassifier)):
        raise TypeError(f"fmlearn.distributed.fit trains FMRegressor or FMClassifier, got "
                        f"{type(est).__name__} (fit_one_pass trains the one-pass estimators)")
    est._validate_params()
    if est.solver not in ("als", "mcmc"):
        raise ValueError(f"fmlearn.distributed.fit runs solver='als' or 'mcmc', the estimator "
                         f"has solver={est.solver!r}")


@failure_atomic
def fit(estimator, X, y=None, sample_weight=None, *, client=None, checkpoint=None,
        checkpoint_every=10):
    """Fit a classic FM by ALS or MCMC over data that stays on a Dask cluster.

    The same sweeps as ``estimator.fit`` in memory (see the module docstring: per colour
    class, the workers apply the last change to their rows' caches and return class-length
    sums; the client steps the class), so the model equals the in-memory fit with the same
    ``random_state`` up to the order of floating-point summation: ALS and the MCMC
    regression chain are tested to 1e-8 relative. The probit classifier (MCMC) draws its
    latent targets on the workers: the same model, another chain. The result is an ordinary
    fitted estimator (``predict``, ``save``, ``load``).

    Parameters
    ----------
    estimator : FMRegressor or FMClassifier
        With ``solver="als"`` or ``"mcmc"``; its parameters apply (``groups`` included),
        ``n_jobs`` does not (the parallelism is the cluster's). Fitted in place, returned.
    X : dask.array.Array, Dask DataFrame or :func:`read_svmlight` files
        Rows in partitions (dense or scipy.sparse blocks; one column chunk, or the columns are
        joined). Partitions may be empty; all must have the same width.
    y : Dask array / Series or in-memory array, optional
        Partitioned like X (None with svmlight files, which hold their targets).
    sample_weight : same as y, optional
    client : distributed.Client, optional
        Default: the running client; without one the partitions are computed by Dask's local
        scheduler and swept in this process.
    checkpoint : str or os.PathLike, optional
        A directory: every ``checkpoint_every`` sweeps the estimator (model, MCMC chain and
        kept samples, sweep counter, random seed) is written there atomically in the safe
        model format (:mod:`fmlearn.distributed._checkpoint`); the same call run again after
        the client was killed resumes from it and ends bit-identical to an uninterrupted run.
        The file is removed when the fit ends.
    checkpoint_every : int, default=10
        Sweeps between checkpoints. The caches are also rebuilt from the model at those
        sweeps, so that a resumed run repeats exactly what the uninterrupted one computes.

    Returns
    -------
    estimator

    Raises
    ------
    ValueError
        Bad input (named with its partition), partitions of different widths, a checkpoint of
        another call. The estimator is then left as it was.
    DivergenceError
        Non-finite parameters (the estimator is left as it was).

    Examples
    --------
    >>> import dask
    >>> import dask.array as da
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from fmlearn import FMRegressor
    >>> from fmlearn import distributed as fd
    >>> rng = np.random.default_rng(0)
    >>> u, i = rng.integers(0, 30, 2000), rng.integers(0, 20, 2000)
    >>> X = sp.csr_matrix((np.ones(4000), np.column_stack([u, 30 + i]).ravel(),
    ...                    np.arange(0, 4001, 2)), shape=(2000, 50))
    >>> y = np.sin(u) + np.cos(i) + 0.1 * rng.standard_normal(2000)
    >>> Xd = da.from_array(X, chunks=(500, 50), asarray=False)
    >>> est = FMRegressor(4, solver="als", n_iter=5, reg_linear=1.0, reg_pairwise=1.0,
    ...                   random_state=0)
    >>> with dask.config.set(scheduler="synchronous"):
    ...     m = fd.fit(est, Xd, da.from_array(y, chunks=500))
    >>> ref = FMRegressor(4, solver="als", n_iter=5, reg_linear=1.0, reg_pairwise=1.0,
    ...                   random_state=0).fit(X, y)
    >>> bool(np.allclose(m.V_, ref.V_, rtol=1e-8, atol=1e-12))
    True
    """
    from ._hazan import dispatch_convex  # the convex FM: Hazan's algorithm, _hazan.fit_convex

    if (done := dispatch_convex(estimator, X, y, sample_weight, client, checkpoint)) is not None:
        return done
    _check_estimator(estimator)
    est = estimator
    classifier = is_classifier(est)
    client = active_client(client)
    blocks, width, dtype = _partitions(X, y, sample_weight)
    if width is None:  # svmlight without n_features: the widths of the files
        widths = _run(client, [delayed(_width, pure=True)(b[0]) for b in blocks])
        if len(set(widths)) > 1:
            raise ValueError(f"the svmlight files have different widths {sorted(set(widths))}:"
                             " every partition must have the same width; pass n_features= "
                             "to read_svmlight")
        width = widths[0]
    d = int(width)
    classes = None
    if classifier:
        labels = np.unique(np.concatenate(_run(client, [delayed(_labels, pure=True)(b[1])
                                                        for b in blocks])))
        if labels.shape[0] != 2:
            raise ValueError(f"A classifier needs samples of exactly two classes; y has "
                             f"{labels.shape[0]} ({labels.tolist()[:10]})")
        classes = labels
    load = delayed(_load_part, pure=True)
    parts = _persist(client, [load(xb, yb, wb, p, d, dtype, classes)
                              for p, (xb, yb, wb) in enumerate(blocks)])
    coloring = delayed(_color_task, pure=True)([delayed(_pairs, pure=True)(r, d)
                                                 for r in parts], d)
    *scans, color = _run(client, [delayed(_scan, pure=True)(r) for r in parts] + [coloring])
    color = np.ascontiguousarray(color, dtype=np.int64)
    n_rows = [s[0] for s in scans]
    sw_total = float(sum(s[1] for s in scans))
    if sum(n_rows) == 0:
        raise ValueError("there is nothing to fit: no row (of positive weight) in any "
                         "partition")
    pos, classes_of = _classes(color)
    groups = est._check_groups(d)
    est.n_features_in_ = d
    est.dtype_ = dtype.name
    if classifier:
        est.classes_ = classes
    else:
        est._update_clip_range(np.array([min(s[2] for s in scans), max(s[3] for s in scans)]),
                               extend=est.warm_start)
    rs = check_random_state(est.random_state)
    seed = int(rs.randint(np.iinfo(np.int32).max))
    state = est._prepare_state(d, dtype, rs)
    fingerprint = {"n_features": d, "partitions": n_rows, "weight": sw_total}
    ck = Checkpointer(checkpoint, checkpoint_every, f"fd.fit/{est.solver}", est, fingerprint)
    sweeper = _Sweeper(est, state, groups, color, pos, classes_of, sw_total, seed)
    start = 0
    found = ck.resume()
    if found is not None:
        start = sweeper.resume(found[0], found[1])
    cluster = _Cluster(client, parts, uuid.uuid4().hex[:12], color, pos)
    history = {"metric": "error_rate" if classifier else "rmse", "train": [], "val": [],
               "iter_time": [], "train_avg": [], "val_avg": []}
    try:
        sweeper.run(cluster, start, ck, history)
    finally:
        cluster.close()
    ck.finish()
    sweeper.store(est)
    est.history_ = history
    est.solver_ = est.solver
    est.distributed_ = {"rounds": cluster.rounds, "bytes_sent": int(cluster.sent),
                        "seconds_rounds": sweeper.t_wait,
                        "seconds_rounds_compute": sweeper.t_compute,
                        "seconds_client": sweeper.t_client,
                        "restarts": sweeper.restarts, "resumed_at": start}
    return est


class _Sweeper:
    """The client's part of the sweeps: the model, the chain, the random numbers."""

    def __init__(self, est, state, groups, color, pos, classes_of, sw_total, seed):
        self.est = est
        self.mcmc = est.solver == "mcmc"
        self.probit = self.mcmc and is_classifier(est)
        self.state = state
        self.color = color
        self.pos = pos
        self.classes_of = classes_of
        self.seed = seed
        self.sw_total = sw_total
        d, k = state.V.shape
        self.group, self.size = groups if groups is not None else group_index(None, d)
        self.chain = None
        if self.mcmc:
            s = self.settings = est._mcmc_settings(d, state.V.dtype, groups)
            self._use_chain(est._chain_for_warm_start(state, self.size.shape[0]))
            self.loss = SQUARED
            self.mode = "probit" if self.probit else "squared"
            self.cfg = Config(SQUARED, 1.0, True, True, not self.probit, float(s.reg_bias),
                              s.alpha_0, s.beta_0, s.gamma_0, s.mu_0)
        else:
            s = self.settings = est._als_settings(groups)
            prior = fixed_prior(groups, d, k, s.reg_linear, s.reg_pairwise)
            self.lam_w, self.mu_w, self.lam_v, self.mu_v = (prior.lam_w, prior.mu_w,
                                                             prior.lam_v, prior.mu_v)
            self.loss = s.loss_code
            self.mode = "squared" if self.loss == SQUARED else "logistic"
            self.cfg = Config(self.loss, float(SMOOTHNESS[self.loss]), False, False, False,
                              float(s.reg_bias), 1.0, 1.0, 1.0, 0.0)
        self.n_done = 0
        self.restarts = 0  # sweeps restarted after a lost worker
        self.pending = None
        self.t_wait = 0.0  # seconds waiting for the workers' rounds (compute + transfer)
        self.t_compute = 0.0  # of which the slowest partition's kernel CPU seconds
        self.t_client = 0.0  # seconds of the client's own steps

    def _use_chain(self, chain):
        self.chain = chain
        self.lam_w, self.mu_w = chain.lambda_w, chain.mu_w
        self.lam_v, self.mu_v = chain.lambda_v, chain.mu_v

    # -- checkpoints --------------------------------------------------------------------------
    def resume(self, saved, info):
        """Continue from a loaded checkpoint; returns the sweeps it holds."""
        st = self.state
        st.w0 = float(saved.w0_)
        st.w[:] = saved.w_
        st.V[:] = saved.V_
        self.seed = int(info["progress"]["seed"])
        if self.mcmc:
            self._use_chain(saved._fitted_chain())
        self.n_done = int(info["step"])
        return self.n_done

    def snapshot_estimator(self):
        """A copy of the estimator as a fit of the sweeps done so far leaves it."""
        snap = copy.copy(self.est)
        snap.solver_ = self.est.solver
        st = self.state.copy()
        if self.mcmc:
            c = self.chain
            chain = Chain(c.alpha, c.lambda_w.copy(), c.mu_w.copy(), c.lambda_v.copy(),
                          c.mu_v.copy(), c.t, c.stride,
                          None if c.samples is None else tuple(a[:c.n_samples].copy()
                                                               for a in c.samples),
                          c.n_samples)
            snap._store_mcmc(st, chain, self.n_done)
        else:
            snap.n_iter_ = self.n_done
            snap._store(st)
        return snap

    def store(self, est):
        if self.mcmc:
            est._store_mcmc(self.state, self.chain, self.n_done)
        else:
            est.n_iter_ = self.n_done
            est._store(self.state)

    # -- sweeps ------------------------------------------------------------------------------
    def run(self, cluster, start, ck, history):
        n_iter = self.est.n_iter
        if self.mcmc:
            _reserve(self.chain, self.state, self.settings)
        every = ck.every if ck.enabled else 0
        lost = _lost_errors()
        built = False
        it = start
        while it < n_iter:
            clock = time.perf_counter()
            saved = self._save()
            try:
                if not built or it % REFRESH_EVERY == 0 or (every and it % every == 0):
                    # As the in-memory solvers refresh the caches (and as a resumed run
                    # builds them): E[:, 0] = pred - target from the model.
                    cluster.build(self.state, self.mode)
                    built = True
                    self.pending = _no_apply()
                self.pending, ok = self._sweep(cluster, self.pending)
            except lost:
                self.restarts += 1
                if self.restarts > MAX_RESTARTS * max(1, n_iter):
                    raise
                self._restore(saved)
                built = False
                continue
            self.n_done = it = it + 1
            if self.mcmc:
                _keep(self.chain, self.state, self.settings)
            if not (ok and self.state.is_finite()):
                raise DivergenceError(f"{self.est.solver.upper()} produced non-finite values "
                                      f"at sweep {self.n_done}; increase the regularization "
                                      "or rescale the targets. The estimator keeps its "
                                      "previous state")
            history["iter_time"].append(time.perf_counter() - clock)
            if ck.due(self.n_done, n_iter):
                ck.write(self.snapshot_estimator(), self.n_done, n_iter, {"seed": self.seed})

    def _save(self):
        extra = None
        if self.mcmc:
            c = self.chain
            extra = (c.alpha, c.t, c.lambda_w.copy(), c.mu_w.copy(), c.lambda_v.copy(),
                     c.mu_v.copy())
        return self.state.copy(), extra

    def _restore(self, saved):
        st, extra = saved
        self.state.w0 = st.w0
        self.state.w[:] = st.w
        self.state.V[:] = st.V
        if extra is not None:
            c = self.chain
            c.alpha, c.t = extra[0], extra[1]
            for dst, src in zip((c.lambda_w, c.mu_w, c.lambda_v, c.mu_v), extra[2:],
                                strict=True):
                dst[...] = src

    def _wait(self, cluster, fn, *args):
        t0 = time.perf_counter()
        out = cluster.map(fn, *args)
        self.t_wait += time.perf_counter() - t0
        self.t_compute += max(o[-1] for o in out)  # the slowest partition's CPU seconds
        return out

    def _sweep(self, cluster, pending):
        """One sweep, in the order of ``kernels.cd.coordinate_sweep``. ``pending`` (the last
        class's changes of the previous sweep) is applied by the first round; returns the
        changes of this sweep's last class (applied by the next round) and whether the caches
        were finite."""
        st = self.state
        d, k = st.V.shape
        n_groups = self.size.shape[0]
        sample = self.mcmc
        cfg = self.cfg
        z = np.zeros(1)
        latent = None
        if sample:
            # The calls of mcmc_solver, in its order: the chain's random numbers are the same.
            rs = np.random.default_rng([self.seed, self.chain.t])
            z = rs.standard_normal(n_normals(d, k, n_groups))
            g = rs.standard_gamma(gamma_shapes(d, k, self.size, cfg, self.sw_total))
            if self.probit:
                latent = [self.seed, self.chain.t, 1]
        sums = self._wait(cluster, _bias_round, pending, self.loss, latent)
        t0 = time.perf_counter()
        g0 = sum(s[0] for s in sums)
        h0 = sum(s[1] for s in sums)
        rss = sum(s[2] for s in sums)
        ok = all(s[3] for s in sums)
        alpha = 1.0
        gi = 0
        if sample:
            alpha = self.chain.alpha
            if cfg.draw_alpha:
                alpha = g[0] * 2.0 / (cfg.beta_0 + rss)
                gi = 1
            self.chain.alpha = float(alpha)
        w0 = float(st.w0)
        st.w0 = float(_step(w0, g0, h0, cfg.reg_bias, 0.0, alpha, cfg.curv,
                            z[0] if sample else 0.0, sample))
        shift = st.w0 - w0
        zi = 1
        theta_w = st.w.reshape((d, 1))
        if sample:
            draw_group_hyper(theta_w, 0, self.group, self.size, self.lam_w, self.mu_w,
                             g[gi:gi + n_groups], z[zi:zi + n_groups], cfg)
            gi += n_groups
        zi += n_groups
        passes = [(0, theta_w, 0, 1, 1, 0 if k > 0 else -1, self.lam_w, self.mu_w, zi)]
        zi += d
        for f in range(k):
            if sample:
                draw_group_hyper(st.V, f, self.group, self.size, self.lam_v[f], self.mu_v[f],
                                 g[gi:gi + n_groups], z[zi:zi + n_groups], cfg)
                gi += n_groups
            zi += n_groups
        for f in range(k):
            cur = 1 + f % 2
            passes.append((1, st.V, f, cur, 3 - cur, f + 1 if f + 1 < k else -1,
                           self.lam_v[f], self.mu_v[f], zi))
            zi += d
        self.t_client += time.perf_counter() - t0
        ap = Apply(float(shift), -1, 0, 1, 1, _E, _E, _E, -1)
        for slot, theta, col, cur, nxt, fn, lam, mu, z0 in passes:
            step = Step(self.group, lam, mu, float(alpha), cfg.curv, z, z0, sample)
            # The next factor's sums start from 0 (set after the last change of the previous
            # pass, which reads the column this pass fills).
            ap = ap._replace(zero=nxt if fn >= 0 else -1)
            for c, feats in enumerate(self.classes_of):
                m = feats.shape[0]
                old = np.ascontiguousarray(theta[feats, col], dtype=np.float64)
                ga = Gather(c, slot, cur, old, self.loss)
                sums = self._wait(cluster, _class_round, ap, ga, m)
                t0 = time.perf_counter()
                G = sums[0][0].copy()
                H = sums[0][1].copy()
                for gp, hp, _ in sums[1:]:
                    G += gp
                    H += hp
                prev = np.empty(m)
                delta = np.empty(m)
                class_step(feats, theta, col, G, H, step, prev, delta)
                vn = (np.ascontiguousarray(st.V[feats, fn], dtype=np.float64) if fn >= 0
                      else _E)
                ap = Apply(0.0, c, slot, cur, nxt, prev, delta, vn, -1)
                self.t_client += time.perf_counter() - t0
        if sample:
            self.chain.t += 1
        return ap, ok


_E = np.zeros(0)


def _no_apply():
    return Apply(0.0, -1, 0, 1, 1, _E, _E, _E, -1)
