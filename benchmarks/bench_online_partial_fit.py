"""One-row ``partial_fit`` of ``OnlineFMRegressor(learner="ogd")`` (k = 8) at d = 2,000 and
d = 200,000: this tree against another fmlearn source tree (e.g. main), side by side.

Each measurement runs in a fresh process with ``PYTHONPATH`` set to one tree's ``src``; the runs
alternate (old d1, new d1, old d2, new d2, and again ``--repeats`` times). A run fits 10 rows,
warms up on 200 single rows (compilation) and then times ``--calls`` one-row calls (rows of 20
random features), reporting milliseconds per call in CPU time and wall time, and the load
average. The old tree is given by ``--old-src`` (for example the ``src`` of
``git archive main src | tar -x -C /tmp/old``).

    python benchmarks/bench_online_partial_fit.py --old-src /tmp/old/src
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NEW_SRC = os.path.join(os.path.dirname(HERE), "src")

CHILD = r"""
import json, os, sys, time
import numpy as np, scipy.sparse as sp
from fmlearn import OnlineFMRegressor
d, calls = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
n = calls + 300
indices = np.concatenate([np.sort(rng.choice(d, 20, replace=False)) for _ in range(n)])
X = sp.csr_matrix((rng.normal(size=20 * n), indices, np.arange(0, 20 * n + 1, 20)),
                  shape=(n, d))
y = rng.normal(size=n)
rows = [X[i:i + 1] for i in range(n)]
m = OnlineFMRegressor("ogd", n_factors=8, random_state=0)
m.partial_fit(X[:10], y[:10])
for i in range(10, 210):
    m.partial_fit(rows[i], y[i:i + 1])
w0, c0 = time.perf_counter(), time.process_time()
for i in range(210, 210 + calls):
    m.partial_fit(rows[i], y[i:i + 1])
w1, c1 = time.perf_counter(), time.process_time()
print(json.dumps({"d": d, "ms_per_call_cpu": (c1 - c0) / calls * 1e3,
                  "ms_per_call_wall": (w1 - w0) / calls * 1e3,
                  "load_average": os.getloadavg()[0]}))
"""


def run(src, d, calls):
    env = dict(os.environ, PYTHONPATH=src)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(d), str(calls)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old-src", required=True, help="src folder of the tree to compare with")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dims", default="2000,200000")
    args = p.parse_args(argv)
    dims = [int(v) for v in args.dims.split(",")]
    rows = []
    for rep in range(args.repeats):
        for d in dims:
            for label, src in (("old", args.old_src), ("new", NEW_SRC)):
                r = run(src, d, args.calls)
                r.update(tree=label, repeat=rep)
                rows.append(r)
                print(json.dumps(r), flush=True)
    for d in dims:
        for label in ("old", "new"):
            sel = [r for r in rows if r["d"] == d and r["tree"] == label]
            print(json.dumps({"d": d, "tree": label,
                              "median_ms_cpu": sorted(r["ms_per_call_cpu"] for r in sel)[
                                  len(sel) // 2],
                              "median_ms_wall": sorted(r["ms_per_call_wall"] for r in sel)[
                                  len(sel) // 2]}), flush=True)


if __name__ == "__main__":
    main()
