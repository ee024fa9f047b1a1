"""Relation blocks (Rendle 2013) side by side: fmlearn's relational MCMC against myFM's
relation blocks, libFM's ``-relation`` and fmlearn on the same features expanded into one flat
sparse matrix.

Data: MovieLens-100K, the project's 75/25 random splits (``fmlearn.datasets.movielens_split``,
seeds 0-2), with the "TimeSVD++ flipped" features of myFM's relation-block tutorial (Rendle et
al. 2019): the day of the rating as a category (row-level features; a test day unseen in
training has none), a user block (the user's id and, SVD++-style, the items the user rated in
the training part, each 1/sqrt(count)) and an item block (the item's id and the users who
rated it, each 1/sqrt(count)). Five feature groups, the same for every system: day, user id,
user's items, item id, item's users (myFM ``group_shapes``, fmlearn ``groups``, libFM the main
table's group and each relation's ``.groups`` file). MCMC, rank 8, 200 sweeps, init_stdev 0.1;
fmlearn and myFM predict with the samples after a burn-in of 10, libFM with the average of all
its sweeps (its ``-out``); every prediction clipped to the training range for the RMSE.

Every system reads the same data: the harness writes each split once, as an ``.npz`` for the
Python systems and as libFM's binary block structure (``fmlearn.datasets.save_libfm_binary``
and ``save_libfm_relation``: ``.x``/``.xt``/``.y``, ``.train``/``.test``, ``.groups``) for
libFM. Each run is a fresh process, one thread, the systems alternated (A B C D A B C D ...);
CPU seconds of the fit (measured inside: fmlearn and myFM around ``fit``, libFM the sum of
its ``time_learn``) and of the whole process (from outside), wall seconds, and the load
average during the runs.

    python benchmarks/bench_relation.py                      # the table (3 seeds x 3 reps)
    python benchmarks/bench_relation.py --quick              # a quick look (split 0, 2 reps)

Peers: ``--libfm`` / ``$FMLEARN_LIBFM`` (or ``--libfm-tarball``), ``--peers-python`` /
``$FMLEARN_PEERS_PYTHON`` (see benchmarks/README.md); a missing peer's rows are skipped.
``--flat-iter N`` runs the flat fmlearn fit for N sweeps only (it is the slow one) and scales
its CPU to the sweeps of the others for the ratio (the per-sweep cost is constant).
``--baseline-src DIR`` adds the system ``baseline``: fmlearn's relational fit run from another
source tree (DIR holds the ``fmlearn`` package, e.g. ``git archive main src | tar -x -C /tmp/b``
then ``--baseline-src /tmp/b/src``), alternated with the others: a change measured side by side.

    python benchmarks/bench_relation.py --systems fmlearn baseline libfm --seeds 0 --reps 3 \
        --baseline-src /tmp/b/src                            # this tree against main
"""

import argparse
import json
import os
import sys
import tempfile

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _sbs_core as core  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "_relation_child.py")
RANK = 8
BURN_IN = 10
SYSTEMS = ("fmlearn", "myfm", "libfm", "flat", "baseline")
# Repetition r of split s runs the chain seeded s + CHAIN_STRIDE * r in every system: the
# test RMSE averages over chains as well as splits (one MCMC chain's RMSE moves by a few
# 1e-4 with its seed, as much as the systems differ).
CHAIN_STRIDE = 1000


def _one_hot(codes, n_cols):
    """CSR with a 1 at (i, codes[i]) for codes >= 0 (an unknown code -1 gives an empty row)."""
    n = codes.shape[0]
    keep = codes >= 0
    return sp.csr_matrix((np.ones(int(keep.sum())), (np.flatnonzero(keep), codes[keep])),
                         shape=(n, n_cols))


def _normalized(M):
    """Rows scaled by 1/sqrt(their number of entries) (SVD++'s |N(u)|^-1/2)."""
    M = sp.csr_matrix(M, dtype=np.float64)
    M.data[:] = 1.0
    counts = np.diff(M.indptr)
    scale = 1.0 / np.sqrt(np.maximum(counts, 1))
    return sp.diags(scale) @ M


