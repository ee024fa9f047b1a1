"""Index encoders that turn tensor completion and multi-view completion into FM regression
(seed 004 §2.5 and §4.3).

Both map rows of integer indices to sparse one-hot feature rows, so that completing a tensor
(or a set of views) is ``model.fit(enc.fit_transform(indices), values)`` followed by
``model.predict(enc.transform(new_indices))``. They learn nothing from the values; ``fit``
only fixes the sizes (given, or one past the largest index seen), so new indices encode into
the same columns.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted


def _check_indices(X, n_cols, name):
    try:
        arr = np.asarray(X)
    except Exception as exc:  # pragma: no cover - numpy raises many types here
        raise TypeError(f"{name} expects an integer array of indices: {exc}") from None
    if arr.ndim != 2 or arr.shape[1] != n_cols:
        raise ValueError(f"{name} expects an array of shape (n_samples, {n_cols}), "
                         f"got shape {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name}: indices must be whole numbers")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: indices must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise ValueError(f"{name}: indices must be non-negative")
    return arr


def _check_sizes(sizes, n, name):
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) != n or any(s < 1 for s in sizes):
        raise ValueError(f"{name} must hold {n} positive integers, got {sizes}")
    return sizes


def _one_hot_rows(cols, d):
    """CSR with a 1 at ``cols[i, k]`` for every row i and every k (distinct columns per row)."""
    n, k = cols.shape
    indptr = np.arange(0, n * k + 1, k, dtype=np.int64)
    order = np.argsort(cols, axis=1, kind="stable")
    indices = np.take_along_axis(cols, order, axis=1).ravel().astype(np.int32)
    return sp.csr_matrix((np.ones(n * k), indices, indptr), shape=(n, d))


class TensorEncoder(TransformerMixin, BaseEstimator):
    """Tensor completion as a convex FM: index tuples -> the features of seed 004 §2.5.

    For an N-way tensor of shape (n_1, ..., n_N), the entry (i_1, ..., i_N) becomes

        x = [x^(1); ...; x^(N)],   x^(m) = [e_{i_m} (n_m entries); e_{u_m} (prod_{l != m} n_l)]

    where u_m is the column of the entry in the mode-m unfolding (Lemma 2; for N = 3,
    u_1 = j + n_2 k, u_2 = k + n_3 i, u_3 = i + n_1 j, 0-based). With W block-diagonal over
    the modes, 1/2 tr(W (x x^T - diag(x o x))) = sum_m [M_(m)^(m)]_{i_m, u_m} and the trace
    budget bounds the sum of the nuclear norms of the unfoldings (Lemma 3): the convex Tucker
    completion of Eq. 7. Each row has 2N non-zeros; d = sum_m n_m + sum_m prod_{l != m} n_l.

    Lemma 3 makes W block-diagonal over the modes and Eq. 14 puts the bias on the n_m blocks
    only: pass ``interaction_groups=enc.groups_, linear_features=enc.linear_features_`` to
    :class:`~fmlearn.ConvexFMRegressor`. (With one unrestricted W, two modes' unfolding
    indices together identify an entry, and the model memorizes instead of completing.)

    Parameters
    ----------
    shape : tuple of int or None, default=None
        Tensor shape; None learns it from ``fit`` (one past the largest index of each mode).

    Attributes
    ----------
    shape_ : tuple of int
    n_features_out_ : int
    linear_features_ : ndarray of int
        Columns of the n_m blocks (the Eq. 14 bias).
    blocks_ : list of (start, stop)
        Column ranges [e_{i_1} block, unfolding-1 block, e_{i_2} block, ...].
    groups_ : list of ndarray of int
        Columns of each mode (its two blocks): the diagonal blocks of W (Lemma 3).

    References
    ----------
    M. Yamada et al. Convex factorization machine for regression, seed 004 §2.5, Eq. 7, 14,
    Lemma 2-3.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn.encoders import TensorEncoder
    >>> enc = TensorEncoder(shape=(2, 3, 4)).fit(np.zeros((1, 3), dtype=int))
    >>> Xe = enc.transform(np.array([[1, 2, 3]]))
    >>> Xe.shape, Xe.nnz
    ((1, 35), 6)
    """

    def __init__(self, shape=None):
        self.shape = shape

    def fit(self, X, y=None):
        """Fix the tensor shape (``shape`` or learned from the indices ``X``)."""
        if self.shape is not None:
            if isinstance(self.shape, numbers.Integral):
                raise ValueError("shape must be a tuple of mode sizes, not an integer")
            order = len(tuple(self.shape))
            if order < 2:
                raise ValueError(f"a tensor needs at least 2 modes, shape={self.shape}")
            shape = _check_sizes(self.shape, order, "shape")
            _check_indices(X, order, "TensorEncoder.fit")
        else:
            arr = np.asarray(X)
            if arr.ndim != 2 or arr.shape[1] < 2:
                raise ValueError("TensorEncoder.fit expects index tuples of shape "
                                 f"(n_samples, n_modes >= 2), got shape {arr.shape}")
            arr = _check_indices(arr, arr.shape[1], "TensorEncoder.fit")
            if arr.shape[0] == 0:
                raise ValueError("TensorEncoder.fit needs at least one index tuple or a shape")
            shape = tuple(int(v) + 1 for v in arr.max(axis=0))
        self.shape_ = shape
        N = len(shape)
        blocks, start, linear = [], 0, []
        for m in range(N):
            others = int(np.prod([shape[o] for o in range(N) if o != m], dtype=np.int64))
            blocks.append((start, start + shape[m]))
            linear.append(np.arange(start, start + shape[m]))
            start += shape[m]
            blocks.append((start, start + others))
            start += others
        self.blocks_ = blocks
        self.groups_ = [np.arange(blocks[2 * m][0], blocks[2 * m + 1][1]) for m in range(N)]
        self.n_features_out_ = start
        self.linear_features_ = np.concatenate(linear)
        return self

    def transform(self, X):
        """CSR features (n_samples, n_features_out_), one row per index tuple."""
        check_is_fitted(self, "shape_")
        shape = self.shape_
        N = len(shape)
        idx = _check_indices(X, N, "TensorEncoder.transform")
        too_big = idx >= np.asarray(shape)
        if np.any(too_big):
            row, mode = np.argwhere(too_big)[0]
            raise ValueError(f"index {idx[row, mode]} of mode {mode} is out of range for "
                             f"shape {shape} (row {row})")
        cols = np.empty((idx.shape[0], 2 * N), dtype=np.int64)
        for m in range(N):
            cols[:, 2 * m] = self.blocks_[2 * m][0] + idx[:, m]
            # Mode-m unfolding column: the other modes in cyclic order m+1, m+2, ..., the
            # first varying fastest (seed 004 Lemma 2).
            u = np.zeros(idx.shape[0], dtype=np.int64)
            radix = 1
            for step in range(1, N):
                o = (m + step) % N
                u += radix * idx[:, o]
                radix *= shape[o]
            cols[:, 2 * m + 1] = self.blocks_[2 * m + 1][0] + u
        return _one_hot_rows(cols, self.n_features_out_)


class MultiViewEncoder(TransformerMixin, BaseEstimator):
    """Multi-view completion as a convex FM: (block, row, column) -> one-hot (seed 004 §4.3).

    Several matrices that share their columns (e.g. drugs) are stacked vertically (A of
    §4.3); each belongs to a view (e.g. gene expression, toxicity). The observed entry
    (b, r, c) of block b becomes

        x = [e_{offset_b + r} (sum of block rows); e_c (n_cols); e_{view of b} (n_views)]

    Parameters
    ----------
    block_rows : sequence of int
        Rows of each stacked matrix (e.g. (1106, 3, 1106, 3, 1106, 3) in §4.3).
    n_cols : int
        Shared number of columns.
    block_views : sequence of int or None, default=None
        View of each block (e.g. (0, 1, 0, 1, 0, 1)); None gives every block its own view.

    Attributes
    ----------
    row_offsets_ : ndarray of int, the first stacked row of each block
    n_views_ : int
    n_features_out_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn.encoders import MultiViewEncoder
    >>> enc = MultiViewEncoder(block_rows=(3, 2), n_cols=4).fit(None)
    >>> enc.transform(np.array([[1, 0, 2]])).indices.tolist()   # row 3 + 0, col 5 + 2, view 9 + 1
    [3, 7, 10]
    """

    def __init__(self, block_rows=(1,), n_cols=1, block_views=None):
        self.block_rows = block_rows
        self.n_cols = n_cols
        self.block_views = block_views

    def fit(self, X=None, y=None):
        """Fix the layout from the parameters (``X`` is not needed)."""
        rows = tuple(self.block_rows)
        rows = _check_sizes(rows, len(rows), "block_rows")
        if not rows:
            raise ValueError("block_rows must list at least one block")
        if not isinstance(self.n_cols, numbers.Integral) or self.n_cols < 1:
            raise ValueError(f"n_cols must be a positive integer, got {self.n_cols!r}")
        if self.block_views is None:
            views = np.arange(len(rows))
        else:
            views = np.asarray(self.block_views)
            if views.shape != (len(rows),) or views.dtype.kind not in "iu" or views.min() < 0:
                raise ValueError("block_views must hold one non-negative integer per block")
        self.row_offsets_ = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64)
        self.n_rows_ = int(np.sum(rows))
        self.block_views_ = views.astype(np.int64)
        self.n_views_ = int(views.max()) + 1
        self.n_features_out_ = self.n_rows_ + int(self.n_cols) + self.n_views_
        if X is not None:
            self.transform(X)  # validates the indices
        return self

    def transform(self, X):
        """CSR features (n_samples, n_features_out_) with three ones per row."""
        check_is_fitted(self, "row_offsets_")
        idx = _check_indices(X, 3, "MultiViewEncoder.transform")
        b, r, c = idx[:, 0], idx[:, 1], idx[:, 2]
        rows = np.asarray(tuple(self.block_rows))
        if np.any(b >= rows.shape[0]):
            raise ValueError(f"block index out of range (there are {rows.shape[0]} blocks)")
        if np.any(r >= rows[b]):
            i = int(np.flatnonzero(r >= rows[b])[0])
            raise ValueError(f"row {r[i]} is out of range for block {b[i]} "
                             f"({rows[b[i]]} rows)")
        if np.any(c >= self.n_cols):
            raise ValueError(f"column index out of range (n_cols={self.n_cols})")
        cols = np.column_stack([self.row_offsets_[b] + r, self.n_rows_ + c,
                                self.n_rows_ + int(self.n_cols) + self.block_views_[b]])
        return _one_hot_rows(cols, self.n_features_out_)


_PIERCE_FIELDS = ("lat", "lon", "zenith", "azimuth")


def _pierce_columns(X):
    """(n, 4) float64 array of lat, lon, zenith, azimuth from a structured array, a DataFrame
    or a plain (n, 4) array, checked finite."""
    names = getattr(getattr(X, "dtype", None), "names", None)
    if names is not None or hasattr(X, "columns"):
        cols = list(names if names is not None else X.columns)
        missing = [f for f in _PIERCE_FIELDS if f not in cols]
        if missing:
            raise ValueError(f"PiercePointEncoder: the pierce points lack the field(s) "
                             f"{missing}; expected {list(_PIERCE_FIELDS)}")
        arr = np.column_stack([np.asarray(X[f], dtype=np.float64) for f in _PIERCE_FIELDS])
    else:
        try:
            arr = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"PiercePointEncoder expects numeric pierce points: {exc}") from None
        if arr.ndim != 2 or arr.shape[1] != 4:
            raise ValueError("PiercePointEncoder expects a table with fields lat, lon, zenith, "
                             f"azimuth or an array of shape (n, 4), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError("PiercePointEncoder: no pierce points (0 rows)")
    if not np.all(np.isfinite(arr)):
        raise ValueError("PiercePointEncoder: the pierce points contain NaN or infinity")
    return arr


class PiercePointEncoder(TransformerMixin, BaseEstimator):
    """Seed 001's local encoding of ionospheric pierce points (§4.2), as a sparse transformer.

    A pierce point x = (alpha, beta, theta, gamma) -- latitude, longitude, zenith and azimuth
    angle -- becomes::

        Enc(x) = [v, sin theta, cos theta, theta, theta^2, sin gamma, cos gamma, gamma, gamma^2]

    in R^{2m + 8}, where ``fit`` clusters the (latitude, longitude) of the points into m =
    ``n_clusters`` groups with scikit-learn's K-means, and v in R^{2m} is zero except in the
    two slots of the point's own cluster g, which hold (alpha, beta) - c_g, the offset from the
    cluster's centre (001 §4.2, the equation of v_j). The paper takes m = the number of
    satellites in the 60 s window: each satellite's pierce points from a regional network form
    one compact cloud, so v gives every satellite's region its own local linear coordinates,
    and a second-order model on Enc(x) fits a local quadratic surface per cluster.

    Units are the caller's: the angles enter sin/cos, so give them in radians (as
    :func:`fmlearn.datasets.make_gnss_vtec` does); latitude and longitude in degrees.

    Parameters
    ----------
    n_clusters : int, default=8
        m, the number of K-means clusters (seed 001: the number of satellites).
    init : "k-means++", "random" or ndarray of shape (n_clusters, 2), default="k-means++"
        Passed to :class:`sklearn.cluster.KMeans`. In the online protocol, the previous
        window's ``cluster_centers_`` keep cluster g on the same satellite's pierce points from
        one window to the next (the satellites move ~0.5 deg a minute), so that a warm-started
        model sees features with the same meaning.
    n_init : int or "auto", default="auto"
        Passed to :class:`sklearn.cluster.KMeans` (1 when ``init`` is an array).
    random_state : int, RandomState or None, default=None
        Seeds K-means (same seed, same clusters).

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, 2)
        (latitude, longitude) of the centres.
    kmeans_ : sklearn.cluster.KMeans
    n_features_out_ : int
        2 n_clusters + 8.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn.encoders import PiercePointEncoder
    >>> pts = np.array([[30.0, 114.0, 0.5, 1.0], [30.2, 114.1, 0.6, 1.1],
    ...                 [35.0, 120.0, 1.0, 3.0], [35.1, 120.2, 1.1, 3.1]])
    >>> enc = PiercePointEncoder(n_clusters=2, random_state=0).fit(pts)
    >>> Z = enc.transform(pts)
    >>> Z.shape, Z.getnnz(axis=1).tolist()
    ((4, 12), [10, 10, 10, 10])
    """

    def __init__(self, n_clusters=8, *, init="k-means++", n_init="auto", random_state=None):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, X, y=None):
        """Cluster the (latitude, longitude) of the pierce points X."""
        from sklearn.cluster import KMeans

        from ._threads import single_thread

        m = self.n_clusters
        if not isinstance(m, numbers.Integral) or isinstance(m, bool) or m < 1:
            raise ValueError(f"n_clusters must be a positive integer, got {m!r}")
        arr = _pierce_columns(X)
        n_distinct = np.unique(arr[:, :2], axis=0).shape[0]
        if n_distinct < m:
            raise ValueError(f"PiercePointEncoder: {n_distinct} distinct (lat, lon) points "
                             f"cannot make n_clusters={m} clusters")
        init, n_init = self.init, self.n_init
        if not isinstance(init, str):
            init = np.asarray(init, dtype=np.float64)
            if init.shape != (m, 2) or not np.all(np.isfinite(init)):
                raise ValueError(f"init must be 'k-means++', 'random' or finite centres of "
                                 f"shape ({m}, 2), got shape {init.shape}")
            n_init = 1
        km = KMeans(n_clusters=int(m), init=init, n_init=n_init, random_state=self.random_state)
        with single_thread():
            km.fit(arr[:, :2])
        self.kmeans_ = km
        self.cluster_centers_ = km.cluster_centers_.copy()
        self.n_features_out_ = 2 * int(m) + 8
        return self

    def transform(self, X):
        """Encode pierce points: CSR of shape (n_points, 2 n_clusters + 8), 10 entries a row."""
        check_is_fitted(self, "cluster_centers_")
        arr = _pierce_columns(X)
        n, m = arr.shape[0], self.cluster_centers_.shape[0]
        c = self.cluster_centers_
        d2 = ((arr[:, None, :2] - c[None, :, :]) ** 2).sum(axis=2)
        g = np.argmin(d2, axis=1)
        th, ga = arr[:, 2], arr[:, 3]
        vals = np.column_stack([arr[:, 0] - c[g, 0], arr[:, 1] - c[g, 1],
                                np.sin(th), np.cos(th), th, th * th,
                                np.sin(ga), np.cos(ga), ga, ga * ga])
        cols = np.column_stack([2 * g, 2 * g + 1]
                               + [np.full(n, 2 * m + j) for j in range(8)])
        indptr = np.arange(0, 10 * n + 1, 10, dtype=np.int64)
        return sp.csr_matrix((vals.ravel(), cols.ravel().astype(np.int32), indptr),
                             shape=(n, 2 * m + 8))

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self, "cluster_centers_")
        names = [f"v{g}_{a}" for g in range(self.cluster_centers_.shape[0])
                 for a in ("lat", "lon")]
        return np.array(names + ["sin_zenith", "cos_zenith", "zenith", "zenith2",
                                 "sin_azimuth", "cos_azimuth", "azimuth", "azimuth2"],
                        dtype=object)


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
