"""Recommendations from implicit feedback: :class:`FMRanker` (a factorization machine learned
from positive events by WARP, BPR or the all-negatives squared loss), the event data set
:class:`Interactions`, and the evaluation protocol (:func:`per_user_split`,
:func:`leave_last_out`, :func:`cold_item_split`, :func:`evaluate_ranking`); the ranking
metrics live in :mod:`fmlearn.metrics`. See docs/recommend.md.
"""

from .interactions import Interactions
from .model_selection import cold_item_split, evaluate_ranking, leave_last_out, per_user_split
from .ranker import FMRanker

__all__ = ["FMRanker", "Interactions", "cold_item_split", "evaluate_ranking", "leave_last_out",
           "per_user_split"]
