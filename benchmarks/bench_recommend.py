"""Top-k recommendation on MovieLens-100K: ``fmlearn.recommend`` against a Python loop over
(user, item) pairs calling the model once per pair, side by side in one process.

The model (FMRegressor, ALS and MCMC, k = 8) is fitted once on the whole of MovieLens-100K;
then 100 users (a fixed random choice) are scored against all 1,682 items, excluding the items
each user rated, and the top 10 kept. The two methods are alternated (loop, recommend, loop,
recommend, ...); each run reports CPU seconds (``time.process_time``, every thread of the
process) next to wall seconds, and the 1-minute load average before and after. Both must give
the same top 10 (checked; the loop's scores come from ``predict``, so it is also the brute-force
reference).

    python benchmarks/bench_recommend.py [--data DIR_OR_FILE] [--reps 2] [--solvers als mcmc]

Data: ``--data`` or fmlearn's default folder (``$FMLEARN_DATA/ml-100k``, else
``~/.cache/fmlearn/ml-100k``; see docs/datasets.md).
"""

import argparse
import os
import time

import numpy as np
import scipy.sparse as sp

from fmlearn import FMRegressor, recommend
from fmlearn.datasets import load_movielens_100k

N_USERS_SCORED, K = 100, 10


def _timed(fn, *args, **kwargs):
    load = os.getloadavg()[0]
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.process_time() - c0, time.perf_counter() - w0, load


def _loop(model, users, n_users, n_items, seen):
    """The baseline: one ``predict`` call per (user, item) row, then a sort per user."""
    d = model.n_features_in_
    top = np.empty((len(users), K), dtype=np.int64)
    for a, u in enumerate(users):
        scores = np.empty(n_items)
        for i in range(n_items):
            row = sp.csr_matrix((np.ones(2), ([0, 0], [u, n_users + i])), shape=(1, d))
            scores[i] = model.predict(row)[0]
        scores[seen[a]] = -np.inf
        top[a] = np.lexsort((np.arange(n_items), -scores))[:K]
    return top


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="MovieLens-100K folder or ratings file")
    ap.add_argument("--reps", type=int, default=2, help="repetitions of each method")
    ap.add_argument("--solvers", nargs="+", default=["als", "mcmc"], choices=["als", "mcmc"])
    args = ap.parse_args(argv)
    ml = load_movielens_100k(args.data)
    n_users, n_items = int(ml.n_users), int(ml.n_items)
    rng = np.random.default_rng(0)
    users = np.sort(rng.choice(n_users, size=N_USERS_SCORED, replace=False))
    user_col = ml.X[:, :n_users].indices  # one user per row, in row order
    item_col = ml.X[:, n_users:n_users + n_items].indices
    seen = [item_col[user_col == u] for u in users]
    print(f"MovieLens-100K ({ml.X.shape[0]} ratings), {N_USERS_SCORED} users x {n_items} "
          f"items, top {K}, rated items excluded; load average at start "
          f"{os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs\n")
    print("| model | method | CPU s | wall s | load avg | CPU speed-up |")
    print("|---|---|---|---|---|---|")
    for solver in args.solvers:
        model = FMRegressor(8, solver=solver, n_iter=100, random_state=0,
                            clip_predictions=False).fit(ml.X, ml.y)
        # compile and warm up both paths outside the timed runs
        recommend(model, users[:2], None, K, user_block=(0, n_users),
                  item_block=(n_users, n_users + n_items), exclude=seen[:2])
        model.predict(ml.X[:1])
        runs = {"loop": [], "recommend": []}
        for _ in range(args.reps):
            ref, c, w, load = _timed(_loop, model, users, n_users, n_items, seen)
            runs["loop"].append((c, w, load))
            top, c, w, load = _timed(recommend, model, users, None, K,
                                     user_block=(0, n_users),
                                     item_block=(n_users, n_users + n_items), exclude=seen)
            runs["recommend"].append((c, w, load))
            if not np.array_equal(top.indices, ref):
                raise SystemExit(f"{solver}: recommend and the loop disagree")
        loop_cpu = np.median([r[0] for r in runs["loop"]])
        for method, rs in runs.items():
            cpu = np.median([r[0] for r in rs])
            wall = np.median([r[1] for r in rs])
            loads = "-".join(f"{r[2]:.1f}" for r in rs)
            speed = f"{loop_cpu / cpu:.0f}x" if method == "recommend" else ""
            name = f"FMRegressor {solver}" + (f" (r = {model.samples_V_.shape[0] * 8})"
                                              if solver == "mcmc" else "")
            print(f"| {name} | {method} | {cpu:.3f} | {wall:.3f} | {loads} | {speed} |")
    print(f"\nmedians over {args.reps} alternated runs; load average at end "
          f"{os.getloadavg()[0]:.2f}; same top {K} from both methods (checked)")


if __name__ == "__main__":
    main()
