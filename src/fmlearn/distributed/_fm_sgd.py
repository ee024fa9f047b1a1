"""Data-parallel SGD for the classic FM on a Dask cluster: iterative
parameter mixing (McDonald, Hall & Mann 2010; Zinkevich et al. 2010), run by
:func:`fmlearn.distributed.fit` for ``solver="sgd"``.

An epoch: the client sends the current model (w0, w, V: O(d k) numbers) to the partitions;
each partition runs one epoch of the compiled SGD kernel (:func:`fmlearn.solvers.sgd.
sgd_solver` with one epoch, :func:`fmlearn.kernels.sgd.sgd_epoch`: the in-memory solver's
code) over its own rows, from that model, on the worker that holds them, and returns its
model; the client averages the models weighted by the partitions' total sample weight (their
number of rows when unweighted), in partition order. Rows never leave the workers.

This is an *approximation* of sequential SGD, unlike the exact distributed ALS and MCMC: each
partition's epoch sees only its own rows, and the average of P models that each took a step
from the same start is not the model P steps in sequence would give. Its accuracy cost on
MovieLens-100K is measured in ``docs/distributed.md`` (``benchmarks/bench_distributed_sgd.py``).

What is deterministic. The result depends on ``random_state`` and on the partitioning (which
rows are in which partition, and the partitions' order), not on the number of workers, on
which worker runs what, on lost workers or on a resumed checkpoint. Partition p's epoch
starting at step t visits its rows (merged and in canonical order, as the in-memory fit keeps
them) in the block shuffle of ``default_rng([seed_p, t])`` with ``seed_p = seed`` for the
first non-empty partition and ``SeedSequence([seed, p])`` for the p-th after it (empty
partitions, and partitions whose rows all have weight 0, take no part). Every partition
starts an epoch at the same step count t (the step-size schedule's clock); the next epoch
starts at t plus the largest number of steps a partition took. With one partition (or all
rows in one partition and the others empty) the fit is the in-memory SGD fit (tested to
1e-10; it is the same arithmetic). The estimator's ``average_epochs`` applies to the mixed
models at the end of the epochs, as in memory; a fit resumed from a checkpoint written inside
that tail averages the epochs after the resume only (the earlier ones are not in the
checkpoint)."""

import copy
import time
import uuid

import numpy as np

from .._checkpoint import Checkpointer
from ..exceptions import DivergenceError
from ..solvers._fm_common import FMState
from ..solvers.sgd import TailAverage, sgd_solver
from ._fm_sweep import MAX_RESTARTS, _lost_errors

__all__ = ["fit_sgd"]


def _part_seed(seed, p):
    if p == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed), int(p)]).generate_state(1)[0])


def _sgd_part(rows, w0, w, V, t, settings, seed):
    """One SGD epoch of a partition (on its worker) from the model ``(w0, w, V)`` at step
    ``t``: ``(w0, w, V, steps, diverged, cpu_seconds)``."""
    cpu = time.process_time()
    state = FMState(float(w0), np.array(w, copy=True), np.array(V, copy=True))
    state, t_end, _, info = sgd_solver((rows.indptr, rows.indices, rows.data), rows.y, rows.sw,
                                       state, int(t), settings, seed)
    return (float(state.w0), state.w, state.V, int(t_end - t), info["diverged"],
            time.process_time() - cpu)


