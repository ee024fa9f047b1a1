"""Classic FM side by side with libFM (and myFM for grouped MCMC), alternated, CPU seconds.

Usage::

    python benchmarks/sbs_fm.py movielens --libfm PATH [--myfm-python PATH] [--data PATH]
        [--configs mcmc100 mcmc500 als sgd mcmc100g mcmc500g] [--seeds 0 1 2] [--fresh]
    python benchmarks/sbs_fm.py rows --libfm PATH [--rows 2000000] [--solvers sgd als mcmc]
    python benchmarks/sbs_fm.py seeds --libfm PATH [--seeds 0 1] [--init-seeds 1 2 3 4 5 6]

``movielens``: MovieLens-100K, one-hot users + items, ``movielens_split`` seeds (75/25), k = 8.
For each configuration and seed the systems run one after the other (libFM, [myFM], fmlearn,
then the next seed), each on one thread, on the same libFM-format files written once.
libFM and myFM are timed as whole processes (CPU = user + sys of the child, which includes
reading the files); myFM's fit is also timed inside its process (``process_time`` around
``fit`` and ``predict``); fmlearn's figure is the fit in a warm process (its kernels compiled by a
warm-up fit first; test set evaluated every iteration, as libFM does), and with ``--fresh``
also a whole fresh process (interpreter start, imports, reading the files, fit, predict).
RMSE: libFM's ``-out`` file (its final predictor), myFM's and fmlearn's ``predict``, all
clipped to the training range. The ``g`` configurations give libFM ``-meta`` (users group 0,
items group 1), myFM ``group_shapes`` and fmlearn ``groups``.

``rows``: distinct synthetic one-hot (user, item) rows (no two rows equal), libFM's own
per-iteration CPU (``-rlog`` ``time_learn``) against fmlearn's CPU per iteration: the CPU of a
fit of 1 + ITERS iterations minus that of a 1-iteration fit, divided by ITERS (so the one-off
set-up, reported apart, is left out as libFM's figure leaves out reading the file).

``seeds``: SGD's test RMSE at libFM's settings over several initialisation seeds per split,
libFM against fmlearn with libFM's semantics and with its defaults (the spread the random
initial factors alone give).

Prints Markdown tables with the load average; the medians over seeds are the figures to quote.
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

CONFIGS = {
    "mcmc100": dict(method="mcmc", n_iter=100, groups=False),
    "mcmc500": dict(method="mcmc", n_iter=500, groups=False),
    "als": dict(method="als", n_iter=100, reg=(0.0, 5.0, 10.0), groups=False),
    "sgd": dict(method="sgd", n_iter=100, reg=(0.0, 0.0, 0.1), lr=0.005, groups=False),
    "mcmc100g": dict(method="mcmc", n_iter=100, groups=True),
    "mcmc500g": dict(method="mcmc", n_iter=500, groups=True),
}

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "NUMBA_NUM_THREADS": "1"}


def _children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(cmd, **kw):
    """Run a child process; returns (cpu s, wall s, stdout)."""
    c0, t0 = _children_cpu(), time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         env={**os.environ, **ONE_THREAD}, **kw).stdout
    return _children_cpu() - c0, time.perf_counter() - t0, out


def _write_libfm(path, X, y):
    with open(path, "w") as fh:
        for r in range(X.shape[0]):
            cols = X.indices[X.indptr[r]:X.indptr[r + 1]]
            fh.write(f"{y[r]:g} " + " ".join(f"{c}:1" for c in cols) + "\n")


def _rmse(p, y):
    return float(np.sqrt(np.mean((p - y) ** 2)))


def _libfm_cmd(binary, cfg, train, test, out, seed, meta=None, iters=None, rlog=None):
    cmd = [binary, "-task", "r", "-method", cfg["method"], "-dim", "1,1,8",
           "-iter", str(iters or cfg["n_iter"]), "-init_stdev", "0.1", "-train", train,
           "-test", test, "-out", out, "-seed", str(seed), "-verbosity", "0"]
    if "reg" in cfg:
        cmd += ["-regular", ",".join(f"{r:g}" for r in cfg["reg"])]
    if "lr" in cfg:
        cmd += ["-learn_rate", str(cfg["lr"])]
    if meta:
        cmd += ["-meta", meta]
    if rlog:
        cmd += ["-rlog", rlog]
    return cmd


def _fmlearn_params(cfg, seed):
    p = dict(n_factors=8, solver=cfg["method"], n_iter=cfg["n_iter"], init_stdev=0.1,
             random_state=seed, n_jobs=1)
    if "reg" in cfg:
        p.update(reg_bias=cfg["reg"][0], reg_linear=cfg["reg"][1], reg_pairwise=cfg["reg"][2])
    if "lr" in cfg:
        p["learning_rate"] = cfg["lr"]
    return p


MYFM_SCRIPT = """
import sys, time, numpy as np, myfm
from sklearn.datasets import load_svmlight_file
train, test, n_iter, seed, nu, ni = sys.argv[1:7]
d = int(nu) + int(ni)
Xtr, ytr = load_svmlight_file(train, n_features=d, zero_based=True)
Xte, yte = load_svmlight_file(test, n_features=d, zero_based=True)
t = time.process_time()
m = myfm.MyFMRegressor(rank=8, init_stdev=0.1, random_seed=int(seed))
m.fit(Xtr, ytr, n_iter=int(n_iter), group_shapes=[int(nu), int(ni)])
p = np.clip(m.predict(Xte), ytr.min(), ytr.max())
print(time.process_time() - t, float(np.sqrt(np.mean((p - yte) ** 2))))
"""

FRESH_SCRIPT = """
import sys, json, numpy as np
from fmlearn import FMRegressor
from fmlearn.datasets import load_svmlight
train, test, params, nu, ni = sys.argv[1:6]
params = json.loads(params)
d = int(nu) + int(ni)
Xtr, ytr = load_svmlight(train, n_features=d, zero_based=True)
Xte, yte = load_svmlight(test, n_features=d, zero_based=True)
if params.pop("groups"):
    params["groups"] = [int(nu), int(ni)]
