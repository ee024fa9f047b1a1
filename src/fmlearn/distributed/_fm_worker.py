"""The worker side of the distributed classic FM (:mod:`fmlearn.distributed._fm`): each
worker's registry of partition row caches, keyed by the fit and the partition, and the round
tasks that apply the last change to a cache and return the next class's sums."""

import os
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..kernels.cd import Columns, Plan
from ..kernels.cd_rows import (
    Apply,
    ClassRows,
    Gather,
    Rows,
    Step,
    bias_sums,
    class_round,
    class_step,
    layout_round,
)
from ..kernels.losses import SQUARED
from ..solvers._fm_common import FMState, class_entries, predict_rows
from ..solvers.mcmc import draw_latent


class StateLost(RuntimeError):
    """A partition's row cache is not on the worker that ran its task (the worker died)."""


# -- the worker side ---------------------------------------------------------------------------
_REGISTRY = {}
# Seconds a Rounds listener waits for its client to connect.
ACCEPT_TIMEOUT = 300
_LOCK = threading.Lock()


@dataclass
class _Part:
    rows: Rows
    crows: ClassRows  # the rows of each colour class; pos: each feature's place in its class
    pos: np.ndarray
    E: np.ndarray
    target: np.ndarray  # y (squared loss), 0 (logistic: E[:, 0] is pred) or the latent z
    G: np.ndarray
    H: np.ndarray
    # the rows class-major: (Columns, Plan, perm) of layout(); E, target in its row order
    lay: tuple = None


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


def layout(rows, color):
    """The partition's rows in the class-major layout of the in-memory sweep
    (:data:`fmlearn.kernels.cd.Columns`, :data:`~fmlearn.kernels.cd.Plan`) under the fit's
    colouring ``color``, built by the functions of :func:`fmlearn.solvers._fm_common.
    column_data` (``kernels.cd_layout``); returns ``(cols, plan, perm)``.

    The layout's row r is the partition's row ``perm[r]``: the rows sorted (stably) by their
    first feature, as the in-memory fit orders its rows (``_data.merged_rows``), so a
    first-field feature's rows are consecutive and its sums stay in registers
    (``kernels.cd._gather_unit``: measured 3.25 against 3.93 CPU ns per row and round on
    300,000 one-hot rows in random order, loaded machine). The CSR rows are not copied
    (``perm`` indexes them); ``cols.y``, ``cols.sw`` are in layout order, and so is the row
    cache. One block: a partition's sums are added in layout-row order. ``old`` and ``delta``
    are float64 whatever the data's dtype (the changes a round applies are float64). Built
    once per partition and fit (a cache rebuild keeps it)."""
    indptr, indices, data = rows.indptr, rows.indices, rows.data
    n = indptr.shape[0] - 1
    d = color.shape[0]
    idx = np.int32 if n < 2**31 else np.int64
    first = np.full(n, -1, dtype=np.int64)
    full = np.diff(indptr) > 0
    first[full] = indices[indptr[:-1][full]]
    perm = np.argsort(first, kind="stable").astype(idx)
    inv = np.empty(n, dtype=idx)
    inv[perm] = np.arange(n, dtype=idx)
    order = np.argsort(color, kind="stable").astype(np.int64)
    n_colors = int(color.max()) + 1 if d else 0
    color_ptr = np.searchsorted(color[order], np.arange(n_colors + 1)).astype(np.int64)
    _, _, eptr, roff, xoff, etpos, erow, ex = class_entries(
        indptr, indices, data, perm, inv, np.zeros(0, dtype=idx), n, order, color_ptr, color)
    m = max(1, int(np.diff(color_ptr).max()) if n_colors else 1)
    plan = Plan(order, color_ptr, eptr, roff, xoff, np.full(n_colors, -1, dtype=np.int64),
                np.zeros((1, 2), dtype=np.int64), max(1, n), np.ones(1, dtype=data.dtype),
                np.empty((1, m)), np.empty((1, m)), np.empty((2, m)), np.empty((2, m)),
                np.empty((2, m)), np.array([-1, 0, 0, 0, -1, 0], dtype=np.int64))
    cols = Columns(etpos, erow, ex, np.ascontiguousarray(rows.y[perm]),
                   np.ascontiguousarray(rows.sw[perm]), rows.unit)
    return cols, plan, perm


