"""Zhang et al. 2018, Tables 3-4 and Fig. 1-2: OCCFM against FM-FTRL, CFM-FTRL, CCFM-OGD, CCFM-PA
and CCFM-FTRL on MovieLens-100K (RMSE), IJCNN1 and Adult (error rate, AUC).

Protocol (Zhang et al. 2018, §4.1, with fewer permutations, stated in the output): five folds of a
random permutation of the data (IJCNN1: train + test files, the paper's 141,691 rows; Adult: train +
test files); for each fold the training rows, randomly permuted, are fed one by one (each row
predicted, then learned) and the model is then scored on the held-out fold. Both figures are
reported: the prequential metric of the training stream (the online performance) and the test
metric of the held-out fold. Regression predictions are clipped to the range of the ratings
seen so far (prequential) or of the training ratings (test).

Settings: every algorithm gets its best setting on a *tuning stream* (the first 20% of a
separate random permutation, prequential metric) from a small grid of its trace bound / step
sizes, chosen before the reported runs; the chosen values are printed. The projection
learners on wide data (CCFM-OGD, CCFM-PA, CCFM-FTRL, CFM-FTRL on MovieLens-100K and Adult, an
eigendecomposition per round) run on fold 1 only, learning from the first ``SLOW_ROWS`` rows
of its training stream and tuned on ``SLOW_TUNE`` rows (the table's "train rows"). Fig. 1-2: the
prequential loss of the CCFM learners against learning time on fold 1 of each data set.

Data: MovieLens-100K, IJCNN1 and Adult through :func:`fmlearn.datasets.fetch` (found in
``$FMLEARN_DATA`` / ``$FMLEARN_LIBSVM`` / ``~/.cache/fmlearn``, else downloaded and
checksummed; see docs/data.md). Results are cached per run in
``out_dir/occfm_results.json``, so an interrupted run resumes.
"""

import json
import os
import time

import numpy as np
import scipy.sparse as sp

from fmlearn import evaluate_prequential
from fmlearn._renamed import renamed_kwargs
from fmlearn.online import ESTIMATORS
from fmlearn.reproduce import format_table, optional_pyplot, save_figure

ALGORITHMS = ("FM-FTRL", "CFM-FTRL", "CCFM-OGD", "CCFM-PA", "CCFM-FTRL", "OCCFM")

# Zhang et al. 2018, Table 3 (RMSE) and Table 4 (error rate, AUC)
PAPER = {
    "ml100k": {"rmse": dict(zip(ALGORITHMS, (1.2781, 1.1036, 1.2721, 1.2164, 1.0873, 1.0359),
                                strict=True))},
    "ijcnn1": {
        "error_rate": dict(zip(ALGORITHMS, (0.0663, 0.0544, 0.0911, 0.0711, 0.0520, 0.0243),
                               strict=True)),
        "auc": dict(zip(ALGORITHMS, (0.9647, 0.9736, 0.9192, 0.9312, 0.9757, 0.9859),
                        strict=True)),
    },
    "adult": {},
}

# Trace bounds tried per data set (Zhang et al. 2018: 10 on MovieLens-100K, 300 on
# IJCNN1); FM ranks of Zhang et al. 2018.
DELTAS = {"ml100k": (10.0, 30.0, 100.0), "ijcnn1": (100.0, 300.0, 1000.0),
          "adult": (10.0, 30.0, 100.0)}
RANKS = {"ml100k": 10, "ijcnn1": 20, "adult": 20}
# the projection learners on wide data (an eigendecomposition per round, ~200-300 rounds/s on
# MovieLens-100K): rows of their training stream and of their tuning stream
SLOW_ROWS = 20000
SLOW_TUNE = 2000
# --quick: rows kept per data set (a seeded subsample), and the projection learners' share
QUICK_ROWS = {"ml100k": 10000, "ijcnn1": 20000, "adult": 6000}
QUICK_SLOW_ROWS = 1000


