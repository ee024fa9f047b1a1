"""Costs of the hardening (issue 10): input validation, refusing crafted model files, and the
memory of chunked prediction.

    PYTHONPATH=src python benchmarks/bench_hardening.py validation [--rounds 5]
    PYTHONPATH=src python benchmarks/bench_hardening.py manifest [--rounds 5]
    PYTHONPATH=src python benchmarks/bench_hardening.py predict-memory [--rows 1000000]

``validation``: the O(nnz) structure check (``fmlearn._data.check_sparse_structure``) against
one ``predict`` and one ALS ``fit`` sweep on the same matrices (MovieLens-like one-hot, 2
non-zeros per row; and a dense-ish 100-feature set), alternated check / predict / fit per
round; CPU and wall seconds. ``manifest``: ``fmlearn.load`` of a file whose ``fmlearn.json`` is
a 2 MB deflate stream expanding to 2 GiB (issue 10's bar: refused in under 0.1 s and 50 MB):
wall and CPU seconds to the ModelFileError, and the peak RSS growth of the process.
``predict-memory``: peak RSS growth of ``predict`` on ``--rows`` x 100 dense float64 rows for
each model family, in a fresh child process per measurement, chunked (the code as it is) and
unchunked (one ``_raw_predict`` over all rows, the code before issue 10), alternated A B A B.

Run timings under ``flock /tmp/fmlearn-bench.lock`` so two benchmarks never overlap.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile

import numpy as np
import scipy.sparse as sp


def _clock():
    return time.perf_counter(), time.process_time()


def _since(t):
    w, c = _clock()
    return w - t[0], c - t[1]


def _load_average():
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def _one_hot(n, n_users=100_000, n_items=20_000, seed=0):
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n), 2)
    cols = np.column_stack([rng.integers(0, n_users, n),
                            n_users + rng.integers(0, n_items, n)]).ravel()
    X = sp.csr_matrix((np.ones(2 * n), (rows, cols)), shape=(n, n_users + n_items))
    y = rng.normal(size=n)
    return X, y


def bench_validation(rounds):
    from fmlearn import FMRegressor
    from fmlearn._data import check_sparse_structure

    warnings.simplefilter("ignore")
    rng = np.random.default_rng(1)
    dense = rng.normal(size=(200_000, 100)) * (rng.random((200_000, 100)) < 0.3)
    sets = {"one-hot 1,000,000 x 120,000 (nnz 2e6)": _one_hot(1_000_000),
            "200,000 x 100, 30% non-zero (nnz 6e6)": (sp.csr_matrix(dense),
                                                      rng.normal(size=200_000))}
    print(f"load average before: {_load_average()}")
    for label, (X, y) in sets.items():
        model = FMRegressor(n_factors=8, solver="als", n_iter=1, random_state=0).fit(X, y)
        model.predict(X[:10])
        rec = {"check": [], "predict": [], "fit (1 ALS sweep)": []}
        for _ in range(rounds):
            t = _clock()
            check_sparse_structure(X)
            rec["check"].append(_since(t))
            t = _clock()
            model.predict(X)
            rec["predict"].append(_since(t))
            t = _clock()
            FMRegressor(n_factors=8, solver="als", n_iter=1, random_state=0).fit(X, y)
            rec["fit (1 ALS sweep)"].append(_since(t))
        print(label)
        med = {k: np.median(np.array(v), axis=0) for k, v in rec.items()}
        for k, (wall, cpu) in med.items():
            share = "" if k == "check" else f"  check = {100 * med['check'][0] / wall:.2f}% of it"
            print(f"  {k:18s} wall {wall:8.4f} s  cpu {cpu:8.4f} s (median of {rounds}){share}")
    print(f"load average after: {_load_average()}")


def _bomb(path, megabytes):
    """A ZIP whose fmlearn.json is ~``megabytes`` MB of deflate (1000x that expanded)."""
    chunk = b" " * 2**24
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        with zf.open("fmlearn.json", "w", force_zip64=True) as member:
            while os.path.getsize(path) < megabytes * 2**20:
                for _ in range(16):
                    member.write(chunk)
                zf.fp.flush()
    return path


_LOAD_CHILD = r"""
import resource, sys, time
import fmlearn
from fmlearn.exceptions import ModelFileError
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0, c0 = time.perf_counter(), time.process_time()
try:
    fmlearn.load(sys.argv[1])
    outcome = "loaded"
