"""Implicit-feedback ranking: fmlearn's FMRanker (WARP, BPR, iCD) against LightFM (WARP, BPR)
and implicit (ALS, BPR), side by side, one table per command.

    python benchmarks/bench_ranking.py ml100k  [--reps 3] [--seeds 0 1 2] [--k 32]
    python benchmarks/bench_ranking.py cold    [--reps 3] [--seeds 0 1 2]
    python benchmarks/bench_ranking.py topk    [--reps 3]
    python benchmarks/bench_ranking.py scale   [--reps 3] [--events 20000000]
    python benchmarks/bench_ranking.py check   [--seeds 0]
    python benchmarks/bench_ranking.py validate [--seeds 0 1 2]   # fmlearn's defaults

Tables:

- ``ml100k``: MovieLens-100K, ratings >= 4 as positives, each user's positives split 80/20 at
  random (``fmlearn.ranking.per_user_split``, seeds 0, 1, 2); precision@10, NDCG@10,
  recall@10, MAP@10 and AUC over users with a held-out positive, training positives
  excluded (``fmlearn.metrics.ranking_metrics`` on every system's full score matrix), fit CPU
  and wall seconds. Same k for all; WARP and BPR run the same number of epochs (``--epochs``,
  default 30); implicit's ALS runs ``--sweeps`` iterations (default 15, its default), iCD its
  default number of sweeps (10) and ``--sweeps``.
- ``cold``: 20% of the items held out with all their events (``cold_item_split``); items
  described by their genres and release decade (and, for the warm items, their id); the
  held-out items ranked for every user with a held-out positive among them (precision@10 and
  the others on those items only).
- ``topk``: the top 10 of all 943 users (training items excluded) from a fitted model:
  ``fmlearn.recommend`` on an FMRanker (iCD) against implicit's ``recommend`` on its ALS
  model of the same k, CPU per 1,000 users.
- ``scale``: ``--events`` synthetic events (default 20,000,000; Zipf item popularity,
  exponent 1, over 100,000 items; 500,000 users): CPU seconds per epoch (median over the
  epochs after the first) and the process's peak resident memory.
- ``check``: fmlearn's ranking metrics against LightFM's ``precision_at_k``,
  ``recall_at_k``, ``auc_score`` and implicit's ``ranking_metrics_at_k`` on the same scores
  (a fitted FMRanker's score matrix, rounded to float32 as both peers store it).
- ``validate``: fmlearn's learners on a validation cut (20% of each user's training events)
  of each split, for choosing defaults without the test positives.

Every run is a fresh process (``_ranking_child.py``), the systems alternated (A B C A B C ...)
within each repetition and seed, every system on one thread (OMP/OPENBLAS/MKL/NUMBA thread
variables set to 1, LightFM ``num_threads=1``, implicit ``num_threads=1``). Fit times are the
child's own ``time.process_time`` (CPU) and ``perf_counter`` (wall) around ``fit`` (fmlearn's
kernels are loaded from numba's cache by a one-epoch fit before); the load average is
recorded before and after each run. Tables report the median and the min-max over all runs.

Data: MovieLens-100K from ``--data`` or fmlearn's default folder (``$FMLEARN_DATA/ml-100k``,
else ``~/.cache/fmlearn/ml-100k``); the peers' interpreter from ``--peers-python`` or
``$FMLEARN_PEERS_PYTHON`` (else the peers cache's venv; see benchmarks/README.md).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _sbs_core import (  # noqa: E402
    bench_lock,
    child_env,
    find_peers_python,
    git_describe,
    load_range,
    md_table,
    measure,
    spread,
)

CHILD = os.path.join(HERE, "_ranking_child.py")
METRICS = ("precision", "ndcg", "recall", "map", "auc")


# -- data ----------------------------------------------------------------------------------------
def movielens_positives(path):
    """(users, items, timestamps, n_users, n_items, item side features CSR) of the ratings >= 4
    of MovieLens-100K (0-based ids over all users and items)."""
    from fmlearn.datasets import load_movielens_100k

    ml = load_movielens_100k(path, side_features=True)
    keep = ml.y >= 4
    F = sp.csr_matrix(ml.item_features, dtype=np.float64)  # genres and release decade
    return (ml.user_index[keep], ml.item_index[keep], ml.timestamps[keep], ml.n_users,
            ml.n_items, F)


def _write(path, **arrays):
    np.savez(path, **arrays)
    return path


def _features(F):
    return {"if_data": F.data, "if_indices": F.indices, "if_indptr": F.indptr,
            "n_item_features": F.shape[1]}


def prepare_ml100k(args, seed, validate=False):
    from fmlearn.ranking import per_user_split

    users, items, _, n_u, n_i, F = movielens_positives(args.data)
    train, test = per_user_split(users, 0.2, random_state=seed)
    if validate:  # a validation cut of the training events; the test events are not used
        tr2, va = per_user_split(users[train], 0.2, random_state=1000 + seed)
        train, test = train[tr2], train[va]
    path = os.path.join(args.workdir, f"ml100k-{'val-' if validate else ''}{seed}.npz")
    return _write(path, train_users=users[train], train_items=items[train],
                  test_users=users[test], test_items=items[test], n_users=n_u, n_items=n_i,
                  **_features(F))


def prepare_cold(args, seed):
    from fmlearn.ranking import cold_item_split

    users, items, _, n_u, n_i, F = movielens_positives(args.data)
    train, test, cold = cold_item_split(items, 0.2, random_state=seed)
    path = os.path.join(args.workdir, f"cold-{seed}.npz")
    return _write(path, train_users=users[train], train_items=items[train],
                  test_users=users[test], test_items=items[test], n_users=n_u, n_items=n_i,
                  cold=cold, **_features(F))


def prepare_scale(args, seed):
    path = os.path.join(args.workdir, f"scale-{args.events}-{seed}.npz")
    if os.path.exists(path):
        return path
    rng = np.random.default_rng(seed)
    n_users, n_items = 500_000, 100_000
    p = 1.0 / np.arange(1, n_items + 1)
    p /= p.sum()
    items = rng.choice(n_items, size=args.events, p=p).astype(np.int32)
    items = rng.permutation(n_items).astype(np.int32)[items]  # popularity not by id
    users = rng.integers(0, n_users, size=args.events, dtype=np.int32)
    return _write(path, train_users=users, train_items=items, n_users=n_users,
                  n_items=n_items)


# -- systems ----------------------------------------------------------------------------------
def systems(table, args):
    k, ep, sw = args.k, args.epochs, args.sweeps
    fm = {"warp": {"n_factors": k, "loss": "warp", "n_iter": ep},
          "bpr": {"n_factors": k, "loss": "bpr", "n_iter": ep},
          "icd": {"n_factors": k, "loss": "squared"},  # its default sweeps
          f"icd ({sw} sweeps)": {"n_factors": k, "loss": "squared", "n_iter": sw}}
    peers = {
        "lightfm-warp": ("lightfm", {"n_factors": k, "loss": "warp", "epochs": ep}),
        "lightfm-bpr": ("lightfm", {"n_factors": k, "loss": "bpr", "epochs": ep}),
        "implicit-als": ("implicit", {"algo": "als", "n_factors": k, "iterations": sw}),
        "implicit-bpr": ("implicit", {"algo": "bpr", "n_factors": k, "iterations": ep}),
    }
    out = []
    if table in ("ml100k", "validate"):
        out += [(f"fmlearn {n}", "fmlearn", "fit", p, {}) for n, p in fm.items()]
        out += [(n, s, "fit", p, {}) for n, (s, p) in peers.items()]
    elif table == "cold":
        out += [(f"fmlearn {n}", "fmlearn", "fit", p, {"item_features": True})
                for n, p in fm.items()]
        out += [("lightfm-warp", "lightfm", "fit", peers["lightfm-warp"][1],
                 {"item_features": True})]
    elif table == "topk":
        out += [("fmlearn recommend (icd)", "fmlearn", "topk", fm[f"icd ({sw} sweeps)"], {}),
                ("implicit recommend (als)", "implicit", "topk",
                 peers["implicit-als"][1], {})]
    elif table == "scale":
        e = args.scale_epochs
        out += [("fmlearn warp", "fmlearn", "epoch", {**fm["warp"], "n_iter": e}, {}),
                ("lightfm-warp", "lightfm", "epoch", {**peers["lightfm-warp"][1],
                                                      "epochs": e}, {}),
                ("fmlearn bpr", "fmlearn", "epoch", {**fm["bpr"], "n_iter": e}, {}),
                ("lightfm-bpr", "lightfm", "epoch", {**peers["lightfm-bpr"][1],
                                                     "epochs": e}, {}),
                ("fmlearn icd", "fmlearn", "epoch", {**fm["icd"], "n_iter": e}, {}),
                ("implicit-als", "implicit", "epoch", {**peers["implicit-als"][1],
                                                       "iterations": e}, {})]
    if args.only:
        out = [s for s in out if any(o in s[0] for o in args.only)]
    for item in args.set or []:  # LABEL:PARAM=VALUE overrides, e.g. for tuning runs
        label, _, assignment = item.partition(":")
        key, _, value = assignment.partition("=")
        value = json.loads(value) if value[:1] in "0123456789-[{tfn\"" else value
        for s in out:
            if s[0] == label:
                s[3][key] = value
    return out


def run_child(args, label, system, mode, params, extra, data, seed, scores):
    spec = {"system": system, "mode": mode, "params": params, "data": data, "seed": seed,
            "scores": scores, **extra}
    fd, spec_path = tempfile.mkstemp(suffix=".json", dir=args.workdir)
    with os.fdopen(fd, "w") as fh:
        json.dump(spec, fh)
    python = sys.executable if system == "fmlearn" else args.peers_python
    try:
        run = measure([python, CHILD, spec_path], env=child_env(), timeout=args.timeout)
    finally:
        os.unlink(spec_path)
    if "error" in run:
        print(f"  {label} (seed {seed}) failed: {run['error']}", file=sys.stderr)
    return run


def evaluate(data, scores_path, cold=False):
    from fmlearn.metrics import ranking_metrics

    z = np.load(data)
    n_u, n_i = int(z["n_users"]), int(z["n_items"])
    S = np.load(scores_path)
    test = sp.csr_matrix((np.ones(z["test_users"].shape[0]),
                          (z["test_users"], z["test_items"])), shape=(n_u, n_i))
    train = sp.csr_matrix((np.ones(z["train_users"].shape[0]),
                           (z["train_users"], z["train_items"])), shape=(n_u, n_i))
    if cold:  # rank the held-out items only; they have no training event
        c = z["cold"]
        return ranking_metrics(S, test[:, c], k=10)
    return ranking_metrics(S, test, train=train, k=10)


# -- tables -----------------------------------------------------------------------------------
def table_quality(args, table):
    prep = {"ml100k": prepare_ml100k, "cold": prepare_cold,
            "validate": lambda a, s: prepare_ml100k(a, s, validate=True)}[table]
    sysl = systems(table, args)
    data = {s: prep(args, s) for s in args.seeds}
    rows = {label: [] for label, *_ in sysl}
    runs = []
    for rep in range(args.reps):
        for seed in args.seeds:
            for label, system, mode, params, extra in sysl:
                scores = os.path.join(args.workdir, f"scores-{table}-{seed}.npy")
                run = run_child(args, label, system, mode, params, extra, data[seed], seed,
                                scores)
                runs.append(run)
                if "error" in run:
                    continue
                rec = dict(run["payload"])
                rec.update(evaluate(data[seed], scores, cold=table == "cold"))
                rec["seed"] = seed
                rows[label].append(rec)
                print(f"  rep {rep} seed {seed} {label}: p@10 {rec['precision']:.4f} "
                      f"ndcg {rec['ndcg']:.4f} fit {rec['fit_cpu']:.2f} s CPU",
                      file=sys.stderr, flush=True)
    if table != "cold":  # a baseline: the items with most training events (no fit)
        label = "most popular (baseline)"
        rows[label] = []
        for seed in args.seeds:
            z = np.load(data[seed])
            pop = np.bincount(z["train_items"], minlength=int(z["n_items"])).astype(float)
            S = np.tile(pop - 1e-9 * np.arange(pop.shape[0]), (int(z["n_users"]), 1))
            path = os.path.join(args.workdir, f"scores-pop-{seed}.npy")
            np.save(path, S)
            rec = evaluate(data[seed], path)
            rec.update(seed=seed, fit_cpu=0.0, fit_wall=0.0)
            rows[label].append(rec)
    heads = ["system", "precision@10", "NDCG@10", "recall@10", "MAP@10", "AUC",
             "fit CPU s", "fit wall s"]
    body = []
    for label, recs in rows.items():
        if not recs:
            body.append([label] + ["failed"] * (len(heads) - 1))
            continue
        body.append([label] + [spread([r[m] for r in recs], "{:.4f}") for m in METRICS]
                    + [spread([r["fit_cpu"] for r in recs]),
                       spread([r["fit_wall"] for r in recs])])
    per_seed = _per_seed(rows)
    seeds = sorted({r["seed"] for recs in rows.values() for r in recs})
    heads2 = ["system"] + [f"seed {s}: P@10 / NDCG@10 / fit CPU s" for s in seeds]
    body2 = [[label] + [" / ".join(f"{v:.4f}" if i < 2 else f"{v:.2f}"
                                   for i, v in enumerate(per_seed[label][s]))
                        if s in per_seed.get(label, {}) else "" for s in seeds]
             for label in rows]
    text = md_table(heads, body) + "\n\nPer seed (median over repetitions):\n\n" + \
        md_table(heads2, body2)
    return text, runs, {"rows": rows, "per_seed": per_seed}


def _per_seed(rows):
    """Median over repetitions per (system, seed) of precision and NDCG (accuracy does not
    change between repetitions; only times do)."""
    out = {}
    for label, recs in rows.items():
        for r in recs:
            out.setdefault(label, {}).setdefault(r["seed"], []).append(
                (r["precision"], r["ndcg"], r["fit_cpu"]))
    return {label: {s: [statistics.median(v) for v in zip(*vals, strict=True)]
                    for s, vals in seeds.items()} for label, seeds in out.items()}


def table_topk(args):
    sysl = systems("topk", args)
    data = prepare_ml100k(args, args.seeds[0])
    rows = {label: [] for label, *_ in sysl}
    runs = []
    for _ in range(args.reps):
        for label, system, mode, params, extra in sysl:
            scores = os.path.join(args.workdir, "topk.npy")
            run = run_child(args, label, system, mode, params, extra, data, args.seeds[0],
                            scores)
            runs.append(run)
            if "error" not in run:
                rows[label].append(run["payload"])
    heads = ["system", "CPU s per 1,000 users", "wall s per 1,000 users", "users"]
    body = []
    for label, recs in rows.items():
        per = [1000.0 * r["topk_cpu"] / r["n_users"] for r in recs]
        wall = [1000.0 * r["topk_wall"] / r["n_users"] for r in recs]
        body.append([label, spread(per, "{:.4f}"), spread(wall, "{:.4f}"),
                     recs[0]["n_users"] if recs else "failed"])
    return md_table(heads, body), runs, {"rows": rows}


def table_scale(args):
    sysl = systems("scale", args)
    data = prepare_scale(args, 0)
    rows = {label: [] for label, *_ in sysl}
    runs = []
    for _ in range(args.reps):
        for label, system, mode, params, extra in sysl:
            run = run_child(args, label, system, mode, params, extra, data, 0, "")
            runs.append(run)
            if "error" not in run:
                rec = dict(run["payload"])
                rec["maxrss_mb"] = run["maxrss_mb"]
                rows[label].append(rec)
    heads = ["system", "CPU s per epoch", "fit CPU s", "fit wall s", "peak RSS MB"]
    body = []
    for label, recs in rows.items():
        body.append([label, spread([r["epoch_cpu"] for r in recs]),
                     spread([r["fit_cpu"] for r in recs]),
                     spread([r["fit_wall"] for r in recs]),
                     spread([r["maxrss_mb"] for r in recs], "{:.0f}")])
    return md_table(heads, body), runs, {"rows": rows}


def table_check(args):
    from fmlearn.metrics import ranking_metrics

    heads = ["seed", "metric", "fmlearn", "LightFM", "implicit", "largest difference"]
    body = []
    runs = []
    for seed in args.seeds:
        data = prepare_ml100k(args, seed)
        scores = os.path.join(args.workdir, f"check-{seed}.npy")
        run = run_child(args, "fmlearn warp", "fmlearn", "fit",
                        {"n_factors": args.k, "loss": "warp", "n_iter": 10}, {}, data, seed,
                        scores)
        runs.append(run)
        S = np.load(scores).astype(np.float32)
        np.save(scores, S)
        z = np.load(data)
        shape = (int(z["n_users"]), int(z["n_items"]))
        test = sp.csr_matrix((np.ones(z["test_users"].shape[0]),
                              (z["test_users"], z["test_items"])), shape=shape)
        train = sp.csr_matrix((np.ones(z["train_users"].shape[0]),
                               (z["train_users"], z["train_items"])), shape=shape)
        ours = ranking_metrics(S.astype(np.float64), test, train=train, k=10, per_user=True)
        run = run_child(args, "peers check", "peers", "check", {}, {"k": 10}, data, seed,
                        scores)
        runs.append(run)
        peer = run["payload"]
        n_t = np.diff(test.indptr)[ours["users"]]
        hits = ours["precision"] * 10
        micro = hits.sum() / np.minimum(n_t, 10).sum()
        pairs = [("precision@10", ours["precision"].mean(), peer.get("lightfm_precision"),
                  None),
                 ("AUC, a tied negative counted above the positive (LightFM's rule)",
                  _auc_ties_against_positive(S, test, train), peer.get("lightfm_auc"), None),
                 ("recall@10", ours["recall"].mean(), peer.get("lightfm_recall"), None),
                 ("AUC", np.nanmean(ours["auc"]), peer.get("lightfm_auc"), None),
                 ("NDCG@10", ours["ndcg"].mean(), None, peer.get("implicit_ndcg")),
                 ("MAP@10", ours["map"].mean(), None, peer.get("implicit_map")),
                 ("hits / sum min(10, held out) (implicit's 'precision')", micro, None,
                  peer.get("implicit_precision"))]
        for name, a, b, c in pairs:
            other = b if b is not None else c
            diff = abs(a - other) if other is not None else float("nan")
            body.append([seed, name, f"{a:.6f}", "" if b is None else f"{b:.6f}",
                         "" if c is None else f"{c:.6f}", f"{diff:.1e}"])
    return md_table(heads, body), runs, {}


def _auc_ties_against_positive(S, test, train):
    """Mean per-user AUC counting a negative tied with a positive as ranked above it (LightFM's
    ``auc_score``; fmlearn counts half), over users with a held-out positive."""
    out = []
    for u in range(S.shape[0]):
        held = set(test.indices[test.indptr[u]:test.indptr[u + 1]].tolist())
        seen = set(train.indices[train.indptr[u]:train.indptr[u + 1]].tolist())
        held -= seen
        if not held:
            continue
        cand = np.array([i for i in range(S.shape[1]) if i not in seen])
        is_pos = np.isin(cand, list(held))
        neg = np.sort(S[u, cand[~is_pos]])
        if neg.size == 0:
            continue
        above = neg.size - np.searchsorted(neg, S[u, cand[is_pos]], side="left")
        out.append(1.0 - above.sum() / (is_pos.sum() * neg.size))
    return float(np.mean(out))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("table", choices=["ml100k", "cold", "topk", "scale", "check", "validate"])
    ap.add_argument("--data", default=None, help="MovieLens-100K folder or ratings file")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--k", type=int, default=32, help="n_factors of every system")
    ap.add_argument("--epochs", type=int, default=30, help="WARP and BPR epochs")
    ap.add_argument("--sweeps", type=int, default=15, help="iCD and ALS sweeps")
    ap.add_argument("--events", type=int, default=20_000_000, help="scale: events")
    ap.add_argument("--scale-epochs", type=int, default=3, help="scale: epochs per run")
    ap.add_argument("--only", nargs="+", help="systems whose label contains one of these")
    ap.add_argument("--set", action="append", metavar="LABEL:PARAM=VALUE",
                    help="override a system's parameter (e.g. lightfm-warp:learning_rate=0.03)")
    ap.add_argument("--peers-python", default=None)
    ap.add_argument("--workdir", default=None, help="keep data and scores here")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--json", default=None, help="write every run's record here")
    ap.add_argument("--no-lock", action="store_true")
    args = ap.parse_args(argv)
    args.peers_python = find_peers_python(args.peers_python)
    if args.peers_python is None:
        raise SystemExit("no peers Python (--peers-python or FMLEARN_PEERS_PYTHON)")
    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="fmlearn-rank-")
        args.workdir = tmp.name
    os.makedirs(args.workdir, exist_ok=True)
    with bench_lock(not args.no_lock):
        load0 = os.getloadavg()
        if args.table in ("ml100k", "cold", "validate"):
            text, runs, extra = table_quality(args, args.table)
        elif args.table == "topk":
            text, runs, extra = table_topk(args)
        elif args.table == "scale":
            text, runs, extra = table_scale(args)
        else:
            text, runs, extra = table_check(args)
    cmd = "python benchmarks/bench_ranking.py " + " ".join(argv if argv is not None
                                                          else sys.argv[1:])
    print(f"### {args.table}\n\n`{cmd}` (fmlearn {git_describe(HERE)}, k = {args.k}, "
          f"seeds {args.seeds}, {args.reps} repetitions; load average at start "
          f"{load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f}, during runs "
          f"{load_range(runs)})\n")
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"runs": runs, **extra}, fh, default=str)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
