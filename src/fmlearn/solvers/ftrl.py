"""Follow-the-regularized-leader learners: FM-FTRL, CFM-FTRL and CCFM-FTRL of Zhang et al. 2018,
§4.1.

* FM-FTRL (after Ta 2015): FTRL-Proximal (McMahan et al. 2013, Algorithm 1) on every coordinate
  of the classic FM's (w0, w, V) (:func:`fmlearn.kernels.online_fm.update_ftrl`).
* CCFM-FTRL: FTRL with linearized losses and the squared-Frobenius regularizer on the CCFM's
  trace-norm ball, i.e. lazy projection C_{t+1} = Proj_K(-eta_t S_t) of the accumulated gradient
  S_t, projected exactly by eigendecomposition (dense for small d, else a refined partial
  eigendecomposition) (:mod:`fmlearn.kernels.trace_ftrl`).
* CFM-FTRL: the convex FM of Yamada et al. 2017: y^ = w0 + <w, x> + 1/2 x'Wx without
  self-interactions, W positive semidefinite with tr W <= delta. W follows the same lazy
  projection onto the PSD trace simplex; w0 and w, unconstrained, follow FTRL-Proximal.

On wide sparse data S becomes a Frequent Directions sketch (as for OCCFM), which bounds the
cost of the products the saturated projection's refinement needs.
"""

import math
from dataclasses import dataclass

import numpy as np

from ..kernels import online_fm, trace_ftrl
from ..kernels.steps import max_row_nnz
from ..kernels.symacc import SKETCH
from ._online_common import (
    DEFAULT_BUDGET_MB,
    FMStateLearner,
    GradientOwner,
    OnlineLearner,
    SymAccumulator,
    check_symacc,
    new_tracker,
    sketch_size_for,
)

# Up to this many rows and columns (D) the trace-norm learners project by a full dense
# eigendecomposition of S every round (O(D^3): about 10 ms at D = 400); above it they use the
# refined partial eigendecomposition of a tracked subspace.
DENSE_EIGH_MAX = 400
# relative margin of the PSD form's unprojected bound over eta_t b_t (its docstring): the
# computed Ritz values' sum exceeds the exact one by O(m_max eps) relatively
PSD_MARGIN = 1e-6


@dataclass
class FTRLSettings:
    learning_rate: float = 0.1  # FTRL-Proximal of w0 and w (its alpha)
    ftrl_beta: float = 1.0
    l1_linear: float = 0.0
    reg_bias: float = 0.0
    reg_linear: float = 0.0
    learning_rate_pairwise: float = 0.05  # FM: alpha of V; trace learners: eta0 of the matrix
    ftrl_beta_pairwise: float = 1.0
    l1_pairwise: float = 0.0
    reg_pairwise: float = 0.0
    power_t: float = 0.5  # trace learners: eta_t = learning_rate_pairwise / t ** power_t
    trace_bound: float = 10.0
    eig_max_iter: int = 10
    eig_tol: float = 1e-6
    m_max: int = 12
    m_keep: int = 6
    refresh: int = 5000
    budget_mb: float = DEFAULT_BUDGET_MB
    sketch_size: object = "auto"


class FMFTRLLearner(FMStateLearner):
    name = "ftrl"
    learn_fn = online_fm.learn_ftrl

    def __init__(self, n_features, n_factors, init_stdev, rng, loss_code, settings):
        self.settings = settings
        super().__init__(n_features, n_factors, init_stdev, rng, loss_code)

    def _new_state(self, t, w0, w, V):
        s = self.settings
        return online_fm.FTRLFMState(t, w0, w, V, np.zeros(1), np.zeros(1), np.zeros_like(w),
                                     np.zeros_like(w),
                                     -(s.ftrl_beta_pairwise / s.learning_rate_pairwise) * V,
                                     np.zeros_like(V))

    def config(self, indptr):
        s = self.settings
        return online_fm.FTRLConfig(self.loss_code, float(s.learning_rate), float(s.ftrl_beta),
                                    float(s.l1_linear), float(s.reg_bias), float(s.reg_linear),
                                    float(s.learning_rate_pairwise),
                                    float(s.ftrl_beta_pairwise), float(s.l1_pairwise),
                                    float(s.reg_pairwise))


