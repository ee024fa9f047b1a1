"""Data sets: readers and synthetic generators that return the planted truth."""

from ._synthetic_gfm import (
    FEATURE_DISTRIBUTIONS,
    PlantedModel,
    make_asymmetric_sensing,
    make_fm_labels,
    make_gfm,
    make_phase_retrieval,
    make_symmetric_sensing,
    sample_features,
)

__all__ = [
    "FEATURE_DISTRIBUTIONS",
    "PlantedModel",
    "make_asymmetric_sensing",
    "make_fm_labels",
    "make_gfm",
    "make_phase_retrieval",
    "make_symmetric_sensing",
    "sample_features",
]
