"""A stream drawn from a planted compact convexified FM (Zhang et al. 2018, §3.1), for regret tests.

The planted matrix C* = sum_k s_k u_k u_k' (orthonormal u_k in R^(d+1), signs s_k) has trace
norm exactly ``trace_norm``; rows are either sparse Gaussian (each feature present with
probability ``density``) or one-hot over ``fields`` (one active feature per field, like the
user/item encoding of Zhang et al. 2018, §4.2). Targets are y = 1/2 x^' C* x^ + noise (regression)
or labels drawn from the logistic model P(y = 1 | x) = sigmoid(1/2 x^' C* x^) (classification), so
C* is a comparator inside the decision set whenever ``delta >= trace_norm``.
"""

import numpy as np
import scipy.sparse as sp
from scipy.special import expit
from sklearn.utils import check_random_state


def make_ccfm_stream(n_samples=10000, n_features=20, *, rank=3, trace_norm=5.0, density=0.3,
                     fields=None, noise=0.1, task="regression", self_interaction=True,
                     random_state=None):
    """Rows, targets and the planted augmented matrix of a CCFM.

    Parameters
    ----------
    n_samples, n_features : int
    rank : int, default=3
        Rank of the planted C*.
    trace_norm : float, default=5.0
        ||C*||_tr (the eigenvalue magnitudes are drawn at random and rescaled to sum to it).
    density : float, default=0.3
        Probability that a feature is present in a row (sparse Gaussian rows).
    fields : sequence of int or None, default=None
        If given, rows are one-hot: one feature from each field of these sizes (they must sum
        to ``n_features``), with value 1.
    noise : float, default=0.1
        Standard deviation of Gaussian noise (regression).
    task : {"regression", "classification"}, default="regression"
    self_interaction : bool, default=True
        Whether the planted model includes the terms C*_jj x_j^2.
    random_state : int, RandomState or None

    Returns
    -------
    X : csr_matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
        Targets, or labels in {-1, +1}.
    C : ndarray of shape (n_features + 1, n_features + 1)
        The planted augmented matrix [[Z, w], [w', 2 w0]].

    Examples
    --------
    >>> from fmlearn.datasets import make_ccfm_stream
    >>> X, y, C = make_ccfm_stream(100, 8, rank=2, trace_norm=3.0, random_state=0)
    >>> X.shape, y.shape, C.shape
    ((100, 8), (100,), (9, 9))
    >>> import numpy as np; round(float(np.abs(np.linalg.eigvalsh(C)).sum()), 6)
    3.0
    """
    rng = check_random_state(random_state)
    if task not in ("regression", "classification"):
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}")
    D = n_features + 1
    if not 1 <= rank <= D:
        raise ValueError(f"rank must be between 1 and n_features + 1 = {D}, got {rank}")
    Q, _ = np.linalg.qr(rng.standard_normal((D, rank)))
    mags = rng.uniform(0.5, 1.5, size=rank)
    signs = rng.choice([-1.0, 1.0], size=rank)
    lam = signs * mags / mags.sum() * trace_norm
    C = (Q * lam) @ Q.T
    if fields is not None:
        fields = np.asarray(fields, dtype=np.int64)
        if fields.sum() != n_features:
            raise ValueError(f"fields sum to {fields.sum()}, not n_features={n_features}")
        offsets = np.concatenate([[0], np.cumsum(fields)[:-1]])
        cols = np.column_stack([off + rng.randint(0, size, n_samples)
                                for off, size in zip(offsets, fields, strict=True)])
        nf = len(fields)
        X = sp.csr_matrix((np.ones(n_samples * nf), cols.ravel(),
                           np.arange(0, n_samples * nf + 1, nf)), shape=(n_samples, n_features))
    else:
        mask = rng.random_sample((n_samples, n_features)) < density
        vals = rng.standard_normal((n_samples, n_features)) * mask
        X = sp.csr_matrix(vals)
    X.sort_indices()
    f = _ccfm_scores(X, Q, lam, self_interaction)
    if task == "regression":
        y = f + noise * rng.standard_normal(n_samples)
    else:
        y = np.where(rng.random_sample(n_samples) < expit(f), 1.0, -1.0)
    return X, y, C


def _ccfm_scores(X, Q, lam, self_interaction):
    """1/2 x^' C x^ for every row (minus the self-interactions when excluded), from the
    factors C = Q diag(lam) Q' in O(nnz * rank): never an n x (d+1) or (d+1) x (d+1) product."""
    n = X.shape[0]
    Xh = sp.hstack([X, np.ones((n, 1))]).tocsr()
    P = np.asarray(Xh @ Q)
    f = 0.5 * (P * P) @ lam
    if not self_interaction:
        diag = (Q[:-1] * Q[:-1]) @ lam
        f -= 0.5 * np.asarray(X.multiply(X) @ diag).ravel()
    return f
