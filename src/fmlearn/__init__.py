"""fmlearn: factorization machines with classic, generalized, convex and online solvers.

The public names are imported on first use (PEP 562), as scikit-learn and SciPy do for their
submodules: ``import fmlearn`` costs almost nothing, ``from fmlearn import FMRegressor``
imports the classic FM and its kernels only, and numba, Dask and matplotlib load when
something needs them. ``dir(fmlearn)`` and ``__all__`` list every public name.
"""

import importlib
import importlib.abc
import importlib.util
import sys
from typing import TYPE_CHECKING

from ._version import __version__

# public name -> the module that defines it
_LAZY = {
    "AsymmetricRankOneSensing": "sensing",
    "CCFMClassifier": "online",
    "CCFMRegressor": "online",
    "ConvexFMClassifier": "convex",
    "ConvexFMRegressor": "convex",
    "FFMClassifier": "ffm",
    "FFMRegressor": "ffm",
    "FMClassifier": "fm",
    "FMOrdinalRegressor": "fm",
    "FMRanker": "ranking",
    "FMRegressor": "fm",
    "GFMRegressor": "gfm",
    "IFMRegressor": "ifm",
    "OnlineCFMClassifier": "online",
    "OnlineCFMRegressor": "online",
    "OnlineFMClassifier": "online",
    "OnlineFMRegressor": "online",
    "PhaseRetrieval": "sensing",
    "RelationBlock": "relation",
    "RelationData": "relation",
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
    "exceptions", "ffm", "fm", "gfm", "ifm", "io", "kernels", "linalg", "losses", "metrics",
    "online", "ranking", "recommender", "relation", "reproduce", "sensing", "solvers", "stream",
})

__all__ = [
    "AsymmetricRankOneSensing",
    "CCFMClassifier",
    "CCFMRegressor",
    "ConvexFMClassifier",
    "ConvexFMRegressor",
    "FFMClassifier",
    "FFMRegressor",
    "FMClassifier",
    "FMOrdinalRegressor",
    "FMRanker",
    "FMRegressor",
    "GFMRegressor",
    "IFMRegressor",
    "OnlineCFMClassifier",
    "OnlineCFMRegressor",
    "OnlineFMClassifier",
    "OnlineFMRegressor",
    "PhaseRetrieval",
    "RelationBlock",
    "RelationData",
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


# modules that moved into a family subpackage -> where they live now; ``import fmlearn.ifm``
# (and pickles or pipeline files that name it) still finds them (see _MovedModules)
_MOVED = {"ifm": "gfm.ifm", "sensing": "gfm.sensing", "losses": "kernels.losses"}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``fmlearn.<old>`` of :data:`_MOVED` as the module at its new place (the same
    module object, so ``fmlearn.ifm.IFMRegressor is fmlearn.gfm.ifm.IFMRegressor``). Asked
    only after the ordinary finders found no such file; handles nothing else."""

    def find_spec(self, fullname, path=None, target=None):
        parent, _, name = fullname.rpartition(".")
        if parent == __name__ and name in _MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        # the import system returns what sys.modules holds under the name after this call
        new = importlib.import_module(f"{__name__}.{_MOVED[module.__name__.rpartition('.')[2]]}")
        sys.modules[module.__name__] = new


if not any(type(f).__name__ == "_MovedModules" for f in sys.meta_path):
    sys.meta_path.append(_MovedModules())


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
    from .ffm import FFMClassifier, FFMRegressor
    from .fm import FMClassifier, FMOrdinalRegressor, FMRegressor
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
    from .relation import RelationBlock, RelationData
    from .sensing import AsymmetricRankOneSensing, PhaseRetrieval, SymmetricRankOneSensing
    from .stream import fit_stream
