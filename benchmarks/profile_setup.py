"""Phase-by-phase profile of a classic-FM ALS / MCMC fit's set-up, in one process.

Wraps the set-up's steps (validation, early-stopping split, the canonical CSR, the data
summary, the duplicate-row merge, the plan, the colour classes, the layout, the row state) and
the first sweep, and prints per phase: CPU seconds, wall seconds, the peak of traced memory
above the phase's start (tracemalloc: NumPy's buffers included) and the traced memory the
phase leaves allocated. Sub-phases are indented under the phase that calls them.

Usage (``PYTHONPATH=OTHER/src`` profiles another checkout's code the same way)::

    python benchmarks/profile_setup.py [--train FILE | --rows N] [--solver als|mcmc]
        [--no-trace]

``--train``: a libFM / svmlight file (zero-based, read with ``fmlearn.datasets.load_svmlight``
as ``benchmarks/sbs.py`` reads it); else ``--rows`` distinct one-hot rows (default 8,000,000)
generated as ``sbs.py``'s ``large`` scenario does (``make_recommendation`` with unique pairs).
The fit is ``FMRegressor(8, solver, n_iter=1, init_stdev=0.1, n_jobs=1)``, after a tiny fit
that loads the compiled kernels. tracemalloc slows allocation-heavy phases a little;
``--save F.npz`` keeps the rows read for a later ``--train F.npz``;
``--no-trace`` times without it (peaks then from ``VmHWM`` of the whole process only).
``--rss`` (Linux) samples the process's resident size (``VmRSS``) every millisecond from a
separate process (the compiled kernels hold the interpreter's lock, so a thread would not
run during them) while the rows are read and the fit runs, and prints each phase's largest
sample: where the whole process's peak happens. Pair it with ``--no-trace`` (tracemalloc's
bookkeeping is resident too).
"""

import argparse
import os
import subprocess
import sys
import time
import tracemalloc

import numpy as np
from _sbs_fmlearn import _status_mb  # the harness's reader of /proc/self/status

MB = 1 << 20


class Profiler:
    def __init__(self, trace):
        self.trace = trace
        self.rows = []
        self.stack = []

    def wrap(self, name, fn):
        prof = self

        def wrapper(*args, **kwargs):
            frame = {"name": name, "depth": len(prof.stack), "max": 0}
            if prof.trace:
                cur, peak = tracemalloc.get_traced_memory()
                if prof.stack:
                    prof.stack[-1]["max"] = max(prof.stack[-1]["max"], peak)
                tracemalloc.reset_peak()
                frame["start"] = cur
            row = {"name": name, "depth": frame["depth"]}
            prof.rows.append(row)
            prof.stack.append(frame)
            c0, w0 = time.process_time(), time.perf_counter()
            row["t0"] = time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                row["t1"] = time.monotonic()
                row["cpu"] = time.process_time() - c0
                row["wall"] = time.perf_counter() - w0
                prof.stack.pop()
                if prof.trace:
                    cur, peak = tracemalloc.get_traced_memory()
                    peak = max(peak, frame["max"])
                    row["peak"] = (peak - frame["start"]) / MB
                    row["left"] = (cur - frame["start"]) / MB
                    if prof.stack:
                        prof.stack[-1]["max"] = max(prof.stack[-1]["max"], peak)
                    tracemalloc.reset_peak()
        return wrapper

    def patch(self, obj, attr, name=None):
        setattr(obj, attr, self.wrap(name or attr, getattr(obj, attr)))

    def table(self, samples=None):
        rss = samples is not None
        out = ["| phase | CPU s | wall s | traced peak above start MB | left allocated MB |"
               + (" largest VmRSS sample MB (anonymous + file) |" if rss else ""),
               "|---|---|---|---|---|" + ("---|" if rss else "")]
        for r in self.rows:
            name = "&nbsp;&nbsp;" * r["depth"] + ("- " if r["depth"] else "") + r["name"]
            pk = f"{r['peak']:.0f}" if "peak" in r else "n/a"
            lf = f"{r['left']:.0f}" if "left" in r else "n/a"
            line = f"| {name} | {r['cpu']:.3f} | {r['wall']:.3f} | {pk} | {lf} |"
            if rss:
                line += f" {_largest(samples, r['t0'], r['t1'])} |"
            out.append(line)
        return "\n".join(out)


