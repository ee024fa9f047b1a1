"""Tests of real GNSS observations to double differences (fmlearn.datasets._gnss_rinex,
_gnss_geometry): orbits, look angles, pierce points, TEC levelling, slips, bad files.

The fixtures under tests/fixtures/gnss are cuts of public RINEX files (see its README)."""

import gzip
import os

import numpy as np
import pytest

pytest.importorskip("georinex")
pytest.importorskip("hatanaka")

from fmlearn.datasets import RinexError, load_rinex_network  # noqa: E402
from fmlearn.datasets._gnss_geometry import (  # noqa: E402
    EARTH_RADIUS_KM,
    SPEED_OF_LIGHT,
    WGS84_A,
    WGS84_F,
    broadcast_positions,
    ecef_to_geodetic,
    transmit_positions,
)
from fmlearn.datasets._gnss_rinex import (  # noqa: E402
    F1,
    F2,
    LAMBDA1,
    LAMBDA2,
    TECU_PER_M,
    _ephemerides,
    _load,
    tec_arcs,
)

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "gnss")
JP = [os.path.join(FIX, f) for f in ("07590920.05o.gz", "30400920.05o.gz")]
JP_NAV = os.path.join(FIX, "07590920.05n.gz")
NL = [os.path.join(FIX, f) for f in ("delf0010.21o.gz", "eijs0010.21d.gz", "zegv0010.21o.gz")]
NL_NAV = os.path.join(FIX, "cbw10010.21n.gz")
AZ = [os.path.join(FIX, f) for f in ("pdel0010.21o.gz", "flrs0010.12o.gz")]


@pytest.fixture(scope="module")
def japan():
    return load_rinex_network(JP, JP_NAV)


@pytest.fixture(scope="module")
def dutch():
    return load_rinex_network(NL, NL_NAV)


def test_broadcast_orbit_matches_the_published_example():
    # The worked example of Calais' GPS geodesy lab (Purdue), also georinex's
    # tests/test_kepler.py: elements of GPS week 910, evaluated at 403272.93 s of the week.
    # The reference coordinates carry 9 significant digits (0.01-0.05 m), the elements ~9
    # too: IS-GPS-200's algorithm must land within a metre (WGS-84's GM instead of the GPS
    # value is 2.1 m off; one fixed-point step of Kepler's equation, as georinex's
    # keplerian2ecef takes, 160 m).
    eph = {"GPSWeek": 910, "Toe": 410400, "Eccentricity": 4.27323824e-3,
           "sqrtA": 5.15353571e3, "Cic": 9.8720193e-8, "Crc": 282.28125,
           "Cis": -3.9115548e-8, "Crs": -132.71875, "Cuc": -6.60121440e-6,
           "Cus": 5.31412661e-6, "DeltaN": 4.3123e-9, "Omega0": 2.29116688,
           "omega": -0.88396725, "Io": 0.97477102, "OmegaDot": -8.025691e-9,
           "IDOT": -4.23946e-10, "M0": 2.24295542}
    ref = np.array([-5.67841101e6, -2.49239629e7, 7.05651887e6])
    pos = broadcast_positions(eph, 910 * 604800 + 4.03272930e5)
    assert np.linalg.norm(pos - ref) < 1.0


