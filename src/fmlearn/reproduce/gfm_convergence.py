"""Lin and Ye 2016 (Theorems 1 and 15): one-pass gFM recovery error versus mini-batch, for batch
sizes n = c k d around the threshold, with label noise, and at d = 1000.

Data: y = x^T w* + x^T M* x + noise with standard Gaussian x, |w*| = 1 and
M* = Q diag(lambda) Q^T of rank k with |lambda| in [1, 2] and alternating signs (mixed-sign, so
indefinite). Every batch is fresh (one pass); the error is
(|w - w*| + ||M - M*||_2) / (|w*| + ||M*||_2) after each batch, as in the theorems.
"""

import time

import numpy as np

from ..datasets import make_gfm
from ..exceptions import DivergenceError
from ..gfm import GFMRegressor, SmallBatchWarning

__all__ = ["run"]


def _curve(d, k, c, T, noise, seed):
    """Recovery error after each of T + 1 fresh batches of n = c k d rows (nan once diverged)."""
    import warnings

    n = int(round(c * k * d))
    _, _, truth = make_gfm(1, d, k, noise=noise, random_state=seed)
    rng = np.random.default_rng(seed + 1)
    m = GFMRegressor(k, random_state=seed)
    errs = []
    t0 = time.perf_counter()
    status = ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallBatchWarning)
        for _ in range(T + 1):
            X, y = truth.sample(n, rng)
            try:
                m.partial_fit(X, y, truth=truth)
            except DivergenceError:  # the estimator stopped the run (error grew > 1e4 x)
                status = "diverged"
                break
            errs.append(m.history_["recovery_error"][-1])
    seconds = time.perf_counter() - t0
    if status != "diverged" and len(errs) > 1:
        status = "converging" if errs[-1] < 0.5 * errs[0] else "not converging"
    errs = np.array(errs + [np.nan] * (T + 1 - len(errs)))
    return errs, status, seconds


def _rate(errs):
    ok = np.isfinite(errs) & (errs > 0)
    if ok.sum() < 3:
        return float("nan")
    t = np.flatnonzero(ok)
    return float(np.exp(np.polyfit(t, np.log(errs[ok]), 1)[0]))


def run(out_dir, quick=False):
    """Print the tables and write ``gfm_convergence.png`` into ``out_dir``."""
    from . import format_table, optional_pyplot, save_figure

    d, k = (60, 3) if quick else (100, 5)
    T = 12 if quick else 30
    cs = [1, 2, 3, 5, 10]
    results = {"threshold": {}, "noise": {}, "large": None}
    rows = []
    for c in cs:
        errs, status, sec = _curve(d, k, c, T, 0.0, seed=0)
        results["threshold"][c] = errs
        last = errs[np.isfinite(errs)][-1] if np.isfinite(errs).any() else np.nan
        rows.append([f"{c} k d = {c * k * d}", status, float(last), _rate(errs),
                     int(np.isfinite(errs).sum()) - 1, sec])
    print(f"\nLin and Ye 2016, one-pass gFM, d = {d}, k = {k}, noise-free, mixed-sign M*")
    print(format_table(rows, ["batch n", "status", "final error", "rate/batch", "batches", "s"],
                       floatfmt=".3g"))

    rows = []
    for sigma in (0.0, 0.01, 0.1):
        errs, status, sec = _curve(d, k, 10, T, sigma, seed=1)
        results["noise"][sigma] = errs
        floor = float(np.median(errs[-5:]))
        rows.append([sigma, status, floor, sec])
    print(f"\nlabel noise (n = 10 k d = {10 * k * d}): error floor = median of the last 5 batches")
    print(format_table(rows, ["noise sd", "status", "floor", "s"], floatfmt=".3g"))

    dl, kl, Tl = (300, 5, 8) if quick else (1000, 10, 15)
    errs, status, sec = _curve(dl, kl, 10, Tl, 0.0, seed=2)
    results["large"] = errs
    n = 10 * kl * dl
    print(f"\nd = {dl}, k = {kl}, n = 10 k d = {n} ({Tl + 1} batches, incl. data generation)")
    print(format_table([[status, float(errs[-1]), _rate(errs), sec / (Tl + 1),
                         n * (Tl + 1) / sec]],
                       ["status", "final error", "rate/batch", "s/batch", "rows/s"],
                       floatfmt=".3g"))

    plt = optional_pyplot("gfm_convergence.png")
    if plt is None:
        return results
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for c, errs in results["threshold"].items():
        ax.semilogy(np.arange(errs.shape[0]), errs, marker=".", label=f"n = {c} k d")
    ax.set(title=f"batch size threshold (d={d}, k={k})", xlabel="mini-batch t",
           ylabel="relative recovery error", ylim=(1e-14, 1e3))
    ax.legend()
    ax = axes[1]
    for sigma, errs in results["noise"].items():
        ax.semilogy(np.arange(errs.shape[0]), errs, marker=".", label=f"noise sd {sigma}")
    ax.set(title="label noise (n = 10 k d)", xlabel="mini-batch t", ylim=(1e-14, 10))
    ax.legend()
    ax = axes[2]
    ax.semilogy(np.arange(results["large"].shape[0]), results["large"], marker=".")
    ax.set(title=f"d = {dl}, k = {kl}, n = 10 k d", xlabel="mini-batch t")
    fig.suptitle("One-pass gFM (Lin & Ye 2016, Algorithm 1) on Gaussian data")
    path = save_figure(fig, out_dir, "gfm_convergence.png")
    print(f"\nfigure: {path}")
    return results
