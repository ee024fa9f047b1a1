"""The SGD epoch of another revision against this checkout's, alternated in one process.

Loads ``src/fmlearn/kernels/sgd.py`` and ``src/fmlearn/solvers/sgd.py`` as they are at a git
revision (``--old``, default ``main``) next to the installed ones, then times whole epochs of
the solver (``run_epochs``: order + kernel) of both on the same generated one-hot rows, old and
new in turn (A B A B ...), in CPU seconds (``time.process_time``) and wall seconds, and checks
that both end at the same model (up to float rounding)::

    python benchmarks/bench_sgd_ab.py --rows 2000000 --epochs 3 --reps 5
    python benchmarks/bench_sgd_ab.py --rows 75000 --users 943 --items 1682 --epochs 100

A single-system measurement (fmlearn's two revisions, no peer); the load average is printed
beside the figures.
"""

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from fmlearn.datasets import make_recommendation
from fmlearn.solvers._fm_common import FMState

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_revision(rev, tmp):
    """The kernel and solver modules of ``rev`` as ``fmlearn.kernels._ab_sgd`` and
    ``fmlearn.solvers._ab_sgd`` (their relative imports resolve to the installed package)."""
    mods = []
    for part in ("kernels", "solvers"):
        src = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:src/fmlearn/{part}/sgd.py"],
                             check=True, capture_output=True, text=True).stdout
        if part == "solvers":  # the old solver must run the old kernel
            src = src.replace("from ..kernels.sgd import", "from ..kernels._ab_sgd import")
        path = os.path.join(tmp, f"{part}_ab_sgd.py")
        with open(path, "w") as fh:
            fh.write(src)
        name = f"fmlearn.{part}._ab_sgd"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        mods.append(mod)
    return mods[1]


def run(solver_mod, csr, y, d, args, n_iter):
    settings = solver_mod.SGDSettings(
        n_iter=n_iter, loss_code=0, learning_rate=args.lr, schedule="constant", power_t=0.5,
        reg_bias=0.0, reg_linear=0.0, reg_pairwise=0.1, shuffle=not args.in_order,
        implicit=not args.plain, clip_lo=float(y.min()), clip_hi=float(y.max()))
    rng = np.random.default_rng(1)
    state = FMState(0.0, np.zeros(d), rng.normal(0, 0.1, (d, 8)))
    sw = np.ones(y.shape[0])
    marks = []

    def on_start():
        marks.append((time.process_time(), time.perf_counter()))

    solver_mod.sgd_solver(csr, y, sw, state, 0, settings, 7, None, on_start)
    cpu, wall = time.process_time() - marks[0][0], time.perf_counter() - marks[0][1]
    return cpu / n_iter, wall / n_iter, state


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", default="main", help="git revision of the old code")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--users", type=int, default=2000)
    p.add_argument("--items", type=int, default=2000)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--plain", action="store_true", help="implicit_sgd=False")
    p.add_argument("--in-order", action="store_true", help="shuffle=False")
    args = p.parse_args(argv)
    from fmlearn.solvers import sgd as new_mod

    # the harness's 2M-row set (sbs.py, distinct (user, item) pairs, one-hot) by default
    b = make_recommendation(args.users, args.items, args.rows, rank=8, unique_pairs=True,
                            random_state=0)
    X, y, d = b.X.tocsr(), b.y.astype(np.float64), b.X.shape[1]
    csr = (X.indptr.astype(np.int64), X.indices, X.data.astype(np.float64))
    with tempfile.TemporaryDirectory() as tmp:
        old_mod = load_revision(args.old, tmp)
        systems = {"old": old_mod, "new": new_mod}
        for mod in systems.values():  # compile (or load from numba's cache), untimed
            run(mod, csr, y, d, args, 1)
        times = {name: [] for name in systems}
        states = {}
        load = [os.getloadavg()[0]]
        for _ in range(args.reps):
            for name, mod in systems.items():
                cpu, wall, states[name] = run(mod, csr, y, d, args, args.epochs)
                times[name].append((cpu, wall))
        load.append(os.getloadavg()[0])
    diff = max(np.max(np.abs(states["old"].V - states["new"].V)),
               np.max(np.abs(states["old"].w - states["new"].w)))
    print(f"{args.rows:,} rows, d = {d}, {args.epochs} epochs x {args.reps} reps, "
          f"implicit={not args.plain}, shuffle={not args.in_order}; old = {args.old}; "
          f"load {load[0]:.2f}-{load[1]:.2f}; max |old - new| of the models {diff:.2e}")
    print("| code | CPU s per epoch (median, min-max) | wall s per epoch | ratio (CPU) |")
    print("|---|---|---|---|")
    med = {n: np.median([c for c, _ in t]) for n, t in times.items()}
    for name, t in times.items():
        c, w = np.array(t).T
        print(f"| {name} | {med[name]:.4f} ({c.min():.4f}-{c.max():.4f}) | {np.median(w):.4f} "
              f"| {med[name] / med['old']:.2f}x |")


if __name__ == "__main__":
    main()
