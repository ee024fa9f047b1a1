"""Relation blocks (Rendle 2013) in the Dask backend: exact data-parallel ALS and MCMC of the
classic FM when the row-level features are partitioned over the cluster and the blocks fit on
every worker (``fmlearn.distributed.fit(..., relation_blocks=[(indices, X_block), ...])``).

The sweep is :mod:`fmlearn.distributed._fm`'s -- one round per colour class of the row-level
features, the client stepping each class from the partitions' sums -- followed, in every pass,
by the blocks in index order, as in memory (:mod:`fmlearn.kernels.cd_relation`): a block's
features need the samples only through four sums per block row (the derivatives, the rest of
the factor sums qm, qm^2 and their product), which each partition computes over its samples
(:func:`~fmlearn.kernels.cd_relation.partition_block_round`) and the client adds in partition
order; the client then steps the block's features from the block rows' caches and sends back
the block rows' changes, which the next round writes to each sample's row state before
gathering the next block's sums. A round moves O(block rows) numbers each way per partition,
never a sample. The blocks' matrices are sent to every worker once (the row states are
rebuilt from the model every ``REFRESH_EVERY`` sweeps, which needs each block row's share of
the prediction); each partition holds its samples' row-level features, targets, weights and
block rows.

ALS and the MCMC regression chain equal the in-memory fit on :class:`fmlearn.RelationData` up
to the order of floating-point summation; the probit chain draws its latent targets on the
workers, as for a matrix. Checkpoints and SGD are not offered with relation blocks.
"""

import uuid

import numpy as np
from dask import delayed
from sklearn.base import is_classifier

from .._base import failure_atomic
from .._data import to_csr
from .._plan import DataSummary
from ..fm._plan import ClassicFMPlan
from ..fm._relation import check_warm_layout
from ..kernels.cd import Columns, Config, _Pass
from ..kernels.cd_relation import (
    N_CACHE,
    Relations,
    block_changes,
    client_block_step,
    partition_block_round,
    prepare_block,
    relation_predict,
)
from ..kernels.cd_rows import Gather, class_round, class_rows
from ..kernels.losses import SQUARED
from ..solvers.relation import RelationRows, _stack
from ._common import _aligned, active_client, part_weights, row_arrays
from ._fm import (
    _check_estimator,
    _classes,
    _Cluster,
    _color_task,
    _labels,
    _load_part,
    _pairs,
    _persist,
    _run,
)
from ._fm_sweep import _no_apply, _Sweeper
from ._fm_worker import _LOCK, _REGISTRY, _here, _lookup, _Part

__all__ = ["fit_relation"]


# -- data ----------------------------------------------------------------------------------------
def _check_blocks(relation_blocks, dtype):
    """The blocks' matrices (canonical CSR of ``dtype``, finite) and their widths."""
    from ..relation import _finite, _numeric

    if not isinstance(relation_blocks, (list, tuple)) or not relation_blocks:
        raise ValueError("relation_blocks must be a non-empty list of (indices, X_block) pairs")
    out = []
    for r, pair in enumerate(relation_blocks):
        try:
            idx, B = pair
        except (TypeError, ValueError):
            raise ValueError(f"relation_blocks[{r}] must be a pair (indices, X_block)") from None
        B = to_csr(_numeric(B, f"relation_blocks[{r}] X_block"), dtype)
        _finite(B, f"relation_blocks[{r}] X_block")
        out.append((idx, B))
    return out


def _load_rel_part(xb, yb, wb, idx_blocks, p, d0, dtype, classes, n_block_rows):
    """A partition's validated samples: :func:`fmlearn.distributed._fm._load_part`'s rows and
    each block's indices (checked against the block's rows), rows of weight 0 dropped from
    both."""
    where = f"partition {p}"
    n = xb.shape[0]
    sw = part_weights(wb, n, where)
    keep = sw > 0
    ix = []
    for r, (ib, R) in enumerate(zip(idx_blocks, n_block_rows, strict=True)):
        i = np.asarray(ib).ravel()
        if i.shape[0] != n:
            raise ValueError(f"relation_blocks[{r}] indices have {i.shape[0]} entries in "
                             f"{where}, which has {n} rows")
        if i.size and not np.issubdtype(i.dtype, np.integer):
            raise ValueError(f"relation_blocks[{r}] indices must be integers ({where})")
        if i.size and (i.min() < 0 or i.max() >= R):
            bad = int(np.flatnonzero((i < 0) | (i >= R))[0])
            raise ValueError(f"relation_blocks[{r}] ({where}): row {bad} has block index "
                             f"{int(i[bad])}, outside [0, {R})")
        ix.append(np.ascontiguousarray(i[keep], dtype=np.uint32))
    rows = _load_part(xb, yb, wb, p, d0, dtype, classes)
    return rows, ix


