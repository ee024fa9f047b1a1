"""Seed 001 Table 1 on the simulator over seeds and truths: the ordering of the six methods,
and iFM against predicting zero on every test window.

    python benchmarks/vtec_seeds.py [--seeds 5] [--truths chapman thin_shell] [--full]

For each truth (the Chapman layer integrated along the slant path, or the thin shell; the
observable is slant TEC either way) and each seed (``random_state`` of the simulator, the
K-means and the estimators), runs :func:`fmlearn.reproduce.vtec.run_protocol` with the
``--quick`` protocol (``--full``: the full one, ~1 CPU-hour each) and prints, per run, the
average RMSE of the six methods, their ordering, and the number of test windows where iFM is
worse than predicting zero (with the worst ratio). An accuracy table, not a speed claim.
"""

import argparse
import dataclasses
import time

import numpy as np

from fmlearn.reproduce import vtec


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--truths", nargs="+", default=["chapman", "thin_shell"])
    ap.add_argument("--full", action="store_true")
    args = ap.parse_args()
    base = vtec.FULL if args.full else vtec.QUICK
    rows = []
    for truth in args.truths:
        for seed in range(args.seeds):
            prot = dataclasses.replace(base, random_state=seed, truth=truth,
                                       observable="slant", jobs=1)
            c0 = time.process_time()
            res = vtec.run_protocol(prot, log=lambda m: None)
            names = list(res["rmse"])
            avg = {n: float(np.mean(list(res["rmse"][n].values()))) for n in names}
            zero = np.array(res["window_rmse"]["zero"])
            ifm = np.array(res["window_rmse"]["iFM"])
            worse = int(np.sum(ifm > zero))
            order = sorted(names, key=avg.get)
            rows.append((truth, seed, avg, res["rmse_zero"], worse, len(zero),
                         float(np.max(ifm / zero)), order, res["params"]["iFM"][0]))
            print(f"{truth:10s} seed {seed}: " + " ".join(f"{n} {avg[n]:.4f}" for n in names)
                  + f" | zero {res['rmse_zero']:.4f} | iFM worse than zero on {worse}/"
                  f"{len(zero)} windows (max ratio {np.max(ifm / zero):.2f}) | iFM reg "
                  f"{res['params']['iFM'][0]['reg']:g} rank {res['params']['iFM'][0]['rank']}"
                  f" | order {' < '.join(order)} | {time.process_time() - c0:.0f} s CPU",
                  flush=True)
    print()
    for truth in args.truths:
        sub = [r for r in rows if r[0] == truth]
        firsts = [r[7][0] for r in sub]
        print(f"{truth}: first place {dict((n, firsts.count(n)) for n in set(firsts))}; "
              f"iFM worse than zero on {sum(r[4] for r in sub)} of {sum(r[5] for r in sub)} "
              f"test windows; iFM's mean rank "
              f"{np.mean([r[7].index('iFM') + 1 for r in sub]):.1f} of 6")


if __name__ == "__main__":
    main()
