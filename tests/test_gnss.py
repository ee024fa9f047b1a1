"""Tests of the GNSS vTEC simulator and file layout (fmlearn.datasets._gnss, seed 001 §4.2)."""

import os

import numpy as np
import pytest

from fmlearn.datasets import load_gnss_csv, make_gnss_vtec, write_gnss_csv
from fmlearn.datasets._gnss import EARTH_RADIUS_KM


@pytest.fixture(scope="module")
def sim():
    return make_gnss_vtec(n_days=2, random_state=0)


@pytest.fixture(scope="module")
def window(sim):
    return next(sim.windows(seconds=60, days=[1], start=36000))


def test_orbits_are_gps_orbits(sim):
    # Kepler's third law: a = 26,560 km gives half a sidereal day (43,082 s) to 0.1 %.
    assert abs(sim.orbital_period_s - 86164.1 / 2) < 0.001 * 43082
    t = np.arange(0, 43200, 300.0)
    pos = sim._satellites_ecef(t)
    r = np.linalg.norm(pos, axis=-1)
    np.testing.assert_allclose(r, 26560.0, rtol=1e-12)
    # The sub-satellite latitude reaches the inclination and no more.
    lat = np.degrees(np.arcsin(pos[..., 2] / r))
    assert 54.0 < lat.max() <= 55.0 + 1e-9
    assert pos.shape[1] == 36


def test_stations_form_a_75_km_mesh(sim):
    st = sim.stations
    assert st.shape[0] == 17 and st["role"][0] == "test"
    assert (st["lat"][0], st["lon"][0]) == (30.0, 114.0)
    xy = np.column_stack([st["east_km"], st["north_km"]])
    d = np.hypot(*(xy[:, None, :] - xy[None, :, :]).transpose(2, 0, 1))
    np.fill_diagonal(d, np.inf)
    nearest = d.min(axis=1)
    assert np.all((nearest > 60) & (nearest < 85))
    # Every link joins mesh neighbours, and the test station has its six neighbours.
    lengths = d[sim.links[:, 0], sim.links[:, 1]]
    assert np.all(lengths < 1.5 * 75 + 15)
    assert np.sum(np.any(sim.links == 0, axis=1)) == 6


def test_ten_to_twenty_satellites_in_view(sim):
    vis = sim.visible_satellites(np.arange(0, 86400, 600.0))
    assert vis.min() >= 8 and vis.max() <= 20 and vis.mean() >= 10


def test_pierce_points_match_a_ray_shell_intersection(window, sim):
    # Independent oracle: intersect the station-satellite ray with the sphere R + 350 km.
    p = window.train.points[:300]
    R, H = EARTH_RADIUS_KM, 350.0
    lat, lon = np.radians(sim.stations["lat"][p["station"]]), np.radians(
        sim.stations["lon"][p["station"]])
    up = np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])
    east = np.column_stack([-np.sin(lon), np.cos(lon), np.zeros_like(lon)])
    north = np.column_stack([-np.sin(lat) * np.cos(lon), -np.sin(lat) * np.sin(lon),
                             np.cos(lat)])
    z, az = p["zenith"], p["azimuth"]
    u = (np.cos(z)[:, None] * up + np.sin(z)[:, None] * (np.cos(az)[:, None] * north
                                                         + np.sin(az)[:, None] * east))
    s0 = R * up
    b = np.sum(s0 * u, axis=1)
    dist = -b + np.sqrt(b * b - (R * R - (R + H) ** 2))
    q = s0 + dist[:, None] * u
    qlat = np.degrees(np.arcsin(q[:, 2] / (R + H)))
    qlon = np.degrees(np.arctan2(q[:, 1], q[:, 0]))
    np.testing.assert_allclose(p["lat"], qlat, atol=1e-9)
    np.testing.assert_allclose(p["lon"], qlon, atol=1e-9)
    # The line of sight points at the satellite: its elevation is above the mask.
    assert np.all(z <= np.radians(90 - 5) + 1e-12)