def test_satellite_positions_explain_the_pseudoranges():
    # P1 = |sat(t - tau) - rx| + c (dt_rx - dt_sat) + atmosphere: after the broadcast satellite
    # clock, what remains is one receiver clock shared by every satellite plus the atmosphere
    # (troposphere 2.4 m / sin E, ionosphere a few m at night): above 20 deg the satellites
    # agree within 25 m. Without the transmit time (260 m of satellite motion) or with a
    # wrong orbit they do not.
    nav, obs = _load(JP_NAV, "nav"), _load(JP[0], "obs")
    rx = np.asarray(obs.attrs["position"])
    lat, lon, _ = ecef_to_geodetic(rx)
    t = (obs.time.values[0] - np.datetime64("1980-01-06", "ns")) / np.timedelta64(1, "s")
    prns = [int(s[1:]) for s in obs.sv.values]
    eph, ok = _ephemerides(nav, JP_NAV, prns, np.array([np.round(t)]), 7200)
    assert ok.sum() >= 6
    e = {k: v[0, ok[0]] for k, v in eph.items()}
    sat = transmit_positions(e, np.full(int(ok.sum()), t), rx)
    P = obs["C1"].values[0, ok[0]]
    rec = nav.sel(time=nav.time.values, sv=[f"G{p:02d}" for p in np.asarray(prns)[ok[0]]])
    # the satellite clock of the record whose Toe was used
    toc_week = (rec.time.values - np.datetime64("1980-01-06", "ns")) / np.timedelta64(1, "s")
    dt = np.empty(P.shape[0])
    for j in range(P.shape[0]):
        i = np.nanargmin(np.where(np.isfinite(rec["SVclockBias"].values[:, j]),
                                  np.abs(toc_week - t), np.inf))
        tt = t - toc_week[i]
        dt[j] = (rec["SVclockBias"].values[i, j] + rec["SVclockDrift"].values[i, j] * tt
                 - rec["TGD"].values[i, j])
    rng = np.linalg.norm(sat - rx, axis=1)
    up = rx / np.linalg.norm(rx)
    elev = np.arcsin(np.sum((sat - rx) / rng[:, None] * up, axis=1))
    res = P - rng + SPEED_OF_LIGHT * dt
    high = elev > np.radians(20)
    assert high.sum() >= 4
    spread = res[high] - np.median(res[high])
    assert np.max(np.abs(spread)) < 25.0


def _oracle_look(rx, sat):
    """Elevation from the ellipsoid's normal (the gradient of x^2/a^2 + y^2/a^2 + z^2/b^2 at
    the foot point, found by walking down the normal), azimuth from the projection of the
    polar axis: no latitude/longitude involved."""
    b = WGS84_A * (1 - WGS84_F)
    scale = np.array([WGS84_A ** -2, WGS84_A ** -2, b ** -2])
    foot = rx.copy()
    for _ in range(10):
        foot = foot / np.sqrt(np.sum(foot ** 2 * scale))      # onto the ellipsoid
        n = foot * scale / np.linalg.norm(foot * scale)
        foot = rx - np.dot(rx - foot, n) * n                   # back along the normal
    n = foot * scale / np.linalg.norm(foot * scale)
    north = np.array([0.0, 0.0, 1.0]) - n[2] * n
    north /= np.linalg.norm(north)
    east = np.cross(north, n)
    d = (sat - rx) / np.linalg.norm(sat - rx, axis=-1, keepdims=True)
    return np.arcsin(d @ n), np.mod(np.arctan2(d @ east, d @ north), 2 * np.pi)


def _oracle_pierce(lat, lon, elev, azim, H):
    """Intersect the line of sight with the sphere R + H (the shell of the single-layer
    model) in Cartesian coordinates."""
    R = EARTH_RADIUS_KM
    la, lo = np.radians(lat), np.radians(lon)
    up = np.array([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)])
    east = np.array([-np.sin(lo), np.cos(lo), 0.0])
    north = np.array([-np.sin(la) * np.cos(lo), -np.sin(la) * np.sin(lo), np.cos(la)])
    u = (np.sin(elev)[:, None] * up + np.cos(elev)[:, None]
         * (np.cos(azim)[:, None] * north + np.sin(azim)[:, None] * east))
    s0 = R * up
    bb = u @ s0
    dist = -bb + np.sqrt(bb * bb - (R * R - (R + H) ** 2))
    q = s0 + dist[:, None] * u
    return np.degrees(np.arcsin(q[:, 2] / (R + H))), np.degrees(np.arctan2(q[:, 1], q[:, 0]))