def _build(key, rows, w0, w, V, mode, color, pos):
    """Build a partition's row cache from the model (``mode``: "squared", "logistic" or
    "probit") and register it on this worker, with the rows' class-major :func:`layout`
    (kept from an earlier build of the same rows; the cache is in its row order); returns
    the worker's address."""
    old = _REGISTRY.get(key)
    lay = old.lay if old is not None and old.rows is rows and old.lay is not None else None
    if lay is None:
        lay = layout(rows, color)
    cols, plan, perm = lay
    state = FMState(w0, w, V)
    pred = predict_rows((rows.indptr, rows.indices, rows.data), state)[perm]
    if mode == "squared":
        target = cols.y
    else:  # logistic: E[:, 0] is pred; probit: the latent target is drawn by the first round
        target = np.zeros(pred.shape[0])
    E = np.zeros((pred.shape[0], 3))
    E[:, 0] = pred - target
    m = max(1, int(w.shape[0]))
    classes = [plan.order[plan.color_ptr[c]:plan.color_ptr[c + 1]]
               for c in range(plan.color_ptr.shape[0] - 1)]
    with _LOCK:
        _REGISTRY[key] = _Part(rows, None, pos, E, target, np.empty(m), np.empty(m), lay)
        # every partition's build carries the same model: the worker's copy is reset to it
        _MODELS[key[0]] = _Model(np.array(w).reshape(-1, 1), np.array(V), classes)
    return _here()


@dataclass
class _Model:
    """A worker's copy of the model of a fit (compact rounds): ``w`` as (d, 1) and ``V``,
    the features of each colour class, and the round whose changes it holds with that round's
    arguments (the round's task runs once per partition on the worker; the copy changes
    once)."""

    w: np.ndarray
    V: np.ndarray
    classes: list
    rid: int = -1
    args: tuple = None


_MODELS = {}
_F0 = np.zeros(0)


def _round_args(prefix, rid, head, chg, gather, loss):
    """The :data:`Apply` and :data:`Gather` of a compact round from this worker's copy of
    the model, as the client of a full round computes them (so the round is the same bit for
    bit): ``head = (shift, cur, nxt, zero)``; ``chg = (c, slot, col, fn, new)`` the class
    stepped last and its new values in the model's dtype (None: none), applied to the copy;
    ``gather = (c, slot, col, cur)`` the class whose sums are wanted (None: none)."""
    model = _MODELS.get(prefix)
    if model is None:
        raise StateLost(f"the model copy of fit {prefix} is not on this worker ({_here()}); "
                        "it was lost with its worker")
    with _LOCK:
        if model.rid != rid:
            shift, cur, nxt, zero = head
            ap = Apply(shift, -1, 0, cur, nxt, _F0, _F0, _F0, zero)
            if chg is not None:
                c, slot, col, fn, new = chg
                feats = model.classes[c]
                theta = model.w if slot == 0 else model.V
                old = theta[feats, col]
                delta = (new - old).astype(np.float64)  # the client's class_step's delta
                theta[feats, col] = new
                vn = model.V[feats, fn].astype(np.float64) if fn >= 0 else _F0
                ap = Apply(shift, c, slot, cur, nxt, old.astype(np.float64), delta, vn, zero)
            ga = Gather(-1, 0, 1, _F0, loss)
            if gather is not None:
                c, slot, col, gcur = gather
                theta = model.w if slot == 0 else model.V
                ga = Gather(c, slot, gcur, theta[model.classes[c], col].astype(np.float64),
                            loss)
            model.rid, model.args = rid, (ap, ga)
        return model.args


def _bias_round(key, ap, loss, latent):
    """Apply ``ap``; for the probit chain draw the latent targets (``latent`` = the stream's
    key); return the sums of the w0 step and of the noise precision."""
    t0 = time.process_time()
    part = _lookup(key)
    _round(part, ap, Gather(-1, 0, 1, part.G[:0], SQUARED))
    return _bias_tail(part, loss, latent, t0)


def _compact_bias(key, rid, head, chg, loss, latent):
    """:func:`_bias_round` of a compact round (see :func:`_round_args`)."""
    t0 = time.process_time()
    part = _lookup(key)
    ap, ga = _round_args(key[0], rid, head, chg, None, loss)
    _round(part, ap, ga)
    return _bias_tail(part, loss, latent, t0)


