"""Where every public estimator class lives, by name, for :mod:`fmlearn.io`.

A model file names its class (``"GFMRegressor"``); ``io.load`` must find it without importing
the estimator modules itself and without ``_base`` and ``io`` importing each other. Classes
derived from :class:`fmlearn._base.BaseFM` register themselves here when they are defined
(``BaseFM.__init_subclass__``), and :data:`PUBLIC` maps the public names to ``"module:Class"``
strings, so that a fresh process that imported only :mod:`fmlearn.io` still finds a class (its
module is imported on first use). This module imports nothing from fmlearn.
"""

import importlib
from collections.abc import Mapping

__all__ = ["PUBLIC", "estimator_classes", "register"]

#: Public estimator name -> "module:Class" (kept equal to fmlearn.__all__ by tests/test_io.py).
PUBLIC = {
    "AsymmetricRankOneSensing": "fmlearn.sensing:AsymmetricRankOneSensing",
    "CCFMClassifier": "fmlearn.online.ccfm:CCFMClassifier",
    "CCFMRegressor": "fmlearn.online.ccfm:CCFMRegressor",
    "ConvexFMClassifier": "fmlearn.convex:ConvexFMClassifier",
    "ConvexFMRegressor": "fmlearn.convex:ConvexFMRegressor",
    "FFMClassifier": "fmlearn.ffm.estimators:FFMClassifier",
    "FFMRegressor": "fmlearn.ffm.estimators:FFMRegressor",
    "FMClassifier": "fmlearn.fm:FMClassifier",
    "FMOrdinalRegressor": "fmlearn.fm.ordinal:FMOrdinalRegressor",
    "FMRanker": "fmlearn.ranking.ranker:FMRanker",
    "FMRegressor": "fmlearn.fm:FMRegressor",
    "GFMRegressor": "fmlearn.gfm:GFMRegressor",
    "IFMRegressor": "fmlearn.ifm:IFMRegressor",
    "OnlineCFMClassifier": "fmlearn.online.cfm:OnlineCFMClassifier",
    "OnlineCFMRegressor": "fmlearn.online.cfm:OnlineCFMRegressor",
    "OnlineFMClassifier": "fmlearn.online.fm:OnlineFMClassifier",
    "OnlineFMRegressor": "fmlearn.online.fm:OnlineFMRegressor",
    "PhaseRetrieval": "fmlearn.sensing:PhaseRetrieval",
    "SymmetricRankOneSensing": "fmlearn.sensing:SymmetricRankOneSensing",
}

#: Modules that moved into a family subpackage -> the module path their classes keep: model
#: and pipeline files (skops records ``module.Class``) and pickles written before the move
#: name it, and ``import`` of it still works (``fmlearn._MOVED``).
MOVED = {"fmlearn.gfm.ifm": "fmlearn.ifm", "fmlearn.gfm.sensing": "fmlearn.sensing"}

_DEFINED = {}


def register(cls):
    """Record a class defined in fmlearn (called by ``BaseFM.__init_subclass__``); a class of a
    moved module gets the module path it had (:data:`MOVED`)."""
    cls.__module__ = MOVED.get(cls.__module__, cls.__module__)
    if cls.__module__.startswith("fmlearn.") and not cls.__name__.startswith("_"):
        _DEFINED[f"{cls.__module__}:{cls.__qualname__}"] = cls


class _Classes(Mapping):
    """Read-only ``name -> class`` view of :data:`PUBLIC`, importing a module on first use."""

    def __getitem__(self, name):
        where = PUBLIC[name]
        if where not in _DEFINED:
            importlib.import_module(where.split(":")[0])
        return _DEFINED[where]

    def __iter__(self):
        return iter(PUBLIC)

    def __len__(self):
        return len(PUBLIC)


def estimator_classes():
    """The public estimator classes by name (a mapping; lookups import lazily)."""
    return _Classes()
