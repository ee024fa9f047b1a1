"""GNSS double differences of the ionosphere: the set-up of Lin et al. 2019, §4.2, simulated or
read.

Lin et al. 2019 (§4.2) learns the vertical total electron content (vTEC) at ionospheric pierce
points from *double differences*: for satellites a, b and ground stations c, d joined in the
data-link graph, y = vTEC(x_ac) - vTEC(x_ad) - vTEC(x_bc) + vTEC(x_bd) (Lin et al. 2019, §4.2, the
equation defining y^(a,b,c,d)). The paper's data are proprietary, so :func:`make_gnss_vtec`
simulates the same set-up (a triangular mesh of stations, the GPS constellation, a thin-shell
ionosphere with a diurnal cycle, a regional gradient and travelling ionospheric disturbances), and
:func:`write_gnss_csv` / :func:`load_gnss_csv` move the same observations through two plain CSV
files, so that real data run through the same pipeline. Both return an object whose
``windows(seconds=60)`` yields the paper's online protocol windows (:class:`GNSSWindow`).

Simplifications (each documented where it is made): spherical Earth, circular orbits without
perturbations, a single-layer ionosphere, and noise that is white per undifferenced observation
(ambiguities and receiver/satellite biases are assumed resolved, as double differencing does).
"""

import numpy as np
from scipy.spatial import Delaunay

from ._gnss_csv import GNSSObservations, load_gnss_csv, write_gnss_csv
from ._gnss_geometry import EARTH_RADIUS_KM, pierce_point
from ._gnss_windows import (
    POINT_FIELDS,
    SECONDS_PER_DAY,
    GNSSPart,
    GNSSWindow,
    _window,
    _Windows,
    double_differences,
)

__all__ = ["GNSSPart", "GNSSWindow", "GNSSObservations", "GNSSSimulation", "POINT_FIELDS",
           "make_gnss_vtec", "write_gnss_csv", "load_gnss_csv"]