def _compact_class(key, rid, head, chg, gather, loss):
    """:func:`_class_round` of a compact round (see :func:`_round_args`): returns the sums
    as one (2, m) array (G, H) and the task's CPU seconds."""
    t0 = time.process_time()
    part = _lookup(key)
    ap, ga = _round_args(key[0], rid, head, chg, gather, loss)
    G, H = _round(part, ap, ga)
    m = ga.old.shape[0]
    out = np.empty((2, m))
    out[0] = G[:m]
    out[1] = H[:m]
    return out, time.process_time() - t0


def _bias_tail(part, loss, latent, t0):
    # the targets and weights in the cache's row order: the layout's (or the CSR rows')
    rows = part.rows if part.lay is None else part.lay[0]
    if latent is not None:
        n = part.E.shape[0]
        u = 1.0 - np.random.default_rng(latent).random(n)
        pred = part.E[:, 0] + part.target
        part.target = draw_latent(pred, rows.y, u)
        part.E[:, 0] = pred - part.target
    return (*bias_sums(rows, part.E, loss), time.process_time() - t0)


def _class_round(key, ap, ga, m):
    """Apply ``ap``, gather the sums of ``ga`` (m features); returns them and the task's
    CPU seconds."""
    t0 = time.process_time()
    part = _lookup(key)
    G, H = _round(part, ap, ga)
    return G[:m].copy(), H[:m].copy(), time.process_time() - t0


def _round(part, ap, ga):
    """Apply ``ap`` to the partition's cache and gather the sums of ``ga``: through the
    class-major layout when the partition has one, else through its CSR rows; returns the
    arrays holding the sums."""
    if part.lay is not None:
        cols, plan, _ = part.lay
        layout_round(cols, plan, part.E, ap, ga)
        return plan.G[0], plan.H[0]
    m = part.G.shape[0] if ga.c >= 0 else 0
    class_round(part.rows, part.crows, part.pos, part.E, ap, ga, part.G[:m], part.H[:m])
    return part.G, part.H


class Rounds:
    """A Dask actor on each worker that holds partitions of a fit: runs a round's task for all
    of that worker's partitions in one call (:class:`fmlearn.distributed._fm._Cluster`).

    It holds no state of its own: the row caches stay in this process's registry, so a
    partition rebuilt by a task (after a lost worker) is found by the actor of its new
    worker."""

    def run(self, fn, keys, args):
        """``fn(key, *args)`` for every partition key, in order (see :func:`_call`)."""
        return _call(fn, keys, args)

    def serve(self, authkey):
        """Listen for the rounds of one client on a socket of this worker's host (TCP; the
        connection is authenticated with ``authkey``, an HMAC challenge of
        :mod:`multiprocessing.connection`, the key sent by the client over Dask's own
        channel); returns the address, or None when the worker's address is not plain TCP
        (TLS and other transports: the client then sends its rounds through Dask)."""
        from multiprocessing.connection import Listener

        host = _host()
        if host is None:
            return None
        listener = Listener((host, 0), authkey=authkey)
        # The client connects right after this returns; a client that never comes (it failed
        # in between) must not leave the thread waiting for ever.
        sock = getattr(getattr(listener, "_listener", None), "_socket", None)
        if sock is not None:
            sock.settimeout(ACCEPT_TIMEOUT)
        thread = threading.Thread(target=_serve, args=(listener, host), daemon=True,
                                  name="fmlearn-rounds")
        thread.start()
        return listener.address


def _host():
    """The host of this worker's TCP address (None: another transport); 127.0.0.1 in a
    process without a worker (or an in-process one)."""
    addr = _here()
    if addr == "local" or addr.startswith("inproc://"):
        return "127.0.0.1"
    if not addr.startswith("tcp://"):
        return None
    host = addr[len("tcp://"):].rsplit(":", 1)[0]
    return host.strip("[]")


