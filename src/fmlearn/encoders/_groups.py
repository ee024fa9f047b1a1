"""Feature groups (libFM's ``-meta``) from one-hot feature names."""

import numpy as np


def feature_groups(feature_names, sep="="):
    """Feature groups for the classic FM's ``groups`` from ``"<block><sep><value>"`` names.

    Features whose names share the part before ``sep`` form one group, numbered in the order
    the blocks first appear: on :func:`fmlearn.datasets.load_movielens_100k`'s
    ``feature_names`` the one-hot users are group 0 and the items group 1, and with
    ``side_features=True`` each side block (``user_age``, ``user_gender``, ...,
    ``item_genre``, ``item_decade``) is a group of its own. A name without ``sep`` is a block
    of its own name. The result is what libFM's ``-meta`` file holds (one group id per
    feature) and can be passed as ``FMRegressor(groups=...)``.

    Parameters
    ----------
    feature_names : sequence of str
    sep : str, default="="

    Returns
    -------
    groups : ndarray of shape (n_features,), int64
    names : list of str
        The block name of each group.

    Examples
    --------
    >>> from fmlearn.encoders import feature_groups
    >>> groups, names = feature_groups(["user=1", "user=2", "item=7", "user_age=18-24"])
    >>> groups.tolist(), names
    ([0, 0, 1, 2], ['user', 'item', 'user_age'])
    """
    if isinstance(feature_names, str):
        raise TypeError("feature_names must be a sequence of names, not one string")
    blocks = [str(name).split(sep, 1)[0] for name in feature_names]
    if not blocks:
        raise ValueError("feature_names is empty")
    ids = {}
    groups = np.array([ids.setdefault(b, len(ids)) for b in blocks], dtype=np.int64)
    return groups, list(ids)