def _scan_rel(part, d0, n_block_rows):
    """The row-level :class:`~fmlearn._plan.DataSummary` of a partition and each block's sum
    of weights per block row."""
    rows, ix = part
    summary = DataSummary.of_csr(rows.indptr, rows.data, d0, rows.y, rows.sw)
    wsum = [np.bincount(i, weights=rows.sw, minlength=R)
            for i, R in zip(ix, n_block_rows, strict=True)]
    return summary, wsum


def _pairs_rel(part, d0):
    return _pairs(part[0], d0)


# -- the worker side ---------------------------------------------------------------------------
class _RelPart(_Part):
    """A partition's row state (:class:`fmlearn.distributed._fm_worker._Part`) with its
    samples' rows of every block (local to the block)."""

    def __init__(self, base, ix):
        super().__init__(base.rows, base.crows, base.pos, base.E, base.target, base.G, base.H)
        self.ix = ix


def _rel_build(key, part, blocks, w0, w, V, mode, color, pos):
    """Build a partition's row state from the model, the blocks' matrices stacked
    (``blocks``: row offsets and CSR arrays), and register it."""
    rows, ix = part
    boff, bptr, bidx, bval = blocks
    gix = np.empty((len(ix), rows.indptr.shape[0] - 1), dtype=np.uint32)
    for r, i in enumerate(ix):
        gix[r] = i.astype(np.int64) + boff[r]
    rr = RelationRows(rows.indptr, rows.indices, rows.data, gix, boff, bptr, bidx, bval)
    pred = relation_predict(rr, float(w0), w, V, np.empty(gix.shape[1]))
    target = rows.y if mode == "squared" else np.zeros(pred.shape[0])
    E = np.zeros((pred.shape[0], 3))
    E[:, 0] = pred - target
    m = max(1, int(w.shape[0]))
    base = _Part(rows, class_rows(rows.indptr, rows.indices, color), pos, E, target,
                 np.empty(m), np.empty(m))
    with _LOCK:
        _REGISTRY[key] = _RelPart(base, ix)
    return _here()


_E0 = np.zeros(0)
_IX0 = np.zeros(0, dtype=np.uint32)
_OUT0 = np.zeros((0, 4))


def _rel_round(key, ap, scatter, gather, loss):
    """Apply ``ap`` (the last colour class's changes), then the changes of block
    ``scatter = (r, slot, cur, nxt, fn, dy, q0, qb, qn)`` (None: none), then return the
    partition's share of the caches of block ``gather = (r, slot, cur, qb)`` (None: an empty
    array) and the task's CPU seconds."""
    import time

    t0 = time.process_time()
    part = _lookup(key)
    if not isinstance(part, _RelPart):
        raise TypeError("a relation round on a partition without blocks")
    none = Gather(-1, 0, 1, part.G[:0], SQUARED)
    class_round(part.rows, part.crows, part.pos, part.E, ap, none, part.G[:0], part.H[:0])
    ix_out, ix_in, out, qb_in = _IX0, _IX0, _OUT0, _E0
    slot, cur, nxt, fn = 0, 1, 1, -1
    dy = q0 = qb = qn = _E0
    if scatter is not None:
        r, slot, cur, nxt, fn, dy, q0, qb, qn = scatter
        ix_out = part.ix[r]
    if gather is not None:
        r2, slot2, cur2, qb_in = gather
        ix_in = part.ix[r2]
        out = np.empty((qb_in.shape[0], 4))
        if scatter is None:
            slot, cur = slot2, cur2
    rows = part.rows
    partition_block_round(ix_out, ix_in, part.E, rows.y, rows.sw, rows.unit, loss, slot, cur,
                          nxt, fn, dy, q0, qb, qn, qb_in, out)
    return out, time.process_time() - t0


