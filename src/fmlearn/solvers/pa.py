"""Passive-aggressive learning (Crammer et al. 2006, PA-I): CCFM-PA of Zhang et al. 2018, §4.1 and
PA on the classic FM.

Each round suffers the hinge loss (classification) or the epsilon-insensitive loss (regression)
of the current prediction and moves along the gradient of the prediction by
tau = min(pa_c, loss / ||gradient||^2), the smallest step that zeroes the loss, capped. On the
CCFM the step is followed by the exact projection onto the trace-norm ball; on the classic FM,
which is not linear in its parameters, the step is that of the model linearized at the current
parameters.
"""

from dataclasses import dataclass

from ..kernels import ccfm_proj, online_fm
from ._online_common import DEFAULT_BUDGET_MB, FMStateLearner
from .ogd import CCFMProjectedLearner


@dataclass
class PASettings:
    pa_c: float = 1.0
    epsilon: float = 0.0
    trace_bound: float = 10.0
    max_rank: int = 128
    budget_mb: float = DEFAULT_BUDGET_MB


class CCFMPALearner(CCFMProjectedLearner):
    name = "pa"
    mode = ccfm_proj.PA


class FMPALearner(FMStateLearner):
    name = "pa"
    learn_fn = online_fm.learn_pa

    def __init__(self, n_features, n_factors, init_stdev, rng, loss_code, settings):
        super().__init__(n_features, n_factors, init_stdev, rng, loss_code)
        self.settings = settings

    def config(self, indptr):
        s = self.settings
        return online_fm.PAConfig(self.loss_code, float(s.pa_c), float(s.epsilon))
