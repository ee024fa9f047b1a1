"""Ranking metrics of implicit-feedback recommenders (exported by :mod:`fmlearn.metrics`).

Every metric follows one protocol: a user is evaluated when it has at least one held-out
positive (a stored entry of ``test`` that is not also in ``train``: a training positive is
never a candidate, so a repeated pair is not held out); its candidates are all items except
its training positives (the stored entries of ``train``); its top-k list is the k
candidates of highest score, equal scores ordered by the smaller item index (as
:func:`fmlearn.recommend` orders them). With h_r = 1 when the item at rank r (from 0) is a
held-out positive and T the user's held-out positives:

- precision@k = sum_r h_r / k (LightFM's ``precision_at_k``);
- recall@k = sum_r h_r / |T| (LightFM's ``recall_at_k``);
- NDCG@k = sum_r h_r / log2(r + 2), divided by its largest value sum_{r < min(k, |T|)}
  1 / log2(r + 2) (implicit's ``ndcg``);
- MAP@k: the mean over users of sum_r h_r P@(r + 1) / min(k, |T|) (implicit's ``map``);
- AUC: the probability that a held-out positive scores above a candidate that is not one,
  ties counting one half (LightFM's ``auc_score``); a user whose every candidate is
  held out has no AUC and is left out of its mean.

Each function returns the mean over the evaluated users; :func:`ranking_metrics` gives all of
them at once, optionally per user. A user with fewer than k candidates has empty slots (no
hit), and k may not exceed the number of items.
"""

import numpy as np
import scipy.sparse as sp
from scipy.stats import rankdata

__all__ = ["precision_at_k", "recall_at_k", "ndcg_at_k", "map_at_k", "ranking_auc",
           "ranking_metrics", "top_k_items"]

_METRICS = ("precision", "recall", "ndcg", "map", "auc")


def _positives(M, name, shape):
    """``M`` (sparse, dense, or anything with a ``matrix()`` method such as
    :class:`fmlearn.ranking.Interactions`) as a CSR pattern of shape ``shape``."""
    if M is None:
        return None
    if hasattr(M, "matrix") and callable(M.matrix) and not sp.issparse(M):
        M = M.matrix()
    if sp.issparse(M):
        from ._data import check_sparse_structure

        check_sparse_structure(M, name)
        M = sp.csr_matrix(M, dtype=np.float64, copy=True)
    else:
        M = np.asarray(M, dtype=np.float64)
        if M.ndim != 2:
            raise ValueError(f"{name} must be a 2-D (n_users, n_items) matrix, got shape "
                             f"{M.shape}")
        M = sp.csr_matrix(M)
    if M.shape != shape:
        raise ValueError(f"{name} has shape {M.shape}, expected (n_users, n_items) = {shape}")
    if M.nnz and not np.all(np.isfinite(M.data)):
        raise ValueError(f"{name} contains NaN or infinity")
    M.sum_duplicates()
    M.eliminate_zeros()
    M.sort_indices()
    return M


def top_k_items(scores, k, exclude=None):
    """Top-k items per row of a dense score matrix, best first, ties to the smaller index;
    ``exclude`` (CSR pattern) removes items. Slots without a candidate hold -1."""
    S = np.array(scores, dtype=np.float64)
    n, m = S.shape
    if exclude is not None and exclude.nnz:
        S[np.repeat(np.arange(n), np.diff(exclude.indptr)), exclude.indices] = -np.inf
    if k < m:
        kth = -np.partition(-S, k - 1, axis=1)[:, k - 1:k]
    else:
        kth = S.min(axis=1, keepdims=True)
    above = S > kth
    tied = S == kth
    room = k - above.sum(axis=1, keepdims=True)
    keep = above | (tied & (np.cumsum(tied, axis=1) <= room))
    cols = np.nonzero(keep)[1].reshape(n, k)
    top = np.take_along_axis(S, cols, axis=1)
    order = np.argsort(-top, axis=1, kind="stable")
    cols = np.take_along_axis(cols, order, axis=1)
    cols[np.isneginf(np.take_along_axis(top, order, axis=1))] = -1
    return cols


