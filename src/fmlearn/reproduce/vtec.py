"""Lin et al. 2019, §4.2, Table 1: online vTEC estimation from GNSS double differences.

Set-up of the paper: a test station at the centre of a triangular mesh of stations ~75 km
apart and 16 training stations around it; every 60 s a model f is refitted on the double
differences y = f(x_ac) - f(x_ad) - f(x_bc) + f(x_bd) among the training stations (pierce
points x encoded by :class:`fmlearn.encoders.PiercePointEncoder` with m = the number of
satellites), and predicts the double differences that involve the test station. The paper's
data are proprietary: the windows come from :func:`fmlearn.datasets.make_gnss_vtec`.

Methods: all six columns of Table 1 (Ridge, LASSO, ElasticNet, Kernel, FM, iFM; the paper's
RTK row needs a commercial positioning engine and is not reproduced), one entry each in
:data:`METHODS` (module :mod:`fmlearn.reproduce._vtec_methods`):

* Ridge, LASSO, ElasticNet (l1_ratio 0.5): f linear, fitted exactly on the contrasted
  encodings C X (a linear f commutes with C), scikit-learn's estimators without intercept
  (C 1 = 0 leaves none to fit).
* Kernel: kernel ridge regression with an RBF kernel k on the encoded pierce points; on
  contrasts the kernel between targets is C K C^T, so alpha = (C K C^T + lambda I)^-1 y and
  f(x) = k(x, X) C^T alpha. Exact but O(n_targets^3): it is fitted on a seeded random subset of
  ``kernel_max_targets`` targets per window (the paper's kernel baseline was also its slowest).
* FM: :class:`fmlearn.FMRegressor` with ``contrasts``, solver "als" (coordinate descent on the
  targets), warm-started from the previous window: 5 sweeps per window, 30 on a cold start.
* iFM: :class:`fmlearn.IFMRegressor` with ``contrasts``, solver "als", warm-started from the
  previous window (1 sweep per window, 3 on a cold start), the encoder's K-means started from the
  previous centres so that the features keep their meaning from one window to the next.

Protocol (:class:`Protocol`; :data:`FULL` for ``fmlearn reproduce vtec``, :data:`QUICK` for
``--quick``). Windows come in *segments* of ``run_length`` consecutive 60 s windows; a model is
cold-started at a segment's first window and warm-started within it, as the online system
would be after a restart.

* Days: the first ``n_validation_days`` simulated days are validation days, the others test
  days (the paper: 5 + 9; ``--quick``: 1 + 1).
* Tuning, on validation days only: from each validation day, ``tune_segments_per_day``
  segment starts drawn without replacement from ``tune_start_grid`` by a generator seeded
  with ``(random_state, day)`` (a documented, seeded subsample of the validation windows:
  FULL draws one start per day from the 24 whole hours, so 5 segments of 4 windows at 5
  different hours of the day). The grids are the paper's: the regularisation (LASSO's,
  ElasticNet's and Ridge's alpha, the kernel ridge lambda, FM's and iFM's ``reg_linear`` =
  ``reg_pairwise``) over 1e-6, 1e-5, ..., 1e6, the rank of FM and iFM over 1, ..., 10. The
  search is coordinate-wise: every regularisation at rank 6 (the middle of the grid), then
  every rank at the best regularisation. The criterion is the RMSE pooled over every test-
  station double difference of the tuning windows (ties: the first in grid order); a setting
  that raises (singular system, diverging solver) is not chosen. :func:`tune` refuses a
  window of a test day.
* Test: every method runs once with its chosen values over ``test_starts`` of every test day
  (FULL: segments of 4 windows at 01, 09 and 17 UT, 108 windows in all); the table reports the
  RMSE over each test day's test-station double differences, their mean over the days, and the
  CPU seconds of one window's fit + predict.

``jobs`` > 1 runs the methods' tunings, then the test days, in that many worker processes
(spawned, each encoding the windows it needs). Every job is a pure function of the protocol
(seeded simulator, seeded K-means, seeded estimators), so the table is the same for any
``jobs``; only the wall time changes.
"""

import time
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from ._vtec_methods import KERNEL_MAX_TARGETS, METHODS

__all__ = ["run", "run_protocol", "Protocol", "FULL", "FULL_PAPER_EQUATION", "QUICK", "METHODS",
           "encode_windows", "encode_segment",
           "evaluate", "evaluate_many", "tune"]

PAPER_REG_GRID = tuple(10.0 ** e for e in range(-6, 7))
PAPER_RANK_GRID = tuple(range(1, 11))


