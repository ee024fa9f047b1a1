"""The online learners' defaults on raw, unscaled real data: ``standardize="auto"`` (the
the default) against the previous defaults (``standardize=False``), against the previous defaults
on features standardised by hand (scikit-learn's ``StandardScaler`` fitted on the training
rows; sparse sets are left as given), and against a linear baseline (``Ridge`` /
``LogisticRegression`` on standardised features), with the trivial predictor (training mean,
majority class) for reference.

    python benchmarks/bench_online_defaults.py [--quick] [--reps 3] [--sets a,b,...]
        [--libsvm-data DIR]

Data (all offline): scikit-learn's bundled diabetes (``scaled=False``) and breast cancer;
statsmodels' ``fair`` (label: affairs > 0), ``anes96`` (label: vote) and ``randhie``
(target: mdvis) (``pip install statsmodels``); the LibSVM Abalone, Adult (sparse one-hot) and
IJCNN1 from ``--libsvm-data DIR`` or ``$FMLEARN_LIBSVM`` (the folder holding
``abalone.trn.bz2`` ...), skipped when absent. diabetes and fair are the sets of the bug
report; the others were not looked at while choosing the rule. Sets without a test part are
split 75/25 (seed 0). ``--quick``: at most 4,000 training and 4,000 test rows per set.

CCFM's estimators also run the default under the "auto" rules of fmlearn c363faf
("default, main": columns always divided, OCCFM's candidates on the whole sample;
bench_trace_bound.py's
``main_rules``), with the chosen ``trace_bound_`` of both.

Each (set, estimator) runs the variants alternated (A B C A B C ...) ``--reps`` times
(``random_state=0``: the error is the same every repetition; CPU and wall seconds are the
median and min-max). Error: test RMSE (regression) or error rate (classification). The load
average is printed first.
"""

import argparse
import os
import time
import warnings

import numpy as np
import scipy.sparse as sp

REGRESSORS = ["OnlineFMRegressor", "OnlineCFMRegressor", "CCFMRegressor"]
CLASSIFIERS = ["OnlineFMClassifier", "OnlineCFMClassifier", "CCFMClassifier"]


def _split(n, seed=0):
    perm = np.random.default_rng(seed).permutation(n)
    cut = int(0.75 * n)
    return perm[:cut], perm[cut:]


def _statsmodels(name, target, binarize=None):
    import statsmodels.api as sm

    data = getattr(sm.datasets, name).load_pandas().data
    y = data.pop(target).to_numpy(float)
    if binarize is not None:
        y = binarize(y).astype(int)
    return data.to_numpy(float), y


def load_sets(args):
    """name -> (task, Xtr, ytr, Xte, yte) of the sets found."""
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_svmlight_file

    makers = {
        "diabetes": lambda: ("reg",) + load_diabetes(return_X_y=True, scaled=False),
        "fair": lambda: ("clf",) + _statsmodels("fair", "affairs", lambda y: y > 0),
        "cancer": lambda: ("clf",) + load_breast_cancer(return_X_y=True),
        "anes96": lambda: ("clf",) + _statsmodels("anes96", "vote", lambda y: y > 0),
        "randhie": lambda: ("reg",) + _statsmodels("randhie", "mdvis"),
    }
    folder = args.libsvm_data or os.environ.get("FMLEARN_LIBSVM")
    sets = {}
    for name in args.sets.split(","):
        try:
            if name in makers:
                task, X, y = makers[name]()
                tr, te = _split(X.shape[0])
                sets[name] = (task, X[tr], y[tr], X[te], y[te])
            elif name in ("abalone", "adult", "ijcnn1"):
                if folder is None:
                    raise FileNotFoundError("no --libsvm-data / $FMLEARN_LIBSVM")
                X, y = load_svmlight_file(os.path.join(folder, f"{name}.trn.bz2"))
                if name == "abalone":
                    X = X.toarray()
                    tr, te = _split(X.shape[0])
                    sets[name] = ("reg", X[tr], y[tr], X[te], y[te])
                    continue
                Xt, yt = load_svmlight_file(os.path.join(folder, f"{name}.tst.bz2"),
                                            n_features=X.shape[1])
                if name == "ijcnn1":
                    X, Xt = X.toarray(), Xt.toarray()
                sets[name] = ("clf", X, (y > 0).astype(int), Xt, (yt > 0).astype(int))
            else:
                raise KeyError(f"unknown set {name}")
        except (ImportError, FileNotFoundError, KeyError) as exc:
            print(f"# {name}: skipped ({exc})")
    if args.quick:
        rng = np.random.default_rng(0)
        for name, (task, Xtr, ytr, Xte, yte) in sets.items():
            a = np.sort(rng.permutation(Xtr.shape[0])[:4000])
            b = np.sort(rng.permutation(Xte.shape[0])[:4000])
            sets[name] = (task, Xtr[a], ytr[a], Xte[b], yte[b])
    return sets