class _TraceFTRLLearner(GradientOwner, OnlineLearner):
    """Shared state of CCFM-FTRL and CFM-FTRL: S, the eigenpairs of the model, the tracker."""

    augment = True
    psd = False
    learn_fn = trace_ftrl.learn_rows

    def __init__(self, n_features, settings, loss_code, self_interaction):
        D = n_features + 1 if self.augment else n_features
        self.D = D
        s = self.settings = settings
        self.loss_code = loss_code
        self.self_interaction = bool(self_interaction)
        self.dense = D <= DENSE_EIGH_MAX and D * D * 8 <= s.budget_mb * 2**20
        m_max = max(2, min(s.m_max, D))
        cap = D if self.dense else m_max
        fixed = 8 * (3 * m_max * D + cap * D + (D * D if self.dense else 0) + 8 * D)
        self.sacc = SymAccumulator(D, self.augment, sketch_size_for(D, s.sketch_size, fixed,
                                                                    s.budget_mb))
        d_lin = 0 if self.augment else n_features
        self.state = trace_ftrl.TraceState(
            np.zeros(1, np.int64), self.sacc.new(), new_tracker(D, 1 if self.dense else m_max, 0),
            np.zeros((cap, D)), np.zeros(cap), np.zeros(1, np.int64), np.zeros(1), np.zeros(1),
            np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1), np.zeros(d_lin),
            np.zeros(1), np.zeros(1), np.zeros(d_lin), np.zeros(d_lin))

    def config(self, indptr):
        s = self.settings
        m_keep = max(1, min(s.m_keep, self.state.tr.B.shape[0] - 1))
        return trace_ftrl.TraceConfig(self.loss_code, self.self_interaction, self.augment,
                                      self.psd, self.dense, float(s.learning_rate_pairwise),
                                      float(s.power_t), float(s.trace_bound),
                                      float(s.learning_rate), float(s.ftrl_beta),
                                      float(s.l1_linear), float(s.reg_linear), float(s.eig_tol),
                                      int(s.eig_max_iter), m_keep, int(s.refresh))

    def work(self, indptr):
        D = self.D
        m_max = self.state.tr.B.shape[0]
        maxn = max_row_nnz(indptr) + 1
        return trace_ftrl.TraceWork(np.empty(maxn, np.int64), np.empty(maxn),
                                    np.zeros(1, np.int64), np.zeros(m_max), np.zeros(m_max),
                                    np.zeros(D), np.zeros(D),
                                    np.zeros((D, D) if self.dense else (1, 1)))

    def info(self):
        st = self.state
        return {"inexact_steps": int(st.inexact_steps[0]),
                "saturated_projections": int(st.saturated[0]),
                "gradient_sketch": bool(st.S.mode == SKETCH),
                "sketch_error_bound": float(st.S.shrunk.sum())}

    def costly_rounds(self):
        """Rounds whose projection saturated the tracked subspace (every Ritz pair survived)
        so far: each costs up to ``eig_max_iter`` products with S (``trace_bound="auto"``
        refuses a candidate bound with many; fmlearn.online._trace)."""
        return int(self.state.saturated[0])

    def unprojected_bound(self, t0):
        """A bound delta such that every round after round ``t0`` up to now left the
        projection the identity under any trace bound >= delta (None when every round
        projects: the dense and PSD forms).

        A round t is the identity when eta_t b_t <= delta, b_t the running bound on ||S_t||_tr
        (``s_trace_bound``, non-decreasing) and eta_t = eta0 / t ** power_t (non-increasing):
        eta_{t0+1} b_now bounds every round since t0, in floating point too (each operation is
        monotone). Under such bounds the state evolves as without any bound, bit for bit.

        The PSD form (CFM-FTRL) projects every round, but onto {W >= 0, tr W <= delta}, whose
        threshold tau is 0 (and the round's result independent of delta) while the sum of the
        positive Ritz values of -eta_t S_t is at most delta; that sum is at most
        eta_t ||S_t||_tr <= eta_t b_t up to the rounding of the Ritz values, covered by the
        relative margin PSD_MARGIN. A sketch P'P - N'N - diag(dg) of S (fmlearn.kernels.symacc)
        has trace norm at most tr P'P + tr N'N + sum |dg| <= b_t too (Frequent Directions only
        shrinks: P'P <= the exact sum of its rows' outer products), and the positive Ritz values
        on the tracked subspace sum to at most the positive eigenvalues' sum (Ky Fan)."""
        if self.dense and not self.psd:
            return None
        s = self.settings
        eta = s.learning_rate_pairwise / math.pow(t0 + 1, s.power_t)
        if self.psd:
            return eta * float(self.state.s_trace_bound[0]) * (1.0 + PSD_MARGIN)
        return eta * float(self.state.s_trace_bound[0])

    def rounds(self):
        """The rounds learned so far (t)."""
        return int(self.state.t[0])

    def predict(self, csr):
        indptr, indices, data = csr
        out = np.empty(indptr.shape[0] - 1)
        st = self.state
        trace_ftrl.eig_predict_rows(indptr, indices, data, trace_ftrl.eig_model(st), st.S,
                                    self.self_interaction, self.augment, out)
        return out

    def matrix(self):
        st = self.state
        k = int(st.k[0])
        M = (st.V[:k].T * st.lam[:k]) @ st.V[:k]
        if st.s_coef[0] != 0.0:
            M = M + st.s_coef[0] * self.sacc.to_dense(st.S)
        return M

    def trace_norm(self):
        if self.state.s_coef[0] != 0.0:
            return float(np.abs(np.linalg.eigvalsh(self.matrix())).sum())
        return float(np.abs(self.state.lam[: int(self.state.k[0])]).sum())


    def check_bounds(self):
        st = self.state
        if int(st.k[0]) > st.V.shape[0] or int(st.tr.nb[0]) > st.tr.B.shape[0]:
            raise ValueError("state values 'k' / 'tr_nb' exceed their arrays")
        check_symacc(st.S, self.D)


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
