"""Exact data-parallel ALS and MCMC for the classic FM (:class:`fmlearn.FMRegressor`,
:class:`fmlearn.FMClassifier`) on a Dask cluster: :func:`fit`, :func:`read_svmlight`.

How a sweep runs (``kernels.cd`` in memory, ``kernels.cd_rows`` here). The coordinate sweep
updates the parameters colour class after colour class (features that never share a row).
A class's update needs the rows only through two class-length sums per feature, and then
changes each row's cache ``E`` by the class's new values. So each partition keeps its rows
and its cache on one worker, and one *round* is: the client sends the changes of the class it
updated last and the current values of the next class; every worker applies the changes to
its rows' cache and returns the next class's sums; the client adds the sums in partition
order and steps the class. A round moves O(class size) numbers each way per partition, never
a row; a sweep is one round for w0 (and the noise precision), then one per colour class for w
and for each factor. Each worker lays its partitions out once per fit as the in-memory sweep
lays out its rows (class-major, rows sorted by their first feature:
:func:`fmlearn.distributed._fm_worker.layout`) and runs the in-memory sweep's fused pass on
them (:func:`fmlearn.kernels.cd_rows.layout_round`); it keeps a copy of the model, so a round
sends only the new values of the class stepped last (``_fm_sweep._Sweeper``). A round is
one message per worker (not a task per partition): each worker holding partitions has a
:class:`~fmlearn.distributed._fm_worker.Rounds` actor that runs the round on all of them, and
the client reaches it over a socket of its own (authenticated, kept open for the fit) or, when
there is none, through Dask's connection to the worker; the scheduler is not involved in a
round (see :class:`_Cluster`). With a socket to every worker, the workers are also connected
to one another and the class rounds run between them (``_fm_worker._peer_passes``): each
worker sends its partitions' sums to the others, adds all of them in partition order and
steps the class on its copy of the model as the client would, bit for bit; the client sends
one message per worker for a sweep's passes and is off the critical path of its rounds.

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

Where the code lives: the worker side (the registry, the round tasks) in ``_fm_worker``, the
client's part of the sweeps (model, chain, random numbers, restarts) in ``_fm_sweep``; this
module loads the partitions, colours the features and drives the fit.
"""

import math
import uuid

import numpy as np
import scipy.sparse as sp
from dask import delayed
from sklearn.base import is_classifier

from .._base import failure_atomic
from .._checkpoint import Checkpointer
from .._data import check_sparse_structure, merge_duplicate_rows, raw, to_csr
from .._plan import DataSummary, validate_params
from ..fm._plan import ClassicFMPlan
from ..kernels.cd import greedy_coloring
from ..kernels.cd_rows import Rows, row_pairs
from ._common import active_client, is_frame, part_weights, row_arrays
from ._files import SvmlightFiles, read_svmlight  # noqa: F401 - re-exported
from ._fm_sweep import _Sweeper
from ._fm_worker import Rounds, StateLost, _build, _drop, _mesh_connect, _mesh_listen, nodelay

__all__ = ["SvmlightFiles", "fit", "read_svmlight"]


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


def _merged(rows, d):
    """A partition's rows with its duplicates merged, in the canonical (hash) order of the
    in-memory SGD fit."""
    n = rows.indptr.shape[0] - 1
    if n == 0:
        return rows
    X = sp.csr_matrix((rows.data, rows.indices, rows.indptr), shape=(n, d))
    X, y, sw = merge_duplicate_rows(X, rows.y, rows.sw, group_by_first=False)
    indptr, indices, data = raw(X)
    return Rows(indptr, indices, data, np.ascontiguousarray(y), np.ascontiguousarray(sw),
                bool(np.all(sw == 1.0)))


def _labels(y):
    return np.unique(np.asarray(y).ravel())


def _scan(rows, n_features):
    """The :class:`~fmlearn._plan.DataSummary` of a partition's rows."""
    return DataSummary.of_csr(rows.indptr, rows.data, n_features, rows.y, rows.sw)