def test_double_differences_are_contrasts_of_the_field(window, sim):
    for part in (window.train, window.test):
        C = part.contrasts
        assert C.shape == (part.y.shape[0], part.points.shape[0])
        assert np.all(np.abs(C.data) == 1) and np.all(C.getnnz(axis=1) == 4)
        np.testing.assert_array_equal(np.asarray(C.sum(axis=1)).ravel(), 0)
        resid = C @ part.truth - part.y
        # Elevation-dependent noise: each corner has std noise_std(E); the residual of a
        # double difference, divided by the root of the four variances, is standard normal.
        # Targets share corners (the reference satellite's, the test station's), so their
        # mean has the exact variance 1' D C S C' D 1 / n^2 (D = diag of 1/sqrt(variances),
        # S = diag of the corners' variances): it must lie within 4 of its standard errors.
        sd = sim.noise_std(np.pi / 2 - part.points["zenith"])
        inv = 1 / np.sqrt(abs(C) @ sd ** 2)
        z = resid * inv
        u = C.T @ inv
        se = np.sqrt(np.sum(u ** 2 * sd ** 2)) / z.shape[0]
        assert abs(z.mean()) < 4 * se and 0.9 < z.std() < 1.1
        assert sd.min() >= 0.01 - 1e-12 and sd.max() > 3 * 0.01
        for r in range(0, part.y.shape[0], 97):
            pr = part.pairs[r]
            cols = C.indices[C.indptr[r]:C.indptr[r + 1]]
            pts = part.points[cols]
            assert np.all(pts["epoch"] == pr["epoch"])
            assert set(pts["station"]) == {pr["station_c"], pr["station_d"]}
            assert set(pts["satellite"]) == {pr["satellite_a"], pr["satellite_b"]}
    assert np.all((window.test.pairs["station_c"] == 0) | (window.test.pairs["station_d"] == 0))
    assert not np.any(window.train.points["station"] == 0)
    assert window.n_satellites == np.unique(window.train.points["satellite"]).shape[0]


def test_noise_free_double_differences_are_exact():
    s = make_gnss_vtec(n_days=1, noise=0.0, observable="slant", random_state=1)
    w = next(s.windows(seconds=10, start=50000))
    np.testing.assert_allclose(w.train.contrasts @ w.train.truth, w.train.y, atol=1e-12)
    # slant TEC >= vTEC at the same point
    v = s.vtec(w.train.points["lat"], w.train.points["lon"], w.train.points["epoch"])
    assert np.all(w.train.truth >= v - 1e-12)


def test_vtec_field_physics(sim):
    lat0, lon0 = sim.center
    # Local noon at 114 E is about 04:24 UT: the diurnal cycle peaks near 14 LT.
    t_day = (14 - lon0 / 15) * 3600
    t_night = t_day + 12 * 3600
    assert sim.vtec(lat0, lon0, t_day) > 3 * sim.vtec(lat0, lon0, t_night)
    # Regional gradient: lower vTEC poleward.
    assert sim.vtec(lat0 + 2, lon0, t_day) < sim.vtec(lat0 - 2, lon0, t_day)
    # The TIDs move the field over minutes: a 10-minute lag changes the local structure.
    x = np.linspace(-1, 1, 50)
    a = sim.vtec(lat0 + x, lon0, t_day) - sim.vtec(lat0 + x, lon0, t_day).mean()
    b = sim.vtec(lat0 + x, lon0, t_day + 600) - sim.vtec(lat0 + x, lon0, t_day + 600).mean()
    assert np.abs(a - b).max() > 0.01


