"""Platt's link (Platt 1999): the scale a and constant b of a decision a s + b fitted by
weighted logistic regression of the labels on the scores s (not an estimator module).

scikit-learn's own Platt fit is private (``sklearn.calibration._sigmoid_calibration``) and its
public form, ``CalibratedClassifierCV``, refits the estimator on folds; this two-parameter
Newton fit on the already-fitted scores keeps the scale a >= 0 (never flipping the order)."""

import numpy as np
from scipy.special import expit, logit


def platt_targets(y, sw):
    """Platt's smoothed targets, (n+ + 1) / (n+ + 2) for a positive and 1 / (n- + 2) for a
    negative (n+-, the classes' weights): they keep the maximum-likelihood (a, b) finite when
    the scores separate the classes (Platt 1999, §2.2)."""
    pos = y > 0
    n_pos, n_neg = float(np.dot(sw, pos)), float(np.dot(sw, ~pos))
    return np.where(pos, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))


def _loss(theta, z, t, w):
    f = theta[0] * z + theta[1]
    return float(np.dot(w, t * np.logaddexp(0.0, -f) + (1.0 - t) * np.logaddexp(0.0, f)))


def platt_link(s, y, sw, max_iter=100):
    """(a, b) minimising the weighted cross-entropy of sigmoid(a s + b) against
    :func:`platt_targets`, with a >= 0; None when the rows have no weight of both classes or
    their scores no spread (nothing to fit).

    Newton's method with a backtracking line search on the scores standardised to mean 0 and
    standard deviation 1 (the loss is convex, and with the smoothed targets its minimiser is
    finite). When the unconstrained a is negative (the scores rank backwards), the minimiser
    over a >= 0 has a = 0 and b the log-odds of the mean target: the decision does not flip
    the scores' order, it keeps the constant of the classes' weights."""
    pos = y > 0
    if not (np.dot(sw, pos) > 0 and np.dot(sw, ~pos) > 0):
        return None
    w = sw / sw.sum()
    t = platt_targets(y, sw)
    mu = float(np.dot(w, s))
    sd = float(np.sqrt(np.dot(w, (s - mu) ** 2)))
    if not sd > 1e-12 * max(1.0, abs(mu)):
        return None
    z = (s - mu) / sd
    theta = np.array([0.0, float(logit(np.dot(w, t)))])
    loss = _loss(theta, z, t, w)
    for _ in range(max_iter):
        p = expit(theta[0] * z + theta[1])
        r = w * (p - t)
        g = np.array([np.dot(r, z), r.sum()])
        h = w * p * (1.0 - p)
        H = np.array([[np.dot(h, z * z), np.dot(h, z)], [np.dot(h, z), h.sum()]])
        step = np.linalg.solve(H + 1e-12 * np.eye(2), g)
        lam, slope = 1.0, float(np.dot(g, step))
        new = _loss(theta - step, z, t, w)
        while new > loss - 1e-4 * lam * slope and lam > 1e-10:
            lam /= 2.0
            new = _loss(theta - lam * step, z, t, w)
        if new > loss:  # no descent left: at the minimiser to rounding
            break
        theta, loss = theta - lam * step, new
        if np.max(np.abs(lam * step)) < 1e-10:
            break
    if theta[0] <= 0:
        return 0.0, float(logit(np.dot(w, t)))
    return float(theta[0] / sd), float(theta[1] - theta[0] * mu / sd)
