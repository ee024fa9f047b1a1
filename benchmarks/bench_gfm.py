"""Throughput and accuracy of the one-pass generalized FM (issue 3, item 8).

1. Rows per second of ``GFMRegressor(solver="one_pass").partial_fit`` on dense Gaussian streams
   (d = 100, k = 5, n = 10 k d; d = 1000, k = 10, n = 10 k d = 100,000), timing the solver only
   (batches are generated beforehand), next to the memory-bandwidth bound of merely reading
   the same batch (``X.sum()`` and ``X.copy()``); the ratio is reported. The first batch
   (spectral initialisation) is reported apart from the steady state.
2. Rows per second on sparse one-hot MovieLens-100K (d = 2625).
3. MovieLens-100K test RMSE of gFM, iFM and the classic FM on the project's protocol
   (75,000 / 25,000 random splits, seeds 0, 1, 2; predictions clipped to [1, 5]).

Run under the benchmark lock, e.g.::

    flock /tmp/fmlearn-bench.lock env PYTHONPATH=src python benchmarks/bench_gfm.py

``--quick`` shrinks everything for a smoke test; ``--part`` selects 1, 2 or 3.
"""

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.metrics import root_mean_squared_error


def _stream(d, k, n, T, seed=0):
    from fmlearn.datasets import make_gfm

    _, _, truth = make_gfm(1, d, k, random_state=seed)
    rng = np.random.default_rng(seed + 1)
    return truth, [truth.sample(n, rng) for _ in range(T)]


def _best(f, repeat=3):
    f()
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def dense_stream(d, k, T, n_jobs):
    from fmlearn import GFMRegressor

    n = 10 * k * d
    truth, batches = _stream(d, k, n, T)
    m = GFMRegressor(k, random_state=0, n_jobs=n_jobs)
    times = []
    for X, y in batches:
        t0 = time.perf_counter()
        m.partial_fit(X, y)
        times.append(time.perf_counter() - t0)
    from fmlearn.diagnostics import recovery_error

    err = recovery_error(m.w_, m.M_, truth.w, truth.M)
    X = batches[0][0]
    t_sum = _best(lambda: X.sum())
    t_copy = _best(lambda: X.copy())
    steady = np.array(times[1:])
    return {
        "d": d, "k": k, "n": n, "T": T,
        "first_s": times[0], "step_s": float(np.median(steady)),
        "rows_s_steady": n / float(np.median(steady)),
        "rows_s_all": n * T / float(np.sum(times)),
        "bound_sum_rows_s": n / t_sum, "bound_copy_rows_s": n / t_copy,
        "error": err,
    }


def movielens_throughput(n_jobs, repeat=5):
    from fmlearn import GFMRegressor
    from fmlearn.datasets import load_movielens_100k

    ml = load_movielens_100k()
    X, y = ml.X, ml.y
    # One-hot rows are far outside the theory (binary features, n ~ 4 k d): plain repeated
    # steps on the same rows explode, so the steps are safeguarded (one extra read each).
    m = GFMRegressor(8, safeguard=True, random_state=0, n_jobs=n_jobs)
    m.partial_fit(X, y)  # first batch: standardisation and spectral initialisation
    t = _best(lambda: m.partial_fit(X, y), repeat)
    t_sum = _best(lambda: X.sum())
    return {"rows": X.shape[0], "d": X.shape[1], "step_s": t, "rows_s": X.shape[0] / t,
            "bound_sum_rows_s": X.shape[0] / t_sum}


def movielens_rmse(seeds, n_jobs, quick=False):
    from fmlearn import FMRegressor, GFMRegressor, IFMRegressor
    from fmlearn.datasets import load_movielens_100k, movielens_split

    ml = load_movielens_100k()
    X, y = ml.X, ml.y
    models = {
        "gFM one_pass k=8 (auto passes)": lambda: GFMRegressor(8, random_state=0,
                                                               n_jobs=n_jobs),
        "iFM k=8 (auto passes)": lambda: IFMRegressor(8, random_state=0, n_jobs=n_jobs),
        "classic FM MCMC k=8, 100 sweeps": lambda: FMRegressor(8, solver="mcmc", n_iter=100,
                                                               random_state=0),
    }
    if quick:
        models.pop("classic FM MCMC k=8, 100 sweeps")
    out = {}
    for name, make in models.items():
        rmses, secs = [], []
        for seed in seeds:
            tr, te = movielens_split(X.shape[0], seed)
            m = make()
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m.fit(X[tr], y[tr])
            secs.append(time.perf_counter() - t0)
            p = np.clip(m.predict(X[te]), 1.0, 5.0)
            rmses.append(float(root_mean_squared_error(y[te], p)))
        out[name] = (float(np.mean(rmses)), float(np.mean(secs)))
    base = []
    for seed in seeds:
        tr, te = movielens_split(X.shape[0], seed)
        base.append(float(root_mean_squared_error(y[te], np.full(te.shape[0], y[tr].mean()))))
    out["global mean"] = (float(np.mean(base)), 0.0)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--part", type=int, choices=(1, 2, 3))
    ap.add_argument("--n-jobs", type=int, default=None)
    args = ap.parse_args()
    parts = [args.part] if args.part else [1, 2, 3]
    print(f"cpus={os.cpu_count()} n_jobs={args.n_jobs} load={os.getloadavg()[0]:.2f}")
    if 1 in parts:
        configs = [(100, 5, 10), (300, 10, 6)] if args.quick else [(100, 5, 30), (1000, 10, 16)]
        print("\n| d | k | n = 10kd | first batch s | s/batch | rows/s (steady) | rows/s (all) "
              "| read bound X.sum() rows/s | ratio | X.copy() rows/s | final rel. error |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for d, k, T in configs:
            r = dense_stream(d, k, T, args.n_jobs)
            print(f"| {d} | {k} | {r['n']} | {r['first_s']:.3f} | {r['step_s']:.3f} | "
                  f"{r['rows_s_steady']:,.0f} | {r['rows_s_all']:,.0f} | "
                  f"{r['bound_sum_rows_s']:,.0f} | "
                  f"{r['rows_s_steady'] / r['bound_sum_rows_s']:.2f} | "
                  f"{r['bound_copy_rows_s']:,.0f} | {r['error']:.2e} |")
    if 2 in parts:
        r = movielens_throughput(args.n_jobs)
        print(f"\nMovieLens-100K one-hot (n={r['rows']}, d={r['d']}), safeguarded one_pass "
              f"k=8 step: "
              f"{r['step_s']:.3f} s = {r['rows_s']:,.0f} rows/s; X.sum() bound "
              f"{r['bound_sum_rows_s']:,.0f} rows/s")
    if 3 in parts:
        seeds = [0] if args.quick else [0, 1, 2]
        res = movielens_rmse(seeds, args.n_jobs, args.quick)
        print(f"\nMovieLens-100K test RMSE, seeds {seeds} (clipped to [1, 5])")
        print("| model | mean test RMSE | fit s |")
        print("|---|---|---|")
        for name, (rmse, sec) in res.items():
            print(f"| {name} | {rmse:.4f} | {sec:.1f} |")


if __name__ == "__main__":
    main()