def test_same_seed_same_windows_and_days_split():
    a = make_gnss_vtec(n_days=3, n_validation_days=2, random_state=5)
    b = make_gnss_vtec(n_days=3, n_validation_days=2, random_state=5)
    wa = list(a.windows(seconds=20, days="test", start=1000, stop=1100, every=40))
    wb = list(b.windows(seconds=20, days="test", start=1000, stop=1100, every=40))
    assert len(wa) == 3 and all(w.day == 2 and not w.validation for w in wa)
    for x, y in zip(wa, wb, strict=True):
        np.testing.assert_array_equal(x.train.y, y.train.y)
    assert a.validation_days == [0, 1] and a.test_days == [2]
    assert all(w.validation for w in a.windows(seconds=20, days="validation", stop=40))


def test_bad_parameters():
    # Non-finite settings would simulate NaN data: refused by name.
    for kw in ({"noise": np.nan}, {"day_vtec_amplitude": np.inf},
               {"mstid_amplitude": (0.1, np.inf)}, {"center": (np.nan, 114.0)}):
        with pytest.raises(ValueError, match=f"{next(iter(kw))} must be finite"):
            make_gnss_vtec(**kw)
    with pytest.raises(ValueError, match="observable"):
        make_gnss_vtec(observable="stec")
    with pytest.raises(ValueError, match="n_validation_days"):
        make_gnss_vtec(n_days=1, n_validation_days=2)
    s = make_gnss_vtec(n_days=1, random_state=0)
    with pytest.raises(ValueError, match="outside"):
        next(s.windows(days=[3]))
    with pytest.raises(ValueError, match="seconds"):
        next(s.windows(seconds=0))


def test_csv_round_trip(tmp_path, sim):
    ws = list(sim.windows(seconds=30, days=[0, 1], start=7200, stop=7260, every=30))
    write_gnss_csv(tmp_path, ws)
    data = load_gnss_csv(tmp_path, test_station=0, n_validation_days=1)
    back = list(data.windows(seconds=30, days=[0, 1], start=7200, stop=7260, every=30))
    assert len(back) == len(ws)
    for w, r in zip(ws, back, strict=True):
        assert (w.day, w.start, w.validation, w.n_satellites) == (r.day, r.start, r.validation,
                                                                 r.n_satellites)
        for p, q in ((w.train, r.train), (w.test, r.test)):
            # Same targets (as a set of records), same contrasts of the same points.
            po = np.argsort(p.pairs, order=list(p.pairs.dtype.names))
            qo = np.argsort(q.pairs, order=list(q.pairs.dtype.names))
            np.testing.assert_array_equal(p.pairs[po], q.pairs[qo])
            np.testing.assert_allclose(p.y[po], q.y[qo], rtol=0, atol=0)
            for field in ("lat", "lon", "zenith", "azimuth"):
                # (the order of the four terms may differ: equal to rounding)
                np.testing.assert_allclose((p.contrasts @ p.points[field])[po],
                                           (q.contrasts @ q.points[field])[qo], atol=1e-12)


def test_csv_errors(tmp_path, sim):
    w = next(sim.windows(seconds=5, start=100))
    write_gnss_csv(tmp_path, [w])
    with pytest.raises(ValueError, match="test_station 99"):
        load_gnss_csv(tmp_path, test_station=99)
    path = os.path.join(tmp_path, "points.csv")
    lines = open(path).read().splitlines()
    open(path, "w").write("\n".join([lines[0]] + [lines[1].replace(lines[1].split(",")[3],
                                                                    "nan")] + lines[2:]))
    with pytest.raises(ValueError, match="NaN"):
        load_gnss_csv(tmp_path, test_station=0)
    open(path, "w").write("\n".join(lines[:1] + lines[2:]))
    data = load_gnss_csv(tmp_path, test_station=0)
    with pytest.raises(ValueError, match="references a pierce point"):
        list(data.windows(seconds=5, start=100, stop=105))
    open(path, "w").write("epoch,station\n1,2\n")
    with pytest.raises(ValueError, match="header"):
        load_gnss_csv(tmp_path, test_station=0)
    os.remove(path)
    with pytest.raises(FileNotFoundError, match="points.csv"):
        load_gnss_csv(tmp_path, test_station=0)