# -- the client side -------------------------------------------------------------------------
class _RelCluster(_Cluster):
    """:class:`fmlearn.distributed._fm._Cluster` whose partitions carry block rows: their row
    states are built with the blocks' shares of the prediction."""

    def __init__(self, client, parts, prefix, color, pos, blocks):
        super().__init__(client, parts, prefix, color, pos)
        self.blocks = blocks

    def build(self, state, mode):
        w0, w, V = float(state.w0), state.w, state.V
        if self.client is None:
            out = [_rel_build(self._key(p), r, self.blocks, w0, w, V, mode, self.color,
                              self.pos) for p, r in enumerate(self.rows)]
        else:
            sb, sw, sV, sc, sp_ = self.client.scatter(
                [self.blocks, w, V, self.color, self.pos], broadcast=True, hash=False)
            futs = [self.client.submit(_rel_build, self._key(p), r, sb, w0, sw, sV, mode, sc,
                                       sp_, key=f"fd-{self.prefix}-rbuild-{p}-"
                                                f"{uuid.uuid4().hex}", pure=False)
                    for p, r in enumerate(self.rows)]
            out = self.client.gather(futs)
        self.where = list(out)


class _RelSweeper(_Sweeper):
    """The sweep of :class:`fmlearn.distributed._fm_sweep._Sweeper` with every block's
    features after each pass's colour classes (see the module docstring)."""

    compact = False  # the workers' row states carry no model copy (_rel_build)

    def __init__(self, plan, color, pos, classes_of, rel):
        super().__init__(plan, color, pos, classes_of)
        self.rel = rel  # the client's Relations record: blocks by feature, caches, qn

    def _after_pass(self, cluster, ap, slot, theta, col, cur, nxt, fn, step):
        import time

        rel = self.rel
        B = rel.boff.shape[0] - 1
        if B == 0:
            return ap
        cfg = Config(self.loss, float(step.curv), bool(step.sample), False, False, 0.0, 1.0,
                     1.0, 1.0, 0.0, float(step.relax))
        pa = _Pass(slot, theta, col, cur, nxt, fn, self.state.V, step.lam, step.mu, step.z,
                   step.z0, float(step.alpha))
        scatter = None
        for r in range(B):
            t0 = time.perf_counter()
            qb = prepare_block(rel, r, pa)
            self.t_client += time.perf_counter() - t0
            sums = self._wait(cluster, _rel_round, ap, scatter, (r, slot, cur, qb), self.loss)
            ap = _no_apply()
            t0 = time.perf_counter()
            total = sums[0][0].copy()
            for s, _ in sums[1:]:
                total += s
            client_block_step(rel, r, pa, self.group, cfg, total)
            scatter = (r, slot, cur, nxt, fn, *block_changes(rel, r))
            self.t_client += time.perf_counter() - t0
        self._wait(cluster, _rel_round, ap, scatter, None, self.loss)
        return _no_apply()


def _client_relations(blocks, d0, dtype, wsum):
    """The client's :data:`~fmlearn.kernels.cd_relation.Relations` record: the stacked blocks
    by feature, the block rows' weights, caches and next factor's sums (the samples stay on
    the workers: ``rows`` and ``ix`` are empty)."""
    boff, foff, bptr, bidx, bval, cptr, cidx, cval = _stack(blocks, d0, dtype)
    R = max(1, int(boff[-1]))
    i32 = np.zeros(0, dtype=np.int32)
    rows = Columns(i32, i32, np.zeros(0, dtype=dtype), np.zeros(0), np.zeros(0), True)
    w = np.zeros(R)
    if wsum.shape[0]:
        w[:wsum.shape[0]] = wsum
    rel = Relations(rows, np.zeros(0), True, np.zeros((len(blocks), 0), dtype=np.uint32),
                    np.zeros(len(blocks), dtype=np.bool_), boff, foff, bptr, bidx, bval, cptr,
                    cidx, cval, w, np.zeros((R, N_CACHE)), np.zeros(R))
    return rel, (boff, bptr, bidx, bval)


