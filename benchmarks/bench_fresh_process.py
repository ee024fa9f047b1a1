"""Fresh-process cost: ``from fmlearn import FMRegressor`` and a first small fit, side by side
with ``import sklearn.linear_model`` (and a first Ridge or LinearRegression fit), alternated, one
process each::

    python benchmarks/bench_fresh_process.py --quick     # 3 repetitions
    python benchmarks/bench_fresh_process.py --reps 7 --detail
    python benchmarks/bench_fresh_process.py --quick --compare OTHER/src   # before / after
    python benchmarks/bench_fresh_process.py --bar-only --compare OTHER/src   # the bar only

``--compare OTHER/src`` adds every fmlearn case run on another source tree (e.g. an export of
the previous commit: ``git archive main src | tar -x -C /tmp/before``), labelled "before",
alternated with this tree's ("after") in the same rounds.

Each case is a fresh ``python -c`` with a warm numba cache (a first, unmeasured run of every
case fills it). CPU seconds are the child's user + system time (``os.wait4``), wall seconds the
parent's clock around it; median and min-max over the repetitions, the load average beside.
The bar of issue 27 item 8: a fresh ``from fmlearn import FMRegressor`` plus a default fit
(MCMC, 100 sweeps) on 100 dense rows costs at most 0.4 CPU s more than ``import
sklearn.linear_model`` plus ``LinearRegression().fit`` on the same rows; the script prints the
difference within each round (median and range) for CPU and wall seconds.

``--detail`` then splits one fmlearn process (the default fit on 100 rows) into phases
(in-process CPU clock): scikit-learn's base modules, numba's import, fmlearn's own modules, the
first kernel call (numba creates its CPU target context there; the first kernel whose cached
environment names numba's array implementation, ``dedup.row_keys`` today, imports
``numba.np.arrayobj`` and what it pulls in), the other kernels' cache loads, and the rest of
the fit; and lists every dispatcher the fit loads with the CPU each load costs.

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
ROWS100 = ("import numpy as np; rng = np.random.default_rng(0); X = rng.normal(size=(100, 5)); "
           "y = X @ rng.normal(size=5) + 0.1 * rng.normal(size=100); ")
LINEAR = "import sklearn.linear_model + LinearRegression fit (100 rows)"
FM_DEFAULT = "from fmlearn import FMRegressor + default fit (100 rows)"
BAR = 0.4  # CPU seconds the fmlearn process may cost above the LinearRegression one
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
    # issue 27 item 8's bar: the same 100 dense rows, scikit-learn's plainest estimator against
    # FMRegressor with its defaults (MCMC, 100 sweeps)
    LINEAR: "import sklearn.linear_model; " + ROWS100
            + "sklearn.linear_model.LinearRegression().fit(X, y).predict(X)",
    FM_DEFAULT: "from fmlearn import FMRegressor; " + ROWS100
                + "FMRegressor(random_state=0).fit(X, y).predict(X)",
    "import fmlearn": "import fmlearn",
}

DETAIL = r"""
import sys, time
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
    s = c(); r = orig(self, sig)
    loads.append((c() - s, self.py_func.__module__ + "." + self.py_func.__name__)); return r
D.Dispatcher.compile = compile
import numpy as np
rng = np.random.default_rng(0); X = rng.normal(size=(100, 5))
y = X @ rng.normal(size=5) + 0.1 * rng.normal(size=100)
s = c()
FMRegressor(random_state=0).fit(X, y).predict(X)
fit = c() - s
print("phases of one fmlearn process: from fmlearn import FMRegressor + default fit (100 rows)")
print(f"{'phase':40s} CPU s")
prev = 0.0
for name, v in t:
    print(f"{name:40s} {v - prev:.3f}")
    prev = v
first = loads[0][0] if loads else 0.0
first_name = loads[0][1].rpartition('.')[2] if loads else '-'
print(f"{'first kernel call (' + first_name + ')':40s} {first:.3f}")
other = "other kernels (%d cache loads)" % (len(loads) - 1)
print(f"{other:40s} {sum(x for x, _ in loads[1:]):.3f}")
print(f"{'rest of the fit':40s} {fit - sum(x for x, _ in loads):.3f}")
print()
print(f"{len(loads)} dispatchers loaded by the fit (each load's CPU s, in call order):")
for x, name in loads:
    print(f"  {x:.3f}  {name}")
fm = sorted(m for m in sys.modules if m.startswith("fmlearn"))
print(f"{len(sys.modules)} modules in sys.modules, {len(fm)} of fmlearn:", " ".join(fm))
"""


def run(code, src=None):
    # scikit-learn, SciPy and numba were byte-compiled when pip installed them; fmlearn's
    # source tree (an editable install, or --compare's tree) gets its .pyc files from the
    # unmeasured first run, which PYTHONDONTWRITEBYTECODE would prevent (every process would
    # then compile fmlearn's modules from source, a cost no installed package pays)
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src is not None:  # the fmlearn of another source tree first on the path
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.abspath(src)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                      if p])
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
    ap.add_argument("--bar-only", action="store_true",
                    help="only the bar's cases (LinearRegression, FMRegressor's default fit, the "
                         "two imports)")
    ap.add_argument("--compare", metavar="SRC", default=None,
                    help="another source tree whose fmlearn cases run alternated (\"before\")")
    a = ap.parse_args(argv)
    reps = 3 if a.quick else a.reps
    import numpy as np

    cases = {}
    selected = CASES
    if a.bar_only:
        selected = {k: v for k, v in CASES.items()
                    if k in (LINEAR, FM_DEFAULT, "import sklearn.linear_model",
                             "from fmlearn import FMRegressor", "import fmlearn")}
    for name, code in selected.items():
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
    print()
    print(f"Bar: the fmlearn process at most {BAR} CPU s above the LinearRegression one "
          "(differences within each round)")
    for tag in ([" [before]", " [after]"] if a.compare else [""]):
        d = np.array(res[FM_DEFAULT + tag]) - np.array(res[LINEAR])
        cpu, wall = d.T
        verdict = "met" if np.median(cpu) <= BAR else "not met"
        print(f"  fmlearn{tag} - LinearRegression: CPU {np.median(cpu):+.2f} "
              f"({cpu.min():+.2f} to {cpu.max():+.2f}) s, wall {np.median(wall):+.2f} "
              f"({wall.min():+.2f} to {wall.max():+.2f}) s: {verdict}")
    if a.detail:
        print()
        sys.stdout.flush()
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, "-c", DETAIL], check=True, env=env)


if __name__ == "__main__":
    main()