def test_elevations_and_pierce_points_match_a_reference_computation(japan):
    nav = _load(JP_NAV, "nav")
    st = japan.stations
    assert st["name"].tolist() == ["0759", "3040"]
    # the two GEONET sites are 3.3 km apart
    d = np.linalg.norm([st["x"][0] - st["x"][1], st["y"][0] - st["y"][1],
                        st["z"][0] - st["z"][1]])
    assert 3200 < d < 3400
    p = japan.points
    day0 = (japan.date - np.datetime64("1980-01-06", "ns")) / np.timedelta64(1, "s")
    for k in range(2):
        # the receiver's own time tags (GEONET's are up to 5 ms off the whole second: 20 m of
        # satellite motion, 1e-6 rad)
        tags = _load(JP[k], "obs").time.values
        tags = (tags - np.datetime64("1980-01-06", "ns")) / np.timedelta64(1, "s")
        sel = p["station"] == k
        rx = np.array([st["x"][k], st["y"][k], st["z"][k]])
        prns = np.unique(p["satellite"][sel]).tolist()
        t = np.unique(p["epoch"][sel]) + day0
        eph, ok = _ephemerides(nav, JP_NAV, prns, t, 86400)
        ti = np.searchsorted(t, p["epoch"][sel] + day0)
        si = np.searchsorted(prns, p["satellite"][sel])
        tag = tags[np.searchsorted(np.round(tags), p["epoch"][sel] + day0)]
        sat = transmit_positions({key: v[ti, si] for key, v in eph.items()}, tag, rx)
        el, az = _oracle_look(rx, sat)
        np.testing.assert_allclose(japan.elevation[sel], el, atol=1e-9)
        # azimuth compared on the circle
        assert np.max(np.abs(np.angle(np.exp(1j * (p["azimuth"][sel] - az))))) < 1e-9
        assert np.all(el >= np.radians(10) - 1e-12)
        lat, lon = _oracle_pierce(st["lat"][k], st["lon"][k], el, az, 350.0)
        np.testing.assert_allclose(p["lat"][sel], lat, atol=1e-7)
        np.testing.assert_allclose(p["lon"][sel], lon, atol=1e-7)
    # WGS-84 geodetic coordinates round-trip to the header position
    la, lo, h = ecef_to_geodetic(np.column_stack([st["x"], st["y"], st["z"]]))
    a, f = WGS84_A, WGS84_F
    e2 = f * (2 - f)
    N = a / np.sqrt(1 - e2 * np.sin(np.radians(la)) ** 2)
    x = (N + h) * np.cos(np.radians(la)) * np.cos(np.radians(lo))
    z = (N * (1 - e2) + h) * np.sin(np.radians(la))
    np.testing.assert_allclose(x, st["x"], atol=1e-6)
    np.testing.assert_allclose(z, st["z"], atol=1e-6)


def test_japanese_pair_double_differences_are_small(japan):
    # Over 3.3 km the ionosphere's double difference is a few hundredths of a TECU (quiet
    # gradients of 1-5 mm/km of L1 delay, 0.006-0.03 TECU/km). What the levelled data carry on
    # top is one levelling error per arc (code multipath averaged over the arc) and the
    # carrier-phase noise. Within one combination of four arcs the double difference must
    # therefore stay constant to the phase noise: std below 0.1 TECU (2-5 mm of phase noise
    # per carrier and station, x2 for a double difference); a missed cycle slip (1.8 TECU per
    # L1 cycle) or a wrong wavelength would break it.
    w = next(japan.windows(seconds=3600))
    part = w.test
    assert part.n_targets == japan.y.shape[0] > 50
    np.testing.assert_array_equal(np.unique(part.pairs["station_c"]), [0])
    from fmlearn.reproduce.vtec_rinex import arc_combinations

    group, sign = arc_combinations(japan)
    y = japan.y * sign
    dev = y - np.bincount(group, y)[group] / np.bincount(group)[group]
    assert dev.std() < 0.1 and np.max(np.abs(dev)) < 0.5
    key = {(e, s, v): i for i, (e, s, v) in enumerate(zip(
        japan.points["epoch"], japan.points["station"], japan.points["satellite"],
        strict=True))}
    rows = [key[(e, s, v)] for e, s, v in zip(part.points["epoch"], part.points["station"],
                                             part.points["satellite"], strict=True)]
    C = part.contrasts.tocsr()
    # The contrasts applied to the levelled slant TEC are the observations.
    np.testing.assert_allclose(C @ japan.slant_tec[rows], part.y, atol=1e-9)


