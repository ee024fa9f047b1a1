"""Synthetic data with planted truth for the convex FM (Yamada et al. 2017): the §4.1 regression
problem and a low-rank tensor for completion tests (§2.5)."""

import numpy as np
from sklearn.utils import Bunch, check_random_state


def make_cfm_regression(n_samples=1000, n_features=100, noise=0.0, random_state=None):
    """The synthetic regression of Yamada et al. 2017, §4.1, with the planted model.

    x ~ N(0, I_d), y = w0 + w^T x + sum_{l<l'} W_ll' x_l x_l' (+ noise), with w0 ~ N(0, 1),
    w ~ N(0, I) and W_ll' ~ Uniform[0, 1]. W is not positive semi-definite (its centred part
    has eigenvalues of both signs), so a convex FM can only approximate it; the paper uses
    900 samples for training and 100 for testing.

    Parameters
    ----------
    n_samples, n_features : int
    noise : float, default=0.0
        Standard deviation of Gaussian noise added to y.
    random_state : int, RandomState or None

    Returns
    -------
    X : ndarray (n_samples, n_features)
    y : ndarray (n_samples,)
    truth : Bunch with w0, w and W (symmetric, zero diagonal, upper triangle ~ U[0, 1])

    Examples
    --------
    >>> from fmlearn.datasets import make_cfm_regression
    >>> X, y, truth = make_cfm_regression(n_samples=10, n_features=5, random_state=0)
    >>> X.shape, truth.W.shape
    ((10, 5), (5, 5))
    """
    rng = check_random_state(random_state)
    w0 = float(rng.standard_normal())
    w = rng.standard_normal(n_features)
    upper = np.triu(rng.uniform(0.0, 1.0, size=(n_features, n_features)), k=1)
    W = upper + upper.T
    X = rng.standard_normal((n_samples, n_features))
    y = w0 + X @ w + 0.5 * np.einsum("ij,jk,ik->i", X, W, X)
    if noise > 0:
        y = y + noise * rng.standard_normal(n_samples)
    return X, y, Bunch(w0=w0, w=w, W=W)


def make_low_rank_tensor(shape=(15, 15, 15), rank=2, noise=0.0, random_state=None):
    """A planted CP tensor T = sum_r a_r o b_r o c_r (+ noise) and the index of every entry.

    Every unfolding of T has rank <= ``rank``, so T lies in the model of Yamada et al. 2017, Eq. 7
    (one low-rank mode term, no bias). Factors are N(0, 1); T is scaled to unit standard deviation.

    Returns
    -------
    indices : ndarray (prod(shape), len(shape)) of int64, all entries in C order
    values : ndarray (prod(shape),), the entries (with noise)
    T : ndarray of ``shape``, the noise-free tensor
    """
    rng = check_random_state(random_state)
    factors = [rng.standard_normal((n, rank)) for n in shape]
    T = np.zeros(shape)
    for r in range(rank):
        outer = factors[0][:, r]
        for F in factors[1:]:
            outer = np.multiply.outer(outer, F[:, r])
        T += outer
    T /= T.std()
    indices = np.indices(shape).reshape(len(shape), -1).T.astype(np.int64)
    values = T.ravel().copy()
    if noise > 0:
        values += noise * rng.standard_normal(values.shape[0])
    return indices, values, T