def nodelay(conn, buffers=0):
    """Set TCP_NODELAY on a :mod:`multiprocessing.connection` socket: it writes a long
    message's length and body in two calls, and Nagle's algorithm with the peer's delayed
    acknowledgement then holds the body's tail for ~40 ms (measured: 100 ms rounds instead
    of 2-5). With ``buffers``, ask for send and receive buffers of at least that many bytes."""
    import socket

    try:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
    except OSError:
        return
    with sock:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF) if buffers else ():
            if sock.getsockopt(socket.SOL_SOCKET, opt) < buffers:
                sock.setsockopt(socket.SOL_SOCKET, opt, buffers)


def _serve(listener, host="127.0.0.1"):
    """Serve one client's rounds until it closes the connection: each message is
    ``(fn, keys, args)``; the reply ``(True, results)`` or ``(False, exception)``."""
    try:
        conn = listener.accept()
    except Exception:  # noqa: BLE001 - a client that failed to authenticate or never came
        listener.close()
        return
    listener.close()
    nodelay(conn)
    _SERVING.conn = conn
    _SERVING.host = host
    _SERVING.mesh = None
    try:
        _serve_rounds(conn)
    finally:
        _close_mesh()


def _serve_rounds(conn):
    with conn:
        while True:
            try:
                fn, keys, args = conn.recv()
            except (EOFError, OSError):
                return
            try:
                reply = (True, _call(fn, keys, args))
            except Exception as exc:  # noqa: BLE001 - sent back, raised on the client
                reply = (False, exc)
            try:
                conn.send(reply)
            except (EOFError, OSError):
                return
            except Exception as exc:  # noqa: BLE001 - an exception that does not pickle
                conn.send((False, RuntimeError(f"{type(reply[1]).__name__}: {reply[1]}"
                                               f" ({exc})")))


def _drop(prefix):
    with _LOCK:
        for key in [k for k in _REGISTRY if k[0] == prefix]:
            del _REGISTRY[key]
        _MODELS.pop(prefix, None)


# -- rounds between the workers ----------------------------------------------------------------
# The serving thread's state (``_serve``): its client's connection and its mesh of connections
# to the other workers' serving threads of the same fit (``_mesh_listen``, ``_mesh_connect``).
_SERVING = threading.local()
# Bytes of the sums sent to each peer in one message; a longer exchange goes in chunks, every
# worker sending its chunk to all its peers before reading theirs, so no more than two chunks
# are unread on a connection (its buffers are set to hold them: no send can wait for ever).
CHUNK = 1 << 16
# Seconds a worker waits for its peers to connect to it (they do so as soon as they are asked).
PEER_ACCEPT_TIMEOUT = 30
# Seconds between two checks of the client's connection while a worker waits for its peers.
PEER_CHECK = 0.5
# Seconds a worker polls its peer's connection at most without sleeping before it waits
# (see _wait_peer; 0: it sleeps at once).
SPIN = 0.0003
# A list to record each class round's perf_counter stamps in (start, sums gathered, peers'
# sums received, class stepped), or None (bench_distributed.py --part 5 sets it).
TRACE = None


def per_worker(fn):
    """Mark ``fn`` as called once per worker, ``fn(keys, *args)``, returning one result per
    key (see :func:`_call`), instead of ``fn(key, *args)`` per partition key."""
    fn.per_worker = True
    return fn


def _call(fn, keys, args):
    """A round's message on a worker: ``fn(key, *args)`` for each of its partition keys, in
    order, or ``fn(keys, *args)`` once for a :func:`per_worker` function."""
    if getattr(fn, "per_worker", False):
        return fn(keys, *args)
    return [fn(key, *args) for key in keys]


def _close_mesh():
    mesh = getattr(_SERVING, "mesh", None)
    _SERVING.mesh = None
    listener = getattr(_SERVING, "listener", None)
    _SERVING.listener = None
    if listener is not None:
        listener.close()
    if mesh is not None:
        for conn in mesh[1].values():
            try:
                conn.close()
            except OSError:
                pass


@per_worker
def _mesh_listen(keys, authkey):
    """Open this serving thread's listener for its peers (authenticated with ``authkey``);
    returns its address (for the first key; None for the others)."""
    from multiprocessing.connection import Listener

    _close_mesh()
    listener = Listener((_SERVING.host, 0), authkey=authkey)
    sock = getattr(getattr(listener, "_listener", None), "_socket", None)
    if sock is not None:  # the peers connect right away, or failed (then it is no use waiting)
        sock.settimeout(PEER_ACCEPT_TIMEOUT)
    _SERVING.listener = listener
    return [listener.address] + [None] * (len(keys) - 1)


