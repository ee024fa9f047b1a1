"""Online (projected) gradient descent (Zinkevich 2003): CCFM-OGD of Zhang et al. 2018, §4.1 and OGD
on the classic FM.

CCFM-OGD: C <- Proj_K(C - eta_t grad f_t(C)), eta_t = learning_rate / t ** power_t, with the
exact projection onto the trace-norm ball by eigendecomposition (of the small core of the
low-rank C, or of the dense C for small d) (:mod:`fmlearn.kernels.ccfm_proj`).

Classic FM: the same gradient step on (w0, w, V) with L2 penalties and no projection is
:class:`~fmlearn.FMRegressor`'s SGD, and runs its kernel,
:func:`fmlearn.kernels.sgd.sgd_epoch`, over the rows of each call in the given order (one
learner, one kernel: ``OnlineFMRegressor(learner="ogd")`` and ``FMRegressor(solver="sgd")``'s
``partial_fit`` give bit-identical models from the same rows and settings).
"""

from dataclasses import dataclass

import numpy as np

from ..kernels import ccfm_proj
from ..kernels.sgd import SCHEDULE_CODES, Params, SGDConfig, sgd_epoch, sgd_work
from ..kernels.sgd import Rows as SGDRows
from ..kernels.steps import BAD_PREDICTION, OK, max_row_nnz
from ._online_common import DEFAULT_BUDGET_MB, CCFMMatrixLearner, FMStateLearner, new_lowrank


@dataclass
class OGDSettings:
    learning_rate: float
    power_t: float = 0.5
    trace_bound: float = 10.0  # CCFM
    reg_bias: float = 0.0  # FM: L2 penalties on w0, w, V
    reg_linear: float = 0.0
    reg_pairwise: float = 0.0
    implicit_sgd: bool = True  # FM: divide the step by 1 + eta L ||grad f||^2
    lr_schedule: str = "invscaling"  # FM: or "constant" (CCFM: power_t = 0 is constant)
    max_rank: int = 128
    budget_mb: float = DEFAULT_BUDGET_MB


class CCFMProjectedLearner(CCFMMatrixLearner):
    """Shared state and batch set-up of the projected CCFM learners (OGD, PA)."""

    learn_fn = ccfm_proj.learn_rows
    mode = ccfm_proj.OGD

    def __init__(self, n_features, settings, loss_code, self_interaction):
        super().__init__(n_features, settings.max_rank, settings.budget_mb, loss_code,
                         self_interaction)
        self.settings = settings
        self.state = ccfm_proj.ProjState(np.zeros(1, np.int64),
                                         new_lowrank(self.D, self.r_max, self.ident))

    def _row_cap(self, indptr):
        C = self.state.C
        maxn = max_row_nnz(indptr) + 1
        if not C.ident and maxn > C.K.shape[0]:
            raise ValueError(
                f"a row has {maxn - 1} nonzero features, but the projected learners keep C in a "
                f"basis of at most max_rank={C.K.shape[0]} vectors, which must hold every row's "
                f"features and the bias; raise max_rank above {maxn} (or memory_budget_mb)")
        return maxn

    def config(self, indptr):
        s = self.settings
        maxn = self._row_cap(indptr)
        r_max = self.state.C.K.shape[0]
        # a compression drops the smallest |eigenvalues| down to half the cap: it costs an
        # eigendecomposition and a rotation of the basis, so it should not happen every round
        r_keep = max(1, min(r_max - maxn, r_max // 2))
        return ccfm_proj.ProjConfig(self.loss_code, self.self_interaction, self.mode,
                                    float(getattr(s, "learning_rate", 0.0)),
                                    float(getattr(s, "power_t", 0.0)), float(s.trace_bound),
                                    float(getattr(s, "pa_c", 0.0)),
                                    float(getattr(s, "epsilon", 0.0)), maxn, r_keep)

    def work(self, indptr):
        D = self.D
        maxn = max_row_nnz(indptr) + 1
        r_max = self.state.C.K.shape[0]
        return ccfm_proj.ProjWork(np.empty(maxn, np.int64), np.empty(maxn),
                                  np.zeros(1, np.int64), np.zeros(max(r_max, D)),
                                  np.zeros(max(r_max, 1)), np.zeros(D), np.zeros((1, 1)))

    def learn(self, csr, y, sw, order, out, limit=np.inf, off=None):
        self._row_cap(csr[0])
        return super().learn(csr, y, sw, order, out, limit, off)

    def info(self):
        return {"dropped_mass": float(self.state.C.dropped[0])}


class CCFMOGDLearner(CCFMProjectedLearner):
    name = "ogd"


class FMOGDLearner(FMStateLearner):
    """OGD on the classic FM: :func:`fmlearn.kernels.sgd.sgd_epoch` over the rows of a call.

    The step of round t (t = 1, 2, ... over the learner's life) is learning_rate / t ** power_t
    (``lr_schedule="invscaling"``; FMRegressor's learning_rate / (1 + steps before) ** power_t,
    the same number) or learning_rate (``"constant"``). The prediction inside the step is not
    clipped (the kernel's clipping range is infinite): the online regressor clips only what it
    reports. A call stops at the first row whose prediction is non-finite or beyond ``limit``.
    """

    name = "ogd"

    def __init__(self, n_features, n_factors, init_stdev, rng, loss_code, settings):
        super().__init__(n_features, n_factors, init_stdev, rng, loss_code)
        self.settings = settings

    def config(self, indptr, limit=np.inf):
        s = self.settings
        return SGDConfig(self.loss_code, float(s.learning_rate), SCHEDULE_CODES[s.lr_schedule],
                         float(s.power_t), float(s.reg_bias), float(s.reg_linear),
                         float(s.reg_pairwise), -np.inf, np.inf, float(limit),
                         bool(s.implicit_sgd))

    def _learn_rows(self, indptr, indices, data, y, sw, order, out, limit, off):
        # the classic FM learns its own unconstrained w0: its estimators pass no offset
        st = self.state
        work = sgd_work(st.V.shape[1], order.shape[0])
        t, bad = sgd_epoch(SGDRows(indptr, indices, data, y, sw), Params(st.w, st.V, st.w0),
                           order, 1, int(st.t[0]), self.config(indptr, limit), work)
        st.t[0] = t
        # the kernel writes the r-th visited row's prediction to pred[r]; ``out`` is by row
        out[order] = work.pred
        return (OK, -1) if bad < 0 else (BAD_PREDICTION, bad)