class _Epochs:
    """The client's part: the model, the step clock, one epoch of every partition, the
    weighted average, restarts after a lost worker."""

    def __init__(self, client, parts, weights, state, settings, seed, t):
        self.client = client
        self.parts = parts
        self.live = [p for p, w in enumerate(weights) if w > 0]
        total = float(sum(weights))
        self.share = {p: weights[p] / total for p in self.live}
        self.state = state
        self.settings = settings
        self.seed = seed
        self.t = t
        self.prefix = uuid.uuid4().hex[:12]
        self.rounds = self.restarts = 0
        self.sent = 0
        self.t_wait = self.t_compute = self.t_client = 0.0

    def _submit(self, e):
        st = self.state
        args = (st.w0, st.w, st.V, self.t, self.settings)
        if self.client is None:
            return [_sgd_part(self.parts[p], *args, _part_seed(self.seed, r))
                    for r, p in enumerate(self.live)]
        w, V = self.client.scatter([st.w, st.V], broadcast=True, hash=False)
        futs = [self.client.submit(_sgd_part, self.parts[p], st.w0, w, V, self.t,
                                   self.settings, _part_seed(self.seed, r),
                                   key=f"fd-sgd-{self.prefix}-{e}-{p}-{self.restarts}",
                                   pure=False)
                for r, p in enumerate(self.live)]
        return self.client.gather(futs)

    def epoch(self, e):
        """Epoch ``e`` of every partition and the average; retried after a lost worker (the
        same inputs give the same epoch)."""
        lost = _lost_errors()
        while True:
            t0 = time.perf_counter()
            try:
                out = self._submit(e)
                break
            except lost:
                self.restarts += 1
                if self.restarts > MAX_RESTARTS * max(1, self.settings.n_iter):
                    raise
        self.t_wait += time.perf_counter() - t0
        self.rounds += 1
        self.sent += (self.state.w.nbytes + self.state.V.nbytes) * len(self.live)
        self.t_compute += max(o[-1] for o in out)
        t0 = time.perf_counter()
        for p, o in zip(self.live, out, strict=True):
            if o[4]:
                raise DivergenceError(f"epoch {e + 1}, partition {p} (its rows' own epoch): "
                                      f"{o[4]}; the estimator keeps its previous state")
        self._mix(out)
        self.t_client += time.perf_counter() - t0
        if not self.state.is_finite():
            raise DivergenceError(f"SGD produced non-finite parameters in epoch {e + 1}; lower "
                                  "learning_rate or raise the regularization. The estimator "
                                  "keeps its previous state")

    def _mix(self, out):
        st = self.state
        if len(out) == 1:  # one partition: its model, as the in-memory fit leaves it
            st.w0, st.w[:], st.V[:] = out[0][0], out[0][1], out[0][2]
        else:
            w0, w, V = 0.0, np.zeros(st.w.shape), np.zeros(st.V.shape)
            for p, o in zip(self.live, out, strict=True):
                a = self.share[p]
                w0 += a * o[0]
                w += a * o[1]
                V += a * o[2]
            st.w0, st.w[:], st.V[:] = float(w0), w, V
        self.t += max(o[3] for o in out)


def _snapshot(plan, est, run, n_done):
    snap = copy.copy(est)
    plan.commit(snap, run.state.copy(), int(n_done), t=int(run.t))
    return snap


def fit_sgd(est, started, client, checkpoint, checkpoint_every):
    """:func:`fmlearn.distributed.fit` for ``solver="sgd"`` (see the module docstring).

    ``started`` is what ``_fm._start`` returned for the call (the partitions loaded with their
    duplicate rows merged when ``shuffle``, the plan of mode "epochs": one epoch per round,
    from the steps ``plan.t`` of a warm start)."""
    parts, _, plan, fingerprint, weights = started
    state, seed, t = plan.state, plan.seed, plan.t
    ck = Checkpointer(checkpoint, checkpoint_every, "fd.fit/sgd", est, fingerprint)
    start = 0
    found = ck.resume()
    if found is not None:
        saved, info = found
        state = FMState(float(saved.w0_), saved.w_.astype(state.w.dtype),
                        saved.V_.astype(state.V.dtype))
        seed, t, start = int(info["progress"]["seed"]), int(info["progress"]["t"]), info["step"]
    run = _Epochs(client, parts, weights, state, plan.sgd, seed, t)
    history = {"metric": plan.metric, "train": [], "val": [], "iter_time": []}
    tail = TailAverage(plan.n_iter, plan.average_epochs)
    for e in range(start, plan.n_iter):
        clock = time.perf_counter()
        run.epoch(e)
        tail.add(e, run.state)
        history["iter_time"].append(time.perf_counter() - clock)
        if ck.due(e + 1, plan.n_iter):
            ck.write(_snapshot(plan, est, run, e + 1), e + 1, plan.n_iter,
                     {"seed": seed, "t": run.t})
    ck.finish()
    tail.store(run.state)
    plan.commit(est, run.state, int(plan.n_iter), t=int(run.t), history=history)
    est.distributed_ = {"rounds": run.rounds, "bytes_sent": int(run.sent),
                        "seconds_rounds": run.t_wait, "seconds_rounds_compute": run.t_compute,
                        "seconds_client": run.t_client, "restarts": run.restarts,
                        "resumed_at": start}
    return est