def by_hand(Xtr, Xte):
    """StandardScaler on dense sets; sparse sets as given."""
    from sklearn.preprocessing import StandardScaler

    if sp.issparse(Xtr):
        return Xtr, Xte
    sc = StandardScaler().fit(Xtr)
    return sc.transform(Xtr), sc.transform(Xte)


def error(task, pred, y):
    if task == "reg":
        return float(np.sqrt(np.mean((pred - y) ** 2)))
    return float(np.mean(pred != y))


def baselines(task, Xtr, ytr, Xte, yte):
    from sklearn.linear_model import LogisticRegression, Ridge

    Htr, Hte = by_hand(Xtr, Xte)
    if task == "reg":
        lin = Ridge(alpha=1e-3).fit(Htr, ytr)
        trivial = error(task, np.full(yte.shape[0], ytr.mean()), yte)
    else:
        lin = LogisticRegression(max_iter=2000).fit(Htr, ytr)
        trivial = error(task, np.full(yte.shape[0], np.bincount(ytr).argmax()), yte)
    return error(task, lin.predict(Hte), yte), trivial


def run(cls, params, Xtr, ytr, Xte, rules=None):
    import contextlib

    c0, w0 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings(), (rules or contextlib.nullcontext()):
        warnings.simplefilter("ignore")
        m = cls(random_state=0, **params).fit(Xtr, ytr)
        pred = m.predict(Xte)
    return (pred, time.process_time() - c0, time.perf_counter() - w0,
            vars(m).get("trace_bound_"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sets", default="diabetes,fair,cancer,anes96,randhie,abalone,adult,ijcnn1")
    ap.add_argument("--only", nargs="*", default=None, help="estimator names")
    ap.add_argument("--libsvm-data", default=None)
    args = ap.parse_args()

    import fmlearn

    print(f"# load average {os.getloadavg()}")
    sets = load_sets(args)
    # compile the kernels before timing
    rng = np.random.default_rng(0)
    Xw = rng.normal(size=(60, 4))
    for name in REGRESSORS + CLASSIFIERS:
        yw = Xw[:, 0] if name in REGRESSORS else (Xw[:, 0] > 0).astype(int)
        getattr(fmlearn, name)(random_state=0).fit(Xw, yw)
        getattr(fmlearn, name)(random_state=0, standardize=False).fit(sp.csr_matrix(Xw), yw)
    from bench_trace_bound import main_rules

    print("| set | task | estimator | before (standardize=False) | default, main | default | "
          "before, on StandardScaler | linear | trivial | trace_bound_ main / default | "
          "CPU s before / default, main / default / by hand (median, min-max) | "
          "wall s default |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for set_name, (task, Xtr, ytr, Xte, yte) in sets.items():
        lin, trivial = baselines(task, Xtr, ytr, Xte, yte)
        Htr, Hte = by_hand(Xtr, Xte)
        names = REGRESSORS if task == "reg" else CLASSIFIERS
        for name in names:
            if args.only and name not in args.only:
                continue
            cls = getattr(fmlearn, name)
            variants = [("old", {"standardize": False}, Xtr, Xte), ("new", {}, Xtr, Xte),
                        ("hand", {"standardize": False}, Htr, Hte)]
            if name.startswith("CCFM"):
                variants.insert(1, ("main", {}, Xtr, Xte))
            errs, cpu, wall = {}, {k: [] for k, *_ in variants}, {k: [] for k, *_ in variants}
            bound = {"main": "-", "new": "-"}
            for _ in range(args.reps):
                for key, params, A, B in variants:
                    try:
                        pred, c, w, tb = run(cls, params, A, ytr, B,
                                             main_rules() if key == "main" else None)
                        errs[key] = error(task, pred, yte)
                        if tb is not None:
                            bound[key] = f"{tb:.4g}"
                    except Exception as exc:  # a diverging default is a result too
                        errs[key], c, w = f"fails ({type(exc).__name__})", np.nan, np.nan
                    cpu[key].append(c)
                    wall[key].append(w)

            def fmt(v):
                return v if isinstance(v, str) else f"{v:.4f}"

            def sec(xs):
                return f"{np.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"

            main_err = fmt(errs["main"]) if "main" in errs else "(same)"
            main_cpu = sec(cpu["main"]) if "main" in errs else "-"
            print(f"| {set_name} | {task} | {name} | {fmt(errs['old'])} | {main_err} | "
                  f"{fmt(errs['new'])} | {fmt(errs['hand'])} | {lin:.4f} | {trivial:.4f} | "
                  f"{bound['main']} / {bound['new']} | {sec(cpu['old'])} / {main_cpu} / "
                  f"{sec(cpu['new'])} / {sec(cpu['hand'])} | {sec(wall['new'])} |", flush=True)
    print(f"# load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
