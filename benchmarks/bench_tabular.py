"""Raw ids versus TabularEncoder on MovieLens-100K (accuracy; single-system measurement).

    PYTHONPATH=src python benchmarks/bench_tabular.py [--data PATH] [--n-iter 100]

MovieLens-100K's user and item ids as a raw table (``--data``, else fmlearn's default folder,
see docs/datasets.md), the project's split (``movielens_split``, seed 0: 75,000 training
ratings), the classic FM with its defaults (MCMC, k = 8) on:

- ``raw ids``: the two id columns as two numbers (what a new user tries first): must warn
  ``IdColumnWarning``;
- ``TabularEncoder``: the ids declared categorical, one-hot;
- ``TabularEncoder + groups``: the same with ``groups=enc.groups_`` (a prior per column);
- ``loader one-hot``: ``load_movielens_100k``'s own one-hot X, the reference;
- ``mean``: predicting the training mean.

Prints the test RMSE, whether the warning fired, wall and CPU seconds of encode + fit, and
the load average. Run under ``flock /tmp/fmlearn-bench.lock`` so two benchmarks never overlap.
"""

import argparse
import os
import time
import warnings

import numpy as np


def _run(name, make_X, est_factory, y_tr, y_te):
    from fmlearn.exceptions import IdColumnWarning

    w0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        X_tr, X_te, est = make_X() + (est_factory(),)
        if est is None:
            pred = np.full(y_te.shape[0], y_tr.mean())
        else:
            pred = est.fit(X_tr, y_tr).predict(X_te)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    warned = any(issubclass(w.category, IdColumnWarning) for w in caught)
    rmse = float(np.sqrt(np.mean((pred - y_te) ** 2)))
    print(f"| {name} | {rmse:.4f} | {'yes' if warned else 'no'} | {wall:.1f} | {cpu:.1f} |",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="ml-100k folder or ratings file")
    ap.add_argument("--n-iter", type=int, default=100)
    args = ap.parse_args()

    import pandas as pd

    from fmlearn import FMRegressor
    from fmlearn.datasets import load_movielens_100k, movielens_split
    from fmlearn.encoders import TabularEncoder

    ml = load_movielens_100k(args.data)
    tr, te = movielens_split(ml.X.shape[0], 0)
    table = pd.DataFrame({"user": ml.user_ids, "item": ml.item_ids})
    y_tr, y_te = ml.y[tr], ml.y[te]
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; "
          f"FMRegressor(solver='mcmc', n_iter={args.n_iter}, random_state=0), defaults otherwise")
    print("| input | test RMSE | IdColumnWarning | wall s | CPU s |\n|---|---|---|---|---|")

    def fm(**kw):
        return lambda: FMRegressor(n_iter=args.n_iter, random_state=0, **kw)

    raw = table.to_numpy(dtype=np.float64)
    _run("raw ids (2 numeric columns)", lambda: (raw[tr], raw[te]), fm(), y_tr, y_te)
    types = {"user": "categorical", "item": "categorical"}
    enc = TabularEncoder(types).fit(table.iloc[tr])

    def encoded():
        e = TabularEncoder(types).fit(table.iloc[tr])
        return e.transform(table.iloc[tr]), e.transform(table.iloc[te])

    _run("TabularEncoder one-hot", encoded, fm(), y_tr, y_te)
    _run("TabularEncoder one-hot + groups", encoded, fm(groups=enc.groups_), y_tr, y_te)
    _run("loader one-hot (reference)", lambda: (ml.X[tr], ml.X[te]), fm(), y_tr, y_te)
    _run("training mean", lambda: (None, None), lambda: None, y_tr, y_te)


if __name__ == "__main__":
    main()
