"""Seed 001 §4.2, Table 1: online vTEC estimation from GNSS double differences.

Set-up of the paper: a test station at the centre of a triangular mesh of stations ~75 km
apart and 16 training stations around it; every 60 s a model f is refitted on the double
differences y = f(x_ac) - f(x_ad) - f(x_bc) + f(x_bd) among the training stations (pierce
points x encoded by :class:`fmlearn.encoders.PiercePointEncoder` with m = the number of
satellites), and predicts the double differences that involve the test station. Parameters are
tuned on validation days only (regularisation over 1e-6 ... 1e6, the rank over 1 ... 10), and
the table reports the RMSE per test day and averaged. The paper's data are proprietary: the
windows come from :func:`fmlearn.datasets.make_gnss_vtec` (1 validation + 1 test day with
``quick``, 5 + 9 days as in the paper otherwise).

Methods (one entry each in :data:`METHODS`):

* Ridge, LASSO, ElasticNet: f linear, fitted exactly on the contrasted encodings C X (a linear f
  commutes with C), scikit-learn's estimators without intercept (C 1 = 0 leaves none to fit).
* Kernel: kernel ridge regression with an RBF kernel k on the pierce points; on contrasts the
  kernel between targets is C K C^T, so alpha = (C K C^T + lambda I)^-1 y and
  f(x) = k(x, X) C^T alpha. Exact but O(n_targets^3): it is fitted on a random subset of
  ``KERNEL_MAX_TARGETS`` targets per window (the paper's kernel baseline was also its slowest).
* FM: :class:`fmlearn.FMRegressor` with ``contrasts``, solver "als" (coordinate descent on the
  targets), warm-started from the previous window: 5 sweeps per window, 30 on a cold start
  (a sweep costs about 0.02 s of CPU on a window, and one coordinate sweep moves less than one
  of iFM's block sweeps). The entry is on when ``FMRegressor.fit`` accepts ``contrasts``.
* iFM: :class:`fmlearn.IFMRegressor` with ``contrasts``, solver "als", warm-started from the
  previous window (1 sweep per window, 3 on a cold start), the encoder's K-means started from the
  previous centres so that the features keep their meaning from one window to the next.

Runs are segments of consecutive windows (warm starts run within a segment) spread over each day.
The tuning is a coordinate search over the paper's grids (regularisation at a middle rank, then
the rank at the best regularisation) to keep the full run to hours rather than days.
"""

import inspect
import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp

__all__ = ["run", "METHODS", "encode_windows", "evaluate"]

#: Targets used by the kernel baseline per window (exact kernel ridge is cubic in them).
KERNEL_MAX_TARGETS = 1000
PAPER_REG_GRID = [10.0 ** e for e in range(-6, 7)]
PAPER_RANK_GRID = list(range(1, 11))


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


def encode_windows(sim, days, segment_starts, run_length, seconds=60, random_state=0):
    """Encode the windows of ``run_length`` consecutive minutes from each start (seconds of
    the day) of each day; K-means restarts from the previous window's centres within a
    segment whenever the number of satellites is unchanged."""
    from ..encoders import PiercePointEncoder

    out = []
    seg = 0
    for day in days:
        for s0 in segment_starts:
            prev = None
            for w in sim.windows(seconds=seconds, days=[day], start=s0,
                                 stop=s0 + run_length * seconds):
                t0 = time.perf_counter()
                init = "k-means++"
                if prev is not None and prev.cluster_centers_.shape[0] == w.n_satellites:
                    init = prev.cluster_centers_
                enc = PiercePointEncoder(n_clusters=w.n_satellites, init=init,
                                         random_state=random_state).fit(w.train.points)
                Xtr, Xte = enc.transform(w.train.points), enc.transform(w.test.points)
                out.append(EncodedWindow(w.day, w.start, seg, w.validation, Xtr,
                                         w.train.contrasts, w.train.y, Xte, w.test.contrasts,
                                         w.test.y, time.perf_counter() - t0))
                prev = enc
            seg += 1
    return out


# -- methods ------------------------------------------------------------------------------------
class LinearContrast:
    """A linear f fitted on the contrasted encodings (exact: C (X w) = (C X) w)."""

    def __init__(self, estimator):
        self.est = estimator

    def fit(self, w):
        # Dense: n_targets x (2m + 8) is small, and scikit-learn's coordinate descent uses the
        # Gram matrix only on dense input.
        self.est.fit((w.Ctr @ w.Xtr).toarray(), w.ytr)
        return self

    def predict(self, w):
        return np.asarray((w.Cte @ w.Xte) @ self.est.coef_).ravel()


