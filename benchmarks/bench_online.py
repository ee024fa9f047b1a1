"""Throughput of the online learners (rounds per second), next to River and Vowpal Wabbit.

Streams: MovieLens-100K one-hot user + item rows (d = 2625, regression) and IJCNN1 train + test
(141,691 rows, d = 22, classification), each in one fixed random order (seed 0). Every fmlearn
learner runs predict-then-learn over the stream in one compiled call per batch
(``evaluate_prequential``); the time excludes compilation (a warm-up on a throw-away model) and
covers validation, the kernel and the metric bookkeeping. Peers run on the same stream in the
same run: River's ``facto`` FM (CPU time of its predict_one / learn_one loop) and Vowpal Wabbit
``--lrq`` (its own driver on a text file written beforehand, CPU time of the run), from the
Python of a separate environment (``--peers-python`` or ``$FMLEARN_PEERS_PYTHON``).

Data: MovieLens-100K through :func:`fmlearn.datasets.load_movielens_100k` (``$ML100K``: the
folder or ``ml-100k.inter`` file, else the fmlearn data cache); IJCNN1 from
``$FMLEARN_LIBSVM`` (``ijcnn1.trn.bz2``, ``ijcnn1.tst.bz2``).

``--long`` adds the flat-cost check of issue 5: OCCFM on 10^6 one-hot rounds (d = 10,000),
time and model-state memory per block of 100,000 rounds.

Run under the benchmark lock, e.g.::

    flock /tmp/fmlearn-bench.lock env PYTHONPATH=src python benchmarks/bench_online.py --peers
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp

from fmlearn import (
    CCFMClassifier,
    CCFMRegressor,
    FMClassifier,
    FMRegressor,
    OnlineCFMClassifier,
    OnlineCFMRegressor,
    OnlineFMClassifier,
    OnlineFMRegressor,
    evaluate_prequential,
)

HERE = os.path.dirname(os.path.abspath(__file__))


def load_stream(name):
    if name == "ml100k":
        from fmlearn.datasets import load_movielens_100k

        b = load_movielens_100k(os.environ.get("ML100K"))
        X, y, task = b.X.tocsr(), b.y, "regression"
    elif name == "ijcnn1":
        from fmlearn.datasets import load_svmlight

        root = os.environ["FMLEARN_LIBSVM"]
        Xa, ya = load_svmlight(os.path.join(root, "ijcnn1.trn.bz2"), zero_based=False)
        Xb, yb = load_svmlight(os.path.join(root, "ijcnn1.tst.bz2"), n_features=Xa.shape[1],
                               zero_based=False)
        X, y, task = sp.vstack([Xa, Xb]).tocsr(), np.concatenate([ya, yb]), "classification"
        y = np.where(y > 0, 1.0, -1.0)
    else:
        raise ValueError(name)
    perm = np.random.default_rng(0).permutation(X.shape[0])
    return X[perm], y[perm], task


def learners(task, d):
    """(label, factory, max rows) of every fmlearn learner for a task."""
    reg = task == "regression"
    ccfm = CCFMRegressor if reg else CCFMClassifier
    fm = OnlineFMRegressor if reg else OnlineFMClassifier
    cfm = OnlineCFMRegressor if reg else OnlineCFMClassifier
    sgd = FMRegressor if reg else FMClassifier
    delta = 30.0 if reg else 300.0
    slow = None if d < 200 else 5000  # projections on d = 2625 cost milliseconds per round
    return [
        ("OCCFM (ccfm ocg)", lambda: ccfm("ocg", trace_bound=delta, gamma_power=1.0), None),
        ("OCCFM, no refinement",
         lambda: ccfm("ocg", trace_bound=delta, gamma_power=1.0, eig_max_iter=0), None),
        ("CCFM-OGD", lambda: ccfm("ogd", trace_bound=delta), slow),
        ("CCFM-PA", lambda: ccfm("pa", trace_bound=delta), slow),
        ("CCFM-FTRL", lambda: ccfm("ftrl", trace_bound=delta), slow),
        ("FM-FTRL (k=8)", lambda: fm("ftrl", n_factors=8, random_state=0), None),
        ("FM-OGD (k=8)", lambda: fm("ogd", n_factors=8, random_state=0), None),
        ("FM-PA (k=8)", lambda: fm("pa", n_factors=8, random_state=0), None),
        ("FM-SGD (FMRegressor sgd, k=8)" if reg else "FM-SGD (FMClassifier sgd, k=8)",
         lambda: sgd(8, solver="sgd", random_state=0), None),
        ("CFM-FTRL", lambda: cfm("ftrl", trace_bound=delta), slow),
    ]


def run_fmlearn(label, factory, X, y, task, max_rows, batch):
    metrics = ["rmse"] if task == "regression" else ["error_rate", "auc"]
    n = X.shape[0] if max_rows is None else min(max_rows, X.shape[0])
    warm = factory()  # compile outside the timing
    if not hasattr(warm, "_prequential"):
        # FMRegressor / FMClassifier(solver="sgd"): partial_fit is one in-order SGD pass; time
        # it over the stream in batches (no prequential predictions from this path)
        warm.partial_fit(X[:200], y[:200])
        est = factory()
        t0 = time.perf_counter()
        for start in range(0, n, batch):
            est.partial_fit(X[start:start + batch], y[start:start + batch])
        sec = time.perf_counter() - t0
        return {"learner": label, "rows": n, "seconds": sec, "rows_per_s": n / sec}
    evaluate_prequential(warm, (X[:200], y[:200]), metrics=metrics, batch_size=200)
    res = evaluate_prequential(factory(), (X[:n], y[:n]), metrics=metrics, batch_size=batch)
    out = {"learner": label, "rows": n, "seconds": float(res.elapsed[-1]),
           "rows_per_s": float(res.rows_per_second)}
    out.update({f"prequential_{k}": float(v) for k, v in res.metrics.items()})
    return out


def run_peers(X, y, task, python, k=8, max_rows=None):
    with tempfile.TemporaryDirectory() as tmp:
        npz = os.path.join(tmp, "stream.npz")
        X = X.tocsr()
        np.savez(npz, indptr=X.indptr, indices=X.indices, data=X.data, y=y)
        vw_file = os.path.join(tmp, "stream.vw")
        ns = "u" if task == "regression" else "f"
        with open(vw_file, "w") as fh:
            for i in range(X.shape[0]):
                lo, hi = X.indptr[i], X.indptr[i + 1]
                if task == "regression":
                    # user and item columns in their own namespaces, for --lrq ui
                    feats = X.indices[lo:hi]
                    fh.write(f"{y[i]} |u u{feats[0]} |i i{feats[1]}\n")
                else:
                    body = " ".join(f"{j}:{v:.6g}" for j, v in zip(X.indices[lo:hi],
                                                                   X.data[lo:hi], strict=True))
                    fh.write(f"{int(y[i])} |{ns} {body}\n")
        cmd = [python, os.path.join(HERE, "_peers_online.py"), npz, vw_file, task, str(k)]
        if max_rows is not None:
            cmd.append(str(max_rows))
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            return [{"peer": "failed", "error": proc.stderr.strip()[-500:]}]
        return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def long_run(n=1_000_000, d=10_000, block=100_000):
    """OCCFM on a planted one-hot stream: seconds and state bytes per block of rounds."""
    from fmlearn.datasets import make_ccfm_stream

    X, y, _ = make_ccfm_stream(n, d, rank=4, trace_norm=20.0, fields=[d // 2, d - d // 2],
                               noise=0.3, random_state=0)
    m = CCFMRegressor(trace_bound=20.0, gamma_power=1.0, shuffle=False)
    m.partial_fit(X[:10], y[:10])
    rows = []
    for start in range(10, n, block):
        sl = slice(start, min(start + block, n))
        t0 = time.perf_counter()
        m.partial_fit(X[sl], y[sl])
        sec = time.perf_counter() - t0
        state = sum(v.nbytes for k, v in vars(m).items()
                    if k.startswith("state_") and isinstance(v, np.ndarray))
        rows.append({"rounds": int(sl.stop), "seconds": sec,
                     "rounds_per_s": (sl.stop - sl.start) / sec, "state_mb": state / 2**20,
                     "davidson_steps": int(m.info_["davidson_steps"])})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="ml100k,ijcnn1")
    p.add_argument("--peers", action="store_true", help="also run River and Vowpal Wabbit")
    p.add_argument("--peers-python", default=os.environ.get("FMLEARN_PEERS_PYTHON"))
    p.add_argument("--only", default=None, help="comma-separated learner labels (prefix match)")
    p.add_argument("--batch", type=int, default=10000)
    p.add_argument("--long", action="store_true", help="the 10^6-round flat-cost run")
    p.add_argument("--json", default=None, help="write all results to this file")
    args = p.parse_args(argv)
    results = {"load_average": os.getloadavg()}
    for name in args.datasets.split(","):
        if not name:
            continue
        X, y, task = load_stream(name)
        print(f"== {name}: {X.shape[0]} rows, {X.shape[1]} features ({task})", flush=True)
        rows = []
        for label, factory, max_rows in learners(task, X.shape[1]):
            if args.only and not any(label.startswith(o) for o in args.only.split(",")):
                continue
            r = run_fmlearn(label, factory, X, y, task, max_rows, args.batch)
            rows.append(r)
            print(json.dumps(r), flush=True)
        if args.peers:
            for r in run_peers(X, y, task, args.peers_python):
                rows.append(r)
                print(json.dumps(r), flush=True)
        results[name] = rows
    if args.long:
        results["long"] = long_run()
    results["load_average_end"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