@failure_atomic
def fit_relation(estimator, X, y, sample_weight, relation_blocks, client=None):
    """:func:`fmlearn.distributed.fit` with relation blocks (see the module docstring):
    ``X`` a Dask array of the row-level features, ``relation_blocks`` a list of
    ``(indices, X_block)``: the block row of every sample (a Dask array partitioned like X,
    or an in-memory array) and the block's matrix (in memory, sent to every worker)."""
    _check_estimator(estimator)
    est = estimator
    if est.solver == "sgd":
        raise ValueError("fmlearn.distributed.fit with relation_blocks runs solver='als' or "
                         "'mcmc' (SGD would expand every sample)")
    client = active_client(client)
    X, y, sw = row_arrays(X, y, sample_weight, need_lengths=False)
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    blocks = _check_blocks(relation_blocks, dtype)
    idx = [_aligned(i, X, f"relation_blocks[{r}] indices", False)
           for r, (i, _) in enumerate(blocks)]
    d0 = int(X.shape[1])
    n_block_rows = [int(B.shape[0]) for _, B in blocks]
    classifier = is_classifier(est)
    xs, ys = X.to_delayed().ravel(), y.to_delayed().ravel()
    classes = None
    if classifier:
        labels = np.unique(np.concatenate(_run(client, [delayed(_labels, pure=True)(yb)
                                                        for yb in ys])))
        if labels.shape[0] != 2:
            raise ValueError(f"A classifier needs samples of exactly two classes; y has "
                             f"{labels.shape[0]} ({labels.tolist()[:10]})")
        classes = labels
    ws = [None] * len(xs) if sw is None else sw.to_delayed().ravel()
    iss = [i.to_delayed().ravel() for i in idx]
    load = delayed(_load_rel_part, pure=True)
    parts = [load(xb, yb, wb, [ib[p] for ib in iss], p, d0, dtype, classes, n_block_rows)
             for p, (xb, yb, wb) in enumerate(zip(xs, ys, ws, strict=True))]
    parts = _persist(client, parts)
    coloring = delayed(_color_task, pure=True)([delayed(_pairs_rel, pure=True)(p, d0)
                                                 for p in parts], d0)
    *scans, color = _run(client, [delayed(_scan_rel, pure=True)(p, d0, n_block_rows)
                                  for p in parts] + [coloring])
    if sum(s[0].n_samples for s in scans) == 0:
        raise ValueError("there is nothing to fit: no row (of positive weight) in any "
                         "partition")
    d = d0 + sum(B.shape[1] for _, B in blocks)
    check_warm_layout(est, [d0] + [int(B.shape[1]) for _, B in blocks])
    wsum = [sum(s[1][r] for s in scans) for r in range(len(blocks))]
    rowsum = [np.asarray(B.multiply(B).sum(axis=1), dtype=np.float64).ravel() for _, B in blocks]
    rownnz = [np.diff(B.indptr).astype(np.float64) for _, B in blocks]
    base = DataSummary.merge([s[0] for s in scans], d0, dtype)
    summary = DataSummary(base.n_samples, d, base.dtype, base.weight, base.y_min, base.y_max,
                          base.sum_sq + sum(float(w @ q) for w, q in zip(wsum, rowsum,
                                                                           strict=True)),
                          base.n_nonzero + sum(float(w @ q) for w, q in zip(wsum, rownnz,
                                                                              strict=True)))
    plan = ClassicFMPlan.build(est, summary, mode="fit")
    est.n_features_in_ = d
    est.__dict__.pop("feature_names_in_", None)
    est.relation_features_ = [d0] + [int(B.shape[1]) for _, B in blocks]
    if classifier:
        est.classes_ = classes
    color = np.ascontiguousarray(color, dtype=np.int64)
    pos, classes_of = _classes(color)
    rel, stacked = _client_relations([(None, B) for _, B in blocks], d0, dtype,
                                     np.concatenate(wsum) if wsum else np.zeros(0))
    sweeper = _RelSweeper(plan, color, pos, classes_of, rel)
    cluster = _RelCluster(client, parts, uuid.uuid4().hex[:12], color, pos, stacked)
    history = {"metric": plan.metric, "train": [], "val": [], "iter_time": [], "train_avg": [],
               "val_avg": []}

    class _NoCheckpoint:
        enabled = False
        every = 0

        def due(self, *a):
            return False

    try:
        sweeper.run(cluster, 0, _NoCheckpoint(), history, est)
    finally:
        cluster.close()
    sweeper.store(est, history)
    est.distributed_ = {"rounds": cluster.rounds, "bytes_sent": int(cluster.sent),
                        "seconds_rounds": sweeper.t_wait,
                        "seconds_rounds_compute": sweeper.t_compute,
                        "seconds_client": sweeper.t_client, "restarts": sweeper.restarts,
                        "resumed_at": 0}
    return est