def _pairs(rows, n_features):
    """The distinct codes of the feature pairs that share a row of the partition (its share
    of the co-occurrence graph)."""
    n = rows.indptr.shape[0] - 1
    return np.unique(row_pairs(rows.indptr, rows.indices, n_features, 0, n))


def _color_task(pairs, d):
    """The colouring from every partition's pairs, computed on a worker: the client receives
    d numbers, never the graph."""
    return _coloring(np.unique(np.concatenate(pairs)), d)



# -- the client side ---------------------------------------------------------------------------


class _Cluster:
    """Runs the partitions' tasks: on the workers of a distributed client, or in this process
    (no client: the registry of this process, tasks called directly).

    With ``direct=True`` (the classic FM's sweeps) a round is not a Dask task per partition:
    each worker holding partitions gets one :class:`~fmlearn.distributed._fm_worker.Rounds`
    actor, and a round is one message per worker, sent straight from the client to the worker
    over a connection kept open for the fit (the message the actor proxy sends), which runs
    the round's function for all the worker's partitions and returns their results. The
    scheduler is not involved in a round: measured on a 2-worker LocalCluster under load 8,
    a round trip of two small calls took 2.5-15 ms this way against 34-49 ms as two tasks
    (submit + gather). Results are still returned per partition and added on the client in
    partition order, so the fit does not depend on which worker holds what."""

    def __init__(self, client, parts, prefix, color, pos, direct=False, peers=True):
        self.client = client
        # whether the class rounds may run between the workers (see _mesh; fit's ``rounds``);
        # False: every round goes through the client
        self.peers_allowed = peers
        self.direct = direct and client is not None
        self.actors = {}  # worker address -> the future of its Rounds actor
        self.comms = {}  # worker address -> an open Dask connection to it
        self.socks = {}  # worker address -> a socket to its Rounds actor's listener
        self.authkey = None
        self.messages = {"socket": 0, "dask": 0, "tasks": 0, "peer": 0}  # messages of the rounds
        self.mesh = None  # the workers (addresses, in order) connected to one another
        self.color = color
        self.pos = pos
        self.prefix = prefix
        self.rows = parts  # futures (client) or Rows
        self.where = [None] * len(parts)
        self.n = 0
        self.rounds = 0
        self.sent = 0  # bytes of the round arguments sent (estimate: their arrays' sizes)
        self.sent_peers = 0  # bytes of sums sent between the workers

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
        if self.direct:
            self._actors()
            self._mesh()

    def _mesh(self):
        """Connect the workers' serving threads to one another (``_fm_worker._mesh_listen``,
        ``_mesh_connect``) when every worker holding partitions has a socket: the sweep's
        class rounds then run between the workers (``_fm_worker._peer_passes``). Kept while
        the same workers hold the partitions; else (a Dask channel, a failed connection)
        the rounds go through the client."""
        import os

        addrs = sorted(set(self.where))
        if self.mesh == addrs:
            return
        self.mesh = None
        if not self.peers_allowed or not all(a in self.socks for a in addrs):
            return
        from multiprocessing import AuthenticationError

        key = os.urandom(32)
        first = {a: self.where.index(a) for a in addrs}
        try:
            got = self.map(_mesh_listen, key, count=False)
            listeners = [got[first[a]] for a in addrs]
            self.map(_mesh_connect, key, listeners, count=False)
        except (OSError, EOFError, ValueError, AuthenticationError):
            return  # a worker could not reach another: the rounds go through the client
        # (a lost worker raises StateLost: the sweep restarts and connects them afresh)
        self.mesh = addrs

    @property
    def peer(self):
        """Whether the class rounds can run between the workers (see :meth:`_mesh`)."""
        return self.mesh is not None and self.mesh == sorted(set(self.where)) and all(
            a in self.socks for a in self.mesh)

    def owners(self):
        """The index (in :attr:`mesh`) of the worker of each partition."""
        return [self.mesh.index(a) for a in self.where]

    def _actors(self):
        """A Rounds actor on every worker that holds a partition (created once per worker and
        fit; a worker that disappeared lost its actor, see :meth:`_lost`)."""
        for addr in sorted(set(self.where) - set(self.actors)):
            fut = self.client.submit(Rounds, actor=True, workers=[addr],
                                     allow_other_workers=False,
                                     key=f"fd-{self.prefix}-rounds-{uuid.uuid4().hex}")
            actor = fut.result()
            self.actors[addr] = fut
            self._connect(addr, actor)

    def _connect(self, addr, actor):
        """A socket straight to the worker's Rounds actor (see ``Rounds.serve``): a round
        then wakes only the client's thread and the worker's serving thread. Measured on a
        2-worker LocalCluster under load 12: 1.7-2.6 ms per round trip of two calls, against
        8-11 ms through Dask's connection (its event loops on both sides). Without it (a TLS
        cluster, a listener that cannot be reached) the rounds go through Dask."""
        import os
        from multiprocessing.connection import Client as Connect

        if self.authkey is None:
            self.authkey = os.urandom(32)
        try:
            where = actor.serve(self.authkey).result()
            if where is not None:
                self.socks[addr] = conn = Connect(tuple(where), authkey=self.authkey)
                nodelay(conn)
        except (OSError, EOFError, ValueError):  # not reachable: Dask carries the rounds
            pass

    def map(self, fn, *args, count=True):
        """``fn(key, *args)`` on every partition; results in partition order (a
        ``_fm_worker.per_worker`` function: once per worker, one result per partition)."""
        self.rounds += count
        if not self.direct:
            self.sent += sum(a.nbytes for a in _arrays(args)) * len(self.rows)
            self.messages["tasks"] += len(self.rows)
            return self.gather([self._submit(fn, p, *args) for p in range(len(self.rows))])
        groups = {}
        for p, addr in enumerate(self.where):
            groups.setdefault(addr, []).append(p)
        self.sent += sum(a.nbytes for a in _arrays(args)) * len(groups)
        sock = {a: ps for a, ps in groups.items() if a in self.socks}
        rest = {a: ps for a, ps in groups.items() if a not in self.socks}
        self.messages["socket"] += len(sock)
        self.messages["dask"] += len(rest)
        done = {}
        lost = None
        for addr, ps in sock.items():
            try:
                self.socks[addr].send((fn, [self._key(p) for p in ps], args))
            except (OSError, EOFError) as exc:
                lost = lost or (addr, exc)
                self._lost(addr)
        failed = None
        if rest:  # workers without a socket (mixed only if some listener was unreachable)
            try:
                done.update(zip(rest, self.client.sync(self._calls, fn, rest, args),
                                strict=True))
            except BaseException as exc:  # raised once the sockets' replies are read
                failed = exc
        for addr in sock:
            if addr in self.socks:
                try:
                    done[addr] = self._recv(addr)
                except (OSError, EOFError) as exc:
                    lost = lost or (addr, exc)
                    self._lost(addr)
        if failed is not None:
            raise failed
        if lost is not None:
            addr, exc = lost
            raise StateLost(f"the worker {addr} holding partitions of the fit was lost "
                            f"({type(exc).__name__}: {exc})") from exc
        for addr in groups:
            if not done[addr][0]:
                raise done[addr][1]
        out = [None] * len(self.rows)
        for addr, ps in groups.items():
            for p, r in zip(ps, done[addr][1], strict=True):
                out[p] = r
        return out

    def _recv(self, addr):
        """The reply of the worker ``addr``; waits while the scheduler still knows the worker
        and its actor (a worker that died without closing the socket, e.g. a lost machine,
        raises StateLost after at most about a second of silence past its loss)."""
        conn = self.socks[addr]
        while not conn.poll(1.0):
            fut = self.actors.get(addr)
            if fut is None or fut.status != "finished" or \
                    addr not in self.client.scheduler_info().get("workers", {}):
                raise EOFError("the worker left the cluster")
        return conn.recv()

    async def _calls(self, fn, groups, args):
        import asyncio

        from distributed.core import send_recv
        from distributed.protocol import to_serialize

        pool = self.client.rpc

        async def one(addr, ps):
            comm = self.comms.pop(addr, None)
            if comm is None or comm.closed():
                comm = await pool.connect(addr)
            reply = await send_recv(comm, op="actor_execute", actor=self.actors[addr].key,
                                    function="run", args=[to_serialize(fn), to_serialize(
                                        [self._key(p) for p in ps]), to_serialize(args)],
                                    kwargs={"separate_thread": False},
                                    serializers=pool.serializers,
                                    deserializers=pool.deserializers)
            # Back in the pool of this fit only once the reply is read (a failed call's
            # connection is dropped, never reused with a reply in flight).
            self.comms[addr] = comm
            if reply["status"] != "OK":
                return False, reply["exception"]
            return True, reply["result"]

        done = await asyncio.gather(*[one(a, ps) for a, ps in groups.items()],
                                    return_exceptions=True)
        for addr, res in zip(groups, done, strict=True):
            if isinstance(res, OSError):  # the connection failed: the worker is gone
                self._lost(addr)
                raise StateLost(f"the worker {addr} holding partitions of the fit was lost "
                                f"({type(res).__name__}: {res})") from res
        for res in done:
            if isinstance(res, BaseException):
                raise res
        return done

    def _lost(self, addr):
        """Drop the worker ``addr``'s socket and actor. With the workers connected to one
        another, drop every worker's: the others may be waiting for the lost one in a
        sweep's class rounds (they end it when their socket to the client closes), and the
        next build connects them afresh."""
        drop = [addr]
        if self.mesh is not None:
            drop += sorted((set(self.socks) | set(self.actors)) - {addr})
            self.mesh = None
        for a in drop:
            self._drop_worker(a)

    def _drop_worker(self, addr):
        conn = self.socks.pop(addr, None)
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass
        fut = self.actors.pop(addr, None)
        if fut is not None:
            fut.release()

    def close(self):
        if self.client is None:
            _drop(self.prefix)
            return
        for addr, comm in self.comms.items():
            try:
                self.client.rpc.reuse(addr, comm)
            except Exception:  # noqa: BLE001 - cleanup on a cluster that may be failing
                pass
        self.comms = {}
        for addr in list(self.actors) + list(self.socks):
            self._lost(addr)
        try:
            self.client.run(_drop, self.prefix)
        except Exception:  # noqa: BLE001 - cleanup on a cluster that may be failing
            pass