@dataclass(frozen=True)
class Protocol:
    """What a run measures (module docstring): days, windows, grids, seeds."""

    n_days: int
    n_validation_days: int
    tune_start_grid: tuple        # candidate segment starts on a validation day (s of day)
    tune_segments_per_day: int    # drawn (seeded) from tune_start_grid per validation day
    test_starts: tuple            # segment starts on every test day (s of day)
    run_length: int               # consecutive windows per segment
    reg_grid: tuple = PAPER_REG_GRID
    rank_grid: tuple = PAPER_RANK_GRID
    kernel_max_targets: int = KERNEL_MAX_TARGETS
    seconds: int = 60
    random_state: int = 0
    jobs: int = 1
    # The simulator's physics (fmlearn.datasets.make_gnss_vtec): slant TEC through a Chapman
    # layer with elevation-dependent noise by default; ("vtec", "thin_shell", "white") is the
    # set-up of the paper's equation, the one of the full run measured in docs/vtec.md.
    observable: str = "slant"
    truth: str = "chapman"
    noise_model: str = "elevation"
    # How the pierce-point encoder groups the points: by satellite (the fix of docs/vtec.md,
    # "Why iFM blew up on unseen pierce points") or by K-means as the paper prints it.
    encoder_groups: str = "satellite"

    def simulator(self):
        """The simulation this protocol runs on."""
        from ..datasets import make_gnss_vtec

        return make_gnss_vtec(n_days=self.n_days, n_validation_days=self.n_validation_days,
                              observable=self.observable, truth=self.truth,
                              noise_model=self.noise_model, random_state=self.random_state)

    def tuning_starts(self, day):
        """The seeded segment starts used for tuning on validation day ``day``."""
        rng = np.random.default_rng([self.random_state, day])
        k = min(self.tune_segments_per_day, len(self.tune_start_grid))
        return sorted(int(s) for s in rng.choice(self.tune_start_grid, k, replace=False))


QUICK = Protocol(n_days=2, n_validation_days=1, tune_start_grid=(3 * 3600, 7 * 3600),
                 tune_segments_per_day=2, test_starts=(1 * 3600, 5 * 3600, 13 * 3600),
                 run_length=2, reg_grid=(1e-4, 1e-2, 1.0, 1e2), rank_grid=(2, 6),
                 kernel_max_targets=400)
FULL = Protocol(n_days=14, n_validation_days=5,
                tune_start_grid=tuple(h * 3600 for h in range(24)), tune_segments_per_day=1,
                test_starts=(1 * 3600, 9 * 3600, 17 * 3600), run_length=4, jobs=2)
#: The full run on the paper's equation (vertical TEC on a thin shell, white noise, K-means
#: groups): the set-up of the table measured on 2026-11-25 in docs/vtec.md (that run predates
#: the encoder's azimuth unwrap, which changes the gamma features of clusters that straddle
#: north).
FULL_PAPER_EQUATION = replace(FULL, observable="vtec", truth="thin_shell", noise_model="white",
                              encoder_groups="kmeans")


@dataclass
class EncodedWindow:
    day: int
    start: int
    segment: int
    validation: bool
    Xtr: sp.csr_matrix
    Ctr: sp.csr_matrix
    ytr: np.ndarray
    Xte: sp.csr_matrix
    Cte: sp.csr_matrix
    yte: np.ndarray
    encode_seconds: float
    cache: dict = field(default_factory=dict, repr=False, compare=False)


def encode_windows(sim, days, segment_starts, run_length, seconds=60, random_state=0,
                   first_segment=0, groups="kmeans"):
    """Encode the windows of ``run_length`` consecutive minutes from each start (seconds of
    the day) of each day; K-means restarts from the previous window's centres within a
    segment whenever the number of satellites is unchanged. Segments are numbered from
    ``first_segment``."""
    out = []
    seg = first_segment
    for day in days:
        for s0 in segment_starts:
            out += encode_segment(sim.windows(seconds=seconds, days=[day], start=s0,
                                              stop=s0 + run_length * seconds),
                                  seg, random_state, groups=groups)
            seg += 1
    return out


