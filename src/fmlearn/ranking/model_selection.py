"""Evaluation protocol of implicit-feedback recommenders: event splits and the ranking
metrics of a fitted model.

- :func:`per_user_split`: each user's events split at random (e.g. 80/20), every user keeping
  at least one training event;
- :func:`leave_last_out`: each user's last event(s) by timestamp held out;
- :func:`cold_item_split`: a share of the items held out with all their events (cold start);
- :func:`evaluate_ranking`: the metrics of :func:`fmlearn.metrics.ranking_metrics` of a fitted
  model, scored user batch by user batch from its embeddings (bounded memory).

The splits return event positions (``train, test``) to pass to
:meth:`~fmlearn.ranking.Interactions.subset`; they take the users (and items, timestamps) as
arrays or an :class:`~fmlearn.ranking.Interactions`.
"""

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["per_user_split", "leave_last_out", "cold_item_split", "evaluate_ranking"]


def _ids(values, name):
    from .interactions import Interactions

    if isinstance(values, Interactions):
        values = values.users if name == "users" else values.items
    arr = np.asarray(values)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{name} must be a 1-D array of integer ids")
    if arr.size and arr.min() < 0:
        raise ValueError(f"{name} holds a negative id")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: there is nothing to split")
    return arr.astype(np.int64)


def _fraction(test_size):
    if isinstance(test_size, (bool, np.bool_)) or not (
            isinstance(test_size, (float, int, np.floating, np.integer))
            and 0.0 < float(test_size) < 1.0):
        raise ValueError(f"test_size must be a fraction in (0, 1), got {test_size!r}")
    return float(test_size)


def _groups(keys):
    """(order, starts, counts): ``order`` groups equal keys, in key order."""
    order = np.argsort(keys, kind="stable")
    uniq, starts, counts = np.unique(keys[order], return_index=True, return_counts=True)
    return order, starts, counts


def per_user_split(users, test_size=0.2, random_state=None):
    """Split each user's events at random into training and held-out events.

    A user with n events holds out floor(test_size n + 1/2) of them, at most n - 1 (every
    user keeps a training event: none becomes a cold user; a user with one event is all
    training).

    Parameters
    ----------
    users : array-like of int of shape (n_events,), or Interactions
    test_size : float in (0, 1), default=0.2
    random_state : int, RandomState or None

    Returns
    -------
    train, test : int64 arrays of event positions (sorted)

    Examples
    --------
    >>> from fmlearn.ranking import per_user_split
    >>> train, test = per_user_split([0, 0, 0, 0, 0, 1, 1, 2], test_size=0.4, random_state=0)
    >>> len(train), len(test)   # 2 of user 0's 5 events, 1 of user 1's 2, none of user 2's 1
    (5, 3)
    """
    users = _ids(users, "users")
    frac = _fraction(test_size)
    rs = check_random_state(random_state)
    key = rs.random_sample(users.shape[0])
    order = np.lexsort((key, users))
    _, starts, counts = np.unique(users[order], return_index=True, return_counts=True)
    n_test = np.minimum(np.floor(frac * counts + 0.5).astype(np.int64), counts - 1)
    is_test = np.zeros(users.shape[0], dtype=bool)
    take = np.repeat(starts, n_test) + (np.arange(n_test.sum())
                                        - np.repeat(np.cumsum(n_test) - n_test, n_test))
    is_test[order[take]] = True
    return np.flatnonzero(~is_test), np.flatnonzero(is_test)


def leave_last_out(users, timestamps, n_test=1):
    """Hold out each user's last ``n_test`` events by timestamp.

    Equal timestamps are ordered by position (a later event counts as later). A user with at
    most ``n_test`` events keeps them all for training.

    Parameters
    ----------
    users : array-like of int of shape (n_events,), or Interactions
    timestamps : array-like of shape (n_events,)
        Any ordered numbers (Unix times, sequence numbers).
    n_test : int, default=1

    Returns
    -------
    train, test : int64 arrays of event positions (sorted)

    Examples
    --------
    >>> from fmlearn.ranking import leave_last_out
    >>> leave_last_out([0, 0, 1, 0, 1], [5, 9, 1, 7, 3])
    (array([0, 2, 3]), array([1, 4]))
    """
    users = _ids(users, "users")
    t = np.asarray(timestamps)
    if t.shape != users.shape:
        raise ValueError(f"timestamps has shape {t.shape}, expected one per event "
                         f"{users.shape}")
    if t.dtype.kind not in "iuf" or (t.dtype.kind == "f" and not np.all(np.isfinite(t))):
        raise ValueError("timestamps must be finite numbers")
    if isinstance(n_test, (bool, np.bool_)) or not isinstance(n_test, (int, np.integer)) \
            or n_test < 1:
        raise ValueError(f"n_test must be a positive integer, got {n_test!r}")
    order = np.lexsort((np.arange(users.shape[0]), t, users))
    _, starts, counts = np.unique(users[order], return_index=True, return_counts=True)
    k = np.where(counts > n_test, n_test, 0)
    ends = starts + counts
    take = np.repeat(ends - k, k) + (np.arange(k.sum()) - np.repeat(np.cumsum(k) - k, k))
    is_test = np.zeros(users.shape[0], dtype=bool)
    is_test[order[take]] = True
    return np.flatnonzero(~is_test), np.flatnonzero(is_test)


