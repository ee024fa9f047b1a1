"""fmlearn: factorization machines with classic, generalized, convex and online solvers.

The public names are imported on first use (PEP 562), as scikit-learn and SciPy do for their
submodules: ``import fmlearn`` costs almost nothing, ``from fmlearn import FMRegressor``
imports the classic FM and its kernels only, and numba, Dask and matplotlib load when
something needs them. ``dir(fmlearn)`` and ``__all__`` list every public name.
"""

import importlib
from typing import TYPE_CHECKING

from ._version import __version__

# public name -> the module that defines it
_LAZY = {
    "AsymmetricRankOneSensing": "sensing",
    "CCFMClassifier": "online",
    "CCFMRegressor": "online",
    "ConvexFMClassifier": "convex",
    "ConvexFMRegressor": "convex",
    "FMClassifier": "fm",
    "FMRanker": "ranking",
    "FMRegressor": "fm",
    "GFMRegressor": "gfm",
    "IFMRegressor": "ifm",
    "OnlineCFMClassifier": "online",
    "OnlineCFMRegressor": "online",
    "OnlineFMClassifier": "online",
    "OnlineFMRegressor": "online",
    "PhaseRetrieval": "sensing",
    "SymmetricRankOneSensing": "sensing",
    "embed_rows": "recommender",
    "evaluate_prequential": "evaluate",
    "feature_embeddings": "recommender",
    "fit_stream": "stream",
    "load": "_skops_io",
    "recommend": "recommender",
    "save": "_skops_io",
}
# subpackages and modules reachable as attributes (``fmlearn.datasets.load_svmlight``)
_SUBMODULES = frozenset({
    "cli", "convex", "datasets", "diagnostics", "distributed", "encoders", "evaluate",
    "exceptions", "fm", "gfm", "ifm", "io", "kernels", "linalg", "losses", "metrics", "online",
    "ranking", "recommender", "reproduce", "sensing", "solvers", "stream",
})

__all__ = [
    "AsymmetricRankOneSensing",
    "CCFMClassifier",
    "CCFMRegressor",
    "ConvexFMClassifier",
    "ConvexFMRegressor",
    "FMClassifier",
    "FMRanker",
    "FMRegressor",
    "GFMRegressor",
    "IFMRegressor",
    "OnlineCFMClassifier",
    "OnlineCFMRegressor",
    "OnlineFMClassifier",
    "OnlineFMRegressor",
    "PhaseRetrieval",
    "SymmetricRankOneSensing",
    "embed_rows",
    "evaluate_prequential",
    "feature_embeddings",
    "fit_stream",
    "load",
    "recommend",
    "save",
    "__version__",
]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups do not come back here
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__) | _SUBMODULES)


if TYPE_CHECKING:  # what static tools and IDEs see
    from ._skops_io import load, save
    from .convex import ConvexFMClassifier, ConvexFMRegressor
    from .evaluate import evaluate_prequential
    from .fm import FMClassifier, FMRegressor
    from .gfm import GFMRegressor
    from .ifm import IFMRegressor
    from .online import (
        CCFMClassifier,
        CCFMRegressor,
        OnlineCFMClassifier,
        OnlineCFMRegressor,
        OnlineFMClassifier,
        OnlineFMRegressor,
    )
    from .ranking import FMRanker
    from .recommender import embed_rows, feature_embeddings, recommend
    from .sensing import AsymmetricRankOneSensing, PhaseRetrieval, SymmetricRankOneSensing
    from .stream import fit_stream
