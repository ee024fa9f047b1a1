"""The MCMC chain of the classic FM (:mod:`fmlearn.fm`, ``solver="mcmc"``) on the estimator.

How a fit's :class:`~fmlearn.solvers.mcmc.MCMCSettings` are resolved (burn-in, kept samples
within a memory budget), how the chain and its kept samples become fitted attributes
(``samples_*_``, ``chain_``) and come back for a warm start, and the check of a loaded chain.
"""

import numpy as np
from sklearn.base import is_classifier

from .solvers.mcmc import SETTLE_WINDOW, Chain, MCMCSettings

# Memory for the MCMC samples kept for prediction when n_kept_samples is None.
MCMC_SAMPLES_BUDGET = 256 * 2**20
# overrelaxation="auto" of the Gaussian (regression) chain, from the sweep it is found settled
# (chosen on a validation split of MovieLens-100K's training rows; benchmarks/RESULTS.md).
AUTO_OVERRELAXATION = -0.9


class MCMCChainMixin:
    """The MCMC chain helpers of ``_BaseClassicFM`` (see the module docstring)."""

    def _mcmc_setup(self, X, state, groups):
        """The chain to continue (warm start) or start, and the MCMC settings."""
        n_groups = 1 if groups is None else groups[1].shape[0]
        return (self._chain_for_warm_start(state, n_groups),
                self._mcmc_settings(X.shape[1], X.dtype, groups))

    def _mcmc_settings(self, n_features, dtype, groups):
        """The :class:`MCMCSettings` of a fit (burn-in and kept samples resolved)."""
        burn = self.n_burn_in if self.n_burn_in is not None else min(10, self.n_iter // 10)
        n_kept = self.n_kept_samples
        if n_kept is None:  # every sample after burn-in, within the memory budget
            per_sample = n_features * (self.n_factors + 1) * np.dtype(dtype).itemsize
            n_kept = max(10, MCMC_SAMPLES_BUDGET // max(per_sample, 1))
        probit = is_classifier(self)
        relax = self.overrelaxation
        if isinstance(relax, str):  # "auto": not measured on the probit chain, Gibbs there
            relax = 0.0 if probit else AUTO_OVERRELAXATION
        return MCMCSettings(self.n_iter, probit, burn, n_kept, reg_bias=self.reg_bias,
                            relax=float(relax), groups=groups)

    def _store_mcmc(self, state, chain, n_done):
        """The learned attributes of an MCMC run: last sample, kept samples, chain."""
        self.n_iter_ = n_done
        self._store(state)
        kept = chain.kept()
        if kept is None:  # fewer sweeps than the burn-in: predict with the last sample
            kept = (np.array([state.w0]), state.w[None].copy(), state.V[None].copy())
        self.samples_w0_, self.samples_w_, self.samples_V_ = kept
        self.chain_ = {"alpha": chain.alpha, "lambda_w": chain.lambda_w.tolist(),
                       "mu_w": chain.mu_w.tolist(), "lambda_v": chain.lambda_v.tolist(),
                       "mu_v": chain.mu_v.tolist(), "t": chain.t, "stride": chain.stride,
                       "settled_at": chain.settled_at, "scales": list(chain.scales)}

    def _chain_for_warm_start(self, state, n_groups):
        c = getattr(self, "chain_", None)
        if (self.warm_start and c is not None and getattr(self, "solver_", None) == "mcmc"
                and hasattr(self, "samples_V_")
                and self.samples_V_.shape[1:] == state.V.shape
                and np.shape(c["lambda_w"]) == (n_groups,)):
            return self._fitted_chain()
        return Chain.start(self.n_factors, n_groups)

    def _fitted_chain(self):
        """The MCMC :class:`Chain` stored in ``chain_`` and the kept samples."""
        c = self.chain_
        chain = Chain(c["alpha"], np.array(c["lambda_w"], dtype=np.float64),
                      np.array(c["mu_w"], dtype=np.float64),
                      np.array(c["lambda_v"], dtype=np.float64),
                      np.array(c["mu_v"], dtype=np.float64), c["t"], c["stride"],
                      settled_at=int(c.get("settled_at", -1)),
                      scales=[float(x) for x in c.get("scales", [])])
        chain.samples = (self.samples_w0_, self.samples_w_, self.samples_V_)
        chain.n_samples = self.samples_w0_.shape[0]
        return chain

    def _check_loaded_chain(self, d, k, n_groups):
        """Refuse a loaded ``chain_`` or kept samples that do not match d, k and the groups."""
        c = self.chain_
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
        S = self.samples_w0_.shape[0]
        if S < 1 or self.samples_w_.shape != (S, d) or self.samples_V_.shape != (S, d, k):
            raise ValueError("MCMC samples do not match n_features_in_ / n_factors")
