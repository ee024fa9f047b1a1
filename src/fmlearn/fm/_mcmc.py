"""The MCMC chain of the classic FM (``solver="mcmc"``) between the estimator and the plan.

How a fit's :class:`~fmlearn.solvers.mcmc.MCMCSettings` are resolved (burn-in, kept samples
within a memory budget, the over-relaxation of "auto"), which chain a warm start continues,
how the chain and its kept samples become fitted attributes (``samples_*_``, ``chain_``) and
come back, and the check of a loaded chain. Used by :class:`fmlearn.fm._plan.ClassicFMPlan`
and the estimators' loaded-state check.
"""

import numpy as np

from ..solvers.mcmc import SETTLE_WINDOW, Chain, MCMCSettings

__all__ = ["AUTO_OVERRELAXATION", "MCMC_SAMPLES_BUDGET", "chain_attributes",
           "chain_for_warm_start", "check_loaded_chain", "fitted_chain", "mcmc_settings"]

# Memory for the MCMC samples kept for prediction when n_kept_samples is None.
MCMC_SAMPLES_BUDGET = 256 * 2**20
# overrelaxation="auto" of the Gaussian (regression) chain, from the sweep it is found settled
# (chosen on a validation split of MovieLens-100K's training rows; benchmarks/RESULTS.md).
AUTO_OVERRELAXATION = -0.9


def mcmc_settings(p, classifier, n_features, dtype, groups):
    """The :class:`MCMCSettings` of a fit with the parameters ``p`` (``get_params()``): burn-in
    and kept samples resolved."""
    n_iter = p["n_iter"]
    burn = p["n_burn_in"] if p["n_burn_in"] is not None else min(10, n_iter // 10)
    n_kept = p["n_kept_samples"]
    if n_kept is None:  # every sample after burn-in, within the memory budget
        per_sample = n_features * (p["n_factors"] + 1) * np.dtype(dtype).itemsize
        n_kept = max(10, MCMC_SAMPLES_BUDGET // max(per_sample, 1))
    relax = p["overrelaxation"]
    if isinstance(relax, str):  # "auto": not measured on the probit chain, Gibbs there
        relax = 0.0 if classifier else AUTO_OVERRELAXATION
    return MCMCSettings(n_iter=n_iter, probit=classifier, n_burn_in=burn, n_kept=n_kept,
                        reg_bias=p["reg_bias"], relax=float(relax), groups=groups)


def chain_for_warm_start(est, p, state, n_groups):
    """The chain of the fitted estimator when a warm start continues it (same solver, state
    shape and groups), else a new one."""
    c = getattr(est, "chain_", None)
    if (p["warm_start"] and c is not None and getattr(est, "solver_", None) == "mcmc"
            and hasattr(est, "samples_V_")
            and est.samples_V_.shape[1:] == state.V.shape
            and np.shape(c["lambda_w"]) == (n_groups,)):
        return fitted_chain(est)
    return Chain.start(p["n_factors"], n_groups)


def chain_attributes(chain, state):
    """The fitted attributes of an MCMC run: the kept samples and ``chain_``."""
    kept = chain.kept()
    if kept is None or kept[0].shape[0] == 0:  # stopped within the burn-in: the last sample
        kept = (np.array([state.w0]), state.w[None].copy(), state.V[None].copy())
    return {"samples_w0_": kept[0], "samples_w_": kept[1], "samples_V_": kept[2],
            "chain_": {"alpha": chain.alpha, "lambda_w": chain.lambda_w.tolist(),
                       "mu_w": chain.mu_w.tolist(), "lambda_v": chain.lambda_v.tolist(),
                       "mu_v": chain.mu_v.tolist(), "t": chain.t, "stride": chain.stride,
                       "settled_at": chain.settled_at, "scales": list(chain.scales)}}


def fitted_chain(est):
    """The MCMC :class:`~fmlearn.solvers.mcmc.Chain` of a fitted estimator (``chain_`` and
    the kept samples)."""
    c = est.chain_
    chain = Chain(c["alpha"], np.array(c["lambda_w"], dtype=np.float64),
                  np.array(c["mu_w"], dtype=np.float64),
                  np.array(c["lambda_v"], dtype=np.float64),
                  np.array(c["mu_v"], dtype=np.float64), c["t"], c["stride"],
                  settled_at=int(c.get("settled_at", -1)),
                  scales=[float(x) for x in c.get("scales", [])])
    chain.samples = (est.samples_w0_, est.samples_w_, est.samples_V_)
    chain.n_samples = est.samples_w0_.shape[0]
    return chain


def check_loaded_chain(est, d, k, n_groups):
    """Refuse a loaded ``chain_`` or kept samples that do not match d, k and the groups."""
    c = est.chain_
    if (np.shape(c["lambda_w"]) != (n_groups,) or np.shape(c["mu_w"]) != (n_groups,)
            or np.shape(c["lambda_v"]) != (k, n_groups)
            or np.shape(c["mu_v"]) != (k, n_groups)):
        raise ValueError(f"chain_ hyper-parameters do not match {n_groups} group(s) "
                         f"and n_factors={k}")
    settled, scales = c.get("settled_at", -1), np.asarray(c.get("scales", []))
    ints = all(isinstance(v, (int, np.integer)) for v in (settled, c["t"]))
    if (not ints or not -1 <= settled <= c["t"]
            or scales.ndim != 1 or scales.shape[0] > 2 * SETTLE_WINDOW
            or (scales.size and scales.dtype.kind not in "fi")
            or not np.all(np.isfinite(scales))):
        raise ValueError("chain_ settled_at / scales are invalid (settled_at in -1..t, "
                         f"at most {2 * SETTLE_WINDOW} finite scales)")
    S = est.samples_w0_.shape[0]
    if S < 1 or est.samples_w_.shape != (S, d) or est.samples_V_.shape != (S, d, k):
        raise ValueError("MCMC samples do not match n_features_in_ / n_factors")
