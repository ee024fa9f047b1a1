"""Follow-the-regularized-leader learners: FM-FTRL, CFM-FTRL and CCFM-FTRL of seed 002 §4.1.

* FM-FTRL (after Ta 2015): FTRL-Proximal (McMahan et al. 2013, Algorithm 1) on every coordinate
  of the classic FM's (w0, w, V).
* CCFM-FTRL: FTRL with linearized losses and the squared-Frobenius regularizer on the CCFM's
  trace-norm ball, i.e. lazy projection C_{t+1} = Proj_K(-eta_t S_t) of the accumulated gradient
  S_t, eta_t = eta0 / t ** power_t (the paper's 1/sqrt(t)), projected exactly by
  eigendecomposition (dense for small d, else a refined partial eigendecomposition).
* CFM-FTRL: the convex FM of seed 004 (Yamada et al. 2017): y^ = w0 + <w, x> + 1/2 x'Wx without
  self-interactions, W positive semidefinite with tr W <= delta. W follows the same lazy
  projection onto the PSD trace simplex; w0 and w, unconstrained, follow FTRL-Proximal.
"""

from dataclasses import dataclass

import numpy as np

from ..kernels.online import eig_predict, trace_ftrl_batch
from ..kernels.online_fm import fm_ftrl_batch
from ._online_common import (
    DEFAULT_BUDGET_MB,
    FMStateLearner,
    OnlineLearner,
    SymAccumulator,
    Tracker,
    get_fields,
    set_fields,
)

# Above this many rows and columns the trace-norm learners use a partial eigendecomposition.
DENSE_EIGH_MAX = 400


@dataclass
class FTRLSettings:
    eta0: float = 1.0  # matrix part: eta_t = eta0 / t ** power_t
    power_t: float = 0.5
    delta: float = 10.0
    alpha: float = 0.1  # FTRL-Proximal of linear weights (and of w0)
    beta: float = 1.0
    l1: float = 0.0
    l2: float = 0.0
    alpha_v: float = 0.1  # FTRL-Proximal of the classic FM's factors
    beta_v: float = 1.0
    l1_v: float = 0.0
    l2_v: float = 0.0
    eig_iter: int = 10
    eig_tol: float = 1e-6
    m_max: int = 12
    m_keep: int = 6
    refresh: int = 5000
    budget_mb: float = DEFAULT_BUDGET_MB


class FMFTRLLearner(FMStateLearner):
    name = "ftrl"
    FIELDS = FMStateLearner.FIELDS + ("zn0", "znw", "Vz", "Vn")

    def __init__(self, n_features, n_factors, init_stdev, rng, loss_code, settings):
        super().__init__(n_features, n_factors, init_stdev, rng, loss_code)
        self.settings = settings
        self.zn0 = np.zeros((1, 3))
        self.znw = np.zeros((n_features, 3))
        self.Vz = -(settings.beta_v / settings.alpha_v) * self.V
        self.Vn = np.zeros_like(self.V)

    def learn(self, csr, y, sw, order, out, limit=np.inf):
        s = self.settings
        bad = fm_ftrl_batch(*csr, y, sw, order, self.loss_code, self.zn0, self.znw, self.Vz,
                            self.Vn, self.params0, self.w, self.V, self.ist, float(s.alpha),
                            float(s.beta), float(s.l1), float(s.l2), float(s.alpha_v),
                            float(s.beta_v), float(s.l1_v), float(s.l2_v), float(limit), out)
        return int(bad), {}