def encode_segment(windows, segment, random_state=0, validation=None, groups="kmeans"):
    """Encode consecutive :class:`~fmlearn.datasets.GNSSWindow` objects as one segment (the
    encoder's K-means started from the previous window's centres when the number of
    satellites is unchanged; ``groups="satellite"``: the satellites as groups). ``validation``
    overrides the windows' own flag."""
    from ..encoders import PiercePointEncoder

    out, prev = [], None
    for w in windows:
        t0 = time.perf_counter()
        init = "k-means++"
        if prev is not None and prev.cluster_centers_.shape[0] == w.n_satellites:
            init = prev.cluster_centers_
        if groups == "satellite":
            init = "k-means++"
        enc = PiercePointEncoder(n_clusters=w.n_satellites, init=init, groups=groups,
                                 random_state=random_state).fit(w.train.points)
        Xtr, Xte = enc.transform(w.train.points), enc.transform(w.test.points)
        out.append(EncodedWindow(w.day, w.start, segment,
                                 w.validation if validation is None else validation, Xtr,
                                 w.train.contrasts, w.train.y, Xte, w.test.contrasts,
                                 w.test.y, time.perf_counter() - t0))
        prev = enc
    return out


def evaluate_many(method, settings, windows, strict=False, log=None):
    """Run ``method`` with every setting over the windows in order (fresh models per segment,
    warm starts within), window by window so that what the settings share is computed once
    per window (``window.cache``, emptied after the window).

    Returns one list per setting of per-window (day, squared-error sum, count, wall seconds,
    CPU seconds of fit + predict), or ``None`` for a setting that raised (``strict``: raise).
    """
    results = [[] for _ in settings]
    models, seg = {}, None
    for w in windows:
        if seg is None or w.segment != seg:
            seg = w.segment
            models = {i: method.make(p) for i, p in enumerate(settings)
                      if results[i] is not None}
        for i, model in models.items():
            if results[i] is None:
                continue
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                pred = model.fit(w).predict(w)
            except Exception as exc:  # a setting that fails (diverges, singular) is dropped
                if strict:
                    raise
                if log is not None:
                    log(f"    {settings[i]}: failed ({type(exc).__name__}: {exc})")
                results[i] = None
                continue
            results[i].append((w.day, float(np.sum((pred - w.yte) ** 2)), w.yte.shape[0],
                               time.perf_counter() - t0, time.process_time() - c0))
        w.cache.clear()
    return results


def evaluate(method, params, windows):
    """:func:`evaluate_many` with one setting, raising if it fails."""
    return evaluate_many(method, [params], windows, strict=True)[0]


def _rmse(res):
    return float(np.sqrt(sum(r[1] for r in res) / max(sum(r[2] for r in res), 1)))


def _score(res):
    if res is None:
        return np.inf
    r = _rmse(res)
    return r if np.isfinite(r) else np.inf


