"""TabularEncoder's ``standardize``: the classic FM's defaults on real tables with numeric
columns, encoded with ``standardize=False`` and ``standardize=True`` (accuracy; one system).

    python benchmarks/bench_tabular_standardize.py [--quick] [--libsvm-data DIR]
        [--movielens-dir DIR] [--sets diabetes,cancer,wine,abalone,movielens]

Tables (all offline): scikit-learn's bundled ``load_diabetes(scaled=False)`` (442 rows; 9
numeric columns and ``sex``, declared categorical), ``load_breast_cancer`` (569 rows, 30
numeric, binary), ``load_wine`` as class 0 against the rest (178 rows, 13 numeric); UCI
Abalone (``abalone.trn.bz2`` of ``--libsvm-data`` or ``$FMLEARN_LIBSVM``: sex declared
categorical, 7 numeric, 4,177 rows); MovieLens-100K as a raw table (``--movielens-dir``
holding ``ml-100k.inter`` / ``.user`` / ``.item``, default fmlearn's data folder):
user and item ids, gender and occupation categorical, age, release year and timestamp
numeric (``--quick``: 20,000 ratings).

Each table: ``make_pipeline(TabularEncoder(column_types=..., standardize=S),
FMRegressor(random_state=seed))`` (``FMClassifier`` for binary tables; defaults: MCMC, k = 8,
100 sweeps), 75/25 splits with seeds 0-4 (``--quick``: 0-2; MovieLens: seed 0), test RMSE
(regression) or log-loss and error rate (classification) against the training mean / prior.
Prints one Markdown row per (table, standardize): mean and min-max over the splits, and the
load average once.
"""

import argparse
import os
import time
import warnings

import numpy as np


def _frame(columns):
    import pandas as pd

    return pd.DataFrame(columns)


def load_tables(args):
    """name -> (task, DataFrame, y, column_types)."""
    from sklearn import datasets

    out = {}
    sets = args.sets.split(",")
    if "diabetes" in sets:
        d = datasets.load_diabetes(scaled=False)
        df = _frame({n: d.data[:, j] for j, n in enumerate(d.feature_names)})
        out["diabetes"] = ("reg", df, d.target, {"sex": "categorical"})
    if "cancer" in sets:
        d = datasets.load_breast_cancer()
        df = _frame({n: d.data[:, j] for j, n in enumerate(d.feature_names)})
        out["breast cancer"] = ("clf", df, d.target, {})
    if "wine" in sets:
        d = datasets.load_wine()
        df = _frame({n: d.data[:, j] for j, n in enumerate(d.feature_names)})
        out["wine (class 0)"] = ("clf", df, (d.target == 0).astype(int), {})
    if "abalone" in sets:
        folder = args.libsvm_data or os.environ.get("FMLEARN_LIBSVM")
        path = os.path.join(folder, "abalone.trn.bz2") if folder else None
        if path and os.path.exists(path):
            from sklearn.datasets import load_svmlight_file

            X, y = load_svmlight_file(path)
            X = X.toarray()
            cols = {"sex": X[:, 0].astype(int).astype(str)}
            cols.update({f"x{j}": X[:, j] for j in range(1, X.shape[1])})
            out["abalone"] = ("reg", _frame(cols), y, {"sex": "categorical"})
    if "movielens" in sets:
        folder = args.movielens_dir
        if folder is None:
            from fmlearn.datasets._movielens import default_data_home

            folder = default_data_home()
        if os.path.exists(os.path.join(folder, "ml-100k.inter")):
            import pandas as pd

            r = pd.read_csv(os.path.join(folder, "ml-100k.inter"), sep="\t")
            u = pd.read_csv(os.path.join(folder, "ml-100k.user"), sep="\t")
            i = pd.read_csv(os.path.join(folder, "ml-100k.item"), sep="\t")
            r.columns = [c.split(":")[0] for c in r.columns]
            u.columns = [c.split(":")[0] for c in u.columns]
            i.columns = [c.split(":")[0] for c in i.columns]
            i["release_year"] = pd.to_numeric(i["release_year"], errors="coerce")
            i["release_year"] = i["release_year"].fillna(i["release_year"].median())
            t = r.merge(u[["user_id", "age", "gender", "occupation"]], on="user_id").merge(
                i[["item_id", "release_year"]], on="item_id")
            if args.quick:
                t = t.sample(20000, random_state=0)
            df = t[["user_id", "item_id", "age", "gender", "occupation", "release_year",
                    "timestamp"]].reset_index(drop=True)
            out["movielens (raw table)"] = (
                "reg", df, t["rating"].to_numpy(dtype=float),
                {"user_id": "categorical", "item_id": "categorical"})
    return out


def run_one(task, df, y, types, standardize, seed):
    from sklearn.metrics import log_loss
    from sklearn.pipeline import make_pipeline

    from fmlearn import FMClassifier, FMRegressor
    from fmlearn.encoders import TabularEncoder

    perm = np.random.default_rng(seed).permutation(len(y))
    cut = int(0.75 * len(y))
    tr, te = perm[:cut], perm[cut:]
    est = (FMRegressor if task == "reg" else FMClassifier)(random_state=seed)
    pipe = make_pipeline(TabularEncoder(column_types=types, standardize=standardize), est)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(df.iloc[tr], y[tr])
    if task == "reg":
        err = float(np.sqrt(np.mean((pipe.predict(df.iloc[te]) - y[te]) ** 2)))
        base = float(np.sqrt(np.mean((y[tr].mean() - y[te]) ** 2)))
        return err, base, None
    p = pipe.predict_proba(df.iloc[te])[:, 1]
    prior = np.full(len(te), y[tr].mean())
    err = float(np.mean((p > 0.5) != y[te]))
    return log_loss(y[te], p, labels=[0, 1]), log_loss(y[te], prior, labels=[0, 1]), err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--libsvm-data", default=None)
    ap.add_argument("--movielens-dir", default=None)
    ap.add_argument("--sets", default="diabetes,cancer,wine,abalone,movielens")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} (1 min)")
    print("| table | rows | metric | baseline | standardize=False | standardize=True | "
          "error rate False / True | CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (task, df, y, types) in load_tables(args).items():
        seeds = [0] if name.startswith("movielens") else range(3 if args.quick else 5)
        res = {False: [], True: []}
        errs = {False: [], True: []}
        base = []
        c0 = time.process_time()
        for seed in seeds:
            for standardize in (False, True):
                m, b, e = run_one(task, df, y, types, standardize, seed)
                res[standardize].append(m)
                errs[standardize].append(e)
            base.append(b)

        def fmt(v):
            v = np.asarray(v, dtype=float)
            return f"{v.mean():.4g} ({v.min():.4g}-{v.max():.4g})"

        metric = "test RMSE" if task == "reg" else "test log-loss"
        err = "-" if task == "reg" else (f"{np.mean(errs[False]):.3f} / "
                                         f"{np.mean(errs[True]):.3f}")
        print(f"| {name} | {len(y)} | {metric} | {np.mean(base):.4g} | {fmt(res[False])} | "
              f"{fmt(res[True])} | {err} | {time.process_time() - c0:.0f} |", flush=True)


if __name__ == "__main__":
    main()
