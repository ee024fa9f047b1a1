"""fmlearn: factorization machines with classic, generalized, convex and online solvers."""

from .fm import FMClassifier, FMRegressor
from .evaluate import evaluate_prequential
from .io import load
from .online import (
    CCFMClassifier,
    CCFMRegressor,
    OnlineCFMClassifier,
    OnlineCFMRegressor,
    OnlineFMClassifier,
    OnlineFMRegressor,
)

__version__ = "0.1.0"

__all__ = [
    "CCFMClassifier",
    "CCFMRegressor",
    "FMClassifier",
    "FMRegressor",
    "OnlineCFMClassifier",
    "OnlineCFMRegressor",
    "OnlineFMClassifier",
    "OnlineFMRegressor",
    "evaluate_prequential",
    "load",
    "__version__",
]
