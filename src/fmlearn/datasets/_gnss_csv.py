"""The plain file layout of GNSS observations: :func:`write_gnss_csv` and
:func:`load_gnss_csv` (Lin et al. 2019, §4.2's set-up from real data or a simulation)."""

import csv
import io
import os

import numpy as np

from .._files import atomic_write
from ._gnss_windows import _DD_FIELDS, POINT_FIELDS, SECONDS_PER_DAY, _keys, _window, _Windows

__all__ = ["GNSSObservations", "load_gnss_csv", "write_gnss_csv"]

_POINT_COLUMNS = ["epoch", "station", "satellite", "lat", "lon", "zenith", "azimuth"]
_DD_COLUMNS = ["epoch", "satellite_a", "satellite_b", "station_c", "station_d", "y"]


def write_gnss_csv(directory, windows):
    """Write windows as the plain file layout read by :func:`load_gnss_csv`.

    Two CSV files with a header line, written atomically:

    ``points.csv``: ``epoch, station, satellite, lat, lon, zenith, azimuth`` -- one line per
    pierce point (epoch in integer seconds since the start of day 0; lat/lon in degrees;
    zenith/azimuth of the satellite seen from the station in radians, azimuth clockwise from
    north).

    ``double_differences.csv``: ``epoch, satellite_a, satellite_b, station_c, station_d, y`` --
    one line per observed double difference y = f(a, c) - f(a, d) - f(b, c) + f(b, d), each
    corner being a line of ``points.csv`` at the same epoch.

    Returns the two paths.
    """
    os.makedirs(directory, exist_ok=True)
    pts, dds = [], []
    for w in windows:
        for part in (w.train, w.test):
            pts.append(part.points)
            rec = np.zeros(part.n_targets, dtype=_DD_FIELDS + [("y", "f8")])
            for name, _ in _DD_FIELDS:
                rec[name] = part.pairs[name]
            rec["y"] = part.y
            dds.append(rec)
    pts = np.concatenate(pts) if pts else np.zeros(0, POINT_FIELDS)
    _, first = np.unique(_keys(pts["epoch"], pts["station"], pts["satellite"]),
                         return_index=True)
    pts = pts[np.sort(first)]
    dds = np.concatenate(dds) if dds else np.zeros(0, _DD_FIELDS + [("y", "f8")])
    dds = np.unique(dds)
    paths = []
    for name, rows, cols in (("points.csv", pts, _POINT_COLUMNS),
                             ("double_differences.csv", dds, _DD_COLUMNS)):
        path = os.path.join(directory, name)
        with atomic_write(path) as raw:
            fh = io.TextIOWrapper(raw, encoding="utf-8", newline="")
            out = csv.writer(fh)
            out.writerow(cols)
            for r in rows:
                out.writerow([repr(float(r[c])) if rows.dtype[c].kind == "f" else int(r[c])
                              for c in cols])
            fh.flush()
            fh.detach()
        paths.append(path)
    return paths


def _read_csv(path, columns, ints):
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: missing (see fmlearn.datasets.write_gnss_csv)")
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or [h.strip() for h in header] != columns:
            raise ValueError(f"{path}: the header must be {','.join(columns)}, got {header}")
        rows = list(reader)
    out = {}
    for j, c in enumerate(columns):
        try:
            col = np.array([r[j] for r in rows], dtype=np.float64)
        except (IndexError, ValueError) as exc:
            raise ValueError(f"{path}: column {c!r} has a missing or non-numeric value ({exc})") \
                from None
        if not np.all(np.isfinite(col)):
            raise ValueError(f"{path}: column {c!r} contains NaN or infinity")
        if c in ints:
            if np.any(col != np.round(col)) or np.any(col < 0):
                raise ValueError(f"{path}: column {c!r} must hold non-negative integers")
            col = col.astype(np.int64)
        out[c] = col
    return out


