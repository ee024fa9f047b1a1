"""fmlearn: factorization machines with classic, generalized, convex and online solvers."""

from .convex import ConvexFMClassifier, ConvexFMRegressor
from .fm import FMClassifier, FMRegressor
from .gfm import GFMRegressor
from .ifm import IFMRegressor
from .io import load
from .sensing import AsymmetricRankOneSensing, PhaseRetrieval, SymmetricRankOneSensing
from .stream import fit_stream

__version__ = "0.1.0"

__all__ = [
    "AsymmetricRankOneSensing",
    "ConvexFMClassifier",
    "ConvexFMRegressor",
    "FMClassifier",
    "FMRegressor",
    "GFMRegressor",
    "IFMRegressor",
    "PhaseRetrieval",
    "SymmetricRankOneSensing",
    "fit_stream",
    "load",
    "__version__",
]
