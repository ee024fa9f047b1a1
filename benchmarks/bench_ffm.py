"""Field-aware FMs side by side: fmlearn's FFMClassifier against LIBFFM (Juan et al. 2016) and
River's FFMClassifier, and against fmlearn's own FM. One command per table:

    python benchmarks/bench_ffm.py frappe    # test log-loss / AUC with early stopping; fit CPU
    python benchmarks/bench_ffm.py speed     # fit CPU only (the second half of frappe)
    python benchmarks/bench_ffm.py predict   # prediction CPU (LIBFFM's ffm-predict)
    python benchmarks/bench_ffm.py river     # partial_fit against River's learn_one
    python benchmarks/bench_ffm.py fm        # FFM against fmlearn's FMClassifier on Frappe
    python benchmarks/bench_ffm.py scale     # a 20M-row hashed CTR stream: rows/s, memory
        # quick: --rows 1000000 --reps 3; the issue's 20M rows: --rows 20000000 --systems
        # libffm,stream --reps 1 --workdir DIR (the in-memory fit would hold ~4 GB of rows;
        # DIR gets the 4.4 GB text once, LIBFFM's 5 GB .bin; fit_stream's cache, 3.4 GB,
        # goes to the system's temporary folder while it runs)

Every system runs in a fresh process on one thread (``_sbs_core.measure``: CPU and wall
seconds, peak resident memory, load average); the systems alternate (A B A B) for
``--reps`` repetitions and tables show the median and the min-max. fmlearn's figures are
measured inside its process after a warm-up that loads its compiled kernels from numba's
cache (the first call of a fresh install compiles them: ``compile`` in RESULTS.md); LIBFFM's
are its whole process (reading the text file and, on its first run, writing its binary cache).

Data and peers (no path is built in): Frappe from ``--frappe DIR`` or ``$FMLEARN_FRAPPE``
(``frappe.validation.libfm.bz2`` and ``frappe.test.libfm.bz2``: 10 one-hot features per row,
field = position in the line); LIBFFM from ``--libffm DIR`` or ``$FMLEARN_LIBFFM`` (the folder
holding ``ffm-train`` and ``ffm-predict``), else ``<peers cache>/libffm-af3ae37``; River from
the peers' Python (``--peers-python`` or ``$FMLEARN_PEERS_PYTHON``, else the peers' venv in
the cache). Files are written to ``--workdir`` (default a temporary folder; LIBFFM writes its
``.bin`` caches there). Protocol for Frappe (the issue's): train on the validation file with
10% of it (stratified, seed 0) carved out as the early-stopping set of both systems, test on
the test file.
"""

import argparse
import bz2
import json
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _sbs_core import (  # noqa: E402
    bench_lock,
    child_env,
    find_peers_python,
    load_range,
    md_table,
    measure,
    peers_cache,
    spread,
)

CHILD = os.path.join(HERE, "_ffm_child.py")
LIBFFM_DIR = "libffm-af3ae37"


# -- set-up -----------------------------------------------------------------------------------
def find_libffm(folder=None):
    folder = folder or os.environ.get("FMLEARN_LIBFFM") or os.path.join(peers_cache(),
                                                                         LIBFFM_DIR)
    train, predict = (os.path.join(folder, n) for n in ("ffm-train", "ffm-predict"))
    if not (os.access(train, os.X_OK) and os.access(predict, os.X_OK)):
        return None
    return train, predict


