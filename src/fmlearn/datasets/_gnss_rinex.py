"""Real GNSS observations to double differences of slant TEC: :func:`load_rinex_network`.

RINEX 2 and 3 observation files (plain, gzip, Hatanaka) and GPS navigation files are read by
georinex (Hirsch, the maintained reader of the field; Hatanaka decompression through the
``hatanaka`` package), never by a parser of our own; this module adds the checks, the
geometry, the TEC processing and the double differences:

1. satellite positions from the broadcast ephemeris (IS-GPS-200, :mod:`._gnss_geometry`),
   receiver positions from the headers (APPROX POSITION XYZ);
2. slant TEC per station and satellite from the geometry-free combination of the carrier
   phases, levelled to the geometry-free code combination over each continuous arc; arcs are
   cut at gaps, loss-of-lock flags and cycle slips (geometry-free and Melbourne-Wuebbena
   jumps); observations under the elevation mask are dropped;
3. pierce points on the thin shell (the simulator's geometry, :func:`pierce_point`);
4. double differences along the links of the network, epoch by epoch, with the highest
   satellite seen from the link's first station as the reference (as the simulator does).
   Receiver and satellite code biases (DCBs) cancel in them.
"""

import io
import os
import re
import warnings

import numpy as np
from scipy.spatial import Delaunay

from ._gnss_csv import GNSSObservations
from ._gnss_geometry import (
    EPHEMERIS_FIELDS,
    SPEED_OF_LIGHT,
    ecef_to_geodetic,
    look_angles,
    pierce_point,
    transmit_positions,
)
from ._gnss_windows import POINT_FIELDS, SECONDS_PER_DAY, _keys, double_differences

__all__ = ["GNSSNetwork", "load_rinex_network", "RinexError", "tec_arcs"]

#: GPS carrier frequencies (Hz), IS-GPS-200.
F1, F2 = 1575.42e6, 1227.60e6
LAMBDA1, LAMBDA2 = SPEED_OF_LIGHT / F1, SPEED_OF_LIGHT / F2
#: TECU per metre of geometry-free delay (P2 - P1 or L1 - L2 in metres):
#: f1^2 f2^2 / (40.3 (f1^2 - f2^2)) / 1e16 = 9.52 TECU/m.
TECU_PER_M = F1 ** 2 * F2 ** 2 / (40.3 * (F1 ** 2 - F2 ** 2)) / 1e16
_GPS_EPOCH = np.datetime64("1980-01-06T00:00:00", "ns")

# Observation codes, RINEX 2 then RINEX 3 names. Phases: any tracking mode (the levelling
# absorbs their constant biases). Codes: one *kind* for the whole network, since the
# satellites' P1-C1 (or P2-C2) biases of 1-2 ns (3-6 TECU: 1 ns is 0.3 m) would not cancel in a
# double difference between a station that uses P and one that uses C/A.
_PHASE1 = ("L1", "L1C", "L1W", "L1P", "L1X", "L1S", "L1L")
_PHASE2 = ("L2", "L2W", "L2P", "L2C", "L2L", "L2S", "L2X", "L2D")
_CODE1 = {"P": ("P1", "C1W", "C1P"), "C/A": ("C1", "C1C")}
_CODE2 = {"P": ("P2", "C2W", "C2P"), "L2C": ("C2", "C2L", "C2S", "C2X")}


class RinexError(ValueError):
    """A RINEX file that cannot be used (unreadable, incomplete, or the wrong content).

    ``path`` is the file at fault when there is one (None when the problem lies between
    files, e.g. stations without a common epoch)."""

    def __init__(self, message, path=None):
        super().__init__(message)
        self.path = path


def _georinex():
    try:
        import georinex
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError("reading RINEX files needs georinex and hatanaka: "
                          "pip install 'fmlearn[gnss]'") from exc
    return georinex


