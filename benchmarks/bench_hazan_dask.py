"""Hazan's convex FM on Dask (:func:`fmlearn.distributed.fit_convex`) against the in-memory fit.

    PYTHONPATH=src flock /tmp/fmlearn-bench.lock python benchmarks/bench_hazan_dask.py \
        [--rows 200000 --users 3000 --items 1000 --parts 4 --iters 4 --repeat 2]

Data: one-hot user + item rows from :func:`fmlearn.datasets.make_recommendation` (pairs drawn
with replacement), generated **on the workers**, partition i on worker i mod n_workers, so
that the client never holds the rows (as after loading them on a cluster); the in-memory fit
gets the same rows fetched once. Model: ``ConvexFMRegressor(trace_bound=eta, reg_linear=3,
tol=0, random_state=0)``.

1. Seconds per iteration, in memory vs ``fit_convex`` on a LocalCluster of 1 and of 2
   single-threaded worker processes: per iteration = (T(iters + 1) - T(1)) / iters, which
   leaves out the setup (validation, building the blocks, the first ridge solve). The three
   modes are alternated (A B C A B C ...) so that they see the same machine load; client CPU
   seconds and the workers' CPU seconds (summed over workers, from ``time.process_time`` on
   each) are printed next to wall seconds, with the load average.
2. Communication vs compute: the map-reduce rounds per iteration (``DaskRows.rounds``) times the
   wall time of an empty round on the same cluster (one task per partition returning a d-vector
   of zeros, gathered and summed on the client, as a round does) is the per-iteration cost of
   going through Dask; the compute is the CPU seconds per iteration, of the workers (the row
   products) and of the client (ARPACK, CG, the atoms, and Dask's own bookkeeping). Bytes per
   round: at most two d-vectors to and one from each partition's task.
3. Client memory: peak traced (``tracemalloc``) memory of the client during ``fit_convex``
   at two widths d (users scaled, same rows), against the size of the rows in CSR.

``--quick`` shrinks everything for a smoke test.
"""

import argparse
import os
import time
import tracemalloc
import warnings

import numpy as np


def _generate(n, users, items, seed):
    from fmlearn.datasets import make_recommendation

    b = make_recommendation(users, items, n, unique_pairs=False, random_state=seed)
    X, y = b.X, b.y
    return X.tocsr(), np.asarray(y, dtype=np.float64)


def _on_workers(client, n_rows, parts, users, items):
    """A Dask array of CSR partitions (and y) generated and kept on the workers."""
    import operator

    import dask.array as da
    import scipy.sparse as sp
    from distributed import wait

    workers = sorted(client.scheduler_info()["workers"])
    rows = n_rows // parts
    d = users + items
    futs = [client.submit(_generate, rows, users, items, 100 + i, pure=False,
                          workers=[workers[i % len(workers)]]) for i in range(parts)]
    xs = [client.submit(operator.getitem, f, 0, workers=[workers[i % len(workers)]])
          for i, f in enumerate(futs)]
    ys = [client.submit(operator.getitem, f, 1, workers=[workers[i % len(workers)]])
          for i, f in enumerate(futs)]
    wait(xs + ys)
    del futs
    meta = sp.csr_matrix((0, d))
    Xd = da.concatenate([da.from_delayed(f, (rows, d), np.float64, meta=meta) for f in xs])
    yd = da.concatenate([da.from_delayed(f, (rows,), np.float64) for f in ys])
    return Xd, yd


