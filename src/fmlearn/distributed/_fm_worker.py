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
    bias_sums,
    class_round,
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
        """``fn(key, *args)`` for every partition key, in order."""
        return [fn(key, *args) for key in keys]

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
        thread = threading.Thread(target=_serve, args=(listener,), daemon=True,
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


def nodelay(conn):
    """Set TCP_NODELAY on a :mod:`multiprocessing.connection` socket: it writes a long
    message's length and body in two calls, and Nagle's algorithm with the peer's delayed
    acknowledgement then holds the body's tail for ~40 ms (measured: 100 ms rounds instead
    of 2-5)."""
    import socket

    try:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
    except OSError:
        return
    with sock:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _serve(listener):
    """Serve one client's rounds until it closes the connection: each message is
    ``(fn, keys, args)``; the reply ``(True, results)`` or ``(False, exception)``."""
    try:
        conn = listener.accept()
    except Exception:  # noqa: BLE001 - a client that failed to authenticate or never came
        listener.close()
        return
    listener.close()
    nodelay(conn)
    with conn:
        while True:
            try:
                fn, keys, args = conn.recv()
            except (EOFError, OSError):
                return
            try:
                reply = (True, [fn(key, *args) for key in keys])
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