def _load(path, kind):
    """georinex.load of the GPS records of a file, any failure turned into a RinexError that
    names the file (and the line, where the reader's message lets us find it)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    gr = _georinex()
    text = _text(path, kind)
    if kind == "obs":
        _check_complete(text, path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = gr.load(io.StringIO(text), use="G", useindicators=(kind == "obs"))
    except Exception as exc:  # georinex raises many types on damaged input; name the file
        raise RinexError(f"{path}{_locate(text, str(exc))}: not a readable RINEX "
                         f"{_KIND[kind]} file ({type(exc).__name__}: {exc})", path=path) from exc
    if ds is None or ds.attrs.get("rinextype") != kind:
        got = None if ds is None else ds.attrs.get("rinextype")
        raise RinexError(f"{path}: expected a RINEX {_KIND[kind]} file, got "
                         f"{got or 'nothing readable'}", path=path)
    if ds.sizes.get("time", 0) == 0 or ds.sizes.get("sv", 0) == 0:
        raise RinexError(f"{path}: no GPS {_KIND[kind]} records (truncated, or another "
                         "constellation only)", path=path)
    return ds


def _text(path, kind):
    """The plain RINEX text of a file: gzip, .Z, bzip2, zip and Hatanaka are expanded by the
    ``hatanaka`` package."""
    try:
        import hatanaka
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError("reading RINEX files needs georinex and hatanaka: "
                          "pip install 'fmlearn[gnss]'") from exc
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        raw = hatanaka.decompress(raw)
    except Exception as exc:  # corrupt or truncated compressed stream
        raise RinexError(f"{path}: cannot be decompressed, corrupt or truncated "
                         f"({type(exc).__name__}: {exc})", path=path) from exc
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise RinexError(f"{path}, line {line}: not a RINEX {_KIND[kind]} file (a byte "
                         f"{raw[exc.start]:#x} that is not ASCII text)", path=path) from None


_EPOCH2 = re.compile(r"^ [ \d]\d [ \d]\d [ \d]\d [ \d]\d [ \d]\d [ \d]\d\.\d{7}  \d")


def _check_complete(text, path):
    """Refuse an observation file whose last epoch record is cut short: georinex reads what
    is there and would fill the missing satellites with nothing, or a cut number with a
    wrong value, without a word."""
    lines = text.splitlines()
    v3 = lines and lines[0][:9].strip().startswith("3")
    n_obs = 0
    for ln in lines:
        if "# / TYPES OF OBSERV" in ln and ln[:6].strip():
            n_obs = int(ln[:6])
        if "END OF HEADER" in ln:
            break
    last = None
    for i in range(len(lines) - 1, -1, -1):
        if (v3 and lines[i].startswith(">")) or (not v3 and _EPOCH2.match(lines[i])):
            last = i
            break
    if last is None:
        return
    ln = lines[last]
    try:
        flag, nsat = (int(ln[31]), int(ln[32:35])) if v3 else (int(ln[28]), int(ln[29:32]))
    except ValueError:
        return
    slack = 0
    if flag > 1 or v3:
        need = nsat
    else:
        per_sat = max(1, -(-n_obs // 5))
        need = (nsat - 1) // 12 + nsat * per_sat
        # Writers drop the blank trailing line(s) of the file's last satellite (fields all
        # empty): not a truncation when the file ends with a complete line.
        slack = per_sat - 1 if text.endswith("\n") else 0
    have = len(lines) - last - 1
    if have < need - slack:
        raise RinexError(f"{path}: truncated: the epoch record at line {last + 1} needs "
                         f"{need} more lines, the file ends after {have}", path=path)
    if text and not text.endswith("\n") and len(lines[-1]) < 80 and len(lines) > last + 1:
        raise RinexError(f"{path}: truncated in line {len(lines)} (the file ends in the "
                         "middle of a line)", path=path)


def _locate(text, message):
    """', line N' for the first line holding the text quoted in a reader's message."""
    m = re.search(r"'([^']{4,})'", message)
    if not m:
        return ""
    frag = m.group(1).strip()
    for i, ln in enumerate(text.splitlines()):
        if frag and frag in ln:
            return f", line {i + 1}"
    return ""


_KIND = {"obs": "observation", "nav": "navigation"}


def _gps_seconds(times):
    """Seconds since the GPS epoch of datetime64 values (GPS time)."""
    return (np.asarray(times, "datetime64[ns]") - _GPS_EPOCH) / np.timedelta64(1, "s")


