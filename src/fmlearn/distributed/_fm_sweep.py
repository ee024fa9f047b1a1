"""The client's part of the distributed classic FM sweeps (:mod:`fmlearn.distributed._fm`):
the model, the MCMC chain and the random numbers, one round per colour class, and the restart
of a sweep when a worker is lost."""

import copy
import time

import numpy as np

from ..exceptions import DivergenceError
from ..fm._mcmc import fitted_chain
from ..kernels.cd import Config, _step, draw_group_hyper, gamma_shapes, n_normals
from ..kernels.cd_rows import Apply, Gather, Step, class_step
from ..kernels.losses import SMOOTHNESS, SQUARED
from ..solvers._fm_common import group_index
from ..solvers.als import fixed_prior
from ..solvers.mcmc import Chain, _reserve, record_sweep, sweep_config
from ._fm_worker import (
    StateLost,
    _bias_round,
    _class_round,
    _compact_bias,
    _compact_class,
    _peer_passes,
)

# Sweeps between rebuilds of the row caches from the model (as ALSSettings / MCMCSettings).
REFRESH_EVERY = 10
# Times a sweep is restarted after lost workers before the fit gives up.
MAX_RESTARTS = 3


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


class _Sweeper:
    """The client's part of the sweeps: the model, the chain, the random numbers.

    With ``compact`` (the plain sweep) a round sends only what changed: the new values of
    the class stepped last (each worker keeps a copy of the model, reset by every cache
    build, and derives the previous values, the changes, the next factor's values and the
    gathered class's values from it: ``_fm_worker._round_args``), 8 m bytes instead of the
    32 m of the full round's arrays (m features in the class); the sums come back as one
    (2, m) array per partition. The rounds are the same bit for bit.

    With ``compact`` and the workers connected to one another (``_Cluster.peer``), a sweep's
    class rounds run between the workers (:meth:`_peer_passes`): the client runs the first
    round (w0, the noise precision, the hyper-parameters), then sends each worker one message
    with the sweep's settings and random numbers and receives the model at the end."""

    compact = True

    def __init__(self, plan, color, pos, classes_of):
        self.plan = plan
        self.mcmc = plan.solver == "mcmc"
        self.probit = plan.probit
        self.state = plan.state
        self.color = color
        self.pos = pos
        self.classes_of = classes_of
        self.seed = plan.seed
        self.sw_total = plan.summary.weight
        groups = plan.groups
        d, k = self.state.V.shape
        self.group, self.size = groups if groups is not None else group_index(None, d)
        self.chain = None
        if self.mcmc:
            s = self.settings = plan.mcmc
            self._use_chain(plan.chain)
            self.loss = SQUARED
            self.mode = "probit" if self.probit else "squared"
            self.cfg = Config(SQUARED, 1.0, True, True, not self.probit, float(s.reg_bias),
                              s.alpha_0, s.beta_0, s.gamma_0, s.mu_0, float(s.relax))
        else:
            s = self.settings = plan.als
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
        self.t_compute = 0.0  # of which the slowest worker's kernel CPU seconds
        self.t_client = 0.0  # seconds of the client's own steps
        self.rid = 0  # rounds sent (a compact round's id)

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
            self._use_chain(fitted_chain(saved))
        self.n_done = int(info["step"])
        return self.n_done

    def snapshot_estimator(self, est):
        """A copy of ``est`` as a fit of the sweeps done so far leaves it."""
        snap = copy.copy(est)
        st = self.state.copy()
        chain = None
        if self.mcmc:
            c = self.chain
            chain = Chain(c.alpha, c.lambda_w.copy(), c.mu_w.copy(), c.lambda_v.copy(),
                          c.mu_v.copy(), c.t, c.stride,
                          None if c.samples is None else tuple(a[:c.n_samples].copy()
                                                               for a in c.samples),
                          c.n_samples, c.settled_at, list(c.scales))
        self.plan.commit(snap, st, self.n_done, chain=chain)
        return snap

    def store(self, est, history):
        """Commit the fit to ``est`` (the model, the chain, ``history``)."""
        self.plan.commit(est, self.state, self.n_done, chain=self.chain if self.mcmc else None,
                         history=history)

    # -- sweeps ------------------------------------------------------------------------------
    def run(self, cluster, start, ck, history, est):
        n_iter = self.plan.n_iter
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
                    self.pending = (_no_apply(), None)
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
                record_sweep(self.chain, self.state, self.settings)
            if not (ok and self.state.is_finite()):
                raise DivergenceError(f"{self.plan.solver.upper()} produced non-finite values "
                                      f"at sweep {self.n_done}; increase the regularization "
                                      "or rescale the targets. The estimator keeps its "
                                      "previous state")
            history["iter_time"].append(time.perf_counter() - clock)
            if ck.due(self.n_done, n_iter):
                ck.write(self.snapshot_estimator(est), self.n_done, n_iter, {"seed": self.seed})

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

    def _wait(self, cluster, fn, *args, count=True):
        t0 = time.perf_counter()
        out = cluster.map(fn, *args, count=count)
        self.t_wait += time.perf_counter() - t0
        # the slowest worker's kernel CPU seconds (its partitions' tasks run one after the
        # other; without workers: every partition's)
        per = {}
        for where, o in zip(cluster.where, out, strict=True):
            per[where] = per.get(where, 0.0) + o[-1]
        self.t_compute += max(per.values(), default=0.0)
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
        cfg = sweep_config(self.cfg, self.chain, self.settings) if sample else self.cfg
        z = np.zeros(1)
        latent = None
        if sample:
            # The calls of mcmc_solver, in its order: the chain's random numbers are the same.
            rs = np.random.default_rng([self.seed, self.chain.t])
            z = rs.standard_normal(n_normals(d, k, n_groups))
            g = rs.standard_gamma(gamma_shapes(d, k, self.size, cfg, self.sw_total))
            if self.probit:
                latent = [self.seed, self.chain.t, 1]
        if self.compact:
            self.rid += 1
            ap0, chg0 = pending
            sums = self._wait(cluster, _compact_bias, self.rid, _head(ap0), chg0, self.loss,
                              latent)
        else:
            sums = self._wait(cluster, _bias_round, pending[0], self.loss, latent)
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
                            z[0] if sample else 0.0, sample, cfg.relax))
        shift = st.w0 - w0
        zi = 1
        theta_w = st.w.reshape((d, 1))
        if sample:
            draw_group_hyper(theta_w[:, 0], self.group, self.size, self.lam_w, self.mu_w,
                             g[gi:gi + n_groups], z[zi:zi + n_groups], cfg)
            gi += n_groups
        zi += n_groups
        passes = [(0, theta_w, 0, 1, 1, 0 if k > 0 else -1, self.lam_w, self.mu_w, zi)]
        zi += d
        for f in range(k):
            if sample:
                draw_group_hyper(st.V[:, f], self.group, self.size, self.lam_v[f], self.mu_v[f],
                                 g[gi:gi + n_groups], z[zi:zi + n_groups], cfg)
                gi += n_groups
            zi += n_groups
        for f in range(k):
            cur = 1 + f % 2
            passes.append((1, st.V, f, cur, 3 - cur, f + 1 if f + 1 < k else -1,
                           self.lam_v[f], self.mu_v[f], zi))
            zi += d
        self.t_client += time.perf_counter() - t0
        if self.compact and cluster.peer and type(self)._after_pass is _Sweeper._after_pass:
            self._peer_passes(cluster, shift, alpha, cfg, z, sample, passes)
            if sample:
                self.chain.t += 1
            return (_no_apply(), None), ok
        ap = Apply(float(shift), -1, 0, 1, 1, _E, _E, _E, -1)
        chg = None  # compact: (c, slot, col, fn, new values) of ap's class
        compact = self.compact
        for slot, theta, col, cur, nxt, fn, lam, mu, z0 in passes:
            step = Step(self.group, lam, mu, float(alpha), cfg.curv, z, z0, sample, cfg.relax)
            # The next factor's sums start from 0 (set after the last change of the previous
            # pass, which reads the column this pass fills).
            ap = ap._replace(zero=nxt if fn >= 0 else -1)
            for c, feats in enumerate(self.classes_of):
                m = feats.shape[0]
                if compact:
                    self.rid += 1
                    sums = self._wait(cluster, _compact_class, self.rid, _head(ap), chg,
                                      (c, slot, col, cur), self.loss)
                    t0 = time.perf_counter()
                    GH = sums[0][0].copy()
                    for gh, _ in sums[1:]:
                        GH += gh
                    G, H = GH[0], GH[1]
                else:
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
                if compact:
                    chg = (c, slot, col, fn, np.ascontiguousarray(theta[feats, col]))
                    ap = Apply(0.0, c, slot, cur, nxt, _E, _E, _E, -1)
                else:
                    vn = (np.ascontiguousarray(st.V[feats, fn], dtype=np.float64) if fn >= 0
                          else _E)
                    ap = Apply(0.0, c, slot, cur, nxt, prev, delta, vn, -1)
                self.t_client += time.perf_counter() - t0
            done = self._after_pass(cluster, ap, slot, theta, col, cur, nxt, fn, step)
            if done is not ap:  # the relation blocks' rounds applied ap
                ap, chg = done, None
        if sample:
            self.chain.t += 1
        return (ap, chg), ok

    def _peer_passes(self, cluster, shift, alpha, cfg, z, sample, passes):
        """The sweep's class rounds run between the workers (``_fm_worker._peer_passes``: each
        worker adds every partition's sums in partition order and steps the class on its
        copy of the model as the loop of :meth:`_sweep` does here, so the model is the same
        bit for bit); one message to each worker and its reply, which brings back the model
        (the last class's changes are applied by the workers: nothing is pending)."""
        spec = {"shift": float(shift), "alpha": float(alpha), "curv": cfg.curv, "z": z,
                "sample": sample, "relax": cfg.relax, "loss": self.loss, "group": self.group,
                "owner": cluster.owners(),
                "passes": [(slot, col, cur, nxt, fn, lam, mu, z0)
                           for slot, _, col, cur, nxt, fn, lam, mu, z0 in passes]}
        out = self._wait(cluster, _peer_passes, spec, count=False)
        w, V = next((o[0], o[1]) for o in out if o[0] is not None)
        st = self.state
        st.w[:] = w[:, 0]
        st.V[:] = V
        n = len(passes) * len(self.classes_of)
        w_ = len(cluster.mesh)
        cluster.rounds += n
        cluster.messages["peer"] += n * w_ * (w_ - 1)
        # every partition's sums (16 bytes a feature) go to the other workers, once a pass
        cluster.sent_peers += len(passes) * 16 * st.w.shape[0] * len(cluster.rows) * (w_ - 1)

    def _after_pass(self, cluster, ap, slot, theta, col, cur, nxt, fn, step):
        """What a sweep updates after a pass's colour classes (the relation blocks of
        :mod:`fmlearn.distributed._fm_relation`); returns the changes the next round applies
        (here: the pass's last class's, ``ap``)."""
        return ap


_E = np.zeros(0)


def _no_apply():
    return Apply(0.0, -1, 0, 1, 1, _E, _E, _E, -1)


def _head(ap):
    """The scalars of a round's changes (compact rounds): w0's shift, the factor-sum columns
    and the column set to 0."""
    return (float(ap.shift), int(ap.cur), int(ap.nxt), int(ap.zero))