class KernelContrast:
    """Kernel ridge regression on contrasts: target kernel C K C^T (module docstring)."""

    def __init__(self, alpha, max_targets=KERNEL_MAX_TARGETS, random_state=0):
        self.alpha, self.max_targets = alpha, max_targets
        self.rng = np.random.default_rng(random_state)

    def fit(self, w):
        from sklearn.metrics.pairwise import rbf_kernel

        n_t = w.ytr.shape[0]
        pick = np.sort(self.rng.choice(n_t, min(n_t, self.max_targets), replace=False))
        C = w.Ctr[pick]
        rows = np.unique(C.indices)
        C = C[:, rows]
        Xr = w.Xtr[rows].toarray()
        # gamma = 1 / (d Var(x)), scikit-learn's "scale" rule, from the training rows.
        self.gamma = 1.0 / (Xr.shape[1] * max(Xr.var(), 1e-12))
        K = rbf_kernel(Xr, gamma=self.gamma)
        KC = np.asarray(C @ K)
        Kt = np.asarray(C @ KC.T)
        Kt[np.diag_indices_from(Kt)] += self.alpha
        a = scipy.linalg.solve(Kt, w.ytr[pick], assume_a="pos")
        self.Xr, self.beta = Xr, np.asarray(C.T @ a).ravel()
        return self

    def predict(self, w):
        from sklearn.metrics.pairwise import rbf_kernel

        f = rbf_kernel(w.Xte.toarray(), self.Xr, gamma=self.gamma) @ self.beta
        return np.asarray(w.Cte @ f).ravel()


class FactorContrast:
    """An estimator with ``fit(X, y, contrasts=C)`` / ``predict_contrasts``, warm-started from
    the previous window of its segment (a cold start gets more sweeps)."""

    def __init__(self, estimator, cold_passes=3, warm_passes=1):
        self.est, self.cold, self.warm = estimator, cold_passes, warm_passes
        self.started = False

    def fit(self, w):
        d_prev = getattr(self.est, "n_features_in_", None)
        warm = self.started and d_prev == w.Xtr.shape[1]
        # iFM counts iterations in max_iter, the classic FM in n_iter (docs/parameters.md).
        n_iter = "max_iter" if "max_iter" in self.est.get_params() else "n_iter"
        self.est.set_params(warm_start=warm, **{n_iter: self.warm if warm else self.cold})
        self.est.fit(w.Xtr, w.ytr, contrasts=w.Ctr)
        self.started = True
        return self

    def predict(self, w):
        return self.est.predict_contrasts(w.Xte, w.Cte)


def _ridge(p):
    from sklearn.linear_model import Ridge

    return LinearContrast(Ridge(alpha=p["reg"], fit_intercept=False))


def _lasso(p):
    from sklearn.linear_model import Lasso

    return LinearContrast(Lasso(alpha=p["reg"], fit_intercept=False, max_iter=5000,
                                precompute=True))


def _elastic(p):
    from sklearn.linear_model import ElasticNet

    return LinearContrast(ElasticNet(alpha=p["reg"], l1_ratio=0.5, fit_intercept=False,
                                     max_iter=5000, precompute=True))


def _kernel(p):
    return KernelContrast(p["reg"], p.get("max_targets", KERNEL_MAX_TARGETS))


def _ifm(p):
    from ..ifm import IFMRegressor

    return FactorContrast(IFMRegressor(n_factors=p["rank"], solver="als", reg_linear=p["reg"],
                                       reg_pairwise=p["reg"], random_state=0))


def _fm(p):
    from ..fm import FMRegressor

    return FactorContrast(FMRegressor(n_factors=p["rank"], solver="als", reg_linear=p["reg"],
                                      reg_pairwise=p["reg"], random_state=0),
                          cold_passes=30, warm_passes=5)


def _fm_available():
    from ..fm import FMRegressor

    return "contrasts" in inspect.signature(FMRegressor.fit).parameters


@dataclass(frozen=True)
class Method:
    make: object               # params dict -> object with fit(window) / predict(window)
    ranked: bool = False       # tune the rank too
    available: object = None   # None or a callable telling whether the method can run now


#: Table 1's columns, in the paper's order; adding a method is one entry.
METHODS = {
    "Ridge": Method(_ridge),
    "LASSO": Method(_lasso),
    "ElasticNet": Method(_elastic),
    "Kernel": Method(_kernel),
    "FM": Method(_fm, ranked=True, available=_fm_available),
    "iFM": Method(_ifm, ranked=True),
}


def evaluate(method, params, windows):
    """Run ``method`` over the windows in order (fresh model per segment, warm starts within);
    returns per-window (day, squared-error sum, count, seconds of fit + predict)."""
    out = []
    model, seg = None, None
    for w in windows:
        if model is None or w.segment != seg:
            model, seg = method.make(params), w.segment
        t0 = time.perf_counter()
        pred = model.fit(w).predict(w)
        sec = time.perf_counter() - t0
        out.append((w.day, float(np.sum((pred - w.yte) ** 2)), w.yte.shape[0], sec))
    return out


def _rmse(res):
    return float(np.sqrt(sum(r[1] for r in res) / max(sum(r[2] for r in res), 1)))