@renamed_kwargs(data_dir="data_home")
def load(name, data_home=None):
    """(X, y, task) of a data set (training and test files stacked); classification labels in
    {-1, +1}. Found, else downloaded, by :func:`fmlearn.datasets.fetch` (``data_home``)."""
    from fmlearn.datasets import fetch

    if name == "ml100k":
        b = fetch("movielens-100k", data_home)
        return b.X.tocsr(), b.y.astype(np.float64), "regression"
    b = fetch(name, data_home)
    X = sp.vstack([b.X, b.X_test]).tocsr()
    return X, np.where(np.concatenate([b.y, b.y_test]) > 0, 1.0, -1.0), "classification"


def grid(alg, name):
    """Candidate settings of an algorithm on a data set."""
    deltas = DELTAS[name]
    if alg == "OCCFM":
        # eta (the weight of the accumulated gradient) matters on IJCNN1 (1 is too small there)
        return [dict(trace_bound=d, gamma_power=g, learning_rate=e) for d in deltas
                for g in (0.5, 1.0) for e in (1.0, 3.0, 10.0)]
    if alg == "CCFM-OGD":
        return [dict(trace_bound=d, learning_rate=e) for d in deltas for e in (0.1, 1.0)]
    if alg == "CCFM-FTRL":
        return [dict(trace_bound=d, learning_rate=e) for d in deltas for e in (0.1, 1.0, 10.0)]
    if alg == "CFM-FTRL":
        return [dict(trace_bound=d, learning_rate_pairwise=e) for d in deltas
                for e in (0.1, 1.0, 10.0)]
    if alg == "CCFM-PA":
        return [dict(trace_bound=d, pa_c=c) for d in deltas for c in (0.1, 1.0)]
    return [dict(learning_rate=a, learning_rate_pairwise=av) for a in (0.05, 0.2)
            for av in (0.02, 0.1)]


def make(alg, task, name, params):
    clf = task != "regression"
    if alg == "FM-FTRL":
        return ESTIMATORS["fm"][clf]("ftrl", n_factors=RANKS[name], random_state=0, **params)
    if alg == "CFM-FTRL":
        cls = ESTIMATORS["cfm"][clf]
        # on wide data the PSD projection uses a partial eigendecomposition: 3 refinement
        # products per round to a 1e-4 residual keep it near 100 rounds/s on MovieLens
        return cls("ftrl", eig_max_iter=3, eig_tol=1e-4, **params)
    cls = ESTIMATORS["ccfm"][clf]
    learner = {"CCFM-OGD": "ogd", "CCFM-PA": "pa", "CCFM-FTRL": "ftrl", "OCCFM": "ocg"}[alg]
    # Zhang et al.'s (2018) models decide by the score itself: no Platt link (CCFMClassifier's
    # default)
    if clf:
        params = {"calibration": None, **params}
    return cls(learner, **params)


def _metrics(task):
    return ["rmse"] if task == "regression" else ["error_rate", "auc"]


def _key_metric(task):
    return "rmse" if task == "regression" else "error_rate"


def _slow(alg, X):
    """Projection learners on wide data take milliseconds per round."""
    return alg in ("CCFM-OGD", "CCFM-PA", "CCFM-FTRL", "CFM-FTRL") and X.shape[1] > 64


