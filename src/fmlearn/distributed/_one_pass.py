"""Data-parallel one-pass generalized FM on Dask (Lin and Ye 2016, Algorithm 1).

One step of the algorithm on a batch of n rows needs the batch only through sums over its
rows given the current state (:class:`fmlearn.solvers.one_pass.BatchRows`): the residual pass
(rss, h2 = sum rho_i, G = Z^T [rho o Z U, rho], q = (Z o Z)^T rho), the gram pass
Z^T (rho o Z B) for V = E(U_new) and the spectral initialisation, the safeguard's rss and, on
the first batch, the weighted moments of the features and targets. :class:`DaskBatchRows`
computes each of them as a map over the partitions of the batch (on the workers that hold
them; ``rho`` stays there between the two passes) and a reduce on the client in partition
order; :func:`fmlearn.solvers.one_pass.one_pass_step_rows` does the rest (d x O(k) work).
The estimator side is the public step of every one-pass estimator,
:meth:`fmlearn.gfm._one_pass.OnePassMixin.begin_one_pass` and
:class:`fmlearn.gfm._one_pass.OnePassRun`.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from dask import delayed

from .._base import progress
from ..gfm._one_pass import OnePassMixin
from ..solvers.one_pass import Batch, predict_batch, scale_from_variance, weighted_moments
from ._common import Runner, active_client, is_frame, prepare_block, row_arrays

__all__ = ["DaskBatchRows", "fit_one_pass"]


# -- work done on the workers, one partition at a time -----------------------------------------
def _prepare_part(X, y, sw, dtype, first_row):
    """The validated rows of one partition (see :func:`._common.prepare_block`)."""
    return prepare_block(X, y, sw, dtype, f"rows {first_row}..{first_row + X.shape[0] - 1}")


def _part_size(part):
    return part[0].shape[0], float(part[2].sum())


def _part_sums(part):
    """sum sw x, sum sw x^2 (float64, per feature), sum sw y, sum sw y^2."""
    X, y, sw = part
    if sp.issparse(X):
        s1 = np.asarray(X.T @ sw, dtype=np.float64).ravel()
        Xsq = X.astype(np.float64).copy()
        Xsq.data **= 2
        s2 = np.asarray(Xsq.T @ sw).ravel()
    else:
        Xd = np.asarray(X, dtype=np.float64)
        s1 = sw @ Xd
        s2 = sw @ (Xd * Xd)
    return s1, s2, float(sw @ y), float(sw @ (y * y))


def _part_centered(part, mean):
    X, _, sw = part
    return sw @ (np.asarray(X, dtype=np.float64) - mean) ** 2


def _part_moments(part, mean, scale):
    X, _, sw = part
    kappa, phi = weighted_moments(X, sw, mean, scale)
    W = float(sw.sum())
    return kappa * W, phi * W


def _part_residual(part, coords, args):
    X, y, sw = part
    mean, scale = coords
    U, V, w, b0, wsum, zero_diagonal, need_q = args
    st = Batch(X, mean, scale, 1).residual_pass(U, V, w, b0, y, sw, wsum, zero_diagonal, need_q)
    return (st["rss"], st["h2"], st["G"], st["q"]), st["rho"]


def _weight_counts(sw):
    sw = np.asarray(sw, dtype=np.float64)
    bad = not (np.all(np.isfinite(sw)) and np.all(sw >= 0))
    return int(np.count_nonzero(sw > 0)), bad


def _kept_position(sw, j):
    """Index in ``sw`` of its ``j``-th (0-based) positive entry."""
    return int(np.flatnonzero(np.asarray(sw) > 0)[j])


def _batch_bounds(n, sw, rows, runner):
    """Row bounds of the batches, cut as ``fit`` cuts them: on the rows of positive weight
    (``max(1, n_kept // rows)`` batches of about equal size), so that rows of weight 0 are
    absent, not merely weightless. Returns (bounds in X's rows, rows per batch)."""
    if sw is None:
        n_b = max(1, n // rows)
        bounds = np.linspace(0, n, n_b + 1).round().astype(np.int64)
        return bounds, np.diff(bounds)
    parts = sw.to_delayed().ravel()
    info = runner.compute([_task(_weight_counts)(p) for p in parts])
    if any(bad for _, bad in info):
        raise ValueError("sample_weight must be finite and non-negative")
    counts = np.array([c for c, _ in info], dtype=np.int64)
    kept = int(counts.sum())
    if kept == 0:
        raise ValueError("sample_weight sums to zero: there is nothing to fit")
    n_b = max(1, kept // rows)
    kbounds = np.linspace(0, kept, n_b + 1).round().astype(np.int64)
    before = np.concatenate([[0], np.cumsum(counts)])
    starts = np.concatenate([[0], np.cumsum(sw.chunks[0])]).astype(np.int64)
    # A batch starts at its first kept row: find the chunk holding it, then its place there.
    inner = kbounds[1:-1]
    chunk = np.searchsorted(before, inner, side="right") - 1
    offsets = runner.compute([_task(_kept_position)(parts[c], int(kb - before[c]))
                              for c, kb in zip(chunk.tolist(), inner.tolist(), strict=True)])
    bounds = np.concatenate([[0], starts[chunk] + np.asarray(offsets, dtype=np.int64), [n]])
    return bounds.astype(np.int64), np.diff(kbounds)


def _first(pair):
    return pair[0]


def _part_gram(part, residual, coords, B):
    mean, scale = coords
    return Batch(part[0], mean, scale, 1).gram_pass(B, residual[1])


def _part_rss(part, coords, state, zero_diagonal):
    X, y, sw = part
    mean, scale = coords
    r = y - predict_batch(Batch(X, mean, scale, 1), state, zero_diagonal)
    return float(np.dot(sw, r * r))


def _sum(parts):
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out


def _task(fn):
    # Keys from the arguments' tokens, not from uuid4 (slow where os.urandom is slow).
    return delayed(fn, pure=True)


def _const(obj):
    # One graph key for an argument shared by every partition's task (sent once per worker).
    return delayed(obj, pure=True, traverse=False)


# -- the batch as the solver sees it -------------------------------------------------------------
class DaskBatchRows:
    """One mini-batch spread over Dask partitions, with the interface of
    :class:`fmlearn.solvers.one_pass.BatchRows` (sums over rows = map over partitions on the
    workers + a sum on the client, in partition order).

    Parameters
    ----------
    parts : list of dask.delayed
        Each computes one partition ``(X, y, sw)`` already validated (see ``fit_one_pass``);
        they are persisted (computed and kept on the workers) for the life of the object.
    n_features : int
    client : distributed.Client or None
        None: ``dask.persist`` / ``dask.compute`` (the running client or the local scheduler).
    """

    def __init__(self, parts, n_features, client=None):
        self._run = Runner(client)
        # On a distributed client both calls return at once: the batch is loaded and sized on
        # the cluster while the client does other work (fit_one_pass prefetches the next batch).
        self._parts = self._run.persist(parts)
        self._sizes = self._run.start([_task(_part_size)(p) for p in self._parts])
        self.d = int(n_features)
        self._sums = None
        self._coords = None
        self.parts = None

    def _ready(self):
        if self.parts is None:
            sizes = self._run.result(self._sizes)
            # Partitions left empty (all weights 0) add nothing and would divide by zero.
            self.parts = [p for p, (n, _) in zip(self._parts, sizes, strict=True) if n > 0]
            self.n = int(sum(n for n, _ in sizes))
            self._wsum = float(sum(w for _, w in sizes))
            self._parts = self._sizes = None
            if self.n == 0 or self._wsum <= 0:
                raise ValueError("sample_weight sums to zero on a batch: nothing to fit")

    @property
    def wsum(self):
        self._ready()
        return self._wsum

    def _map(self, fn, *args):
        self._ready()
        return self._run.compute([_task(fn)(p, *args) for p in self.parts])

    def _first_sums(self):
        if self._sums is None:
            parts = self._map(_part_sums)
            self._sums = tuple(_sum([p[i] for p in parts]) for i in range(4))
        return self._sums

    # first batch
    def standardization(self, center):
        s1, s2, _, _ = self._first_sums()
        W = self.wsum
        mean = s1 / W
        if self._sparse():
            ex2 = s2 / W
            var = ex2 - mean * mean if center else ex2
        elif center:  # two passes, as in memory (no cancellation in E[x^2] - mean^2)
            var = _sum(self._map(_part_centered, _const(mean))) / W
        else:
            var = s2 / W
        return scale_from_variance(mean, var, center)

    def _sparse(self):
        self._ready()
        return bool(self._run.compute([_task(sp.issparse)(_task(_first)(self.parts[0]))])[0])

    def moments(self, mean, scale):
        parts = self._map(_part_moments, _const(mean), _const(scale))
        return (_sum([p[0] for p in parts]) / self.wsum, _sum([p[1] for p in parts]) / self.wsum)

    def target_moments(self):
        _, _, sy, syy = self._first_sums()
        return float(np.sqrt(syy / self.wsum)), float(sy / self.wsum)

    # every batch
    def bind(self, mean, scale, n_jobs):
        self._coords = _const((mean, scale))

    def residual_pass(self, U, V, w, b0, zero_diagonal, need_q):
        self._ready()
        args = _const((U, V, w, b0, self.wsum, zero_diagonal, need_q))
        res = self._run.persist([_task(_part_residual)(p, self._coords, args)
                                 for p in self.parts])
        small = self._run.compute([_task(_first)(r) for r in res])
        q = None if small[0][3] is None else _sum([s[3] for s in small])
        return {"rss": float(sum(s[0] for s in small)), "h2": float(sum(s[1] for s in small)),
                "G": _sum([s[2] for s in small]), "q": q, "rho": res}

    def gram_pass(self, B, rho):
        Bc = _const(np.asarray(B, dtype=np.float64))
        return _sum(self._run.compute([_task(_part_gram)(p, r, self._coords, Bc)
                                       for p, r in zip(self.parts, rho, strict=True)]))

    def rss(self, state, zero_diagonal):
        return float(sum(self._map(_part_rss, self._coords, _const(state), zero_diagonal)))


# -- the estimator driver ------------------------------------------------------------------------
def _head(X, y, n):
    """A few rows of X and y in memory, to validate the estimator's input like ``fit``."""
    m = min(n, 2)
    Xh, yh = X[:m].compute(), np.asarray(y[:m].compute())
    return Xh, yh


def _one_pass_estimator(estimator):
    if not isinstance(estimator, OnePassMixin):
        raise TypeError(f"fit_one_pass trains the one-pass models (GFMRegressor, IFMRegressor, "
                        f"SymmetricRankOneSensing, PhaseRetrieval), not "
                        f"{type(estimator).__name__}; stream other estimators with "
                        "fmlearn.stream.fit_stream(estimator, fmlearn.distributed.blocks(X, y))")


def fit_one_pass(estimator, X, y, sample_weight=None, *, batch_size=None, truth=None,
                 client=None):
    """One pass of the one-pass generalized FM over a Dask array, data-parallel.

    Equivalent to ``estimator.set_params(max_iter=1).fit(X, y)`` with X in memory (same cut
    into batches: ``max(1, n // batch_size)`` batches of about equal size, in row order, rows
    of weight 0 left out; same warm start rule), computed on a Dask cluster: for every batch,
    its partitions are persisted on the workers, each worker computes the partial sums of its
    rows, and the client adds them and updates the state (Lin and Ye 2016, Algorithm 1, see
    :class:`DaskBatchRows`). The iterates equal the in-memory ones up to the order of
    floating-point summation (tested to rtol 1e-10). The client holds O(kd) numbers (plus a
    d x d product on the first batch when d <= :data:`fmlearn.linalg.DENSE_MAX_DIM`, as in
    memory); on a distributed cluster the next batch is loaded while the current one is
    processed, so the cluster holds two batches (one with a local scheduler). The step waits
    for its slowest worker: spread every batch's partitions evenly over the workers.

    Parameters
    ----------
    estimator : GFMRegressor, IFMRegressor, SymmetricRankOneSensing or PhaseRetrieval
        Its parameters (n_factors, solver, standardize, fit_intercept, init, safeguard,
        random_state, warm_start, verbose) apply; ``max_iter`` and ``n_jobs`` are ignored
        (one pass; the parallelism is the cluster's). Fitted in place and returned.
    X : dask.array.Array of shape (n_samples, n_features) or Dask DataFrame
        Dense or scipy.sparse blocks; rows may be chunked in any way (a batch is a row range;
        its partitions are the row chunks it overlaps).
    y : Dask array / Series, or in-memory array, shape (n_samples,)
    sample_weight : same, optional
    batch_size : int, optional
        Rows per batch; default: the estimator's ``batch_size`` ("auto": 10 k d).
    truth : (w, M) or planted model, optional
        Records the recovery error after every batch in ``history_`` (as ``fit``).
    client : distributed.Client, optional
        Default: the running client if any, else Dask's local scheduler (e.g. "synchronous"
        or "threads" via ``dask.config.set``).

    Returns
    -------
    estimator

    Examples
    --------
    >>> import dask
    >>> import dask.array as da
    >>> import numpy as np
    >>> from fmlearn import GFMRegressor
    >>> from fmlearn.datasets import make_gfm
    >>> from fmlearn.distributed import fit_one_pass
    >>> X, y, _ = make_gfm(8000, 20, 2, random_state=0)
    >>> Xd, yd = da.from_array(X, chunks=(1500, 20)), da.from_array(y, chunks=1500)
    >>> est = GFMRegressor(2, batch_size=1000, random_state=0)
    >>> with dask.config.set(scheduler="synchronous"):
    ...     m = fit_one_pass(est, Xd, yd)
    >>> ref = GFMRegressor(2, batch_size=1000, max_iter=1, random_state=0).fit(X, y)
    >>> m.n_batches_, bool(np.allclose(m.working_V_, ref.working_V_, rtol=1e-10, atol=0))
    (8, True)
    """
    _one_pass_estimator(estimator)
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(
            batch_size, numbers.Integral) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}")
    frame = is_frame(X)
    Xh = yh = None
    if frame:  # validate on a pandas head so that feature names are recorded as by fit
        Xh = X.head(2)
        yh = np.asarray(y.head(2)) if is_frame(y) else np.asarray(y)[:Xh.shape[0]]
    X, y, sw = row_arrays(X, y, sample_weight)
    n, d = int(X.shape[0]), int(X.shape[1])
    if n == 0:
        raise ValueError("X has no rows")
    if Xh is None:
        Xh, yh = _head(X, y, n)
    # The estimator's public step: validation (on the head rows), the state to continue from,
    # the settings; then one run.step per batch and one commit at the end.
    run = estimator.begin_one_pass(Xh, yh, truth=truth)
    dtype = run.dtype
    rows = int(batch_size) if batch_size is not None else estimator.resolve_batch_size(d)
    client = active_client(client)
    bounds, sizes = _batch_bounds(n, sw, rows, Runner(client))
    n_b = len(sizes)
    run.warn_small(int(np.min(sizes)))
    run.batch_size = int(np.max(sizes))

    def batch_rows(a, b):
        xs = X[a:b].to_delayed().ravel()
        ys = y[a:b].to_delayed().ravel()
        ws = [None] * len(xs) if sw is None else sw[a:b].to_delayed().ravel()
        starts = a + np.concatenate([[0], np.cumsum(X[a:b].chunks[0])[:-1]]).astype(int)
        parts = [_task(_prepare_part)(xp, yp, wp, dtype, int(s))
                 for xp, yp, wp, s in zip(xs, ys, ws, starts, strict=True)]
        return DaskBatchRows(parts, d, client)

    ranges = list(zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True))
    ahead = None
    run.bar = progress(estimator.verbose, n_b, f"{type(estimator).__name__}[dask]")
    with run.bar:
        for i, (a, b) in enumerate(ranges):
            rows_b = ahead if ahead is not None else batch_rows(a, b)
            # On a cluster, load the next batch while this one is processed (two batches in
            # cluster memory); a local scheduler would only load it early, so it does not.
            ahead = batch_rows(*ranges[i + 1]) if client is not None and i + 1 < n_b else None
            run.step(rows_b)
            del rows_b  # release the batch on the cluster
    return run.commit(dtype_=dtype.name, batch_size_=run.batch_size, n_iter_=run.n_steps,
                      n_passes_=1)