def make_split(data, seed):
    """The TimeSVD++-flipped features of one split (see the module docstring)."""
    from fmlearn.datasets import load_movielens_100k, movielens_split

    b = load_movielens_100k(data)
    _, users = np.unique(b.user_ids, return_inverse=True)
    _, items = np.unique(b.item_ids, return_inverse=True)
    nu, ni = int(users.max()) + 1, int(items.max()) + 1
    y = np.asarray(b.y, dtype=np.float64)
    tr, te = movielens_split(y.shape[0], seed)
    day = np.asarray(b.timestamps) // 86400
    days = np.unique(day[tr])
    code = np.searchsorted(days, day)
    known = (code < days.shape[0]) & (days[np.minimum(code, days.shape[0] - 1)] == day)
    code = np.where(known, code, -1)
    R = sp.csr_matrix((np.ones(tr.shape[0]), (users[tr], items[tr])), shape=(nu, ni))
    user = sp.hstack([sp.identity(nu, format="csr"), _normalized(R)], format="csr")
    item = sp.hstack([sp.identity(ni, format="csr"), _normalized(R.T)], format="csr")
    return {"date_train": _one_hot(code[tr], days.shape[0]),
            "date_test": _one_hot(code[te], days.shape[0]),
            "user": user, "item": item, "u_train": users[tr], "i_train": items[tr],
            "u_test": users[te], "i_test": items[te], "y_train": y[tr], "y_test": y[te],
            "group_sizes": np.array([days.shape[0], nu, ni, ni, nu])}


def write_split(d, workdir, seed):
    """The split as ``rel-<seed>.npz`` and as libFM's binary block structure; returns the
    paths (npz, libFM train prefix, test prefix, relations)."""
    from fmlearn.datasets import save_libfm_binary, save_libfm_relation

    npz = os.path.join(workdir, f"rel-{seed}.npz")
    pre = os.path.join(workdir, f"rel-{seed}")
    rels = [f"{pre}-user", f"{pre}-item"]
    if not os.path.exists(npz):
        arrays = {}
        for name in ("date_train", "date_test", "user", "item"):
            M = d[name]
            arrays.update({f"{name}_data": M.data, f"{name}_indices": M.indices,
                           f"{name}_indptr": M.indptr, f"{name}_shape": np.array(M.shape)})
        for name in ("u_train", "i_train", "u_test", "i_test", "y_train", "y_test",
                     "group_sizes"):
            arrays[name] = d[name]
        save_libfm_binary(f"{pre}.train", d["date_train"], d["y_train"])
        save_libfm_binary(f"{pre}.test", d["date_test"], d["y_test"])
        nu, ni = d["user"].shape[0], d["item"].shape[0]
        save_libfm_relation(rels[0], d["user"], {"train": d["u_train"], "test": d["u_test"]},
                            groups=np.r_[np.zeros(nu, int), np.ones(ni, int)])
        save_libfm_relation(rels[1], d["item"], {"train": d["i_train"], "test": d["i_test"]},
                            groups=np.r_[np.zeros(ni, int), np.ones(nu, int)])
        np.savez(npz + ".tmp.npz", **arrays)
        os.replace(npz + ".tmp.npz", npz)
    return npz, f"{pre}.train", f"{pre}.test", rels


def _rlog_learn(path):
    with open(path) as fh:
        head = fh.readline().rstrip("\n").split("\t")
        j = head.index("time_learn")
        return sum(float(line.split("\t")[j]) for line in fh if line.strip())


def command(system, ctx, files, seed, n_iter, pred, rlog):
    npz, train, test, rels = files
    if system == "libfm":
        return [ctx.libfm, "-task", "r", "-method", "mcmc", "-dim", f"1,1,{RANK}",
                "-iter", str(n_iter), "-init_stdev", "0.1", "-seed", str(seed),
                "-train", train, "-test", test, "-relation", ",".join(rels), "-out", pred,
                "-rlog", rlog, "-verbosity", "0"]
    py = ctx.peers_py if system == "myfm" else sys.executable
    mode = system if system in ("myfm", "flat") else "fmlearn"
    return [py, CHILD, mode, "--data", npz, "--out", pred, "--rank", str(RANK),
            "--n-iter", str(n_iter), "--n-kept", str(n_iter - BURN_IN), "--seed", str(seed),
            "--params", json.dumps({"init_stdev": 0.1})]


