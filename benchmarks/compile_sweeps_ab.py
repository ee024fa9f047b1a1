"""Cold compile cost of the classic FM's coordinate sweeps, two source trees alternated.

Each run is a fresh process with an empty numba cache (``NUMBA_CACHE_DIR`` set to a new
temporary folder) that fits FMRegressor with ALS and MCMC on rows and on contrast targets
(tiny data: the time is compilation): the kernels the fit plan refactoring touched
(``kernels.cd`` and ``kernels.cd_contrast``, whose draw order became one function). Prints
CPU (user + sys of the child) and wall seconds per run, then the median and min-max per tree::

    git -C /path/to/repo archive main src | tar -x -C /tmp/mainsrc
    python benchmarks/compile_sweeps_ab.py /tmp/mainsrc/src src --repeat 3
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = """
import numpy as np, scipy.sparse as sp
from fmlearn import FMRegressor
rng = np.random.default_rng(0)
X = sp.random(300, 12, density=0.4, random_state=0, format="csr"); y = rng.normal(size=300)
C = (sp.eye(299, 300) - sp.eye(299, 300, k=1)).tocsr()
for s in ("als", "mcmc"):
    FMRegressor(2, solver=s, n_iter=3, random_state=0).fit(X, y)
    FMRegressor(2, solver=s, n_iter=3, random_state=0).fit(X, C @ y, contrasts=C)
"""


def run(src):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(src), NUMBA_CACHE_DIR=cache)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", CHILD], env=env, check=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="src folder A (e.g. main's)")
    ap.add_argument("b", help="src folder B")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    res = {args.a: [], args.b: []}
    print(f"load average {os.getloadavg()}")
    for r in range(args.repeat):
        for src in (args.a, args.b):
            cpu, wall = run(src)
            res[src].append((cpu, wall))
            print(f"run {r} {src}: cpu {cpu:.1f} s, wall {wall:.1f} s", flush=True)
    for src, vals in res.items():
        cpus, walls = [v[0] for v in vals], [v[1] for v in vals]
        print(f"{src}: cpu median {statistics.median(cpus):.1f} s "
              f"({min(cpus):.1f}-{max(cpus):.1f}), wall median {statistics.median(walls):.1f} s "
              f"({min(walls):.1f}-{max(walls):.1f})")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
