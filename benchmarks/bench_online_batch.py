"""Batch ``partial_fit`` throughput and ``predict`` of the online estimators: this tree against
another fmlearn source tree (e.g. main before a change), side by side.

Each measurement runs in a fresh process with ``PYTHONPATH`` set to one tree's ``src``; the
trees alternate (old, new, old, new, ...) ``--repeats`` times per scenario, after one untimed
warm-up process per tree and scenario (it fills the numba cache). Data: categorical rows, 10
fields one-hot (10 nonzeros of value 1 per row), targets from a planted FM plus noise.

Scenarios (only default constructor arguments, so that both trees take them):

- ``ogd-fit``, ``ftrl-fit``: ``OnlineFMRegressor("ogd" | "ftrl")``, warmed up on 100 rows, then
  one ``partial_fit`` of ``--rows`` rows (d = 10,000); ns per row, CPU and wall.
- ``ccfm-predict``, ``ccfm-ftrl-predict``, ``cfm-predict``: ``CCFMRegressor()``,
  ``CCFMRegressor("ftrl")``, ``OnlineCFMRegressor()`` fitted on 2,000 rows (d = 1,000), then
  ``predict`` of ``--rows`` rows, best of 3; ns per row, CPU and wall (CPU above wall: more than
  one thread worked).
- ``ogd-compile``, ``ccfm-compile``: the first call on a cold numba cache (an empty
  ``NUMBA_CACHE_DIR`` per process): ``OnlineFMRegressor("ogd")`` or ``CCFMRegressor()``,
  ``partial_fit`` of 60 rows then ``predict``; ``seconds_cpu`` and ``seconds_wall``. Not in
  the default list (CCFM compiles for minutes).

    python benchmarks/bench_online_batch.py --old-src /tmp/old/src [--rows 50000]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NEW_SRC = os.path.join(os.path.dirname(HERE), "src")
SCENARIOS = ("ogd-fit", "ftrl-fit", "ccfm-predict", "ccfm-ftrl-predict", "cfm-predict")

CHILD = r"""
import json, os, sys, time, warnings
import numpy as np, scipy.sparse as sp
import fmlearn
scenario, n = sys.argv[1], int(sys.argv[2])
fields = 10
d = 10_000 if scenario.endswith("-fit") else 1_000
rng = np.random.default_rng(0)
m_rows = n + 2_100
size = d // fields
cols = rng.integers(0, size, size=(m_rows, fields)) + size * np.arange(fields)
X = sp.csr_matrix((np.ones(m_rows * fields), cols.ravel(),
                   np.arange(0, m_rows * fields + 1, fields)), shape=(m_rows, d))
V = rng.normal(scale=0.3, size=(d, 3))
q = X @ V
y = 0.5 * ((q * q).sum(1) - (X @ (V * V)).sum(1)) + X @ rng.normal(scale=0.1, size=d)
y = np.asarray(y).ravel() + 0.1 * rng.normal(size=m_rows)
warnings.simplefilter("ignore")
if scenario.endswith("-compile"):
    m = (fmlearn.OnlineFMRegressor("ogd", random_state=0) if scenario == "ogd-compile"
         else fmlearn.CCFMRegressor(random_state=0))
    w0, c0 = time.perf_counter(), time.process_time()
    m.partial_fit(X[:60], y[:60])
    m.predict(X[60:70])
    w1, c1 = time.perf_counter(), time.process_time()
    print(json.dumps({"scenario": scenario, "seconds_cpu": c1 - c0, "seconds_wall": w1 - w0,
                      "load_average": os.getloadavg()[0]}))
    sys.exit(0)
if scenario.endswith("-fit"):
    m = fmlearn.OnlineFMRegressor(scenario.split("-")[0], random_state=0)
    m.partial_fit(X[:100], y[:100])
    Xb, yb = X[100:100 + n], y[100:100 + n]
    w0, c0 = time.perf_counter(), time.process_time()
    m.partial_fit(Xb, yb)
    w1, c1 = time.perf_counter(), time.process_time()
    wall, cpu = w1 - w0, c1 - c0
else:
    m = {"ccfm-predict": lambda: fmlearn.CCFMRegressor(random_state=0),
         "ccfm-ftrl-predict": lambda: fmlearn.CCFMRegressor("ftrl", random_state=0),
         "cfm-predict": lambda: fmlearn.OnlineCFMRegressor(random_state=0)}[scenario]()
    m.partial_fit(X[:2_000], y[:2_000])
    m.predict(X[:10])
    Xp = X[2_000:2_000 + n]
    best = None
    for _ in range(3):
        w0, c0 = time.perf_counter(), time.process_time()
        m.predict(Xp)
        w1, c1 = time.perf_counter(), time.process_time()
        if best is None or w1 - w0 < best[0]:
            best = (w1 - w0, c1 - c0)
    wall, cpu = best
print(json.dumps({"scenario": scenario, "rows": n, "ns_per_row_cpu": cpu / n * 1e9,
                  "ns_per_row_wall": wall / n * 1e9, "load_average": os.getloadavg()[0]}))
"""


def run(src, scenario, rows):
    env = dict(os.environ, PYTHONPATH=src)
    with tempfile.TemporaryDirectory() as cache:
        if scenario.endswith("-compile"):
            env["NUMBA_CACHE_DIR"] = cache
        proc = subprocess.run([sys.executable, "-c", CHILD, scenario, str(rows)], env=env,
                              capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old-src", required=True, help="src folder of the tree to compare with")
    p.add_argument("--new-src", default=NEW_SRC, help="src folder of the tree measured")
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = p.parse_args(argv)
    trees = (("old", args.old_src), ("new", args.new_src))
    results = []
    for scenario in args.scenarios.split(","):
        if not scenario.endswith("-compile"):
            for _, src in trees:
                run(src, scenario, 1_000)  # warm-up: the numba cache
        for rep in range(args.repeats):
            for label, src in trees:
                r = run(src, scenario, args.rows)
                r.update(tree=label, repeat=rep)
                results.append(r)
                print(json.dumps(r), flush=True)
        for label, _ in trees:
            sel = [r for r in results if r["scenario"] == scenario and r["tree"] == label]
            med = len(sel) // 2
            keys = (("seconds_cpu", "seconds_wall") if scenario.endswith("-compile")
                    else ("ns_per_row_cpu", "ns_per_row_wall"))
            print(json.dumps({"scenario": scenario, "tree": label,
                              **{f"median_{k}": sorted(r[k] for r in sel)[med] for k in keys},
                              "range_cpu": [round(min(r[keys[0]] for r in sel), 1),
                                            round(max(r[keys[0]] for r in sel), 1)],
                              "load": [round(r["load_average"], 2) for r in sel]}),
                  flush=True)


if __name__ == "__main__":
    main()