class GNSSObservations(_Windows):
    """Pierce points and double differences read from files (:func:`load_gnss_csv`)."""

    def __init__(self, points, pairs, y, test_station, training_stations, n_validation_days):
        self.points, self.pairs, self.y = points, pairs, y
        self.test_station = int(test_station)
        self.training_stations = np.asarray(training_stations, np.int64)
        last = int(max(points["epoch"].max(initial=0), pairs["epoch"].max(initial=0)))
        self.n_days = last // SECONDS_PER_DAY + 1
        if not 0 <= n_validation_days <= self.n_days:
            raise ValueError(f"n_validation_days={n_validation_days} but the files span "
                             f"{self.n_days} day(s)")
        self.n_validation_days = int(n_validation_days)
        self._p_order = np.argsort(points["epoch"], kind="stable")
        self._d_order = np.argsort(pairs["epoch"], kind="stable")

    def _slice(self, arr, order, a, b):
        ep = arr["epoch"][order]
        return order[np.searchsorted(ep, a):np.searchsorted(ep, b)]

    def _window(self, day, start, seconds):
        pi = self._slice(self.points, self._p_order, start, start + seconds)
        di = self._slice(self.pairs, self._d_order, start, start + seconds)
        if di.shape[0] == 0:
            return None
        return _window(self.points[pi], self.pairs[di], self.y[di], None, self.test_station,
                       self.training_stations, day, start, seconds,
                       day < self.n_validation_days)


def load_gnss_csv(directory, test_station, *, training_stations=None, n_validation_days=1):
    """Read the file layout of :func:`write_gnss_csv` (real data or a simulation).

    Parameters
    ----------
    directory : str
        Folder holding ``points.csv`` and ``double_differences.csv``.
    test_station : int
        Station whose double differences are predicted (never trained on).
    training_stations : sequence of int, optional
        Stations whose double differences are trained on (default: all the others).
    n_validation_days : int, default=1
        The first days are for tuning, the rest for testing.

    Returns
    -------
    GNSSObservations
        With the same ``windows(seconds=60)`` as the simulation.
    """
    p = _read_csv(os.path.join(directory, "points.csv"), _POINT_COLUMNS,
                  {"epoch", "station", "satellite"})
    d = _read_csv(os.path.join(directory, "double_differences.csv"), _DD_COLUMNS,
                  {"epoch", "satellite_a", "satellite_b", "station_c", "station_d"})
    pts = np.zeros(p["epoch"].shape[0], POINT_FIELDS)
    for c in _POINT_COLUMNS:
        pts[c] = p[c]
    if np.any(np.abs(pts["lat"]) > 90) or np.any(pts["zenith"] < 0) \
            or np.any(pts["zenith"] > np.pi / 2):
        raise ValueError("points.csv: lat must be in [-90, 90] deg and zenith in [0, pi/2] rad")
    for c in ("station", "satellite"):
        if pts[c].max(initial=0) >= 2**16:
            raise ValueError(f"points.csv: {c} ids must be below 65536")
    keys = _keys(pts["epoch"], pts["station"], pts["satellite"])
    if np.unique(keys).shape[0] != keys.shape[0]:
        raise ValueError("points.csv: a (epoch, station, satellite) appears twice")
    pairs = np.zeros(d["epoch"].shape[0], _DD_FIELDS)
    for c, _ in _DD_FIELDS:
        pairs[c] = d[c]
    if np.any(pairs["satellite_a"] == pairs["satellite_b"]) \
            or np.any(pairs["station_c"] == pairs["station_d"]):
        raise ValueError("double_differences.csv: a double difference needs two distinct "
                         "satellites and two distinct stations")
    stations = np.unique(np.concatenate([pts["station"], pairs["station_c"],
                                         pairs["station_d"]]))
    if test_station not in stations:
        raise ValueError(f"test_station {test_station} does not appear in the files")
    if training_stations is None:
        training_stations = stations[stations != test_station]
    elif test_station in np.asarray(training_stations):
        raise ValueError("the test station cannot also be a training station")
    return GNSSObservations(pts, pairs, d["y"], test_station, training_stations,
                            n_validation_days)