def frappe_files(args, work):
    """``(train, valid, test)`` libffm files of Frappe (converted once into ``work``)."""
    folder = args.frappe or os.environ.get("FMLEARN_FRAPPE")
    if not folder:
        raise SystemExit("give the Frappe folder with --frappe DIR or FMLEARN_FRAPPE")
    out = [os.path.join(work, f"frappe.{p}.ffm") for p in ("tr", "va", "te")]
    if all(os.path.exists(p) for p in out):
        return out

    def convert(name):
        rows, labels = [], []
        with bz2.open(os.path.join(folder, f"frappe.{name}.libfm.bz2"), "rt") as fh:
            for line in fh:
                parts = line.split()
                labels.append(1 if float(parts[0]) > 0 else 0)
                rows.append(" ".join(f"{i}:{tok}" for i, tok in enumerate(parts[1:])))
        return rows, np.array(labels)

    from sklearn.model_selection import train_test_split

    rows, y = convert("validation")
    tr, va = train_test_split(np.arange(len(rows)), test_size=0.1, stratify=y, random_state=0)
    test_rows, test_y = convert("test")
    for path, idx, src, lab in ((out[0], np.sort(tr), rows, y), (out[1], np.sort(va), rows, y),
                                (out[2], np.arange(len(test_rows)), test_rows, test_y)):
        with open(path, "w") as fh:
            fh.writelines(f"{lab[i]} {src[i]}\n" for i in idx)
    return out


def _labels(path):
    with open(path) as fh:
        return np.array([1 if float(line.split()[0]) > 0 else 0 for line in fh])


def _scores(y, p):
    from sklearn.metrics import log_loss, roc_auc_score

    p = np.clip(np.asarray(p, dtype=np.float64), 1e-15, 1 - 1e-15)
    return {"log_loss": float(log_loss(y, p)), "auc": float(roc_auc_score(y, p))}


def fmlearn_child(args, *argv, python=None):
    return measure([python or args.python, CHILD, *[str(a) for a in argv]], env=child_env())


def _ok(run, what):
    if run.get("error"):
        raise SystemExit(f"{what} failed:\n{run['error']}")
    return run


def _sh(cmd, log):
    return ["sh", "-c", " ".join(f"'{c}'" for c in cmd) + f" > '{log}' 2>&1"]


# -- tables -----------------------------------------------------------------------------------
def table_frappe(args, work):
    """Accuracy with each system's early stopping on the same carved-out rows, then fit CPU for
    the same number of epochs (without validation)."""
    tr, va, te = frappe_files(args, work)
    train_bin, predict_bin = _need_libffm(args)
    yte = _labels(te)
    runs = []
    for rep in range(args.reps):
        for k, lam in [(k, lam) for lam in args.lambdas for k in args.ks]:
            model, log, out = (os.path.join(work, f"libffm.k{k}.{n}") for n in
                               ("model", "log", "pred"))
            r = _ok(measure(_sh([train_bin, "-s", "1", "-k", str(k), "-l", repr(lam), "-t",
                                 str(args.max_epochs), "-p", va, "--auto-stop", tr, model],
                                log), env=child_env(), cwd=work), "ffm-train")
            _ok(measure([predict_bin, te, model, out], env=child_env(), cwd=work),
                "ffm-predict")
            text = open(log).read()
            kept = [int(w[:-2]) for w in text.split() if w.endswith("th")]
            n_iter = sum(1 for line in text.splitlines() if line.strip()[:1].isdigit())
            runs.append({"system": "LIBFFM", "k": k, "lam": lam, "rep": rep,
                         "proc_cpu": r["cpu_s"], "n_iter": n_iter,
                         "best": kept[-1] if kept else n_iter,
                         **_scores(yte, np.loadtxt(out)), "load_before": r["load_before"],
                         "load_after": r["load_after"]})
            r = _ok(fmlearn_child(args, "fit", "--train", tr, "--valid", va, "--test", te,
                                  "--k", k, "--lam", lam, "--seed", rep, "--epochs",
                                  args.max_epochs), "fmlearn fit")
            runs.append({"system": "fmlearn", "k": k, "lam": lam, "rep": rep,
                         "proc_cpu": r["cpu_s"],
                         **r["payload"], "best": r["payload"]["best_iteration"],
                         "load_before": r["load_before"], "load_after": r["load_after"]})
            print(json.dumps(runs[-2:]), flush=True)
    rows = []
    for k, lam in [(k, lam) for lam in args.lambdas for k in args.ks]:
        for system in ("LIBFFM", "fmlearn"):
            sel = [r for r in runs if r["k"] == k and r["lam"] == lam and r["system"] == system]
            rows.append([system, k, f"{lam:g}", spread([r["n_iter"] for r in sel], "{:.0f}"),
                         spread([r["best"] for r in sel], "{:.0f}"),
                         spread([r["log_loss"] for r in sel], "{:.4f}"),
                         spread([r["auc"] for r in sel], "{:.4f}")])
    print(f"\nFrappe, early stopping on the same 10% of the training file, test file; "
          f"{args.reps} repetitions (fmlearn seeds 0..{args.reps - 1}; LIBFFM's shuffles are "
          f"fixed); load {load_range(runs)}\n")
    print(md_table(["system", "k", "lambda (-l)", "epochs run", "epoch kept", "test log-loss",
                    "test AUC"], rows))
    speed = _frappe_speed(args, work, tr, te, train_bin)
    return runs + speed


