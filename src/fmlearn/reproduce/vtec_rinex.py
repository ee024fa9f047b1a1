"""Lin et al. 2019, §4.2, Table 1 on real GNSS observations: ``fmlearn reproduce vtec --rinex DIR``.

The files of DIR (RINEX observation files, one or more GPS navigation files, optionally an
IONEX map) are read by :func:`fmlearn.datasets.load_rinex_network`; stations are grouped into
networks by distance (single linkage, ``max_network_km``). For every network of three or more
stations, each station is held out in turn (Lin et al. 2019's protocol with a test station and
training stations around it):

* windows of ``window_seconds`` (the paper refits every 60 s on 60 epochs at 1 Hz; public
  files sample every 30 s, so the default window of 120 s holds 4 epochs) that have training
  and test double differences;
* tuning on the first ``n_validation_windows`` windows (the validation part: earlier data of
  the same held-out station, as the paper's validation days), with the paper's grids and
  the coordinate search of :func:`fmlearn.reproduce.vtec.tune`; a tuning window is never a
  test window;
* test on the later windows, warm-started from window to window: every method's RMSE (TECU)
  over the held-out station's double differences, next to predicting zero and next to the
  double differences implied by an IONEX map (the map's vTEC at the pierce points times the
  thin-shell mapping function, at the same time of day: a loose bound when the map is of
  another day).

Networks of two stations get the distribution of their double differences only (there is
no station to hold out). Every network's double differences are summarised: their size, and
their spread within one combination of four levelling arcs (the phase precision; what
remains between arcs is the levelling error of :func:`fmlearn.datasets._gnss_rinex.tec_arcs`).
"""

import glob
import os
import re
import time
import warnings
from dataclasses import dataclass

import numpy as np

from .vtec import METHODS, PAPER_RANK_GRID, PAPER_REG_GRID, encode_segment, evaluate, tune

__all__ = ["RealProtocol", "FULL", "QUICK", "run", "find_files", "run_network",
           "double_difference_summary"]


@dataclass(frozen=True)
class RealProtocol:
    """What a real-data run measures (module docstring)."""

    window_seconds: int = 120
    n_validation_windows: int = 1
    reg_grid: tuple = PAPER_REG_GRID
    rank_grid: tuple = PAPER_RANK_GRID
    elevation_mask_deg: float = 10.0
    shell_height_km: float = 350.0
    max_network_km: float = 1000.0
    random_state: int = 0
    encoder_groups: str = "satellite"


FULL = RealProtocol()
QUICK = RealProtocol(reg_grid=(1e-4, 1e-2, 1.0, 1e2), rank_grid=(2, 6))

_OBS = re.compile(r"(\.\d\d[od](\.(gz|z|bz2))?|_mo\.(rnx|crx)(\.(gz|z))?)$", re.I)
_NAV = re.compile(r"(\.\d\dn(\.(gz|z|bz2))?|_gn\.rnx(\.(gz|z))?)$", re.I)
_IONEX = re.compile(r"(\.\d\di(\.(gz|z))?|\.inx(\.gz)?)$", re.I)


def find_files(directory):
    """Observation, navigation and IONEX files of a folder (by the RINEX naming rules)."""
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"{directory}: not a folder")
    files = sorted(glob.glob(os.path.join(directory, "*")))
    obs = [f for f in files if _OBS.search(os.path.basename(f))]
    nav = [f for f in files if _NAV.search(os.path.basename(f))]
    ionex = [f for f in files if _IONEX.search(os.path.basename(f))]
    if len(obs) < 2 or not nav:
        raise FileNotFoundError(f"{directory}: needs two or more RINEX observation files "
                                f"(*.YYo, *.YYd, *_MO.rnx) and a GPS navigation file (*.YYn, "
                                f"*_GN.rnx); found {len(obs)} and {len(nav)}")
    return obs, nav, ionex


