"""Seed 001's local encoding of ionospheric pierce points (§4.2)."""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

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
    # Angles outside their ranges are a unit mistake (degrees for radians) or garbage, and a
    # huge one overflows the encoding (zenith^2 of 1e200 is infinite): refuse them by name.
    for j, name, lo, hi, unit in ((0, "latitude", -90.0, 90.0, "degrees"),
                                  (1, "longitude", -360.0, 360.0, "degrees"),
                                  (2, "zenith", 0.0, np.pi, "radians"),
                                  (3, "azimuth", -2 * np.pi, 2 * np.pi, "radians")):
        bad = np.flatnonzero((arr[:, j] < lo - 1e-9) | (arr[:, j] > hi + 1e-9))
        if bad.shape[0]:
            raise ValueError(f"PiercePointEncoder: {name} {arr[bad[0], j]!r} of point "
                             f"{int(bad[0])} is outside [{lo:g}, {hi:g}] {unit}")
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

    Units: the angles enter sin/cos, so give them in radians (as
    :func:`fmlearn.datasets.make_gnss_vtec` does; zenith in [0, pi], azimuth in
    [-2 pi, 2 pi]); latitude in [-90, 90] and longitude in [-360, 360] degrees. Points outside
    these ranges are refused with a ``ValueError`` naming the point.

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

        from .._threads import single_thread

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
