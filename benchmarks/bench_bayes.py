"""Ordered probit and variational Bayes against myFM on MovieLens-100K, side by side.

Three tasks on the same one-hot user + item features (k = 8), 75,000 / 25,000 random splits
(``fmlearn.datasets.movielens_split``, seeds 0-2):

- ``ordinal``: ordered probit by MCMC, ratings as 5 ordered levels; metric: test RMSE of the
  posterior expected rating. fmlearn ``FMOrdinalRegressor`` against myFM's
  ``MyFMOrderedProbit`` (``predict_proba @ [1..5]``), both ``--sweeps`` sweeps (default 200).
- ``vb_reg``: variational Bayes regression; metric: test RMSE. ``FMRegressor(solver="vb")``
  against myFM's ``VariationalFMRegressor``, both ``--vb-iter`` iterations (default 100).
- ``vb_clf``: variational Bayes probit classification of "rating >= 4"; metric: test
  log-loss. ``FMClassifier(solver="vb")`` against ``VariationalFMClassifier``.
- ``multiclass``: the five ratings as five classes (no peer has a multiclass FM): fmlearn's
  ``FMClassifier`` (one-vs-rest inside, MCMC, ``--mc-sweeps`` sweeps, default 100) against
  scikit-learn's ``OneVsRestClassifier(FMClassifier(...))``; metric: test log-loss of the
  5-class probabilities, and the largest difference of the two systems' probabilities.

Every fit runs in a fresh process on one thread (``NUMBA_NUM_THREADS`` etc. = 1, fmlearn
``n_jobs=1``); the systems alternate (A B A B ...) for ``--reps`` repetitions of each seed.
Recorded per run, from outside the child: CPU seconds (user + system, ``os.wait4``) and wall
seconds of the whole process, the 1-minute load average before it; from inside: the CPU
seconds of ``fit`` alone. Before the timed runs one untimed fmlearn run per task fills numba's
cache, and each fmlearn child runs a tiny fit first so the timed ``fit`` excludes loading the
compiled kernels (the process figures include it). The split is written once as ``.npz`` files
both interpreters read.

Usage (one command per table; ``--quick``: one seed, one repetition, 50 ordinal sweeps, 30 VB
iterations, 20 multiclass sweeps)::

    python benchmarks/bench_bayes.py [--tasks ordinal vb_reg vb_clf multiclass] [--seeds 0 1 2]
        [--reps 1] [--sweeps 200] [--vb-iter 100] [--mc-sweeps 100] [--data ML100K_DIR]
        [--peers-python PY] [--quick]

``--peers-python`` (or ``$FMLEARN_PEERS_PYTHON``) is a Python with ``myfm`` installed; data from
``--data`` or fmlearn's default folder (``$FMLEARN_DATA/ml-100k``, else
``~/.cache/fmlearn/ml-100k``). Prints one Markdown table per task (median and min-max over the
runs) ready for RESULTS.md.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

TASKS = ("ordinal", "vb_reg", "vb_clf", "multiclass")
ONE_THREAD = {k: "1" for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                               "MKL_NUM_THREADS")}


# -- child side ---------------------------------------------------------------------------------
def _load_split(folder):
    import scipy.sparse as sp

    def part(name):
        z = np.load(os.path.join(folder, f"{name}.npz"))
        X = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
        return X, z["y"]

    return part("train") + part("test")


def _fmlearn_model(task, seed, n):
    from fmlearn import FMClassifier, FMOrdinalRegressor, FMRegressor

    if task == "multiclass":
        return FMClassifier(8, n_iter=n, random_state=seed, n_jobs=1)
    if task == "ordinal":
        return FMOrdinalRegressor(8, n_iter=n, random_state=seed, n_jobs=1)
    cls = FMRegressor if task == "vb_reg" else FMClassifier
    return cls(8, solver="vb", n_iter=n, random_state=seed, n_jobs=1)


def _child(system, task, seed, n, folder, out):
    X, y, Xt, yt = _load_split(folder)
    if task == "vb_clf":
        y, yt = (y >= 4).astype(np.int64), (yt >= 4).astype(np.int64)
    if system in ("fmlearn", "sklearn-ovr"):
        _fmlearn_model(task, 0, 3).fit(X[:500], y[:500])  # load the compiled kernels
        model = _fmlearn_model(task, seed, n)
        if system == "sklearn-ovr":
            from sklearn.multiclass import OneVsRestClassifier

            model = OneVsRestClassifier(model)
        t0 = time.process_time()
        model.fit(X, y)
        fit_cpu = time.process_time() - t0
        if task == "vb_clf":
            pred = model.predict_proba(Xt)[:, 1]
        elif task == "multiclass":
            pred = model.predict_proba(Xt)
        else:
            pred = model.predict(Xt)
    else:
        import myfm

        if task == "ordinal":
            model = myfm.MyFMOrderedProbit(rank=8, random_seed=seed)
            t0 = time.process_time()
            model.fit(X, (y - 1).astype(np.int64), n_iter=n)
            fit_cpu = time.process_time() - t0
            pred = model.predict_proba(Xt) @ np.arange(1, 6)
        else:
            cls = (myfm.VariationalFMRegressor if task == "vb_reg"
                   else myfm.VariationalFMClassifier)
            model = cls(rank=8, random_seed=seed)
            t0 = time.process_time()
            model.fit(X, y, n_iter=n)
            fit_cpu = time.process_time() - t0
            pred = model.predict(Xt) if task == "vb_reg" else model.predict_proba(Xt)
    np.save(out, np.asarray(pred, dtype=np.float64))
    print(json.dumps({"fit_cpu": fit_cpu}))


# -- parent side --------------------------------------------------------------------------------
def _write_split(folder, data_path, seed):
    from fmlearn.datasets import load_movielens_100k, movielens_split

    ml = load_movielens_100k(data_path)
    train, test = movielens_split(ml.X.shape[0], seed)
    for name, rows in (("train", train), ("test", test)):
        X = ml.X[rows].tocsr()
        np.savez(os.path.join(folder, f"{name}.npz"), data=X.data, indices=X.indices,
                 indptr=X.indptr, shape=np.array(X.shape), y=ml.y[rows])
    return ml.y[test]


def _metric(task, pred, yt):
    if task == "multiclass":
        p = np.clip(pred[np.arange(yt.shape[0]), yt.astype(np.int64) - 1], 1e-15, 1.0)
        return float(-np.mean(np.log(p)))
    if task == "vb_clf":
        t = (yt >= 4).astype(np.float64)
        p = np.clip(pred, 1e-15, 1 - 1e-15)
        return float(-np.mean(t * np.log(p) + (1 - t) * np.log(1 - p)))
    return float(np.sqrt(np.mean((pred - yt) ** 2)))


def _run(python, system, task, seed, n, folder):
    out = os.path.join(folder, f"pred-{system}.npy")
    load = os.getloadavg()[0]
    env = {**os.environ, **ONE_THREAD}
    t0 = time.perf_counter()
    proc = subprocess.Popen([python, os.path.abspath(__file__), "--child", system, task,
                             str(seed), str(n), folder, out], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{system} {task} seed {seed} failed:\n{stderr[-2000:]}")
    info = json.loads(stdout.strip().splitlines()[-1])
    return {"cpu": usage.ru_utime + usage.ru_stime, "wall": wall, "load": load,
            "fit_cpu": info["fit_cpu"], "pred": np.load(out)}


def _fmt(values, digits):
    v = np.asarray(values)
    return f"{np.median(v):.{digits}f} ({v.min():.{digits}f}-{v.max():.{digits}f})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    ap.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--sweeps", type=int, default=200)
    ap.add_argument("--vb-iter", type=int, default=100)
    ap.add_argument("--mc-sweeps", type=int, default=100)
    ap.add_argument("--data", default=None)
    ap.add_argument("--peers-python", default=os.environ.get("FMLEARN_PEERS_PYTHON"))
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    if a.child:
        system, task, seed, n, folder, out = a.child
        _child(system, task, int(seed), int(n), folder, out)
        return
    if a.peers_python is None and set(a.tasks) - {"multiclass"}:
        ap.error("--peers-python (or $FMLEARN_PEERS_PYTHON): a Python with myfm")
    if a.quick:
        a.seeds, a.reps, a.sweeps, a.vb_iter, a.mc_sweeps = a.seeds[:1], 1, 50, 30, 20
    cmd = "python benchmarks/bench_bayes.py " + " ".join(argv if argv is not None
                                                          else sys.argv[1:])
    print(f"Command: `{cmd}`\n")
    with tempfile.TemporaryDirectory(prefix="bench-bayes-") as folder:
        for task in a.tasks:
            n = {"ordinal": a.sweeps, "multiclass": a.mc_sweeps}.get(task, a.vb_iter)
            peer = ("sklearn-ovr", sys.executable) if task == "multiclass" else (
                "myFM", a.peers_python)
            systems = dict([("fmlearn", sys.executable), peer])
            rows = {s: [] for s in systems}
            gaps, by_seed = [], []
            for seed in a.seeds:
                yt = _write_split(folder, a.data, seed)
                _run(sys.executable, "fmlearn", task, seed, 3, folder)  # fill numba's cache
                for rep in range(a.reps):
                    order = list(systems) if rep % 2 == 0 else list(systems)[::-1]
                    preds = {}
                    for system in order:
                        r = _run(systems[system], system, task, seed, n, folder)
                        preds[system] = r.pop("pred")
                        r["metric"] = _metric(task, preds[system], yt)
                        rows[system].append(r)
                    gaps.append(float(np.max(np.abs(preds["fmlearn"] - preds[peer[0]]))))
                    if rep == 0:
                        by_seed.append(f"seed {seed}: " + ", ".join(
                            f"{k} {rows[k][-1]['metric']:.4f}" for k in systems))
            metric = "log-loss" if task in ("vb_clf", "multiclass") else "RMSE"
            unit = "iterations" if task.startswith("vb") else "sweeps"
            print(f"### {task} (MovieLens-100K, k=8, {n} {unit}, seeds {a.seeds}, "
                  f"{a.reps} rep(s), one thread)\n")
            print(f"| system | test {metric} | fit CPU s | process CPU s | process wall s | load |")
            print("|---|---|---|---|---|---|")
            for system, rs in rows.items():
                cols = [_fmt([r["metric"] for r in rs], 4)] + [
                    _fmt([r[key] for r in rs], 2) for key in ("fit_cpu", "cpu", "wall")]
                cols.append(_fmt([r["load"] for r in rs], 1))
                print(f"| {system} | " + " | ".join(cols) + " |")
            f_cpu = np.median([r["fit_cpu"] for r in rows["fmlearn"]])
            m_cpu = np.median([r["fit_cpu"] for r in rows[peer[0]]])
            same = (f"; largest difference of the two systems' test probabilities: "
                    f"{max(gaps):.3g}" if task == "multiclass" else "")
            print(f"\nfit CPU ratio fmlearn / {peer[0]} (medians): {f_cpu / m_cpu:.2f}{same}; "
                  + "; ".join(by_seed) + "\n", flush=True)


if __name__ == "__main__":
    main()