def _present(ds, name):
    return name in ds.data_vars and bool(np.isfinite(ds[name].values).any())


def _obs_types(ds):
    return sorted(v for v in ds.data_vars if v[-3:] not in ("lli", "ssi"))


def _pick(ds, names):
    return next((n for n in names if _present(ds, n)), None)


def _code_kind(datasets, paths, table, freq):
    for kind, names in table.items():
        if all(_pick(ds, names) is not None for ds in datasets):
            return kind
    have = {p: [n for names in table.values() for n in names if _present(ds, n)]
            for ds, p in zip(datasets, paths, strict=True)}
    raise RinexError(f"no code observation on L{freq} of one kind (P or C/A) at every station; "
                     f"found {have}")


def _read_station(ds, path, code1, code2):
    """The observables of one station: dict of (T, S) arrays and its header position."""
    l1, l2 = _pick(ds, _PHASE1), _pick(ds, _PHASE2)
    c1, c2 = _pick(ds, _CODE1[code1]), _pick(ds, _CODE2[code2])
    missing = [n for n, v in (("L1 phase", l1), ("L2 phase", l2), ("L1 code", c1),
                              ("L2 code", c2)) if v is None]
    if missing:
        raise RinexError(f"{path}: no dual-frequency GPS observations (missing "
                         f"{', '.join(missing)}; observation types "
                         f"{_obs_types(ds)})", path=path)
    pos = np.asarray(ds.attrs.get("position", [np.nan] * 3), np.float64)
    if pos.shape != (3,) or not np.all(np.isfinite(pos)) or np.linalg.norm(pos) < 6.0e6 \
            or np.linalg.norm(pos) > 6.5e6:
        raise RinexError(f"{path}: the header's APPROX POSITION XYZ ({pos.tolist()}) is not a "
                         "position on the Earth's surface", path=path)
    t = _gps_seconds(ds.time.values)
    lli = np.zeros(ds[l1].shape, bool)
    for name in (l1 + "lli", l2 + "lli"):
        if name in ds.data_vars:
            f = ds[name].values
            lli |= np.isfinite(f) & (np.nan_to_num(f).astype(np.int64) & 1).astype(bool)
    return {"t": t, "sv": [str(s) for s in ds.sv.values], "L1": ds[l1].values,
            "L2": ds[l2].values, "P1": ds[c1].values, "P2": ds[c2].values, "lli": lli,
            "position": pos, "marker": str(ds.attrs.get("marker_name", "") or ""),
            "codes": (l1, l2, c1, c2)}


def _ephemerides(nav, path, prns, t, max_age_s):
    """Per (epoch, prn): the broadcast elements of the healthy record with the nearest Toe
    within ``max_age_s``; returns (dict of (T, S) arrays, (T, S) bool available)."""
    svs = [str(s) for s in nav.sv.values]
    T, S = t.shape[0], len(prns)
    out = {k: np.full((T, S), np.nan) for k in EPHEMERIS_FIELDS}
    ok = np.zeros((T, S), bool)
    for j, prn in enumerate(prns):
        sv = f"G{prn:02d}"
        if sv not in svs:
            continue
        rec = nav.sel(sv=sv)
        vals = {k: np.asarray(rec[k].values, np.float64) for k in EPHEMERIS_FIELDS}
        good = np.all([np.isfinite(v) for v in vals.values()], axis=0)
        if "health" in rec:
            good &= np.asarray(rec["health"].values) == 0
        if not good.any():
            continue
        vals = {k: v[good] for k, v in vals.items()}
        toe = vals["GPSWeek"] * 604800.0 + vals["Toe"]
        gap = np.abs(t[:, None] - toe[None, :])
        best = np.argmin(gap, axis=1)
        use = gap[np.arange(T), best] <= max_age_s
        ok[:, j] = use
        for k in EPHEMERIS_FIELDS:
            out[k][use, j] = vals[k][best[use]]
    return out, ok