def _rmse(pred_path, y_train, y_test):
    pred = np.loadtxt(pred_path, dtype=np.float64, ndmin=1)
    if pred.shape != y_test.shape:
        return None
    pred = np.clip(pred, y_train.min(), y_train.max())
    return float(np.sqrt(np.mean((pred - y_test) ** 2)))


class _Ctx:
    def __init__(self, args):
        self.libfm = core.find_libfm(args.libfm, args.libfm_tarball)
        self.peers_py = core.find_peers_python(args.peers_python)
        self.env = core.child_env({"PYTHONPATH": HERE})
        self.baseline_env = None
        if args.baseline_src:
            src = os.path.abspath(args.baseline_src)
            if not os.path.isdir(os.path.join(src, "fmlearn")):
                raise SystemExit(f"--baseline-src {src}: no fmlearn package there")
            self.baseline_env = core.child_env({"PYTHONPATH": os.pathsep.join([src, HERE])})

    def env_of(self, system):
        return self.baseline_env if system == "baseline" else self.env


def run(args):
    ctx = _Ctx(args)
    workdir = args.workdir or tempfile.mkdtemp(prefix="fmlearn-relation-")
    os.makedirs(workdir, exist_ok=True)
    systems, notes = [], []
    for s in args.systems:
        if s == "libfm" and ctx.libfm is None:
            notes.append("libFM not found (--libfm, $FMLEARN_LIBFM or --libfm-tarball)")
        elif s == "baseline" and ctx.baseline_env is None:
            notes.append("baseline: no --baseline-src")
        elif s == "myfm" and ctx.peers_py is None:
            notes.append("myFM: peers' Python not found (--peers-python or "
                         "$FMLEARN_PEERS_PYTHON)")
        else:
            systems.append(s)
    splits = {}
    for seed in args.seeds:
        d = make_split(args.data, seed)
        splits[seed] = (write_split(d, workdir, seed), d["y_train"], d["y_test"])
    iters = {s: (args.flat_iter or args.n_iter) if s == "flat" else args.n_iter
             for s in systems}
    # untimed: numba's cache filled for these configurations
    for s in ("fmlearn", "flat", "baseline"):
        if s in systems:
            files = splits[args.seeds[0]][0]
            core.measure(command(s, ctx, files, 0, 2, os.path.join(workdir, "warm.txt"), None),
                         ctx.env_of(s))
    runs = []
    with core.bench_lock(not args.no_lock):
        for rep in range(args.reps):
            for seed in args.seeds:
                files, y_tr, y_te = splits[seed]
                for s in systems:
                    pred = os.path.join(workdir, f"pred-{s}-{seed}.txt")
                    rlog = os.path.join(workdir, f"rlog-{seed}.tsv")
                    chain = seed + CHAIN_STRIDE * rep  # each repetition another chain
                    r = core.measure(command(s, ctx, files, chain, iters[s], pred, rlog),
                                     ctx.env_of(s))
                    r.update(system=s, seed=seed, rep=rep)
                    if r["returncode"] == 0:
                        r["rmse"] = _rmse(pred, y_tr, y_te)
                        r["fit_cpu"] = (_rlog_learn(rlog) if s == "libfm"
                                        else r["payload"].get("fit_cpu"))
                        r["fit_wall"] = r["payload"].get("fit_wall")
                    runs.append(r)
                    _progress(r)
    print(table(systems, runs, iters, args, notes))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"runs": runs, "args": vars(args)}, fh, indent=1, default=str)


def _progress(r):
    bits = [f"{r['system']} seed {r['seed']} rep {r['rep']}: cpu {r['cpu_s']:.2f} s",
            f"wall {r['wall_s']:.2f} s", f"load {r['load_before']:.2f}"]
    for k in ("fit_cpu", "rmse"):
        if r.get(k) is not None:
            bits.append(f"{k} {r[k]:.4g}")
    if r.get("error"):
        bits.append("FAILED: " + r["error"].splitlines()[-1][:300])
    print("  " + ", ".join(bits), file=sys.stderr, flush=True)


