"""GNSS geometry shared by the simulator and the RINEX reader: satellite positions from the
GPS broadcast ephemeris, geodetic coordinates, look angles and ionospheric pierce points.

Plain NumPy on arrays; no file reading here (that is :mod:`._gnss_rinex`, through georinex).
"""

import numpy as np

__all__ = ["EARTH_RADIUS_KM", "broadcast_positions", "ecef_to_geodetic", "look_angles",
           "pierce_point", "transmit_positions"]

#: Mean Earth radius (km), IUGG: the sphere of the single-layer model.
EARTH_RADIUS_KM = 6371.0
#: WGS-84 ellipsoid.
WGS84_A = 6378137.0
WGS84_F = 1 / 298.257223563
#: IS-GPS-200 (Table 20-IV) constants: the values the broadcast elements were fitted with.
GPS_MU = 3.986005e14                  # m^3/s^2
GPS_OMEGA_E = 7.2921151467e-5         # rad/s
SPEED_OF_LIGHT = 299792458.0          # m/s
SECONDS_PER_WEEK = 604800.0

#: The broadcast elements, named as georinex names them.
EPHEMERIS_FIELDS = ("sqrtA", "Eccentricity", "M0", "DeltaN", "omega", "Omega0", "OmegaDot",
                    "Io", "IDOT", "Cuc", "Cus", "Crc", "Crs", "Cic", "Cis", "Toe", "GPSWeek")


def broadcast_positions(eph, t_gps):
    """ECEF positions (m) of GPS satellites from broadcast Keplerian elements (IS-GPS-200,
    Table 20-IV "Elements of coordinate systems").

    Parameters
    ----------
    eph : mapping of str to ndarray
        The elements of :data:`EPHEMERIS_FIELDS` (georinex's names), each broadcastable to
        ``t_gps``; ``Toe`` in seconds of the GPS week ``GPSWeek``.
    t_gps : ndarray
        Times (seconds since the GPS epoch 1980-01-06 00:00, GPS time) at which to evaluate.

    Returns
    -------
    ndarray of shape t_gps.shape + (3,)
        Earth-centred, Earth-fixed coordinates at ``t_gps`` in the frame of ``t_gps``.

    Kepler's equation is solved by Newton's method to 1e-14 rad (a single fixed-point step,
    as georinex's ``keplerian2ecef`` takes, is 160 m off on the published example of the
    tests, e = 0.004).
    """
    g = {k: np.asarray(eph[k], np.float64) for k in EPHEMERIS_FIELDS}
    A = g["sqrtA"] ** 2
    e = g["Eccentricity"]
    toe_abs = g["GPSWeek"] * SECONDS_PER_WEEK + g["Toe"]
    tk = np.asarray(t_gps, np.float64) - toe_abs
    n = np.sqrt(GPS_MU / A ** 3) + g["DeltaN"]
    M = g["M0"] + n * tk
    E = M.copy()
    for _ in range(30):
        dE = (E - e * np.sin(E) - M) / (1 - e * np.cos(E))
        E = E - dE
        if np.all(np.abs(dE) < 1e-14):
            break
    nu = np.arctan2(np.sqrt(1 - e * e) * np.sin(E), np.cos(E) - e)
    phi = nu + g["omega"]
    s2, c2 = np.sin(2 * phi), np.cos(2 * phi)
    u = phi + g["Cus"] * s2 + g["Cuc"] * c2
    r = A * (1 - e * np.cos(E)) + g["Crs"] * s2 + g["Crc"] * c2
    inc = g["Io"] + g["Cis"] * s2 + g["Cic"] * c2 + g["IDOT"] * tk
    xp, yp = r * np.cos(u), r * np.sin(u)
    Om = g["Omega0"] + (g["OmegaDot"] - GPS_OMEGA_E) * tk - GPS_OMEGA_E * g["Toe"]
    cO, sO, ci = np.cos(Om), np.sin(Om), np.cos(inc)
    return np.stack([xp * cO - yp * ci * sO, xp * sO + yp * ci * cO, yp * np.sin(inc)],
                    axis=-1)


