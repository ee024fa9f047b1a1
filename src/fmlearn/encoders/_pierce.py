"""Lin et al.'s (2019) local encoding of ionospheric pierce points (§4.2)."""

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
    """Lin et al.'s (2019) local encoding of ionospheric pierce points (§4.2), as a sparse
    transformer.

    A pierce point x = (alpha, beta, theta, gamma) -- latitude, longitude, zenith and azimuth
    angle -- becomes::

        Enc(x) = [v, sin theta, cos theta, theta, theta^2, sin gamma, cos gamma, gamma, gamma^2]

    in R^{2m + 8}, where ``fit`` groups the points into m regions, and v in R^{2m} is zero
    except in the two slots of the point's own group g, which hold (alpha, beta) - c_g, the
    offset from the group's centre (Lin et al. 2019, §4.2, the equation of v_j). The paper
    takes m = the number of satellites in the 60 s window and finds the groups by K-means on
    (latitude, longitude) (``groups="kmeans"``, the default): each satellite's pierce points
    from a regional network form one cloud, so v gives every satellite's region its own local
    linear coordinates, and a second-order model on Enc(x) fits a local quadratic surface per
    group.

    Two fixes of the encoding as printed, each found from a failure of the online protocol
    (docs/vtec.md, "Why iFM blew up on unseen pierce points"):

    * ``groups="satellite"`` groups the points by the satellite each observation comes from
      (a ``satellite`` field of X, or ``satellites=`` in ``fit``/``transform``). K-means finds
      the satellites only when their clouds are apart; the clouds are as wide as the network
      (~300 km for the paper's 16 stations), so satellites close in the sky -- every pair of
      high ones -- share clusters and a satellite can be cut in two. A point then lands in
      another slot than its neighbour's, and a model fitted on the training stations'
      differences extrapolates wildly on the test station's points (measured: a cold-start
      window at 1.7 TECU RMSE where predicting zero gives 0.71; 0.22 with the satellites as
      groups). A point of a satellite not seen in ``fit`` takes the nearest centre.
    * ``unwrap_azimuth=True`` (default) measures gamma within pi of its group's circular mean
      azimuth: the paper's gamma and gamma^2 jump by 2 pi at north, where a satellite near the
      zenith or due north is seen from different stations on both sides of it. The feature is
      the paper's gamma unless it differs from its group's mean azimuth by more than pi (a
      point and its group on opposite sides of north), and then gamma -+ 2 pi.

    Units: the angles enter sin/cos, so give them in radians (as
    :func:`fmlearn.datasets.make_gnss_vtec` does; zenith in [0, pi], azimuth in
    [-2 pi, 2 pi]); latitude in [-90, 90] and longitude in [-360, 360] degrees. Points outside
    these ranges are refused with a ``ValueError`` naming the point.

    Parameters
    ----------
    n_clusters : int, default=8
        m, the number of K-means clusters (Lin et al. 2019: the number of satellites). Not used with
        ``groups="satellite"`` (m = the satellites seen in ``fit``).
    init : "k-means++", "random" or ndarray of shape (n_clusters, 2), default="k-means++"
        Passed to :class:`sklearn.cluster.KMeans`. In the online protocol, the previous
        window's ``cluster_centers_`` keep cluster g on the same satellite's pierce points from
        one window to the next (the satellites move ~0.5 deg a minute), so that a warm-started
        model sees features with the same meaning.
    n_init : int or "auto", default="auto"
        Passed to :class:`sklearn.cluster.KMeans` (1 when ``init`` is an array).
    random_state : int, RandomState or None, default=None
        Seeds K-means (same seed, same clusters).
    groups : {"kmeans", "satellite"}, default="kmeans"
    unwrap_azimuth : bool, default=True

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (m, 2)
        (latitude, longitude) of the centres.
    kmeans_ : sklearn.cluster.KMeans or None
        None with ``groups="satellite"``.
    satellites_ : ndarray of shape (m,) or None
        The satellite of each group (``groups="satellite"``).
    azimuth_ref_ : ndarray of shape (m,) or None
        The circular mean azimuth of each group (``unwrap_azimuth``).
    n_features_out_ : int
        2 m + 8.

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

    def __init__(self, n_clusters=8, *, init="k-means++", n_init="auto", random_state=None,
                 groups="kmeans", unwrap_azimuth=True):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.random_state = random_state
        self.groups = groups
        self.unwrap_azimuth = unwrap_azimuth

    def fit(self, X, y=None, satellites=None):
        """Group the pierce points X (K-means of their latitude/longitude, or by satellite)."""
        from sklearn.cluster import KMeans

        from .._threads import single_thread

        if self.groups not in ("kmeans", "satellite"):
            raise ValueError(f"groups must be 'kmeans' or 'satellite', got {self.groups!r}")
        arr = _pierce_columns(X)
        if self.groups == "satellite":
            sat = _satellite_ids(X, satellites, arr.shape[0])
            ids, g = np.unique(sat, return_inverse=True)
            centres = np.column_stack([np.bincount(g, arr[:, c]) / np.bincount(g)
                                       for c in (0, 1)])
            self.kmeans_, self.satellites_ = None, ids
            m = ids.shape[0]
        else:
            m = self.n_clusters
            if not isinstance(m, numbers.Integral) or isinstance(m, bool) or m < 1:
                raise ValueError(f"n_clusters must be a positive integer, got {m!r}")
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
            km = KMeans(n_clusters=int(m), init=init, n_init=n_init,
                        random_state=self.random_state)
            with single_thread():
                km.fit(arr[:, :2])
            self.kmeans_, self.satellites_ = km, None
            centres = km.cluster_centers_.copy()
            g = km.labels_
        self.cluster_centers_ = centres
        self.azimuth_ref_ = None
        if self.unwrap_azimuth:
            z = np.bincount(g, np.cos(arr[:, 3]), minlength=m) \
                + 1j * np.bincount(g, np.sin(arr[:, 3]), minlength=m)
            self.azimuth_ref_ = np.mod(np.angle(z), 2 * np.pi)
        self.n_features_out_ = 2 * int(m) + 8
        return self

    def _groups_of(self, X, arr, satellites):
        c = self.cluster_centers_
        d2 = ((arr[:, None, :2] - c[None, :, :]) ** 2).sum(axis=2)
        g = np.argmin(d2, axis=1)
        if getattr(self, "satellites_", None) is not None:
            sat = _satellite_ids(X, satellites, arr.shape[0])
            pos = np.searchsorted(self.satellites_, sat)
            pos = np.minimum(pos, self.satellites_.shape[0] - 1)
            known = self.satellites_[pos] == sat
            g = np.where(known, pos, g)
        return g

    def transform(self, X, satellites=None):
        """Encode pierce points: CSR of shape (n_points, 2 m + 8), 10 entries a row."""
        check_is_fitted(self, "cluster_centers_")
        arr = _pierce_columns(X)
        n, m = arr.shape[0], self.cluster_centers_.shape[0]
        c = self.cluster_centers_
        g = self._groups_of(X, arr, satellites)
        th, ga = arr[:, 2], arr[:, 3]
        ref = getattr(self, "azimuth_ref_", None)
        if ref is not None:
            ga = ref[g] + np.angle(np.exp(1j * (ga - ref[g])))
        vals = np.column_stack([arr[:, 0] - c[g, 0], arr[:, 1] - c[g, 1],
                                np.sin(th), np.cos(th), th, th * th,
                                np.sin(ga), np.cos(ga), ga, ga * ga])
        cols = np.column_stack([2 * g, 2 * g + 1]
                               + [np.full(n, 2 * m + j) for j in range(8)])
        indptr = np.arange(0, 10 * n + 1, 10, dtype=np.int64)
        return sp.csr_matrix((vals.ravel(), cols.ravel().astype(np.int32), indptr),
                             shape=(n, 2 * m + 8))

    def fit_transform(self, X, y=None, satellites=None):
        return self.fit(X, satellites=satellites).transform(X, satellites=satellites)

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self, "cluster_centers_")
        names = [f"v{g}_{a}" for g in range(self.cluster_centers_.shape[0])
                 for a in ("lat", "lon")]
        return np.array(names + ["sin_zenith", "cos_zenith", "zenith", "zenith2",
                                 "sin_azimuth", "cos_azimuth", "azimuth", "azimuth2"],
                        dtype=object)


def _satellite_ids(X, satellites, n):
    """The satellite of every point: ``satellites`` or X's ``satellite`` field."""
    if satellites is None:
        names = getattr(getattr(X, "dtype", None), "names", None)
        cols = names if names is not None else getattr(X, "columns", ())
        if "satellite" not in list(cols):
            raise ValueError("PiercePointEncoder(groups='satellite') needs the satellite of "
                             "every point: a 'satellite' field in X, or satellites=")
        satellites = X["satellite"]
    sat = np.asarray(satellites)
    if sat.shape != (n,):
        raise ValueError(f"satellites has shape {sat.shape}, expected ({n},)")
    try:
        return sat.astype(np.int64, casting="safe") if sat.dtype.kind in "iu" else \
            np.asarray(sat, dtype=np.int64)
    except (TypeError, ValueError):
        raise ValueError("satellites must be integer ids") from None