def tec_arcs(t, L1, L2, P1, P2, lli=None, *, gf_slip_m=0.05, mw_slip_cycles=1.5,
             max_gap_s=120.0, min_arc_epochs=5, weights=None):
    """Levelled slant TEC of one station-satellite series, arc by arc.

    The geometry-free phase L_GF = lambda1 L1 - lambda2 L2 (m) follows the slant TEC
    precisely but with an unknown constant per continuous arc (ambiguities, phase biases); the
    geometry-free code P_GF = P2 - P1 is absolute up to the receiver and satellite code biases
    but noisy. Per arc the phase is *levelled* to the code: STEC = TECU_PER_M (L_GF + mean over
    the arc of (P_GF - L_GF)) (e.g. Ciraolo et al. 2007; weights, e.g. sin^2 of the elevation,
    down-weight low-elevation multipath). The code biases remain in STEC and cancel in double
    differences; the levelling error (code noise and multipath averaged over the arc) remains
    as a constant per arc.

    A new arc starts at the first epoch, after a gap longer than ``max_gap_s``, at a loss of
    lock flagged by the receiver (``lli`` bit 0), at a jump of L_GF against its linear
    prediction from the two previous epochs of the arc larger than ``gf_slip_m`` (RTKLIB's
    threshold 0.05 m; a (1, 1) slip moves L_GF by 0.054 m), or at a Melbourne-Wuebbena jump:
    the wide-lane ambiguity L1 - L2 - (f1 P1 + f2 P2) / ((f1 + f2) lambda_WL) leaving its
    running mean over the arc by more than ``mw_slip_cycles`` at this epoch and the next
    (catches the slips the geometry-free test misses, e.g. (9, 7): 0.003 m in L_GF but 2
    wide-lane cycles; a single code outlier is not a slip; the code noise of C/A receivers
    of 2005 moves the wide lane by up to ~1 cycle at low elevation). Arcs of
    fewer than ``min_arc_epochs`` epochs are dropped (their levelling is too noisy).

    Parameters
    ----------
    t : ndarray (n,)
        Seconds, increasing; only finite observations should be passed.
    L1, L2 : ndarray (n,)
        Carrier phases (cycles).
    P1, P2 : ndarray (n,)
        Codes (m).
    lli : bool ndarray (n,), optional
        Loss of lock indicated by the receiver.

    Returns
    -------
    stec : ndarray (n,)
        TECU, NaN where the observation belongs to no kept arc.
    arc : int ndarray (n,)
        Arc number per observation (-1: dropped).
    n_slips : int
        Cycle slips detected (not counting gaps and arc starts).
    """
    n = t.shape[0]
    lgf = LAMBDA1 * L1 - LAMBDA2 * L2
    pgf = P2 - P1
    lam_wl = SPEED_OF_LIGHT / (F1 - F2)
    mw = L1 - L2 - (F1 * P1 + F2 * P2) / ((F1 + F2) * lam_wl)
    lli = np.zeros(n, bool) if lli is None else np.asarray(lli, bool)
    arc = np.empty(n, np.int64)
    cur, start, slips = -1, 0, 0
    mw_sum = 0.0
    for i in range(n):
        new = i == 0 or t[i] - t[i - 1] > max_gap_s
        if not new:
            slip = bool(lli[i])
            if i - start >= 2:
                pred = lgf[i - 1] + (lgf[i - 1] - lgf[i - 2]) * (t[i] - t[i - 1]) \
                    / (t[i - 1] - t[i - 2])
            else:
                pred = lgf[i - 1]
            slip |= abs(lgf[i] - pred) > gf_slip_m
            # A wide-lane jump counts when the next epoch confirms it (one code outlier is
            # not a slip).
            mean = mw_sum / (i - start)
            slip |= (abs(mw[i] - mean) > mw_slip_cycles and i + 1 < n
                     and t[i + 1] - t[i] <= max_gap_s
                     and abs(mw[i + 1] - mean) > mw_slip_cycles)
            slips += slip
            new = slip
        if new:
            cur += 1
            start, mw_sum = i, 0.0
        arc[i] = cur
        mw_sum += mw[i]
    stec = np.full(n, np.nan)
    w = np.ones(n) if weights is None else np.asarray(weights, np.float64)
    for a in range(cur + 1):
        sel = arc == a
        if sel.sum() < min_arc_epochs:
            arc[sel] = -1
            continue
        offset = np.sum(w[sel] * (pgf[sel] - lgf[sel])) / np.sum(w[sel])
        stec[sel] = TECU_PER_M * (lgf[sel] + offset)
    return stec, arc, slips