def table(systems, runs, iters, args, notes):
    ok = {s: [r for r in runs if r["system"] == s and r["returncode"] == 0] for s in systems}
    # per-sweep-scaled fit CPU: the flat fit may run fewer sweeps (--flat-iter)
    scale = {s: args.n_iter / iters[s] for s in systems}
    fit = {s: core.median([r.get("fit_cpu") for r in ok[s]]) for s in systems}
    fit = {s: None if v is None else v * scale[s] for s, v in fit.items()}
    proc = {s: core.median([r["cpu_s"] for r in ok[s]]) for s in systems}
    heads = ["system", "test RMSE", "fit CPU s", "fit wall s", "process CPU s",
             "process wall s"]
    refs = [s for s in ("myfm", "libfm", "baseline") if s in systems]
    heads += [f"fit CPU / {s}" for s in refs] + [f"process CPU / {s}" for s in refs]
    if "flat" in systems:
        heads.append("flat fit CPU / this")
    heads.append("runs")
    rows = []
    for s in systems:
        rs = ok[s]
        rmse = [r.get("rmse") for r in rs]
        label = s if iters[s] == args.n_iter else f"{s} ({iters[s]} sweeps, CPU x{scale[s]:g})"
        row = [label, f"{np.mean(rmse):.4f}" if rmse and None not in rmse else "n/a",
               core.spread([r.get("fit_cpu") for r in rs]),
               core.spread([r.get("fit_wall") for r in rs]),
               core.spread([r["cpu_s"] for r in rs]), core.spread([r["wall_s"] for r in rs])]
        row += [core.ratio(fit[s], fit[p]) for p in refs]
        row += [core.ratio(proc[s], proc[p]) for p in refs]
        if "flat" in systems:
            row.append(core.ratio(fit["flat"], fit[s]))
        rows.append(row + [str(len(rs))])
    lines = [f"MovieLens-100K, TimeSVD++-flipped relation blocks, MCMC rank {RANK}, "
             f"{args.n_iter} sweeps, seeds {' '.join(map(str, args.seeds))}, "
             f"{args.reps} repetitions, one thread, alternated; load average "
             f"{core.load_range(runs)}; fmlearn {core.git_describe(HERE)}.", "",
             core.md_table(heads, rows), ""]
    lines += ["Medians (min-max) over splits and repetitions; test RMSE: mean over every run "
              f"(split s, repetition r: chain seed s + {CHAIN_STRIDE} r in every system)."]
    lines += [f"{n}." for n in notes]
    return "\n".join(lines)


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="MovieLens-100K folder (default: fmlearn's)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--n-iter", type=int, default=200)
    p.add_argument("--flat-iter", type=int, default=None,
                   help="sweeps of the flat fit (default: --n-iter); its CPU is scaled")
    p.add_argument("--systems", nargs="+", default=list(SYSTEMS[:4]), choices=SYSTEMS,
                   help="default: all but baseline (added by --baseline-src)")
    p.add_argument("--libfm", default=None)
    p.add_argument("--libfm-tarball", default=None)
    p.add_argument("--peers-python", default=None)
    p.add_argument("--workdir", default=None, help="keep the written data here (reused)")
    p.add_argument("--baseline-src", default=None,
                   help="source tree (holding the fmlearn package) of the system 'baseline'")
    p.add_argument("--json", default=None)
    p.add_argument("--no-lock", action="store_true")
    p.add_argument("--quick", action="store_true",
                   help="split 0, 2 repetitions, the flat fit 20 sweeps (a few minutes)")
    return p


def parse_args(argv=None):
    args = build_parser().parse_args(argv)
    if args.baseline_src and "baseline" not in args.systems:
        args.systems.append("baseline")
    if args.quick:
        args.seeds, args.reps = [0], 2
        args.flat_iter = args.flat_iter or 20
    return args


if __name__ == "__main__":
    run(parse_args())