def transmit_positions(eph, t_rx, rx_ecef, n_iter=3):
    """Satellite positions at signal transmission, in the ECEF frame of reception (m).

    The signal leaves the satellite tau = range / c earlier (~70 ms, in which a GPS satellite
    moves ~260 m) and the Earth turns by omega_e tau meanwhile (up to ~30 m at the
    satellite): the position is evaluated at t_rx - tau and rotated about z by omega_e tau
    (the Sagnac correction; e.g. Misra & Enge 2011, §4.2). The receiver clock offset (below a
    millisecond, a few metres of satellite motion) is ignored.

    ``rx_ecef`` broadcasts against ``t_rx`` + (3,).
    """
    t_rx = np.asarray(t_rx, np.float64)
    rx = np.asarray(rx_ecef, np.float64)
    tau = np.full(np.broadcast_shapes(t_rx.shape, rx.shape[:-1]), 0.075)
    for _ in range(n_iter):
        p = broadcast_positions(eph, t_rx - tau)
        a = GPS_OMEGA_E * tau
        ca, sa = np.cos(a), np.sin(a)
        p = np.stack([ca * p[..., 0] + sa * p[..., 1], -sa * p[..., 0] + ca * p[..., 1],
                      p[..., 2]], axis=-1)
        tau = np.linalg.norm(p - rx, axis=-1) / SPEED_OF_LIGHT
    return p


def ecef_to_geodetic(xyz):
    """WGS-84 geodetic latitude, longitude (degrees) and ellipsoidal height (m) of ECEF
    points (m), by Bowring's iteration (converges to < 1e-12 rad in 5 steps near the Earth's
    surface)."""
    xyz = np.asarray(xyz, np.float64)
    x, y, z = xyz[..., 0], xyz[..., 1], xyz[..., 2]
    a, f = WGS84_A, WGS84_F
    e2 = f * (2 - f)
    p = np.hypot(x, y)
    lat = np.arctan2(z, p * (1 - e2))
    for _ in range(6):
        N = a / np.sqrt(1 - e2 * np.sin(lat) ** 2)
        h = p / np.maximum(np.cos(lat), 1e-300) - N
        lat = np.arctan2(z, p * (1 - e2 * N / (N + h)))
    N = a / np.sqrt(1 - e2 * np.sin(lat) ** 2)
    h = p / np.maximum(np.cos(lat), 1e-300) - N
    return np.degrees(lat), np.degrees(np.arctan2(y, x)), h


def look_angles(rx_ecef, lat_deg, lon_deg, sat_ecef):
    """Elevation and azimuth (radians; azimuth clockwise from north in [0, 2 pi)) of
    satellites at ``sat_ecef`` seen from receivers at ``rx_ecef`` with geodetic latitude and
    longitude ``lat_deg``, ``lon_deg`` (local east-north-up frame of the ellipsoid normal).
    Shapes broadcast: ``rx_ecef`` (..., 3), ``lat_deg`` (...), ``sat_ecef`` (..., 3)."""
    lat, lon = np.radians(lat_deg), np.radians(lon_deg)
    d = np.asarray(sat_ecef, np.float64) - np.asarray(rx_ecef, np.float64)
    d = d / np.linalg.norm(d, axis=-1, keepdims=True)
    sl, cl, so, co = np.sin(lat), np.cos(lat), np.sin(lon), np.cos(lon)
    east = -so * d[..., 0] + co * d[..., 1]
    north = -sl * co * d[..., 0] - sl * so * d[..., 1] + cl * d[..., 2]
    up = cl * co * d[..., 0] + cl * so * d[..., 1] + sl * d[..., 2]
    return np.arcsin(np.clip(up, -1, 1)), np.mod(np.arctan2(east, north), 2 * np.pi)


def pierce_point(lat_deg, lon_deg, elev, azim, shell_height_km, radius_km=EARTH_RADIUS_KM):
    """Ionospheric pierce point (degrees) on a thin shell, and the zenith angle there (rad).

    Spherical-Earth single-layer model (Schaer 1999, Eq. 2.2-2.4): zenith angle at the shell
    z' = asin(R cos E / (R + H)), Earth-central angle psi = pi/2 - E - z', then the point at
    distance psi along azimuth A from the receiver. The mapping function is 1 / cos z'.
    """
    R, H = radius_km, shell_height_km
    lat0, lon0 = np.radians(lat_deg), np.radians(lon_deg)
    zp = np.arcsin(R / (R + H) * np.cos(elev))
    psi = np.pi / 2 - elev - zp
    lat = np.arcsin(np.sin(lat0) * np.cos(psi) + np.cos(lat0) * np.sin(psi) * np.cos(azim))
    # atan2 form of the longitude offset: exact for any azimuth, also past the pole's meridian.
    dlon = np.arctan2(np.sin(azim) * np.sin(psi) * np.cos(lat0),
                      np.cos(psi) - np.sin(lat0) * np.sin(lat))
    return np.degrees(lat), np.degrees(lon0 + dlon), zp
