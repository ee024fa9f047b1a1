"""Side-by-side rows/s of the one-pass gFM step in two source trees (issue 11, item 6).

Each tree is measured in its own child process (``PYTHONPATH=<tree>/src``), the trees taking
turns (A B A B ...), on the same generated stream: dense Gaussian rows from the same planted
model, ``n = 10 k d`` rows per batch, one first batch (spectral initialisation, not timed in
the steady figure) then ``--batches`` steady batches, each timed around ``partial_fit`` only
(the batch is generated before the clock starts). Reported per run: median steady rows/s,
CPU seconds and wall seconds of the timed steps and of the first batch, and the final relative
recovery error (the two trees must agree). The load average is printed before and after.

Only public API present in every tree is used (``GFMRegressor.partial_fit``,
``fmlearn.datasets.make_gfm``, ``fmlearn.diagnostics.recovery_error``), so an old checkout
can be measured against a new one, e.g. a ``git worktree`` of an earlier commit::

    git worktree add --detach /tmp/fmlearn-old <commit>
    python benchmarks/bench_one_pass_ab.py --tree old=/tmp/fmlearn-old --tree new=. \
        --rounds 3

``--quick`` runs d = 200 for a smoke test.
"""

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import json, sys, time
import numpy as np
from fmlearn import GFMRegressor
from fmlearn.datasets import make_gfm
from fmlearn.diagnostics import recovery_error

d, k, batches, n_jobs = (int(a) for a in sys.argv[1:5])
n = 10 * k * d
_, _, truth = make_gfm(1, d, k, random_state=0)
rng = np.random.default_rng(1)
m = GFMRegressor(k, random_state=0, n_jobs=None if n_jobs < 0 else n_jobs)
X, y = truth.sample(n, rng)
c0, t0 = time.process_time(), time.perf_counter()
m.partial_fit(X, y)                      # first batch: standardisation + spectral init
first = (time.perf_counter() - t0, time.process_time() - c0)
walls, cpus = [], []
for _ in range(batches):
    X, y = truth.sample(n, rng)
    c0, t0 = time.process_time(), time.perf_counter()
    m.partial_fit(X, y)
    walls.append(time.perf_counter() - t0)
    cpus.append(time.process_time() - c0)
err = recovery_error(m.w_, m.M_, truth.w, truth.M)
print(json.dumps({"n": n, "wall": walls, "cpu": cpus, "first": first, "error": float(err)}))
"""


def _run(src, d, k, batches, n_jobs):
    env = dict(os.environ, PYTHONPATH=os.path.join(src, "src"))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(d), str(k), str(batches),
                          str(n_jobs)], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=PATH",
                    help="a source tree (its src/ is put on PYTHONPATH); give two or more")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=3, help="steady batches per run")
    ap.add_argument("--d", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--n-jobs", type=int, default=-1, help="-1: the estimator's default")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    d = 200 if args.quick else args.d
    k = 5 if args.quick else args.k
    trees = [t.split("=", 1) for t in args.tree]
    print(f"load average before: {os.getloadavg()}")
    print(f"d = {d}, k = {k}, n = 10 k d = {10 * k * d} rows per batch, "
          f"{args.batches} steady batches per run, n_jobs = {args.n_jobs}")
    results = {name: [] for name, _ in trees}
    for r in range(args.rounds):
        for name, path in trees:
            res = _run(path, d, k, args.batches, args.n_jobs)
            wall, cpu = float(sum(res["wall"])), float(sum(res["cpu"]))
            rows_s = res["n"] / float(sorted(res["wall"])[len(res["wall"]) // 2])
            results[name].append(rows_s)
            print(f"round {r + 1} {name:>8}: {rows_s:10,.0f} rows/s (median step)  steps: "
                  f"wall {wall:6.2f} s cpu {cpu:6.2f} s  first batch: wall "
                  f"{res['first'][0]:5.2f} s cpu {res['first'][1]:5.2f} s  error "
                  f"{res['error']:.2e}", flush=True)
    print(f"load average after: {os.getloadavg()}")
    base = trees[0][0]
    for name, _ in trees:
        med = float(sorted(results[name])[len(results[name]) // 2])
        ratio = med / float(sorted(results[base])[len(results[base]) // 2])
        print(f"{name:>8}: median {med:12,.0f} rows/s  ({ratio:.3f}x {base})")


if __name__ == "__main__":
    main()