class GNSSNetwork(GNSSObservations):
    """Double differences of slant TEC from RINEX files (:func:`load_rinex_network`), with
    the same ``windows(seconds=...)`` as the simulator.

    Attributes
    ----------
    stations : structured ndarray (station, name, lat, lon, height, x, y, z, role, file)
        Geodetic latitude/longitude (deg) and height (m, WGS-84) and ECEF (m) of the header
        positions; ``role`` "test" or "train".
    links : ndarray (n_links, 2)
        The station pairs whose double differences are formed.
    points : structured ndarray, fields :data:`POINT_FIELDS`
        Every pierce point kept (all stations), ``satellite`` = the GPS PRN.
    slant_tec, elevation : ndarray (n_points,)
        Levelled slant TEC (TECU, with the code biases) and elevation (rad) per point.
    arcs : int ndarray (n_points,)
        The levelling arc of each point (one number per station, satellite and continuous
        arc): the levelling error is one constant per arc.
    pairs, y : the double differences (all links; ``y`` in TECU).
    date : numpy.datetime64
        The start of day 0 (GPS time); epochs count seconds from it.
    info : dict
        Per station: observation codes used, cycle slips found, arcs kept.
    """

    def __init__(self, points, pairs, y, stations, links, test_station, *, slant_tec, arcs,
                 elevation, date, info, shell_height_km, elevation_mask_deg):
        training = stations["station"][stations["station"] != test_station]
        super().__init__(points, pairs, y, test_station, training, 0)
        st = stations.copy()
        st["role"] = np.where(st["station"] == test_station, "test", "train")
        self.stations, self.links = st, links
        self.slant_tec, self.arcs, self.elevation = slant_tec, arcs, elevation
        self.date, self.info = date, info
        self.shell_height_km, self.elevation_mask_deg = shell_height_km, elevation_mask_deg

    def corners(self):
        """(n_pairs, 4) indices into ``points`` of each double difference's corners (a, c),
        (a, d), (b, c), (b, d): ``y = slant_tec[k0] - slant_tec[k1] - slant_tec[k2] +
        slant_tec[k3]``."""
        keys = _keys(self.points["epoch"], self.points["station"], self.points["satellite"])
        order = np.argsort(keys)
        out = np.empty((self.pairs.shape[0], 4), np.int64)
        corners = (("satellite_a", "station_c"), ("satellite_a", "station_d"),
                   ("satellite_b", "station_c"), ("satellite_b", "station_d"))
        for j, (sat, sta) in enumerate(corners):
            k = _keys(self.pairs["epoch"], self.pairs[sta], self.pairs[sat])
            out[:, j] = order[np.searchsorted(keys, k, sorter=order)]
        return out

    def with_test_station(self, station):
        """The same data with another station held out (an index or a station name)."""
        sid = _station_id(self.stations, station)
        return GNSSNetwork(self.points, self.pairs, self.y, self.stations, self.links, sid,
                           slant_tec=self.slant_tec, arcs=self.arcs, elevation=self.elevation,
                           date=self.date,
                           info=self.info, shell_height_km=self.shell_height_km,
                           elevation_mask_deg=self.elevation_mask_deg)


def _station_id(stations, station):
    if isinstance(station, str):
        hit = np.flatnonzero(np.char.lower(stations["name"]) == station.lower())
        if hit.shape[0] != 1:
            raise ValueError(f"no station named {station!r}; stations: "
                             f"{stations['name'].tolist()}")
        return int(stations["station"][hit[0]])
    sid = int(station)
    if sid not in stations["station"]:
        raise ValueError(f"station {sid} is not in 0..{len(stations) - 1}")
    return sid


