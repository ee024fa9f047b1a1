"""Fresh-process cost: ``from fmlearn import FMRegressor`` and a first small fit, side by side
with ``import sklearn.linear_model`` (and a first Ridge fit), alternated, one process each::

    python benchmarks/bench_fresh_process.py --quick     # 3 repetitions
    python benchmarks/bench_fresh_process.py --reps 7 --detail
    python benchmarks/bench_fresh_process.py --quick --compare OTHER/src   # before / after

``--compare OTHER/src`` adds every fmlearn case run on another source tree (e.g. an export of
the previous commit: ``git archive main src | tar -x -C /tmp/before``), labelled "before",
alternated with this tree's ("after") in the same rounds.

Each case is a fresh ``python -c`` with a warm numba cache (a first, unmeasured run of every
case fills it). CPU seconds are the child's user + system time (``os.wait4``), wall seconds the
parent's clock around it; median and min-max over the repetitions, the load average beside.
``--detail`` then splits one fmlearn process into phases (in-process CPU clock):
scikit-learn's base modules, numba's import, fmlearn's own modules, the first kernel call (numba
builds its CPU target there: its typing and lowering registries, whatever the kernel), the
other kernels' cache loads, and the rest of the fit.

A single-system measurement (fmlearn against scikit-learn's import, no peer).
"""

import argparse
import os
import subprocess
import sys
import time

FIT = ("import numpy as np, scipy.sparse as sp; "
       "X = sp.random(200, 30, density=0.1, format='csr', random_state=0); "
       "y = np.random.default_rng(0).random(200); ")
CASES = {
    "import sklearn.linear_model": "import sklearn.linear_model",
    "  + Ridge fit": "import sklearn.linear_model; " + FIT
                     + "sklearn.linear_model.Ridge().fit(X, y).predict(X)",
    "import numba": "import numba",
    "from fmlearn import FMRegressor": "from fmlearn import FMRegressor",
    "  + ALS fit (200 rows, 5 sweeps)": "from fmlearn import FMRegressor; " + FIT
                                        + "FMRegressor(4, solver='als', n_iter=5)"
                                          ".fit(X, y).predict(X)",
    "  + MCMC fit (200 rows, 5 sweeps)": "from fmlearn import FMRegressor; " + FIT
                                         + "FMRegressor(4, solver='mcmc', n_iter=5)"
                                           ".fit(X, y).predict(X)",
}

DETAIL = r"""
import time
c = time.process_time
t = [("interpreter start", c())]
import sklearn.base, sklearn.utils.validation
t.append(("scikit-learn base modules", c()))
import numba
t.append(("numba import", c()))
from fmlearn import FMRegressor
t.append(("fmlearn modules", c()))
import numba.core.dispatcher as D
loads = []
orig = D.Dispatcher.compile
def compile(self, sig):
    s = c(); r = orig(self, sig); loads.append((c() - s, self.py_func.__name__)); return r
D.Dispatcher.compile = compile
import numpy as np, scipy.sparse as sp
X = sp.random(200, 30, density=0.1, format="csr", random_state=0)
y = np.random.default_rng(0).random(200)
s = c()
FMRegressor(4, solver="als", n_iter=5).fit(X, y).predict(X)
fit = c() - s
print(f"{'phase':34s} CPU s")
prev = 0.0
for name, v in t:
    print(f"{name:34s} {v - prev:.3f}")
    prev = v
first = loads[0][0] if loads else 0.0
print(f"{'first kernel call (' + (loads[0][1] if loads else '-') + ')':34s} {first:.3f}")
other = "other kernels (%d cache loads)" % (len(loads) - 1)
print(f"{other:34s} {sum(x for x, _ in loads[1:]):.3f}")
print(f"{'rest of the fit':34s} {fit - sum(x for x, _ in loads):.3f}")
"""


def run(code, src=None):
    env = None
    if src is not None:  # the fmlearn of another source tree first on the path
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.abspath(src)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                      if p]))
    w = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise SystemExit(f"failed ({p.returncode}): {code}")
    return ru.ru_utime + ru.ru_stime, time.perf_counter() - w


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="3 repetitions")
    ap.add_argument("--detail", action="store_true", help="phases of one fmlearn process")
    ap.add_argument("--compare", metavar="SRC", default=None,
                    help="another source tree whose fmlearn cases run alternated (\"before\")")
    a = ap.parse_args(argv)
    reps = 3 if a.quick else a.reps
    import numpy as np

    cases = {}
    for name, code in CASES.items():
        if a.compare and "fmlearn" in code:
            cases[f"{name} [before]"] = (code, a.compare)
            cases[f"{name} [after]"] = (code, None)
        else:
            cases[name] = (code, None)
    for code, src in cases.values():  # fills the numba cache; not measured
        run(code, src)
    res = {name: [] for name in cases}
    loads = [os.getloadavg()[0]]
    for _ in range(reps):
        for name, (code, src) in cases.items():  # alternated: every case once per round
            res[name].append(run(code, src))
        loads.append(os.getloadavg()[0])
    print(f"Fresh processes, {reps} alternated repetitions, load average "
          f"{min(loads):.1f}-{max(loads):.1f}")
    print("| process | CPU s | wall s |")
    print("|---|---|---|")
    for name, v in res.items():
        cpu, wall = np.array(v).T
        print(f"| {name} | {np.median(cpu):.2f} ({cpu.min():.2f}-{cpu.max():.2f}) | "
              f"{np.median(wall):.2f} ({wall.min():.2f}-{wall.max():.2f}) |")
    if a.detail:
        print()
        sys.stdout.flush()
        subprocess.run([sys.executable, "-c", DETAIL], check=True)


if __name__ == "__main__":
    main()
