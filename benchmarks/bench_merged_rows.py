"""``fmlearn._data.merged_rows`` (the duplicate merge of the ALS/MCMC set-up) of two fmlearn
source trees on one data set: fresh processes, one thread, alternated A B B A ...

    python benchmarks/bench_merged_rows.py --train FILE.npz --old OLD/src [--reps 3]
        [--weights] [--subset] [--huge]

FILE.npz: CSR arrays ``indptr``, ``indices``, ``data``, ``shape`` and targets ``y`` (what
``benchmarks/profile_setup.py --save`` writes). OLD/src: another source tree (``git archive
REV src | tar -x -C OLD``). Each child loads the rows, loads the kernels on a small slice (no
compilation timed), then times one ``merged_rows(X, y, sample_weight, group_by_first=True)``
as a fit calls it (``targets=False`` where the tree has it; ``sample_weight=None``;
``--weights``: random integer weights 0-3; ``--subset``: every row but one in ten, an
early-stopping split's training part). Prints, per tree, the CPU
and wall seconds and the thousands of minor page faults, median (min-max), the load average,
and whether both trees gave the same rows, targets and weights (a digest). NumPy's
transparent-huge-page advice is switched off as in a fit (``--huge`` keeps it).
"""
import argparse
import json
import os
import subprocess
import sys

import _sbs_core as core  # the harness's helpers (this folder)

CHILD = r'''
import hashlib, json, resource, sys, time
import _sbs_core as core  # the harness's helpers (this folder)
import numpy as np
import scipy.sparse as sp
if sys.argv[5] == "0":
    from numpy._core import multiarray
    multiarray._set_madvise_hugepage(False)
from fmlearn._data import merged_rows
z = np.load(sys.argv[1])
X = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
y = z["y"]
rng = np.random.default_rng(0)
sw = rng.integers(0, 4, X.shape[0]).astype(np.float64) if sys.argv[2] == "1" else None
subset = np.flatnonzero(np.arange(X.shape[0]) % 10 != 3) if sys.argv[3] == "1" else None
import inspect
# as a fit calls it: the targets read in place where the tree can (no gathered copy)
kw = {"targets": False} if "targets" in inspect.signature(merged_rows).parameters else {}
m = 20000  # the kernels loaded (or compiled) outside the timing
merged_rows(X[:m], y[:m], None if sw is None else sw[:m], group_by_first=True,
            subset=None if subset is None else subset[subset < m], **kw)
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
t0, c0 = time.perf_counter(), time.process_time()
rows, yr, w, keep = merged_rows(X, y, sw, group_by_first=True, subset=subset, **kw)
c1, t1 = time.process_time(), time.perf_counter()
f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
yr = y[rows] if yr is None else yr  # for the digest, outside the timing
h = hashlib.sha256(rows.tobytes() + yr.tobytes())
h.update(b"none" if w is None else w.tobytes())
h.update(b"none" if keep is None else keep.tobytes())
print(json.dumps({"cpu": c1 - c0, "wall": t1 - t0, "kflt": (f1 - f0) / 1000,
                  "rows": int(rows.shape[0]), "digest": h.hexdigest()[:16]}))
'''


def spread(v, fmt="{:.3f}"):
    return core.spread(v, fmt)  # the harness's "median (min-max)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--old", required=True, help="the other tree's src folder")
    ap.add_argument("--new", default=os.path.join(os.path.dirname(__file__), "..", "src"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--weights", action="store_true")
    ap.add_argument("--subset", action="store_true")
    ap.add_argument("--huge", action="store_true")
    args = ap.parse_args()
    trees = {"new": os.path.abspath(args.new), "old": os.path.abspath(args.old)}
    res = {t: [] for t in trees}
    loads = []
    for rep in range(args.reps):
        for t in (["new", "old"] if rep % 2 == 0 else ["old", "new"]):
            env = dict(os.environ, PYTHONPATH=trees[t], NUMBA_NUM_THREADS="1",
                       OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
            out = subprocess.run([sys.executable, "-c", CHILD, args.train,
                                  str(int(args.weights)), str(int(args.subset)), "",
                                  str(int(args.huge))], env=env, capture_output=True,
                                 text=True, check=True).stdout
            res[t].append(json.loads(out.strip().splitlines()[-1]))
        loads.append(os.getloadavg()[0])
    print(f"# merged_rows on {args.train} (weights {args.weights}, subset {args.subset}, "
          f"huge pages {args.huge}); {args.reps} alternated repetitions; load average "
          f"{spread(loads, '{:.2f}')}")
    print("| tree | CPU s | wall s | k minor faults | merged rows | digest |")
    print("|---|---|---|---|---|---|")
    for t in trees:
        r = res[t]
        print(f"| {t} ({trees[t]}) | {spread([x['cpu'] for x in r])} | "
              f"{spread([x['wall'] for x in r])} | {spread([x['kflt'] for x in r], '{:.0f}')} | "
              f"{r[0]['rows']} | {r[0]['digest']} |")
    same = len({x["digest"] for t in trees for x in res[t]}) == 1
    print(f"same rows, targets, weights and mask in both trees: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
