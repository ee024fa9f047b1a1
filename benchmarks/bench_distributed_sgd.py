"""Accuracy cost of data-parallel SGD (:func:`fmlearn.distributed.fit` with ``solver="sgd"``,
iterative parameter mixing) against the in-memory SGD fit, on MovieLens-100K.

The project's 75/25 splits (``fmlearn.datasets.movielens_split``, seeds 0, 1, 2, as
``benchmarks/sbs.py``), one-hot user + item rows, ``FMRegressor(n_factors=8, solver="sgd",
random_state=seed)`` with every other parameter at its default (100 epochs). Per seed, in
this order (alternated over the seeds): the in-memory fit, then ``fd.fit`` on a LocalCluster
of 2 single-threaded worker processes with the training rows (in the split's random order)
cut into 1, 2 and 4 equal partitions (after an untimed warm-up fit that compiles or loads
the kernels in the client and the workers). Printed per fit: test RMSE, wall seconds, CPU seconds
(user + sys) of the client and of the workers, and the load average before and after; for 1
partition also the largest difference to the in-memory model (they must be equal).

Run (MovieLens from ``--data``, else ``$FMLEARN_DATA/ml-100k`` or ``~/.cache/fmlearn/ml-100k``)::

    flock /tmp/fmlearn-bench.lock env PYTHONPATH=src python benchmarks/bench_distributed_sgd.py

``--quick`` (10 epochs, one seed) is a smoke test; ``--json PATH`` also writes the rows;
``--local`` fits without a cluster (Dask's synchronous scheduler in this process: the same
models bit for bit, so the same RMSEs; the seconds are not the cluster's).
"""

import argparse
import contextlib
import json
import os
import resource
import time

import numpy as np


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _split(data, seed):
    from fmlearn.datasets import load_movielens_100k, movielens_split

    b = load_movielens_100k(data)
    X, y = b.X.tocsr(), np.asarray(b.y, dtype=np.float64)
    tr, te = movielens_split(X.shape[0], seed)
    return X[tr], y[tr], X[te], y[te]


def _workers_cpu(client):
    return 0.0 if client is None else sum(client.run(_cpu).values())


def _timed(client, fit):
    workers0 = _workers_cpu(client)
    cpu0, wall0 = _cpu(), time.perf_counter()
    model = fit()
    wall = time.perf_counter() - wall0
    return model, wall, _cpu() - cpu0, _workers_cpu(client) - workers0


def _fitter(client, params, Xtr, ytr, p):
    """The fit of ``p`` partitions (0: in memory), as a function of no argument."""
    import dask.array as da

    from fmlearn import FMRegressor
    from fmlearn import distributed as fd

    if p == 0:
        return lambda: FMRegressor(**params).fit(Xtr, ytr)
    size = -(-Xtr.shape[0] // p)
    Xd = da.from_array(Xtr, chunks=(size, Xtr.shape[1]), asarray=False)
    yd = da.from_array(ytr, chunks=size)
    return lambda: fd.fit(FMRegressor(**params), Xd, yd, client=client)


@contextlib.contextmanager
def _cluster(local):
    """A client of 2 single-threaded worker processes, or None (``local``: Dask's synchronous
    scheduler in this process, which gives the same models bit for bit)."""
    if local:
        import dask

        with dask.config.set(scheduler="synchronous"):
            yield None
        return
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


def run(data, seeds, n_iter, parts, local=False):
    rows = []
    with _cluster(local) as client:
        # Warm-up, untimed: numba's kernels compiled or loaded in the client and the workers.
        Xtr, ytr, _, _ = _split(data, seeds[0])
        for p in (0, 2):
            _fitter(client, dict(n_factors=8, solver="sgd", n_iter=1), Xtr, ytr, p)()
        for seed in seeds:
            Xtr, ytr, Xte, yte = _split(data, seed)
            params = dict(n_factors=8, solver="sgd", random_state=seed)
            if n_iter is not None:
                params["n_iter"] = n_iter
            ref = None
            for p in [0, *parts]:  # 0: in memory
                load0 = _load()
                model, wall, cpu, wcpu = _timed(client, _fitter(client, params, Xtr, ytr, p))
                rmse = float(np.sqrt(np.mean((model.predict(Xte) - yte) ** 2)))
                train = float(np.sqrt(np.mean((model.predict(Xtr) - ytr) ** 2)))
                row = {"seed": seed, "partitions": p, "rmse": rmse, "train_rmse": train,
                       "wall_s": wall,
                       "client_cpu_s": cpu, "workers_cpu_s": wcpu, "load_before": load0,
                       "load_after": _load()}
                if p == 0:
                    ref = model
                elif p == 1:
                    row["max_diff_V_vs_memory"] = float(np.max(np.abs(model.V_ - ref.V_)))
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def table(rows):
    print("\n| seed | fit | test RMSE | train RMSE | wall s | client CPU s | workers CPU s |"
          " load before / after |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        fit = "in memory" if r["partitions"] == 0 else f"fd.fit, {r['partitions']} part."
        print(f"| {r['seed']} | {fit} | {r['rmse']:.4f} | {r['train_rmse']:.4f} | "
              f"{r['wall_s']:.1f} | "
              f"{r['client_cpu_s']:.1f} | {r['workers_cpu_s']:.1f} | {r['load_before']} / "
              f"{r['load_after']} |")
    print("\n| fit | mean test RMSE (3 seeds) | vs in memory |")
    print("|---|---|---|")
    base = np.mean([r["rmse"] for r in rows if r["partitions"] == 0])
    for p in sorted({r["partitions"] for r in rows}):
        m = np.mean([r["rmse"] for r in rows if r["partitions"] == p])
        fit = "in memory" if p == 0 else f"fd.fit, {p} partition(s)"
        print(f"| {fit} | {m:.4f} | {m - base:+.4f} ({100 * (m / base - 1):+.1f}%) |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="MovieLens-100K folder or ratings file")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--local", action="store_true",
                    help="no cluster: the synchronous scheduler (same models, RMSE only)")
    args = ap.parse_args()
    seeds, n_iter = ([0], 10) if args.quick else ([0, 1, 2], None)
    rows = run(args.data, seeds, n_iter, [1, 2, 4], args.local)
    table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
