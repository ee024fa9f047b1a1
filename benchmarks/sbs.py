"""Side-by-side benchmarks: fmlearn and its peers on the same files, in fresh processes, alternated.

Every speed figure in ``benchmarks/RESULTS.md`` comes from this script. Each system (libFM,
myFM, River, Vowpal Wabbit, fmlearn, or fmlearn from another checkout) runs in its own fresh
subprocess on the same files, written once into a temporary folder in libFM's text format; the
systems take turns (A B A B ...) for ``--reps`` repetitions of every case (seed). For every run
the harness records from outside the child's CPU seconds (user + system, ``os.wait4``), wall
seconds and peak resident memory (``ru_maxrss``), the 1-minute load average before and after,
and the test RMSE of the predictions the system wrote (every system clipped alike to the
training target range, as libFM clips); the child adds the learning time it measures itself
(libFM: the sum of ``time_learn`` of its ``-rlog``; myFM and fmlearn: CPU seconds of ``fit``).
Every system runs on one thread (``NUMBA_NUM_THREADS``, ``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` = 1, fmlearn ``n_jobs=1``).

fmlearn's compile cost is kept apart from learning: before the timed runs of a scenario, one
untimed run of each fmlearn system fills numba's cache; inside each timed process a tiny fit of
the same configuration loads the cached kernels (``kernels``) before the timed fit. The
tables show both the learning time and the whole fresh process (import + read + kernels + fit
+ predict), which is what a user pays; the ``compile`` scenario measures the first call on a
cold and a warm cache.

Usage::

    python benchmarks/sbs.py list
    python benchmarks/sbs.py run [SCENARIO | GROUP ...] [--reps R] [--seeds 0 1 2]
        [--json FILE] [--workdir DIR] [--no-lock]
        [--libfm BIN | --libfm-tarball libfm-1.4.4.tar.gz] [--peers-python PY]
        [--fmlearn-python PY] [--also LABEL=PY ...] [--data ML100K] [--libsvm-data DIR]
    python benchmarks/sbs.py setup [--libfm-tarball libfm-1.4.4.tar.gz]

Stable interface (other benchmarks and the issue bars rely on it):

- scenario names (``list`` prints them with their systems) and the groups ``movielens``,
  ``throughput`` (2,000,000 rows), ``large`` (8,000,000 rows: peak memory and set-up against
  libFM), ``online``, ``cold`` and ``all``;
- peers: ``--libfm`` or ``$FMLEARN_LIBFM`` (the binary), else ``--libfm-tarball`` or
  ``$FMLEARN_LIBFM_TARBALL`` (built once into ``${XDG_CACHE_HOME:-~/.cache}/fmlearn-peers``);
  ``--peers-python`` or ``$FMLEARN_PEERS_PYTHON`` (a venv with myfm, river, vowpalwabbit;
  ``setup`` creates one in the same cache). A missing peer is reported and skipped;
- ``--fmlearn-python`` (default: this interpreter) runs the fmlearn under test;
  ``--also LABEL=PY`` adds another fmlearn (e.g. the main branch's venv) as one more system, so
  old and new code are measured side by side;
- data: MovieLens-100K from ``--data`` or fmlearn's default folder
  (``$FMLEARN_DATA/ml-100k``, else ``~/.cache/fmlearn/ml-100k``); IJCNN1 from
  ``--libsvm-data`` or ``$FMLEARN_LIBSVM`` (``ijcnn1.trn.bz2``, ``ijcnn1.tst.bz2``);
- output: one Markdown section per scenario (title, command, load average, table) on stdout,
  ready to paste into RESULTS.md; ``--json FILE`` writes every run with all its fields.

Runs hold ``$TMPDIR/fmlearn-bench.lock`` so that two harness runs never overlap.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _sbs_core as core  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FMLEARN_CHILD = os.path.join(HERE, "_sbs_fmlearn.py")
PEERS_CHILD = os.path.join(HERE, "_sbs_peers.py")
RANK = 8
N_USERS, N_ITEMS = 943, 1682  # MovieLens-100K's one-hot blocks (the -meta groups)


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # fit | epochs | online | commands | compile | memory
    title: str
    systems: tuple
    conf: dict = field(default_factory=dict)


def _fit(name, title, systems, **conf):
    return Scenario(name, "fit", title, systems, conf)


SCENARIOS = [
    _fit("ml-mcmc100", "MovieLens-100K, MCMC, 100 sweeps, k = 8", ("libfm", "myfm", "fmlearn"),
         method="mcmc", n_iter=100),
    _fit("ml-mcmc500", "MovieLens-100K, MCMC, 500 sweeps, k = 8", ("libfm", "myfm", "fmlearn"),
         method="mcmc", n_iter=500),
    _fit("ml-als100", "MovieLens-100K, ALS, 100 sweeps, reg (0, 5, 10), k = 8",
         ("libfm", "fmlearn"), method="als", n_iter=100, reg=(0.0, 5.0, 10.0)),
    _fit("ml-sgd100", "MovieLens-100K, SGD, 100 epochs, lr 0.005, reg (0, 0, 0.1), k = 8",
         ("libfm", "fmlearn"), method="sgd", n_iter=100, reg=(0.0, 0.0, 0.1), lr=0.005),
    _fit("ml-mcmc100-groups", "MovieLens-100K, MCMC, 100 sweeps, user/item groups, k = 8",
         ("libfm", "myfm", "fmlearn"), method="mcmc", n_iter=100, groups=True),
    _fit("ml-mcmc500-groups", "MovieLens-100K, MCMC, 500 sweeps, user/item groups, k = 8",
         ("libfm", "myfm", "fmlearn"), method="mcmc", n_iter=500, groups=True),
    Scenario("2m-sgd", "epochs", "2,000,000 distinct one-hot rows, SGD epoch (lr 0.005, "
             "reg (0, 0, 0.1)), k = 8", ("libfm", "fmlearn"),
             dict(method="sgd", epochs=5, reg=(0.0, 0.0, 0.1), lr=0.005)),
    Scenario("2m-als", "epochs", "2,000,000 distinct one-hot rows, ALS sweep (reg (0, 5, 10)), "
             "k = 8", ("libfm", "fmlearn"), dict(method="als", epochs=3, reg=(0.0, 5.0, 10.0))),
    Scenario("2m-mcmc", "epochs", "2,000,000 distinct one-hot rows, MCMC sweep, k = 8",
             ("libfm", "fmlearn"), dict(method="mcmc", epochs=3)),
    Scenario("0.5m-als", "epochs", "500,000 distinct one-hot rows, ALS sweep (reg (0, 5, 10)), "
             "k = 8", ("libfm", "fmlearn"),
             dict(method="als", epochs=10, reg=(0.0, 5.0, 10.0), rows=500_000)),
    Scenario("0.5m-mcmc", "epochs", "500,000 distinct one-hot rows, MCMC sweep, k = 8",
             ("libfm", "fmlearn"), dict(method="mcmc", epochs=10, rows=500_000)),
    Scenario("8m-als", "epochs", "8,000,000 distinct one-hot rows, ALS sweep (reg (0, 5, 10)), "
             "k = 8: peak memory and set-up", ("libfm", "fmlearn"),
             dict(method="als", epochs=4, reg=(0.0, 5.0, 10.0), rows=8_000_000)),
    Scenario("8m-mcmc", "epochs", "8,000,000 distinct one-hot rows, MCMC sweep, k = 8: peak "
             "memory and set-up", ("libfm", "fmlearn"), dict(method="mcmc", epochs=4,
                                                              rows=8_000_000)),
    Scenario("online-ml100k", "online", "Online learners, MovieLens-100K stream (100,000 "
             "one-hot rows, d = 2625, squared loss)", ("fmlearn", "river", "vw"),
             dict(stream="ml100k", river_rows=None)),
    Scenario("online-ijcnn1", "online", "Online learners, IJCNN1 train + test stream "
             "(141,691 rows, d = 22, logistic loss)", ("fmlearn", "river", "vw"),
             dict(stream="ijcnn1", river_rows=20000)),
    Scenario("cold-import", "commands", "Cold process: importing", ("fmlearn",),
             dict(what="import")),
    Scenario("cold-predict", "commands", "Cold process: load a model, read 100,000 ratings, "
             "predict", ("libfm", "fmlearn"), dict(what="predict")),
    Scenario("compile", "compile", "First call of the compiled kernels: cold vs warm cache",
             ("fmlearn",)),
    Scenario("memory", "memory", "Peak memory of a fit above the process baseline",
             ("fmlearn",)),
]
BY_NAME = {s.name: s for s in SCENARIOS}
GROUPS = {
    "movielens": [s.name for s in SCENARIOS if s.name.startswith("ml-")],
    "throughput": [s.name for s in SCENARIOS if s.name.startswith(("2m-", "0.5m-"))],
    "large": [s.name for s in SCENARIOS if s.name.startswith("8m-")],
    "online": [s.name for s in SCENARIOS if s.kind == "online"],
    "cold": ["cold-import", "cold-predict", "compile", "memory"],
    "all": [s.name for s in SCENARIOS],
}


# -- the run's context: peers, data files, output -------------------------------------------------
class Context:
    def __init__(self, args):
        self.args = args
        self.reps = args.reps
        self.seeds = args.seeds
        self.py = args.fmlearn_python or sys.executable
        self.fmlearns = [("fmlearn", self.py)]
        for spec in args.also or []:
            label, _, py = spec.partition("=")
            if not py:
                raise SystemExit(f"--also takes LABEL=PYTHON, got {spec!r}")
            self.fmlearns.append((label, py))
        self.libfm = core.find_libfm(args.libfm, args.libfm_tarball)
        self.peers_py = core.find_peers_python(args.peers_python)
        self.work = args.workdir or tempfile.mkdtemp(prefix="fmlearn-sbs-")
        os.makedirs(self.work, exist_ok=True)
        self.cache = {}
        self.env = core.child_env()

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def missing(self, system):
        """Why a system cannot run here, or None."""
        if system == "libfm" and self.libfm is None:
            return "libFM not found (--libfm, $FMLEARN_LIBFM or --libfm-tarball)"
        if system in ("myfm", "river", "vw") and self.peers_py is None:
            return "peers' Python not found (--peers-python or $FMLEARN_PEERS_PYTHON)"
        return None

    # -- data ---------------------------------------------------------------------------------
    def movielens(self):
        if "ml" not in self.cache:
            from fmlearn.datasets import load_movielens_100k

            b = load_movielens_100k(self.args.data)
            self.cache["ml"] = (b.X.tocsr(), np.asarray(b.y, dtype=np.float64))
        return self.cache["ml"]

    def movielens_split(self, seed):
        """(train file, test file, y_train, y_test) of the project's split ``seed``."""
        key = ("split", seed)
        if key not in self.cache:
            from fmlearn.datasets import movielens_split, save_svmlight

            X, y = self.movielens()
            tr, te = movielens_split(X.shape[0], seed)
            paths = self.path(f"ml100k-{seed}.train.libfm"), self.path(f"ml100k-{seed}.test.libfm")
            if not all(os.path.exists(p) for p in paths):
                save_svmlight(X[tr], y[tr], paths[0])
                save_svmlight(X[te], y[te], paths[1])
            self.cache[key] = (*paths, y[tr], y[te])
        return self.cache[key]

    def movielens_meta(self):
        """libFM's ``-meta`` file: the group of every feature, users 0 and items 1."""
        path = self.path("ml100k.meta")
        if not os.path.exists(path):
            X, _ = self.movielens()
            groups = np.r_[np.zeros(N_USERS, int), np.ones(X.shape[1] - N_USERS, int)]
            np.savetxt(path, groups, fmt="%d")
        return path

    def distinct_rows(self, n_train=2_000_000):
        """``n_train`` distinct one-hot rows (train) and 2,000 more (test), as libFM files
        (2,000 x 2,000 users and items per 2,000,000 rows, scaled by the square root above)."""
        name = f"{n_train / 1_000_000:g}m"  # 2m, 8m, 0.5m
        if name not in self.cache:
            from fmlearn.datasets import make_recommendation, save_svmlight

            n_test = 2_000
            users = items = int(round(2000 * max(1.0, (n_train / 2_000_000) ** 0.5)))
            b = make_recommendation(users, items, n_train + n_test, rank=8, unique_pairs=True,
                                    random_state=0)
            pairs = b.user_ids * (items + 1) + b.item_ids
            distinct = int(np.unique(pairs[:n_train]).shape[0])
            if distinct != n_train:
                raise SystemExit(f"the {name} set has {distinct} distinct rows, not {n_train}")
            paths = self.path(f"{name}.train.libfm"), self.path(f"{name}.test.libfm")
            if not all(os.path.exists(p) for p in paths):
                save_svmlight(b.X[:n_train], b.y[:n_train], paths[0])
                save_svmlight(b.X[n_train:], b.y[n_train:], paths[1])
            self.cache[name] = (*paths, distinct, b.X.shape[1])
        return self.cache[name]

    def stream(self, name):
        """(npz, vw text file, task, rows, d) of an online stream, in one random order."""
        key = ("stream", name)
        if key in self.cache:
            return self.cache[key]
        import scipy.sparse as sp

        if name == "ml100k":
            X, y = self.movielens()
            task = "r"
        else:
            from fmlearn.datasets import load_svmlight

            root = self.args.libsvm_data or os.environ.get("FMLEARN_LIBSVM")
            if not root:
                self.cache[key] = None
                return None
            Xa, ya = load_svmlight(os.path.join(root, "ijcnn1.trn.bz2"), zero_based=False)
            Xb, yb = load_svmlight(os.path.join(root, "ijcnn1.tst.bz2"),
                                   n_features=Xa.shape[1], zero_based=False)
            X, y = sp.vstack([Xa, Xb]).tocsr(), np.where(np.r_[ya, yb] > 0, 1.0, -1.0)
            task = "c"
        perm = np.random.default_rng(0).permutation(X.shape[0])
        X, y = X[perm].tocsr(), y[perm]
        npz = self.path(f"{name}.stream.npz")
        np.savez(npz, indptr=X.indptr, indices=X.indices, data=X.data, y=y, d=X.shape[1])
        vw = self.path(f"{name}.stream.vw")
        with open(vw, "w") as fh:
            for i in range(X.shape[0]):
                lo, hi = X.indptr[i], X.indptr[i + 1]
                if task == "r":  # user and item in their own namespaces, for --lrq ui
                    u, it = X.indices[lo:hi]
                    fh.write(f"{y[i]:g} |u u{u} |i i{it}\n")
                else:
                    body = " ".join(f"{j}:{v:.6g}" for j, v in
                                    zip(X.indices[lo:hi], X.data[lo:hi], strict=True))
                    fh.write(f"{int(y[i])} |f {body}\n")
        self.cache[key] = (npz, vw, task, X.shape[0], X.shape[1])
        return self.cache[key]