#: Earth's gravitational parameter (km^3/s^2), WGS-84.
GM_KM3_S2 = 398600.4418
#: Earth's rotation rate (rad/s), WGS-84.
EARTH_ROTATION = 7.2921151467e-5


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
        self._build_storms()

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
        """Pierce point (deg) on the thin shell, and the zenith angle there (rad)
        (:func:`pierce_point`, Schaer 1999)."""
        return pierce_point(self.stations["lat"][station], self.stations["lon"][station], elev,
                            azim, self.shell_height_km)

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

    def _build_storms(self):
        """Per disturbed day: the start time of the storm front and its heading. Drawn from a
        stream of their own, so that the quiet days are the same with or without storms."""
        rng = np.random.default_rng([self._seed, 7919])
        self._storms = {}
        for d in sorted({int(x) for x in self.disturbed_days}):
            self._storms[d] = (rng.uniform(6, 18) * 3600.0, np.radians(rng.uniform(160, 200)))

    def _disturbance(self, lat, lon, t, day, lt_h):
        """Storm-time additions (TECU) on disturbed days: a storm-enhanced-density front, a
        sharp gradient of ``storm_amplitude`` TECU over ~150 km travelling equatorward at
        ``storm_speed_m_s`` from its onset (Foster 1993; gradients of 5-20 TECU per 100 km
        were observed over the US on 2003-10-30, e.g. Datta-Barua et al. 2010), and an
        equatorial-anomaly crest, a ridge of ``crest_amplitude`` TECU x the diurnal shape
        ``crest_width_deg`` wide, ``crest_offset_deg`` from the network's latitude (its
        poleward expansion during storms puts steep latitudinal gradients over mid-latitude
        networks; Mannucci et al. 2005)."""
        out = np.zeros_like(lat)
        if not self._storms:
            return out
        lat0, lon0 = self.center
        east = np.radians(lon - lon0) * EARTH_RADIUS_KM * np.cos(np.radians(lat0))
        north = np.radians(lat - lat0) * EARTH_RADIUS_KM
        tod = np.mod(t, SECONDS_PER_DAY)
        for d, (onset, heading) in self._storms.items():
            sel = day == d
            if not sel.any():
                continue
            # distance along the heading minus the distance travelled since (200 km before) onset
            along = east[sel] * np.sin(heading) + north[sel] * np.cos(heading)
            front = self.storm_speed_m_s / 1000 * (tod[sel] - onset) - 200.0
            active = tod[sel] >= onset
            out[sel] += active * self.storm_amplitude * 0.5 * (1 - np.tanh((along - front) / 75.0))
            shape = ((1 + np.cos(2 * np.pi * (lt_h[sel] - self.peak_local_time_h) / 24)) / 2)
            crest = lat0 + self.crest_offset_deg
            out[sel] += self.crest_amplitude * shape * np.exp(
                -0.5 * ((lat[sel] - crest) / self.crest_width_deg) ** 2)
        return out

    def vtec(self, lat, lon, t):
        """The simulated vTEC (TECU) at latitude/longitude (deg) and time t (s since day 0).

        The model::

            vTEC = day factor * background(local time) * (1 + regional gradient)
                   + travelling ionospheric disturbances + small-scale structure
                   (+ a storm front and an anomaly crest on ``disturbed_days``)
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
        v += self._disturbance(lat, lon, t, day, lt_h)
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
        el = elev[ti, st, sa]
        if self.observable == "vtec":
            truth = self.vtec(lat, lon, t[ti])
        elif self.truth == "thin_shell":
            truth = self.vtec(lat, lon, t[ti]) / np.cos(zp)
        else:
            truth = self.slant_tec(st, el, azim[ti, st, sa], t[ti])
        rng = np.random.default_rng([self._seed, int(start)])
        obs = truth + self.noise_std(el) * rng.standard_normal(truth.shape[0])
        index = -np.ones(mask.shape, dtype=np.int64)
        index[ti, st, sa] = np.arange(ti.shape[0])
        pairs, ys = double_differences(mask, elev, obs, index, self.links, t.astype(np.int64))
        return pts, pairs, ys, truth

    def noise_std(self, elev):
        """Standard deviation (TECU) of an undifferenced observation at elevation ``elev``
        (rad): ``noise`` at the zenith, and with ``noise_model="elevation"`` growing as
        sqrt((1 + 1 / sin^2 E) / 2) toward the horizon (the a^2 + b^2 / sin^2 E model of
        RTKLIB with a = b, for carrier-phase multipath and noise: x8 at 5 deg)."""
        elev = np.asarray(elev, np.float64)
        if self.noise_model == "white":
            return np.full(elev.shape, float(self.noise))
        return self.noise * np.sqrt((1 + 1 / np.sin(elev) ** 2) / 2)

    def slant_tec(self, station, elev, azim, t):
        """Slant TEC (TECU) along the lines of sight through a Chapman layer.

        The electron density is n(h, lat, lon, t) = vTEC(lat, lon, t) p(h), with the Chapman
        alpha profile p(h) proportional to exp((1 - z - exp(-z)) / 2), z = (h - h_m) / H
        (h_m = ``chapman_peak_km``, H = ``chapman_scale_km``; Chapman 1931, e.g. Davies 1990
        §3.4), normalised so that its vertical integral is the vTEC of :meth:`vtec`. The slant
        TEC integrates n along the ray: STEC = int vTEC(lat(h), lon(h), t) p(h) / cos z'(h)
        dh, where (lat(h), lon(h)) is the ray's point at height h and z'(h) its zenith angle
        there (both from :func:`pierce_point` on the sphere R + h), by 48-node Gauss-Legendre
        quadrature over 80-1500 km. The single-layer model replaces this by
        vTEC(IPP) / cos z'(h_shell): its error (the horizontal structure sampled across the
        layer, and the mapping function of a thick layer) is largest at low elevation.
        """
        nodes, weights = np.polynomial.legendre.leggauss(48)
        lo, hi = 80.0, 1500.0
        h = lo + (hi - lo) * (nodes + 1) / 2
        z = (h - self.chapman_peak_km) / self.chapman_scale_km
        p = weights * np.exp(0.5 * (1 - z - np.exp(-z)))
        p /= p.sum()
        lat0 = self.stations["lat"][station]
        lon0 = self.stations["lon"][station]
        out = np.zeros(np.shape(elev))
        for hk, pk in zip(h, p, strict=True):
            if pk < 1e-12:
                continue
            la, lo_, zp = pierce_point(lat0, lon0, elev, azim, hk)
            out += pk * self.vtec(la, lo_, t) / np.cos(zp)
        return out

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
                   interval_s=1, observable="slant", truth="chapman", chapman_peak_km=350.0,
                   chapman_scale_km=60.0, night_vtec=5.0, day_vtec_amplitude=30.0,
                   peak_local_time_h=14.0, gradient_per_deg=(-0.03, 0.005), day_to_day=0.15,
                   n_mstids=3, mstid_wavelength_km=(150.0, 400.0), mstid_speed_m_s=(100.0, 250.0),
                   mstid_amplitude=(0.1, 0.4), n_lstids=1, lstid_period_min=(30.0, 180.0),
                   lstid_speed_m_s=(400.0, 1000.0), lstid_amplitude=(0.3, 1.0),
                   n_small_scale_modes=20, small_scale_wavelength_km=(20.0, 80.0),
                   small_scale_rms=0.05, noise=0.01, noise_model="elevation",
                   disturbed_days=(), storm_amplitude=10.0, storm_speed_m_s=200.0,
                   crest_amplitude=15.0, crest_offset_deg=-4.0, crest_width_deg=3.0,
                   random_state=None):
    """Simulate Lin et al.'s (2019) vTEC set-up: stations, GPS satellites, pierce points, double
    differences.

    Geometry. Ground stations on a triangular mesh ``station_spacing_km`` apart (Lin et al. 2019,
    §4.2: "around 75 kilometers"): the test station at ``center`` and the ``n_training_stations``
    (16 in the paper) nearest mesh nodes around it, each moved by up to ``station_jitter_km``.
    The data-link graph joins mesh neighbours (Delaunay edges up to 1.5 spacings). The GPS
    constellation: ``n_planes`` circular orbits (six, 60 deg apart in right ascension),
    inclination 55 deg, semi-major axis 26,560 km, hence the real period
    2 pi sqrt(a^3 / GM) = 43,08x s (half a sidereal day); Walker-like phasing
    (IS-GPS-200; Misra & Enge, *Global Positioning System*, 2nd ed., ch. 2). GPS alone (24-31
    satellites, 4-6 per plane) shows 8-12 satellites above 10 deg; Lin et al. 2019 reports "around
    10 to 20" valid satellites, so the defaults fly 6 per plane with a 5 deg mask, which gives
    9-15 in view (about 11 on average). Satellites are observed at 1 Hz (``interval_s``) above
    ``elevation_mask_deg``.

    Pierce points. The single-layer model with the shell at ``shell_height_km`` = 350 km (IGS
    GIMs use 450 km, regional models 300-400 km; Schaer 1999): each (station, satellite) line of
    sight pierces the shell at a latitude/longitude; the table reports it with the satellite's
    zenith angle and azimuth seen from the station (the theta, gamma of Lin et al. 2019, §4.2).

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

    Observations. A dual-frequency receiver measures the *slant* TEC along its line of sight
    (the geometry-free combination): ``observable="slant"`` (default) differences slant TEC, so
    the mapping function is in the data and f must learn it too (the encoder's zenith
    features make that possible). ``truth="chapman"`` (default) integrates the electron
    density of a Chapman layer (peak ``chapman_peak_km``, scale height ``chapman_scale_km``,
    horizontal structure = the vTEC field above) along each ray (:meth:`GNSSSimulation.
    slant_tec`), so that the single-layer model of the encoder has its real error, largest at
    low elevation; ``truth="thin_shell"`` takes vTEC(IPP) / cos z' instead, for which the
    single-layer model is exact. ``observable="vtec"`` (with ``truth="thin_shell"``) is Lin et
    al.'s idealisation: y = vTEC(x_ac) - vTEC(x_ad) - vTEC(x_bc) + vTEC(x_bd) (§4.2), the
    vertical TEC at the four pierce points, which no receiver measures. Each undifferenced
    observation gets Gaussian noise of standard deviation ``noise`` TECU at the zenith,
    growing toward the horizon as sqrt((1 + 1/sin^2 E) / 2) with ``noise_model="elevation"``
    (default; x8 at 5 deg: carrier multipath, RTKLIB's elevation model) or constant with
    ``"white"``; the double differences thus have correlated noise. For every link (c, d)
    and epoch, the reference satellite a is the highest seen from c and b runs over the other
    satellites seen from both stations. ``disturbed_days`` lists days with a storm: a
    travelling storm-enhanced-density front (``storm_amplitude`` TECU over ~150 km, moving at
    ``storm_speed_m_s``) and an equatorial-anomaly crest (``crest_amplitude`` TECU,
    ``crest_offset_deg`` from the network, ``crest_width_deg`` wide), see
    :meth:`GNSSSimulation._disturbance`. The thin-shell, vTEC, white-noise, quiet settings
    (``observable="vtec", truth="thin_shell", noise_model="white"``) reproduce the windows of
    earlier releases (to 1e-13: the pierce-point longitude is now taken in atan2 form).

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
    observable : {"slant", "vtec"}, default="slant"
    truth : {"chapman", "thin_shell"}, default="chapman"
    chapman_peak_km, chapman_scale_km : float, default=350, 60
        The Chapman layer of ``truth="chapman"``.
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
        Standard deviation (TECU) of each undifferenced observation at the zenith.
    noise_model : {"elevation", "white"}, default="elevation"
    disturbed_days : sequence of int, default=()
        Days with a storm front and an anomaly crest.
    storm_amplitude, storm_speed_m_s, crest_amplitude, crest_offset_deg, crest_width_deg :
        The storm's settings (TECU, m/s, TECU, degrees of latitude, degrees).
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
    >>> resid = w.train.contrasts @ w.train.truth - w.train.y   # the noise alone
    >>> bool(np.sqrt(np.mean(resid ** 2)) < 0.1)
    True
    """
    params = {k: v for k, v in locals().items() if k != "random_state"}
    _check_params(params)
    params["center"] = (float(center[0]), float(center[1]))
    params["n_days"], params["n_validation_days"] = int(n_days), int(n_validation_days)
    return GNSSSimulation(params, _generator(random_state))


def _check_params(p):
    """Refuse the parameters of :func:`make_gnss_vtec` (a dict of them) that make no set-up."""
    for name, value in p.items():
        if isinstance(value, str) or value is None:
            continue
        try:
            vals = np.asarray(value, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number or a pair of numbers, got {value!r}") \
                from None
        if not np.all(np.isfinite(vals)):
            raise ValueError(f"{name} must be finite, got {value!r}: NaN or infinity would "
                             "make NaN data")
    if p["n_days"] < 1 or not 0 <= p["n_validation_days"] <= p["n_days"]:
        raise ValueError(f"need n_days >= 1 and 0 <= n_validation_days <= n_days, got "
                         f"n_days={p['n_days']}, n_validation_days={p['n_validation_days']}")
    if p["observable"] not in ("vtec", "slant"):
        raise ValueError(f"observable must be 'vtec' or 'slant', got {p['observable']!r}")
    if p["truth"] not in ("chapman", "thin_shell"):
        raise ValueError(f"truth must be 'chapman' or 'thin_shell', got {p['truth']!r}")
    if p["observable"] == "vtec" and p["truth"] != "thin_shell":
        raise ValueError("observable='vtec' (the vertical TEC at the pierce points, Lin et al. "
                         "2019's idealisation) needs truth='thin_shell': a Chapman layer is "
                         "observed along the slant path only")
    if p["noise_model"] not in ("elevation", "white"):
        raise ValueError(f"noise_model must be 'elevation' or 'white', got "
                         f"{p['noise_model']!r}")
    if p["chapman_scale_km"] <= 0 or not 80 < p["chapman_peak_km"] < 1500:
        raise ValueError("need chapman_scale_km > 0 and 80 < chapman_peak_km < 1500")
    bad = [d for d in np.atleast_1d(p["disturbed_days"]) if not 0 <= int(d) < p["n_days"]]
    if bad:
        raise ValueError(f"disturbed_days {bad} are outside 0..{p['n_days'] - 1}")
    if p["n_training_stations"] < 2:
        raise ValueError("need at least two training stations to form double differences")
    if not 0 <= p["elevation_mask_deg"] < 90:
        raise ValueError("elevation_mask_deg must be in [0, 90)")
    if p["semi_major_axis_km"] <= EARTH_RADIUS_KM + p["shell_height_km"] \
            or p["shell_height_km"] <= 0:
        raise ValueError("need 0 < shell_height_km and an orbit above the shell")
    if p["noise"] < 0 or p["interval_s"] < 1 or p["station_spacing_km"] <= 0:
        raise ValueError("noise must be >= 0, interval_s >= 1 and station_spacing_km > 0")


def _generator(random_state):
    """A NumPy Generator from ``random_state`` (a Generator is used as it is)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    from sklearn.utils import check_random_state

    return np.random.default_rng(check_random_state(random_state).randint(2**31 - 1))