def _series(n=60, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n) * 30.0
    stec = 20 + 5 * np.sin(t / 2000.0)                         # TECU, smooth
    i1 = stec / TECU_PER_M * F2 ** 2 / (F1 ** 2 - F2 ** 2)     # L1 delay (m)
    i2 = i1 * F1 ** 2 / F2 ** 2
    rho = 2.2e7 + 500 * t
    P1 = rho + i1 + 0.3 * rng.standard_normal(n) + 1.0        # code bias on P1
    P2 = rho + i2 + 0.3 * rng.standard_normal(n)
    L1 = (rho - i1) / LAMBDA1 + 1234567 + 0.01 * rng.standard_normal(n)
    L2 = (rho - i2) / LAMBDA2 - 7654321 + 0.01 * rng.standard_normal(n)
    return t, stec, L1, L2, P1, P2


def test_levelling_recovers_slant_tec_and_slips_are_found():
    t, stec, L1, L2, P1, P2 = _series()
    lev, arc, slips = tec_arcs(t, L1, L2, P1, P2)
    assert slips == 0 and np.all(arc == 0)
    # The code bias (1 m on P1) stays in the levelled TEC: -9.52 TECU; the levelling error is
    # the code noise averaged over the arc: 0.42 m / sqrt(60) ~ 0.05 m ~ 0.5 TECU at 1 sigma.
    err = lev - (stec - TECU_PER_M * 1.0)
    assert abs(err.mean()) < 2.0 and err.std() < 0.05
    # (1, 1): 0.054 m of geometry-free jump; (9, 7): 2 wide-lane cycles, 0.003 m geometry-free;
    # a flagged loss of lock; a gap.
    L1s, L2s = L1.copy(), L2.copy()
    L1s[20:] += 1
    L2s[20:] += 1
    L1s[35:] += 9
    L2s[35:] += 7
    lli = np.zeros(t.shape[0], bool)
    lli[44] = True
    keep = np.ones(t.shape[0], bool)
    keep[52:56] = False                                         # 150 s > max_gap_s
    lev, arc, slips = tec_arcs(t[keep], L1s[keep], L2s[keep], P1[keep], P2[keep], lli[keep])
    assert slips == 3
    starts = np.flatnonzero(np.diff(arc) != 0) + 1
    np.testing.assert_array_equal(t[keep][starts], t[[20, 35, 44, 56]])
    # the arc after the gap has 4 epochs: dropped (fewer than min_arc_epochs = 5)
    assert np.all(arc[-4:] == -1) and np.all(np.isnan(lev[-4:]))
    ok = arc >= 0
    err = lev[ok] - (stec[keep][ok] - TECU_PER_M)
    # each arc is levelled on its own: no slip leaks into the TEC (a missed one: 1.8 TECU)
    for a in np.unique(arc[ok]):
        assert np.ptp(err[arc[ok] == a]) < 0.3


def test_rinex3_and_hatanaka_files_and_station_choice(dutch):
    assert dutch.stations["name"].tolist() == ["delf", "eijs", "zegv"]
    assert dutch.info["eijs"]["observations"] == ("L1", "L2", "P1", "P2")
    # the test station defaults to the one nearest the network's centre
    assert dutch.stations["role"].tolist().count("test") == 1
    other = dutch.with_test_station("eijs")
    assert other.test_station == 1 and other.stations["role"][1] == "test"
    assert set(other.training_stations.tolist()) == {0, 2}
    ws = list(other.windows(seconds=120))
    assert len(ws) >= 2
    for w in ws:
        assert not np.any(w.train.points["station"] == 1)
        assert np.all((w.test.pairs["station_c"] == 1) | (w.test.pairs["station_d"] == 1))
        assert w.train.n_targets > 0 and w.test.n_targets > 0
    az = load_rinex_network(AZ, NL_NAV)
    assert az.info["pdel"]["observations"] == ("L1C", "L2W", "C1C", "C2W")
    # RINEX 3 files: the Azores pair, 240 km apart, 30 s epochs from 00:00
    assert np.all(az.points["epoch"] % 30 == 0) and az.y.shape[0] > 20


def _rinex2_lines(path):
    with gzip.open(path, "rt") as fh:
        return fh.read().splitlines(keepends=True)