def cold_item_split(items, test_size=0.2, random_state=None):
    """Hold out a share of the items with all their events (the cold-start protocol).

    Parameters
    ----------
    items : array-like of int of shape (n_events,), or Interactions
    test_size : float in (0, 1), default=0.2
        Share of the distinct items held out (rounded; at least one, and at least one item
        stays).
    random_state : int, RandomState or None

    Returns
    -------
    train, test : int64 arrays of event positions (sorted)
    cold_items : int64 array, sorted: the held-out items

    Examples
    --------
    >>> from fmlearn.ranking import cold_item_split
    >>> train, test, cold = cold_item_split([0, 1, 2, 3, 4, 0, 1], test_size=0.2,
    ...                                     random_state=0)
    >>> cold.shape, bool(set(cold) & set([0, 1, 2, 3, 4]) == set(cold))
    ((1,), True)
    """
    items = _ids(items, "items")
    frac = _fraction(test_size)
    distinct = np.unique(items)
    if distinct.shape[0] < 2:
        raise ValueError("cold_item_split needs at least two distinct items")
    n_cold = int(min(max(1, np.floor(frac * distinct.shape[0] + 0.5)), distinct.shape[0] - 1))
    rs = check_random_state(random_state)
    cold = np.sort(rs.permutation(distinct)[:n_cold])
    is_test = np.isin(items, cold)
    return np.flatnonzero(~is_test), np.flatnonzero(is_test), cold


def evaluate_ranking(model, test, *, train=None, users=None, items=None, k=10,
                     user_block=None, item_block=None, memory_budget_mb=256.0):
    """Ranking metrics of a fitted factorization machine on held-out positives.

    Every user with a held-out positive is scored against every item (the model's
    decomposition ``bias + part(user) + part(item) + <query(user), key(item)>``, as in
    :func:`fmlearn.recommend`), batch by batch, and :func:`fmlearn.metrics.ranking_metrics`
    is applied.

    Parameters
    ----------
    model : fitted fmlearn estimator with a factorised form (``FMRanker``, ``FMRegressor``,
        ...).
    test, train : sparse (n_users, n_items) matrices or Interactions
        Held-out positives; training positives, removed from the candidates.
    users, items : sparse matrices of FM rows (one per user, one per item), optional
        Default, when ``test`` is an :class:`~fmlearn.ranking.Interactions`: its
        ``user_rows()`` and ``item_rows()``; else give them or the one-hot blocks.
    k : int, default=10
    user_block, item_block : (start, stop), optional
        One-hot id blocks instead of rows (as in :func:`fmlearn.recommend`).
    memory_budget_mb : float, default=256
        Bound on one batch of scores.

    Returns
    -------
    dict
        As :func:`fmlearn.metrics.ranking_metrics`: ``precision``, ``recall``, ``ndcg``,
        ``map``, ``auc`` and ``n_users``.
    """
    import scipy.sparse as sp

    from .._ranking_metrics import _positives, ranking_metrics
    from ..recommender import _one_hot_rows, _validate_rows, embed_rows, feature_embeddings

    source = test if hasattr(test, "user_rows") else None
    d = int(model.n_features_in_)
    if users is None and user_block is None:
        if source is None:
            raise ValueError("give users (feature rows) or user_block, or pass test as "
                             "Interactions")
        users = source.user_rows()
    if items is None and item_block is None:
        if source is None:
            raise ValueError("give items (feature rows) or item_block, or pass test as "
                             "Interactions")
        items = source.item_rows()
    U = (_one_hot_rows(None, user_block, d, "users") if user_block is not None
         else _validate_rows(model, users, "users"))
    Iv = (_one_hot_rows(None, item_block, d, "items") if item_block is not None
          else _validate_rows(model, items, "items"))
    shape = (U.shape[0], Iv.shape[0])
    T = _positives(test, "test", shape)
    R = _positives(train, "train", shape)
    if R is not None and T.multiply(R).nnz:  # a training positive is never held out
        T = T - T.multiply(R.astype(bool))
        T.eliminate_zeros()
    evaluated = np.flatnonzero(np.diff(T.indptr) > 0)
    e = feature_embeddings(model)
    ie = embed_rows(model, Iv)
    step = max(1, int(memory_budget_mb * 2**20 // (32 * max(1, shape[1]))))
    parts = []
    for a in range(0, evaluated.shape[0], step):
        sel = evaluated[a:a + step]
        ue = embed_rows(model, U[sel] if sp.issparse(U) else U[sel])
        S = e.bias + ue.part[:, None] + ie.part[None, :] + ue.query @ ie.key.T
        parts.append(ranking_metrics(S, T[sel], train=None if R is None else R[sel], k=k,
                                     per_user=True))
    out = {}
    for name in ("precision", "recall", "ndcg", "map", "auc"):
        v = np.concatenate([p[name] for p in parts]) if parts else np.zeros(0)
        v = v[np.isfinite(v)]
        out[name] = float(v.mean()) if v.size else float("nan")
    out["n_users"] = int(sum(p["n_users"] for p in parts))
    return out