def _rmse(pred_path, y_train, y_test):
    """RMSE of a prediction file, clipped to the training target range like libFM."""
    pred = np.loadtxt(pred_path, dtype=np.float64, ndmin=1)
    if pred.shape != y_test.shape:
        return None
    pred = np.clip(pred, y_train.min(), y_train.max())
    return float(np.sqrt(np.mean((pred - y_test) ** 2)))


def _rlog_column(path, column):
    with open(path) as fh:
        head = fh.readline().rstrip("\n").split("\t")
        rows = [line.rstrip("\n").split("\t") for line in fh if line.strip()]
    j = head.index(column)
    return [float(r[j]) for r in rows]


def _libfm_args(conf, seed):
    args = ["-task", "r", "-dim", f"1,1,{RANK}", "-method", conf["method"],
            "-init_stdev", "0.1", "-seed", str(seed), "-verbosity", "0"]
    if "reg" in conf:
        args += ["-regular", ",".join(f"{r:g}" for r in conf["reg"])]
    if "lr" in conf:
        args += ["-learn_rate", f"{conf['lr']:g}"]
    return args


def _fmlearn_params(conf, seed, n_iter):
    """fmlearn's parameters for a scenario: libFM's where they are settings of the problem
    (rank, regularization, step size); libFM's init_stdev 0.1 for MCMC and ALS (fmlearn's
    "auto" is 0.1 on one-hot data too) and fmlearn's default for SGD ("auto": the spread of
    SGD's own iterates, sqrt(learning_rate / 2), 0.05 at libFM's step)."""
    p = {"n_factors": RANK, "solver": conf["method"], "n_iter": n_iter, "random_state": seed}
    if conf["method"] != "sgd":
        p["init_stdev"] = 0.1
    if "reg" in conf:
        p.update(reg_bias=conf["reg"][0], reg_linear=conf["reg"][1], reg_pairwise=conf["reg"][2])
    if "lr" in conf:
        p["learning_rate"] = conf["lr"]
    return p