m = FMRegressor(**params).fit(Xtr, ytr, eval_set=(Xte, yte))
print(float(np.sqrt(np.mean((m.predict(Xte) - yte) ** 2))))
"""


def movielens(args):
    from fmlearn import FMRegressor
    from fmlearn.datasets import load_movielens_100k, movielens_split

    b = load_movielens_100k(args.data)
    X, y = b.X, b.y
    nu, ni = b.n_users, b.n_items
    tmp = tempfile.mkdtemp(prefix="sbs_fm_")
    meta = os.path.join(tmp, "groups.meta")
    with open(meta, "w") as fh:
        fh.write("\n".join(["0"] * nu + ["1"] * ni) + "\n")
    files = {}
    for seed in args.seeds:
        tr, te = movielens_split(X.shape[0], seed)
        paths = (os.path.join(tmp, f"s{seed}.train"), os.path.join(tmp, f"s{seed}.test"))
        _write_libfm(paths[0], X[tr], y[tr])
        _write_libfm(paths[1], X[te], y[te])
        files[seed] = (tr, te, *paths)
    print(f"MovieLens-100K {X.shape}, seeds {args.seeds}, k = 8, one thread each; "
          f"load average before: {os.getloadavg()}\n")
    head = ("| config | seed | libFM CPU s | libFM wall s | libFM RMSE | myFM fit CPU s "
            "| myFM process CPU s | myFM RMSE "
            "| fmlearn CPU s (warm fit) | fmlearn wall s | fmlearn RMSE | fmlearn fresh "
            "process CPU s |")
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    summary = []
    for name in args.configs:
        cfg = CONFIGS[name]
        warm = {**_fmlearn_params(cfg, 0), "n_iter": 2}
        if cfg["groups"]:
            warm["groups"] = [nu, ni]
        FMRegressor(**warm).fit(X[:3000], y[:3000], eval_set=(X[3000:3500], y[3000:3500]))
        rows = []
        for seed in args.seeds:
            tr, te, ftrain, ftest = files[seed]
            out = os.path.join(tmp, "libfm.out")
            cpu_l, wall_l, _ = _run(_libfm_cmd(args.libfm, cfg, ftrain, ftest, out, seed,
                                               meta if cfg["groups"] else None))
            rmse_l = _rmse(np.loadtxt(out), y[te])
            cpu_m = cpu_mp = rmse_m = float("nan")
            if cfg["groups"] and args.myfm_python:
                cpu_mp, _, o = _run([args.myfm_python, "-c", MYFM_SCRIPT, ftrain, ftest,
                                     str(cfg["n_iter"]), str(seed), str(nu), str(ni)])
                cpu_m, rmse_m = float(o.split()[0]), float(o.split()[1])
            params = _fmlearn_params(cfg, seed)
            if cfg["groups"]:
                params["groups"] = [nu, ni]
            m = FMRegressor(**params)
            c0, t0 = time.process_time(), time.perf_counter()
            m.fit(X[tr], y[tr], eval_set=(X[te], y[te]))
            cpu_f, wall_f = time.process_time() - c0, time.perf_counter() - t0
            rmse_f = _rmse(m.predict(X[te]), y[te])
            cpu_fresh = float("nan")
            if args.fresh:
                import json

                fp = {k: v for k, v in _fmlearn_params(cfg, seed).items()}
                fp["groups"] = cfg["groups"]
                cpu_fresh, _, _ = _run([sys.executable, "-c", FRESH_SCRIPT, ftrain, ftest,
                                        json.dumps(fp), str(nu), str(ni)])
            rows.append((cpu_l, rmse_l, cpu_m, rmse_m, cpu_f, rmse_f, cpu_fresh))
            print(f"| {name} | {seed} | {cpu_l:.2f} | {wall_l:.2f} | {rmse_l:.4f} | {cpu_m:.2f} "
                  f"| {cpu_mp:.2f} | {rmse_m:.4f} | {cpu_f:.2f} | {wall_f:.2f} | {rmse_f:.4f} "
                  f"| {cpu_fresh:.2f} |", flush=True)
        med = np.median(np.array(rows), axis=0)
        summary.append((name, med))
    print(f"\nload average after: {os.getloadavg()}\n")
    print("| config | libFM CPU s | libFM RMSE | myFM CPU s | myFM RMSE | fmlearn CPU s "
          "| fmlearn RMSE | fmlearn / faster peer CPU | fresh process CPU s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (cl, rl, cm, rm, cf, rf, cfr) in summary:
        peer = np.nanmin([cl, cm])
        print(f"| {name} | {cl:.2f} | {rl:.4f} | {cm:.2f} | {rm:.4f} | {cf:.2f} | {rf:.4f} "
              f"| {cf / peer:.2f} | {cfr:.2f} |")


def rows(args):
    from fmlearn import FMRegressor

    rng = np.random.default_rng(0)
    n_users, n_items = 20_000, 5_000
    pairs = rng.choice(n_users * n_items, size=args.rows, replace=False)
    u, i = pairs // n_items, pairs % n_items
    import scipy.sparse as sp

    X = sp.csr_matrix((np.ones(2 * args.rows), np.column_stack([u, n_users + i]).ravel(),
                       np.arange(0, 2 * args.rows + 1, 2)), shape=(args.rows, n_users + n_items))
    zu, zi = rng.normal(size=(n_users, 4)), rng.normal(size=(n_items, 4))
    y = np.clip(np.rint(3.5 + 0.5 * np.sum(zu[u] * zi[i], axis=1)
                        + 0.3 * rng.normal(size=args.rows)), 1, 5)
    tmp = tempfile.mkdtemp(prefix="sbs_rows_")
    ftrain, ftest = os.path.join(tmp, "train"), os.path.join(tmp, "test")
    _write_libfm(ftrain, X, y)
    _write_libfm(ftest, X[:1000], y[:1000])
    print(f"{args.rows:,} distinct one-hot rows, d = {X.shape[1]}, k = 8, {args.iters} "
          f"iterations, one thread each; load average before: {os.getloadavg()}\n")
    print("| solver | rep | libFM CPU s / iteration (rlog time_learn, median) "
          "| fmlearn CPU s / iteration | ratio | fmlearn set-up CPU s (validation, merging, "
          "layouts) |")
    print("|---|---|---|---|---|---|")
    for solver in args.solvers:
        cfg = {"sgd": CONFIGS["sgd"], "als": CONFIGS["als"], "mcmc": CONFIGS["mcmc100"]}[solver]
        warm = {**_fmlearn_params(cfg, 0), "n_iter": 1}
        FMRegressor(**warm).fit(X[:5000], y[:5000])
        for rep in range(args.reps):
            rlog = os.path.join(tmp, "rlog")
            _run(_libfm_cmd(args.libfm, cfg, ftrain, ftest, os.path.join(tmp, "out"), rep,
                            iters=args.iters, rlog=rlog))
            with open(rlog) as fh:
                header = fh.readline().split("\t")
                col = [h.strip() for h in header].index("time_learn")
                per_l = float(np.median([float(line.split("\t")[col]) for line in fh]))
            cpu = []
            for n_iter in (1, 1 + args.iters):  # the difference leaves out the set-up
                c0 = time.process_time()
                FMRegressor(**{**_fmlearn_params(cfg, rep), "n_iter": n_iter}).fit(X, y)
                cpu.append(time.process_time() - c0)
            per_f = (cpu[1] - cpu[0]) / args.iters
            print(f"| {solver} | {rep} | {per_l:.3f} | {per_f:.3f} | {per_f / per_l:.2f} "
                  f"| {cpu[0] - per_f:.2f} |", flush=True)
    print(f"\nload average after: {os.getloadavg()}")


def seeds(args):
    """SGD at libFM's settings over several initialisation seeds on fixed splits: libFM, fmlearn
    with libFM's semantics (file order, plain steps) and fmlearn's defaults."""
    from fmlearn import FMRegressor
    from fmlearn.datasets import load_movielens_100k, movielens_split

    b = load_movielens_100k(args.data)
    X, y = b.X, b.y
    tmp = tempfile.mkdtemp(prefix="sbs_seeds_")
    cfg = CONFIGS["sgd"]
    variants = {"fmlearn shuffle=False implicit_sgd=False": dict(shuffle=False,
                                                                 implicit_sgd=False),
                "fmlearn defaults": {}}
    print(f"SGD, lr 0.005, reg (0,0,0.1), 100 epochs, init_stdev 0.1; load average "
          f"{os.getloadavg()}\n")
    print("| split | system | test RMSE per init seed | mean |")
    print("|---|---|---|---|")
    for split in args.seeds:
        tr, te = movielens_split(X.shape[0], split)
        ftrain, ftest = os.path.join(tmp, "train"), os.path.join(tmp, "test")
        _write_libfm(ftrain, X[tr], y[tr])
        _write_libfm(ftest, X[te], y[te])
        res = {"libFM": []} | {k: [] for k in variants}
        for init in args.init_seeds:  # libFM's srand: seeds 0 and 1 are the same stream
            out = os.path.join(tmp, "out")
            _run(_libfm_cmd(args.libfm, cfg, ftrain, ftest, out, init))
            res["libFM"].append(_rmse(np.loadtxt(out), y[te]))
            for name, kw in variants.items():
                m = FMRegressor(**_fmlearn_params(cfg, init), **kw).fit(X[tr], y[tr])
                res[name].append(_rmse(m.predict(X[te]), y[te]))
        for name, v in res.items():
            print(f"| {split} | {name} | {' '.join(f'{r:.4f}' for r in v)} | {np.mean(v):.4f} |",
                  flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["movielens", "rows", "seeds"])
    p.add_argument("--libfm", required=True, help="libFM binary")
    p.add_argument("--myfm-python", default=None, help="a python with myfm installed")
    p.add_argument("--data", default=None, help="MovieLens folder or ratings file")
    p.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                   help="movielens_split seeds")
    p.add_argument("--init-seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6],
                   help="seeds: initialisation seeds of both systems")
    p.add_argument("--fresh", action="store_true", help="also time fmlearn in a fresh process")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--solvers", nargs="+", default=["sgd", "als", "mcmc"])
    args = p.parse_args()
    {"movielens": movielens, "rows": rows, "seeds": seeds}[args.what](args)


if __name__ == "__main__":
    main()