def test_bad_files_are_refused_naming_the_file(tmp_path):
    lines = _rinex2_lines(JP[0])
    hdr = next(i for i, ln in enumerate(lines) if "END OF HEADER" in ln) + 1
    # single frequency: only L1 and C1 kept
    single = []
    for i, ln in enumerate(lines):
        if "# / TYPES OF OBSERV" in ln:
            ln = "     2    L1    C1" + " " * 42 + "# / TYPES OF OBSERV\n"
        elif i >= hdr and not ln.startswith(" 05 "):
            ln = ln[:32].rstrip() + "\n"
        single.append(ln)
    p1 = tmp_path / "single.05o"
    p1.write_text("".join(single))
    with pytest.raises(RinexError, match=r"single\.05o.*dual-frequency"):
        load_rinex_network([str(p1), JP[1]], JP_NAV)
    # a navigation file of another day
    with pytest.raises(RinexError, match=r"07590920\.05n.*another day"):
        load_rinex_network(AZ, JP_NAV)
    # no common epoch: the first station's first 6 epochs, the second's last 6
    cut = [i for i, ln in enumerate(lines) if i >= hdr and ln.startswith(" 05 ")]
    p2 = tmp_path / "early.05o"
    p2.write_text("".join(lines[:cut[6]]))
    lines_b = _rinex2_lines(JP[1])
    cut_b = [i for i, ln in enumerate(lines_b) if ln.startswith(" 05 ")]
    hdr_b = next(i for i, ln in enumerate(lines_b) if "END OF HEADER" in ln) + 1
    p3 = tmp_path / "late.05o"
    p3.write_text("".join(lines_b[:hdr_b] + lines_b[cut_b[-6]:]))
    with pytest.raises(RinexError, match="no double difference.*early.05o.*late.05o"):
        load_rinex_network([str(p2), str(p3)], JP_NAV)
    # corrupt: a number with letters in it, named by its line
    bad = list(lines)
    bad[hdr + 3] = bad[hdr + 3][:5] + "abc" + bad[hdr + 3][8:]
    p4 = tmp_path / "corrupt.05o"
    p4.write_text("".join(bad))
    with pytest.raises(RinexError, match=rf"corrupt\.05o, line {hdr + 4}"):
        load_rinex_network([str(p4), JP[1]], JP_NAV)
    # truncated: in the middle of an epoch record, and a truncated gzip stream
    p5 = tmp_path / "truncated.05o"
    p5.write_text("".join(lines[:cut[3] + 4]) + lines[cut[3] + 4][:20])
    with pytest.raises(RinexError, match=r"truncated\.05o: truncated.*line"):
        load_rinex_network([str(p5), JP[1]], JP_NAV)
    p6 = tmp_path / "truncated.05o.gz"
    with open(JP[0], "rb") as fh:
        p6.write_bytes(fh.read()[:1500])
    with pytest.raises(RinexError, match=r"truncated\.05o\.gz: cannot be decompressed"):
        load_rinex_network([str(p6), JP[1]], JP_NAV)
    # an observation file given as the navigation file
    with pytest.raises(RinexError, match="expected a RINEX navigation file"):
        load_rinex_network(JP, JP[0])


