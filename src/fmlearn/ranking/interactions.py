"""Positive events with their users' and items' features, as factorization-machine rows.

:class:`Interactions` is the implicit-feedback data set of :class:`fmlearn.ranking.FMRanker`:
(user, item[, weight]) events, optional side features of users and items (age, genre, ...)
and optional per-event context features (time of day, device, ...). It lays them out as the
FM's feature blocks::

    [ user ids | user features | item ids | item features | context ]

(an id block is one-hot; either can be left out with ``user_identity=False`` /
``item_identity=False``) and gives the rows that :func:`fmlearn.recommend`, ``predict`` and
the ranking metrics take: :meth:`Interactions.user_rows`, :meth:`Interactions.item_rows`,
:meth:`Interactions.rows` and :meth:`Interactions.matrix`. ``FMRanker.fit`` reads the events
straight from the ids, without building one row per event.
"""

import numbers

import numpy as np
import scipy.sparse as sp

from .._data import check_sparse_structure

__all__ = ["Interactions"]


def _ids(values, name, bound, bound_name):
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of integer ids, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) \
                and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"{name} must hold integer ids (0, 1, ...), got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise ValueError(f"{name} holds a negative id ({int(arr.min())}); ids start at 0")
    if bound is not None and arr.size and arr.max() >= bound:
        raise ValueError(f"{name} holds id {int(arr.max())}, outside the declared "
                         f"{bound_name}={bound} (ids must lie in [0, {bound}))")
    return arr


def _count(value, name, minimum):
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral,)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _features(F, name, n_rows, what):
    """A finite float64 CSR matrix of ``n_rows`` rows (or None)."""
    if F is None:
        return None
    if sp.issparse(F):
        check_sparse_structure(F, name)
        F = sp.csr_matrix(F, dtype=np.float64, copy=True)
    else:
        try:
            arr = np.asarray(F, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name} must be numeric: {exc}") from None
        if arr.ndim != 2:
            raise ValueError(f"{name} must be 2-D (one row per {what}), got shape {arr.shape}")
        F = sp.csr_matrix(arr)
    if F.shape[0] != n_rows:
        raise ValueError(f"{name} has {F.shape[0]} rows, expected one per {what} ({n_rows})")
    if F.nnz and not np.all(np.isfinite(F.data)):
        raise ValueError(f"{name} contains NaN or infinity")
    F.sum_duplicates()
    F.eliminate_zeros()
    return F


def _weights(weights, n):
    if weights is None:
        return None
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"weights must be numeric: {exc}") from None
    if w.shape != (n,):
        raise ValueError(f"weights has shape {w.shape}, expected one per event ({n},)")
    if not np.all(np.isfinite(w)):
        raise ValueError("weights contain NaN or infinity")
    if np.any(w < 0):
        raise ValueError("weights must be non-negative (a weight is a count or a confidence)")
    return w


