"""The window protocol of Lin et al. 2019, §4.2 shared by the GNSS simulator (:mod:`._gnss`) and the
file reader (:mod:`._gnss_csv`): pierce-point tables, double differences, their contrast
matrices, and ``windows(seconds=60)``."""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["GNSSPart", "GNSSWindow", "POINT_FIELDS", "SECONDS_PER_DAY"]

SECONDS_PER_DAY = 86400

#: Fields of a pierce-point table (a NumPy structured array): degrees for lat/lon, radians for
#: zenith/azimuth (azimuth clockwise from north in [0, 2 pi)), integer ids, epoch in seconds since
#: the start of day 0.
POINT_FIELDS = [("lat", "f8"), ("lon", "f8"), ("zenith", "f8"), ("azimuth", "f8"),
                ("station", "i8"), ("satellite", "i8"), ("epoch", "i8")]
_DD_FIELDS = [("epoch", "i8"), ("satellite_a", "i8"), ("satellite_b", "i8"),
              ("station_c", "i8"), ("station_d", "i8")]


@dataclass
class GNSSPart:
    """One side of a window: pierce points, the contrasts that turn them into targets, targets.

    Attributes
    ----------
    points : structured ndarray of shape (n_rows,), fields :data:`POINT_FIELDS`
    contrasts : scipy.sparse.csr_matrix of shape (n_targets, n_rows)
        Row g holds +1 at (a, c), -1 at (a, d), -1 at (b, c), +1 at (b, d) for the double
        difference g = (a, b, c, d).
    y : ndarray of shape (n_targets,)
        Observed double differences (TECU, with measurement noise).
    pairs : structured ndarray of shape (n_targets,)
        (epoch, satellite_a, satellite_b, station_c, station_d) of each target.
    truth : ndarray of shape (n_rows,) or None
        The simulated observable at each pierce point (vTEC, or slant TEC with
        ``observable="slant"``), so that ``contrasts @ truth`` is y without noise. None for
        data read from files.
    """

    points: np.ndarray
    contrasts: sp.csr_matrix
    y: np.ndarray
    pairs: np.ndarray
    truth: np.ndarray = None

    @property
    def n_targets(self):
        return int(self.y.shape[0])


@dataclass
class GNSSWindow:
    """A window of the online protocol of Lin et al. 2019, §4.2.

    ``train`` holds the double differences among the training stations (what the model is
    refitted on), ``test`` those that involve the test station (what is predicted and scored).
    ``n_satellites`` counts the satellites seen by the training stations in the window (the m
    of the pierce-point encoder). ``day`` is the day index, ``start`` the first epoch (seconds
    since the start of day 0), ``validation`` whether the day is a validation day.
    """

    day: int
    start: int
    seconds: int
    train: GNSSPart
    test: GNSSPart
    n_satellites: int
    validation: bool


def _keys(epoch, station, satellite):
    return (np.asarray(epoch, np.int64) << 32) + (np.asarray(station, np.int64) << 16) \
        + np.asarray(satellite, np.int64)


def double_differences(valid, elev, value, index, links, epochs):
    """Double differences along the links of a network, epoch by epoch.

    For every link (c, d) and epoch with at least two satellites valid at both stations, the
    reference satellite a is the highest one seen from c (the smallest noise and multipath in
    practice) and b runs over the other common satellites:
    y = value(a, c) - value(a, d) - value(b, c) + value(b, d).

    Parameters
    ----------
    valid : bool ndarray (n_epochs, n_stations, n_satellites)
    elev : float ndarray of the same shape (radians; only compared)
    value : ndarray (n_points,)
        The observable at each point.
    index : int ndarray (n_epochs, n_stations, n_satellites)
        The point of each valid (epoch, station, satellite).
    links : int ndarray (n_links, 2)
    epochs : int ndarray (n_epochs,)
        The epoch (s) of each index of the first axis.

    Returns
    -------
    pairs : structured ndarray (epoch, satellite_a, satellite_b, station_c, station_d), with
        satellite and station *indices* into the second and third axes
    y : ndarray
    """
    n_t = valid.shape[0]
    pairs, ys = [], []
    for c, d in links:
        both = valid[:, c, :] & valid[:, d, :]
        a = np.argmax(np.where(both, elev[:, c, :], -np.inf), axis=1)
        ok = both.sum(axis=1) >= 2
        other = both & ok[:, None]
        other[np.arange(n_t), a] = False
        e, b = np.nonzero(other)
        a = a[e]
        ac, ad = index[e, c, a], index[e, d, a]
        bc, bd = index[e, c, b], index[e, d, b]
        ys.append(value[ac] - value[ad] - value[bc] + value[bd])
        rec = np.zeros(b.shape[0], dtype=_DD_FIELDS)
        rec["epoch"], rec["satellite_a"], rec["satellite_b"] = epochs[e], a, b
        rec["station_c"], rec["station_d"] = c, d
        pairs.append(rec)
    if not pairs:
        return np.zeros(0, dtype=_DD_FIELDS), np.zeros(0)
    return np.concatenate(pairs), np.concatenate(ys)