def _links(stations, links):
    n = len(stations)
    if isinstance(links, str):
        if links == "all" or (links == "delaunay" and n <= 3):
            return np.array([(i, j) for i in range(n) for j in range(i + 1, n)], np.int64)
        if links != "delaunay":
            raise ValueError(f"links must be 'delaunay', 'all' or station pairs, got {links!r}")
        lat0, lon0 = np.radians(stations["lat"].mean()), np.radians(stations["lon"].mean())
        xy = np.column_stack([(np.radians(stations["lon"]) - lon0) * np.cos(lat0),
                              np.radians(stations["lat"]) - lat0])
        tri = Delaunay(xy).simplices
        e = np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [0, 2]]]), axis=1)
        return np.unique(e, axis=0).astype(np.int64)
    out = []
    for a, b in links:
        i, j = _station_id(stations, a), _station_id(stations, b)
        if i == j:
            raise ValueError(f"a link joins two distinct stations, got ({a!r}, {b!r})")
        out.append((min(i, j), max(i, j)))
    if not out:
        raise ValueError("links is empty")
    return np.unique(np.array(out, np.int64), axis=0)


def load_rinex_network(obs_files, nav_file, *, test_station=None, links="delaunay",
                       elevation_mask_deg=10.0, shell_height_km=350.0, min_arc_epochs=5,
                       gf_slip_m=0.05, mw_slip_cycles=1.5, max_gap_s=120.0,
                       max_ephemeris_age_s=86400.0):
    """Double differences of slant TEC from RINEX observation files of a station network.

    Lin et al.'s (2019) application (§4.2) on real data: every station's
    dual-frequency GPS observations become levelled slant TEC per satellite arc
    (:func:`tec_arcs`), pierce points on a thin shell, and double differences along the
    network's links, with the windows of :func:`make_gnss_vtec`. Needs the ``gnss`` extra
    (``pip install 'fmlearn[gnss]'``: georinex and hatanaka read the files).

    Parameters
    ----------
    obs_files : sequence of path
        RINEX 2.x or 3.x observation files (plain, ``.gz``, ``.Z``, Hatanaka ``d``/``crx``),
        one per station; station i is ``obs_files[i]``. GPS only. Every station needs L1 and
        L2 carrier phase and a code on each frequency; the code kind (P or C/A on L1) is the
        same at every station, P where all have it.
    nav_file : path
        A GPS broadcast navigation file (RINEX 2 ``n`` or 3 ``N``) covering the observations.
    test_station : int or str, optional
        The station held out (index or marker name; default: the one nearest the network's
        centre, as Lin et al. 2019 picks the region's centre). :meth:`GNSSNetwork.with_test_station`
        changes it without re-reading.
    links : "delaunay", "all" or sequence of pairs, default="delaunay"
        The data-link graph: the Delaunay triangulation of the stations (the simulator's mesh
        links), every pair, or the given pairs (indices or names).
    elevation_mask_deg : float, default=10
    shell_height_km : float, default=350
        Height of the single-layer shell (the simulator's default).
    min_arc_epochs, gf_slip_m, mw_slip_cycles, max_gap_s :
        Arc and cycle-slip settings of :func:`tec_arcs`.
    max_ephemeris_age_s : float, default=7200
        An epoch uses a satellite's ephemeris whose Toe is at most this far (the broadcast
        elements are fitted over 4 hours, Toe in the middle).

    Returns
    -------
    GNSSNetwork
        ``windows(seconds=...)`` yields :class:`GNSSWindow` objects whose ``y`` are double
        differences of *slant* TEC (TECU), the observable the simulator's default also uses.

    Notes
    -----
    Epochs are rounded to the whole second (receivers steer their clocks to within a
    millisecond, which moves a satellite by metres) and counted from the start (GPS time) of
    the earliest observation's day. Satellite positions are evaluated at the transmission
    time and rotated into the frame of reception (:func:`transmit_positions`); elevations and
    azimuths are taken in the local frame of the WGS-84 normal at the header position; the
    pierce points use the spherical shell of the simulator around that latitude/longitude.
    Errors name the file: a file georinex cannot read (corrupt, truncated), one without
    dual-frequency observations, a navigation file that does not cover the observations
    (another day), stations without a common epoch.
    """
    obs_files = [os.fspath(p) for p in obs_files]
    nav_file = os.fspath(nav_file)
    if len(obs_files) < 2:
        raise ValueError("a network needs at least two observation files")
    if not 0 <= elevation_mask_deg < 90 or not shell_height_km > 0 or min_arc_epochs < 2:
        raise ValueError("need 0 <= elevation_mask_deg < 90, shell_height_km > 0 and "
                         "min_arc_epochs >= 2")
    obs = [_load(p, "obs") for p in obs_files]
    nav = _load(nav_file, "nav")
    for ds, p in zip(obs, obs_files, strict=True):
        missing = [what for what, names in (
            ("L1 phase", _PHASE1), ("L2 phase", _PHASE2),
            ("L1 code", sum(_CODE1.values(), ())), ("L2 code", sum(_CODE2.values(), ())))
            if _pick(ds, names) is None]
        if missing:
            raise RinexError(f"{p}: no dual-frequency GPS observations (missing "
                             f"{', '.join(missing)}; observation types "
                             f"{_obs_types(ds)})", path=p)
    code1 = _code_kind(obs, obs_files, _CODE1, 1)
    code2 = _code_kind(obs, obs_files, _CODE2, 2)
    raw = [_read_station(ds, p, code1, code2) for ds, p in zip(obs, obs_files, strict=True)]

    # The epoch grid: every station's epochs, rounded to the second, counted from day 0.
    t_all = np.unique(np.concatenate([np.round(r["t"]) for r in raw]))
    day0 = np.floor(t_all[0] / SECONDS_PER_DAY) * SECONDS_PER_DAY
    prns = sorted({int(s[1:]) for r in raw for s in r["sv"]})
    T, S, N = t_all.shape[0], len(prns), len(raw)
    eph, eph_ok = _ephemerides(nav, nav_file, prns, t_all, max_ephemeris_age_s)
    if not eph_ok.any():
        toe = _gps_seconds(nav.time.values)
        raise RinexError(
            f"{nav_file}: its ephemerides ({_date(toe.min())} to {_date(toe.max())}) do not "
            f"cover the observations ({_date(t_all[0])} to {_date(t_all[-1])}): a navigation "
            "file of another day?", path=nav_file)

    names, rows = [], []
    valid = np.zeros((T, N, S), bool)
    elev_grid = np.full((T, N, S), -np.inf)
    stec_grid = np.full((T, N, S), np.nan)
    lat_g, lon_g, zen_g, az_g = (np.full((T, N, S), np.nan) for _ in range(4))
    arc_g = -np.ones((T, N, S), np.int64)
    info, n_arcs_total = {}, 0
    for k, (r, path) in enumerate(zip(raw, obs_files, strict=True)):
        lat, lon, h = ecef_to_geodetic(r["position"])
        name = r["marker"].split()[0] if r["marker"].strip() else \
            os.path.basename(path)[:4]
        names.append(name)
        rows.append((k, name, float(lat), float(lon), float(h), *r["position"], "train", path))
        ti = np.searchsorted(t_all, np.round(r["t"]))
        si = np.array([prns.index(int(s[1:])) for s in r["sv"]])
        # Satellite geometry at every epoch this station observed, for every PRN it lists.
        tt, ss = np.meshgrid(ti, si, indexing="ij")
        have = eph_ok[tt, ss]
        e_args = {key: v[tt[have], ss[have]] for key, v in eph.items()}
        sat = transmit_positions(e_args, r["t"][np.nonzero(have)[0]], r["position"])
        el = np.full(tt.shape, -np.inf)
        az = np.zeros(tt.shape)
        el[have], az[have] = look_angles(r["position"], lat, lon, sat)
        finite = np.isfinite(r["L1"]) & np.isfinite(r["L2"]) & np.isfinite(r["P1"]) \
            & np.isfinite(r["P2"])
        use = finite & have & (el >= np.radians(elevation_mask_deg))
        n_slips, n_arcs = 0, 0
        for j in range(len(si)):
            sel = np.flatnonzero(use[:, j])
            if sel.shape[0] == 0:
                continue
            stec, arc, slips = tec_arcs(
                r["t"][sel], r["L1"][sel, j], r["L2"][sel, j], r["P1"][sel, j],
                r["P2"][sel, j], r["lli"][sel, j], gf_slip_m=gf_slip_m,
                mw_slip_cycles=mw_slip_cycles, max_gap_s=max_gap_s,
                min_arc_epochs=min_arc_epochs, weights=np.sin(el[sel, j]) ** 2)
            n_slips += slips
            kept_arcs, arc_ids = np.unique(arc[arc >= 0], return_inverse=True)
            n_arcs += kept_arcs.shape[0]
            keep = sel[arc >= 0]
            stec = stec[arc >= 0]
            arc_g[ti[keep], k, si[j]] = n_arcs_total + arc_ids
            n_arcs_total += kept_arcs.shape[0]
            stec_grid[ti[keep], k, si[j]] = stec
            valid[ti[keep], k, si[j]] = True
            elev_grid[ti[keep], k, si[j]] = el[keep, j]
            plat, plon, _ = pierce_point(lat, lon, el[keep, j], az[keep, j], shell_height_km)
            lat_g[ti[keep], k, si[j]], lon_g[ti[keep], k, si[j]] = plat, plon
            zen_g[ti[keep], k, si[j]] = np.pi / 2 - el[keep, j]
            az_g[ti[keep], k, si[j]] = az[keep, j]
        info[name] = {"file": path, "observations": r["codes"], "cycle_slips": int(n_slips),
                      "arcs": int(n_arcs), "epochs": int(r["t"].shape[0])}
        if not valid[:, k, :].any():
            raise RinexError(f"{path}: no satellite arc of at least {min_arc_epochs} epochs "
                             f"above {elevation_mask_deg} deg with dual-frequency data and "
                             "an ephemeris", path=path)

    stations = np.array(rows, dtype=[("station", "i8"), ("name", "U16"), ("lat", "f8"),
                                     ("lon", "f8"), ("height", "f8"), ("x", "f8"),
                                     ("y", "f8"), ("z", "f8"), ("role", "U5"),
                                     ("file", "U512")])
    link_arr = _links(stations, links)
    ti, st, sa = np.nonzero(valid)
    index = -np.ones(valid.shape, np.int64)
    index[ti, st, sa] = np.arange(ti.shape[0])
    pts = np.zeros(ti.shape[0], POINT_FIELDS)
    pts["lat"], pts["lon"] = lat_g[ti, st, sa], lon_g[ti, st, sa]
    pts["zenith"], pts["azimuth"] = zen_g[ti, st, sa], az_g[ti, st, sa]
    pts["station"], pts["satellite"] = st, np.asarray(prns, np.int64)[sa]
    epochs = (t_all - day0).astype(np.int64)
    pts["epoch"] = epochs[ti]
    stec = stec_grid[ti, st, sa]
    arcs = arc_g[ti, st, sa]
    pairs, y = double_differences(valid, elev_grid, stec, index, link_arr, epochs)
    if pairs.shape[0] == 0:
        common = {f"{obs_files[c]} + {obs_files[d]}":
                  int((valid[:, c, :].any(1) & valid[:, d, :].any(1)).sum())
                  for c, d in link_arr}
        raise RinexError("no double difference: no linked stations share an epoch with two "
                         f"common satellites (common epochs per link: {common})")
    prn_arr = np.asarray(prns, np.int64)
    pairs["satellite_a"], pairs["satellite_b"] = prn_arr[pairs["satellite_a"]], \
        prn_arr[pairs["satellite_b"]]
    if test_station is None:
        c = stations[["x", "y", "z"]]
        xyz = np.column_stack([c["x"], c["y"], c["z"]])
        test_station = int(np.argmin(np.linalg.norm(xyz - xyz.mean(0), axis=1)))
    sid = _station_id(stations, test_station)
    date = _GPS_EPOCH + np.timedelta64(int(day0), "s")
    return GNSSNetwork(pts, pairs, y, stations, link_arr, sid, slant_tec=stec, arcs=arcs,
                       elevation=np.pi / 2 - pts["zenith"], date=date, info=info,
                       shell_height_km=float(shell_height_km),
                       elevation_mask_deg=float(elevation_mask_deg))


def _date(t_gps):
    return str((_GPS_EPOCH + np.timedelta64(int(t_gps), "s")).astype("datetime64[s]"))