@per_worker
def _mesh_connect(keys, authkey, addresses):
    """Connect this serving thread to every other worker's (``addresses``: the listeners of
    :func:`_mesh_listen` of all the fit's workers, in the workers' order; this one is found by
    its own address): to the later ones by connecting, to the earlier ones by accepting (so
    no worker waits on one that waits on it)."""
    from multiprocessing.connection import Client as Connect

    listener = _SERVING.listener
    me = [tuple(a) for a in addresses].index(tuple(listener.address))
    peers = {}
    try:
        for j in range(me + 1, len(addresses)):
            conn = Connect(tuple(addresses[j]), authkey=authkey)
            conn.send(me)
            peers[j] = conn
        for _ in range(me):
            conn = listener.accept()
            peers[int(conn.recv())] = conn
    except BaseException:
        for conn in peers.values():
            conn.close()
        raise
    finally:
        listener.close()
        _SERVING.listener = None
    for conn in peers.values():
        nodelay(conn, 4 * CHUNK)
    peers = dict(sorted(peers.items()))
    _SERVING.mesh = (me, peers, _pollers(peers, _SERVING.conn))
    return [me] + [None] * (len(keys) - 1)


def _pollers(peers, client):
    """Per peer: a poll object of its connection alone (the short busy wait) and one of it
    and the client's connection (the blocking wait)."""
    import select

    out = {}
    for j, conn in peers.items():
        spin, block = select.poll(), select.poll()
        spin.register(conn.fileno(), select.POLLIN)
        block.register(conn.fileno(), select.POLLIN)
        block.register(client.fileno(), select.POLLIN)
        out[j] = (spin, block, client.fileno())
    return out


def _wait_peer(poll, spin_for):
    """Until the peer's connection has a message: polled without sleeping for up to
    ``spin_for[0]`` seconds (waking a sleeping thread costs more than that on a virtual
    machine), then waiting; a client that closed its connection (it lost a worker and
    restarts the sweep) ends the wait with StateLost. The busy poll adapts: a poll that ended
    in a sleep halves the next one's budget, one that found the message doubles it (up to
    :data:`SPIN`): on a busy machine, where the peer's message is late because the peer waits
    for a core, the worker sleeps at once and leaves the core to others."""
    spin, block, client = poll
    if spin.poll(0):
        return
    if spin_for[0] > 0.0:
        now = time.perf_counter()
        end = now + spin_for[0]
        while now < end:
            if spin.poll(0):
                spin_for[0] = min(SPIN, 2.0 * spin_for[0])
                return
            now = time.perf_counter()
    spin_for[0] = max(SPIN / 16, 0.5 * spin_for[0]) if SPIN > 0 else 0.0
    while True:
        ready = block.poll(1000 * PEER_CHECK)
        if any(fd != client for fd, _ in ready):
            return
        if ready:
            raise StateLost("the client ended the sweep")


def _exchange(peers, polls, mine, theirs, spin_for):
    """Send this worker's sums ``mine`` to every peer and read each peer's into
    ``theirs[j]``, in chunks of at most :data:`CHUNK` bytes (see there)."""
    out = memoryview(mine).cast("B")
    ins = {j: memoryview(a).cast("B") for j, a in theirs.items()}
    n = max([out.nbytes] + [b.nbytes for b in ins.values()])
    try:
        for lo in range(0, max(n, 1), CHUNK):
            for conn in peers.values():
                if lo < out.nbytes:
                    conn.send_bytes(out[lo:lo + CHUNK])
            for j, conn in peers.items():
                if lo < ins[j].nbytes:
                    _wait_peer(polls[j], spin_for)
                    got = conn.recv_bytes_into(ins[j][lo:lo + CHUNK])
                    if got != min(CHUNK, ins[j].nbytes - lo):
                        raise StateLost(f"a peer worker sent {got} bytes of sums, expected "
                                        f"{min(CHUNK, ins[j].nbytes - lo)}")
    except (EOFError, OSError) as exc:  # a peer's connection closed: it died
        raise StateLost(f"a peer worker of the fit was lost ({type(exc).__name__}: "
                        f"{exc})") from exc


