"""Set-up CPU, per-sweep CPU and peak memory of ALS / MCMC fits: another revision against this
checkout, alternated (A B A B ...), one fresh process per measurement::

    python benchmarks/bench_fit_setup.py --quick                 # 2,000,000 rows, ALS and MCMC
    python benchmarks/bench_fit_setup.py                         # 2,000,000 and 8,000,000 rows
    python benchmarks/bench_fit_setup.py --old main --rows 8000000 --solvers als --reps 5

The rows are distinct one-hot (user, item) pairs of ``make_recommendation`` (2,000 x 2,000
users and items per 2,000,000 rows, scaled by the square root above), generated once by this
checkout and read by both sides from the same ``.npz`` file. The other revision (``--old``,
default ``main``) is ``git archive``-d into a cache folder and put first on ``PYTHONPATH`` (its
numba cache stays there between runs). Each child process reads the rows, loads the compiled
kernels with a tiny fit of the same configuration, then fits ``FMRegressor(n_factors=8,
n_jobs=1, random_state=0)`` for 1 and for 1 + ``--sweeps`` sweeps (no callback, so no
per-sweep metrics), as ``sbs.py``'s ``epochs`` mode does:

- ``sweep_cpu``: (CPU of the long fit - CPU of a short one) / ``--sweeps``, both fitted after
  a first short fit (a process's first fit pays the first touch of every page it allocates,
  a later one reuses pages freed before: at 8,000,000 rows its set-up is 0.2-0.7 CPU s
  cheaper, which the difference would take for sweeps).
- ``setup_cpu``: CPU of the process's first one-sweep fit less one sweep: validation,
  duplicate merging, colouring, layout, row state, and the fit's end (storing the model);
  ``later set-up`` the same of the second one-sweep fit.
- ``fit_cpu``: CPU of the 1 + ``--sweeps`` sweep fit.
- ``peak_mb``: the rise of the process's peak resident memory (``VmHWM``, reset through
  ``/proc/self/clear_refs`` before each fit) during a fit, the larger of the two: what the
  fit holds beyond the user's arrays, which are counted once in ``data_mb``; ``hwm_mb`` the
  process's whole peak (Python, libraries, the rows and the fits).

A first, unmeasured child per side and solver compiles what the tiny fit does not reach.

Under each table, the bandwidth bound of a sweep: the bytes of ``fmlearn.kernels.cd``'s model
(1,080 per row for these rows) over the copy bandwidth of ``np.copyto`` per CPU second, and
each side's median sweep CPU against it.

A single-system measurement (two revisions of fmlearn); the load average is printed beside
each table. Linux only (``/proc``).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# kernels.cd's model of the bytes a sweep moves, for these rows (two one-hot fields: two colour
# classes covering every row, 4 bytes stored per entry) and k = 8: (k + 1) * 2 * (48 + 8) + 72
BYTES_PER_ROW = 1080
PARAMS = {"als": {"reg_linear": 5.0, "reg_pairwise": 10.0}, "mcmc": {}}


def _status_mb(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def child(a):
    import gc

    import numpy as np
    import scipy.sparse as sp

    from fmlearn import FMRegressor

    z = np.load(a.data)
    X = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
    y = z["y"]
    del z
    params = dict(n_factors=8, n_jobs=1, random_state=0, init_stdev=0.1, **PARAMS[a.solver])
    FMRegressor(solver=a.solver, n_iter=2, **params).fit(X[:500], y[:500]).predict(X[:10])
    cpu, peak = [], 0.0
    # the process's first fit pays the first touch of its pages; the sweep is the difference
    # of two later fits (sbs.py's 'epochs' mode likewise): no callback, no tracking
    for n_iter in (1, 1, 1 + a.sweeps):
        gc.collect()
        with open("/proc/self/clear_refs", "w") as fh:  # VmHWM := VmRSS
            fh.write("5")
        base = _status_mb("VmRSS")
        t0 = time.process_time()
        FMRegressor(solver=a.solver, n_iter=n_iter, **params).fit(X, y)
        cpu.append(time.process_time() - t0)
        peak = max(peak, _status_mb("VmHWM") - base)
    sweep = (cpu[2] - cpu[1]) / a.sweeps
    print("RESULT " + json.dumps({
        "setup_cpu": cpu[0] - sweep, "setup_later_cpu": cpu[1] - sweep, "sweep_cpu": sweep,
        "fit_cpu": cpu[2],
        "peak_mb": peak, "hwm_mb": _status_mb("VmHWM"),
        "data_mb": (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + y.nbytes) / 2**20}))


def copy_bandwidth(reps=7, mb=512):
    """Bytes read + written per CPU second by ``np.copyto`` of ``mb`` MB (one thread; CPU
    seconds, as the sweeps, so that a loaded machine's waiting does not count)."""
    import numpy as np

    a = np.ones(mb * 2**20 // 8)
    b = np.empty_like(a)
    np.copyto(b, a)
    ts = []
    for _ in range(reps):
        t = time.thread_time()
        np.copyto(b, a)
        ts.append(time.thread_time() - t)
    return 2 * a.nbytes / float(np.median(ts))


def make_data(rows, path):
    import numpy as np

    from fmlearn.datasets import make_recommendation

    users = int(round(2000 * max(1.0, (rows / 2_000_000) ** 0.5)))
    b = make_recommendation(users, users, rows, rank=8, unique_pairs=True, random_state=0)
    X = b.X.tocsr()
    np.savez(path, data=X.data, indices=X.indices, indptr=X.indptr, shape=np.array(X.shape),
             y=np.asarray(b.y, dtype=np.float64))


def old_source(rev):
    sha = subprocess.run(["git", "-C", ROOT, "rev-parse", rev], check=True, capture_output=True,
                         text=True).stdout.strip()
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                         "fmlearn-bench", f"src-{sha[:12]}")
    if not os.path.isdir(os.path.join(cache, "src", "fmlearn")):
        os.makedirs(cache, exist_ok=True)
        archive = subprocess.run(["git", "-C", ROOT, "archive", sha, "src"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", cache], input=archive, check=True)
    return os.path.join(cache, "src"), sha[:12]


def run_child(pythonpath, data, solver, sweeps):
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    w0 = time.perf_counter()
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--data", data,
                          "--solver", solver, "--sweeps", str(sweeps)], env=env, check=True,
                         capture_output=True, text=True).stdout
    rec = json.loads(out.split("RESULT ", 1)[1])
    rec["process_wall"] = time.perf_counter() - w0
    return rec


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--old", default="main", help="git revision to compare (default main)")
    p.add_argument("--rows", type=int, nargs="+", default=[2_000_000, 8_000_000])
    p.add_argument("--solvers", nargs="+", default=["als", "mcmc"], choices=["als", "mcmc"])
    p.add_argument("--sweeps", type=int, default=3, help="sweeps timed after the first")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="2,000,000 rows only")
    p.add_argument("--workdir", default=None, help="keep the generated rows here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--solver", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        return child(a)
    rows = [2_000_000] if a.quick else a.rows
    old_path, old_sha = old_source(a.old)
    sides = [(f"{a.old} ({old_sha})", old_path), ("this checkout", "")]
    work = a.workdir or tempfile.mkdtemp(prefix="fmlearn-setup-")
    os.makedirs(work, exist_ok=True)
    import numpy as np

    warm = set()
    for n in rows:
        data = os.path.join(work, f"rows-{n}.npz")
        if not os.path.exists(data):
            make_data(n, data)
        for solver in a.solvers:
            if solver not in warm:  # not measured: compiles what the tiny fit did not reach
                warm.add(solver)
                for _, path in sides:
                    run_child(path, data, solver, 1)
            loads = [os.getloadavg()[0]]
            res = {label: [] for label, _ in sides}
            for _ in range(a.reps):
                for label, path in sides:  # alternated: old, new, old, new, ...
                    res[label].append(run_child(path, data, solver, a.sweeps))
                loads.append(os.getloadavg()[0])
            print(f"\n{n:,} rows, {solver.upper()}, k = 8, 1 thread; {a.reps} alternated "
                  f"repetitions; load average {min(loads):.1f}-{max(loads):.1f}")
            print("| side | set-up CPU s | later set-up CPU s | sweep CPU s | fit CPU s "
                  "| peak MB above the rows | process peak MB | rows MB |")
            print("|---|---|---|---|---|---|---|---|")
            for label, _ in sides:
                cells = []
                for key, fmt in (("setup_cpu", "{:.2f}"), ("setup_later_cpu", "{:.2f}"),
                                 ("sweep_cpu", "{:.3f}"),
                                 ("fit_cpu", "{:.2f}"), ("peak_mb", "{:.0f}"),
                                 ("hwm_mb", "{:.0f}")):
                    v = np.array([r[key] for r in res[label]])
                    cells.append(f"{fmt.format(np.median(v))} ({fmt.format(v.min())}-"
                                 f"{fmt.format(v.max())})")
                cells.append(f"{res[label][0]['data_mb']:.0f}")
                print(f"| {label} | " + " | ".join(cells) + " |")
            bw = copy_bandwidth()
            bound = BYTES_PER_ROW * n / bw
            print(f"Bandwidth bound: {BYTES_PER_ROW} bytes per row and sweep (kernels.cd's model "
                  f"for two one-hot fields, k = 8) at {bw / 1e9:.1f} GB per CPU second "
                  f"(np.copyto, read + write) = {bound:.3f} s; median sweep / bound: " + ", ".join(
                      f"{label} {np.median([r['sweep_cpu'] for r in res[label]]) / bound:.1f}x"
                      for label, _ in sides))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
