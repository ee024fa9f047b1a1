"""A synthetic click-through stream drawn from a planted field-aware FM (Juan et al. 2016).

Each row has one categorical value per field, drawn from a Zipf-like popularity law as ad and
user ids are; the click is Bernoulli(sigmoid(phi(x))) under a planted FFM whose latent vector
of a feature depends on the partner's field. The planted model is returned, so that a test
can compare a learner's log-loss with the Bayes-optimal one, and passing it back draws more
rows from the same model (a stream of any length in chunks).
"""

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state


class PlantedFFM(NamedTuple):
    """The model of :func:`make_ffm_ctr`: ``phi(x) = w0 + <w, x> + sum_{j<l} <V[j, f(l)],
    V[l, f(j)]> x_j x_l`` on its one-hot rows; ``popularity[f]`` the value distribution of
    field f."""

    w0: float
    w: np.ndarray  # (d,)
    V: np.ndarray  # (d, F, k)
    fields: np.ndarray  # (d,) int32
    popularity: list  # F arrays of probabilities


def planted_scores(X, model):
    """phi(x) of one-hot CSR rows with exactly one feature per field, in field order."""
    X = sp.csr_matrix(X)
    F = len(model.popularity)
    cols = X.indices.reshape(-1, F).astype(np.int64)
    phi = model.w0 + model.w[cols].sum(axis=1)
    for a in range(F):
        for b in range(a + 1, F):
            phi += np.einsum("nk,nk->n", model.V[cols[:, a], b], model.V[cols[:, b], a])
    return phi


def make_ffm_ctr(n_samples, n_fields=4, n_values=50, n_factors=4, *, field_aware=True,
                 scale=1.0, zipf=1.1, base_rate=0.25, model=None, random_state=None):
    """Rows of one-hot categorical fields and clicks drawn from a planted field-aware FM.

    Parameters
    ----------
    n_samples : int
    n_fields : int, default=4
    n_values : int or sequence of int, default=50
        Values (features) per field; field f owns the columns of its values, fields in order.
    n_factors : int, default=4
        k of the planted model.
    field_aware : bool, default=True
        False plants a classic FM (a feature's vector is the same for every partner field),
        which an FM represents exactly.
    scale : float, default=1.0
        Standard deviation of the planted pair terms <v, v'> (the signal's strength).
    zipf : float, default=1.1
        Exponent of the values' popularity, p(rank r) proportional to 1 / r^zipf.
    base_rate : float, default=0.25
        Click rate of the bias alone.
    model : PlantedFFM, optional
        Draw the rows from this model (from an earlier call) instead of a new one.
    random_state : int, RandomState or None

    Returns
    -------
    X : CSR matrix of shape (n_samples, n_features), one 1 per field
    y : ndarray of shape (n_samples,), labels in {0, 1}
    fields : ndarray of shape (n_features,), int32
    model : PlantedFFM
    p : ndarray of shape (n_samples,), the true click probabilities

    Examples
    --------
    >>> from fmlearn.datasets import make_ffm_ctr
    >>> X, y, fields, model, p = make_ffm_ctr(1000, n_fields=3, n_values=10, random_state=0)
    >>> X.shape, int(X.sum(axis=1).max()), fields.tolist()[:12]   # one 1 per field and row
    ((1000, 30), 3, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1])
    """
    rs = check_random_state(random_state)
    if model is None:
        counts = np.broadcast_to(np.asarray(n_values, dtype=np.int64), (n_fields,))
        if np.any(counts < 1) or n_fields < 1:
            raise ValueError("n_fields and n_values must be positive")
        fields = np.repeat(np.arange(n_fields, dtype=np.int32), counts)
        d = int(counts.sum())
        # pair terms of standard deviation ~scale: each of k products of two N(0, s^2)
        s = np.sqrt(scale / np.sqrt(n_factors))
        if field_aware:
            V = rs.normal(0.0, s, size=(d, n_fields, n_factors))
        else:
            V = np.repeat(rs.normal(0.0, s, size=(d, 1, n_factors)), n_fields, axis=1)
        w = rs.normal(0.0, 0.3, size=d)
        popularity = []
        for c in counts:
            p = 1.0 / np.arange(1, c + 1) ** zipf
            popularity.append(p / p.sum())
        model = PlantedFFM(float(np.log(base_rate / (1 - base_rate))), w, V, fields,
                           popularity)
    F = len(model.popularity)
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in model.popularity])])
    cols = np.empty((n_samples, F), dtype=np.int64)
    for f, p in enumerate(model.popularity):
        cols[:, f] = offsets[f] + rs.choice(len(p), size=n_samples, p=p)
    X = sp.csr_matrix((np.ones(n_samples * F), cols.ravel(),
                       np.arange(0, n_samples * F + 1, F)), shape=(n_samples, int(offsets[-1])))
    X.indices = X.indices.astype(np.int32)
    phi = planted_scores(X, model)
    prob = 1.0 / (1.0 + np.exp(-phi))
    y = (rs.random_sample(n_samples) < prob).astype(np.int64)
    return X, y, model.fields.copy(), model, prob
