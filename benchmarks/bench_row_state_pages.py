"""The row state of an ALS / MCMC fit on huge pages (as fmlearn allocates it,
``fmlearn._memory.empty_for_sweeps``) or on the system's small pages: the set-up of a
process's first fit, of a later fit, and the sweep, alternated A B A B ... in fresh
processes, one thread.

    python benchmarks/bench_row_state_pages.py --train FILE.npz [--solver als|mcmc]
        [--reps 3]

FILE.npz: CSR arrays ``indptr``, ``indices``, ``data``, ``shape`` and targets ``y`` (what
``benchmarks/profile_setup.py --save`` writes). Each child loads the rows, loads the kernels
on 200 rows, then fits ``FMRegressor(n_factors=8, init_stdev=0.1, n_jobs=1)`` for 1, 1 and
5 sweeps: the sweep is (CPU(5) - CPU(second 1)) / 4, each set-up the fit's CPU less one
sweep. "small" replaces ``empty_for_sweeps`` by ``numpy.empty`` inside the fit (whose other
large arrays get no huge-page advice either way: ``fmlearn._memory.small_pages``).

Huge pages spare the sweeps' TLB misses on the row state, which they read and write in
random order; their first touch in a process can cost more than small pages' (the kernel
has to find, compact and zero 2 MiB pages; how much depends on the free memory the machine
has at that moment, so the first fit's set-up varies between runs).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import json, os, sys, time
import numpy as np
import scipy.sparse as sp
from fmlearn import FMRegressor
import fmlearn.solvers._fm_common as common
if sys.argv[3] == "small":
    common.empty_for_sweeps = lambda shape, dtype: np.empty(shape, dtype=dtype)
z = np.load(sys.argv[1])
X = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
y = z["y"]
p = dict(n_factors=8, solver=sys.argv[2], init_stdev=0.1, n_jobs=1, random_state=0)
if sys.argv[2] == "als":
    p.update(reg_bias=0.0, reg_linear=5.0, reg_pairwise=10.0)
FMRegressor(n_iter=1, **p).fit(X[:200], y[:200])
cpu = []
for n_iter in (1, 1, 5):
    t0 = time.process_time()
    FMRegressor(n_iter=n_iter, **p).fit(X, y)
    cpu.append(time.process_time() - t0)
sweep = (cpu[2] - cpu[1]) / 4
print("RESULT " + json.dumps({"first set-up": cpu[0] - sweep, "later set-up": cpu[1] - sweep,
                              "sweep": sweep}))
'''


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--solver", default="als", choices=("als", "mcmc"))
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args(argv)
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    res = {"huge": [], "small": []}
    loads = [os.getloadavg()[0]]
    for _ in range(a.reps):
        for mode in res:  # alternated
            out = subprocess.run([sys.executable, "-c", CHILD, a.train, a.solver, mode],
                                 capture_output=True, text=True, env=env, check=True).stdout
            line = [s for s in out.splitlines() if s.startswith("RESULT ")][-1]
            res[mode].append(json.loads(line[7:]))
            loads.append(os.getloadavg()[0])
    print(f"{a.train}, {a.solver.upper()}, k = 8, one thread; {a.reps} alternated repetitions; "
          f"load average {min(loads):.2f}-{max(loads):.2f}")
    keys = list(res["huge"][0])
    print("| row state | " + " | ".join(f"{k} CPU s" for k in keys) + " |")
    print("|---|" + "---|" * len(keys))
    for mode, rs in res.items():
        cells = []
        for k in keys:
            v = [r[k] for r in rs]
            cells.append(f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})")
        print(f"| {mode} pages | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
