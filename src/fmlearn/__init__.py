"""fmlearn: factorization machines with classic, generalized, convex and online solvers."""

from .convex import ConvexFMClassifier, ConvexFMRegressor
from .fm import FMClassifier, FMRegressor
from .io import load

__version__ = "0.1.0"

__all__ = [
    "ConvexFMClassifier",
    "ConvexFMRegressor",
    "FMClassifier",
    "FMRegressor",
    "load",
    "__version__",
]
