"""The classic-FM ALS set-up phase by phase (``benchmarks/profile_setup.py``) of two fmlearn
source trees, alternated A B A B ... in fresh processes, one thread: per phase the median and
min-max CPU and wall seconds over the repetitions, and the load average.

    python benchmarks/bench_setup_ab.py --train FILE --old OLD/src [--new NEW/src] [--reps 3]
        [--no-thp]

FILE: what ``profile_setup.py --train`` reads (e.g. the ``.npz`` of 8,000,000 one-hot rows its
``--save`` writes). OLD/src: another source tree (``git archive REV src | tar -x -C OLD``).
``--no-thp`` turns NumPy's transparent-huge-page advice off in the children
(``numpy._core.multiarray._set_madvise_hugepage(False)``), as a fit that does not advise them.
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r'''
import runpy, sys
if sys.argv[1] == "1":
    try:
        from numpy._core import multiarray as mm
    except ImportError:  # NumPy 1
        from numpy.core import multiarray as mm
    mm._set_madvise_hugepage(False)
sys.argv = sys.argv[2:]
sys.path.insert(0, sys.argv[0].rsplit("/", 1)[0])  # profile_setup's helpers
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def run(src, args):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src), NUMBA_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, "1" if args.no_thp else "0",
                          os.path.join(HERE, "profile_setup.py"), "--train", args.train,
                          "--no-trace"], env=env, check=True, capture_output=True,
                         text=True).stdout
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not re.fullmatch(r"[0-9.]+", cells[1]):
            continue
        name = cells[0].replace("&nbsp;", "").lstrip("- ").strip()
        while name in rows:  # a phase called twice (canonical_csr)
            name += "'"
        rows[name] = (float(cells[1]), float(cells[2]))
    return rows


def spread(v):
    return f"{np.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--old", required=True, help="the other tree's src folder")
    ap.add_argument("--new", default=os.path.join(HERE, "..", "src"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-thp", action="store_true")
    args = ap.parse_args(argv)
    got = {"old": [], "new": []}
    loads = [os.getloadavg()[0]]
    for _ in range(args.reps):
        for side in ("old", "new"):
            got[side].append(run(getattr(args, side), args))
            loads.append(os.getloadavg()[0])
    names = list(got["new"][0]) + [n for n in got["old"][0] if n not in got["new"][0]]
    print(f"# {args.reps} alternated repetitions (old new ...), one thread"
          f"{', no THP advice' if args.no_thp else ''}; load average "
          f"{min(loads):.2f}-{max(loads):.2f}")
    print("| phase | old CPU s | new CPU s | old wall s | new wall s |")
    print("|---|---|---|---|---|")
    for name in names:
        cells = []
        for i in (0, 1):
            for side in ("old", "new"):
                v = [r[name][i] for r in got[side] if name in r]
                cells.append(spread(v) if v else "-")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
