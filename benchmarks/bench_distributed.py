"""Throughput of the Dask backend and of out-of-core streaming from files.

1. ``--part 1``: rows per second of the data-parallel one-pass gFM step
   (:func:`fmlearn.distributed.fit_one_pass`) on a LocalCluster of 2 single-threaded worker
   processes, against the in-memory solver (``GFMRegressor.partial_fit`` with ``n_jobs=2``
   threads) on the same rows: dense Gaussian, d = 1000, k = 10, batches of n = 10 k d =
   100,000 rows in 4 partitions of 25,000. The rows are generated on the workers before timing,
   partition i on worker i % 2 (the cluster holds the data, as it would after loading it, and
   every batch is split evenly), then fetched to the client for the in-memory run. The first
   batch (spectral initialisation) is timed apart from the steady steps, and the largest
   relative difference between the two final states is printed.
2. ``--part 2``: streaming from a svmlight file vs in memory. Each mode runs in a fresh
   subprocess so that its peak resident memory (``VmHWM``) is its own: parsing alone
   (``iter_svmlight``), :func:`fmlearn.stream.fit_stream` (parse + train, chunk by chunk),
   loading the whole file then training on the same batches, and training alone on
   preloaded data. Two workloads: the classic FM with SGD on a sparse file, and the one-pass
   gFM on a dense file.

3. ``--part 3``: exact distributed ALS / MCMC (:func:`fmlearn.distributed.fit`) on
   2,000,000 distinct one-hot (user, item) rows (``make_recommendation(2000, 2000, ...,
   rank=8, unique_pairs=True)``, the generator of ``sbs_fm.py rows``), k = 8, 4 partitions:
   seconds per sweep in memory (``n_jobs`` 1 and 2) against ``fd.fit`` on a LocalCluster of 1
   and of 2 single-threaded worker processes, alternated; per fit the CPU seconds of the
   client and the workers next to the wall seconds; per distributed sweep the time waiting
   for the rounds, the slowest partition's kernel CPU in them, the client's own steps and
   the bytes sent per round; then the client's peak traced memory (``tracemalloc``) of a
   distributed fit at two widths d (200,000 rows; users = items = 2000 and 20,000).

4. ``--part 4``: the bar of the exact distributed sweep (one command): ``fd.fit`` on a
   LocalCluster of 2 worker processes x 1 thread against ``FMRegressor(n_jobs=2).fit`` in
   memory, ALS and MCMC, ``--rows`` (default here 600,000) distinct one-hot (user, item)
   rows, k = 8, ``--parts`` partitions (default 4) persisted on the workers before timing,
   alternated (mem, dask, mem, dask, ...) ``--repeat`` times (>= 3). Set-up is excluded by
   difference: each mode runs a fit of 1 sweep and a fit of 1 + ``--sweeps`` sweeps (both
   alternated); per sweep wall = (wall(long) - wall(short)) / sweeps, and likewise the CPU
   seconds of the client process (which runs the LocalCluster's scheduler too) and of the
   workers (``getrusage`` in each worker). The wall seconds per sweep of the table are the
   median of the long fit's ``history_["iter_time"]`` after its first sweep (so the set-up --
   validation, colouring, the first cache build -- and the first sweep are excluded; no
   sweep of the long fit rebuilds the caches); the ratio by difference is printed next to it
   (noisier under load: it subtracts two fits' set-ups). Prints one JSON line per run and a
   summary table with the median and min-max over the repetitions and the load average.

5. ``--part 5``: where a distributed sweep's time goes (``--rows``, default 600,000;
   ``--workers``, default 2; ``--parts``): per round, the wall time the client waits, the
   slowest worker's kernel CPU in it, the client's own steps, and the rest (messages and
   wake-ups), from ``est.distributed_`` of ``--repeat`` fits per solver; per worker and class
   round between the workers, its kernel, its wait for the peers' sums and its step
   (median, 10th-90th percentile, ``_fm_worker.TRACE``); then the round trip
   of the socket channel alone on the same workers: an empty message, a compact round's
   bytes (m = 2000 values out, a (2, m) array back per partition) and a full round's (four
   m-arrays each way); median, 10th and 90th percentile of 300.
6. ``--part 6``: the workers' round kernel on one partition (``--rows``, default 300,000
   one-hot rows): the former walk through the CSR rows against the class-major layout,
   alternated, CPU ns per row and round (median, min-max of ``--repeat``).

7. ``--part 7 --base DIR``: the distributed sweep of this source tree against another (DIR:
   the ``src`` directory of an older tree, e.g. ``git archive <commit> src | tar -x -C
   /tmp/old`` then ``--base /tmp/old/src``): each side a fresh process (its own LocalCluster
   of 2 workers x 1 thread, ``--rows`` default 600,000, ``--parts``), alternated A B A B
   ``--repeat`` times; per solver the median seconds per sweep after the first of a fit of
   1 + ``--sweeps`` (default 6) sweeps, the CPU seconds of the client and the workers per
   sweep, the ratio B / A of each pair (median, min-max), and each fit's ``V_sum`` (the two
   trees must give the same model).

Part 4 takes ``--modes dask,dask-client`` to alternate the class rounds between the workers
(the default) and every round through the client, both against the in-memory fit.

Run under the benchmark lock, e.g.::

    flock /tmp/fmlearn-bench.lock env PYTHONPATH=src python benchmarks/bench_distributed.py

``--quick`` shrinks everything for a smoke test.
"""