def _arrays(obj):
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, dict):
        yield from _arrays(tuple(obj.values()))
    elif isinstance(obj, (tuple, list)):
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


def _load_partitions(client, X, y, sample_weight, classifier, merge=None):
    """The validated partitions (persisted), the width, the dtype, the classes (classifier;
    else None), each partition's :func:`_scan` and the colouring of the features.

    With ``merge`` (a bool: SGD's rows) there is no colouring (None); with ``merge=True`` each
    partition's duplicate rows are merged into its canonical order as the in-memory SGD fit
    merges its rows (:func:`fmlearn._data.merge_duplicate_rows`)."""
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
            more = ("; fmlearn.distributed fits binary classifiers: for more classes fit "
                    "FMClassifier in memory (one-vs-rest)" if labels.shape[0] > 2 else "")
            raise ValueError(f"A classifier needs samples of exactly two classes; y has "
                             f"{labels.shape[0]} ({labels.tolist()[:10]}){more}")
        classes = labels
    load = delayed(_load_part, pure=True)
    parts = [load(xb, yb, wb, p, d, dtype, classes) for p, (xb, yb, wb) in enumerate(blocks)]
    if merge is not None:
        if merge:
            parts = [delayed(_merged, pure=True)(r, d) for r in parts]
        parts = _persist(client, parts)
        scans = _run(client, [delayed(_scan, pure=True)(r, d) for r in parts])
        return parts, d, dtype, classes, scans, None
    parts = _persist(client, parts)
    coloring = delayed(_color_task, pure=True)([delayed(_pairs, pure=True)(r, d)
                                                 for r in parts], d)
    *scans, color = _run(client, [delayed(_scan, pure=True)(r, d) for r in parts] + [coloring])
    return parts, d, dtype, classes, scans, np.ascontiguousarray(color, dtype=np.int64)


