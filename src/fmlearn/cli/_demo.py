"""``fmlearn demo``: factorization machines on generated data, no network and no user files.

Three generated tasks, each split 80/20 into train and test:

- ``fm``: regression targets from a planted rank-4 FM on sparse real-valued features;
- ``fm-sign``: the sign of the same kind of planted FM, as a classification task;
- ``ratings``: a small recommendation set (one-hot user + item, ratings 1..5 from a planted
  low-rank model with user and item biases).

Every solver (MCMC, ALS, SGD) is fitted on each task; the table shows the test metric next to
a trivial baseline (mean rating / majority class) and the planted model's own score (the best
any estimator can do), plus fit and predict times. A first step fits tiny models so that the
one-off cost of loading (or compiling) the numba kernels is reported on its own line.
"""

import time

import numpy as np
import scipy.sparse as sp

# Solver settings used on every task: MCMC needs none; ALS and SGD get mild L2 and, for SGD, a
# step size that is stable on standardized targets.
_SOLVERS = {
    "mcmc": {},
    "als": {"reg_linear": 1.0, "reg_pairwise": 5.0},
    "sgd": {"learning_rate": 0.02, "reg_linear": 0.01, "reg_pairwise": 0.01},
}


def _tasks(quick, seed):
    """(name, task, X, y, planted prediction, description) of each generated task."""
    from fmlearn.datasets import make_fm, make_recommendation

    n, d, density = (600, 40, 0.15) if quick else (6000, 100, 0.06)
    X, y, fm = make_fm(n, d, 4, x="sparse", density=density, noise=0.1, random_state=seed)
    tasks = [("fm", "r", X, y, fm.scores,
              f"planted rank-4 FM, {n} rows x {d} sparse features, noise 0.1")]
    X, y, sign = make_fm(n, d, 4, x="sparse", density=density, noise=0.1, task="classification",
                         random_state=seed + 1)
    tasks.append(("fm-sign", "c", X, y, np.where(sign.scores >= 0, 1, -1),
                  f"sign of a planted rank-4 FM, {n} rows x {d} sparse features"))
    n_users, n_items, n_r = (60, 40, 1200) if quick else (600, 400, 30000)
    rec = make_recommendation(n_users, n_items, n_r, rank=4, random_state=seed + 2)
    tasks.append(("ratings", "r", rec.X, rec.y, np.clip(rec.scores, 1, 5),
                  f"{n_r} ratings 1..5, {n_users} users x {n_items} items, one-hot"))
    return tasks


def _split(n, rng):
    idx = rng.permutation(n)
    cut = int(0.8 * n)
    return idx[:cut], idx[cut:]


def _estimator(task, solver, n_iter, seed, n_jobs=None):
    from fmlearn import FMClassifier, FMRegressor

    cls = FMRegressor if task == "r" else FMClassifier
    return cls(n_factors=4, solver=solver, n_iter=n_iter, random_state=seed, n_jobs=n_jobs,
               **_SOLVERS[solver])


def _score(task, y, pred):
    from sklearn.metrics import root_mean_squared_error, zero_one_loss

    if task == "r":
        return float(root_mean_squared_error(y, pred))
    return float(zero_one_loss(y, pred))


def _warm_up(seed, n_jobs):
    """Fit and predict tiny models once per solver, so the kernels are loaded (or compiled)."""
    X = sp.random(30, 5, density=0.5, format="csr", random_state=seed)
    y = np.arange(30) % 2
    t0 = time.perf_counter()
    for task in ("r", "c"):
        for solver in _SOLVERS:
            m = _estimator(task, solver, 2, seed, n_jobs).fit(X, y)
            m.predict(X)
            m.predict(X.toarray())
    return time.perf_counter() - t0


def cmd_demo(args):
    from fmlearn.reproduce import format_table

    quick, seed = args.quick, args.seed
    n_iter = 20 if quick else 100
    t_start = time.perf_counter()
    print("fmlearn demo: factorization machines on generated data "
          f"({'quick, ' if quick else ''}{n_iter} iterations, rank 4, seed {seed})")
    tasks = _tasks(quick, seed)
    for name, _, _, _, _, desc in tasks:
        print(f"  {name:8s} {desc}")
    warm = _warm_up(seed, args.n_jobs)
    print(f"compiled kernels in {warm:.2f} s (loaded from the numba cache when it is warm; "
          "not part of the fit times below)\n")
    rng = np.random.default_rng(seed + 1)
    rows = []
    for name, task, X, y, oracle, _ in tasks:
        tr, te = _split(X.shape[0], rng)
        if task == "r":
            baseline = _score(task, y[te], np.full(te.shape[0], y[tr].mean()))
        else:
            values, counts = np.unique(y[tr], return_counts=True)
            baseline = _score(task, y[te], np.full(te.shape[0], values[np.argmax(counts)]))
        best = _score(task, y[te], oracle[te])
        for solver in _SOLVERS:
            est = _estimator(task, solver, n_iter, seed, args.n_jobs)
            t0 = time.perf_counter()
            est.fit(X[tr], y[tr])
            fit_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            pred = est.predict(X[te])
            pred_s = time.perf_counter() - t0
            metric = "rmse" if task == "r" else "error"
            rows.append([name, type(est).__name__, solver, metric, _score(task, y[te], pred),
                         baseline, best, fit_s, pred_s])
    heads = ["data", "model", "solver", "metric", "test", "baseline", "planted", "fit s",
             "predict s"]
    print(format_table(rows, heads, floatfmt=".3f"))
    print("\nbaseline: mean target (regression) or majority class; planted: the generating "
          "model's own score on the noisy test targets.")
    print(f"total {time.perf_counter() - t_start:.1f} s")
    return 0
