"""Is fmlearn's test RMSE on MovieLens-100K worse than libFM's, or is the gap noise?

The side-by-side harness (``sbs.py``) fits one init seed per split; a 0.001 RMSE difference
is of the order of the spread between init seeds. This script fits each system with several
init seeds on each of the project's splits (the harness's files, ``sbs.Context``), then
compares the systems split by split: the split's effect (the largest one) cancels, and what
remains is judged against the init-seed spread::

    python benchmarks/rmse_seeds.py run ml-mcmc500-groups --system libfm --out a.jsonl
    python benchmarks/rmse_seeds.py run ml-mcmc500-groups --system fmlearn --out b.jsonl
    python benchmarks/rmse_seeds.py run ml-mcmc100-groups --system myfm --out c.jsonl
    python benchmarks/rmse_seeds.py summary a.jsonl b.jsonl c.jsonl

``run`` appends one JSON line per fit (system, scenario, split, init seed, RMSE), skipping
fits already in ``--out``, so the two systems can run in two processes and a run can be
resumed. libFM's ``-seed 0`` and ``-seed 1`` give the same stream, so init seeds start at 1.
myFM runs in the peers' Python (``$FMLEARN_PEERS_PYTHON``) through the harness's child, with the
harness's settings (the first ``min(10, n_iter // 10)`` sweeps burnt in). ``summary`` compares
fmlearn with every other system found in the files, among them fmlearn variants run with
``--set JSON --label NAME`` (estimator parameters over the harness's), e.g. the posterior
average of 100 thinned samples against all of them::

    python benchmarks/rmse_seeds.py run ml-mcmc500 --system fmlearn \
        --set '{"n_kept_samples": 100}' --label fmlearn-kept100 --out b.jsonl
Accuracy only: no timing is taken here (the harness measures speed).

A default is chosen without the test ratings: ``--validation`` fits on 80% of each split's
training rows and scores the other 20% (``movielens_split`` of the training rows with seed
``[split, 1]``), recorded under the scenario's name with ``-val`` appended; the test splits
then only confirm the choice::

    python benchmarks/rmse_seeds.py run ml-sgd100 --system fmlearn --validation \
        --set '{"average_epochs": 50}' --label fmlearn-avg50 --out val.jsonl

``summary`` also pairs fmlearn variants fit by fit (same split, same init seed).
"""

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _sbs_core as core  # noqa: E402
import sbs  # noqa: E402


def _scenario(name):
    for sc in sbs.SCENARIOS:
        if sc.name == name and sc.kind == "fit":
            return sc
    raise SystemExit(f"unknown fit scenario {name!r}")


def _done(path):
    if not os.path.exists(path):
        return set()
    with open(path) as fh:
        return {(r["system"], r["scenario"], r["split"], r["seed"])
                for r in map(json.loads, fh) if r}


def _fit_libfm(ctx, conf, tr, te, seed, meta, overrides=None):
    pred = ctx.path(f"pred-libfm-{os.getpid()}.txt")
    cmd = [ctx.libfm, "-train", tr, "-test", te, "-iter", str(conf["n_iter"]), "-out", pred]
    args = sbs._libfm_args(conf, seed)
    if overrides:  # libFM's own option names, e.g. {"init_stdev": 0.05}
        for key, value in overrides.items():
            if f"-{key}" not in args:
                raise SystemExit(f"--set: libFM option -{key} is not among {args[::2]}")
            args[args.index(f"-{key}") + 1] = str(value)
    cmd += args + (["-meta", meta] if meta else [])
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return pred, {}


def _fit_myfm(ctx, conf, tr, te, seed, meta):
    pred = ctx.path(f"pred-myfm-{os.getpid()}.txt")
    cmd = sbs.myfm_command(ctx, (tr, te, pred), conf["n_iter"], seed, meta)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=ctx.env)
    return pred, {}


def _fit_fmlearn(ctx, conf, tr, te, seed, meta, overrides=None):
    from _sbs_fmlearn import _read_pair  # the harness's reading (model sized for both files)

    from fmlearn import FMRegressor

    X, y, Xt, _ = _read_pair(tr, te)
    params = {"n_jobs": 1, **sbs._fmlearn_params(conf, seed, conf["n_iter"]), **(overrides or {})}
    if meta:
        params["groups"] = np.loadtxt(meta, dtype=np.int64)
    pred = ctx.path(f"pred-fmlearn-{os.getpid()}.txt")
    est = FMRegressor(**params).fit(X, y)
    np.savetxt(pred, est.predict(Xt), fmt="%.12g")
    if conf["method"] != "mcmc":
        return pred, {}
    # also the plain average of the samples, clipped once (fmlearn before it clipped every
    # sample as libFM does)
    plain = ctx.path(f"pred-fmlearn-plain-{os.getpid()}.txt")
    np.savetxt(plain, est.set_params(clip_predictions=False).predict(Xt), fmt="%.12g")
    return pred, {"rmse_plain_average": plain}