def tune(method, windows, reg_grid, rank_grid, log, extra=None):
    """Coordinate search on validation windows (module docstring): every regularisation at
    the middle rank, then every rank at the best regularisation; returns the chosen setting
    and its validation RMSE. A window of a test day is refused."""
    if not windows or not all(w.validation for w in windows):
        raise ValueError("tuning takes validation-day windows only (a test-day window, or no "
                         "window, was passed)")
    extra = dict(extra or {})

    def scores(settings):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = evaluate_many(method, settings, windows, log=log)
        return [_score(r) for r in res]

    rank0 = rank_grid[len(rank_grid) // 2] if method.ranked else None
    first = [{**extra, "reg": reg, "rank": rank0} for reg in reg_grid]
    table = {(p["reg"], rank0): s for p, s in zip(first, scores(first), strict=True)}
    best_reg = min(reg_grid, key=lambda r: table[(r, rank0)])
    best_rank = None
    if method.ranked:
        second = [{**extra, "reg": best_reg, "rank": k} for k in rank_grid
                  if (best_reg, k) not in table]
        table.update({(best_reg, p["rank"]): s
                      for p, s in zip(second, scores(second), strict=True)})
        best_rank = min(rank_grid, key=lambda k: table[(best_reg, k)])
    return {**extra, "reg": best_reg, "rank": best_rank}, table[(best_reg, best_rank)]


# -- the runs: windows per part, one job per method (tuning) and per test day --------------------
_LOADED = {}


def load_windows(protocol, part):
    """The encoded windows of ``part``: "validation" (the tuning segments of every validation
    day) or a test day's index (its ``test_starts`` segments). Cached per process for the
    last few parts asked."""
    key = (protocol, part)
    if key in _LOADED:
        return _LOADED[key]
    sim = protocol.simulator()
    out = []
    if part == "validation":
        for day in sim.validation_days:
            out += encode_windows(sim, [day], protocol.tuning_starts(day), protocol.run_length,
                                  protocol.seconds, protocol.random_state, len(out),
                                  groups=protocol.encoder_groups)
    else:
        if part not in sim.test_days:
            raise ValueError(f"day {part} is not a test day ({sim.test_days})")
        out = encode_windows(sim, [part], list(protocol.test_starts), protocol.run_length,
                             protocol.seconds, protocol.random_state,
                             groups=protocol.encoder_groups)
    while len(_LOADED) >= 2:
        _LOADED.pop(next(iter(_LOADED)))
    _LOADED[key] = out
    return out


def _tune_job(protocol, name, load=load_windows):
    from .._threads import single_thread

    lines = []
    c0 = time.process_time()
    with single_thread():
        extra = {"max_targets": protocol.kernel_max_targets} if name == "Kernel" else {}
        method = METHODS[name]
        params, val_rmse = tune(method, load(protocol, "validation"), protocol.reg_grid,
                                protocol.rank_grid if method.ranked else [None],
                                lines.append, extra)
    return name, params, val_rmse, time.process_time() - c0, lines


def _day_job(protocol, day, chosen, load=load_windows):
    from .._threads import single_thread

    out = {}
    with single_thread(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        windows = load(protocol, day)
        for name, params in chosen.items():
            out[name] = evaluate(METHODS[name], params, windows)
        enc = [w.encode_seconds for w in windows]
        n_test = [w.yte.shape[0] for w in windows]
        zero = [float(np.sum(w.yte ** 2)) for w in windows]
    return day, out, enc, n_test, zero


class _Inline:
    """The executor of ``jobs=1``: runs a job when it is submitted."""

    def __init__(self, load):
        self.load = load

    def map(self, fn, *iterables):
        return [fn(*args, load=self.load) for args in zip(*iterables, strict=True)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _executor(protocol, load):
    if protocol.jobs <= 1:
        return _Inline(load)
    if load is not load_windows:
        raise ValueError("worker processes load their own windows: jobs > 1 needs the "
                         "default loader")
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(protocol.jobs, mp_context=multiprocessing.get_context("spawn"))


def run_protocol(protocol, log=print, load=load_windows):
    """Tune every available method on the validation windows, then score every test day.

    ``load(protocol, part)`` gives the windows of a part (:func:`load_windows`). Returns a
    dict: ``params`` (name -> (chosen setting, validation RMSE)), ``rmse`` (name -> {test day:
    RMSE}), ``window_rmse`` (name and "zero" -> the RMSE of every test window, in order),
    ``cpu_per_window`` (name -> CPU seconds of fit + predict per test window),
    ``skipped``, ``tune_cpu`` (name -> CPU seconds of tuning), ``test_days``.
    """
    sim = protocol.simulator()
    names = [n for n, m in METHODS.items() if m.available is None or m.available()]
    skipped = [n for n in METHODS if n not in names]
    # Longest jobs first, so that a pool of workers ends together.
    order = sorted(names, key=lambda n: -(2 * METHODS[n].ranked + (n == "Kernel")))
    chosen, tune_cpu = {}, {}
    with _executor(protocol, load) as ex:
        for name, params, val_rmse, cpu, lines in ex.map(_tune_job, [protocol] * len(order),
                                                         order):
            for line in lines:
                log(line)
            chosen[name], tune_cpu[name] = (params, val_rmse), cpu
            log(f"  {name}: reg={params['reg']:g}"
                + (f", rank={params['rank']}" if params["rank"] else "")
                + f", validation RMSE {val_rmse:.4f} (tuning {cpu:.0f} s CPU)")
        picked = {n: chosen[n][0] for n in names}
        days = list(sim.test_days)
        rmse, cpu_win, n_test = {n: {} for n in names}, {n: [] for n in names}, []
        per_window = {n: [] for n in names + ["zero"]}
        for i, (day, out, enc, nt, z) in enumerate(ex.map(_day_job, [protocol] * len(days), days,
                                                       [picked] * len(days))):
            n_test = n_test + nt
            per_window["zero"] += [float(np.sqrt(zi / max(ni, 1))) for zi, ni in zip(z, nt,
                                                                                        strict=True)]
            for n in names:
                rmse[n][day] = _rmse(out[n])
                cpu_win[n] += [r[4] for r in out[n]]
                per_window[n] += [float(np.sqrt(r[1] / max(r[2], 1))) for r in out[n]]
            log(f"  TestDay{i + 1} ({len(out[names[0]])} windows, encoding "
                f"{np.mean(enc):.2f} s/window): "
                + ", ".join(f"{n} {rmse[n][day]:.4f}" for n in names))
    return {"params": chosen, "rmse": rmse, "skipped": skipped, "tune_cpu": tune_cpu,
            "cpu_per_window": {n: float(np.mean(v)) for n, v in cpu_win.items()},
            "test_days": days, "n_test_targets": n_test, "window_rmse": per_window,
            "rmse_zero": float(np.sqrt(sum(r ** 2 * n for r, n in zip(
                per_window["zero"], n_test, strict=True)) / max(sum(n_test), 1)))}


def _print_table(result):
    from . import format_table

    names, days = list(result["rmse"]), result["test_days"]
    rows = [[f"TestDay{i + 1}"] + [result["rmse"][n][d] for n in names]
            for i, d in enumerate(days)]
    rows.append(["Average"] + [float(np.mean(list(result["rmse"][n].values())))
                               for n in names])
    rows.append(["CPU s/window"] + [result["cpu_per_window"][n] for n in names])
    print()
    print(format_table(rows, [""] + names, floatfmt=".4f"))
    print()
    choice = [["reg"] + [f"{result['params'][n][0]['reg']:g}" for n in names],
              ["rank"] + [str(result["params"][n][0]["rank"] or "-") for n in names],
              ["validation RMSE"] + [f"{result['params'][n][1]:.4f}" for n in names],
              ["tuning CPU s"] + [f"{result['tune_cpu'][n]:.0f}" for n in names]]
    print(format_table(choice, ["chosen on validation days"] + names))
    best = min(names, key=lambda n: rows[-2][1 + names.index(n)])
    print(f"\nlowest average RMSE: {best}")
    if result["skipped"]:
        print(f"not run: {', '.join(result['skipped'])} (its estimator does not take contrasts)")


def run(out_dir, quick=False, protocol=None):
    """Tune on the validation days, print Table 1's analogue, write ``vtec_table1.png``."""
    from . import optional_pyplot, save_figure

    protocol = protocol or (QUICK if quick else FULL)
    t_start, c_start = time.perf_counter(), time.process_time()

    def log(msg):
        print(msg, flush=True)

    kind = {id(QUICK): "quick", id(FULL): "full"}.get(id(protocol), "custom protocol")
    log(f"Lin et al. 2019, §4.2 / Table 1 on simulated GNSS data ({kind}): "
        f"{protocol.n_validation_days} validation days ({protocol.tune_segments_per_day} "
        f"tuning segment(s) of {protocol.run_length} windows per day), "
        f"{protocol.n_days - protocol.n_validation_days} test days ({len(protocol.test_starts)} "
        f"segments of {protocol.run_length} windows per day); windows of {protocol.seconds} s "
        f"at 1 Hz, 16 training stations; {protocol.jobs} process(es)")
    result = run_protocol(protocol, log)
    _print_table(result)
    print(f"RMS of the test double differences (the RMSE of predicting 0) "
          f"{result['rmse_zero']:.4f} TECU; "
          f"{np.mean(result['n_test_targets']):.0f} test double differences per window")
    print(f"total {time.perf_counter() - t_start:.0f} s wall, "
          f"{time.process_time() - c_start:.0f} s CPU in this process")
    plt = optional_pyplot("vtec_table1.png")
    if plt is None:
        return result
    save_figure(_figure(plt, result, protocol), out_dir, "vtec_table1.png")
    return result


def _figure(plt, result, protocol):
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    days = result["test_days"]
    x = np.arange(1, len(days) + 1)
    for n in result["rmse"]:
        ax[0].plot(x, [result["rmse"][n][d] for d in days], marker="o", label=n)
    ax[0].set_xlabel("test day")
    ax[0].set_ylabel("RMSE of test double differences (TECU)")
    ax[0].set_xticks(x)
    ax[0].legend()
    ax[0].set_title("Lin et al. 2019, Table 1 analogue (simulated)")
    w = load_windows(protocol, days[-1])[-1]
    for n in ("Ridge", "iFM"):
        if n in result["params"]:
            model = METHODS[n].make(result["params"][n][0])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pred = model.fit(w).predict(w)
            ax[1].scatter(w.yte, pred, s=3, alpha=0.4, label=n)
    lim = np.abs(w.yte).max()
    ax[1].plot([-lim, lim], [-lim, lim], "k-", lw=0.5)
    ax[1].set_xlabel("observed double difference (TECU)")
    ax[1].set_ylabel("predicted")
    ax[1].set_title("last test window (cold start)")
    ax[1].legend()
    return fig