def tune(alg, name, X, y, task, n_tune):
    """Best setting by the prequential key metric on the tuning stream."""
    best, best_val, tried = None, np.inf, []
    for params in grid(alg, name):
        est = make(alg, task, name, params)
        res = evaluate_prequential(est, (X[:n_tune], y[:n_tune]), metrics=_metrics(task),
                                   batch_size=max(1000, n_tune // 5))
        val = res.metrics[_key_metric(task)]
        tried.append((params, val))
        if val < best_val:
            best, best_val = params, val
    return best, best_val, tried


def one_run(alg, name, params, X, y, task, train, test, batch):
    """Stream the training rows (predict, then learn), then score the held-out rows."""
    from sklearn.metrics import roc_auc_score, root_mean_squared_error, zero_one_loss

    est = make(alg, task, name, params)
    res = evaluate_prequential(est, (X[train], y[train]), metrics=_metrics(task),
                               batch_size=batch)
    out = {f"preq_{k}": float(v) for k, v in res.metrics.items()}
    out["seconds"] = float(res.elapsed[-1])
    out["curve_rows"] = res.n_rows.tolist()
    out["curve_seconds"] = res.elapsed.tolist()
    out["curve"] = res.curves[_key_metric(task)].tolist()
    Xte, yte = X[test], y[test]
    if task == "regression":
        out["test_rmse"] = float(root_mean_squared_error(yte, est.predict(Xte)))
    else:
        score = est.decision_function(Xte)
        out["test_error_rate"] = float(zero_one_loss(yte, np.where(score > 0, 1.0, -1.0)))
        out["test_auc"] = float(roc_auc_score(yte, score))
    info = getattr(est, "info_", {}) or {}
    out["dropped_mass"] = float(info.get("dropped_mass", 0.0))
    return out


def _load_cache(path, config):
    if os.path.exists(path):
        try:
            with open(path) as fh:
                cache = json.load(fh)
            if cache.get("config") == config:
                return cache
        except (OSError, ValueError):
            pass
    return {"config": config, "tuning": {}, "runs": {}}


def _save_cache(path, cache):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(cache, fh)
    os.replace(tmp, path)


@renamed_kwargs(data_dir="data_home")
def run(out_dir, quick=False, data_home=None, datasets=("ml100k", "ijcnn1", "adult")):
    """Run the experiment; prints the tables, writes PNGs and returns the results."""
    n_folds = 1 if quick else 5
    # projection learners on wide data (MovieLens: d + 1 = 2626) cost milliseconds per round:
    # they run on the first fold only, learning from the first SLOW_ROWS rows of its training
    # stream (stated in the tables)
    n_folds_slow = 1
    # quick: a subsample of each stream (QUICK_ROWS), one 80/20 split, no tuning (the paper's
    # bounds are used), the projection learners on QUICK_SLOW_ROWS rows: a smoke run of the
    # protocol in about a minute, not the paper's figures
    slow_rows = QUICK_SLOW_ROWS if quick else SLOW_ROWS
    config = {"quick": bool(quick), "folds": n_folds, "folds_slow": n_folds_slow,
              "permutations_per_fold": 1, "slow_rows": slow_rows, "slow_tune": SLOW_TUNE,
              "datasets": list(datasets), "version": 3}
    os.makedirs(out_dir, exist_ok=True)
    cache_path = os.path.join(out_dir, "occfm_results.json")
    cache = _load_cache(cache_path, config)
    summary = {}
    for name in datasets:
        X, y, task = load(name, data_home)
        if quick:
            keep = np.random.default_rng(7).permutation(X.shape[0])[:QUICK_ROWS[name]]
            X, y = X[keep], y[keep]
        n = X.shape[0]
        print(f"\n== {name}: {n} rows, {X.shape[1]} features, {task}", flush=True)
        tune_perm = np.random.default_rng(1).permutation(n)
        Xt, yt = X[tune_perm], y[tune_perm]
        folds = np.array_split(np.random.default_rng(2).permutation(n), 5)
        batch = 2000
        for alg in ALGORITHMS:
            tkey = f"{name}/{alg}"
            if tkey not in cache["tuning"]:
                if quick:
                    params = _quick_params(alg, name)
                    cache["tuning"][tkey] = {"params": params, "value": None, "tried": []}
                else:
                    n_tune = n // 5 if not _slow(alg, X) else min(n // 5, SLOW_TUNE)
                    t0 = time.perf_counter()
                    params, val, tried = tune(alg, name, Xt, yt, task, n_tune)
                    cache["tuning"][tkey] = {"params": params, "value": val, "n_tune": n_tune,
                                             "tried": tried,
                                             "seconds": time.perf_counter() - t0}
                    print(f"  tuned {alg}: {params} (prequential {_key_metric(task)} "
                          f"{val:.4f} on {n_tune} rows)", flush=True)
                _save_cache(cache_path, cache)
            params = cache["tuning"][tkey]["params"]
            alg_folds = n_folds_slow if _slow(alg, X) else n_folds
            for f in range(alg_folds):
                rkey = f"{name}/{alg}/{f}"
                if rkey in cache["runs"]:
                    continue
                test = folds[f]
                train = np.concatenate([folds[g] for g in range(5) if g != f])
                train = np.random.default_rng(100 + f).permutation(train)
                if _slow(alg, X):
                    train = train[:slow_rows]
                print(f"  {alg} fold {f + 1}/{alg_folds}: learning {train.shape[0]} rows, "
                      f"testing on {test.shape[0]} ...", flush=True)
                r = one_run(alg, name, params, X, y, task, train, test, batch)
                cache["runs"][rkey] = r
                _save_cache(cache_path, cache)
                print(f"  {alg} fold {f + 1}: " + ", ".join(
                    f"{k} {v:.4f}" for k, v in r.items()
                    if k.startswith(("preq_", "test_"))) + f", {r['seconds']:.1f} s",
                    flush=True)
        summary[name] = _table(name, task, cache, n_folds)
        _figure(name, task, cache, out_dir)
    return summary


def _quick_params(alg, name):
    d = {"ml100k": 30.0, "ijcnn1": 300.0, "adult": 30.0}[name]
    if alg == "OCCFM":
        return {"trace_bound": d, "gamma_power": 1.0}
    if alg == "CCFM-PA":
        return {"trace_bound": d, "pa_c": 0.1}
    if alg == "FM-FTRL":
        return {"learning_rate": 0.05, "learning_rate_pairwise": 0.02}
    if alg == "CFM-FTRL":
        return {"trace_bound": d, "learning_rate_pairwise": 0.1}
    return {"trace_bound": d, "learning_rate": 0.1}


def _table(name, task, cache, n_folds):
    metrics = ["rmse"] if task == "regression" else ["error_rate", "auc"]
    rows = []
    out = {}
    for alg in ALGORITHMS:
        runs = [cache["runs"].get(f"{name}/{alg}/{f}") for f in range(n_folds)]
        runs = [r for r in runs if r is not None]
        if not runs:
            continue
        row = [alg]
        out[alg] = {}
        for m in metrics:
            pre = np.array([r[f"preq_{m}"] for r in runs])
            te = np.array([r[f"test_{m}"] for r in runs])
            paper = PAPER[name].get(m, {}).get(alg)
            row += [float(pre.mean()), float(te.mean()), float(te.std()),
                    "" if paper is None else float(paper)]
            out[alg][m] = {"prequential": float(pre.mean()), "test": float(te.mean()),
                           "test_sd": float(te.std()), "paper": paper}
        secs = np.array([r["seconds"] for r in runs])
        n_rows = float(np.mean([r["curve_rows"][-1] for r in runs]))
        row += [len(runs), int(n_rows), float(secs.mean()), n_rows / float(secs.mean()),
                json.dumps(cache["tuning"][f"{name}/{alg}"]["params"])]
        out[alg]["seconds"] = float(secs.mean())
        rows.append(row)
    headers = ["algorithm"]
    for m in metrics:
        headers += [f"preq {m}", f"test {m}", "sd", "paper"]
    headers += ["folds", "train rows", "learn s", "rows/s", "setting"]
    tbl = {"ml100k": "Table 3", "ijcnn1": "Table 4", "adult": "(not in the paper)"}[name]
    print(f"\nZhang et al. 2018, {tbl}, {name}: up to {n_folds} fold(s) x 1 permutation "
          f"(paper: 5 folds x 20 permutations); prequential = online metric of the training "
          f"stream, test = held-out fold; sd over folds")
    print(format_table(rows, headers))
    return out


def _figure(name, task, cache, out_dir):
    """Fig. 1-2: prequential loss against learning time, CCFM learners, fold 1."""
    plt = optional_pyplot(f"occfm_{name}_time.png")
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    key = _key_metric(task)
    for alg in ("CCFM-OGD", "CCFM-PA", "CCFM-FTRL", "OCCFM"):
        r = cache["runs"].get(f"{name}/{alg}/0")
        if r is None:
            continue
        ax.plot(r["curve_seconds"], r["curve"], marker=".", label=alg)
    ax.set_xscale("log")
    ax.set_xlabel("learning time (s)")
    ax.set_ylabel(f"prequential {key}")
    ax.set_title(f"{name}: loss against time (Zhang et al. 2018, Fig. 1-2)")
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, out_dir, f"occfm_{name}_time.png")