VALIDATION_FRACTION = 0.2


def validation_split(ctx, split):
    """(train file, validation file, y_train, y_validation): the split's training rows cut
    80/20 by ``movielens_split(n, [split, 1])``; the test ratings are never read."""
    from fmlearn.datasets import movielens_split, save_svmlight

    X, y = ctx.movielens()
    tr, _ = movielens_split(X.shape[0], split)
    n_fit = round(tr.shape[0] * (1 - VALIDATION_FRACTION))
    fit, val = (tr[i] for i in movielens_split(tr.shape[0], [split, 1], n_train=n_fit))
    paths = ctx.path(f"ml100k-{split}.fit.libfm"), ctx.path(f"ml100k-{split}.val.libfm")
    if not all(os.path.exists(p) for p in paths):
        save_svmlight(X[fit], y[fit], paths[0])
        save_svmlight(X[val], y[val], paths[1])
    return (*paths, y[fit], y[val])


def cmd_run(a):
    ctx = sbs.Context(argparse.Namespace(
        reps=1, seeds=a.splits, fmlearn_python=None, also=None, libfm=a.libfm,
        libfm_tarball=None, peers_python=a.peers_python, workdir=a.workdir, data=a.data,
        libsvm_data=None))
    if a.system != "fmlearn" and ctx.missing(a.system):
        raise SystemExit(ctx.missing(a.system))
    if a.set and a.system == "myfm":
        raise SystemExit("--set applies to fmlearn and libfm only")
    label = a.label or a.system
    overrides = json.loads(a.set) if a.set else None
    fit = {"libfm": functools.partial(_fit_libfm, overrides=overrides), "myfm": _fit_myfm,
           "fmlearn": functools.partial(_fit_fmlearn, overrides=overrides)}[a.system]
    for name in a.scenarios:
        sc = _scenario(name)
        meta = ctx.movielens_meta() if sc.conf.get("groups") else None
        name = name + "-val" if a.validation else name
        done = _done(a.out)
        for seed in a.init_seeds:
            for split in a.splits:
                if (label, name, split, seed) in done:
                    continue
                tr, te, y_tr, y_te = (validation_split(ctx, split) if a.validation
                                      else ctx.movielens_split(split))
                pred, extra = fit(ctx, sc.conf, tr, te, seed, meta)
                rec = {"system": label, "scenario": name, "split": split, "seed": seed,
                       "rmse": sbs._rmse(pred, y_tr, y_te)}
                rec.update({k: sbs._rmse(p, y_tr, y_te) for k, p in extra.items()})
                with open(a.out, "a") as fh:
                    fh.write(json.dumps(rec) + "\n")
                print(json.dumps(rec), flush=True)


def _pooled_sd(groups):
    """The init-seed standard deviation pooled over splits (each split's own mean removed) and
    its degrees of freedom: the spread between init seeds is a property of the system and the
    scenario, about the same on every split, and 2 fits per split estimate it with 1 degree of
    freedom each (a per-split SE from 2 fits can be 10x too small by chance)."""
    ss = sum(float(((v - v.mean()) ** 2).sum()) for v in groups)
    df = sum(len(v) - 1 for v in groups)
    return (np.sqrt(ss / df) if df else float("nan")), df


def compare(records, scenario, a="fmlearn", b="libfm"):
    """Per split and pooled: mean RMSE of each system over init seeds, their standard
    errors, and the difference a - b with its standard error (init seeds independent).

    Standard errors use each system's init-seed standard deviation pooled over the splits
    (:func:`_pooled_sd`); the last row gives each system's mean over the splits (the figure
    a bar is judged on), the pooled difference and its z."""
    rows = []
    vals = {}
    for split in sorted({r["split"] for r in records if r["scenario"] == scenario}):
        v = {s: np.array([r["rmse"] for r in records if r["scenario"] == scenario
                          and r["split"] == split and r["system"] == s]) for s in (a, b)}
        if min(len(x) for x in v.values()) >= 2:
            vals[split] = v
    if not vals:
        return "(fewer than 2 fits of each system on every split)"
    sd = {s: _pooled_sd([v[s] for v in vals.values()]) for s in (a, b)}
    diffs, var = [], []
    for split, v in vals.items():
        m = {s: v[s].mean() for s in (a, b)}
        se = {s: sd[s][0] / np.sqrt(len(v[s])) for s in (a, b)}
        d, sdd = m[a] - m[b], np.hypot(se[a], se[b])
        diffs.append(d)
        var.append(sdd ** 2)
        rows.append([str(split), f"{m[b]:.4f} +- {se[b]:.4f} ({len(v[b])})",
                     f"{m[a]:.4f} +- {se[a]:.4f} ({len(v[a])})", f"{d:+.4f} +- {sdd:.4f}",
                     f"{d / sdd:+.1f}"])
    d, sdd = float(np.mean(diffs)), float(np.sqrt(np.sum(var)) / len(var))
    mean = {s: np.mean([v[s].mean() for v in vals.values()]) for s in (a, b)}
    rows.append(["mean of splits", f"{mean[b]:.4f} (init-seed sd {sd[b][0]:.4f}, df {sd[b][1]})",
                 f"{mean[a]:.4f} (init-seed sd {sd[a][0]:.4f}, df {sd[a][1]})",
                 f"{d:+.4f} +- {sdd:.4f}", f"{d / sdd:+.1f}"])
    heads = ["split", f"{b} mean +- SE (fits)", f"{a} mean +- SE (fits)",
             f"{a} - {b} +- SE", "z"]
    return core.md_table(heads, rows) + _paired(records, scenario, a, b)