except ModelFileError as exc:
    outcome = "ModelFileError: " + str(exc)[-60:]
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
grow = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(wall, cpu, grow / 1024, outcome)
"""


def bench_manifest(rounds):
    folder = tempfile.mkdtemp()
    path = _bomb(os.path.join(folder, "bomb.fmz"), 2)
    size = os.path.getsize(path)
    with zipfile.ZipFile(path) as zf:
        expanded = zf.getinfo("fmlearn.json").file_size
    print(f"load average before: {_load_average()}")
    rec = []
    for _ in range(rounds):  # a fresh process each time: its peak RSS is the load's own
        out = subprocess.run([sys.executable, "-c", _LOAD_CHILD, path], capture_output=True,
                             text=True, check=True).stdout.split(maxsplit=3)
        rec.append([float(v) for v in out[:3]])
    wall, cpu, grow = np.median(np.array(rec), axis=0)
    print(f"{size / 2**20:.1f} MB file, manifest deflated from {expanded / 2**30:.1f} GiB: "
          f"{out[3].strip()}")
    print(f"  refused in wall {wall * 1e3:.2f} ms, cpu {cpu * 1e3:.2f} ms; peak RSS growth "
          f"{grow:.1f} MB (medians of {rounds} fresh processes)")
    print(f"load average after: {_load_average()}")


_CHILD = r"""
import json, resource, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
import fmlearn, fmlearn._base as base
name, rows, chunked = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
rng = np.random.default_rng(0)
Xs = rng.normal(size=(5000, 100)); ys = Xs[:, 0] * Xs[:, 1]
make = {
    "FMRegressor-als": lambda: fmlearn.FMRegressor(n_factors=8, solver="als", n_iter=2),
    "FMRegressor-mcmc": lambda: fmlearn.FMRegressor(n_factors=8, n_iter=10),
    "GFMRegressor": lambda: fmlearn.GFMRegressor(n_factors=3, batch_size=5000),
    "ConvexFMRegressor": lambda: fmlearn.ConvexFMRegressor(max_iter=3),
    "OnlineFMRegressor": lambda: fmlearn.OnlineFMRegressor(n_iter=1),
}[name]
model = make().fit(Xs, ys)
model.predict(Xs[:10])
X = rng.normal(size=(rows, 100))
if not chunked:
    base.PREDICT_CHUNK_VALUES = 1 << 62  # one _raw_predict over all rows (the old code)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
import time
t0 = time.perf_counter(); c0 = time.process_time()
p = model.predict(X)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"grow_mb": (after - before) / 1024, "wall": wall, "cpu": cpu,
                  "X_mb": X.nbytes / 2**20, "finite": bool(np.all(np.isfinite(p)))}))
"""


def bench_predict_memory(rows, rounds, names):
    env = dict(os.environ)
    print(f"load average before: {_load_average()}")
    for name in names:
        out = {True: [], False: []}
        for _ in range(rounds):
            for chunked in (True, False):  # A B A B
                proc = subprocess.run([sys.executable, "-c", _CHILD, name, str(rows),
                                       "1" if chunked else "0"], capture_output=True,
                                      text=True, env=env)
                if proc.returncode:
                    out[chunked].append({"error": proc.stderr.strip().splitlines()[-1]})
                    continue
                out[chunked].append(json.loads(proc.stdout.strip().splitlines()[-1]))
        for chunked in (True, False):
            recs = [r for r in out[chunked] if "error" not in r]
            label = "chunked  " if chunked else "unchunked"
            if not recs:
                print(f"{name:18s} {label} failed: {out[chunked][0]['error']}")
                continue
            grow = max(r["grow_mb"] for r in recs)
            wall = np.median([r["wall"] for r in recs])
            cpu = np.median([r["cpu"] for r in recs])
            print(f"{name:18s} {label} +{grow:7.0f} MB peak RSS over X ({recs[0]['X_mb']:.0f} "
                  f"MB); predict wall {wall:6.2f} s cpu {cpu:6.2f} s (median of {len(recs)})")
    print(f"load average after: {_load_average()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["validation", "manifest", "predict-memory"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--models", default="FMRegressor-als,FMRegressor-mcmc,GFMRegressor,"
                                        "ConvexFMRegressor,OnlineFMRegressor")
    args = ap.parse_args()
    if args.what == "validation":
        bench_validation(args.rounds)
    elif args.what == "manifest":
        bench_manifest(args.rounds)
    else:
        bench_predict_memory(args.rows, min(args.rounds, 2), args.models.split(","))


if __name__ == "__main__":
    main()