class _TraceFTRLLearner(OnlineLearner):
    """Shared state of CCFM-FTRL and CFM-FTRL: S, the eigen form of the model, the tracker."""

    augment = True
    psd = False

    def __init__(self, n_features, settings, loss_code, self_interaction):
        D = n_features + 1 if self.augment else n_features
        self.D = D
        self.settings = settings
        self.loss_code = loss_code
        self.self_interaction = bool(self_interaction)
        self.dense = D <= DENSE_EIGH_MAX and D * D * 8 <= settings.budget_mb * 2**20
        m_max = max(2, min(settings.m_max, D))
        cap = D if self.dense else m_max
        self.S = SymAccumulator(D, settings.budget_mb)
        self.tracker = Tracker(D, 1 if self.dense else m_max, 0)
        self.V = np.zeros((cap, D))
        self.lam = np.zeros(cap)
        self.lin = np.zeros((n_features + 1, 3))  # (z, n, w) of w_0..w_{d-1} and of w0 (CFM)
        self.ist = np.zeros(6, dtype=np.int64)  # t, k, nb, since refresh, inexact rounds, steps
        # rounds where every Ritz pair survived the projection, alpha (M = alpha S + ...),
        # the bound on ||S||_tr
        self.fst = np.zeros(3)

    def learn(self, csr, y, sw, order, out, limit=np.inf):
        indptr, indices, data = csr
        s = self.settings
        self.S.ensure_pattern(indptr, indices, self.augment)
        tr = self.tracker
        self.ist[2] = tr.nb
        m_keep = max(1, min(s.m_keep, tr.B.shape[0] - 1))
        bad = trace_ftrl_batch(indptr, indices, data, y, sw, order, self.loss_code,
                               self.self_interaction, self.augment, self.psd, self.dense,
                               self.S.indptr, self.S.indices, self.S.data, tr.B, tr.SB, tr.GS,
                               self.V, self.lam, self.lin, self.ist, self.fst, float(s.eta0),
                               float(s.power_t), float(s.delta), float(s.alpha), float(s.beta),
                               float(s.l1), float(s.l2), float(s.eig_tol), int(s.eig_iter),
                               m_keep, int(s.refresh), float(limit), out)
        if bad == -2:  # pragma: no cover
            raise RuntimeError("internal error: accumulated-gradient pattern incomplete")
        tr.nb = int(self.ist[2])
        return int(bad), {"inexact_steps": int(self.ist[4]),
                          "saturated_projections": int(self.fst[0])}

    def predict(self, csr):
        indptr, indices, data = csr
        out = np.empty(indptr.shape[0] - 1)
        eig_predict(indptr, indices, data, self.V, self.lam, int(self.ist[1]), float(self.fst[1]),
                    self.S.indptr, self.S.indices, self.S.data, self.self_interaction,
                    self.augment, self.lin, out)
        return out

    def matrix(self):
        k = int(self.ist[1])
        M = (self.V[:k].T * self.lam[:k]) @ self.V[:k]
        if self.fst[1] != 0.0:
            M = M + self.fst[1] * self.S.to_dense()
        return M

    def trace_norm(self):
        if self.fst[1] != 0.0:
            return float(np.abs(np.linalg.eigvalsh(self.matrix())).sum())
        return float(np.abs(self.lam[: int(self.ist[1])]).sum())

    FIELDS = ("V", "lam", "lin", "ist", "fst")

    def state(self):
        out = {name: getattr(self, name) for name in self.FIELDS}
        out.update(get_fields(self.S, "S_"))
        out.update({"tr_" + k: getattr(self.tracker, k) for k in ("B", "SB", "GS", "nb")})
        return out

    def load_state(self, values):
        for name in self.FIELDS:
            setattr(self, name, np.array(values[name], copy=True))
        set_fields(self.S, "S_", values)
        for k in ("B", "SB", "GS"):
            setattr(self.tracker, k, np.array(values["tr_" + k], copy=True))
        self.tracker.nb = int(values["tr_nb"])
        return self


class CCFMFTRLLearner(_TraceFTRLLearner):
    name = "ftrl"
    augment = True
    psd = False


class CFMFTRLLearner(_TraceFTRLLearner):
    name = "ftrl"
    augment = False
    psd = True

    def __init__(self, n_features, settings, loss_code):
        super().__init__(n_features, settings, loss_code, self_interaction=False)