def table_speed(args, work):
    """The fit-speed half of the frappe table alone."""
    tr, va, te = frappe_files(args, work)
    train_bin, _ = _need_libffm(args)
    return _frappe_speed(args, work, tr, te, train_bin)


def _frappe_speed(args, work, tr, te, train_bin):
    """Fit CPU for T and 1 epochs: LIBFFM, fmlearn and, with ``--old PYTHON``, a second
    fmlearn (another checkout's Python, e.g. main's) as ``fmlearn (old)``, alternated."""
    runs = []
    T = args.epochs
    fmlearns = [("fmlearn", args.python)] + ([("fmlearn (old)", args.old)] if args.old else [])
    for rep in range(args.reps):
        for k in args.ks:
            for epochs in (T, 1):
                model, log = (os.path.join(work, f"speed.k{k}.{n}") for n in ("model", "log"))
                r = _ok(measure(_sh([train_bin, "-s", "1", "-k", str(k), "-t", str(epochs),
                                     tr, model], log), env=child_env(), cwd=work),
                        "ffm-train")
                runs.append({"system": "LIBFFM", "k": k, "epochs": epochs, "rep": rep,
                             "fit_cpu": r["cpu_s"], "proc_cpu": r["cpu_s"],
                             "wall": r["wall_s"], "load_before": r["load_before"],
                             "load_after": r["load_after"]})
                # the fmlearns in turn, starting with another one each repetition
                order = fmlearns[rep % len(fmlearns):] + fmlearns[:rep % len(fmlearns)]
                for name, python in order:
                    r = _ok(fmlearn_child(args, "fit", "--train", tr, "--test", te, "--k", k,
                                          "--seed", rep, "--epochs", epochs, python=python),
                            f"{name} fit")
                    runs.append({"system": name, "k": k, "epochs": epochs, "rep": rep,
                                 "fit_cpu": r["payload"]["fit_cpu"], "proc_cpu": r["cpu_s"],
                                 "wall": r["payload"]["fit_wall"],
                                 "load_before": r["load_before"],
                                 "load_after": r["load_after"]})
                print(json.dumps(runs[-1 - len(fmlearns):]), flush=True)
    rows = []
    per_epoch = {}
    for k in args.ks:
        for system in ["LIBFFM", *(name for name, _ in fmlearns)]:
            sel = [r for r in runs if r["k"] == k and r["system"] == system]
            full = [r for r in sel if r["epochs"] == T]
            one = {r["rep"]: r for r in sel if r["epochs"] == 1}
            marginal = [(r["fit_cpu"] - one[r["rep"]]["fit_cpu"]) / (T - 1) for r in full]
            per_epoch.setdefault(k, {})[system] = float(np.median(marginal))
            rows.append([system, k, spread([r["fit_cpu"] for r in full]),
                         spread([r["wall"] for r in full]),
                         spread([r["proc_cpu"] for r in full]),
                         spread([m * 1e3 for m in marginal], "{:.1f}")])
    print(f"\nFit, {T} epochs of the 51,949 training rows, no validation; LIBFFM: its whole "
          f"process (reading the text, its binary cache already written); fmlearn: fit() in "
          f"a warm process, and the whole process (import, reading, compiled kernels loaded "
          f"from the cache, fit); per epoch: (T epochs - 1 epoch) / (T - 1); load "
          f"{load_range(runs)}\n")
    print(md_table(["system", "k", f"fit CPU s ({T} epochs)", "fit wall s",
                    "whole process CPU s", "CPU ms per epoch"], rows))
    print("\nCPU per epoch against LIBFFM's (medians): " + "; ".join(
        f"k={k}: " + ", ".join(f"{name} {e[name] / e['LIBFFM']:.2f}x" for name, _ in fmlearns)
        for k, e in per_epoch.items()))
    return runs


