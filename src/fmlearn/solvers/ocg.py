"""Online conditional gradient on the compact convexified FM: OCCFM (Zhang et al. 2018,, Algorithm
2).

The learner owns its state as named records (the model C, the accumulated gradient S, the
tracked subspace, the counters); each round is :func:`fmlearn.kernels.ocg.update` run by the
shared per-row protocol. On wide sparse data S becomes a Frequent Directions sketch once its
exact pattern would cost more than the sketch (:mod:`fmlearn.kernels.symacc`), so the cost and
memory of a round stay bounded whatever the stream's length.
"""

from dataclasses import dataclass

import numpy as np

from ..kernels import ocg as kernel
from ..kernels.lanczos import LanczosWork
from ..kernels.steps import max_row_nnz
from ..kernels.symacc import SKETCH
from ._online_common import (
    DEFAULT_BUDGET_MB,
    SMALL_D,
    CCFMMatrixLearner,
    GradientOwner,
    SymAccumulator,
    new_lowrank,
    new_tracker,
    sketch_size_for,
)


@dataclass
class OCGSettings:
    """Parameters of Algorithm 2 and of its linear step.

    learning_rate : weight eta of the accumulated gradient in F_t (Zhang et al. 2018, Alg. 2 line
    4).
    trace_bound : the trace-norm bound delta of the decision set K.
    gamma_power, gamma_offset : gamma_t = min(1, (t + gamma_offset) ** -gamma_power).
    eig_max_iter, eig_tol : while the Ritz residual exceeds ``eig_tol * |theta|``, up to
        ``eig_max_iter`` Davidson steps per round (one product with S each).
    m_max, m_keep : size of the tracked subspace and how much a restart keeps.
    refresh : rounds between exact recomputations of the tracked products.
    max_rank, budget_mb, sketch_size : rank cap of C, memory budget, rows of the sketch of S.
    seed_key : the random_state key of the dense step's Lanczos start vectors.
    """

    learning_rate: float
    trace_bound: float
    gamma_power: float = 0.5
    gamma_offset: float = 0.0
    eig_max_iter: int = 4
    eig_tol: float = 1e-2
    m_max: int = 8
    m_keep: int = 3
    refresh: int = 5000
    max_rank: int = 16
    budget_mb: float = DEFAULT_BUDGET_MB
    sketch_size: object = "auto"
    seed_key: int = 0


class OCGLearner(GradientOwner, CCFMMatrixLearner):
    """OCCFM state and step."""

    name = "ocg"
    learn_fn = kernel.learn_rows

    def __init__(self, n_features, settings, loss_code, self_interaction):
        super().__init__(n_features, settings.max_rank, settings.budget_mb, loss_code,
                         self_interaction)
        s = self.settings = settings
        D = self.D
        # up to SMALL_D coordinates the tracked subspace is the whole space (exact step)
        m_max = D if D <= SMALL_D else max(2, s.m_max)
        fixed = 8 * (D * (0 if self.ident else self.r_max) + 3 * m_max * D + 8 * D)
        self.sacc = SymAccumulator(D, True, sketch_size_for(D, s.sketch_size, fixed,
                                                             s.budget_mb))
        tr = new_tracker(D, m_max, 0 if self.ident else self.r_max)
        if m_max == D:
            # the whole space from the first round on: S = 0 and C = 0, so B S B' = B C B' = 0;
            # with a dense C the kernel runs Lanczos on S and C directly and keeps the previous
            # eigenvector (its warm start) in UB[0], unused otherwise
            tr.B[:] = np.eye(D)
            tr.nb[0] = D
            if self.ident:
                tr.UB[0, 0] = 1.0
        self.state = kernel.OCGState(np.zeros(1, np.int64), new_lowrank(D, self.r_max, self.ident),
                                     self.sacc.new(), tr, np.zeros(1, np.int64),
                                     np.zeros(1, np.int64), np.zeros(1), np.zeros(1),
                                     int(s.seed_key))

    def config(self, indptr):
        s = self.settings
        m_keep = max(1, min(s.m_keep, self.state.tr.B.shape[0] - 1))
        r_keep = max(1, self.state.C.K.shape[0] // 2)
        return kernel.OCGConfig(self.loss_code, self.self_interaction, float(s.learning_rate),
                                float(s.trace_bound), float(s.gamma_power),
                                float(s.gamma_offset), float(s.eig_tol), int(s.eig_max_iter),
                                m_keep, r_keep, int(s.refresh))

    def work(self, indptr):
        D = self.D
        m_max = self.state.tr.B.shape[0]
        rr = max(self.state.C.K.shape[0], 1)
        maxn = max_row_nnz(indptr) + 1
        small = m_max >= D and self.ident
        lw = LanczosWork(np.zeros((D if small else 1, D)), np.zeros((D if small else 1, D)),
                         np.zeros(D), np.zeros(D), np.zeros(D), np.zeros(D), np.zeros(D))
        return kernel.OCGWork(np.empty(maxn, np.int64), np.empty(maxn), np.zeros(1, np.int64),
                              np.zeros(max(rr, D)), np.zeros(rr), np.zeros(rr), np.zeros(rr + 1),
                              np.zeros(rr), np.zeros(max(D, rr)), np.zeros(m_max),
                              np.zeros(m_max), np.zeros((m_max, m_max)), np.zeros(D),
                              np.zeros(D), np.zeros(D), np.zeros(D), lw)

    def info(self):
        st = self.state
        return {"dropped_mass": float(st.C.dropped[0]), "inexact_steps": int(st.inexact_steps[0]),
                "davidson_steps": int(st.davidson_steps[0]),
                "gradient_sketch": bool(st.S.mode == SKETCH),
                "sketch_error_bound": float(st.S.shrunk.sum())}

