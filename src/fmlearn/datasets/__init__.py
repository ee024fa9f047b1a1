"""Data sets: svmlight/libFM files, MovieLens-100K, and synthetic generators with planted truth.

Loaders read files; generators return the data together with the model that made it, so that
tests and reproductions can check what a solver recovers.
"""

from ._movielens import load_movielens_100k, movielens_split
from ._svmlight import iter_svmlight, load_svmlight, save_svmlight
from ._synthetic import fm_scores, make_fm, make_recommendation
from ._synthetic_ccfm import make_ccfm_stream

__all__ = [
    "fm_scores",
    "iter_svmlight",
    "load_movielens_100k",
    "load_svmlight",
    "make_ccfm_stream",
    "make_fm",
    "make_recommendation",
    "movielens_split",
    "save_svmlight",
]