def _part(points, pairs, y, truth):
    """Keep the pierce points that ``pairs`` reference and build the contrast matrix."""
    n_t = pairs.shape[0]
    corners = [("satellite_a", "station_c", 1.0), ("satellite_a", "station_d", -1.0),
               ("satellite_b", "station_c", -1.0), ("satellite_b", "station_d", 1.0)]
    pkeys = _keys(points["epoch"], points["station"], points["satellite"])
    order = np.argsort(pkeys, kind="stable")
    sorted_keys = pkeys[order]
    rows = np.empty((n_t, 4), dtype=np.int64)
    for j, (sat, sta, _) in enumerate(corners):
        k = _keys(pairs["epoch"], pairs[sta], pairs[sat])
        pos = np.searchsorted(sorted_keys, k)
        pos = np.minimum(pos, max(sorted_keys.shape[0] - 1, 0))
        if n_t and (sorted_keys.shape[0] == 0 or np.any(sorted_keys[pos] != k)):
            bad = int(np.flatnonzero(sorted_keys[pos] != k)[0]) if sorted_keys.shape[0] else 0
            raise ValueError(
                f"double difference {pairs[bad].tolist()} references a pierce point "
                f"(epoch, station, satellite) = ({int(pairs['epoch'][bad])}, "
                f"{int(pairs[sta][bad])}, {int(pairs[sat][bad])}) that is not in the points")
        rows[:, j] = order[pos]
    used, inverse = np.unique(rows.ravel(), return_inverse=True)
    coef = np.tile(np.array([c for *_, c in corners]), n_t)
    C = sp.csr_matrix((coef, inverse, np.arange(0, 4 * n_t + 1, 4)),
                      shape=(n_t, used.shape[0]))
    C.sum_duplicates()
    C.eliminate_zeros()
    return GNSSPart(points[used], C, np.asarray(y, np.float64), pairs,
                    None if truth is None else truth[used])


def _window(points, pairs, y, truth, test_station, training, day, start, seconds, validation):
    """Split one window's observations into the train part and the test part."""
    c, d = pairs["station_c"], pairs["station_d"]
    is_test = (c == test_station) | (d == test_station)
    in_train = np.isin(c, training) & np.isin(d, training)
    tr, te = in_train & ~is_test, is_test
    train = _part(points, pairs[tr], y[tr], truth)
    test = _part(points, pairs[te], y[te], truth)
    n_sat = int(np.unique(train.points["satellite"]).shape[0])
    return GNSSWindow(day, start, seconds, train, test, n_sat, validation)


class _Windows:
    """``windows()`` shared by the simulator and the file reader."""

    def _day_list(self, days):
        if days is None:
            return list(range(self.n_days))
        if days == "validation":
            return list(self.validation_days)
        if days == "test":
            return list(self.test_days)
        days = [int(x) for x in np.atleast_1d(days)]
        bad = [x for x in days if not 0 <= x < self.n_days]
        if bad:
            raise ValueError(f"days {bad} are outside 0..{self.n_days - 1}")
        return days

    def windows(self, seconds=60, *, days=None, start=0, stop=SECONDS_PER_DAY, every=None):
        """Yield the windows of the online protocol (Lin et al. 2019, §4.2: refit every 60 s).

        Parameters
        ----------
        seconds : int, default=60
            Window length (the paper collects 60 s of 1 Hz data per model update).
        days : None, "validation", "test", int or list of int
            Days to walk through (None: all, in order).
        start, stop : int
            Seconds of the day covered (default: the whole day).
        every : int, optional
            Seconds between window starts (default ``seconds``: consecutive windows). A larger
            value samples the day, for quick runs.

        Yields
        ------
        GNSSWindow
        """
        seconds = int(seconds)
        if seconds < 1:
            raise ValueError(f"seconds must be a positive number of seconds, got {seconds}")
        every = seconds if every is None else int(every)
        if every < 1:
            raise ValueError(f"every must be positive, got {every}")
        if not 0 <= start < stop <= SECONDS_PER_DAY:
            raise ValueError(f"need 0 <= start < stop <= {SECONDS_PER_DAY}, got {start}, {stop}")
        for day in self._day_list(days):
            for t0 in range(int(start), int(stop) - seconds + 1, every):
                w = self._window(day, day * SECONDS_PER_DAY + t0, seconds)
                if w is not None:
                    yield w

    @property
    def validation_days(self):
        return list(range(self.n_validation_days))

    @property
    def test_days(self):
        return list(range(self.n_validation_days, self.n_days))
