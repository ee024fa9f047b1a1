"""The first touch of fresh memory on this machine, with and without transparent huge pages:
what a process's first fit pays for its row state (``fmlearn._memory.empty_for_sweeps``
allocates it with NumPy's huge-page advice) that a later fit, reusing the pages, does not.

    python benchmarks/bench_first_touch.py [--mb 192] [--hold 1500] [--reps 3] [--pause 0]

Each repetition runs three fresh processes, alternated: "huge", "small" (NumPy's huge-page
advice off) and "populate" (huge pages, faulted in by one ``madvise(MADV_POPULATE_WRITE)``
call before the write, Linux 5.14 or later: whether asking for the pages at once is cheaper
than taking them fault by fault). Each first fills ``--hold`` MB (taking the free memory the
system has just been given back, which is still backed by the host of a virtual machine),
then allocates ``--mb`` MB and writes it once; the CPU seconds of that write (user + system,
the page faults and the zeroing of the pages) are reported, then the same for a second array
after the first is freed (pages the process already had: no fault of the host).

On a virtual machine whose balloon device reports free pages to the host (virtio-balloon
``free page reporting``), the host takes back free 2 MiB blocks, so a fresh huge page is
faulted in by the host; small pages come first from the guest's fragments,
which are never reported. ``--pause`` seconds before each process let the system report
what the previous one freed; without them a process often finds that memory still backed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import _sbs_core as core  # the harness's "median (min-max)"

CHILD = r'''
import ctypes, json, resource, sys
import numpy as np
from numpy._core import multiarray as mm
mb, hold, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
held = np.ones(hold * 131072)
mm._set_madvise_hugepage(mode != "small")
libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
def populate(a):  # MADV_POPULATE_WRITE (23) on the array's whole pages
    lo = (a.ctypes.data + 4095) & ~4095
    size = (a.ctypes.data + a.nbytes - lo) & ~4095
    if libc.madvise(lo, size, 23) != 0:
        raise OSError(ctypes.get_errno(), "madvise(MADV_POPULATE_WRITE) failed")
out = {}
for name in ("fresh", "reused"):
    c0 = cpu()
    a = np.empty(mb * 131072)
    if mode == "populate":
        populate(a)
    a.fill(1.0)
    out[name] = cpu() - c0
    del a
print("RESULT " + json.dumps(out))
'''


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=192)
    ap.add_argument("--hold", type=int, default=1500)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--pause", type=float, default=0.0,
                    help="seconds to wait before each process: time for the system to hand "
                         "the previous process's freed memory back to the host")
    a = ap.parse_args(argv)
    res = {"huge": [], "small": [], "populate": []}
    loads = [os.getloadavg()[0]]
    for _ in range(a.reps):
        for mode in res:
            time.sleep(a.pause)
            out = subprocess.run([sys.executable, "-c", CHILD, str(a.mb), str(a.hold), mode],
                                 capture_output=True, text=True, check=True).stdout
            res[mode].append(json.loads(out.split("RESULT ", 1)[1]))
            loads.append(os.getloadavg()[0])
    print(f"{a.mb} MB written once after holding {a.hold} MB; {a.reps} alternated "
          f"repetitions; load average {min(loads):.2f}-{max(loads):.2f}")
    print("| pages | fresh CPU s | fresh ms per MB | reused CPU s |")
    print("|---|---|---|---|")
    for mode, rs in res.items():
        fresh = [r["fresh"] for r in rs]
        print(f"| {mode} | {core.spread(fresh, '{:.3f}')} | "
              f"{1000 * statistics.median(fresh) / a.mb:.2f} | "
              f"{core.spread([r['reused'] for r in rs], '{:.3f}')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