def _check_k(k, n_items):
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if k > n_items:
        raise ValueError(f"k={k} exceeds the number of items ({n_items}): precision@k would "
                         "count slots that no item can fill")
    return int(k)


def _inputs(scores, test, train, k):
    """(scores or None, top lists or None, test CSR, train CSR or None, k)."""
    top = None
    if hasattr(scores, "indices") and not isinstance(scores, np.ndarray):  # Recommendations
        top = np.asarray(scores.indices)
        scores = None
    else:
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim != 2:
            raise ValueError(f"scores must be a 2-D (n_users, n_items) array, got shape "
                             f"{scores.shape}")
        if not np.all(np.isfinite(scores)):
            raise ValueError("scores contain NaN or infinity")
    if top is not None:
        if top.ndim != 2 or top.dtype.kind not in "iu":
            raise ValueError("the recommendations' indices must be a 2-D integer array")
        if test is None or not (sp.issparse(test) or hasattr(test, "shape")
                                or hasattr(test, "matrix")):
            raise ValueError("test must be a (n_users, n_items) matrix")
        n_items = (test.matrix().shape[1] if hasattr(test, "matrix") and not sp.issparse(test)
                   else test.shape[1])
        shape = (top.shape[0], n_items)
        if top.size and (top.max() >= n_items or top.min() < -1):
            raise ValueError(f"the recommendations hold an item index outside [0, {n_items})")
    else:
        shape = scores.shape
    test = _positives(test, "test", shape)
    if test is None:
        raise ValueError("test (the held-out positives) is required")
    train = _positives(train, "train", shape)
    if train is not None and test.multiply(train).nnz:  # never a candidate: not held out
        test = test - test.multiply(train.astype(bool))
        test.eliminate_zeros()
    if top is not None:
        k = _check_k(k, shape[1])
        if top.shape[1] < k:
            raise ValueError(f"the recommendations hold {top.shape[1]} items per user, fewer "
                             f"than k={k}")
        top = top[:, :k]
    else:
        k = _check_k(k, shape[1])
    return scores, top, test, train, k


