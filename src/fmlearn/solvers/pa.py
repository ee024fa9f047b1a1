"""Passive-aggressive learning (Crammer et al. 2006, PA-I): CCFM-PA of seed 002 §4.1 and PA on
the classic FM.

Each round suffers the hinge loss (classification) or the epsilon-insensitive loss (regression)
of the current prediction and moves along the gradient of the prediction by
tau = min(pa_c, loss / ||gradient||^2), the smallest step that zeroes the loss, capped. On the
CCFM the step is followed by the exact projection onto the trace-norm ball; on the classic FM,
which is not linear in its parameters, the step is that of the model linearized at the current
parameters.
"""

from dataclasses import dataclass

import numpy as np

from ..kernels.online import PA
from ..kernels.online_fm import fm_pa_batch
from ._online_common import DEFAULT_BUDGET_MB, CCFMMatrixLearner, FMStateLearner
from .ogd import _ccfm_projected


@dataclass
class PASettings:
    pa_c: float = 1.0
    epsilon: float = 0.0
    delta: float = 10.0
    max_rank: int = 128
    budget_mb: float = DEFAULT_BUDGET_MB


class CCFMPALearner(CCFMMatrixLearner):
    name = "pa"

    def __init__(self, n_features, settings, loss_code, self_interaction):
        super().__init__(n_features, settings.max_rank, settings.budget_mb, loss_code,
                         self_interaction)
        self.settings = settings

    def learn(self, csr, y, sw, order, out, limit=np.inf):
        s = self.settings
        return _ccfm_projected(self, csr, y, sw, order, out, limit, PA, 0.0, 0.0, s.delta,
                               s.pa_c, s.epsilon)


class FMPALearner(FMStateLearner):
    name = "pa"

    def __init__(self, n_features, n_factors, init_stdev, rng, loss_code, settings):
        super().__init__(n_features, n_factors, init_stdev, rng, loss_code)
        self.settings = settings

    def learn(self, csr, y, sw, order, out, limit=np.inf):
        s = self.settings
        bad = fm_pa_batch(*csr, y, sw, order, self.loss_code, self.params0, self.w, self.V,
                          self.ist, float(s.pa_c), float(s.epsilon), float(limit), out)
        return int(bad), {}
