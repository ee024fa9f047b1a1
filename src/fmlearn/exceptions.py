"""Exceptions and warnings raised by fmlearn."""

from sklearn.exceptions import ConvergenceWarning, NotFittedError

__all__ = [
    "ConvergenceWarning",
    "DivergenceError",
    "IdColumnWarning",
    "ModelFileError",
    "NotFittedError",
    "SmallBatchWarning",
]


class DivergenceError(FloatingPointError):
    """A solver's iterates became non-finite or exploded; the fit was stopped.

    The message names the solver, the iteration and what to change (usually a smaller learning
    rate, a larger batch or stronger regularization). The estimator keeps the state it had
    before the call, so no NaN model is ever left behind.
    """


class IdColumnWarning(UserWarning):
    """A dense column of X looks like ids (whole numbers filling a range of many values, such
    as user or item numbers): an FM reads it as one number, not as categories.

    The message names the columns and the encoder that one-hot encodes them
    (:class:`fmlearn.encoders.TabularEncoder`); see :func:`fmlearn._id_columns.id_like_columns`
    for the rule.
    """


class ModelFileError(ValueError):
    """A model file is not a valid fmlearn model: corrupt, truncated, tampered or from an
    incompatible format version."""


class SmallBatchWarning(UserWarning):
    """A batch is smaller than the one-pass theory needs (about 2-3 k d rows on Gaussian data).

    The step still runs; on small data sets ``fit`` then uses the whole set as one batch and
    ``max_iter`` re-uses it, which is a batch heuristic outside the one-pass guarantees.
    """
