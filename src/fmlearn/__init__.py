"""fmlearn: factorization machines with classic, generalized, convex and online solvers."""

from ._version import __version__
from .convex import ConvexFMClassifier, ConvexFMRegressor
from .evaluate import evaluate_prequential
from .fm import FMClassifier, FMRegressor
from .gfm import GFMRegressor
from .ifm import IFMRegressor
from .io import load
from .online import (
    CCFMClassifier,
    CCFMRegressor,
    OnlineCFMClassifier,
    OnlineCFMRegressor,
    OnlineFMClassifier,
    OnlineFMRegressor,
)
from .sensing import AsymmetricRankOneSensing, PhaseRetrieval, SymmetricRankOneSensing
from .stream import fit_stream

__all__ = [
    "AsymmetricRankOneSensing",
    "CCFMClassifier",
    "CCFMRegressor",
    "ConvexFMClassifier",
    "ConvexFMRegressor",
    "FMClassifier",
    "FMRegressor",
    "GFMRegressor",
    "IFMRegressor",
    "OnlineCFMClassifier",
    "OnlineCFMRegressor",
    "OnlineFMClassifier",
    "OnlineFMRegressor",
    "PhaseRetrieval",
    "SymmetricRankOneSensing",
    "evaluate_prequential",
    "fit_stream",
    "load",
    "__version__",
]
