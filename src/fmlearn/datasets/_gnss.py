"""GNSS double differences of the ionosphere: the set-up of seed 001 §4.2, simulated or read.

Seed 001 (§4.2) learns the vertical total electron content (vTEC) at ionospheric pierce points
from *double differences*: for satellites a, b and ground stations c, d joined in the data-link
graph, y = vTEC(x_ac) - vTEC(x_ad) - vTEC(x_bc) + vTEC(x_bd) (001 §4.2, the equation defining
y^(a,b,c,d)). The paper's data are proprietary, so :func:`make_gnss_vtec` simulates the same
set-up (a triangular mesh of stations, the GPS constellation, a thin-shell ionosphere with a
diurnal cycle, a regional gradient and travelling ionospheric disturbances), and
:func:`write_gnss_csv` / :func:`load_gnss_csv` move the same observations through two plain CSV
files, so that real data run through the same pipeline. Both return an object whose
``windows(seconds=60)`` yields the paper's online protocol windows (:class:`GNSSWindow`).

Simplifications (each documented where it is made): spherical Earth, circular orbits without
perturbations, a single-layer ionosphere, and noise that is white per undifferenced observation
(ambiguities and receiver/satellite biases are assumed resolved, as double differencing does).
"""

import csv
import io
import os
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.spatial import Delaunay

from .._files import atomic_write

__all__ = ["GNSSPart", "GNSSWindow", "GNSSObservations", "GNSSSimulation", "POINT_FIELDS",
           "make_gnss_vtec", "write_gnss_csv", "load_gnss_csv"]

#: Mean Earth radius (km), IUGG.
EARTH_RADIUS_KM = 6371.0
#: Earth's gravitational parameter (km^3/s^2), WGS-84.
GM_KM3_S2 = 398600.4418
#: Earth's rotation rate (rad/s), WGS-84.
EARTH_ROTATION = 7.2921151467e-5
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
    """A window of the online protocol of seed 001 §4.2.

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
        """Yield the windows of the online protocol (seed 001 §4.2: refit every 60 s).

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