def table_predict(args, work):
    """Prediction of the test file: LIBFFM's ffm-predict against fmlearn's (read the libffm
    text, predict, write P(click) per line), in a warm process and as a whole command."""
    tr, va, te = frappe_files(args, work)
    train_bin, predict_bin = _need_libffm(args)
    k = args.ks[0]
    lib_model = os.path.join(work, f"predict.k{k}.model")
    fm_model = os.path.join(work, f"predict.k{k}.fmz")
    _ok(measure(_sh([train_bin, "-s", "1", "-k", str(k), "-t", "8", tr, lib_model],
                    os.path.join(work, "predict.log")), env=child_env(), cwd=work), "ffm-train")
    _ok(fmlearn_child(args, "fit", "--train", tr, "--test", te, "--k", k, "--epochs", 8,
                      "--save", fm_model), "fmlearn fit")
    fmlearn_cli = [args.python, "-m", "fmlearn.cli", "ffm-predict", te, fm_model,
                   os.path.join(work, "fm.pred")]
    runs = []
    for rep in range(args.reps):
        r = _ok(measure([predict_bin, te, lib_model, os.path.join(work, "lib.pred")],
                        env=child_env(), cwd=work), "ffm-predict")
        runs.append({"system": "LIBFFM ffm-predict (whole process)", "rep": rep,
                     "cpu": r["cpu_s"], "wall": r["wall_s"], "load_before": r["load_before"],
                     "load_after": r["load_after"]})
        r = _ok(fmlearn_child(args, "predict", "--model", fm_model, "--test", te, "--out",
                              os.path.join(work, "fm.pred")), "fmlearn predict")
        p = r["payload"]
        runs.append({"system": "fmlearn: read + predict + write (warm process)", "rep": rep,
                     "cpu": p["read_predict_write_cpu"], "wall": p["read_predict_write_wall"],
                     "load_before": r["load_before"], "load_after": r["load_after"]})
        runs.append({"system": "fmlearn: predict_proba only (warm process)", "rep": rep,
                     "cpu": p["predict_cpu"], "wall": p["predict_wall"]})
        r = _ok(measure(fmlearn_cli, env=child_env(), cwd=work), "fmlearn ffm-predict")
        runs.append({"system": "fmlearn ffm-predict (whole process)", "rep": rep,
                     "cpu": r["cpu_s"], "wall": r["wall_s"], "load_before": r["load_before"],
                     "load_after": r["load_after"]})
        print(json.dumps(runs[-4:]), flush=True)
    systems = list(dict.fromkeys(r["system"] for r in runs))
    rows = [[s, spread([r["cpu"] for r in runs if r["system"] == s], "{:.3f}"),
             spread([r["wall"] for r in runs if r["system"] == s], "{:.3f}")] for s in systems]
    print(f"\nPrediction of the 28,860 test rows (k={k}); load {load_range(runs)}\n")
    print(md_table(["system", "CPU s", "wall s"], rows))
    return runs