# The sampler: a child process printing "monotonic-time VmRSS-kB" of the parent every
# millisecond until the parent closes its stdin.
_SAMPLER = r"""
import os, select, sys, time
path = f"/proc/{sys.argv[1]}/status"
out = []
while not select.select([sys.stdin], [], [], 0.001)[0]:
    try:
        with open(path) as fh:
            v = {}
            for line in fh:
                if line.startswith(("VmRSS:", "RssAnon:", "RssFile:")):
                    v[line[:6]] = line.split()[1]
            out.append(f"{time.monotonic()} {v['VmRSS:']} {v['RssAno']} {v['RssFil']}")
    except OSError:
        break
sys.stdout.write("\n".join(out))
"""


class RSSSampler:
    """VmRSS of this process every millisecond, sampled by a child process."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", _SAMPLER, str(os.getpid())],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        time.sleep(0.2)

    def stop(self):
        out, _ = self.proc.communicate("x")
        return [(float(t), int(kb) / 1024.0, int(anon) / 1024.0, int(fil) / 1024.0)
                for t, kb, anon, fil in (line.split() for line in out.splitlines()
                                         if line.strip())]


def _largest(samples, t0, t1):
    """The largest VmRSS sample between t0 and t1 (MB), with its anonymous and file-backed
    parts."""
    inside = [s for s in samples if t0 <= s[0] <= t1]
    if not inside:
        return "n/a"
    _, rss, anon, fil = max(inside, key=lambda s: s[1])
    return f"{rss:.0f} ({anon:.0f} + {fil:.0f})"


def load_rows(args):
    if args.train and args.train.endswith(".npz"):  # a cache of the rows (--save)
        import scipy.sparse as sp

        z = np.load(args.train)
        X = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
        return X, z["y"]
    if args.train:
        from fmlearn.datasets import load_svmlight

        return load_svmlight(args.train, zero_based=True, dtype=np.float64)
    from fmlearn.datasets import make_recommendation

    n = args.rows
    users = items = int(round(2000 * max(1.0, (n / 2_000_000) ** 0.5)))
    b = make_recommendation(users, items, n, rank=8, unique_pairs=True, random_state=0)
    return b.X.tocsr(), np.asarray(b.y, dtype=np.float64)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", default=None)
    ap.add_argument("--rows", type=int, default=8_000_000)
    ap.add_argument("--solver", default="als", choices=("als", "mcmc"))
    ap.add_argument("--no-trace", action="store_true")
    ap.add_argument("--save", default=None, help="write the rows read to this .npz")
    ap.add_argument("--rss", action="store_true",
                    help="sample VmRSS every ms (Linux); each phase's largest sample")
    ap.add_argument("--later", action="store_true",
                    help="fit once before the profiled fit: profile a later fit's set-up, "
                         "on memory the process already holds")
    args = ap.parse_args(argv)
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")

    import fmlearn
    import fmlearn._data as data_mod
    import fmlearn._plan as plan_mod
    import fmlearn.fm as fm_mod
    import fmlearn.solvers._fm_common as common
    from fmlearn import FMRegressor
    from fmlearn.fm import _plan as fm_plan

    rss0 = _status_mb("VmRSS")
    sampler = RSSSampler() if args.rss else None
    c0 = time.process_time()
    read_t = (time.monotonic(),)
    X, y = load_rows(args)
    read_t += (time.monotonic(),)
    read_cpu = time.process_time() - c0
    rss_read = _status_mb("VmRSS")
    if args.save:
        np.savez(args.save, data=X.data, indices=X.indices, indptr=X.indptr,
                 shape=np.array(X.shape), y=y)
    params = dict(n_factors=8, solver=args.solver, n_iter=1, init_stdev=0.1, n_jobs=1,
                  random_state=0)
    if args.solver == "als":
        params.update(reg_bias=0.0, reg_linear=5.0, reg_pairwise=10.0)
    FMRegressor(**params).fit(X[:200], y[:200])  # load the kernels
    if args.later:
        FMRegressor(**params).fit(X, y)

    prof = Profiler(not args.no_trace)
    # what fmlearn.fm._fit_rows calls, as it names them
    prof.patch(FMRegressor, "_validate_train", "validate (_validate_train)")
    for attr in ("canonical_csr", "split_rows", "split_index", "merged_rows", "pair_rows",
                 "column_data", "to_csr"):
        if hasattr(fm_mod, attr):
            prof.patch(fm_mod, attr)
    prof.patch(plan_mod.DataSummary, "of_rows", "DataSummary.of_rows")
    prof.patch(plan_mod.DataSummary, "of_rows_subset", "DataSummary.of_rows_subset")
    prof.patch(fm_plan.ClassicFMPlan, "build", "ClassicFMPlan.build")
    import fmlearn.kernels.dedup as dedup

    for attr in ("first_feature_groups", "pair_groups", "row_keys", "radix_argsort", "hash_argsort",
                 "group_keys", "group_hashed", "group_weights", "take"):  # this checkout's
        # names and earlier ones
        if hasattr(dedup, attr):
            setattr(dedup, attr, prof.wrap(attr, getattr(dedup, attr)))
    for attr in ("inverse_rows", "_field_layout", "fill_fields", "to_places",
                 "_colour_classes", "class_counts", "fill_dense_classes", "fill_classes",
                 "_plan", "rows_cooccurrence_work", "coloring_rounds", "field_row_state",
                 "row_state_at"):
        if hasattr(common, attr):
            prof.patch(common, attr)
    prof.patch(common.ColumnData, "row_state", "row state (ColumnData.row_state)")
    prof.patch(common.ColumnData, "compile_sweep", "load the sweep (ColumnData.compile_sweep)")
    prof.patch(common.ColumnData, "sweep", "sweep (ColumnData.sweep)")
    _ = data_mod, fmlearn

    est = FMRegressor(**params)
    if prof.trace:
        tracemalloc.start()
    rss_before = _status_mb("VmRSS")
    c0, w0 = time.process_time(), time.perf_counter()
    fit = prof.wrap("fit (1 sweep)", est.fit)
    fit(X, y)
    fit_cpu, fit_wall = time.process_time() - c0, time.perf_counter() - w0
    if prof.trace:
        tracemalloc.stop()
    samples = sampler.stop() if sampler else None
    print(f"# {X.shape[0]:,} rows, {X.nnz:,} non-zeros, d = {X.shape[1]}, solver "
          f"{args.solver}, k = 8, one thread; load average {os.getloadavg()[0]:.2f}")
    print(f"# X: data {X.data.dtype} indices {X.indices.dtype} indptr {X.indptr.dtype}; "
          f"read {read_cpu:.2f} CPU s; RSS after imports {rss0:.0f} MB, after reading "
          f"{rss_read:.0f} MB, before the fit {rss_before:.0f} MB, peak (VmHWM) "
          f"{_status_mb('VmHWM'):.0f} MB")
    sweeps = [r["cpu"] for r in prof.rows if r["name"].startswith("sweep")]
    print(f"# fit {fit_cpu:.3f} CPU s ({fit_wall:.3f} wall); set-up = fit less its sweep: "
          f"{fit_cpu - sum(sweeps):.3f} CPU s = {(fit_cpu - sum(sweeps)) / sweeps[-1]:.1f} "
          f"sweeps\n")
    if samples:
        print(f"# reading the rows: largest VmRSS sample {_largest(samples, *read_t)} MB; "
              f"{len(samples)} samples")
    print(prof.table(samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
