"""Online conditional gradient on the compact convexified FM: OCCFM (seed 002, Algorithm 2).

The learner owns its state: the accumulated gradient S (a sparse symmetric pattern), the model
C (low-rank or dense), the eigen tracker and the round counter. ``learn`` runs one compiled loop
over a batch of rows in the given order (see :func:`fmlearn.kernels.online.ocg_batch`).
"""

from dataclasses import dataclass

import numpy as np

from ..kernels.online import ocg_batch
from ._online_common import (
    DEFAULT_BUDGET_MB,
    SMALL_D,
    CCFMMatrixLearner,
    SymAccumulator,
    Tracker,
    get_fields,
    set_fields,
)

# Up to this many coordinates (d + 1) the linear step is an eigendecomposition of the whole
# matrix (Lanczos on the dense H); above it a small subspace is tracked.
FULL_SUBSPACE = SMALL_D


@dataclass
class OCGSettings:
    """Parameters of Algorithm 2 and of its linear step.

    eta : weight of the accumulated gradient in F_t (002 Alg. 2 line 4).
    delta : trace-norm bound of the decision set K.
    gamma_power, gamma_offset : gamma_t = min(1, (t + gamma_offset) ** -gamma_power)
        (the paper: power 1/2, offset 0).
    eig_iter, eig_tol : while the Ritz residual exceeds ``eig_tol * |theta|``, up to
        ``eig_iter`` Davidson steps per round (one sparse product with S each); 0 uses the
        tracked subspace expanded with the round's row only.
    m_max, m_keep : size of the tracked subspace and how much a restart keeps.
    refresh : rounds between exact recomputations of the tracked products.
    max_rank, budget_mb : rank cap of C (see ``choose_rank``).
    """

    eta: float
    delta: float
    gamma_power: float = 0.5
    gamma_offset: float = 0.0
    eig_iter: int = 4
    eig_tol: float = 1e-2
    m_max: int = 8
    m_keep: int = 3
    refresh: int = 5000
    max_rank: int = 16
    budget_mb: float = DEFAULT_BUDGET_MB


class OCGLearner(CCFMMatrixLearner):
    """OCCFM state and step."""

    name = "ocg"

    def __init__(self, n_features, settings, loss_code, self_interaction):
        super().__init__(n_features, settings.max_rank, settings.budget_mb, loss_code,
                         self_interaction)
        self.settings = settings
        self.S = SymAccumulator(self.D, settings.budget_mb)
        # up to FULL_SUBSPACE coordinates the tracked subspace is the whole space (exact step)
        m_max = self.D if self.D <= FULL_SUBSPACE else max(2, settings.m_max)
        self.tracker = Tracker(self.D, m_max, 0 if self.C.ident else self.C.r_max)
        if m_max == self.D:
            # the whole space from the first round on: S = 0 and C = 0, so B S B' = B C B' = 0;
            # with a dense C the kernel runs Lanczos on S and C directly and keeps the previous
            # eigenvector (its warm start) in UB[0], unused otherwise
            self.tracker.B[:] = np.eye(self.D)
            self.tracker.nb = self.D
            self.tracker.UB[:] = 0.0
            if self.C.ident:
                self.tracker.UB[0, 0] = 1.0

    def learn(self, csr, y, sw, order, out, limit=np.inf):
        """Run the rounds ``order`` of the CSR batch; returns ``(bad_row, info)``."""
        indptr, indices, data = csr
        s = self.settings
        self.S.ensure_pattern(indptr, indices)
        tr = self.tracker
        self.ist[1] = self.C.r
        self.ist[2] = tr.nb
        m_keep = max(1, min(s.m_keep, tr.B.shape[0] - 1))
        r_keep = max(1, self.C.r_max // 2)
        bad = ocg_batch(indptr, indices, data, y, sw, order, self.loss_code,
                        self.self_interaction, self.S.indptr, self.S.indices, self.S.data,
                        self.C.U, self.C.K, self.C.ident, tr.B, tr.SB, tr.GS, tr.UB, self.ist,
                        self.fst,
                        float(s.eta), float(s.delta), float(s.gamma_power), float(s.gamma_offset),
                        float(s.eig_tol), int(s.eig_iter), m_keep, r_keep, int(s.refresh),
                        float(limit), out)
        if bad == -2:  # pragma: no cover - ensure_pattern guarantees the pattern
            raise RuntimeError("internal error: accumulated-gradient pattern incomplete")
        self.C.r = int(self.ist[1])
        tr.nb = int(self.ist[2])
        return int(bad), {"dropped_mass": float(self.fst[0]), "inexact_steps": int(self.ist[4]),
                          "davidson_steps": int(self.ist[5])}

    def state(self):
        out = super().state()
        out.update(get_fields(self.S, "S_"))
        out.update(get_fields(self.tracker, "tr_"))
        return out

    def load_state(self, values):
        super().load_state(values)
        set_fields(self.S, "S_", values)
        set_fields(self.tracker, "tr_", values)
        return self
