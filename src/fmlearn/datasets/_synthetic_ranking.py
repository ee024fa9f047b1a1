"""Implicit feedback from a planted preference model (users' positive events only)."""

import numpy as np
from sklearn.utils import Bunch, check_random_state


def make_implicit_feedback(n_users=200, n_items=300, n_events=6000, rank=4, *,
                           n_item_features=8, popularity=1.0, sharpness=3.0,
                           random_state=None):
    """Positive (user, item) events drawn from a planted low-rank preference model.

    User u prefers item i by the utility ``s_ui = b_i + sharpness <p_u, q_i>`` with
    p_u, q_i ~ N(0, I_rank / rank) and an item popularity ``b_i = popularity * log(1 / r_i)``,
    r_i a random permutation of 1..n_items (Zipf-like: a few items draw most events). Each
    event picks a user uniformly and an item with probability proportional to exp(s_ui), so
    a user's events concentrate on its best items; repeated (user, item) pairs are kept as
    repeated events. The items' side features are the signs of ``n_item_features`` random
    projections of q_i (in {0, 1}): they carry the items' tastes, so that a model can score
    an item it never saw (cold start).

    Parameters
    ----------
    n_users, n_items, n_events : int
    rank : int
        Dimension of the planted preferences.
    n_item_features : int, default=8
    popularity : float, default=1.0
        Weight of the items' popularity in the utility (0: none).
    sharpness : float, default=3.0
        Weight of the personal taste in the utility.
    random_state : int, RandomState or None

    Returns
    -------
    Bunch with ``user_ids``, ``item_ids`` (n_events,) int64 ids of the events;
    ``item_features`` (n_items, n_item_features) float64 of 0/1; the planted
    ``user_factors`` (n_users, rank), ``item_factors`` (n_items, rank), ``item_popularity``
    (n_items,) and ``utility`` (n_users, n_items).

    Examples
    --------
    >>> from fmlearn.datasets import make_implicit_feedback
    >>> data = make_implicit_feedback(n_users=50, n_items=80, n_events=1000, random_state=0)
    >>> data.user_ids.shape, data.item_features.shape, data.utility.shape
    ((1000,), (80, 8), (50, 80))
    """
    for name, value in (("n_users", n_users), ("n_items", n_items), ("n_events", n_events),
                        ("rank", rank)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    rs = check_random_state(random_state)
    P = rs.normal(0.0, 1.0 / np.sqrt(rank), (n_users, rank))
    Q = rs.normal(0.0, 1.0 / np.sqrt(rank), (n_items, rank))
    b = popularity * np.log(1.0 / (rs.permutation(n_items) + 1.0))
    S = b[None, :] + sharpness * (P @ Q.T)
    prob = np.exp(S - S.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    users = rs.randint(0, n_users, size=n_events).astype(np.int64)
    cdf = np.cumsum(prob, axis=1)
    u = rs.random_sample(n_events)
    items = np.minimum((cdf[users] < u[:, None]).sum(axis=1), n_items - 1).astype(np.int64)
    proj = rs.normal(size=(rank, n_item_features))
    F = (Q @ proj > 0).astype(np.float64)
    return Bunch(user_ids=users, item_ids=items, item_features=F, user_factors=P, item_factors=Q,
                 item_popularity=b, utility=S)
