"""Convex FM (Hazan's algorithm): seconds per iteration and peak memory.

    PYTHONPATH=src python benchmarks/bench_convex.py movielens [--iters 100]
    PYTHONPATH=src python benchmarks/bench_convex.py synthetic [--rows 2000000 --iters 20]

``movielens``: MovieLens-100K, the project's split (seed 0), eta = 1000, lambda_1 = 3 (the
reproduction's setting): total fit time for ``--iters`` iterations, time per iteration, peak
traced memory during the fit and the test RMSE. ``synthetic``: a MovieLens-like one-hot set of
``--rows`` ratings over 100,000 users + 20,000 items (``make_recommendation``, pairs drawn with
replacement), eta = 10,000. Per-iteration time is (T(iters) - T(1)) / (iters - 1), so the
one-off setup (validation, duplicate merging, first ridge solve) is not counted in it.

Run timings under ``flock /tmp/fmlearn-bench.lock`` so two benchmarks never overlap.
"""

import argparse
import time
import tracemalloc
import warnings

from fmlearn import ConvexFMRegressor


def timed_fit(est, X, y):
    tracemalloc.start()
    t0 = time.perf_counter()
    est.fit(X, y)
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, peak


def bench(X, y, eta, reg, iters, Xte=None, yte=None):
    warnings.simplefilter("ignore")
    kw = dict(trace_bound=eta, reg_linear=reg, tol=0, random_state=0)
    t1, _ = timed_fit(ConvexFMRegressor(max_iter=1, **kw), X, y)
    est = ConvexFMRegressor(max_iter=iters, **kw)
    tn, peak = timed_fit(est, X, y)
    data_mb = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20
    atoms_mb = est.atoms_.nbytes / 2**20
    print(f"rows={X.shape[0]} d={X.shape[1]} nnz={X.nnz} (X: {data_mb:.1f} MB)")
    print(f"fit, {iters} iterations: {tn:.2f} s; per iteration: {(tn - t1) / max(iters - 1, 1):.3f}"
          f" s; setup + 1 iteration: {t1:.2f} s")
    print(f"peak traced memory during fit: {peak / 2**20:.1f} MB; atoms kept: {est.n_atoms_} "
          f"({atoms_mb:.1f} MB)")
    if Xte is not None:
        from sklearn.metrics import root_mean_squared_error

        print(f"test RMSE: {root_mean_squared_error(yte, est.predict(Xte)):.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", choices=["movielens", "synthetic"])
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--rows", type=int, default=2_000_000)
    args = ap.parse_args()
    if args.dataset == "movielens":
        from fmlearn.datasets import load_movielens_100k, movielens_split

        data = load_movielens_100k()
        tr, te = movielens_split(data.X.shape[0], 0)
        bench(data.X[tr], data.y[tr], 1000.0, 3.0, args.iters or 100, data.X[te], data.y[te])
    else:
        from fmlearn.datasets import make_recommendation

        data = make_recommendation(100_000, 20_000, args.rows, rank=4, unique_pairs=False,
                                   random_state=0)
        bench(data.X, data.y, 10_000.0, 3.0, args.iters or 20)


if __name__ == "__main__":
    main()
