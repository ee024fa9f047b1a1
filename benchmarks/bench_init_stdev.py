"""``init_stdev="auto"`` of ALS and MCMC: the rule of the values alone (``0.1 / r``, r the root
mean square of the non-zero values; fmlearn 0.2) against the rule that also counts a row's
pairs (``0.1 / max(r, q^(1/4))``, q the mean of sum_{j<l} x_j^2 x_l^2; see
``fmlearn.solvers._fm_common.auto_init_stdev``), with libFM's 0.1 beside them.

    python benchmarks/bench_init_stdev.py [--quick] [--sets fig1a,ml,ml-side] [--movielens F]

* ``fig1a``: Lin et al. 2019, §4.1, Fig. 1(a): dense N(0, 1/d) rows, noiseless classic-FM
  labels, d = 100, k = 5, 30 k d training and 10,000 test rows, ``FMRegressor(5,
  solver="als")`` (default penalties), 100 sweeps, random states 0-2 (``--quick``: 6,000 /
  2,000 rows, 30 sweeps).
* ``ml``: MovieLens-100K user + item one-hot (``load_movielens_100k``), the project's split
  (``movielens_split``, seeds 0-2), ``FMRegressor()`` defaults (MCMC, k = 8, 100 sweeps) and
  ``solver="als"`` with ``reg_linear = reg_pairwise = 5`` (``--quick``: 30 sweeps, seed 0).
  Here r = q = 1: both rules give 0.1 and the same model.
* ``ml-side``: the same with the users' and items' side features (``side_features=True``,
  about 8 non-zeros a row), where the rules differ.

Prints one row per (set, solver, start, seed): the start, test RMSE, CPU and wall seconds, and
the load average once.
"""

import argparse
import os
import time

import numpy as np


def _old_rule(X):
    data = X.data if hasattr(X, "data") and not isinstance(X, np.ndarray) else X[X != 0]
    return 0.1 / float(np.sqrt(np.mean(np.asarray(data) ** 2)))


def _fit(est, Xtr, ytr, Xte, yte):
    w0, c0 = time.perf_counter(), time.process_time()
    est.fit(Xtr, ytr)
    rmse = float(np.sqrt(np.mean((est.predict(Xte) - yte) ** 2)))
    return rmse, time.process_time() - c0, time.perf_counter() - w0


def fig1a(quick):
    from fmlearn import FMRegressor
    from fmlearn.datasets import make_fm_labels

    d, k = 100, 5
    n_train, n_test, n_iter = (6000, 2000, 30) if quick else (30 * k * d, 10000, 100)
    for seed in range(3):
        X, y, _ = make_fm_labels(n_train + n_test, d, k, random_state=seed)
        Xtr, ytr, Xte, yte = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
        for name, init in (("auto (new)", "auto"), ("0.1 / r (old auto)", _old_rule(Xtr)),
                           ("0.1 (libFM)", 0.1)):
            est = FMRegressor(k, solver="als", n_iter=n_iter, init_stdev=init,
                              random_state=seed)
            rmse, cpu, wall = _fit(est, Xtr, ytr, Xte, yte)
            print(f"| fig1a | als | {name} | {seed} | {est.init_stdev_:.4g} | {rmse:.3g} | "
                  f"{cpu:.1f} | {wall:.1f} |", flush=True)


def movielens(quick, side, path):
    from fmlearn import FMRegressor
    from fmlearn.datasets import load_movielens_100k, movielens_split

    ml = load_movielens_100k(path, side_features=side)
    n_iter = 30 if quick else 100
    tag = "ml-side" if side else "ml"
    for seed in range(1 if quick else 3):
        tr, te = movielens_split(ml.X.shape[0], seed)
        Xtr, ytr, Xte, yte = ml.X[tr], ml.y[tr], ml.X[te], ml.y[te]
        for solver, extra in (("mcmc", {}), ("als", {"reg_linear": 5.0, "reg_pairwise": 5.0})):
            for name, init in (("auto (new)", "auto"), ("0.1 / r (old auto)", _old_rule(Xtr))):
                est = FMRegressor(solver=solver, n_iter=n_iter, init_stdev=init,
                                  random_state=seed, **extra)
                rmse, cpu, wall = _fit(est, Xtr, ytr, Xte, yte)
                print(f"| {tag} | {solver} | {name} | {seed} | {est.init_stdev_:.4g} | "
                      f"{rmse:.4f} | {cpu:.1f} | {wall:.1f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sets", default="fig1a,ml,ml-side")
    ap.add_argument("--movielens", default=None, help="MovieLens-100K ratings file")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} (1 min)")
    print("| set | solver | start | seed | init_stdev_ | test RMSE | CPU s | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    sets = args.sets.split(",")
    if "fig1a" in sets:
        fig1a(args.quick)
    if "ml" in sets:
        movielens(args.quick, False, args.movielens)
    if "ml-side" in sets:
        movielens(args.quick, True, args.movielens)


if __name__ == "__main__":
    main()