def _in_memory(n_rows, parts, users, items):
    import scipy.sparse as sp

    blocks = [_generate(n_rows // parts, users, items, 100 + i) for i in range(parts)]
    return sp.vstack([b[0] for b in blocks]).tocsr(), np.concatenate([b[1] for b in blocks])


def _worker_cpu(client):
    return sum(client.run(time.process_time).values())


def _estimator(iters, eta):
    from fmlearn import ConvexFMRegressor

    return ConvexFMRegressor(trace_bound=eta, reg_linear=3.0, max_iter=iters, tol=0,
                             random_state=0)


def _timed(run, client=None):
    cpu_w = _worker_cpu(client) if client is not None else 0.0
    cpu, t0 = time.process_time(), time.perf_counter()
    m = run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu
    if client is not None:
        cpu_w = _worker_cpu(client) - cpu_w
    return m, wall, cpu, cpu_w


def _empty_round(client, parts, d, repeat=20):
    """Wall seconds of a map-reduce round that computes nothing: one task per partition on
    its worker returning a d-vector, gathered and summed on the client."""
    workers = sorted(client.scheduler_info()["workers"])

    def zeros(d):
        return np.zeros(d)

    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        futs = [client.submit(zeros, d, pure=False, workers=[workers[i % len(workers)]])
                for i in range(parts)]
        sum(client.gather(futs))
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def per_iteration(args):
    from distributed import Client, LocalCluster

    import fmlearn.distributed._hazan as hz
    from fmlearn.distributed import fit_convex

    rounds = []
    close = hz.DaskRows.close

    def counting_close(self):
        rounds.append(self.rounds)
        close(self)

    hz.DaskRows.close = counting_close
    d = args.users + args.items
    X, y = _in_memory(args.rows, args.parts, args.users, args.items)
    results = {"memory": [], "1 worker": [], "2 workers": []}
    empty = {}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as c1, Client(c1) as cl1, \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                         dashboard_address=None) as c2, Client(c2) as cl2:
        data = {"1 worker": (cl1, _on_workers(cl1, args.rows, args.parts, args.users,
                                              args.items)),
                "2 workers": (cl2, _on_workers(cl2, args.rows, args.parts, args.users,
                                               args.items))}
        for name, (cl, _) in data.items():
            empty[name] = _empty_round(cl, args.parts, d)
            fit_convex(_estimator(1, args.eta), *data[name][1], client=cl)  # warm-up
        _estimator(1, args.eta).fit(X, y)  # warm-up (numba compiles on the first call)
        print("load average before:", os.getloadavg(), flush=True)
        for rep in range(args.repeat):
            for name in results:
                timings = []
                for iters in (1, args.iters + 1):
                    if name == "memory":
                        m, wall, cpu, cpu_w = _timed(
                            lambda it=iters: _estimator(it, args.eta).fit(X, y))
                        n_rounds = None
                    else:
                        cl, (Xd, yd) = data[name]
                        m, wall, cpu, cpu_w = _timed(
                            lambda it=iters, cl=cl, Xd=Xd, yd=yd:
                            fit_convex(_estimator(it, args.eta), Xd, yd, client=cl), cl)
                        n_rounds = rounds[-1]
                    timings.append((wall, cpu, cpu_w, n_rounds, m))
                (w1, c1_, cw1, r1, _), (wn, cn, cwn, rn, m) = timings
                per = {"wall": (wn - w1) / args.iters, "client_cpu": (cn - c1_) / args.iters,
                       "worker_cpu": (cwn - cw1) / args.iters,
                       "rounds": None if rn is None else (rn - r1) / args.iters,
                       "objective": m.objective_}
                results[name].append(per)
                print(f"rep {rep} {name:9s}: {per['wall']:.3f} s/iter wall, client CPU "
                      f"{per['client_cpu']:.3f} s, workers CPU {per['worker_cpu']:.3f} s"
                      + ("" if rn is None else f", {per['rounds']:.1f} rounds/iter")
                      + f", objective {m.objective_:.10g}", flush=True)
        print("load average after:", os.getloadavg())
    print(f"\nrows {args.rows}, d {d}, nnz {X.nnz}, {args.parts} partitions, eta {args.eta}; "
          f"a round sends each partition's task <= 2 d-vectors ({16 * d} bytes) and gets "
          f"one back ({8 * d} bytes)")
    print("| mode | s / iteration (wall) | client CPU s | workers CPU s | rounds / iter | "
          "empty round (ms) | rounds x empty round (s / iter) |")
    print("|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        wall = np.median([r["wall"] for r in runs])
        ccpu = np.median([r["client_cpu"] for r in runs])
        wcpu = np.median([r["worker_cpu"] for r in runs])
        if name == "memory":
            print(f"| {name} | {wall:.3f} | {ccpu:.3f} | - | - | - | - |")
            continue
        nr = np.median([r["rounds"] for r in runs])
        print(f"| {name} | {wall:.3f} | {ccpu:.3f} | {wcpu:.3f} | {nr:.1f} | "
              f"{1e3 * empty[name]:.1f} | {nr * empty[name]:.3f} |")
    objs = {name: runs[-1]["objective"] for name, runs in results.items()}
    ref = objs["memory"]
    print("objective relative difference to memory:",
          {k: abs(v - ref) / abs(ref) for k, v in objs.items() if k != "memory"})


def client_memory(args):
    from distributed import Client, LocalCluster

    from fmlearn.distributed import fit_convex

    print("\n| d | rows | CSR data on the workers (MB) | client peak traced (MB) | "
          "atoms d x r (MB) |")
    print("|---|---|---|---|---|")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for users in (args.users, 4 * args.users):
            Xd, yd = _on_workers(client, args.rows, args.parts, users, args.items)
            d = users + args.items
            est = _estimator(args.iters, args.eta)
            tracemalloc.start()
            fit_convex(est, Xd, yd, client=client)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            nnz = 2 * args.rows  # one-hot user + item
            data_mb = (nnz * 12 + 8 * (args.rows + 1)) / 2**20
            atoms_mb = est.atoms_.nbytes / 2**20
            print(f"| {d} | {args.rows} | {data_mb:.1f} | {peak / 2**20:.1f} | "
                  f"{atoms_mb:.2f} |", flush=True)
            del Xd, yd


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--users", type=int, default=3000)
    p.add_argument("--items", type=int, default=1000)
    p.add_argument("--parts", type=int, default=4)
    p.add_argument("--iters", type=int, default=4)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--eta", type=float, default=1000.0)
    p.add_argument("--part", choices=["time", "memory", "all"], default="all")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.users, args.items, args.iters, args.repeat = 20_000, 300, 100, 2, 1
    warnings.simplefilter("ignore")
    print("load average:", os.getloadavg(), "cpus:", os.cpu_count())
    if args.part in ("time", "all"):
        per_iteration(args)
    if args.part in ("memory", "all"):
        client_memory(args)


if __name__ == "__main__":
    main()