class GNSSSimulation(_Windows):
    """A simulated network of GNSS stations observing a model ionosphere.

    Made by :func:`make_gnss_vtec` (see there for the physics and the parameters). Windows are
    generated on demand, each from its own seed, so any window can be drawn alone and every
    run with the same ``random_state`` gives the same data.

    Attributes
    ----------
    stations : structured ndarray (station, lat, lon, east_km, north_km, role)
        ``role`` is "test" (the centre) or "train".
    links : ndarray of shape (n_links, 2)
        The data-link graph: the station pairs (edges of the triangular mesh) whose double
        differences are formed.
    test_station : int
    n_days, n_validation_days : int
    """

    def __init__(self, params, rng):
        self.__dict__.update(params)
        self._seed = int(rng.integers(2**31 - 1))
        self._build_stations(rng)
        self._build_constellation(rng)
        self._build_ionosphere(rng)

    # -- geometry -------------------------------------------------------------------------------
    def _build_stations(self, rng):
        a = self.station_spacing_km
        ij = np.array([(i, j) for i in range(-4, 5) for j in range(-4, 5)], dtype=np.float64)
        xy = np.column_stack([a * (ij[:, 0] + 0.5 * ij[:, 1]), a * np.sqrt(3) / 2 * ij[:, 1]])
        r = np.hypot(xy[:, 0], xy[:, 1])
        ang = np.mod(np.arctan2(xy[:, 1], xy[:, 0]), 2 * np.pi)
        order = np.lexsort((np.round(ang, 9), np.round(r, 6)))
        xy = xy[order[: self.n_training_stations + 1]]
        # Surveyed sites are never on a perfect lattice: jitter all but the centre.
        xy[1:] += rng.uniform(-self.station_jitter_km, self.station_jitter_km, (xy.shape[0] - 1, 2))
        lat0, lon0 = self.center
        lat = lat0 + np.degrees(xy[:, 1] / EARTH_RADIUS_KM)
        lon = lon0 + np.degrees(xy[:, 0] / (EARTH_RADIUS_KM * np.cos(np.radians(lat0))))
        n = xy.shape[0]
        st = np.zeros(n, dtype=[("station", "i8"), ("lat", "f8"), ("lon", "f8"),
                                ("east_km", "f8"), ("north_km", "f8"), ("role", "U5")])
        st["station"] = np.arange(n)
        st["lat"], st["lon"] = lat, lon
        st["east_km"], st["north_km"] = xy[:, 0], xy[:, 1]
        st["role"] = "train"
        st["role"][0] = "test"
        self.stations = st
        self.test_station = 0
        self.training_stations = np.arange(1, n)
        tri = Delaunay(xy).simplices
        edges = np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [0, 2]]]), axis=1)
        edges = np.unique(edges, axis=0)
        # Drop the long hull edges Delaunay adds between outer stations: the network links
        # neighbours only (baselines up to ~1.5 spacings).
        length = np.hypot(*(xy[edges[:, 0]] - xy[edges[:, 1]]).T)
        self.links = edges[length <= 1.5 * a]

    def _build_constellation(self, rng):
        n_p, n_s = self.n_planes, self.satellites_per_plane
        raan = np.repeat(np.arange(n_p) * 2 * np.pi / n_p, n_s)
        # Walker-like phasing (one slot offset between adjacent planes) plus small deviations:
        # the real GPS slots are not evenly spaced either.
        u0 = (np.tile(np.arange(n_s) * 2 * np.pi / n_s, n_p)
              + np.repeat(np.arange(n_p), n_s) * 2 * np.pi / (n_p * n_s)
              + rng.uniform(-0.1, 0.1, n_p * n_s))
        self._raan, self._u0 = raan, u0
        self._incl = np.radians(self.inclination_deg)
        self.orbital_period_s = 2 * np.pi * np.sqrt(self.semi_major_axis_km ** 3 / GM_KM3_S2)
        self._gmst0 = rng.uniform(0, 2 * np.pi)

    def _satellites_ecef(self, t):
        """ECEF positions (km) of all satellites at times t (s): shape (len(t), n_sat, 3)."""
        t = np.asarray(t, np.float64)[:, None]
        u = self._u0[None, :] + 2 * np.pi * t / self.orbital_period_s
        cu, su = np.cos(u), np.sin(u)
        cO, sO = np.cos(self._raan), np.sin(self._raan)
        ci, si = np.cos(self._incl), np.sin(self._incl)
        a = self.semi_major_axis_km
        x = a * (cu * cO - su * ci * sO)
        y = a * (cu * sO + su * ci * cO)
        z = a * su * si * np.ones_like(cO)
        g = self._gmst0 + EARTH_ROTATION * t
        cg, sg = np.cos(g), np.sin(g)
        return np.stack([cg * x + sg * y, -sg * x + cg * y, z], axis=-1)

    def _look(self, t):
        """Elevation, azimuth (rad) of every satellite from every station: (n_t, n_sta, n_sat)."""
        lat, lon = np.radians(self.stations["lat"]), np.radians(self.stations["lon"])
        up = np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])
        east = np.column_stack([-np.sin(lon), np.cos(lon), np.zeros_like(lon)])
        north = np.column_stack([-np.sin(lat) * np.cos(lon), -np.sin(lat) * np.sin(lon),
                                 np.cos(lat)])
        sat = self._satellites_ecef(t)                              # (T, S, 3)
        rho = sat[:, None, :, :] - EARTH_RADIUS_KM * up[None, :, None, :]
        rho /= np.linalg.norm(rho, axis=-1, keepdims=True)
        e = np.einsum("tnsk,nk->tns", rho, east)
        nn = np.einsum("tnsk,nk->tns", rho, north)
        u = np.einsum("tnsk,nk->tns", rho, up)
        return np.arcsin(np.clip(u, -1, 1)), np.mod(np.arctan2(e, nn), 2 * np.pi)

    def _pierce(self, station, elev, azim):
        """Pierce point (deg) on the thin shell, and the zenith angle there (rad).

        Spherical-Earth single-layer model (e.g. Schaer 1999, Eq. 2.2-2.4): Earth-central angle
        psi = pi/2 - E - asin(R cos E / (R + H)).
        """
        R, H = EARTH_RADIUS_KM, self.shell_height_km
        lat0 = np.radians(self.stations["lat"][station])
        lon0 = np.radians(self.stations["lon"][station])
        zp = np.arcsin(R / (R + H) * np.cos(elev))
        psi = np.pi / 2 - elev - zp
        lat = np.arcsin(np.sin(lat0) * np.cos(psi) + np.cos(lat0) * np.sin(psi) * np.cos(azim))
        lon = lon0 + np.arcsin(np.clip(np.sin(psi) * np.sin(azim) / np.cos(lat), -1, 1))
        return np.degrees(lat), np.degrees(lon), zp

    # -- the ionosphere -------------------------------------------------------------------------
    def _build_ionosphere(self, rng):
        n_d = self.n_days
        self._day_factor = np.clip(1 + self.day_to_day * rng.standard_normal(n_d), 0.3, None)
        tids = []
        for _ in range(n_d):
            waves = []
            for kind, n in (("ms", self.n_mstids), ("ls", self.n_lstids)):
                for _ in range(n):
                    if kind == "ms":
                        wavelength = rng.uniform(*self.mstid_wavelength_km)
                        period = wavelength * 1000 / rng.uniform(*self.mstid_speed_m_s)
                        amp = rng.uniform(*self.mstid_amplitude)
                        # Daytime MSTIDs travel mostly equatorward (south-east/south-west).
                        heading = np.radians(rng.uniform(120, 240))
                    else:
                        period = rng.uniform(*self.lstid_period_min) * 60
                        wavelength = rng.uniform(*self.lstid_speed_m_s) * period / 1000
                        amp = rng.uniform(*self.lstid_amplitude)
                        heading = np.radians(rng.uniform(150, 210))
                    k = 2 * np.pi / wavelength
                    waves.append((amp, k * np.sin(heading), k * np.cos(heading),
                                  2 * np.pi / period, rng.uniform(0, 2 * np.pi)))
            tids.append(np.array(waves).reshape(-1, 5))
        self._tids = tids
        m = self.n_small_scale_modes
        lam = rng.uniform(*self.small_scale_wavelength_km, m)
        head = rng.uniform(0, 2 * np.pi, m)
        speed = rng.uniform(20, 100, m) / 1000                     # km/s drift
        self._small = np.column_stack([
            np.full(m, self.small_scale_rms * np.sqrt(2.0 / max(m, 1))),
            2 * np.pi / lam * np.sin(head), 2 * np.pi / lam * np.cos(head),
            2 * np.pi / lam * speed, rng.uniform(0, 2 * np.pi, m)])

    def vtec(self, lat, lon, t):
        """The simulated vTEC (TECU) at latitude/longitude (deg) and time t (s since day 0).

        vTEC = day factor * background(local time) * (1 + regional gradient)
               + travelling ionospheric disturbances + small-scale structure.
        """
        scalar = np.ndim(lat) == np.ndim(lon) == np.ndim(t) == 0
        lat, lon, t = (np.atleast_1d(a).astype(np.float64)
                       for a in np.broadcast_arrays(lat, lon, t))
        day = np.clip((t // SECONDS_PER_DAY).astype(np.int64), 0, self.n_days - 1)
        lt_h = np.mod(np.mod(t, SECONDS_PER_DAY) / 3600 + lon / 15, 24)
        x = 2 * np.pi * (lt_h - self.peak_local_time_h) / 24
        shape = ((1 + np.cos(x)) / 2) ** 2
        lat0, lon0 = self.center
        grad = 1 + self.gradient_per_deg[0] * (lat - lat0) + self.gradient_per_deg[1] * (lon - lon0)
        v = self._day_factor[day] * (self.night_vtec + self.day_vtec_amplitude * shape) * grad
        east = np.radians(lon - lon0) * EARTH_RADIUS_KM * np.cos(np.radians(lat0))
        north = np.radians(lat - lat0) * EARTH_RADIUS_KM
        tod = np.mod(t, SECONDS_PER_DAY)
        for d in np.unique(day):
            sel = day == d
            for amp, ke, kn, om, ph in self._tids[d]:
                v[sel] += amp * np.cos(ke * east[sel] + kn * north[sel] - om * tod[sel] + ph)
        for amp, ke, kn, om, ph in self._small:
            v += amp * np.cos(ke * east + kn * north - om * t + ph)
        return float(v[0]) if scalar else v

    # -- one window ----------------------------------------------------------------------------
    def observations(self, start, seconds):
        """Pierce points, double-difference list, noisy y and the noise-free observable of the
        epochs [start, start + seconds) (1 Hz), for every link of the data-link graph."""
        t = np.arange(start, start + seconds, self.interval_s)
        elev, azim = self._look(t)
        mask = elev >= np.radians(self.elevation_mask_deg)
        ti, st, sa = np.nonzero(mask)
        lat, lon, zp = self._pierce(st, elev[ti, st, sa], azim[ti, st, sa])
        pts = np.zeros(ti.shape[0], dtype=POINT_FIELDS)
        pts["lat"], pts["lon"] = lat, lon
        pts["zenith"] = np.pi / 2 - elev[ti, st, sa]
        pts["azimuth"] = azim[ti, st, sa]
        pts["station"], pts["satellite"] = st, sa
        pts["epoch"] = t[ti].astype(np.int64)
        truth = self.vtec(lat, lon, t[ti])
        if self.observable == "slant":
            truth = truth / np.cos(zp)
        rng = np.random.default_rng([self._seed, int(start)])
        obs = truth + self.noise * rng.standard_normal(truth.shape[0])
        index = -np.ones(mask.shape, dtype=np.int64)
        index[ti, st, sa] = np.arange(ti.shape[0])
        pairs, ys = [], []
        for c, d in self.links:
            both = mask[:, c, :] & mask[:, d, :]
            # The reference satellite: the highest one seen from c (smallest noise and
            # multipath in practice), at every epoch with at least two common satellites.
            a = np.argmax(np.where(both, elev[:, c, :], -np.inf), axis=1)
            ok = both.sum(axis=1) >= 2
            other = both & ok[:, None]
            other[np.arange(t.shape[0]), a] = False
            e, b = np.nonzero(other)
            a = a[e]
            ac, ad = index[e, c, a], index[e, d, a]
            bc, bd = index[e, c, b], index[e, d, b]
            ys.append(obs[ac] - obs[ad] - obs[bc] + obs[bd])
            rec = np.zeros(b.shape[0], dtype=_DD_FIELDS)
            rec["epoch"], rec["satellite_a"], rec["satellite_b"] = t[e].astype(np.int64), a, b
            rec["station_c"], rec["station_d"] = c, d
            pairs.append(rec)
        if pairs:
            pairs, ys = np.concatenate(pairs), np.concatenate(ys)
        else:
            pairs, ys = np.zeros(0, dtype=_DD_FIELDS), np.zeros(0)
        return pts, pairs, ys, truth

    def _window(self, day, start, seconds):
        pts, pairs, ys, truth = self.observations(start, seconds)
        return _window(pts, pairs, ys, truth, self.test_station, self.training_stations, day,
                       start, seconds, day < self.n_validation_days)

    def visible_satellites(self, t):
        """Number of satellites above the elevation mask from each station at times t:
        shape (len(t), n_stations)."""
        elev, _ = self._look(np.atleast_1d(t))
        return (elev >= np.radians(self.elevation_mask_deg)).sum(axis=2)


def make_gnss_vtec(n_days=2, *, n_validation_days=1, center=(30.0, 114.0),
                   station_spacing_km=75.0, n_training_stations=16, station_jitter_km=5.0,
                   n_planes=6, satellites_per_plane=6, inclination_deg=55.0,
                   semi_major_axis_km=26560.0, elevation_mask_deg=5.0, shell_height_km=350.0,
                   interval_s=1, observable="vtec", night_vtec=5.0, day_vtec_amplitude=30.0,
                   peak_local_time_h=14.0, gradient_per_deg=(-0.03, 0.005), day_to_day=0.15,
                   n_mstids=3, mstid_wavelength_km=(150.0, 400.0), mstid_speed_m_s=(100.0, 250.0),
                   mstid_amplitude=(0.1, 0.4), n_lstids=1, lstid_period_min=(30.0, 180.0),
                   lstid_speed_m_s=(400.0, 1000.0), lstid_amplitude=(0.3, 1.0),
                   n_small_scale_modes=20, small_scale_wavelength_km=(20.0, 80.0),
                   small_scale_rms=0.05, noise=0.01, random_state=None):
    """Simulate seed 001's vTEC set-up: stations, GPS satellites, pierce points, double differences.

    Geometry. Ground stations on a triangular mesh ``station_spacing_km`` apart (seed 001 §4.2:
    "around 75 kilometers"): the test station at ``center`` and the ``n_training_stations``
    (16 in the paper) nearest mesh nodes around it, each moved by up to ``station_jitter_km``.
    The data-link graph joins mesh neighbours (Delaunay edges up to 1.5 spacings). The GPS
    constellation: ``n_planes`` circular orbits (six, 60 deg apart in right ascension),
    inclination 55 deg, semi-major axis 26,560 km, hence the real period
    2 pi sqrt(a^3 / GM) = 43,08x s (half a sidereal day); Walker-like phasing
    (IS-GPS-200; Misra & Enge, *Global Positioning System*, 2nd ed., ch. 2). GPS alone (24-31
    satellites, 4-6 per plane) shows 8-12 satellites above 10 deg; seed 001 reports "around 10
    to 20" valid satellites, so the defaults fly 6 per plane with a 5 deg mask, which gives
    9-15 in view (about 11 on average). Satellites are observed at 1 Hz (``interval_s``) above
    ``elevation_mask_deg``.

    Pierce points. The single-layer model with the shell at ``shell_height_km`` = 350 km (IGS
    GIMs use 450 km, regional models 300-400 km; Schaer 1999): each (station, satellite) line of
    sight pierces the shell at a latitude/longitude; the table reports it with the satellite's
    zenith angle and azimuth seen from the station (the theta, gamma of seed 001 §4.2).

    Ionosphere (TECU, 1 TECU = 1e16 electrons/m^2). vTEC(lat, lon, t) =
    day factor x (``night_vtec`` + ``day_vtec_amplitude`` x ((1 + cos x)/2)^2) x (1 + gradient)
    + TIDs + small-scale structure, with x = 2 pi (LT - ``peak_local_time_h``)/24 for the local
    time LT of the point: a diurnal cycle peaking near 14 LT with a night floor (Klobuchar 1987;
    mid-latitude daytime vTEC of 20-50 TECU near solar maximum), a regional gradient per degree
    of latitude and longitude (vTEC falls poleward at mid-latitudes by a few % per degree), a
    day factor 1 + ``day_to_day`` N(0, 1) (day-to-day variability of ~15-20 %, Rishbeth &
    Mendillo 2001), medium-scale TIDs (wavelengths 150-400 km and phase speeds 100-250 m/s, hence
    periods of 10-65 min, amplitudes 0.1-0.4 TECU, travelling equatorward; within the ranges of
    Hunsucker 1982 and the GPS-TEC climatology of Tsugawa et al. 2007), large-scale
    TIDs (periods 30-180 min, speeds 400-1000 m/s, wavelengths > 1000 km; Hunsucker 1982), and
    small-scale structure of 20-80 km wavelengths drifting at 20-100 m/s.

    Observations. Seed 001 models the double difference of the *vertical* TEC at the four
    pierce points (§4.2: y = vTEC(x_ac) - vTEC(x_ad) - vTEC(x_bc) + vTEC(x_bd)); that is
    ``observable="vtec"`` (default). ``observable="slant"`` forms them from the slant TEC
    vTEC / cos(z') (the thin-shell mapping function at the pierce point), which is what a
    geometry-free phase combination measures: then f must also learn the mapping function, which
    the encoder's zenith features make possible. Each undifferenced observation gets white noise
    of standard deviation ``noise`` TECU (carrier-phase noise of a few mm is ~0.01-0.03 TECU);
    the double differences thus have correlated noise of std 2 x noise. For every link (c, d)
    and epoch, the reference satellite a is the highest seen from c and b runs over the other
    satellites seen from both stations.

    Parameters
    ----------
    n_days : int, default=2
        Days simulated; the first ``n_validation_days`` are for tuning, the rest for testing
        (the paper: 5 validation days, 9 test days).
    n_validation_days : int, default=1
    center : (float, float), default=(30.0, 114.0)
        Latitude and longitude (deg) of the test station (an arbitrary mid-latitude region).
    station_spacing_km, n_training_stations, station_jitter_km :
        The mesh: spacing (km), stations around the test station, jitter (km).
    n_planes, satellites_per_plane, inclination_deg, semi_major_axis_km :
        The constellation (GPS values by default).
    elevation_mask_deg : float, default=5
    shell_height_km : float, default=350
    interval_s : int, default=1
        Seconds between epochs (1 Hz in the paper).
    observable : {"vtec", "slant"}, default="vtec"
    night_vtec, day_vtec_amplitude : float
        Night floor and diurnal amplitude (TECU).
    peak_local_time_h : float, default=14
    gradient_per_deg : (float, float)
        Relative change of the background per degree of latitude and of longitude.
    day_to_day : float, default=0.15
    n_mstids, mstid_wavelength_km, mstid_speed_m_s, mstid_amplitude :
        Medium-scale TIDs per day: count, ranges of wavelength (km), phase speed (m/s) and
        amplitude (TECU), drawn uniformly. Waves shorter than about twice the station spacing
        cannot be resolved by any interpolator between the stations.
    n_lstids, lstid_period_min, lstid_speed_m_s, lstid_amplitude :
        Large-scale TIDs per day (count, period (min), phase speed (m/s), amplitude (TECU)).
    n_small_scale_modes, small_scale_wavelength_km, small_scale_rms :
        Small-scale structure: random drifting plane waves, total RMS (TECU).
    noise : float, default=0.01
        Standard deviation (TECU) of each undifferenced observation.
    random_state : int, RandomState, Generator or None

    Returns
    -------
    GNSSSimulation
        With ``windows(seconds=60)``, ``stations``, ``links``, ``vtec(lat, lon, t)``,
        ``validation_days``, ``test_days``.

    Examples
    --------
    >>> from fmlearn.datasets import make_gnss_vtec
    >>> sim = make_gnss_vtec(n_days=2, random_state=0)
    >>> w = next(sim.windows(seconds=60, start=43200))
    >>> len(sim.stations), w.train.contrasts.shape[0] == w.train.y.shape[0]
    (17, True)
    >>> bool(9 <= w.n_satellites <= 20)
    True
    >>> import numpy as np
    >>> bool(np.allclose(w.train.contrasts @ w.train.truth, w.train.y, atol=0.2))
    True
    """
    if n_days < 1 or not 0 <= n_validation_days <= n_days:
        raise ValueError(f"need n_days >= 1 and 0 <= n_validation_days <= n_days, got "
                         f"n_days={n_days}, n_validation_days={n_validation_days}")
    if observable not in ("vtec", "slant"):
        raise ValueError(f"observable must be 'vtec' or 'slant', got {observable!r}")
    if n_training_stations < 2:
        raise ValueError("need at least two training stations to form double differences")
    if not 0 <= elevation_mask_deg < 90:
        raise ValueError("elevation_mask_deg must be in [0, 90)")
    if semi_major_axis_km <= EARTH_RADIUS_KM + shell_height_km or shell_height_km <= 0:
        raise ValueError("need 0 < shell_height_km and an orbit above the shell")
    if noise < 0 or interval_s < 1 or station_spacing_km <= 0:
        raise ValueError("noise must be >= 0, interval_s >= 1 and station_spacing_km > 0")
    params = {k: v for k, v in locals().items() if k != "random_state"}
    params["center"] = (float(center[0]), float(center[1]))
    params["n_days"], params["n_validation_days"] = int(n_days), int(n_validation_days)
    if isinstance(random_state, np.random.Generator):
        rng = random_state
    else:
        from sklearn.utils import check_random_state

        rng = np.random.default_rng(check_random_state(random_state).randint(2**31 - 1))
    return GNSSSimulation(params, rng)


# -- plain files ---------------------------------------------------------------------------------
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