def test_reproduce_vtec_on_real_files_holds_out_each_station(tmp_path, capsys):
    # The command of Table 1 on the fixture folder: three networks (Japan, the Netherlands,
    # the Azores) and two navigation files of different days; every Dutch station is held
    # out in turn, every method is tuned on the first window and scored on the later ones.
    import shutil

    from fmlearn.cli import main

    data = tmp_path / "data"
    shutil.copytree(FIX, data)
    # an IONEX map over the Netherlands (the loose bound of the table's last column)
    (data / "test0090.21i").write_text(_ionex_text([[[100, 120, 140], [200, 220, 240]]] * 25,
                                                   n_maps=25))
    assert main(["reproduce", "vtec", "--rinex", str(data), "--quick", "--out",
                 str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "IONEX map test0090.21i" in out
    assert out.count("network:") == 3
    assert "stations 0759, 3040; baselines 3.3-3.3 km" in out
    for name in ("delf", "eijs", "zegv"):
        assert f"held out {name}:" in out
    table = [ln.split() for ln in out.splitlines() if ln.startswith(("delf ", "eijs ", "zegv ",
                                                                       "pooled "))]
    table = [row for row in table if len(row) == 10]       # name, n, six methods, zero, IONEX
    assert len(table) == 4
    for row in table:
        vals = np.array(row[2:], float)
        assert vals.shape == (8,) and np.all(np.isfinite(vals)) and np.all(vals > 0)
    assert "paper's finding (iFM lowest) holds here:" in out


def test_reproduce_tunes_on_earlier_windows_only(dutch):
    from fmlearn.reproduce import vtec_rinex

    logs = []
    prot = vtec_rinex.RealProtocol(reg_grid=(1e-2, 1.0), rank_grid=(2,))
    rows = vtec_rinex.run_network(dutch, prot, logs.append)
    assert [r["station"] for r in rows] == ["delf", "eijs", "zegv"]
    for r in rows:
        # the zero predictor's RMSE is that of the test windows' double differences alone
        held = dutch.with_test_station(r["station"])
        ws = [w for w in held.windows(seconds=120) if w.train.n_targets and w.test.n_targets]
        y = np.concatenate([w.test.y for w in ws[1:]])
        assert r["n_test"] == y.shape[0]
        np.testing.assert_allclose(r["zero"], np.sqrt(np.mean(y ** 2)))
        assert set(r["rmse"]) == {"Ridge", "LASSO", "ElasticNet", "Kernel", "FM", "iFM"}


def _ionex_text(values, n_maps=2):
    """A small IONEX 1.0 file: latitudes 60, 50 (DLAT -10), longitudes 0, 10, 20; one map an
    hour; TEC in 0.1 TECU (EXPONENT -1)."""
    def rec(body, label):
        return f"{body:<60}{label}\n"
    out = [rec("     1.0            IONOSPHERE MAPS     GPS", "IONEX VERSION / TYPE"),
           rec("  2021     1     9     0     0     0", "EPOCH OF FIRST MAP"),
           rec("  3600", "INTERVAL"),
           rec("   350.0 350.0   0.0", "HGT1 / HGT2 / DHGT"),
           rec("    60.0  50.0 -10.0", "LAT1 / LAT2 / DLAT"),
           rec("     0.0  20.0  10.0", "LON1 / LON2 / DLON"),
           rec("    -1", "EXPONENT"), rec("", "END OF HEADER")]
    for k in range(n_maps):
        out += [rec(f"{k + 1:6d}", "START OF TEC MAP"),
                rec(f"  2021     1     9     {k}     0     0", "EPOCH OF CURRENT MAP")]
        for i, lat in enumerate((60.0, 50.0)):
            out.append(rec(f"  {lat:6.1f}   0.0  20.0  10.0 350.0", "LAT/LON1/LON2/DLON/H"))
            out.append("".join(f"{v:5d}" for v in values[k][i]) + "\n")
        out.append(rec(f"{k + 1:6d}", "END OF TEC MAP"))
    return "".join(out)


def test_ionex_maps_are_read_and_interpolated(tmp_path):
    from fmlearn.reproduce._ionex import read_ionex

    vals = [[[100, 120, 140], [200, 220, 240]], [[300, 320, 340], [400, 420, 440]]]
    p = tmp_path / "test0090.21i"
    p.write_text(_ionex_text(vals))
    m = read_ionex(p)
    assert m.tec.shape == (2, 2, 3) and m.height_km == 350.0
    np.testing.assert_allclose(m.tec[1], np.array(vals[1]) / 10)
    # bilinear in space, linear in time: the centre of the first cell at 00:30
    want = 0.5 * np.mean([10, 12, 20, 22]) + 0.5 * np.mean([30, 32, 40, 42])
    np.testing.assert_allclose(m.vtec(55.0, 5.0, 1800.0), want)
    np.testing.assert_allclose(m.vtec([60.0], [20.0], [3600.0]), [34.0])
    # a map cut short, a non-number: named with the line
    lines = _ionex_text(vals).splitlines(keepends=True)
    (tmp_path / "cut.21i").write_text("".join(lines[:12]))
    with pytest.raises(ValueError, match=r"cut\.21i, line \d+: .*truncated"):
        read_ionex(tmp_path / "cut.21i")
    bad = list(lines)
    bad[11] = "  abc" + bad[11][5:]
    (tmp_path / "bad.21i").write_text("".join(bad))
    with pytest.raises(ValueError, match=r"bad\.21i, line 12: a TEC value"):
        read_ionex(tmp_path / "bad.21i")
