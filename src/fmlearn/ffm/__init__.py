"""Field-aware factorization machines (Juan, Zhuang, Chin & Lin, RecSys 2016).

The family's subpackage: the estimators (:mod:`.estimators`), their plan (:mod:`._plan`),
the AdaGrad solver (:mod:`._solver`), the compiled kernels (:mod:`._kernels`) and the field
maps (:mod:`._fields`). The libffm file format is read by :mod:`fmlearn.datasets`
(``load_libffm``, ``iter_libffm``); early stopping is shared (:mod:`fmlearn._early_stopping`).
"""

from .estimators import FFMClassifier, FFMRegressor

__all__ = ["FFMClassifier", "FFMRegressor"]