import argparse
import json
import operator
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np


# -- part 1: Dask one-pass step ---------------------------------------------------------------
def _sample(truth, n, seed):
    return truth.sample(n, np.random.default_rng(seed))


def dask_one_pass(d, k, T, part_rows, repeat):
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    from fmlearn import GFMRegressor
    from fmlearn.datasets import make_gfm
    from fmlearn.diagnostics import recovery_error
    from fmlearn.distributed import fit_one_pass

    n = 10 * k * d
    _, _, truth = make_gfm(1, d, k, random_state=0)
    n_parts = n * T // part_rows
    out = {"d": d, "k": k, "n": n, "T": T, "partition_rows": part_rows, "repeat": repeat}
    runs = {"dask_first": [], "dask_step": [], "mem_first": [], "mem_step": []}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        # Partition i is generated on worker i % 2: every batch is spread evenly (the step
        # waits for its slowest worker).
        workers = sorted(client.scheduler_info()["workers"])
        futs = [client.submit(_sample, truth, part_rows, 1000 + i, pure=False,
                              workers=[workers[i % 2]]) for i in range(n_parts)]
        xs = [client.submit(operator.getitem, f, 0, workers=[workers[i % 2]])
              for i, f in enumerate(futs)]
        ys = [client.submit(operator.getitem, f, 1, workers=[workers[i % 2]])
              for i, f in enumerate(futs)]
        wait(xs + ys)
        del futs
        Xd = da.concatenate([da.from_delayed(f, (part_rows, d), np.float64) for f in xs])
        yd = da.concatenate([da.from_delayed(f, (part_rows,), np.float64) for f in ys])
        X, y = client.compute([Xd, yd], sync=True)
        # Alternate the two so that both see the same (shared, varying) machine load.
        for _ in range(repeat):
            est = GFMRegressor(k, batch_size=n, warm_start=True, random_state=0)
            t0 = time.perf_counter()
            fit_one_pass(est, Xd[:n], yd[:n], client=client)
            runs["dask_first"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            fit_one_pass(est, Xd[n:], yd[n:], client=client)
            runs["dask_step"].append((time.perf_counter() - t0) / (T - 1))
            ref = GFMRegressor(k, batch_size=n, random_state=0, n_jobs=2)
            times = []
            for t in range(T):
                t0 = time.perf_counter()
                ref.partial_fit(X[t * n:(t + 1) * n], y[t * n:(t + 1) * n])
                times.append(time.perf_counter() - t0)
            runs["mem_first"].append(times[0])
            runs["mem_step"].append(float(np.mean(times[1:])))
    for key, vals in runs.items():
        out[key + "_s"] = float(np.median(vals))
        out[key + "_all"] = [round(v, 3) for v in vals]
    out["dask_rows_s"] = n / out["dask_step_s"]
    out["mem_rows_s"] = n / out["mem_step_s"]
    out["max_rel_diff_V"] = float(np.max(np.abs(est.working_V_ - ref.working_V_))
                                  / np.max(np.abs(ref.working_V_)))
    out["batches"] = int(est.n_batches_)
    out["rel_error"] = float(recovery_error(est.w_, est.M_, truth.w, truth.M))
    return out


# -- part 3: exact distributed ALS / MCMC --------------------------------------------------------
def _cpu_of_workers(client):
    import resource

    def usage():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    return sum(client.run(usage).values())


def _one_hot_rows(n, users, items):
    from fmlearn.datasets import make_recommendation

    b = make_recommendation(users, items, n, rank=8, unique_pairs=True, random_state=0)
    return b.X.tocsr(), np.asarray(b.y, dtype=np.float64)


def dask_sweeps(n, k, sweeps, repeat, parts=4):
    import dask.array as da
    from distributed import Client, LocalCluster

    from fmlearn import FMRegressor
    from fmlearn import distributed as fd

    X, y = _one_hot_rows(n, 2000, 2000)
    rows = -(-n // parts)
    Xd = da.from_array(X, chunks=(rows, X.shape[1]), asarray=False)
    yd = da.from_array(y, chunks=rows)
    out = []
    kw = {"als": dict(reg_linear=1.0, reg_pairwise=1.0), "mcmc": {}}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as c1, Client(c1) as cl1, \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                         dashboard_address=None) as c2, Client(c2) as cl2:
        for solver in ("als", "mcmc"):
            def make(solver=solver, n_jobs=None):
                return FMRegressor(k, solver=solver, n_iter=sweeps, random_state=0,
                                   n_jobs=n_jobs, **kw[solver])
            # warm-up: compile / load the kernels everywhere
            make(n_jobs=1).set_params(n_iter=1).fit(X[:5000], y[:5000])
            for cl in (cl1, cl2):
                fd.fit(make().set_params(n_iter=1), Xd[:5000], yd[:5000], client=cl)
            for rep in range(repeat):
                for mode in ("mem1", "mem2", "dask1", "dask2"):
                    row = {"solver": solver, "mode": mode, "rep": rep, "rows": n, "k": k,
                           "load": os.getloadavg()[0]}
                    cpu0 = time.process_time()
                    t0 = time.perf_counter()
                    if mode.startswith("mem"):
                        est = make(n_jobs=int(mode[-1])).fit(X, y)
                        wcpu = 0.0
                    else:
                        cl = cl1 if mode == "dask1" else cl2
                        w0 = _cpu_of_workers(cl)
                        est = fd.fit(make(), Xd, yd, client=cl)
                        wcpu = _cpu_of_workers(cl) - w0
                        info = est.distributed_
                        done = est.n_iter_
                        row.update(
                            wait_s_per_sweep=info["seconds_rounds"] / done,
                            kernel_cpu_s_per_sweep=info["seconds_rounds_compute"] / done,
                            client_s_per_sweep=info["seconds_client"] / done,
                            rounds_per_sweep=info["rounds"] / done,
                            bytes_per_round=info["bytes_sent"] / info["rounds"])
                    row.update(fit_wall_s=time.perf_counter() - t0,
                               fit_cpu_client_s=time.process_time() - cpu0,
                               fit_cpu_workers_s=wcpu,
                               s_per_sweep=float(np.median(est.history_["iter_time"][1:])),
                               train_rmse=float(np.sqrt(np.mean((est.predict(X) - y) ** 2))))
                    print(json.dumps(row), flush=True)
                    out.append(row)
    return out


def sweep_bar(n, k, sweeps, repeat, parts, modes=("mem", "dask")):
    """Part 4: per-sweep wall and CPU, fd.fit on 2 workers x 1 thread vs in memory n_jobs=2
    (``modes``: "mem", "dask" and "dask-client", the distributed fit with every class round
    through the client instead of between the workers; one table line per distributed mode,
    its ratio to "mem")."""
    import dask.array as da
    from distributed import Client, LocalCluster

    from fmlearn import FMRegressor
    from fmlearn import distributed as fd

    X, y = _one_hot_rows(n, 2000, 2000)
    rows = -(-n // parts)
    kw = {"als": dict(reg_linear=1.0, reg_pairwise=1.0), "mcmc": {}}
    out = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        Xd = da.from_array(X, chunks=(rows, X.shape[1]), asarray=False)
        yd = da.from_array(y, chunks=rows)
        Xd, yd = client.persist([Xd, yd])  # the rows live on the workers before timing
        for solver in ("als", "mcmc"):
            def make(n_iter, solver=solver, n_jobs=None):
                return FMRegressor(k, solver=solver, n_iter=n_iter, random_state=0,
                                   n_jobs=n_jobs, **kw[solver])
            # warm-up: compile / load the kernels in every process
            make(2, n_jobs=2).fit(X[:5000], y[:5000])
            fd.fit(make(2), Xd[:5000], yd[:5000], client=client)
            runs = {mode: [] for mode in modes}
            for rep in range(repeat):
                fits = {}
                for n_iter in (1, 1 + sweeps):
                    for mode in modes:
                        load = os.getloadavg()[0]
                        w0 = _cpu_of_workers(client)
                        cpu0 = time.process_time()
                        t0 = time.perf_counter()
                        if mode == "mem":
                            est = make(n_iter, n_jobs=2).fit(X, y)
                        else:
                            est = fd.fit(make(n_iter), Xd, yd, client=client,
                                         rounds="workers" if mode == "dask" else "client")
                        wall = time.perf_counter() - t0
                        cpu = time.process_time() - cpu0
                        wcpu = _cpu_of_workers(client) - w0
                        fits[mode, n_iter] = (wall, cpu, wcpu, load, est)
                for mode in modes:
                    (w1, c1, x1, _, _), (w2, c2, x2, load, est) = (fits[mode, 1],
                                                                  fits[mode, 1 + sweeps])
                    row = {"solver": solver, "mode": mode, "rep": rep, "rows": n, "k": k,
                           "parts": parts, "load": load,
                           "sweep_wall_s": (w2 - w1) / sweeps,
                           "sweep_cpu_client_s": (c2 - c1) / sweeps,
                           "sweep_cpu_workers_s": (x2 - x1) / sweeps,
                           "iter_time_median_s": float(np.median(est.history_["iter_time"][1:])),
                           "fit_wall_s": w2,
                           "train_rmse": float(np.sqrt(np.mean((est.predict(X) - y) ** 2)))}
                    if mode != "mem":
                        info = est.distributed_
                        row.update(rounds_per_sweep=info["rounds"] / est.n_iter_,
                                   bytes_per_sweep=info["bytes_sent"] / est.n_iter_)
                    print(json.dumps(row), flush=True)
                    runs[mode].append(row)
                    out.append(row)
            for mode in modes[1:]:
                _bar_line(solver, n, parts, mode, runs["mem"], runs[mode])
    return out


def _bar_line(solver, n, parts, mode, m, dk):
    """One line of part 4's table: the distributed mode ``mode`` (runs ``dk``) against the
    in-memory runs ``m``, paired by repetition."""
    it = "iter_time_median_s"
    ratio = [b[it] / a[it] for a, b in zip(m, dk, strict=True)]
    ratio_d = [b["sweep_wall_s"] / a["sweep_wall_s"] for a, b in zip(m, dk, strict=True)]
    cpu = [(b["sweep_cpu_client_s"] + b["sweep_cpu_workers_s"])
           / max(a["sweep_cpu_client_s"], 1e-9) for a, b in zip(m, dk, strict=True)]
    diff = abs(m[-1]["train_rmse"] - dk[-1]["train_rmse"])

    def med(v, f=3):
        return f"{np.median(v):.{f}f} ({min(v):.{f}f}-{max(v):.{f}f})"

    print(f"| {solver} | {mode} | {n:,} | {parts} | {med([r[it] for r in m])} | "
          f"{med([r[it] for r in dk])} | **{med(ratio, 2)}** | {med(ratio_d, 2)} | "
          f"{med([r['sweep_cpu_client_s'] for r in m])} | "
          f"{med([r['sweep_cpu_client_s'] for r in dk])} + "
          f"{med([r['sweep_cpu_workers_s'] for r in dk])} | {med(cpu, 2)} | "
          f"{min(r['load'] for r in m + dk):.1f}-{max(r['load'] for r in m + dk):.1f}"
          f" | {diff:.1e} |", flush=True)


def sweep_ab_child(n, k, sweeps, parts, solvers):
    """One side of part 7, in a fresh process (its PYTHONPATH picks the source tree): per
    solver one ``fd.fit`` of 1 + ``sweeps`` sweeps on a 2-worker LocalCluster; prints one JSON
    line per solver (median seconds per sweep after the first, the CPU seconds of the client
    and of the workers per sweep)."""
    import dask.array as da
    from distributed import Client, LocalCluster

    import fmlearn
    from fmlearn import FMRegressor
    from fmlearn import distributed as fd

    X, y = _one_hot_rows(n, 2000, 2000)
    rows = -(-n // parts)
    kw = {"als": dict(reg_linear=1.0, reg_pairwise=1.0), "mcmc": {}}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        Xd = da.from_array(X, chunks=(rows, X.shape[1]), asarray=False)
        yd = da.from_array(y, chunks=rows)
        Xd, yd = client.persist([Xd, yd])
        for solver in solvers:
            def make(n_iter, solver=solver):
                return FMRegressor(k, solver=solver, n_iter=n_iter, random_state=0,
                                   **kw[solver])
            fd.fit(make(2), Xd[:5000], yd[:5000], client=client)  # warm-up
            w0 = _cpu_of_workers(client)
            cpu0 = time.process_time()
            est = fd.fit(make(1 + sweeps), Xd, yd, client=client)
            print(json.dumps({
                "solver": solver, "src": os.path.dirname(os.path.dirname(fmlearn.__file__)),
                "rows": n, "load": os.getloadavg()[0],
                "s_per_sweep": float(np.median(est.history_["iter_time"][1:])),
                "cpu_client_per_sweep": (time.process_time() - cpu0) / (1 + sweeps),
                "cpu_workers_per_sweep": (_cpu_of_workers(client) - w0) / (1 + sweeps),
                "V_sum": float(np.sum(est.V_))}), flush=True)


def sweep_ab(n, sweeps, repeat, parts, base):
    """Part 7: the distributed sweep of this source tree (B) against another (A: ``--base``,
    the ``src`` directory of an older tree), each side a fresh process with its PYTHONPATH,
    alternated A B A B ... ``repeat`` times; seconds per sweep (median of the fit's sweeps
    after the first) and CPU seconds per sweep, median (min-max) per side and the ratio
    B / A of each pair. The two sides must give the same model (``V_sum`` printed)."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    sides = {"A": os.path.abspath(base), "B": os.path.abspath(here)}
    runs = {"A": [], "B": []}
    for _ in range(repeat):
        for side in ("A", "B"):
            env = dict(os.environ, PYTHONPATH=sides[side])
            cmd = [sys.executable, os.path.abspath(__file__), "--part", "7", "--child",
                   "--rows", str(n), "--sweeps", str(sweeps), "--parts", str(parts)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            for line in out.stdout.splitlines():
                if line.startswith("{"):
                    row = json.loads(line)
                    row["side"] = side
                    print(json.dumps(row), flush=True)
                    runs[side].append(row)

    def med(v, f=4):
        return f"{np.median(v):.{f}f} ({min(v):.{f}f}-{max(v):.{f}f})"

    print("| solver | rows | A s/sweep | B s/sweep | **B / A** | A CPU client + workers | "
          "B CPU client + workers | load |\n|---|---|---|---|---|---|---|---|")
    for solver in ("als", "mcmc"):
        a = [r for r in runs["A"] if r["solver"] == solver]
        b = [r for r in runs["B"] if r["solver"] == solver]
        ratio = [y["s_per_sweep"] / x["s_per_sweep"] for x, y in zip(a, b, strict=True)]
        load = [r["load"] for r in a + b]
        print(f"| {solver} | {n:,} | {med([r['s_per_sweep'] for r in a])} | "
              f"{med([r['s_per_sweep'] for r in b])} | **{med(ratio, 2)}** | "
              f"{med([r['cpu_client_per_sweep'] for r in a], 3)} + "
              f"{med([r['cpu_workers_per_sweep'] for r in a], 3)} | "
              f"{med([r['cpu_client_per_sweep'] for r in b], 3)} + "
              f"{med([r['cpu_workers_per_sweep'] for r in b], 3)} | "
              f"{min(load):.1f}-{max(load):.1f} |", flush=True)


def _ping(client, fn, keys, args, repeat):
    """Round trips of one message ``(fn, keys, args)`` to every worker's Rounds actor over its
    socket (the channel of the rounds; the worker replies ``[fn(key, *args) for key in
    keys]``); seconds each."""
    import os as _os
    from multiprocessing.connection import Client as Connect

    from fmlearn.distributed._fm_worker import Rounds, nodelay

    key = _os.urandom(32)
    conns = []
    futs = []
    for addr in sorted(client.scheduler_info()["workers"]):
        fut = client.submit(Rounds, actor=True, workers=[addr], allow_other_workers=False)
        futs.append(fut)
        conn = Connect(tuple(fut.result().serve(key).result()), authkey=key)
        nodelay(conn)
        conns.append(conn)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for conn in conns:
            conn.send((fn, keys, args))
        for conn in conns:
            ok, _ = conn.recv()
            assert ok
        times.append(time.perf_counter() - t0)
    for conn in conns:
        conn.close()
    for fut in futs:
        fut.release()
    return times


def _pings(client, workers, m=2000, parts=2):
    """The socket channel alone: an empty message; a compact round's bytes (the class's m new
    values out, a (2, m) array of sums back per partition: ``np.full`` broadcasts the values);
    a full round's (four m-arrays out, echoed back)."""
    empty = (getattr, ["key"], ("no such attribute", None))
    compact = (np.full, [(2, m)] * parts, (np.zeros(m),))
    full = (getattr, ["key"], ("no such attribute", tuple(np.zeros(m) for _ in range(4))))
    for name, msg in (("empty", empty), ("compact round", compact), ("full round", full)):
        t = _ping(client, *msg, 300)
        print(json.dumps({"ping": name, "workers": workers, "median_ms": 1e3 * np.median(t),
                          "p10_ms": 1e3 * np.percentile(t, 10),
                          "p90_ms": 1e3 * np.percentile(t, 90),
                          "load": os.getloadavg()[0]}), flush=True)


def _trace(on):
    """In a worker: start recording the class rounds between the workers
    (``_fm_worker.TRACE``), or stop and return the records."""
    from fmlearn.distributed import _fm_worker

    out = _fm_worker.TRACE
    _fm_worker.TRACE = [] if on else None
    return out


def _trace_summary(traces, solver, rep):
    """Per worker, the median (10th-90th percentile) ms per class round between the workers:
    its kernel (apply + gather on its partitions), the wait for its peers' sums (their
    kernels' lag + one hop + the wake-up), and the step (adding the sums, stepping the
    class)."""
    for addr, t in sorted(traces.items()):
        if not t:
            continue
        t = 1e3 * np.array(t)
        row = {"solver": solver, "rep": rep, "worker": addr, "rounds": len(t),
               "load": os.getloadavg()[0]}
        for name, a, b in (("kernel", 0, 1), ("exchange", 1, 2), ("step", 2, 3)):
            v = t[:, b] - t[:, a]
            row[f"{name}_ms"] = [round(float(np.median(v)), 3),
                                 round(float(np.percentile(v, 10)), 3),
                                 round(float(np.percentile(v, 90)), 3)]
        print(json.dumps(row), flush=True)


def round_profile(n, k, sweeps, repeat, parts, workers):
    """Part 5: where a distributed sweep's wall time goes, per round: the slowest worker's
    kernel CPU, the client's own steps and the rest (messages, wake-ups); and the round trip
    of an empty message and of a round's bytes on the same sockets (:func:`_pings`)."""
    import dask.array as da
    from distributed import Client, LocalCluster

    from fmlearn import FMRegressor
    from fmlearn import distributed as fd

    X, y = _one_hot_rows(n, 2000, 2000)
    rows = -(-n // parts)
    kw = {"als": dict(reg_linear=1.0, reg_pairwise=1.0), "mcmc": {}}
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        Xd = da.from_array(X, chunks=(rows, X.shape[1]), asarray=False)
        yd = da.from_array(y, chunks=rows)
        Xd, yd = client.persist([Xd, yd])
        for solver in ("als", "mcmc"):
            make = lambda n_iter, solver=solver: FMRegressor(  # noqa: E731
                k, solver=solver, n_iter=n_iter, random_state=0, **kw[solver])
            fd.fit(make(2), Xd[:5000], yd[:5000], client=client)  # warm-up
            for rep in range(repeat):
                client.run(_trace, True)
                est = fd.fit(make(1 + sweeps), Xd, yd, client=client)
                _trace_summary(client.run(_trace, False), solver, rep)
                info = est.distributed_
                r = info["rounds"]
                row = {"solver": solver, "rep": rep, "rows": n, "workers": workers,
                       "parts": parts, "load": os.getloadavg()[0],
                       "sweep_s": float(np.median(est.history_["iter_time"][1:])),
                       "round_ms": 1e3 * info["seconds_rounds"] / r,
                       "round_kernel_cpu_ms": 1e3 * info["seconds_rounds_compute"] / r,
                       "client_ms_per_round": 1e3 * info["seconds_client"] / r,
                       "rounds_per_sweep": r / est.n_iter_}
                row["round_rest_ms"] = row["round_ms"] - row["round_kernel_cpu_ms"]
                print(json.dumps(row), flush=True)
        _pings(client, workers, parts=-(-parts // workers))


def round_kernels(n, repeat):
    """Part 6: the workers' round kernel on one partition of ``n`` one-hot (user, item) rows
    (2000 + 2000 features, the rows of ``_one_hot_rows``): the walk through the CSR rows
    (``kernels.cd_rows.class_round``, the former round) against the class-major layout
    (``layout_round``, the in-memory sweep's fused pass on the rows sorted by their first
    feature), a sweep's 18 class rounds of factor passes each, alternated, ``repeat`` times;
    CPU ns per row and round; and the CPU seconds of building each one's index. (The two
    give the same cache and sums bit for bit on the same row order: tests/kernels/
    test_cd_rows.py.)"""
    from fmlearn._data import raw
    from fmlearn.distributed._fm_worker import layout
    from fmlearn.kernels.cd_rows import Apply, Gather, Rows, class_round, class_rows, layout_round
    from fmlearn.kernels.losses import SQUARED

    X, y = _one_hot_rows(n, 2000, 2000)
    d = X.shape[1]
    color = (np.arange(d) >= 2000).astype(np.int64)
    pos = np.where(color == 0, np.arange(d), np.arange(d) - 2000).astype(np.int64)
    rows = Rows(*raw(X), y, np.ones(n), True)
    t0 = time.process_time()
    cols, plan, _ = layout(rows, color)
    t_layout = time.process_time() - t0
    t0 = time.process_time()
    crows = class_rows(rows.indptr, rows.indices, color)
    t_crows = time.process_time() - t0
    rng = np.random.default_rng(0)
    m = 2000
    rounds = []
    for f in range(9):
        for c in (0, 1):
            cur, nxt = 1 + f % 2, 2 - f % 2
            rounds.append((Apply(0.0, 1 - c, 1, cur, nxt, 0.1 * rng.normal(size=m),
                                 1e-6 * rng.normal(size=m), 0.1 * rng.normal(size=m),
                                 nxt if c == 0 else -1),
                           Gather(c, 1, cur, 0.1 * rng.normal(size=m), SQUARED)))
    E0 = rng.normal(size=(n, 3))
    G, H = np.empty(m), np.empty(m)
    out = {"rows": n, "layout_build_cpu_s": t_layout, "class_rows_build_cpu_s": t_crows,
           "csr": [], "layout": [], "load": []}
    for rep in range(repeat + 1):  # the first of each: compilation / cache load, not timed
        for mode in ("csr", "layout"):
            E = E0.copy()
            t0 = time.process_time()
            for ap, ga in rounds:
                if mode == "csr":
                    class_round(rows, crows, pos, E, ap, ga, G, H)
                else:
                    layout_round(cols, plan, E, ap, ga)
            dt = time.process_time() - t0
            if rep:
                out[mode].append(1e9 * dt / (len(rounds) * n))
                out["load"].append(os.getloadavg()[0])
    for mode in ("csr", "layout"):
        v = out[mode]
        print(f"{mode}: {np.median(v):.2f} ({min(v):.2f}-{max(v):.2f}) CPU ns per row and "
              f"round", flush=True)
    print(json.dumps(out), flush=True)
    return out


def client_memory(n, k, sizes):
    import tracemalloc

    import dask.array as da
    from distributed import Client, LocalCluster

    from fmlearn import FMRegressor
    from fmlearn import distributed as fd

    out = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for users in sizes:
            X, y = _one_hot_rows(n, users, users)
            Xd = da.from_array(X, chunks=(n // 4, X.shape[1]), asarray=False)
            Xd, yd = client.persist([Xd, da.from_array(y, chunks=n // 4)])
            del X, y
            est = FMRegressor(k, solver="mcmc", n_iter=3, random_state=0)
            tracemalloc.start()
            fd.fit(est, Xd, yd, client=client)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            row = {"rows": n, "d": 2 * users, "k": k, "client_peak_MB": peak / 2**20,
                   "model_MB": est.samples_V_.nbytes / 2**20,
                   "samples_kept": int(est.samples_V_.shape[0]),
                   "load": os.getloadavg()[0]}
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


# -- part 2: streaming from a file ------------------------------------------------------------
WORKER = r"""
import json, sys, time
import numpy as np
from fmlearn import FMRegressor, GFMRegressor
from fmlearn.datasets import iter_svmlight, load_svmlight
from fmlearn.stream import fit_stream, rebatch

mode, path, d, kind, chunk, batch = sys.argv[1:7]
d, chunk, batch = int(d), int(chunk), int(batch)

def make():
    if kind == "fm":
        return FMRegressor(8, solver="sgd", learning_rate=0.01, random_state=0)
    return GFMRegressor(5, batch_size=batch, random_state=0, n_jobs=2)

# compile the kernels outside the timed region
X0, y0 = next(iter_svmlight(path, chunk_size_bytes=1 << 16, n_features=d, zero_based=True))
make().partial_fit(X0[:batch], y0[:batch])
def hwm_mb():
    # Peak resident set of this process (ru_maxrss would be inherited across exec).
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024

base = hwm_mb()
rows = 0
t0 = time.perf_counter()
if mode == "parse":
    for X, y in iter_svmlight(path, chunk_size_bytes=chunk, n_features=d, zero_based=True):
        rows += X.shape[0]
elif mode == "stream":
    est = fit_stream(make(), path, chunk_size_bytes=chunk, n_features=d, zero_based=True,
                     batch_size=batch)
    rows = est.stream_history_["rows"][0]
elif mode in ("load+train", "train"):
    X, y = load_svmlight(path, n_features=d, zero_based=True)
    if mode == "train":
        t0 = time.perf_counter()
    est = make()
    for Xb, yb, _ in rebatch([(X, y)], batch):
        est.partial_fit(Xb, yb)
    rows = X.shape[0]
sec = time.perf_counter() - t0
print(json.dumps({"mode": mode, "rows": rows, "s": sec, "rows_s": rows / sec,
                  "peak_MB": hwm_mb(), "base_MB": base}))
"""


def _write_files(tmp, quick):
    import scipy.sparse as sp

    from fmlearn.datasets import make_gfm, save_svmlight

    rng = np.random.default_rng(0)
    files = {}
    # classic FM workload: sparse rows, 20 nonzeros among 10,000 features
    n, d = (50_000, 10_000) if quick else (1_000_000, 10_000)
    X = sp.random(n, d, density=20 / d, format="csr", random_state=rng)
    X.data = np.round(X.data, 4)
    y = np.round(rng.normal(size=n), 4)
    path = os.path.join(tmp, "fm.libfm")
    save_svmlight(X, y, path)
    files["fm"] = (path, d, n, 10_000)
    # one-pass gFM workload: dense Gaussian rows, d = 100, k = 5, batches of 10 k d = 5000
    n, d = (20_000, 100) if quick else (200_000, 100)
    X, y, _ = make_gfm(n, d, 5, random_state=1)
    path = os.path.join(tmp, "gfm.libfm")
    save_svmlight(np.round(X, 6), np.round(y, 6), path)
    files["gfm"] = (path, d, n, 5000)
    return files


def file_streaming(quick, chunk):
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        files = _write_files(tmp, quick)
        for kind, (path, d, _, batch) in files.items():
            size = os.path.getsize(path)
            for mode in ("parse", "stream", "load+train", "train"):
                res = subprocess.run(
                    [sys.executable, "-c", WORKER, mode, path, str(d), kind, str(chunk),
                     str(batch)], capture_output=True, text=True, env=dict(os.environ),
                    check=True)
                row = json.loads(res.stdout.strip().splitlines()[-1])
                row.update(kind=kind, file_MB=size / 2**20, d=d, batch=batch)
                out.append(row)
                print(json.dumps(row), flush=True)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", type=int, choices=[1, 2, 3, 4, 5, 6, 7])
    parser.add_argument("--base", default=None,
                        help="part 7: the src directory of the source tree to compare with "
                             "(e.g. from `git archive <commit> src | tar -x -C DIR`)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--modes", default="dask",
                        help="part 4: the distributed modes, alternated with the in-memory fit: "
                             "dask (class rounds between the workers), dask-client (every "
                             "round through the client), or both: dask,dask-client")
    parser.add_argument("--rows", type=int, default=None,
                        help="rows of parts 3 and 4 (default 2,000,000 and 600,000)")
    parser.add_argument("--sweeps", type=int, default=None,
                        help="sweeps per fit (part 3, default 5) or timed sweeps (part 4, "
                             "default 4)")
    parser.add_argument("--parts", type=int, default=4, help="partitions of part 4")
    parser.add_argument("--workers", type=int, default=2, help="workers of part 5")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chunk-mb", type=float, default=16.0)
    args = parser.parse_args(argv)
    if args.part == 7 and args.child:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sweep_ab_child(args.rows, 8, args.sweeps, args.parts, ("als", "mcmc"))
        return
    print("load average:", os.getloadavg())
    if args.part == 7:
        if args.base is None:
            parser.error("--part 7 needs --base (the src directory of the tree to compare)")
        sweep_ab(args.rows or (60_000 if args.quick else 600_000), args.sweeps or 6,
                 max(3, args.repeat), args.parts, args.base)
    if args.part in (None, 1):
        d, k = (200, 4) if args.quick else (1000, 10)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = dask_one_pass(d, k, args.batches, 25_000 if not args.quick else 2000,
                                args.repeat)
        print(json.dumps(res), flush=True)
    if args.part in (None, 2):
        file_streaming(args.quick, int(args.chunk_mb * 2**20))
    if args.part == 4:
        n = args.rows or (60_000 if args.quick else 600_000)
        modes = ("mem",) + tuple(args.modes.split(","))
        print("| solver | mode | rows | partitions | memory 2 threads, s/sweep | 2 workers, "
              "s/sweep | "
              "ratio | ratio (by difference) | memory CPU s/sweep | dask CPU s/sweep (client "
              "+ workers) | CPU ratio | load | train RMSE diff |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sweep_bar(n, 8, args.sweeps or (3 if args.quick else 6), max(3, args.repeat),
                      args.parts, modes)
    if args.part == 5:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            round_profile(args.rows or (60_000 if args.quick else 600_000), 8,
                          args.sweeps or 4, max(1, args.repeat), args.parts, args.workers)
    if args.part == 6:
        round_kernels(args.rows or (30_000 if args.quick else 300_000), max(3, args.repeat))
    if args.part in (None, 3):
        n = 20_000 if args.quick else (args.rows or 2_000_000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dask_sweeps(n, 8, 3 if args.quick else (args.sweeps or 5),
                        1 if args.quick else args.repeat)
            client_memory(n // 10, 8, (200, 2000) if args.quick else (2000, 20000))
    print("load average:", os.getloadavg())


if __name__ == "__main__":
    main()
