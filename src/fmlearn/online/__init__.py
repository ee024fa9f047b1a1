"""Online factorization machines: the compact convexified FM with its learners (Zhang et al. 2018)
and the online baselines of its experiments on the classic FM and on the convex FM of Yamada et al.
2017.

* :class:`CCFMRegressor`, :class:`CCFMClassifier` (:mod:`.ccfm`) - y^ = 1/2 x^' C x^ with
  x^ = [x; 1] and C symmetric in the trace-norm ball ||C||_tr <= trace_bound (Zhang et al. 2018,
  §3.1); learner ``"ocg"`` is OCCFM (Zhang et al. 2018, Algorithm 2), ``"ogd"``, ``"pa"`` and
  ``"ftrl"`` the projected baselines (Zhang et al. 2018, §4.1).
* :class:`OnlineFMRegressor`, :class:`OnlineFMClassifier` (:mod:`.fm`) - the classic FM with
  ``"ftrl"`` (FM-FTRL), ``"ogd"`` or ``"pa"``.
* :class:`OnlineCFMRegressor`, :class:`OnlineCFMClassifier` (:mod:`.cfm`) - the convex FM of
  Yamada et al. 2017 with FTRL (CFM-FTRL).

Every estimator learns row by row in a compiled loop (:mod:`fmlearn.kernels.steps`).
``partial_fit`` takes one row or many and visits them in the given order; ``fit`` starts afresh
and makes ``n_iter`` passes over the rows in a random order (the protocol of Zhang et al. 2018,
§4.1). The learner stays live between calls; its state is exposed by name as ``state_*_`` attributes
(the same arrays), so a model saved with :meth:`save` continues learning after :func:`fmlearn.load`.
"""

from .ccfm import CCFMClassifier, CCFMRegressor
from .cfm import OnlineCFMClassifier, OnlineCFMRegressor
from .fm import OnlineFMClassifier, OnlineFMRegressor

#: The online estimator classes by model family, each as ``(regressor, classifier)``: the one
#: list the CLI (``fmlearn online --model``), ``fmlearn reproduce occfm`` and the tests use.
ESTIMATORS = {"ccfm": (CCFMRegressor, CCFMClassifier),
              "fm": (OnlineFMRegressor, OnlineFMClassifier),
              "cfm": (OnlineCFMRegressor, OnlineCFMClassifier)}

__all__ = ["CCFMClassifier", "CCFMRegressor", "ESTIMATORS", "OnlineCFMClassifier",
           "OnlineCFMRegressor", "OnlineFMClassifier", "OnlineFMRegressor"]