def ranking_metrics(scores, test, *, train=None, k=10, per_user=False):
    """Precision@k, recall@k, NDCG@k, MAP@k and AUC of a score matrix (see the module).

    Parameters
    ----------
    scores : array-like of shape (n_users, n_items), or Recommendations
        The model's scores of every (user, item) pair; or the output of
        :func:`fmlearn.recommend` (top lists computed with ``exclude=train``; no AUC then).
    test : sparse matrix or array of shape (n_users, n_items), or Interactions
        Held-out positives (stored non-zero entries).
    train : same kind, optional
        Training positives: removed from every user's candidates.
    k : int, default=10
    per_user : bool, default=False
        Return per-user values instead of means.

    Returns
    -------
    dict
        ``"precision"``, ``"recall"``, ``"ndcg"``, ``"map"``, ``"auc"`` (means over the
        evaluated users; ``"auc"`` None for top lists) and ``"n_users"``. With
        ``per_user=True`` each is an array over the evaluated users, listed in ``"users"``
        (AUC NaN where a user has no candidate that is not held out).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from fmlearn.metrics import ranking_metrics
    >>> scores = np.array([[0.9, 0.8, 0.1, 0.3], [0.2, 0.1, 0.7, 0.4]])
    >>> test = sp.csr_matrix(np.array([[0, 1, 0, 0], [0, 0, 0, 1]]))
    >>> train = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 0, 0, 0]]))
    >>> m = ranking_metrics(scores, test, train=train, k=2)
    >>> m["precision"], m["recall"], round(m["ndcg"], 4), round(m["auc"], 4)
    (0.5, 1.0, 0.8155, 0.8333)
    """
    scores, top, test, train, k = _inputs(scores, test, train, k)
    n_users = test.shape[0]
    n_test = np.diff(test.indptr)
    users = np.flatnonzero(n_test > 0)
    if top is None:
        top = np.empty((n_users, k), dtype=np.int64)
        step = max(1, int(2**24 // max(1, scores.shape[1])))
        for a in range(0, n_users, step):
            b = min(n_users, a + step)
            top[a:b] = top_k_items(scores[a:b], k, None if train is None else train[a:b])
    sub = top[users]
    T = test[users]
    n_items = test.shape[1]
    # a recommended (row, item) is a hit when its key is among the held-out keys (sorted)
    held = np.repeat(np.arange(users.shape[0], dtype=np.int64), np.diff(T.indptr)) * n_items \
        + T.indices
    keys = np.arange(users.shape[0], dtype=np.int64)[:, None] * n_items + sub
    at = np.minimum(np.searchsorted(held, keys), max(held.shape[0] - 1, 0))
    hits = ((sub >= 0) & (held[at] == keys) if held.size else np.zeros(sub.shape, bool))
    hits = hits.astype(np.float64)
    nt = n_test[users].astype(np.float64)
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = np.cumsum(discount)[np.minimum(nt, k).astype(np.int64) - 1]
    prec_at_r = np.cumsum(hits, axis=1) / np.arange(1, k + 1)
    out = {
        "precision": hits.sum(axis=1) / k,
        "recall": hits.sum(axis=1) / nt,
        "ndcg": hits @ discount / ideal,
        "map": (hits * prec_at_r).sum(axis=1) / np.minimum(nt, k),
        "auc": None if scores is None else _auc(scores, test, train, users),
    }
    if per_user:
        out["users"] = users
        out["n_users"] = int(users.shape[0])
        return out
    res = {}
    for name in _METRICS:
        v = out[name]
        if v is None:
            res[name] = None
        else:
            v = v[np.isfinite(v)]
            res[name] = float(v.mean()) if v.size else float("nan")
    res["n_users"] = int(users.shape[0])
    return res


def _auc(scores, test, train, users):
    out = np.full(users.shape[0], np.nan)
    n_items = scores.shape[1]
    for t, u in enumerate(users):
        cand = np.ones(n_items, dtype=bool)
        if train is not None:
            cand[train.indices[train.indptr[u]:train.indptr[u + 1]]] = False
        pos = np.zeros(n_items, dtype=bool)
        pos[test.indices[test.indptr[u]:test.indptr[u + 1]]] = True
        s = scores[u, cand]
        p = pos[cand]
        n_pos = int(p.sum())
        n_neg = s.shape[0] - n_pos
        if n_neg == 0:
            continue
        ranks = rankdata(s)
        out[t] = (ranks[p].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)
    return out


def _one(name, scores, test, train, k):
    return ranking_metrics(scores, test, train=train, k=k)[name]


def precision_at_k(scores, test, *, train=None, k=10):
    """Mean over users of the share of their top k that are held-out positives (see
    :func:`ranking_metrics`)."""
    return _one("precision", scores, test, train, k)


def recall_at_k(scores, test, *, train=None, k=10):
    """Mean over users of the share of their held-out positives in their top k."""
    return _one("recall", scores, test, train, k)


def ndcg_at_k(scores, test, *, train=None, k=10):
    """Mean over users of the normalised discounted cumulative gain of their top k."""
    return _one("ndcg", scores, test, train, k)


def map_at_k(scores, test, *, train=None, k=10):
    """Mean over users of the average precision of their top k, over min(k, |held-out|)."""
    return _one("map", scores, test, train, k)


def ranking_auc(scores, test, *, train=None):
    """Mean over users of the AUC of their held-out positives against their other
    candidates (needs full scores)."""
    if hasattr(scores, "indices") and not isinstance(scores, np.ndarray):
        raise ValueError("the AUC needs every item's score, not top-k recommendations")
    return ranking_metrics(scores, test, train=train, k=1)["auc"]