class Interactions:
    """Implicit-feedback events and the features of their users, items and contexts.

    Parameters
    ----------
    users, items : array-like of int, shape (n_events,)
        The user and the item of each positive event (ids from 0). Repeated pairs add up
        (their weights are summed by ``FMRanker.fit``).
    n_users, n_items : int, optional
        Sizes of the id spaces (default: largest id + 1, or the rows of the feature
        matrices). Declare them when some users or items have no event in this set (a test
        set, cold-start items): every set of the same data must share them.
    weights : array-like of shape (n_events,), optional
        Non-negative event weights (play counts, confidences); default 1.
    user_features : {array-like, sparse matrix} of shape (n_users, n_user_features), optional
        Side features of every user (one row per user id).
    item_features : {array-like, sparse matrix} of shape (n_items, n_item_features), optional
        Side features of every item. An item without events is scored through these (cold
        start).
    context : {array-like, sparse matrix} of shape (n_events, n_context_features), optional
        Features of each event other than its user and item (time of day, device, ...).
    user_identity, item_identity : bool, default=True
        Give every user (item) its own one-hot feature. Without it a user (item) is
        described by its side features only.

    Attributes
    ----------
    n_features : int
        Columns of the FM rows.
    user_columns, item_columns, context_columns : (start, stop)
        The blocks of the FM rows: ``[user ids | user features]``, ``[item ids | item
        features]``, ``[context]``.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn.ranking import Interactions
    >>> data = Interactions([0, 0, 1, 2], [1, 2, 0, 1], n_users=3, n_items=4,
    ...                     item_features=np.eye(4)[:, :2])
    >>> data.n_features, data.user_columns, data.item_columns
    (9, (0, 3), (3, 9))
    >>> data.item_rows([1]).toarray()
    array([[0., 0., 0., 0., 1., 0., 0., 0., 1.]])
    >>> data.matrix().toarray()
    array([[0., 1., 1., 0.],
           [1., 0., 0., 0.],
           [0., 1., 0., 0.]])
    """

    def __init__(self, users, items, *, n_users=None, n_items=None, weights=None,
                 user_features=None, item_features=None, context=None, user_identity=True,
                 item_identity=True):
        n_users = _count(n_users, "n_users", 1)
        n_items = _count(n_items, "n_items", 1)
        users = _ids(users, "users", n_users, "n_users")
        items = _ids(items, "items", n_items, "n_items")
        if users.shape != items.shape:
            raise ValueError(f"users and items differ in length ({users.shape[0]} and "
                             f"{items.shape[0]}): one user and one item per event")
        n = users.shape[0]
        n_users = self._size(n_users, users, user_features, "user")
        n_items = self._size(n_items, items, item_features, "item")
        self.users = users
        self.items = items
        self.n_users = n_users
        self.n_items = n_items
        self.weights = _weights(weights, n)
        self.user_features = _features(user_features, "user_features", n_users, "user")
        self.item_features = _features(item_features, "item_features", n_items, "item")
        self.context = _features(context, "context", n, "event")
        self.user_identity = bool(user_identity)
        self.item_identity = bool(item_identity)
        du = (n_users if self.user_identity else 0) + self._width(self.user_features)
        di = (n_items if self.item_identity else 0) + self._width(self.item_features)
        if du == 0:
            raise ValueError("users have no feature: keep user_identity=True or give "
                             "user_features")
        if di == 0:
            raise ValueError("items have no feature: keep item_identity=True or give "
                             "item_features")
        dc = self._width(self.context)
        self.user_columns = (0, du)
        self.item_columns = (du, du + di)
        self.context_columns = (du + di, du + di + dc)
        self.n_features = du + di + dc

    @staticmethod
    def _width(F):
        return 0 if F is None else F.shape[1]

    @staticmethod
    def _size(declared, ids, features, what):
        if declared is not None:
            return declared
        if features is not None and hasattr(features, "shape") and len(features.shape) == 2:
            return int(features.shape[0])
        if ids.size == 0:
            raise ValueError(f"no event and no n_{what}s: declare n_{what}s")
        return int(ids.max()) + 1

    def __len__(self):
        return int(self.users.shape[0])

    def __repr__(self):
        return (f"Interactions({len(self)} events, {self.n_users} users, {self.n_items} items, "
                f"{self.n_features} features)")

    # -- rows of the FM --------------------------------------------------------------------
    def _block_rows(self, ids, n, identity, F, start, what):
        ids = np.arange(n) if ids is None else _ids(ids, what, n, f"n_{what}")
        m = ids.shape[0]
        parts = []
        if identity:
            parts.append(sp.csr_matrix((np.ones(m), (np.arange(m), ids)), shape=(m, n)))
        if F is not None:
            parts.append(F[ids])
        width = sum(p.shape[1] for p in parts)
        blocks = [sp.csr_matrix((m, start))] if start else []
        blocks += parts
        rest = self.n_features - start - width
        if rest:
            blocks.append(sp.csr_matrix((m, rest)))
        X = sp.hstack(blocks, format="csr", dtype=np.float64)
        X.sort_indices()
        return X

    def user_rows(self, users=None):
        """FM rows of users (default: all ``n_users``): their id and side features, zeros
        elsewhere; shape (n, n_features)."""
        return self._block_rows(users, self.n_users, self.user_identity, self.user_features,
                                0, "users")

    def item_rows(self, items=None):
        """FM rows of items (default: all ``n_items``); shape (n, n_features)."""
        return self._block_rows(items, self.n_items, self.item_identity, self.item_features,
                                self.item_columns[0], "items")

    def context_rows(self):
        """The events' context features as FM rows (n_events, n_features), or None."""
        if self.context is None:
            return None
        n = len(self)
        a = self.context_columns[0]
        X = sp.hstack([sp.csr_matrix((n, a)), self.context], format="csr", dtype=np.float64)
        X.sort_indices()
        return X

    def rows(self):
        """One FM row per event: user + item (+ context) features, shape (n_events,
        n_features). ``FMRanker.fit`` does not need them; ``predict`` scores such rows."""
        X = self.user_rows(self.users) + self.item_rows(self.items)
        if self.context is not None:
            X = X + self.context_rows()
        X = sp.csr_matrix(X)
        X.sort_indices()
        return X

    def matrix(self):
        """The (n_users, n_items) matrix of summed event weights (1 per event without
        weights): ``exclude=`` of :func:`fmlearn.recommend`, ``train=``/``test=`` of the
        ranking metrics."""
        w = np.ones(len(self)) if self.weights is None else self.weights
        M = sp.csr_matrix((w, (self.users, self.items)), shape=(self.n_users, self.n_items))
        M.sum_duplicates()
        return M

    def subset(self, index):
        """The events ``index`` (integer positions or a boolean mask) with the same users,
        items, features and id spaces (for train/test splits)."""
        idx = np.asarray(index)
        if idx.dtype == bool:
            if idx.shape != (len(self),):
                raise ValueError(f"a boolean index must have one entry per event ({len(self)})")
            idx = np.flatnonzero(idx)
        idx = _ids(idx, "index", len(self), "the number of events")
        out = object.__new__(Interactions)
        out.__dict__.update(self.__dict__)
        out.users = self.users[idx]
        out.items = self.items[idx]
        out.weights = None if self.weights is None else self.weights[idx]
        out.context = None if self.context is None else self.context[idx]
        return out

    @classmethod
    def from_matrix(cls, matrix, **kwargs):
        """Events from a (n_users, n_items) matrix: each stored non-zero entry is an event
        whose weight is the entry (implicit's and LightFM's ``user_items``)."""
        if not sp.issparse(matrix):
            matrix = np.asarray(matrix, dtype=np.float64)
            if matrix.ndim != 2:
                raise ValueError(f"matrix must be 2-D (users x items), got shape {matrix.shape}")
            matrix = sp.coo_matrix(matrix)
        else:
            check_sparse_structure(matrix, "matrix")
            matrix = sp.coo_matrix(matrix, dtype=np.float64)
            matrix.sum_duplicates()
        matrix.eliminate_zeros()
        for key in ("n_users", "n_items", "weights"):
            if key in kwargs:
                raise TypeError(f"from_matrix takes {key} from the matrix")
        return cls(matrix.row, matrix.col, n_users=matrix.shape[0], n_items=matrix.shape[1],
                   weights=matrix.data, **kwargs)