def _burn_in(n_iter):
    return min(10, n_iter // 10)  # fmlearn's default, used for myFM's kept samples too


def myfm_command(ctx, files, n_iter, seed, meta=None):
    """The peers' child fitting myFM on ``files`` = (train, test, predictions) with the
    harness's settings (rank, burn-in, ``-meta`` groups)."""
    tr, te, pred = files
    cmd = [ctx.peers_py, PEERS_CHILD, "myfm", "--train", tr, "--test", te, "--out", pred,
           "--rank", str(RANK), "--n-iter", str(n_iter),
           "--n-kept", str(n_iter - _burn_in(n_iter)), "--seed", str(seed)]
    return cmd + (["--groups", meta] if meta else [])


def _progress(sc, label, run):
    p = run.get("payload", {})
    bits = [f"cpu {run['cpu_s']:.2f} s", f"wall {run['wall_s']:.2f} s",
            f"rss {run['maxrss_mb']:.0f} MB", f"load {run['load_before']:.2f}"]
    for k in ("rmse", "learn_cpu", "epoch_cpu", "rows_per_s_cpu"):
        v = run.get(k, p.get(k))
        if v is not None:
            bits.append(f"{k} {v:.4g}")
    if run.get("error"):
        bits.append("FAILED: " + run["error"].splitlines()[-1][:200])
    print(f"  [{sc.name}] {label}: " + ", ".join(bits), file=sys.stderr, flush=True)


# -- scenario kinds -------------------------------------------------------------------------------
def run_fit(sc, ctx):
    """MovieLens-100K: every system fits the same split files and predicts the test file."""
    conf = sc.conf
    meta = ctx.movielens_meta() if conf.get("groups") else None
    systems, notes = [], []
    for s in sc.systems:
        reason = ctx.missing(s)
        if reason:
            notes.append(f"{s}: {reason}")
        elif s == "fmlearn":
            systems += ctx.fmlearns
        else:
            systems.append((s, None))

    def command(label, py, seed, n_iter):
        tr, te, _, _ = ctx.movielens_split(seed)
        pred = ctx.path(f"pred-{sc.name}-{label}-{seed}.txt")
        if label == "libfm":
            rlog = ctx.path(f"rlog-{sc.name}-{seed}.tsv")
            cmd = [ctx.libfm, "-train", tr, "-test", te, "-iter", str(n_iter), "-out", pred,
                   "-rlog", rlog] + _libfm_args(conf, seed)
            if meta:
                cmd += ["-meta", meta]
            return cmd, pred, rlog
        if label == "myfm":
            return myfm_command(ctx, (tr, te, pred), n_iter, seed, meta), pred, None
        cmd = [py, FMLEARN_CHILD, "fit", "--train", tr, "--test", te, "--out", pred,
               "--params", json.dumps(_fmlearn_params(conf, seed, n_iter))]
        return cmd + (["--groups", meta] if meta else []), pred, None

    unsupported = {}
    for label, py in systems:  # untimed: fill numba's cache for this configuration
        if py is not None:
            cmd, _, _ = command(label, py, ctx.seeds[0], 2)
            run = core.measure(cmd, ctx.env)
            if run["payload"].get("unsupported"):
                unsupported[label] = run["payload"]["unsupported"]
            elif run["returncode"] != 0:
                unsupported[label] = "failed: " + run.get("error", "")[-300:]
    runs = []
    for rep in range(ctx.reps):
        for seed in ctx.seeds:
            _, _, y_tr, y_te = ctx.movielens_split(seed)
            for label, py in systems:
                if label in unsupported:
                    continue
                cmd, pred, rlog = command(label, py, seed, conf["n_iter"])
                run = core.measure(cmd, ctx.env)
                run.update(system=label, seed=seed, rep=rep)
                if run["returncode"] == 0:
                    run["rmse"] = _rmse(pred, y_tr, y_te)
                    if rlog:
                        run["learn_cpu"] = sum(_rlog_column(rlog, "time_learn"))
                    else:
                        run["learn_cpu"] = run["payload"].get("fit_cpu")
                        run["learn_wall"] = run["payload"].get("fit_wall")
                runs.append(run)
                _progress(sc, f"{label} seed {seed} rep {rep}", run)
    return runs, _fit_table(sc, systems, runs, unsupported, notes)


def _fit_table(sc, systems, runs, unsupported, notes):
    ref = "libfm" if any(r["system"] == "libfm" for r in runs) else None
    by = {label: [r for r in runs if r["system"] == label and r["returncode"] == 0]
          for label, _ in systems}
    med = {label: (core.median([r.get("learn_cpu") for r in rs]),
                   core.median([r["cpu_s"] for r in rs])) for label, rs in by.items()}
    heads = ["system", "test RMSE", "learn CPU s", "process CPU s", "process wall s",
             "peak RSS MB"] + (["learn CPU / libFM", "process CPU / libFM"] if ref else []) + [
             "runs"]
    rows = []
    for label, _ in systems:
        if label in unsupported:
            rows.append([label, f"not supported ({unsupported[label]})"]
                        + [""] * (len(heads) - 2))
            continue
        rs = by[label]
        per_seed = {}
        for r in rs:
            per_seed.setdefault(r["seed"], []).append(r.get("rmse"))
        rmse = [core.median(v) for v in per_seed.values()]
        rmse_txt = f"{np.mean(rmse):.4f}" if rmse and None not in rmse else "n/a"
        row = [label, rmse_txt, core.spread([r.get("learn_cpu") for r in rs]),
               core.spread([r["cpu_s"] for r in rs]), core.spread([r["wall_s"] for r in rs]),
               core.spread([r["maxrss_mb"] for r in rs], "{:.0f}")]
        if ref:
            row += [core.ratio(med[label][0], med[ref][0]), core.ratio(med[label][1], med[ref][1])]
        rows.append(row + [str(len(rs))])
    out = [core.md_table(heads, rows), ""]
    for label, _ in systems:
        rs = [r for r in by.get(label, []) if "kernels_cpu" in r["payload"]]
        if rs:
            parts = [(k, core.median([r["payload"].get(f"{k}_cpu") for r in rs]))
                     for k in ("startup", "import", "read", "kernels", "fit", "predict")]
            out.append(f"{label} process, CPU s (medians): " + ", ".join(
                f"{k} {v:.2f}" for k, v in parts if v is not None) + ".")
    out += [f"{n}." for n in notes]
    return "\n".join(out)


def run_epochs(sc, ctx):
    """2M (8M) distinct rows: the cost of one more epoch (sweep), the set-up before the first
    and the peak memory, libFM vs fmlearn."""
    conf = sc.conf
    tr, te, distinct, d = ctx.distinct_rows(conf.get("rows", 2_000_000))
    systems = [(s, None) for s in sc.systems if s == "libfm" and not ctx.missing(s)]
    if "fmlearn" in sc.systems:
        systems += ctx.fmlearns
    epochs = conf["epochs"]

    def command(label, py, n):
        if label == "libfm":
            rlog = ctx.path(f"rlog-{sc.name}.tsv")
            return [ctx.libfm, "-train", tr, "-test", te, "-iter", str(n), "-out",
                    ctx.path(f"pred-{sc.name}.txt"), "-rlog", rlog] + _libfm_args(conf, 0), rlog
        return [py, FMLEARN_CHILD, "epochs", "--train", tr, "--epochs", str(n), "--params",
                json.dumps(_fmlearn_params(conf, 0, 1))], None

    for label, py in systems:
        if py is not None:
            core.measure(command(label, py, 1)[0], ctx.env)  # fill numba's cache
    runs = []
    for rep in range(ctx.reps):
        for label, py in systems:
            cmd, rlog = command(label, py, epochs)
            run = core.measure(cmd, ctx.env)
            run.update(system=label, rep=rep)
            if run["returncode"] == 0:
                if (run.get("payload") or {}).get("hwm_read_mb"):  # before the child's reset
                    run["maxrss_mb"] = max(run["maxrss_mb"], run["payload"]["hwm_read_mb"])
                if rlog:
                    run["epoch_cpu"] = core.median(_rlog_column(rlog, "time_learn"))
                else:
                    run["epoch_cpu"] = run["payload"]["epoch_cpu"]
                    run["epoch_wall"] = run["payload"]["epoch_wall"]
            runs.append(run)
            _progress(sc, f"{label} rep {rep}", run)
    heads = ["system", "CPU s per epoch", "CPU s per M rows", "distinct rows/s (CPU)",
             "wall s per epoch", "set-up CPU s (in epochs)", "later fit's set-up CPU s",
             "process CPU s", "peak RSS MB",
             "peak RSS / libFM", "fit's peak above the rows MB", "vs libFM", "runs"]
    rows = []
    ref = core.median([r.get("epoch_cpu") for r in runs if r["system"] == "libfm"])
    ref_rss = core.median([r["maxrss_mb"] for r in runs if r["system"] == "libfm"
                           and r["returncode"] == 0])

    def payload(rs, key):
        return [(r.get("payload") or {}).get(key) for r in rs]

    for label, _ in systems:
        rs = [r for r in runs if r["system"] == label and r["returncode"] == 0]
        ep = core.median([r.get("epoch_cpu") for r in rs])
        setup = core.median(payload(rs, "setup_cpu"))
        rows.append([label, core.spread([r.get("epoch_cpu") for r in rs], "{:.3f}"),
                     "n/a" if ep is None else f"{ep / (distinct / 1e6):.3f}",
                     "n/a" if ep is None else f"{distinct / ep:,.0f}",
                     core.spread([r.get("epoch_wall") for r in rs], "{:.3f}"),
                     "n/a" if setup is None or not ep else
                     f"{core.spread(payload(rs, 'setup_cpu'))} ({setup / ep:.1f})",
                     _setup_later(payload(rs, "setup_later_cpu"), ep),
                     core.spread([r["cpu_s"] for r in rs]),
                     core.spread([r["maxrss_mb"] for r in rs], "{:.0f}"),
                     core.ratio(core.median([r["maxrss_mb"] for r in rs]), ref_rss),
                     core.spread(payload(rs, "fit_peak_mb"), "{:.0f}"),
                     core.ratio(ep, ref), str(len(rs))])
    note = (f"{distinct:,} distinct rows (checked), d = {d}, {epochs} epochs per run. "
            "libFM: median `time_learn` of its `-rlog` (user CPU of the learning step; for "
            "MCMC it includes predicting the 2,000 test rows). fmlearn: (CPU(1 + E epochs) - "
            "CPU(1 epoch)) / E of two fits after a first one in the same process, so set-up "
            "(validation, duplicate merging, column copies) is left out of both; fmlearn's "
            "set-up is the process's first 1-epoch fit's CPU less one epoch (validation, "
            "summary, duplicate merging, colouring, layout, row state, storing the model), in "
            "brackets in epochs; a later fit's set-up likewise (the pages the first fit freed "
            "are reused: no first-touch faults). Peak RSS: the whole process's "
            "(`ru_maxrss`: interpreter, libraries, the rows read from the libFM file and the "
            "fits; libFM: its rows, their transposed copy and its caches); the fit's peak above "
            "the rows: fmlearn's rise of `VmHWM` during its fits, above the resident size "
            "after reading the rows.")
    return runs, core.md_table(heads, rows) + "\n\n" + note


def _setup_later(values, epoch):
    """A later fit's set-up (median, min-max, in epochs); n/a for a harness that did not
    record it."""
    later = core.median(values)
    if later is None or not epoch:
        return "n/a"
    return f"{core.spread(values)} ({later / epoch:.1f})"


def run_online(sc, ctx):
    """Online learners on one stream: fmlearn's learners, River, Vowpal Wabbit."""
    s = ctx.stream(sc.conf["stream"])
    if s is None:
        return [], "skipped: IJCNN1 not found (--libsvm-data or $FMLEARN_LIBSVM)"
    npz, vw, task, n, d = s
    import importlib.util

    spec = importlib.util.spec_from_file_location("_sbs_fmlearn", FMLEARN_CHILD)
    child = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(child)
    learners = list(child.online_learners(task, d))
    systems = []
    for label, py in ctx.fmlearns:
        for name in learners:
            systems.append((f"{label} {name}", [py, FMLEARN_CHILD, "online", "--stream", npz,
                                                 "--learner", name, "--task", task]))
    river_rows = sc.conf.get("river_rows")
    if not ctx.missing("river"):
        systems.append(("River facto FM (k = 8)", [ctx.peers_py, PEERS_CHILD, "river",
                                                    "--stream", npz, "--task", task] + (
            ["--max-rows", str(river_rows)] if river_rows else [])))
        systems.append((f"Vowpal Wabbit --lrq {'ui' if task == 'r' else 'ff'}8",
                        [ctx.peers_py, PEERS_CHILD, "vw", "--vw-file", vw, "--task", task,
                         "--rows", str(n)]))
    for _, cmd in systems[: len(learners) * len(ctx.fmlearns)]:
        core.measure(cmd + ["--max-rows", "300"], ctx.env)  # fill numba's cache
    runs = []
    for rep in range(ctx.reps):
        for label, cmd in systems:
            run = core.measure(cmd, ctx.env)
            run.update(system=label, rep=rep)
            runs.append(run)
            _progress(sc, f"{label} rep {rep}", run)
    metric_keys = ["prequential_rmse"] if task == "r" else ["prequential_error_rate",
                                                            "prequential_auc"]
    river = core.median([r["payload"].get("rows_per_s_cpu") for r in runs
                         if r["system"].startswith("River") and r["returncode"] == 0])
    vwm = core.median([r["payload"].get("rows_per_s_cpu") for r in runs
                       if r["system"].startswith("Vowpal") and r["returncode"] == 0])
    heads = ["learner", "rows", "rows/s (learning CPU)"] + [k.replace("_", " ")
                                                            for k in metric_keys] + [
        "process CPU s", "peak RSS MB", "vs River", "vs VW", "runs"]
    rows = []
    for label, _ in systems:
        rs = [r for r in runs if r["system"] == label and r["returncode"] == 0]
        if not rs:
            rows.append([label, "failed"] + [""] * (len(heads) - 2))
            continue
        rate = core.median([r["payload"]["rows_per_s_cpu"] for r in rs])
        rows.append([label, f"{rs[0]['payload']['rows']:,}",
                     core.spread([r["payload"]["rows_per_s_cpu"] for r in rs], "{:,.0f}")]
                    + [f"{core.median([r['payload'].get(k) for r in rs]):.4f}"
                       if rs[0]["payload"].get(k) is not None else "" for k in metric_keys]
                    + [core.spread([r["cpu_s"] for r in rs]),
                       core.spread([r["maxrss_mb"] for r in rs], "{:.0f}"),
                       core.ratio(rate, river, "{:.1f}x"), core.ratio(rate, vwm, "{:.2f}x"),
                       str(len(rs))])
    note = ("rows/s: rows divided by the CPU seconds of the learning loop measured in the "
            "process (fmlearn: `evaluate_prequential` predict-then-learn in batches of 10,000, "
            "after compiling on a throw-away copy; FM-SGD: `partial_fit` in batches, no "
            "prequential metric; River: its predict_one/learn_one loop"
            + (f" on the first {river_rows:,} rows" if river_rows else "")
            + "; Vowpal Wabbit: its own driver on a text file, parsing included)."
            + (f" Projection learners on d = {d} run on the first 5,000 rows." if d >= 200
               else ""))
    return runs, core.md_table(heads, rows) + "\n\n" + note


def _cold_commands(sc, ctx):
    py = ctx.py
    if sc.conf["what"] == "import":
        cmds = [("python -c pass", [py, "-c", "pass"]),
                ("import sklearn.base", [py, "-c", "import sklearn.base"]),
                ("import fmlearn", [py, "-c", "import fmlearn"]),
                ("from fmlearn import FMRegressor", [py, "-c", "from fmlearn import FMRegressor"])]
        for label, other in ctx.fmlearns[1:]:
            cmds.append((f"{label}: import fmlearn", [other, "-c", "import fmlearn"]))
            cmds.append((f"{label}: from fmlearn import FMRegressor",
                         [other, "-c", "from fmlearn import FMRegressor"]))
        return cmds, "import sklearn.base", None
    X, y = ctx.movielens()
    from fmlearn.datasets import save_svmlight

    ratings = ctx.path("ml100k.all.libfm")
    one = ctx.path("two.libfm")
    if not os.path.exists(ratings):
        save_svmlight(X, y, ratings)
        # libFM clips to the training file's target range: give it the lowest and the highest
        lo_hi = [int(np.argmin(y)), int(np.argmax(y))]
        save_svmlight(X[lo_hi], y[lo_hi], one)
    models = {}
    for solver in ("sgd", "mcmc"):
        models[solver] = ctx.path(f"model-{solver}.fmz")
        if not os.path.exists(models[solver]):
            extra = ["--learning-rate", "0.005", "--reg", "0,0,0.1"] if solver == "sgd" else []
            subprocess.run([py, "-m", "fmlearn", "fit", ratings, "--solver", solver, "--n-factors",
                            str(RANK), "--n-iter", "20", "--seed", "0", "--model", models[solver]]
                           + extra, check=True, env=ctx.env, stdout=subprocess.DEVNULL)
    cmds = [(f"fmlearn predict ({solver.upper()} model)",
             [py, "-m", "fmlearn", "predict", models[solver], ratings, "--out",
              ctx.path(f"pred-cold-{solver}.txt")]) for solver in ("sgd", "mcmc")]
    for label, other in ctx.fmlearns[1:]:
        cmds.append((f"{label}: fmlearn predict (SGD model)",
                     [other, "-m", "fmlearn", "predict", models["sgd"], ratings, "--out",
                      ctx.path(f"pred-cold-{label}.txt")]))
    if ctx.libfm:
        model = ctx.path("model-sgd.libfm")
        if not os.path.exists(model):
            subprocess.run([ctx.libfm, "-train", ratings, "-test", one, "-iter", "20",
                            "-save_model", model] + _libfm_args(
                {"method": "sgd", "lr": 0.005, "reg": (0.0, 0.0, 0.1)}, 0),
                check=True, stdout=subprocess.DEVNULL)
        cmds.insert(0, ("libFM -load_model (SGD model) -iter 0",
                        [ctx.libfm, "-task", "r", "-method", "sgd", "-dim", f"1,1,{RANK}",
                         "-learn_rate", "0.005", "-iter", "0", "-load_model", model,
                         "-train", one, "-test", ratings,
                         "-out", ctx.path("pred-cold-libfm.txt")]))
    return cmds, cmds[0][0], y


def run_commands(sc, ctx):
    """Plain commands in fresh processes, alternated (the cold-process scenarios)."""
    cmds, ref_label, y = _cold_commands(sc, ctx)
    for _, cmd in cmds:
        core.measure(cmd, ctx.env)  # fill numba's cache and the OS file cache
    runs = []
    for rep in range(max(ctx.reps, 5)):
        for label, cmd in cmds:
            run = core.measure(cmd, ctx.env)
            run.update(system=label, rep=rep)
            if y is not None and run["returncode"] == 0:
                out = cmd[cmd.index("-out" if "-out" in cmd else "--out") + 1]
                run["rmse"] = _rmse(out, y, y)
            runs.append(run)
            _progress(sc, f"{label} rep {rep}", run)
    ref = core.median([r["cpu_s"] for r in runs if r["system"] == ref_label])
    heads = ["command", "process CPU s", "process wall s", "peak RSS MB",
             f"CPU vs {ref_label}", "runs"]
    rows = []
    for label, _ in cmds:
        rs = [r for r in runs if r["system"] == label and r["returncode"] == 0]
        cpu = core.median([r["cpu_s"] for r in rs])
        rows.append([label, core.spread([r["cpu_s"] for r in rs]),
                     core.spread([r["wall_s"] for r in rs]),
                     core.spread([r["maxrss_mb"] for r in rs], "{:.0f}"),
                     core.ratio(cpu, ref), str(len(rs))])
    note = ""
    if y is not None:
        rmse = {label: core.median([r.get("rmse") for r in runs if r["system"] == label])
                for label, _ in cmds}
        note = ("\n\nEach command reads the 100,000 ratings of MovieLens-100K (one libFM file), "
                "loads a model trained on them (20 epochs/sweeps, k = 8) and writes 100,000 "
                "predictions. RMSE of the written predictions: " + ", ".join(
                    f"{label} {v:.4f}" for label, v in rmse.items() if v is not None)
                + ". libFM cannot load an MCMC model; `-iter 0` with a two-row training file "
                "(ratings 1 and 5: libFM clips to the training range) makes it load the model "
                "and predict.")
    return runs, core.md_table(heads, rows) + note


def run_compile(sc, ctx):
    """First-call cost of the kernels with an empty numba cache, then with the filled one."""
    runs = []
    for rep in range(ctx.reps):
        cache_dir = tempfile.mkdtemp(prefix="numba-cache-", dir=ctx.work)
        for state in ("cold", "warm"):
            env = dict(ctx.env, NUMBA_CACHE_DIR=cache_dir)
            run = core.measure([ctx.py, FMLEARN_CHILD, "compile"], env)
            run.update(system=f"{state} cache", rep=rep)
            runs.append(run)
            _progress(sc, f"{state} rep {rep}", run)
    keys = ["import", "fm_sgd", "fm_als", "fm_mcmc", "online_fm_ftrl", "ccfm_ocg"]
    heads = ["numba cache", "import", "FM SGD", "FM ALS", "FM MCMC", "online FM-FTRL",
             "CCFM OCG", "process CPU s", "process wall s", "runs"]
    rows = []
    for state in ("cold cache", "warm cache"):
        rs = [r for r in runs if r["system"] == state and r["returncode"] == 0]
        rows.append([state] + [core.spread([r["payload"].get(f"{k}_cpu") for r in rs])
                               for k in keys]
                    + [core.spread([r["cpu_s"] for r in rs]),
                       core.spread([r["wall_s"] for r in rs]), str(len(rs))])
    note = ("CPU seconds in a fresh process: importing the estimators (scikit-learn, numba, "
            "the kernel modules), then the first fit + predict of each family on a tiny input "
            "(60 rows): with an empty `NUMBA_CACHE_DIR` (compiles), then again with the cache "
            "it filled (loads). fmlearn only: a single-system measurement.")
    return runs, core.md_table(heads, rows) + "\n\n" + note


MEMORY_CASES = [  # (rows, users, items): n, 2n at fixed d; d, 2d at fixed n
    (500_000, 2000, 2000), (1_000_000, 2000, 2000), (500_000, 4000, 4000)]


def run_memory(sc, ctx):
    """Peak memory of fits on n and 2n rows, d and 2d features (fmlearn only)."""
    runs = []
    for solver in ("sgd", "als", "mcmc"):
        for rows_, users, items in MEMORY_CASES:
            params = {"n_factors": RANK, "solver": solver, "n_iter": 3, "random_state": 0}
            cmd = [ctx.py, FMLEARN_CHILD, "memory", "--rows", str(rows_), "--users", str(users),
                   "--items", str(items), "--params", json.dumps(params)]
            run = core.measure(cmd, ctx.env)
            run.update(system=solver, rep=0)
            runs.append(run)
            _progress(sc, f"{solver} n={rows_} d={users + items}", run)
    heads = ["solver", "rows", "d", "nnz", "data MB", "peak traced MB above baseline",
             "VmHWM MB above baseline", "traced / first case"]
    rows = []
    for solver in ("sgd", "als", "mcmc"):
        rs = [r for r in runs if r["system"] == solver and r["returncode"] == 0]
        first = rs[0]["payload"]["traced_mb"] if rs else None
        for r in rs:
            p = r["payload"]
            rows.append([solver, f"{p['rows']:,}", f"{p['n_features']:,}", f"{p['nnz']:,}",
                         f"{p['data_mb']:.0f}", f"{p['traced_mb']:.0f}", f"{p['hwm_mb']:.0f}",
                         core.ratio(p["traced_mb"], first)])
    note = ("One fresh process per line: generate one-hot rows (`make_recommendation`, distinct "
            "pairs), load the kernels, then fit 3 iterations (k = 8); 'above baseline' is "
            "measured from the process's level after imports, data and kernels (tracemalloc's "
            "peak, which counts NumPy buffers; and the rise of VmHWM after resetting it). "
            "Doubling the rows doubles the peak (O(nnz)); doubling d at the same rows barely "
            "moves it (O(d k) is small here). fmlearn only: a single-system measurement.")
    return runs, core.md_table(heads, rows) + "\n\n" + note


KINDS = {"fit": run_fit, "epochs": run_epochs, "online": run_online, "commands": run_commands,
         "compile": run_compile, "memory": run_memory}


def _expand(names):
    out = []
    for name in names or ["all"]:
        if name in GROUPS:
            out += [n for n in GROUPS[name] if n not in out]
        elif name in BY_NAME:
            if name not in out:
                out.append(name)
        else:
            raise SystemExit(f"unknown scenario {name!r}; see: python benchmarks/sbs.py list")
    return out


def _versions(ctx):
    out = {"fmlearn": core.git_describe(HERE), "python": platform.python_version(),
           "cpus": os.cpu_count()}
    if ctx.libfm:
        out["libfm"] = core.LIBFM_VERSION
    if ctx.peers_py:
        code = ("import json, importlib.metadata as m\nd = {}\nfor p in ('myfm', 'river', "
                "'vowpalwabbit'):\n    try: d[p] = m.version(p)\n    except Exception: pass\n"
                "print(json.dumps(d))")
        done = subprocess.run([ctx.peers_py, "-c", code], capture_output=True, text=True)
        if done.returncode == 0:
            out.update(json.loads(done.stdout))
    return out


def cmd_run(args):
    names = _expand(args.scenarios)
    ctx = Context(args)
    command = "python benchmarks/sbs.py run " + " ".join(args.scenarios or ["all"])
    if args.reps != 2:
        command += f" --reps {args.reps}"
    if args.seeds != [0, 1, 2]:
        command += " --seeds " + " ".join(map(str, args.seeds))
    for label, _ in ctx.fmlearns[1:]:
        command += f" --also {label}=..."
    result = {"command": command, "started": datetime.datetime.now().isoformat(timespec="seconds"),
              "versions": None, "scenarios": {}}
    with core.bench_lock(not args.no_lock):
        # the run starts when the lock is ours
        result["started"] = datetime.datetime.now().isoformat(timespec="seconds")
        result["versions"] = _versions(ctx)
        load0 = os.getloadavg()
        print(f"## Side-by-side run {result['started']}\n\nCommand: `{command}` (peers from "
              f"$FMLEARN_LIBFM and $FMLEARN_PEERS_PYTHON); versions: " + ", ".join(
                  f"{k} {v}" for k, v in result["versions"].items())
              + f"; load average at the start {load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f} "
              "(1 / 5 / 15 min).\n", flush=True)
        try:
            for name in names:
                sc = BY_NAME[name]
                print(f"[{name}] ...", file=sys.stderr, flush=True)
                try:
                    runs, table = KINDS[sc.kind](sc, ctx)
                except Exception:  # report and go on with the other scenarios
                    runs, table = [], "failed:\n\n```\n" + traceback.format_exc() + "```"
                    print(table, file=sys.stderr, flush=True)
                text = (f"### {sc.title}\n\nCommand: `python benchmarks/sbs.py run {name}"
                        + (f" --reps {args.reps}" if args.reps != 2 else "")
                        + f"`; load average {core.load_range(runs)} during the runs.\n\n{table}\n")
                print(text, flush=True)
                result["scenarios"][name] = {"title": sc.title, "runs": runs, "markdown": text}
                if args.json:
                    _write_json(args.json, result)
        finally:
            if not args.workdir and not args.keep:
                shutil.rmtree(ctx.work, ignore_errors=True)
    return result


def _write_json(path, result):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(result, fh, indent=1, default=float)
    os.replace(tmp, path)


def cmd_list(args):
    for s in SCENARIOS:
        print(f"{s.name:20s} {s.kind:9s} {', '.join(s.systems):22s} {s.title}")
    print()
    for g, members in GROUPS.items():
        print(f"{g}: {' '.join(members)}")


def cmd_setup(args):
    binary = core.find_libfm(args.libfm, args.libfm_tarball)
    print(f"libFM: {binary or 'not found (pass --libfm-tarball libfm-1.4.4.tar.gz)'}")
    print(f"peers python: {core.find_peers_python(args.peers_python, create=True)}")


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="scenarios and groups")
    for name in ("run", "setup"):
        s = sub.add_parser(name)
        s.add_argument("--libfm", default=None, help="libFM binary (or $FMLEARN_LIBFM)")
        s.add_argument("--libfm-tarball", default=None,
                       help="libfm-1.4.4.tar.gz to build into the peers cache")
        s.add_argument("--peers-python", default=None,
                       help="Python with myfm, river, vowpalwabbit (or $FMLEARN_PEERS_PYTHON)")
    s = sub.choices["run"]
    s.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="names or groups (all)")
    s.add_argument("--reps", type=int, default=2, help="repetitions of every case (default 2)")
    s.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    s.add_argument("--fmlearn-python", default=None, help="Python of the fmlearn under test")
    s.add_argument("--also", action="append", metavar="LABEL=PYTHON",
                   help="another fmlearn (e.g. main's venv) as one more system")
    s.add_argument("--data", default=None, help="MovieLens-100K folder or ratings file")
    s.add_argument("--libsvm-data", default=None, help="folder with ijcnn1.trn.bz2, .tst.bz2")
    s.add_argument("--workdir", default=None, help="keep (and reuse) the data files here")
    s.add_argument("--keep", action="store_true", help="keep the temporary folder")
    s.add_argument("--json", default=None, help="write every run to this JSON file")
    s.add_argument("--no-lock", action="store_true", help="do not take the benchmark lock")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    return {"run": cmd_run, "list": cmd_list, "setup": cmd_setup}[args.command](args)


if __name__ == "__main__":
    main()
