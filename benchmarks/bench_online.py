"""OCCFM over a long stream: seconds and learner state per block of rounds (single system).

The flat-cost check of issue 5: OCCFM (``CCFMRegressor(trace_bound=20, gamma_power=1)``) on a
planted one-hot stream of 10^6 rows, d = 10,000 in two fields of 5,000 (``make_ccfm_stream``);
for every block of 100,000 rounds, the wall seconds, rounds per second and the bytes of the
learner's state. It measures fmlearn alone (no peer learns this model); the comparisons of the
online learners with River and Vowpal Wabbit are the ``online-*`` scenarios of ``sbs.py``.

Usage::

    python benchmarks/bench_online.py [--rows 1000000] [--d 10000] [--block 100000]
"""

import argparse
import json
import os
import time

import numpy as np

from fmlearn import CCFMRegressor
from fmlearn.datasets import make_ccfm_stream


def long_run(n=1_000_000, d=10_000, block=100_000):
    X, y, _ = make_ccfm_stream(n, d, rank=4, trace_norm=20.0, fields=[d // 2, d - d // 2],
                               noise=0.3, random_state=0)
    m = CCFMRegressor(trace_bound=20.0, gamma_power=1.0, shuffle=False)
    m.partial_fit(X[:10], y[:10])  # compiles the kernels outside the timing
    rows = []
    for start in range(10, n, block):
        sl = slice(start, min(start + block, n))
        t0 = time.perf_counter()
        m.partial_fit(X[sl], y[sl])
        sec = time.perf_counter() - t0
        state = sum(v.nbytes for k, v in vars(m).items()
                    if k.startswith("state_") and isinstance(v, np.ndarray))
        rows.append({"rounds": int(sl.stop), "seconds": sec,
                     "rounds_per_s": (sl.stop - sl.start) / sec, "state_mb": state / 2**20,
                     "davidson_steps": int(m.state_ist_[5]), "load": os.getloadavg()[0]})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--d", type=int, default=10_000)
    p.add_argument("--block", type=int, default=100_000)
    args = p.parse_args(argv)
    print(f"load average at the start: {os.getloadavg()[0]:.2f}", flush=True)
    return long_run(args.rows, args.d, args.block)


if __name__ == "__main__":
    main()