def table_river(args, work):
    """River's FFMClassifier.learn_one against fmlearn's partial_fit on the same stream (the
    training rows in file order, one pass), then the test file's log-loss."""
    tr, va, te = frappe_files(args, work)
    peers = find_peers_python(args.peers_python)
    if peers is None:
        raise SystemExit("River needs the peers' Python: --peers-python or "
                         "$FMLEARN_PEERS_PYTHON")
    runs = []
    common = ["--train", tr, "--test", te, "--rows", args.rows, "--k", 4]
    for rep in range(args.reps):
        for config in ("adagrad", "defaults"):
            r = _ok(measure([peers, CHILD, "river", *map(str, common), "--config", config,
                             "--seed", str(rep)], env=child_env()), "river")
            runs.append({"system": f"River FFMClassifier ({config})", "rep": rep,
                         **r["payload"], "load_before": r["load_before"],
                         "load_after": r["load_after"]})
        for batch in (1, 1000):
            r = _ok(fmlearn_child(args, "partial", *common, "--batch", batch, "--seed", rep),
                    "fmlearn partial_fit")
            runs.append({"system": f"fmlearn partial_fit ({batch} row{'s' * (batch > 1)} "
                                   "per call)", "rep": rep, **r["payload"],
                         "load_before": r["load_before"], "load_after": r["load_after"]})
        print(json.dumps(runs[-4:]), flush=True)
    systems = list(dict.fromkeys(r["system"] for r in runs))
    river = [r["rows"] / r["cpu"] for r in runs if r["system"].startswith("River") and
             "adagrad" in r["system"]]
    rows = []
    for s in systems:
        sel = [r for r in runs if r["system"] == s]
        rate = [r["rows"] / r["cpu"] for r in sel]
        rows.append([s, spread(rate, "{:,.0f}"), spread([r["rows"] / r["wall"] for r in sel],
                                                        "{:,.0f}"),
                     f"{np.median(rate) / np.median(river):.0f}x",
                     spread([r["log_loss"] for r in sel], "{:.4f}"),
                     spread([r["auc"] for r in sel], "{:.4f}")])
    print(f"\nOne pass over the first {min(args.rows, 51940)} training rows of Frappe in file "
          f"order, k=4, then the test file; load {load_range(runs)}\n")
    print(md_table(["system", "rows/s (CPU)", "rows/s (wall)", "vs River (AdaGrad)",
                    "test log-loss", "test AUC"], rows))
    return runs


# The grids of the FFM-against-FM table, each model chosen on the carved-out validation rows.
FFM_GRID = [{"k": k, "lam": lam} for k in (8, 32) for lam in (2e-5, 2e-4)]
FM_GRID = {
    "FM als": [{"n_factors": k, "solver": "als", "n_iter": 30, "reg_linear": r,
                "reg_pairwise": r} for k in (8, 32) for r in (0.3, 1.0, 3.0)],
    "FM mcmc": [{"n_factors": k, "solver": "mcmc", "n_iter": 100} for k in (8, 32)],
}