def tune(method, windows, reg_grid, rank_grid, log, extra=None):
    """Coordinate search on the validation windows: reg at the middle rank, then the rank."""
    def score(p):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = _rmse(evaluate(method, p, windows))
        except Exception as exc:  # a setting that fails (diverges, singular) is not chosen
            log(f"    {p}: failed ({type(exc).__name__}: {exc})")
            return np.inf
        return r if np.isfinite(r) else np.inf

    extra = extra or {}
    rank0 = rank_grid[len(rank_grid) // 2] if method.ranked else None
    scores = {}
    for reg in reg_grid:
        scores[(reg, rank0)] = score({**extra, "reg": reg, "rank": rank0})
    best_reg = min(reg_grid, key=lambda r: scores[(r, rank0)])
    if method.ranked:
        for rank in rank_grid:
            if (best_reg, rank) not in scores:
                scores[(best_reg, rank)] = score({**extra, "reg": best_reg, "rank": rank})
        best_rank = min(rank_grid, key=lambda k: scores[(best_reg, k)])
    else:
        best_rank = None
    return {**extra, "reg": best_reg, "rank": best_rank}, scores[(best_reg, best_rank)]


def run(out_dir, quick=False):
    """Tune on the validation days, print Table 1's analogue, write ``vtec_table1.png``."""
    from ..datasets import make_gnss_vtec
    from . import format_table, optional_pyplot, save_figure

    t_start = time.perf_counter()
    if quick:
        sim = make_gnss_vtec(n_days=2, n_validation_days=1, random_state=0)
        val_starts, test_starts, run_length = [3 * 3600, 7 * 3600], [1 * 3600, 5 * 3600,
                                                                      13 * 3600], 2
        reg_grid, rank_grid = [1e-4, 1e-2, 1.0, 1e2], [2, 6]
        extra = {"max_targets": 400}
    else:
        sim = make_gnss_vtec(n_days=14, n_validation_days=5, random_state=0)
        val_starts = test_starts = [h * 3600 for h in range(0, 24, 3)]
        run_length = 5
        reg_grid, rank_grid = PAPER_REG_GRID, PAPER_RANK_GRID
        extra = {}

    def log(msg):
        print(msg, flush=True)

    val = encode_windows(sim, sim.validation_days, val_starts, run_length)
    test = encode_windows(sim, sim.test_days, test_starts, run_length)
    rms = float(np.sqrt(np.mean(np.concatenate([w.yte for w in test]) ** 2)))
    log(f"seed 001 §4.2 / Table 1 on simulated GNSS data: {len(val)} validation and "
        f"{len(test)} test windows of 60 s (1 Hz, 16 training stations); "
        f"{np.mean([w.ytr.shape[0] for w in test]):.0f} training and "
        f"{np.mean([w.yte.shape[0] for w in test]):.0f} test double differences per window; "
        f"RMS of the test double differences (the RMSE of predicting 0) {rms:.4f} TECU")
    chosen, day_rmse, seconds, skipped = {}, {}, {}, []
    for name, method in METHODS.items():
        if method.available is not None and not method.available():
            skipped.append(name)
            continue
        t0 = time.perf_counter()
        params, val_rmse = tune(method, val, reg_grid, rank_grid if method.ranked else [None],
                                log, extra)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = evaluate(method, params, test)
        chosen[name] = (params, val_rmse)
        day_rmse[name] = {d: _rmse([r for r in res if r[0] == d]) for d in sim.test_days}
        seconds[name] = float(np.mean([r[3] for r in res]))
        log(f"  {name}: reg={params['reg']:g}" + (f", rank={params['rank']}"
                                                  if params["rank"] else "")
            + f", validation RMSE {val_rmse:.4f}, {seconds[name]:.2f} s/window "
            f"({time.perf_counter() - t0:.0f} s incl. tuning)")
    names = list(day_rmse)
    rows = [[f"TestDay{i + 1}"] + [day_rmse[n][d] for n in names]
            for i, d in enumerate(sim.test_days)]
    rows.append(["Average"] + [float(np.mean(list(day_rmse[n].values()))) for n in names])
    rows.append(["s/window"] + [seconds[n] for n in names])
    print()
    print(format_table(rows, [""] + names, floatfmt=".4f"))
    best = min(names, key=lambda n: rows[-2][1 + names.index(n)])
    print(f"\nlowest average RMSE: {best}; encoding: "
          f"{np.mean([w.encode_seconds for w in test]):.2f} s/window")
    if skipped:
        print(f"not run: {', '.join(skipped)} (its estimator does not take contrasts)")
    print(f"total {time.perf_counter() - t_start:.0f} s")

    result = {"rmse": day_rmse, "params": chosen, "seconds_per_window": seconds,
              "skipped": skipped}
    plt = optional_pyplot("vtec_table1.png")
    if plt is None:
        return result
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    days = np.arange(1, len(sim.test_days) + 1)
    for n in names:
        ax[0].plot(days, [day_rmse[n][d] for d in sim.test_days], marker="o", label=n)
    ax[0].set_xlabel("test day")
    ax[0].set_ylabel("RMSE of test double differences (TECU)")
    ax[0].set_xticks(days)
    ax[0].legend()
    ax[0].set_title("seed 001 Table 1 analogue (simulated)")
    w = test[-1]
    for n in ("Ridge", "iFM"):
        if n in chosen:
            model = METHODS[n].make(chosen[n][0])
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
    save_figure(fig, out_dir, "vtec_table1.png")
    return result