def _networks(obs, max_km):
    """Group the files by header position (single linkage within ``max_km``)."""
    import georinex
    from scipy.cluster.hierarchy import fcluster, linkage

    pos, bad = [], []
    for f in obs:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p = np.asarray(georinex.rinexheader(f).get("position"), np.float64)
            if p.shape != (3,) or not np.all(np.isfinite(p)):
                raise ValueError("no position")
            pos.append(p)
        except Exception:  # unreadable header: the loader will say why when it is tried
            bad.append(f)
    good = [f for f in obs if f not in bad]
    if len(good) < 2:
        return [good + bad]
    lab = fcluster(linkage(np.array(pos), "single"), max_km * 1000.0, "distance")
    groups = [[f for f, g in zip(good, lab, strict=True) if g == k] for k in np.unique(lab)]
    return sorted((g for g in groups if len(g) >= 2), key=len, reverse=True)


def _load_network(files, navs, protocol, log):
    """load_rinex_network, dropping (with a note) a station whose file cannot be used and
    trying the next navigation file when one does not cover the observations."""
    from ..datasets import RinexError, load_rinex_network

    files = list(files)
    for nav in navs:
        while len(files) >= 2:
            try:
                return load_rinex_network(files, nav,
                                          elevation_mask_deg=protocol.elevation_mask_deg,
                                          shell_height_km=protocol.shell_height_km)
            except RinexError as exc:
                if exc.path == nav:
                    log(f"  {os.path.basename(nav)} not used: {exc}")
                    break
                if exc.path in files:
                    log(f"  station file {os.path.basename(exc.path)} left out: {exc}")
                    files.remove(exc.path)
                    continue
                raise
    return None


def arc_combinations(net):
    """The combination of four levelling arcs of each double difference (an integer per
    combination) and the sign that orients it (a double difference with the reference
    satellite switched, (b, a) instead of (a, b), is the same combination negated)."""
    arcs = net.arcs[net.corners()]
    swapped = arcs[:, [2, 3, 0, 1]]
    flip = np.array([tuple(s) < tuple(a) for a, s in zip(arcs, swapped, strict=True)])
    key = np.where(flip[:, None], swapped, arcs)
    _, group = np.unique(key, axis=0, return_inverse=True)
    return group.ravel(), np.where(flip, -1.0, 1.0)


def double_difference_summary(net):
    """Size of the double differences and their spread within one combination of four
    levelling arcs (TECU)."""
    group, sign = arc_combinations(net)
    y = net.y * sign
    dev = y - np.bincount(group, y)[group] / np.bincount(group)[group]
    a = np.abs(y)
    return {"n": int(y.shape[0]), "abs_p50": float(np.median(a)),
            "abs_p90": float(np.percentile(a, 90)), "abs_max": float(a.max()),
            "rms": float(np.sqrt(np.mean(y ** 2))),
            "within_arc_std": float(dev.std()),
            "within_arc_p99": float(np.percentile(np.abs(dev), 99)),
            "n_arc_combinations": int(group.max() + 1)}


def _ionex_prediction(ionex, window, shell_height_km):
    """The held-out double differences implied by the map: C (vTEC / cos z')."""
    from ..datasets._gnss_geometry import EARTH_RADIUS_KM

    p = window.test.points
    sod = np.mod(p["epoch"], 86400)
    v = ionex.vtec(p["lat"], p["lon"], sod)
    zp = np.arcsin(EARTH_RADIUS_KM / (EARTH_RADIUS_KM + shell_height_km) * np.sin(p["zenith"]))
    return window.test.contrasts @ (v / np.cos(zp))


