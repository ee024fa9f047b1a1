"""Yamada et al. 2017, Table 2 (MovieLens-100K row) and Fig. 2: convex FM against classic FMs and
ridge.

Protocol (the project's): ratings in file order, one-hot users + items (d = 2625); for seeds
0, 1, 2: ``idx = np.random.default_rng(seed).permutation(100000)``, train = idx[:75000], test
= the rest; mean test RMSE. Predictions are clipped to the training rating range [1, 5].

The convex FM runs 100 Hazan iterations with the exact step and with 2/(t+2), at eta = 1000
and lambda_1 = 3, chosen on a validation tenth of seed 0's training set from eta in
{500, 1000, 1500, 2000} x lambda_1 in {1, 3, 10} (never on test ratings; validation RMSE
0.9123), and at the paper's eta = 2000 (lambda_1 = 3) for reference. Baselines: FM rank 20
with SGD, ALS (lambda_2 = 0.01 as in the paper) and MCMC (init stdev 0.1), 100 iterations
each, and ridge regression (the convex FM with eta = 0).
"""

import time

import numpy as np
from sklearn.metrics import root_mean_squared_error

from fmlearn import ConvexFMRegressor, FMRegressor
from fmlearn.datasets import load_movielens_100k, movielens_split
from fmlearn.reproduce import format_table, optional_pyplot, save_figure

ETA, REG_LINEAR = 1000.0, 3.0


def models(n_iter):
    """(name, estimator) pairs of Table 2's row."""
    cfm = dict(max_iter=n_iter, tol=0, reg_linear=REG_LINEAR, random_state=0)
    return [
        ("CFM exact step (trace_bound=1000)",
         ConvexFMRegressor(trace_bound=ETA, step="exact", **cfm)),
        ("CFM 2/(t+2) (trace_bound=1000)",
         ConvexFMRegressor(trace_bound=ETA, step="standard", **cfm)),
        ("CFM exact step (trace_bound=2000)",
         ConvexFMRegressor(trace_bound=2000.0, step="exact", **cfm)),
        ("FM-SGD (k=20)", FMRegressor(20, solver="sgd", n_iter=n_iter, learning_rate=0.01,
                                      reg_linear=0.01, reg_pairwise=0.01, random_state=0)),
        ("FM-ALS (k=20)", FMRegressor(20, solver="als", n_iter=n_iter, reg_pairwise=0.01,
                                      random_state=0)),
        ("FM-MCMC (k=20)", FMRegressor(20, solver="mcmc", n_iter=n_iter, init_stdev=0.1,
                                       random_state=0)),
        ("ridge", ConvexFMRegressor(trace_bound=0.0, max_iter=1, tol=0, reg_linear=REG_LINEAR)),
    ]


def run(out_dir, quick=False, path=None):
    data = load_movielens_100k(path)
    X, y = data.X, data.y
    seeds, n_iter = ((0,), 20) if quick else ((0, 1, 2), 100)
    results = {}
    seconds = {}
    curves = {"exact step": [], "2/(t+2)": []}
    for seed in seeds:
        tr, te = movielens_split(X.shape[0], seed)
        Xtr, ytr, Xte, yte = X[tr], y[tr], X[te], y[te]
        for name, est in models(n_iter):
            t0 = time.perf_counter()
            if name.startswith("CFM") and "eta=1000" in name:
                est.fit(Xtr, ytr, eval_set=(Xte, yte))
                pred = est.predict(Xte)
                key = "exact step" if "exact" in name else "2/(t+2)"
                final = root_mean_squared_error(yte, pred)
                curves[key].append(np.array(est.history_["val"][1:] + [final]))
            else:
                est.fit(Xtr, ytr)
                pred = est.predict(Xte)
            seconds.setdefault(name, []).append(time.perf_counter() - t0)
            results.setdefault(name, []).append(root_mean_squared_error(yte, pred))
    rows = [[name, float(np.mean(v))] + [float(x) for x in v] + [float(np.mean(seconds[name]))]
            for name, v in results.items()]
    headers = ["method", "mean RMSE"] + [f"seed {s}" for s in seeds] + ["fit s"]
    print(f"Yamada et al. 2017, Table 2, MovieLens-100K: 75/25 splits, seeds {list(seeds)}, "
          f"{n_iter} iterations (paper: CFM 0.915, FM-SGD 1.078, FM-ALS 1.242, "
          "FM-MCMC 0.901-0.905, ridge 0.936)")
    print(format_table(rows, headers))
    plt = optional_pyplot("cfm_movielens.png")
    if plt is None:
        return {"table": {r[0]: r[1] for r in rows}, "figure": None}
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, cs in curves.items():
        mean = np.mean(np.stack(cs), axis=0)
        ax.plot(np.arange(1, mean.shape[0] + 1), mean, label=f"CFM {name} (test)")
    ax.axhline(0.915, color="grey", ls="--", label="paper's CFM (0.915)")
    ax.set_xlabel("iteration t")
    ax.set_ylabel("test RMSE")
    ax.set_title("Yamada et al. 2017, Fig. 2(a): MovieLens-100K, eta = 1000")
    ax.legend()
    fig_path = save_figure(fig, out_dir, "cfm_movielens.png")
    print(f"figure: {fig_path}")
    return {"table": {r[0]: r[1] for r in rows}, "figure": fig_path}
