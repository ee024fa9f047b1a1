"""Classic FM benchmark: MovieLens-100K protocol, throughput on 2M one-hot rows, startup cost.

Usage::

    python benchmarks/bench_fm.py movielens [--data PATH] [--n-jobs 1 2]
    python benchmarks/bench_fm.py throughput [--rows 2000000] [--n-jobs 1 2]
    python benchmarks/bench_fm.py startup

MovieLens protocol (issue 2; each configuration is compiled by a short warm-up fit first):
rows of the ratings file in file order, one-hot users + items
(d = 2625), ``idx = np.random.default_rng(seed).permutation(100000)``, train = idx[:75000], test
= the rest, seeds 0, 1, 2, k = 8. Reported per configuration: the mean test RMSE of the final
model's ``predict`` (clipped to [1, 5] like libFM), the mean test RMSE of the running average of
all iterations' predictions (libFM's own report for MCMC and ALS), and the mean fit wall time
(test set evaluated every iteration, as libFM does).

Prints Markdown tables; paste them with the command into benchmarks/RESULTS.md.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from fmlearn import FMRegressor
from fmlearn.datasets import load_movielens_100k, make_recommendation, movielens_split

CONFIGS = {
    "MCMC 100": dict(solver="mcmc", n_iter=100, init_stdev=0.1),
    "MCMC 500": dict(solver="mcmc", n_iter=500, init_stdev=0.1),
    "MCMC 500, k=20": dict(solver="mcmc", n_iter=500, init_stdev=0.1, n_factors=20),
    "ALS 100, reg (0,5,10)": dict(solver="als", n_iter=100, reg_bias=0, reg_linear=5,
                                  reg_pairwise=10),
    "SGD 100, lr 0.005, reg (0,0,0.1)": dict(solver="sgd", n_iter=100, learning_rate=0.005,
                                             reg_pairwise=0.1),
}

LIBFM = {  # issue 2's bars: libFM 1.4.4, one thread, same protocol
    "MCMC 100": (0.9153, 2.06),
    "MCMC 500": (0.8998, 18.6),
    "MCMC 500, k=20": (0.8997, 47.0),
    "ALS 100, reg (0,5,10)": (0.9118, 1.89),
    "SGD 100, lr 0.005, reg (0,0,0.1)": (0.9188, 1.52),
}


def movielens(args):
    b = load_movielens_100k(args.data)
    X, y = b.X, b.y
    names = args.configs or list(CONFIGS)
    print(f"MovieLens-100K {X.shape}, seeds {args.seeds}, threads {args.n_jobs}\n")
    print("| config | threads | RMSE predict() | RMSE running avg (libFM's report) | fit s "
          "| libFM RMSE | libFM s | time ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        for nj in args.n_jobs:
            # compile (or load from the cache) outside the timing: a short fit of the same kind
            warm = {**CONFIGS[name], "n_iter": 2}
            FMRegressor(random_state=0, n_jobs=nj, **{"n_factors": 8, **warm}).fit(
                X[:2000], y[:2000], eval_set=(X[2000:2500], y[2000:2500]))
            res = []
            for seed in args.seeds:
                tr, te = movielens_split(X.shape[0], seed)
                params = {"n_factors": 8, **CONFIGS[name]}
                m = FMRegressor(random_state=seed, n_jobs=nj, **params)
                t = time.perf_counter()
                m.fit(X[tr], y[tr], eval_set=(X[te], y[te]))
                el = time.perf_counter() - t
                rmse = float(np.sqrt(np.mean((m.predict(X[te]) - y[te]) ** 2)))
                avg = m.history_.get("val_avg") or [float("nan")]
                res.append((rmse, avg[-1], el))
            r = np.mean(res, axis=0)
            ref_rmse, ref_s = LIBFM[name]
            avg_txt = "n/a (SGD)" if np.isnan(r[1]) else f"{r[1]:.4f}"
            print(f"| {name} | {nj} | {r[0]:.4f} | {avg_txt} | {r[2]:.2f} | {ref_rmse} "
                  f"| {ref_s} | {r[2] / ref_s:.2f} |", flush=True)


def throughput(args):
    b = make_recommendation(943, 1682, args.rows, rank=8, unique_pairs=False, random_state=0)
    X, y = b.X, b.y
    print(f"{X.shape[0]:,} synthetic one-hot rows, d = {X.shape[1]}, k = 8\n")
    print("Median solver time per epoch (history_['iter_time']; set-up such as validation and "
          "duplicate merging excluded)\n")
    print("| solver | threads | s per epoch | s per million rows per epoch | libFM (1 thread) |")
    print("|---|---|---|---|---|")
    libfm = {"sgd": "about 0.1", "als": "1.0-1.2", "mcmc": "1.0-1.2"}
    for solver in args.solvers:
        for nj in args.n_jobs:
            kw = dict(learning_rate=0.005, reg_pairwise=0.1) if solver == "sgd" else {}
            if solver == "als":
                kw = dict(reg_linear=5, reg_pairwise=10)
            FMRegressor(8, solver=solver, n_iter=1, random_state=0, n_jobs=nj, **kw).fit(
                X[:5000], y[:5000])  # compile outside the timing
            m = FMRegressor(8, solver=solver, n_iter=args.epochs, random_state=0, n_jobs=nj,
                            **kw).fit(X, y)
            per_epoch = float(np.median(m.history_["iter_time"]))  # solver time per epoch
            print(f"| {solver} | {nj} | {per_epoch:.3f} | {per_epoch / (X.shape[0] / 1e6):.3f} "
                  f"| {libfm[solver]} |", flush=True)


def startup(args):
    d = tempfile.mkdtemp()
    path = os.path.join(d, "m.fmz")
    b = make_recommendation(100, 80, 2000, random_state=0)
    FMRegressor(8, solver="mcmc", n_iter=20, random_state=0).fit(b.X, b.y).save(path)
    code = ("import time; t=time.perf_counter(); import fmlearn, numpy as np, scipy.sparse as sp;"
            f"m=fmlearn.load({path!r}); m.predict(sp.random(1, m.n_features_in_, density=0.01, "
            "format='csr')); print(time.perf_counter()-t)")
    for label in ("first run (may compile)", "warm cache", "warm cache"):
        t = time.perf_counter()
        inner = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True).stdout.strip()
        print(f"{label}: {time.perf_counter() - t:.2f} s wall for the process, "
              f"{float(inner):.2f} s from interpreter start of imports to prediction")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["movielens", "throughput", "startup"])
    p.add_argument("--data", default=None, help="MovieLens folder or ratings file")
    p.add_argument("--n-jobs", type=int, nargs="+", default=[1, 2])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=None)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--solvers", nargs="+", default=["sgd", "als", "mcmc"])
    args = p.parse_args()
    {"movielens": movielens, "throughput": throughput, "startup": startup}[args.what](args)


if __name__ == "__main__":
    main()