def run_network(net, protocol, log, ionex=None):
    """Hold out each station in turn (module docstring). Returns one dict per station."""
    from .._threads import single_thread

    rows = []
    names = [n for n, m in METHODS.items() if m.available is None or m.available()]
    for sid, name in zip(net.stations["station"], net.stations["name"], strict=True):
        held = net.with_test_station(int(sid))
        ws = [w for w in held.windows(seconds=protocol.window_seconds)
              if w.train.n_targets > 0 and w.test.n_targets > 0 and w.n_satellites >= 2]
        nv = protocol.n_validation_windows
        if len(ws) <= nv:
            log(f"  {name}: {len(ws)} window(s) with training and test double differences; "
                f"needs more than {nv}: skipped")
            continue
        val = encode_segment(ws[:nv], 0, protocol.random_state, validation=True,
                             groups=protocol.encoder_groups)
        test = encode_segment(ws[nv:], 1, protocol.random_state, validation=False,
                              groups=protocol.encoder_groups)
        yte = np.concatenate([w.yte for w in test])
        row = {"station": name, "n_test": int(yte.shape[0]), "n_windows": len(test),
               "zero": float(np.sqrt(np.mean(yte ** 2))), "rmse": {}, "params": {},
               "sq": {"zero": float(np.sum(yte ** 2))}}
        if ionex is not None:
            pred = np.concatenate([_ionex_prediction(ionex, w, protocol.shell_height_km)
                                   for w in ws[nv:]])
            row["ionex"] = float(np.sqrt(np.mean((pred - yte) ** 2)))
            row["ionex_rms"] = float(np.sqrt(np.mean(pred ** 2)))
            row["sq"]["ionex"] = float(np.sum((pred - yte) ** 2))
        with single_thread(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for m in names:
                method = METHODS[m]
                extra = {"max_targets": 1000} if m == "Kernel" else {}
                params, val_rmse = tune(method, val, protocol.reg_grid,
                                        protocol.rank_grid if method.ranked else [None],
                                        log, extra)
                try:
                    res = evaluate(method, params, test)
                    sq = sum(r[1] for r in res)
                except Exception as exc:  # noqa: BLE001 - reported in the table as failed
                    log(f"  {name}/{m}: the chosen setting failed on the test windows ({exc})")
                    sq = np.nan
                row["rmse"][m] = float(np.sqrt(sq / yte.shape[0]))
                row["sq"][m] = sq
                row["params"][m] = (params, val_rmse)
        log(f"  held out {name}: {len(test)} test windows, {yte.shape[0]} double differences; "
            + ", ".join(f"{m} {row['rmse'][m]:.3f}" for m in names)
            + f", zero {row['zero']:.3f}"
            + (f", IONEX {row['ionex']:.3f} (its double differences' RMS "
               f"{row['ionex_rms']:.3f})" if "ionex" in row else ""))
        rows.append(row)
    return rows


def _table(rows, log):
    from . import format_table

    if not rows:
        return None
    names = list(rows[0]["rmse"])
    extra = ["zero"] + (["IONEX"] if "ionex" in rows[0] else [])
    body = []
    for r in rows:
        body.append([r["station"], str(r["n_test"])] + [r["rmse"][m] for m in names]
                    + [r["zero"]] + ([r["ionex"]] if "ionex" in r else []))
    n = sum(r["n_test"] for r in rows)
    pooled = {m: float(np.sqrt(sum(r["sq"][m] for r in rows) / n)) for m in names + ["zero"]}
    if "ionex" in rows[0]:
        pooled["IONEX"] = float(np.sqrt(sum(r["sq"]["ionex"] for r in rows) / n))
    body.append(["pooled", str(n)] + [pooled[m] for m in names + extra])
    log(format_table(body, ["held out", "n DD"] + names + extra, floatfmt=".3f"))
    choice = [[r["station"]] + [f"{r['params'][m][0]['reg']:g}"
                                + (f"/{r['params'][m][0]['rank']}" if r['params'][m][0]['rank']
                                   else "") for m in names] for r in rows]
    log(format_table(choice, ["chosen reg[/rank]"] + names))
    order = sorted(names, key=lambda m: pooled[m])
    log("ordering by pooled RMSE: " + " < ".join(f"{m} {pooled[m]:.3f}" for m in order))
    log(f"paper's finding (iFM lowest) holds here: {'yes' if order[0] == 'iFM' else 'no'}; "
        f"methods better than predicting zero ({pooled['zero']:.3f}): "
        f"{', '.join(m for m in order if pooled[m] < pooled['zero']) or 'none'}")
    return pooled


def run(out_dir, quick=False, rinex_dir=None, protocol=None):
    """Run the protocol on every network of ``rinex_dir``; print the tables; write
    ``vtec_rinex.png``."""
    from . import optional_pyplot, save_figure
    from ._ionex import read_ionex

    if rinex_dir is None:
        raise ValueError("the real-data run needs a folder of RINEX files (--rinex DIR)")
    protocol = protocol or (QUICK if quick else FULL)
    t0, c0 = time.perf_counter(), time.process_time()

    def log(msg):
        print(msg, flush=True)

    obs, navs, ionex_files = find_files(rinex_dir)
    ionex = None
    for f in ionex_files:
        try:
            ionex = read_ionex(f)
            log(f"IONEX map {os.path.basename(f)} ({str(ionex.first_epoch)[:10]}, shell "
                f"{ionex.height_km:g} km): a loose bound, at the same time of day")
            break
        except ValueError as exc:
            log(f"IONEX file not used: {exc}")
    log(f"Lin et al. 2019, §4.2 / Table 1 on real GNSS data: {len(obs)} observation files in "
        f"{rinex_dir}; windows of {protocol.window_seconds} s, {protocol.n_validation_windows} "
        f"validation window(s) per held-out station, regularisation grid {len(protocol.reg_grid)}"
        f" values, rank grid {len(protocol.rank_grid)} values; elevation mask "
        f"{protocol.elevation_mask_deg:g} deg, shell {protocol.shell_height_km:g} km")
    results = []
    for group in _networks(obs, protocol.max_network_km):
        log(f"\nnetwork: {', '.join(os.path.basename(f) for f in group)}")
        net = _load_network(group, navs, protocol, log)
        if net is None:
            log("  fewer than two usable stations: skipped")
            continue
        st = net.stations
        xyz = np.column_stack([st["x"], st["y"], st["z"]])
        d = np.linalg.norm(xyz[:, None] - xyz[None], axis=-1) / 1000
        base = d[np.triu_indices(len(st), 1)]
        log(f"  stations {', '.join(st['name'])}; baselines {base.min():.1f}-{base.max():.1f} "
            f"km; {net.y.shape[0]} double differences of slant TEC over "
            f"{len(np.unique(net.pairs['epoch']))} epochs")
        s = double_difference_summary(net)
        log(f"  |DD| (TECU): median {s['abs_p50']:.3f}, 90 % {s['abs_p90']:.3f}, max "
            f"{s['abs_max']:.3f}, RMS {s['rms']:.3f}; within one combination of four levelling "
            f"arcs: std {s['within_arc_std']:.3f}, 99 % {s['within_arc_p99']:.3f} "
            f"({s['n_arc_combinations']} combinations)")
        entry = {"stations": list(st["name"]), "summary": s, "rows": [], "pooled": None}
        if len(st) >= 3:
            entry["rows"] = run_network(net, protocol, log, ionex)
            log("")
            entry["pooled"] = _table(entry["rows"], log)
        results.append(entry)
    log(f"\ntotal {time.perf_counter() - t0:.1f} s wall, {time.process_time() - c0:.1f} s CPU")
    plt = optional_pyplot("vtec_rinex.png")
    tables = [e for e in results if e["rows"]]
    if plt is not None and tables:
        save_figure(_figure(plt, tables[0]), out_dir, "vtec_rinex.png")
    return results


def _figure(plt, entry):
    rows = entry["rows"]
    names = list(rows[0]["rmse"]) + ["zero"] + (["IONEX"] if "ionex" in rows[0] else [])
    fig, ax = plt.subplots(figsize=(10, 4))
    x = np.arange(len(rows))
    wdt = 0.8 / len(names)
    for i, m in enumerate(names):
        vals = [r["rmse"].get(m, r.get(m.lower())) for r in rows]
        ax.bar(x + i * wdt, vals, wdt, label=m)
    ax.set_xticks(x + 0.4 - wdt / 2)
    ax.set_xticklabels([r["station"] for r in rows])
    ax.set_xlabel("held-out station")
    ax.set_ylabel("RMSE of its double differences (TECU)")
    ax.set_title("Lin et al. 2019, Table 1 on real RINEX files")
    ax.legend(ncol=3, fontsize=8)
    return fig
