"""Losses shared by every solver: value, derivative and smoothness.

Each loss exists twice: a compiled scalar function used inside numba kernels (selected by an
integer code, because kernels never see strings) and a vectorised NumPy twin used by tests,
metrics and pure-Python solvers. ``y`` is the target for the squared loss and a label in
{-1, +1} for the margin losses.
"""

import math

import numpy as np
from scipy.special import expit

from ._jit import njit

SQUARED = 0
LOGISTIC = 1

LOSS_CODES = {"squared": SQUARED, "logistic": LOGISTIC}

# Upper bound on the second derivative in the prediction (the smoothness constant used by
# Frank-Wolfe line searches and by coordinate-descent step sizes).
SMOOTHNESS = np.array([1.0, 0.25])  # indexed by loss code; usable inside kernels


@njit(cache=True, nogil=True)
def _log1pexp(z):
    # log(1 + exp(z)) without overflow for large |z|.
    if z > 0.0:
        return z + math.log1p(math.exp(-z))
    return math.log1p(math.exp(z))


@njit(cache=True, nogil=True)
def _sigmoid(z):
    if z >= 0.0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@njit(cache=True, nogil=True)
def loss_value(code, p, y):
    """Loss of prediction ``p`` against target ``y`` (compiled)."""
    if code == SQUARED:
        r = p - y
        return 0.5 * r * r
    return _log1pexp(-y * p)


@njit(cache=True, nogil=True)
def loss_derivative(code, p, y):
    """Derivative of the loss with respect to the prediction ``p`` (compiled)."""
    if code == SQUARED:
        return p - y
    return -y * _sigmoid(-y * p)


@njit(cache=True, nogil=True)
def loss_second_derivative(code, p, y):
    """Second derivative in ``p`` (compiled); bounded by ``SMOOTHNESS[code]``."""
    if code == SQUARED:
        return 1.0
    s = _sigmoid(y * p)
    return s * (1.0 - s)


def loss_value_np(name, p, y):
    """Vectorised twin of :func:`loss_value` taking the loss by name."""
    p = np.asarray(p, dtype=float)
    y = np.asarray(y, dtype=float)
    if name == "squared":
        return 0.5 * (p - y) ** 2
    if name == "logistic":
        return np.logaddexp(0.0, -y * p)
    raise ValueError(f"unknown loss {name!r}; expected one of {sorted(LOSS_CODES)}")


def loss_derivative_np(name, p, y):
    """Vectorised twin of :func:`loss_derivative`."""
    p = np.asarray(p, dtype=float)
    y = np.asarray(y, dtype=float)
    if name == "squared":
        return p - y
    if name == "logistic":
        return -y * expit(-y * p)
    raise ValueError(f"unknown loss {name!r}; expected one of {sorted(LOSS_CODES)}")