def table_fm(args, work):
    """FFM against fmlearn's classic FM on Frappe, each chosen on the same validation rows
    (the FFM's early-stopping set) from a small grid: the FFM over k and lambda (early
    stopping on those rows), the FM's ALS over k and its L2, its MCMC over k."""
    tr, va, te = frappe_files(args, work)
    runs = []
    for rep in range(args.reps):
        for g in FFM_GRID:
            r = _ok(fmlearn_child(args, "fit", "--train", tr, "--valid", va, "--test", te,
                                  "--k", g["k"], "--lam", g["lam"], "--seed", rep,
                                  "--epochs", args.max_epochs), "fmlearn fit")
            p = r["payload"]
            runs.append({"family": "FFM", "config": f"k={g['k']}, lambda={g['lam']:g}",
                         "rep": rep, "val": min(p["val"]), **{k: p[k] for k in (
                             "log_loss", "auc", "fit_cpu")},
                         "load_before": r["load_before"], "load_after": r["load_after"]})
        for family, grid in FM_GRID.items():
            for params in grid:
                r = _ok(fmlearn_child(args, "fm", "--train", tr, "--valid", va, "--test", te,
                                      "--params", json.dumps(params), "--seed", rep), family)
                p = r["payload"]
                cfg = ", ".join(f"{k}={v}" for k, v in params.items() if k != "solver")
                runs.append({"family": family, "config": cfg, "rep": rep,
                             "val": p["val_log_loss"], "log_loss": p["log_loss"],
                             "auc": p["auc"], "fit_cpu": p["fit_cpu"],
                             "load_before": r["load_before"], "load_after": r["load_after"]})
        print(json.dumps(runs[-(len(FFM_GRID) + sum(map(len, FM_GRID.values()))):]),
              flush=True)
    rows = []
    for family in ["FFM", *FM_GRID]:
        chosen = []
        for rep in range(args.reps):
            sel = [r for r in runs if r["family"] == family and r["rep"] == rep]
            chosen.append(min(sel, key=lambda r: r["val"]))
        configs = sorted({c["config"] for c in chosen})
        rows.append([family, "; ".join(configs), spread([c["val"] for c in chosen], "{:.4f}"),
                     spread([c["log_loss"] for c in chosen], "{:.4f}"),
                     spread([c["auc"] for c in chosen], "{:.4f}"),
                     spread([c["fit_cpu"] for c in chosen])])
    print(f"\nFrappe: each family's model chosen on the validation rows (10% of the "
          f"validation file) from its grid, then the test file; {args.reps} repetitions "
          f"(seeds); load {load_range(runs)}\n")
    print(md_table(["model", "chosen on validation", "validation log-loss", "test log-loss",
                    "test AUC", "fit CPU s"], rows))
    return runs


# -- the large stream -------------------------------------------------------------------------
def write_stream(path, n_rows, n_fields, buckets, seed=0, chunk=1_000_000):
    """A click stream of ``n_rows`` rows, ``n_fields`` fields of hashed values (``buckets``
    per field, feature = field * buckets + bucket, Zipf popularity) and clicks of a planted
    FFM (fmlearn.datasets.make_ffm_ctr), written as libffm text in chunks."""
    from fmlearn.datasets import make_ffm_ctr, save_libffm

    if os.path.exists(path):
        return path
    parts = []
    model = None
    rng = np.random.RandomState(seed)
    for a in range(0, n_rows, chunk):
        n = min(chunk, n_rows - a)
        X, y, fields, model, _ = make_ffm_ctr(n, n_fields=n_fields, n_values=buckets,
                                              n_factors=4, scale=0.5, model=model,
                                              random_state=rng)
        part = f"{path}.part{len(parts)}"
        save_libffm(X, y, fields, part)
        parts.append(part)
    with open(path + ".tmp", "wb") as out:
        for part in parts:
            with open(part, "rb") as fh:
                shutil.copyfileobj(fh, out, 1 << 24)
            os.unlink(part)
    os.replace(path + ".tmp", path)
    return path


SCALE_SYSTEMS = ("libffm", "memory", "stream", "stream-text")
SCALE_NAMES = {"memory": "fmlearn in memory (fit)",
               "stream": "fmlearn fit_stream (binary cache)",
               "stream-text": "fmlearn fit_stream (cache=False: text every epoch)"}