def test_chapman_slant_tec_integrates_the_layer_along_the_ray():
    # Oracle: march along the ray in Cartesian coordinates (1 km steps to 3,000 km of path)
    # through a horizontally uniform layer of vertical TEC 20: sum n(h(s)) ds, with the
    # Chapman profile normalised by its own vertical sum. At the zenith the slant TEC is the
    # vertical TEC; toward the horizon the thick layer's mapping function differs from the
    # thin shell's 1 / cos z'(350 km), by more at lower elevation.
    s = make_gnss_vtec(n_days=1, random_state=0)
    s.vtec = lambda lat, lon, t: np.full(np.shape(lat), 20.0)
    R, hm, H = EARTH_RADIUS_KM, 350.0, 60.0

    def profile(h):
        z = (h - hm) / H
        return np.exp(0.5 * (1 - z - np.exp(-z)))

    hv = np.arange(0.5, 3000, 1.0)
    norm = profile(hv).sum()
    elev = np.radians([90.0, 60.0, 30.0, 15.0, 5.0])
    ds = 0.05
    path = np.arange(ds / 2, 6000, ds)
    oracle = []
    for e in elev:
        h = np.sqrt(R ** 2 + path ** 2 + 2 * R * path * np.sin(e)) - R
        oracle.append(20.0 * profile(h).sum() * ds / norm)
    got = s.slant_tec(np.zeros(5, int), elev, np.zeros(5), np.zeros(5))
    np.testing.assert_allclose(got, oracle, rtol=2e-4)
    assert abs(got[0] - 20.0) < 1e-9
    thin = 20.0 / np.sqrt(1 - (R / (R + 350.0) * np.cos(elev)) ** 2)
    rel = np.abs(got / thin - 1)
    assert rel[0] < 1e-9 and np.all(np.diff(rel) > 0) and rel[-1] > 0.01


def test_chapman_truth_errs_most_at_low_elevation_and_storms_add_gradients():
    kw = dict(n_days=2, noise=0.0, random_state=4)
    ch = make_gnss_vtec(truth="chapman", **kw)
    th = make_gnss_vtec(truth="thin_shell", **kw)
    w_ch = next(ch.windows(seconds=5, days=[0], start=50000))
    w_th = next(th.windows(seconds=5, days=[0], start=50000))
    p = w_ch.train.points
    np.testing.assert_array_equal(p, w_th.train.points)
    rel = np.abs(w_ch.train.truth / w_th.train.truth - 1)
    elev = np.degrees(np.pi / 2 - p["zenith"])
    # the single-layer model's own error: small overhead, largest near the horizon
    hi, lo = elev > np.percentile(elev, 75), elev < np.percentile(elev, 25)
    assert np.median(rel[hi]) < np.median(rel[lo]) / 2 and np.median(rel[lo]) > 0.01
    # a disturbed day: day 0 unchanged, day 1 carries a storm front and an anomaly crest
    st = make_gnss_vtec(disturbed_days=(1,), **kw)
    w0 = next(st.windows(seconds=5, days=[0], start=50000))
    np.testing.assert_array_equal(w0.train.y, w_ch.train.y)
    lat = np.linspace(25.0, 35.0, 201)
    # when the front crosses the network's centre (200 km from its start at 200 m/s): a wall
    # of storm_amplitude TECU over ~150 km, i.e. several TECU per degree of latitude
    t = 86400 + st._storms[1][0] + 1000.0
    diff = st.vtec(lat, np.full_like(lat, 114.0), t) - ch.vtec(lat, np.full_like(lat, 114.0), t)
    assert np.max(np.abs(np.diff(diff))) / 0.05 > 2.0
    assert np.ptp(diff) > 0.5 * st.storm_amplitude
    with pytest.raises(ValueError, match="disturbed_days"):
        make_gnss_vtec(n_days=2, disturbed_days=(5,))
    with pytest.raises(ValueError, match="needs truth='thin_shell'"):
        make_gnss_vtec(observable="vtec")
