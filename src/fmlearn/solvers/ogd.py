"""Online (projected) gradient descent (Zinkevich 2003): CCFM-OGD of seed 002 §4.1 and OGD on
the classic FM.

CCFM-OGD: C <- Proj_K(C - eta_t grad f_t(C)), eta_t = eta0 / t ** power_t, with the exact
projection onto the trace-norm ball by eigendecomposition (of the small core of the low-rank C,
or of the dense C for small d). Classic FM: the same gradient step on (w0, w, V) with L2
penalties and no projection (with power_t = 0, plain SGD).
"""

from dataclasses import dataclass

import numpy as np

from ..kernels.online import OGD, ccfm_proj_batch
from ..kernels.online_fm import fm_ogd_batch
from ._online_common import DEFAULT_BUDGET_MB, CCFMMatrixLearner, FMStateLearner


@dataclass
class OGDSettings:
    eta0: float
    power_t: float = 0.5
    delta: float = 10.0  # CCFM: trace-norm bound
    reg0: float = 0.0  # FM: L2 penalties on w0, w, V
    reg1: float = 0.0
    reg2: float = 0.0
    implicit: bool = True  # FM: divide the step by 1 + eta L ||grad f||^2
    max_rank: int = 128
    budget_mb: float = DEFAULT_BUDGET_MB


class CCFMOGDLearner(CCFMMatrixLearner):
    name = "ogd"

    def __init__(self, n_features, settings, loss_code, self_interaction):
        super().__init__(n_features, settings.max_rank, settings.budget_mb, loss_code,
                         self_interaction)
        self.settings = settings

    def learn(self, csr, y, sw, order, out, limit=np.inf):
        s = self.settings
        return _ccfm_projected(self, csr, y, sw, order, out, limit, OGD, s.eta0, s.power_t,
                               s.delta, 0.0, 0.0)


def _ccfm_projected(learner, csr, y, sw, order, out, limit, mode, eta0, power_t, delta, pa_c,
                    epsilon):
    indptr, indices, data = csr
    C = learner.C
    learner.ist[1] = C.r
    maxn = int(np.max(np.diff(indptr))) + 1 if indptr.shape[0] > 1 else 1
    if not C.ident and maxn > C.r_max:
        raise ValueError(
            f"a row has {maxn - 1} nonzero features, but the projected learners keep C in a "
            f"basis of at most max_rank={C.r_max} vectors, which must hold every row's "
            f"features and the bias; raise max_rank above {maxn} (or memory_budget_mb)")
    # a compression drops the smallest |eigenvalues| down to half the cap: it costs an
    # eigendecomposition and a rotation of the basis, so it should not happen every round
    r_keep = max(1, min(C.r_max - maxn, C.r_max // 2))
    bad = ccfm_proj_batch(indptr, indices, data, y, sw, order, learner.loss_code,
                          learner.self_interaction, mode, C.U, C.K, C.ident, learner.ist,
                          learner.fst, float(eta0), float(power_t), float(delta), float(pa_c),
                          float(epsilon), r_keep, float(limit), out)
    if bad == -3:  # pragma: no cover - excluded by the check above
        raise RuntimeError("internal error: row longer than the rank cap")
    C.r = int(learner.ist[1])
    return int(bad), {"dropped_mass": float(learner.fst[0])}


class FMOGDLearner(FMStateLearner):
    name = "ogd"

    def __init__(self, n_features, n_factors, init_stdev, rng, loss_code, settings):
        super().__init__(n_features, n_factors, init_stdev, rng, loss_code)
        self.settings = settings

    def learn(self, csr, y, sw, order, out, limit=np.inf):
        s = self.settings
        bad = fm_ogd_batch(*csr, y, sw, order, self.loss_code, self.params0, self.w, self.V,
                           self.ist, float(s.eta0), float(s.power_t), float(s.reg0),
                           float(s.reg1), float(s.reg2), bool(s.implicit), float(limit), out)
        return int(bad), {}
