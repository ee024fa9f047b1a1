"""fmlearn: factorization machines with classic, generalized, convex and online solvers."""

from .fm import FMClassifier, FMRegressor
from .io import load

__version__ = "0.1.0"

__all__ = ["FMClassifier", "FMRegressor", "load", "__version__"]