def table_scale(args, work):
    """Per-epoch throughput and peak memory on the large stream: LIBFFM (on disk, its binary
    cache), fmlearn in memory (read, then fit) and fmlearn streaming (fit_stream, with its
    binary cache of the parsed chunks and without), alternated; ``--systems`` picks some of
    them (at 20M rows the in-memory fit needs several GB: ``--systems libffm,stream``)."""
    systems = list(args.systems)
    unknown = set(systems) - set(SCALE_SYSTEMS)
    if unknown:
        raise SystemExit(f"--systems: unknown {sorted(unknown)}; choose from {SCALE_SYSTEMS}")
    path = os.path.join(work, f"stream.{args.rows}.f{args.fields}.b{args.buckets}.ffm")
    print(f"writing {path} ...", flush=True)
    write_stream(path, args.rows, args.fields, args.buckets)
    size_gb = os.path.getsize(path) / 1e9
    runs = []
    if "libffm" in systems:
        train_bin, _ = _need_libffm(args)
        first = _ok(measure(_sh([train_bin, "-s", "1", "-k", "4", "-t", "1", path,
                                 os.path.join(work, "stream.model")],
                                os.path.join(work, "stream.log")), env=child_env(), cwd=work),
                    "ffm-train")
        runs.append({"system": "LIBFFM first run (text -> binary cache + 1 epoch)",
                     "epochs": 1, "rep": -1, "cpu": first["cpu_s"], "wall": first["wall_s"],
                     "rss": first["maxrss_mb"], "load_before": first["load_before"],
                     "load_after": first["load_after"]})
    common = ["--path", path, "--fields", args.fields, "--buckets", args.buckets]
    for rep in range(args.reps):
        n_before = len(runs)
        # the systems in turn, starting with another one each repetition
        turn = systems[rep % len(systems):] + systems[:rep % len(systems)]
        for system in turn:
            if system == "libffm":  # LIBFFM: an epoch is the difference of the two runs
                for epochs in (1, 2):
                    r = _ok(measure(_sh([train_bin, "-s", "1", "-k", "4", "-t", str(epochs),
                                         path, os.path.join(work, "stream.model")],
                                        os.path.join(work, "stream.log")), env=child_env(),
                                    cwd=work), "ffm-train")
                    runs.append({"system": "LIBFFM (on disk)", "epochs": epochs, "rep": rep,
                                 "cpu": r["cpu_s"], "wall": r["wall_s"],
                                 "rss": r["maxrss_mb"], "load_before": r["load_before"],
                                 "load_after": r["load_after"]})
                continue
            # fmlearn: the last of 2 epochs, timed inside
            r = _ok(fmlearn_child(args, "scale", *common, "--mode", system, "--epochs", 2),
                    f"fmlearn {system}")
            p = r["payload"]
            runs.append({"system": SCALE_NAMES[system], "epochs": 2, "rep": rep,
                         "epoch_cpu": p["epoch_cpu"], "epoch_wall": p["epoch_wall"],
                         "first_cpu": p.get("first_epoch_cpu"), "read_cpu": p["read_cpu"],
                         "rss": r["maxrss_mb"], "load_before": r["load_before"],
                         "load_after": r["load_after"]})
        print(json.dumps(runs[n_before:]), flush=True)
    rows = []
    for s in list(dict.fromkeys(r["system"] for r in runs)):
        sel = [r for r in runs if r["system"] == s]
        if sel[0]["rep"] < 0:
            rows.append([s, "", "", spread([r["cpu"] for r in sel], "{:.0f}"), "",
                         spread([r["rss"] for r in sel], "{:,.0f}")])
            continue
        if s.startswith("LIBFFM"):
            one = {r["rep"]: r for r in sel if r["epochs"] == 1}
            two = [r for r in sel if r["epochs"] == 2]
            cpu = [r["cpu"] - one[r["rep"]]["cpu"] for r in two]
            wall = [r["wall"] - one[r["rep"]]["wall"] for r in two]
        else:
            cpu = [r["epoch_cpu"] for r in sel]
            wall = [r["epoch_wall"] for r in sel]
        rows.append([s, spread([args.rows / c for c in cpu], "{:,.0f}"),
                     spread([args.rows / w for w in wall], "{:,.0f}"),
                     spread(cpu, "{:.1f}"), spread(wall, "{:.1f}"),
                     spread([r["rss"] for r in sel], "{:,.0f}")])
    reads = [r["read_cpu"] for r in runs if r.get("read_cpu")]
    firsts = [r["first_cpu"] for r in runs if r["system"] == SCALE_NAMES["stream"]]
    first = f", first epoch median {np.median(firsts):.1f} CPU s" if firsts else ""
    print(f"\nSynthetic click stream: {args.rows:,} rows, {args.fields} fields of "
          f"{args.buckets} hashed buckets ({args.fields * args.buckets:,} features), "
          f"{size_gb * 1e3:,.0f} MB of text, k=4, float32. An epoch: LIBFFM (2 epochs - 1 "
          f"epoch) of whole processes on its binary cache; fmlearn the second epoch of a fit "
          f"(in memory: the file read before, median {np.median(reads) if reads else 0:.1f} "
          f"CPU s) or of one fit_stream call (its chunks read from the binary cache the "
          f"first epoch wrote{first}, or parsed from the text again); peak memory of the "
          f"whole process; load {load_range(runs)}\n")
    print(md_table(["system", "rows/s per epoch (CPU)", "rows/s (wall)", "CPU s per epoch",
                    "wall s per epoch", "peak memory MB"], rows))
    return runs


