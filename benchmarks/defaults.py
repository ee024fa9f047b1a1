"""Does every estimator learn something with its default parameters? (issue 14, item 2)

For each bundled data set, every estimator of the matching task is fitted with its defaults
(only ``random_state=0`` set) and scored on held-out rows against the trivial baseline: the
training mean for regression (RMSE), the training majority class for classification (error
rate). The bar is a test error at most 0.9 x the baseline's. Each data set is run raw and
scaled (features standardised without centring, so sparse stays sparse), since defaults that
depend on the data's scale must be derived from the data.

Data sets: MovieLens-100K (user + item one-hot; 75/25 split, seed 0; the cache of
``fmlearn.datasets.load_movielens_100k`` or ``--movielens FILE``), Abalone (75/25 split of
``abalone.trn.bz2``), IJCNN1 and Adult (``*.trn.bz2`` / ``*.tst.bz2``), all from ``--libsvm-data
DIR`` or ``$FMLEARN_LIBSVM``. The sensing estimators (PhaseRetrieval, SymmetricRankOneSensing,
AsymmetricRankOneSensing) model y = x'Mx without bias or linear term, for matrix sensing; they are
listed apart and not held to the bar.

    python benchmarks/defaults.py [--libsvm-data DIR] [--only NAME ...] [--sets ml,abalone,...]
        [--set PARAM=VALUE ...]

``--set`` changes one parameter (a Python literal, e.g. ``calibration=None``) of every estimator
that has it, to measure a default against the value it replaced.

Prints one Markdown table row per (data set, scaling, estimator) as it goes.
"""

import argparse
import ast
import os
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

REGRESSORS = ["FMRegressor", "GFMRegressor", "IFMRegressor", "ConvexFMRegressor",
              "CCFMRegressor", "OnlineFMRegressor", "OnlineCFMRegressor"]
CLASSIFIERS = ["FMClassifier", "ConvexFMClassifier", "CCFMClassifier", "OnlineFMClassifier",
               "OnlineCFMClassifier"]
SENSING = ["PhaseRetrieval", "SymmetricRankOneSensing"]


def _split(n, seed=0, frac=0.75):
    perm = np.random.default_rng(seed).permutation(n)
    cut = int(frac * n)
    return perm[:cut], perm[cut:]


def load_sets(args):
    """name -> (task, X_train, y_train, X_test, y_test), for the sets that are found."""
    from fmlearn.datasets import load_movielens_100k, load_svmlight, movielens_split

    sets = {}
    wanted = set(args.sets.split(","))
    if "ml" in wanted:
        try:
            ml = load_movielens_100k(args.movielens)
            X, y = ml.X, ml.y
            tr, te = movielens_split(X.shape[0], 0)
            sets["movielens"] = ("reg", X[tr], y[tr], X[te], y[te])
        except (OSError, ValueError) as exc:
            print(f"movielens skipped: {exc}", file=sys.stderr)
    root = args.libsvm_data or os.environ.get("FMLEARN_LIBSVM")
    if root is None:
        print("libsvm sets skipped: --libsvm-data or $FMLEARN_LIBSVM", file=sys.stderr)
        return sets
    if "abalone" in wanted:
        X, y = load_svmlight(os.path.join(root, "abalone.trn.bz2"))
        tr, te = _split(X.shape[0])
        sets["abalone"] = ("reg", X[tr], y[tr], X[te], y[te])
    for name in ("ijcnn1", "adult"):
        if name in wanted:
            Xtr, ytr = load_svmlight(os.path.join(root, f"{name}.trn.bz2"))
            Xte, yte = load_svmlight(os.path.join(root, f"{name}.tst.bz2"),
                                     n_features=Xtr.shape[1])
            sets[name] = ("clf", Xtr, ytr, Xte, yte)
    return sets


def scaled(Xtr, Xte):
    """Columns divided by their training standard deviation (no centring: sparse stays sparse)."""
    from sklearn.preprocessing import StandardScaler

    sc = StandardScaler(with_mean=False).fit(Xtr)
    return sc.transform(Xtr), sc.transform(Xte)


def baseline(task, ytr, yte):
    if task == "reg":
        return float(np.sqrt(np.mean((yte - ytr.mean()) ** 2)))
    values, counts = np.unique(ytr, return_counts=True)
    return float(np.mean(yte != values[np.argmax(counts)]))


def score(task, yte, pred):
    pred = np.asarray(pred, dtype=np.float64)
    if task == "reg":
        return float(np.sqrt(np.mean((yte - pred) ** 2)))
    return float(np.mean(yte != pred))


def run_one(name, task, Xtr, ytr, Xte, yte, overrides=None):
    import fmlearn

    cls = getattr(fmlearn, name)
    est = cls()
    params = {"random_state": 0, **(overrides or {})}
    est.set_params(**{k: v for k, v in params.items() if k in est.get_params()})
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.fit(Xtr, ytr)
            err = score(task, yte, est.predict(Xte))
        note = "; ".join(sorted({type(w.message).__name__ for w in caught
                                 if not issubclass(w.category, DeprecationWarning)}))
    except Exception as exc:  # noqa: BLE001 - reported in the table
        err, note = float("nan"), f"{type(exc).__name__}: {str(exc)[:80]}"
    return err, time.process_time() - c0, time.perf_counter() - t0, note


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--libsvm-data")
    ap.add_argument("--movielens", help="ml-100k ratings file (default: the fmlearn cache)")
    ap.add_argument("--sets", default="ml,abalone,ijcnn1,adult")
    ap.add_argument("--only", nargs="*", help="estimator names")
    ap.add_argument("--no-scaled", action="store_true")
    ap.add_argument("--set", nargs="*", default=[], metavar="PARAM=VALUE",
                    help="a parameter of every estimator that has it (a Python literal)")
    args = ap.parse_args(argv)
    overrides = {k: ast.literal_eval(v) for k, v in (a.split("=", 1) for a in args.set)}
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("| data | X | estimator | test error | baseline | ratio | bar 0.9 | CPU s | wall s "
          "| warnings |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    failures = 0
    for dname, (task, Xtr, ytr, Xte, yte) in load_sets(args).items():
        base = baseline(task, ytr, yte)
        names = REGRESSORS + SENSING if task == "reg" else CLASSIFIERS
        variants = [("raw", Xtr, Xte)] + ([] if args.no_scaled else
                                          [("scaled", *scaled(Xtr, Xte))])
        for vname, A, B in variants:
            for name in names:
                if args.only and name not in args.only:
                    continue
                err, cpu, wall, note = run_one(name, task, sp.csr_matrix(A), ytr,
                                               sp.csr_matrix(B), yte, overrides)
                ratio = err / base
                ok = name in SENSING or ratio <= 0.9
                failures += not ok
                mark = "n/a" if name in SENSING else ("met" if ok else "NOT met")
                print(f"| {dname} | {vname} | {name} | {err:.4f} | {base:.4f} | {ratio:.3f} "
                      f"| {mark} | {cpu:.1f} | {wall:.1f} | {note} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}; {failures} below the bar")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