@per_worker
def _peer_passes(keys, spec):
    """A sweep's colour-class passes with the workers exchanging their sums among themselves
    (the client is not in the rounds): each worker applies the last class's changes to its
    partitions' caches and gathers the next class's sums (:func:`_round`), sends them to every
    other worker and receives theirs, adds all partitions' sums in partition order and steps
    the class on its copy of the model with ``kernels.cd_rows.class_step``: every worker does
    the client's arithmetic of ``_fm_sweep._Sweeper._sweep`` on the same numbers in the same
    order, so all copies stay equal, bit for bit, to the model the client's rounds give. The
    last class's changes are applied at the end. ``spec`` (from ``_Sweeper._peer_spec``): the
    w0 shift, the step's settings, the passes, the worker of each partition. Returns, for the
    first key, ``(w, V, cpu seconds)`` of this worker's copy (w and V from the first worker
    only; None, None, 0 for the other keys)."""
    t0 = time.process_time()
    mesh = _SERVING.mesh
    if mesh is None:
        raise StateLost("this worker's connections to its peers are gone")
    me, peers, polls = mesh
    prefix = keys[0][0]
    model = _MODELS.get(prefix)
    if model is None:
        raise StateLost(f"the model copy of fit {prefix} is not on this worker; it was lost "
                        "with its worker")
    # This serving thread's own copy of the model, taken at each cache build (workers in
    # one process -- an in-process cluster -- share the registry's copy)
    own = getattr(_SERVING, "model", None)
    if own is None or own[0] is not model:
        own = _SERVING.model = (model, model.w.copy(), model.V.copy())
    _, w, V = own
    parts = [_lookup(k) for k in keys]
    owner = spec["owner"]
    where = {}  # partition -> (worker, its place among that worker's)
    for p, o in enumerate(owner):
        where[p] = (o, sum(1 for q in range(p) if owner[q] == o))
    held = {j: sum(1 for o in owner if o == j) for j in peers}
    loss = spec["loss"]
    ap = Apply(float(spec["shift"]), -1, 0, 1, 1, _F0, _F0, _F0, -1)
    spin_for = [SPIN]
    t = time.perf_counter()
    for slot, col, cur, nxt, fn, lam, mu, z0 in spec["passes"]:
        theta = w if slot == 0 else V
        step = Step(spec["group"], lam, mu, spec["alpha"], spec["curv"], spec["z"], z0,
                    spec["sample"], spec["relax"])
        ap = ap._replace(zero=nxt if fn >= 0 else -1)
        for c, feats in enumerate(model.classes):
            m = feats.shape[0]
            ga = Gather(c, slot, cur, theta[feats, col].astype(np.float64), loss)
            mine = np.empty((len(parts), 2, m))
            for i, part in enumerate(parts):
                G, H = _round(part, ap, ga)
                mine[i, 0] = G[:m]
                mine[i, 1] = H[:m]
            theirs = {j: np.empty((held[j], 2, m)) for j in peers}
            t1 = time.perf_counter()
            _exchange(peers, polls, mine, theirs, spin_for)
            t2 = time.perf_counter()
            o, i = where[0]
            GH = (mine if o == me else theirs[o])[i].copy()
            for p in range(1, len(owner)):
                o, i = where[p]
                GH += (mine if o == me else theirs[o])[i]
            prev = np.empty(m)
            delta = np.empty(m)
            class_step(feats, theta, col, GH[0], GH[1], step, prev, delta)
            vn = V[feats, fn].astype(np.float64) if fn >= 0 else _F0
            ap = Apply(0.0, c, slot, cur, nxt, prev, delta, vn, -1)
            if TRACE is not None:  # bench_distributed.py --part 5: where a round's time goes
                TRACE.append((t, t1, t2, time.perf_counter()))
            t = time.perf_counter()
    none = Gather(-1, 0, 1, _F0, loss)
    for part in parts:
        _round(part, ap, none)
    cpu = time.process_time() - t0
    if me > 0:  # the first worker brings the model back (all copies are equal)
        w = V = None
    return [(w, V, cpu)] + [(None, None, 0.0)] * (len(keys) - 1)