def _check_estimator(est):
    from ..fm import FMClassifier, FMRegressor

    if not isinstance(est, (FMRegressor, FMClassifier)):
        raise TypeError(f"fmlearn.distributed.fit trains FMRegressor or FMClassifier, got "
                        f"{type(est).__name__} (fit_one_pass trains the one-pass estimators)")
    validate_params(est)
    if est.solver not in ("als", "mcmc", "sgd"):
        raise ValueError(f"fmlearn.distributed.fit runs solver='als', 'mcmc' or 'sgd', the "
                         f"estimator has solver={est.solver!r}")


@failure_atomic
def fit(estimator, X, y=None, sample_weight=None, *, client=None, checkpoint=None,
        checkpoint_every=10, relation_blocks=None, rounds="workers"):
    """Fit a classic FM by ALS, MCMC or SGD over data that stays on a Dask cluster.

    The same sweeps as ``estimator.fit`` in memory (see the module docstring: per colour
    class, the workers apply the last change to their rows' caches and return class-length
    sums; the client steps the class), so the model equals the in-memory fit with the same
    ``random_state`` up to the order of floating-point summation: ALS and the MCMC
    regression chain are tested to 1e-8 relative. The probit classifier (MCMC) draws its
    latent targets on the workers: the same model, another chain. The result is an ordinary
    fitted estimator (``predict``, ``save``, ``load``).

    ``solver="sgd"`` is not exact: data-parallel epochs with iterative parameter mixing (each
    partition runs one epoch of the in-memory SGD kernel from the current model on its
    worker, the client averages the models weighted by the partitions' sample weight), an
    approximation of sequential SGD whose result depends on the partitioning (with one
    partition it is the in-memory fit). See :mod:`fmlearn.distributed._fm_sgd` and
    ``docs/distributed.md`` for its measured accuracy cost.

    Parameters
    ----------
    estimator : FMRegressor or FMClassifier
        With ``solver="als"``, ``"mcmc"`` or ``"sgd"``; its parameters apply (``groups``
        with ALS and MCMC), ``n_jobs`` does not (the parallelism is the cluster's). Fitted in
        place, returned.
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
        model format (:mod:`fmlearn._checkpoint`); the same call run again after
        the client was killed resumes from it and ends bit-identical to an uninterrupted run.
        The file is removed when the fit ends.
    checkpoint_every : int, default=10
        Sweeps (SGD: epochs) between checkpoints. The caches are also rebuilt from the model
        at those sweeps, so that a resumed run repeats exactly what the uninterrupted one computes.
    relation_blocks : list of (indices, X_block), optional
        Relation blocks (Rendle 2013; :class:`fmlearn.RelationData` in memory): ``X`` (a Dask
        array) holds the row-level features, and each pair the block row of every sample (a
        Dask array partitioned like X, or an in-memory array) and the block's matrix, in
        memory and sent to every worker. ALS and MCMC only, without checkpoints; the fit equals
        the in-memory fit on the same RelationData up to summation order
        (:mod:`fmlearn.distributed._fm_relation`).
    rounds : {"workers", "client"}, default="workers"
        ALS and MCMC: where a sweep's colour-class rounds run. "workers": between the
        workers over direct connections (each adds every partition's sums in partition order
        and steps the class itself; one hop per round); "client": every round through the
        client (two hops). The model is the same bit for bit. "client" can be faster where the
        workers share their cores with other work (docs/distributed.md); the Dask channel
        (no direct connection) and relation blocks always go through the client.

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

    if relation_blocks is not None:  # FMRegressor / FMClassifier only (_check_estimator)
        if checkpoint is not None:
            raise ValueError("checkpoints are not offered with relation_blocks")
        # fmlearn.distributed.fit (the package's entry, _fit.py) sends relational fits to
        # _fm_relation before they reach this function, which that module builds on
        raise TypeError("relation_blocks: call fmlearn.distributed.fit")
    if rounds not in ("workers", "client"):
        raise ValueError(f"rounds must be 'workers' or 'client', got {rounds!r}")
    if (done := dispatch_convex(estimator, X, y, sample_weight, client, checkpoint)) is not None:
        return done
    _check_estimator(estimator)
    client = active_client(client)
    if estimator.solver == "sgd":  # data-parallel epochs, parameter mixing: _fm_sgd
        from ._fm_sgd import fit_sgd

        started = _start(estimator, client, X, y, sample_weight, merge=bool(estimator.shuffle))
        return fit_sgd(estimator, started, client, checkpoint, checkpoint_every)
    est = estimator
    parts, color, plan, fingerprint, _ = _start(est, client, X, y, sample_weight)
    pos, classes_of = _classes(color)
    ck = Checkpointer(checkpoint, checkpoint_every, f"fd.fit/{plan.solver}", est, fingerprint)
    sweeper = _Sweeper(plan, color, pos, classes_of)
    start = 0
    found = ck.resume()
    if found is not None:
        start = sweeper.resume(found[0], found[1])
    cluster = _Cluster(client, parts, uuid.uuid4().hex[:12], color, pos, direct=True,
                       peers=rounds == "workers")
    history = {"metric": plan.metric, "train": [], "val": [], "iter_time": [], "train_avg": [],
               "val_avg": []}
    try:
        sweeper.run(cluster, start, ck, history, est)
    finally:
        cluster.close()
    ck.finish()
    sweeper.store(est, history)
    est.distributed_ = _report(cluster, sweeper, start)
    return est


def _start(est, client, X, y, sample_weight, merge=None):
    """The partitions loaded (see :func:`_load_partitions`; ``merge`` for SGD), the fit's
    :class:`~fmlearn.fm._plan.ClassicFMPlan` from the merged summaries of the partitions, and
    the estimator's validation attributes set as its in-memory fit sets them
    (``n_features_in_``, a classifier's ``classes_``): returns the partitions, the colouring
    (None for SGD), the plan, the checkpoint fingerprint of the data and the partitions'
    total weights."""
    classifier = is_classifier(est)
    parts, d, dtype, classes, scans, color = _load_partitions(client, X, y, sample_weight,
                                                              classifier, merge)
    n_rows = [s.n_samples for s in scans]
    if sum(n_rows) == 0:
        raise ValueError("there is nothing to fit: no row (of positive weight) in any "
                         "partition")
    summary = DataSummary.merge(scans, d, dtype)
    plan = ClassicFMPlan.build(est, summary, mode="fit" if merge is None else "epochs")
    est.n_features_in_ = d
    if classifier:
        est.classes_ = classes
    fingerprint = {"n_features": d, "partitions": n_rows, "weight": summary.weight}
    return parts, color, plan, fingerprint, [s.weight for s in scans]


def _report(cluster, sweeper, start):
    """The ``distributed_`` attribute: rounds, bytes sent, where the seconds went."""
    return {"rounds": cluster.rounds, "bytes_sent": int(cluster.sent),
            "bytes_peers": int(cluster.sent_peers),
            "seconds_rounds": sweeper.t_wait, "seconds_rounds_compute": sweeper.t_compute,
            "seconds_client": sweeper.t_client, "restarts": sweeper.restarts,
            "resumed_at": start, "messages": dict(cluster.messages)}
