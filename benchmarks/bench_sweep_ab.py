"""The ALS/MCMC sweep and set-up of two fmlearn source trees on one libFM/svmlight file, each
fit's per-iteration CPU read by a callback (no difference of two fits, so no set-up noise in
the sweep): fresh processes, one thread, alternated A B B A ...

    python benchmarks/bench_sweep_ab.py --train FILE --old OLD/src [--reps 3] [--n-iter 7]

FILE: e.g. the 8,000,000-row file ``sbs.py run large --workdir DIR`` writes (DIR/8m.train.libfm);
OLD/src: another source tree (``git archive REV src | tar -x -C OLD``). Prints, per solver and
tree, the median sweep CPU (the median of each fit's iterations 2..n, then the median over
repetitions) and "set-up plus the first sweep" (CPU from ``fit`` to the first callback), with
min-max, and the load average. The callback's history (the training loss) is part of every
iteration in both trees.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

CHILD = r'''
import sys, time, json
import numpy as np
from fmlearn import FMRegressor
from fmlearn.datasets import load_svmlight
X, y = load_svmlight(sys.argv[1], zero_based=True, dtype=np.float64)
ts = []
m = FMRegressor(n_factors=8, solver=sys.argv[2], n_iter=int(sys.argv[3]), random_state=0,
                init_stdev=0.1, reg_bias=0.0, reg_linear=5.0, reg_pairwise=10.0)
t0 = time.process_time()
m.fit(X, y, callback=lambda i, h: ts.append(time.process_time()))
print(json.dumps({"first": ts[0] - t0, "sweep": float(np.median(np.diff(ts)))}))
'''


def spread(v, fmt="{:.3f}"):
    return f"{fmt.format(np.median(v))} ({fmt.format(min(v))}-{fmt.format(max(v))})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--old", required=True, help="the other tree's src folder")
    ap.add_argument("--new", default=os.path.join(os.path.dirname(__file__), "..", "src"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--n-iter", type=int, default=7)
    args = ap.parse_args()
    trees = {"new": os.path.abspath(args.new), "old": os.path.abspath(args.old)}
    res = {(t, s): [] for t in trees for s in ("als", "mcmc")}
    loads = []
    for rep in range(args.reps):
        for solver in ("als", "mcmc"):
            for t in (["new", "old"] if rep % 2 == 0 else ["old", "new"]):
                env = dict(os.environ, PYTHONPATH=trees[t], NUMBA_NUM_THREADS="1",
                           OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
                out = subprocess.run([sys.executable, "-c", CHILD, args.train, solver,
                                      str(args.n_iter)], env=env, capture_output=True,
                                     text=True, check=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                res[t, solver].append(r)
                loads.append(os.getloadavg()[0])
                print(rep, solver, t, r, f"load {loads[-1]:.2f}", flush=True)
    print(f"\nload average {min(loads):.2f}-{max(loads):.2f}\n")
    print("| solver | tree | sweep CPU s | set-up + first sweep CPU s |\n|---|---|---|---|")
    for solver in ("als", "mcmc"):
        for t in trees:
            r = res[t, solver]
            print(f"| {solver} | {t} ({trees[t]}) | {spread([x['sweep'] for x in r])} | "
                  f"{spread([x['first'] for x in r])} |")


if __name__ == "__main__":
    main()