def _paired(records, scenario, a, b):
    """The difference a - b fit by fit over the (split, init seed) both systems ran: for two
    fmlearn variants whose chains share their start (an option that changes the chain late)
    this is the option's own effect, without the init-seed spread."""
    fits = {s: {(r["split"], r["seed"]): r["rmse"] for r in records
                if r["scenario"] == scenario and r["system"] == s} for s in (a, b)}
    both = sorted(set(fits[a]) & set(fits[b]))
    if len(both) < 2:
        return ""
    d = np.array([fits[a][key] - fits[b][key] for key in both])
    return (f"\n\nPaired by split and init seed: {a} - {b} = {d.mean():+.4f} +- "
            f"{d.std(ddof=1) / np.sqrt(d.size):.4f} over {d.size} fits, lower on "
            f"{int((d < 0).sum())}, equal on {int((d == 0).sum())}.")


def paired(records, scenario, a, b):
    """a - b fit by fit (the same split and init seed): mean +- SE over the pairs and how many
    pairs a is lower on; None when fewer than 2 pairs."""
    rm = {s: {(r["split"], r["seed"]): r["rmse"] for r in records
              if r["scenario"] == scenario and r["system"] == s} for s in (a, b)}
    keys = sorted(set(rm[a]) & set(rm[b]))
    if len(keys) < 2:
        return None
    d = np.array([rm[a][k] - rm[b][k] for k in keys])
    return (f"paired by fit: {a} - {b} = {d.mean():+.4f} +- {d.std(ddof=1) / np.sqrt(len(d)):.4f}"
            f" ({len(d)} fits, {a} lower on {int((d < 0).sum())}); means {a} "
            f"{np.mean([rm[a][k] for k in keys]):.4f}, {b} {np.mean([rm[b][k] for k in keys]):.4f}")


def cmd_summary(a):
    records = []
    for path in a.files:
        with open(path) as fh:
            records += [json.loads(line) for line in fh if line.strip()]
    for name in sorted({r["scenario"] for r in records}):
        systems = {r["system"] for r in records if r["scenario"] == name}
        variants = sorted(s for s in systems if s.startswith("fmlearn-"))
        peers = sorted(systems - {"fmlearn"} - set(variants))
        # fmlearn against every peer and variant, every variant against every peer; a
        # variant of a peer (e.g. libfm-init0.05) against the peer, paired fit by fit too
        pairs = [("fmlearn", p) for p in variants + peers] + [
            (v, p) for v in variants for p in peers] + [
            (p, p.split("-")[0]) for p in peers if "-" in p and p.split("-")[0] in systems]
        for a_, b_ in pairs:
            if a_ in systems:
                print(f"### {name}: {a_} - {b_}\n\n{compare(records, name, a_, b_)}\n")
                pair = paired(records, name, a_, b_)
                if pair and a_.split("-")[0] == b_.split("-")[0]:
                    print(pair + "\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("scenarios", nargs="+")
    r.add_argument("--system", choices=["libfm", "myfm", "fmlearn"], required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--splits", type=int, nargs="+", default=[0, 1, 2])
    r.add_argument("--init-seeds", type=int, nargs="+", default=list(range(1, 11)))
    r.add_argument("--libfm", help="libFM binary (or $FMLEARN_LIBFM)")
    r.add_argument("--set", metavar="JSON",
                   help='fmlearn: FMRegressor parameters over the harness\'s, e.g. '
                        '\'{"n_kept_samples": 100}\'; libfm: its options, e.g. '
                        '\'{"init_stdev": 0.05}\' (give the variant a --label)')
    r.add_argument("--validation", action="store_true",
                   help="fit on 80%% of each split's training rows, score the other 20%%")
    r.add_argument("--label", help="the system's name in the records (default: --system)")
    r.add_argument("--peers-python", help="Python with myfm (or $FMLEARN_PEERS_PYTHON)")
    r.add_argument("--data", help="MovieLens-100K folder or ratings file")
    r.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "fmlearn-rmse-seeds"),
                   help="where the split files are written (and reused)")
    s = sub.add_parser("summary")
    s.add_argument("files", nargs="+")
    a = p.parse_args(argv)
    {"run": cmd_run, "summary": cmd_summary}[a.cmd](a)


if __name__ == "__main__":
    main()