def _need_libffm(args):
    found = find_libffm(args.libffm)
    if found is None:
        raise SystemExit("LIBFFM not found: --libffm DIR or FMLEARN_LIBFFM (the folder of "
                         "ffm-train and ffm-predict)")
    return found


TABLES = {"frappe": table_frappe, "speed": table_speed, "predict": table_predict,
          "river": table_river, "fm": table_fm, "scale": table_scale}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("table", choices=[*TABLES, "all"])
    p.add_argument("--frappe", help="folder of the Frappe files (or $FMLEARN_FRAPPE)")
    p.add_argument("--libffm", help="folder of ffm-train and ffm-predict ($FMLEARN_LIBFFM)")
    p.add_argument("--peers-python", help="the peers' Python, with River")
    p.add_argument("--python", default=sys.executable, help="the Python of the fmlearn under "
                                                            "test (default: this one)")
    p.add_argument("--old", help="frappe / speed: the Python of a second fmlearn (e.g. a "
                                 "checkout of main with its own venv), timed alternately as "
                                 "'fmlearn (old)'")
    p.add_argument("--workdir", help="keep the converted and generated files here")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--ks", type=lambda s: [int(v) for v in s.split(",")], default=[4, 8])
    p.add_argument("--epochs", type=int, default=10, help="epochs of the fit-speed runs")
    p.add_argument("--lambdas", type=lambda s: [float(v) for v in s.split(",")],
                   default=[2e-5, 2e-4], help="frappe: LIBFFM's -l values (both systems)")
    p.add_argument("--max-epochs", type=int, default=50, help="most epochs with early stopping")
    p.add_argument("--rows", type=int, default=None,
                   help="river: rows of the stream (default 20,000); scale: rows (default "
                        "20,000,000)")
    p.add_argument("--systems", type=lambda s: s.split(","), default=list(SCALE_SYSTEMS),
                   help="scale: which of " + ",".join(SCALE_SYSTEMS) + " to run (default "
                        "all)")
    p.add_argument("--fields", type=int, default=20)
    p.add_argument("--buckets", type=int, default=1 << 14)
    p.add_argument("--json", help="write every run here")
    p.add_argument("--no-lock", action="store_true")
    args = p.parse_args(argv)
    work = args.workdir or tempfile.mkdtemp(prefix="bench-ffm-")
    os.makedirs(work, exist_ok=True)
    names = list(TABLES) if args.table == "all" else [args.table]
    out = {}
    with bench_lock(not args.no_lock):
        for name in names:
            if args.rows is None or len(names) > 1:
                args.rows = {"river": 20_000, "scale": 20_000_000}.get(name, args.rows)
            out[name] = TABLES[name](args, work)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
