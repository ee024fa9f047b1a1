"""Fit a fixed set of models and write digests of their fitted state and predictions.

The bit-identity check of a refactoring that must not change results: run this script on two
checkouts on the same machine and compare the two outputs::

    git -C /path/to/repo archive main src | tar -x -C /tmp/mainsrc
    PYTHONPATH=/tmp/mainsrc/src python tools/fit_digests.py --out main.json
    python tools/fit_digests.py --out branch.json
    python tools/fit_digests.py --compare main.json branch.json

The set covers every estimator and solver of the library through its public API only (so the
script runs on any version): the classic FM's three solvers (regression, classification,
feature groups, sample weights, warm starts, ``partial_fit``, float32, an ``eval_set`` with
a callback, contrast targets), the generalized FM, iFM and the sensing models (one pass, the
moment step, the batch solvers, contrasts), the convex FM, the online learners (and a
prequential evaluation), streaming from batches, and the Dask backend (``fit``,
``fit_one_pass``, ``fit_convex``; Dask's synchronous scheduler, in this process).

A digest is the SHA-256 of an array's dtype, shape and bytes, or the exact (hex) value of a
float: two runs agree only if every bit agrees. Each fit records every public fitted
attribute (ending in ``_``; per-iteration timings left out: they are not results) and its
predictions on held-out rows. ``--compare`` lists what differs; attributes present on one
side only are listed apart (a new attribute is not a changed result).
"""

import argparse
import hashlib
import json
import sys
import warnings

import numpy as np
import scipy.sparse as sp

# history / report keys holding timings (not results)
TIMING_KEYS = {"iter_time", "seconds", "seconds_rounds", "seconds_rounds_compute",
               "seconds_client", "elapsed", "compile_time"}


def digest(value):
    """A JSON-able digest of ``value``: exact for floats, SHA-256 for arrays."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return [digest(v) for v in value.tolist()]
        h = hashlib.sha256()
        h.update(f"{value.dtype.str}{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
        return "sha256:" + h.hexdigest()[:32]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value).hex()
    if isinstance(value, dict):
        return {str(k): digest(v) for k, v in value.items() if str(k) not in TIMING_KEYS}
    if isinstance(value, (list, tuple)):
        return [digest(v) for v in value]
    if value is None or isinstance(value, str):
        return value
    if hasattr(value, "toarray"):
        return digest(value.toarray())
    return f"<{type(value).__name__}>"


def state_of(est):
    """Digests of the public fitted attributes of ``est`` (properties included)."""
    out = {}
    names = {n for n in vars(est) if n.endswith("_") and not n.startswith("_")}
    for n in dir(type(est)):
        if n.endswith("_") and not n.startswith("_") and isinstance(getattr(type(est), n, None),
                                                                      property):
            names.add(n)
    for n in sorted(names):
        try:
            value = getattr(est, n)
        except Exception as exc:  # noqa: BLE001 - a property may not apply to this fit
            value = f"<error {type(exc).__name__}>"
        out[n] = digest(value)
    return out


def recommendation(n=1500, seed=0):
    """One-hot user/item rows with two numeric side features (sparse CSR), targets."""
    rng = np.random.default_rng(seed)
    nu, ni = 40, 30
    u, i = rng.integers(0, nu, n), rng.integers(0, ni, n)
    a, b = rng.normal(size=nu), rng.normal(size=ni)
    P, Q = rng.normal(size=(nu, 2)), rng.normal(size=(ni, 2))
    side = rng.normal(size=(n, 2))
    rows = np.repeat(np.arange(n), 4)
    cols = np.column_stack([u, nu + i, np.full(n, nu + ni), np.full(n, nu + ni + 1)]).ravel()
    vals = np.column_stack([np.ones(n), np.ones(n), side]).ravel()
    X = sp.csr_matrix((vals, (rows, cols)), shape=(n, nu + ni + 2))
    y = 3.0 + a[u] + b[i] + np.sum(P[u] * Q[i], axis=1) + 0.3 * side[:, 0] \
        + 0.2 * rng.normal(size=n)
    return X, y


def run_fm(record):
    from fmlearn import FMClassifier, FMRegressor

    X, y = recommendation()
    Xtr, ytr, Xte = X[:1200], y[:1200], X[1200:]
    ycls = np.where(y > np.median(y), "hi", "lo")
    sw = np.random.default_rng(1).uniform(0.5, 2.0, 1200)
    sw0 = sw * (np.arange(1200) % 7 != 0)  # rows of weight 0 are dropped
    groups = [0] * 40 + [1] * 30 + [2, 2]
    common = {"n_factors": 3, "random_state": 0}
    for solver, extra in [("mcmc", {"n_iter": 30}), ("als", {"n_iter": 10, "reg_linear": 0.1,
                                                             "reg_pairwise": 0.5}),
                          ("sgd", {"n_iter": 10, "reg_pairwise": 0.01, "learning_rate": 0.02})]:
        m = FMRegressor(solver=solver, **common, **extra).fit(Xtr, ytr)
        record(f"FMRegressor[{solver}]", m, Xte)
        m = FMRegressor(solver=solver, **common, **extra).fit(Xtr, ytr, sample_weight=sw)
        record(f"FMRegressor[{solver}] weighted", m, Xte)
        m = FMRegressor(solver=solver, **common, **extra).fit(Xtr, ytr, sample_weight=sw0)
        record(f"FMRegressor[{solver}] some weights 0", m, Xte)
        m = FMClassifier(solver=solver, **common, **extra).fit(Xtr, ycls[:1200])
        record(f"FMClassifier[{solver}]", m, Xte)
        m = FMClassifier(solver=solver, **common, **extra).fit(Xtr, ycls[:1200],
                                                               sample_weight=sw0)
        record(f"FMClassifier[{solver}] some weights 0", m, Xte)
        m = FMRegressor(solver=solver, warm_start=True, **common, **extra).fit(Xtr, ytr)
        m.fit(Xtr, ytr)
        record(f"FMRegressor[{solver}] warm 2x", m, Xte)
        calls = []
        m = FMRegressor(solver=solver, verbose=0, **common, **extra).fit(
            Xtr, ytr, eval_set=(Xte, y[1200:]), callback=lambda i, h, c=calls: c.append(i))
        record(f"FMRegressor[{solver}] eval_set+callback", m, Xte, extra=calls)
        m = FMRegressor(solver=solver, **common, **extra).fit(Xtr.astype(np.float32), ytr)
        record(f"FMRegressor[{solver}] float32", m, Xte)
        m = FMRegressor(solver=solver, init_stdev=0.05, clip_predictions=False, **common,
                        **extra).fit(Xtr, ytr)
        record(f"FMRegressor[{solver}] init_stdev=0.05", m, Xte)
    for solver, extra in [("mcmc", {"n_iter": 20}), ("als", {"n_iter": 8, "reg_linear": [0.1, 0.2,
                                                                                       0.3],
                                                             "reg_pairwise": [0.5, 1.0, 2.0]})]:
        m = FMRegressor(solver=solver, groups=groups, **common, **extra).fit(Xtr, ytr)
        record(f"FMRegressor[{solver}] groups", m, Xte)
    m = FMRegressor(solver="mcmc", n_iter=40, n_burn_in=5, n_kept_samples=7,
                    overrelaxation=-0.5, **common).fit(Xtr, ytr)
    record("FMRegressor[mcmc] kept 7, relax", m, Xte)
    m = FMClassifier(solver="mcmc", n_iter=20, warm_start=True, **common).fit(Xtr, ycls[:1200])
    m.fit(Xtr, ycls[:1200])
    record("FMClassifier[mcmc] warm 2x", m, Xte)
    # partial_fit (SGD)
    m = FMRegressor(solver="sgd", learning_rate=0.02, **common)
    for a in range(0, 1200, 300):
        m.partial_fit(Xtr[a:a + 300], ytr[a:a + 300])
    record("FMRegressor[sgd] partial_fit", m, Xte)
    m = FMClassifier(solver="sgd", learning_rate=0.02, **common)
    for a in range(0, 1200, 300):
        m.partial_fit(Xtr[a:a + 300], ycls[a:a + 300], classes=["hi", "lo"])
    record("FMClassifier[sgd] partial_fit", m, Xte)
    m = FMRegressor(solver="sgd", n_iter=5, shuffle=False, average_epochs=1, **common)
    m.fit(Xtr, ytr)
    m.partial_fit(Xtr[:200], ytr[:200])
    record("FMRegressor[sgd] no shuffle + partial_fit", m, Xte)
    # contrasts
    C = (sp.eye(1199, 1200) - sp.eye(1199, 1200, k=1)).tocsr()
    Cb = sp.vstack([C, sp.eye(1, 1200)]).tocsr()  # one target fixes w0
    for solver, extra in [("mcmc", {"n_iter": 20}), ("als", {"n_iter": 8, "reg_linear": 0.1,
                                                             "reg_pairwise": 0.5}),
                          ("sgd", {"n_iter": 5, "learning_rate": 0.01})]:
        for name, CC in (("held w0", C), ("with w0", Cb)):
            m = FMRegressor(solver=solver, **common, **extra)
            m.fit(Xtr, CC @ ytr, contrasts=CC)
            record(f"FMRegressor[{solver}] contrasts {name}", m, Xte)
        m = FMRegressor(solver=solver, warm_start=True, **common, **extra)
        m.fit(Xtr, C @ ytr, contrasts=C)
        m.fit(Xtr, C @ ytr, contrasts=C)
        record(f"FMRegressor[{solver}] contrasts warm 2x", m, Xte)


def run_gfm(record):
    from fmlearn import GFMRegressor, IFMRegressor
    from fmlearn.datasets import make_fm_labels, make_gfm

    X, y, truth = make_gfm(6000, 12, 2, random_state=0)
    m = GFMRegressor(n_factors=2, batch_size=1000, random_state=0).fit(X, y, truth=truth)
    record("GFMRegressor[one_pass]", m, X[:200])
    m = GFMRegressor(n_factors=2, random_state=0).fit(X[:600], y[:600])
    record("GFMRegressor[one_pass] passes", m, X[:200])
    m = GFMRegressor(n_factors=2, solver="moment", batch_size=1000, random_state=0).fit(X, y)
    record("GFMRegressor[moment]", m, X[:200])
    m = GFMRegressor(n_factors=2, batch_size=1000, random_state=0)
    for a in range(0, 6000, 1500):
        m.partial_fit(X[a:a + 1500], y[a:a + 1500])
    record("GFMRegressor partial_fit", m, X[:200])
    for solver in ("als", "lm"):
        m = GFMRegressor(n_factors=2, solver=solver, max_iter=10, random_state=0).fit(
            X[:1000], y[:1000])
        record(f"GFMRegressor[{solver}]", m, X[:200])
    Xs = sp.csr_matrix(X[:800] * (np.abs(X[:800]) > 0.5))
    C = (sp.eye(799, 800) - sp.eye(799, 800, k=1)).tocsr()
    f = GFMRegressor(n_factors=2, batch_size=1000, random_state=0).fit(X, y).predict(Xs)
    for cls in (GFMRegressor, IFMRegressor):
        m = cls(n_factors=2, random_state=0).fit(Xs, C @ f, contrasts=C)
        record(f"{cls.__name__} contrasts", m, Xs[:100])
    X2, y2, truth2 = make_fm_labels(6000, 12, 2, kind="mixed_sign", random_state=0)
    m = IFMRegressor(n_factors=4, batch_size=1500, random_state=0).fit(X2, y2, truth=truth2)
    record("IFMRegressor[one_pass]", m, X2[:200])
    m = IFMRegressor(n_factors=4, batch_size=1500, random_state=0, warm_start=True)
    m.fit(X2[:3000], y2[:3000])
    m.fit(X2[3000:], y2[3000:])
    record("IFMRegressor warm", m, X2[:200])


def run_sensing(record):
    from fmlearn.datasets import (
        make_asymmetric_sensing,
        make_phase_retrieval,
        make_symmetric_sensing,
    )
    from fmlearn.sensing import AsymmetricRankOneSensing, PhaseRetrieval, SymmetricRankOneSensing

    X, y, truth = make_symmetric_sensing(4000, 12, 2, random_state=0)
    m = SymmetricRankOneSensing(2, batch_size=800, random_state=0).fit(X, y, truth=truth)
    record("SymmetricRankOneSensing", m, X[:100])
    X, y, truth = make_phase_retrieval(3000, 12, random_state=0)
    m = PhaseRetrieval(batch_size=600, random_state=0).fit(X, y)
    record("PhaseRetrieval", m, X[:100])
    X, y, truth = make_asymmetric_sensing(4000, 8, 6, 2, random_state=0)
    m = AsymmetricRankOneSensing(2, n_left=8, batch_size=800, random_state=0).fit(X, y)
    record("AsymmetricRankOneSensing", m, X[:100])
    m = AsymmetricRankOneSensing(2, n_left=8, random_state=0)
    m.partial_fit(X[:2000], y[:2000])
    m.partial_fit(X[2000:], y[2000:])
    record("AsymmetricRankOneSensing partial_fit", m, X[:100])


def run_convex(record):
    from fmlearn import ConvexFMClassifier, ConvexFMRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 8))
    y = X[:, 0] * X[:, 1] - X[:, 2] * X[:, 3] + X[:, 4]
    for step in ("auto", "exact", "pairwise", "standard"):
        m = ConvexFMRegressor(trace_bound=3.0, max_iter=15, step=step, tol=0,
                              random_state=0).fit(X, y)
        record(f"ConvexFMRegressor[{step}]", m, X[:100])
    m = ConvexFMRegressor(max_iter=10, corrective_steps=2, random_state=0).fit(X, y)
    record("ConvexFMRegressor corrective", m, X[:100])
    m = ConvexFMClassifier(max_iter=10, random_state=0).fit(X, y > 0)
    record("ConvexFMClassifier", m, X[:100])
    m = ConvexFMRegressor(trace_bound=2.0, max_iter=8, tol=0, warm_start=True, random_state=0)
    m.fit(X, y)
    m.set_params(trace_bound=4.0)
    m.fit(X, y)
    record("ConvexFMRegressor warm path", m, X[:100])


def run_online(record):
    from fmlearn import (
        CCFMClassifier,
        CCFMRegressor,
        OnlineCFMClassifier,
        OnlineCFMRegressor,
        OnlineFMClassifier,
        OnlineFMRegressor,
        evaluate_prequential,
    )

    X, y = recommendation(800, seed=2)
    ycls = y > np.median(y)
    for learner in ("ocg", "ogd", "pa", "ftrl"):
        m = CCFMRegressor(learner, random_state=0).fit(X, y)
        record(f"CCFMRegressor[{learner}]", m, X[:100])
        m = CCFMClassifier(learner, random_state=0).fit(X, ycls)
        record(f"CCFMClassifier[{learner}]", m, X[:100])
    for learner in ("ftrl", "ogd", "pa"):
        m = OnlineFMRegressor(learner, n_factors=3, random_state=0).fit(X, y)
        record(f"OnlineFMRegressor[{learner}]", m, X[:100])
        m = OnlineFMClassifier(learner, n_factors=3, random_state=0).fit(X, ycls)
        record(f"OnlineFMClassifier[{learner}]", m, X[:100])
    m = OnlineCFMRegressor(random_state=0).fit(X, y)
    record("OnlineCFMRegressor", m, X[:100])
    m = OnlineCFMClassifier(random_state=0).fit(X, ycls)
    record("OnlineCFMClassifier", m, X[:100])
    m = OnlineFMRegressor(n_factors=3, random_state=0)
    for a in range(0, 800, 100):
        m.partial_fit(X[a:a + 100], y[a:a + 100])
    record("OnlineFMRegressor partial_fit", m, X[:100])
    res = evaluate_prequential(CCFMClassifier(random_state=0), (X, ycls), batch_size=100,
                               keep_predictions=True)
    record("evaluate_prequential CCFMClassifier", None, None,
           extra={"metrics": res.metrics, "curves": res.curves, "pred": res.predictions})
    res = evaluate_prequential(OnlineFMRegressor(n_factors=3, random_state=0), (X, y),
                               batch_size=100, keep_predictions=True)
    record("evaluate_prequential OnlineFMRegressor", None, None,
           extra={"metrics": res.metrics, "pred": res.predictions})


def run_stream(record):
    from fmlearn import FMRegressor, GFMRegressor
    from fmlearn.datasets import make_gfm
    from fmlearn.stream import fit_stream

    X, y = recommendation()
    chunks = [(X[a:a + 250], y[a:a + 250]) for a in range(0, 1500, 250)]
    m = fit_stream(FMRegressor(3, solver="sgd", learning_rate=0.02, random_state=0), chunks,
                   n_epochs=2, batch_size=400)
    record("fit_stream FMRegressor[sgd]", m, X[:100])
    Xg, yg, _ = make_gfm(6000, 12, 2, random_state=0)
    chunks = [(Xg[a:a + 700], yg[a:a + 700]) for a in range(0, 6000, 700)]
    m = fit_stream(GFMRegressor(2, batch_size=1000, random_state=0), chunks)
    record("fit_stream GFMRegressor", m, Xg[:100])


def run_dask(record):
    try:
        import dask
        import dask.array as da
    except ImportError:  # the optional extra
        print("dask not installed: the Dask fits are skipped", file=sys.stderr)
        return
    from fmlearn import (
        ConvexFMRegressor,
        FMClassifier,
        FMRegressor,
        GFMRegressor,
    )
    from fmlearn import distributed as fd
    from fmlearn.datasets import make_gfm

    X, y = recommendation()
    Xd = da.from_array(X, chunks=(500, X.shape[1]), asarray=False)
    yd = da.from_array(y, chunks=500)
    ycls = np.where(y > np.median(y), 1, 0)
    with dask.config.set(scheduler="synchronous"):
        for solver, extra in [("mcmc", {"n_iter": 15}), ("als", {"n_iter": 6, "reg_linear": 0.1,
                                                                 "reg_pairwise": 0.5}),
                              ("sgd", {"n_iter": 4, "learning_rate": 0.02})]:
            m = fd.fit(FMRegressor(3, solver=solver, random_state=0, **extra), Xd, yd)
            record(f"distributed.fit FMRegressor[{solver}]", m, X[:100], skip=("distributed_",))
        sw0 = np.where(np.arange(1500) % 7 == 0, 0.0, 1.5)
        for solver in ("als", "sgd"):
            m = fd.fit(FMRegressor(3, solver=solver, n_iter=4, random_state=0), Xd, yd,
                       da.from_array(sw0, chunks=500))
            record(f"distributed.fit FMRegressor[{solver}] some weights 0", m, X[:100],
                   skip=("distributed_",))
        m = fd.fit(FMClassifier(3, solver="mcmc", n_iter=10, random_state=0), Xd,
                   da.from_array(ycls, chunks=500))
        record("distributed.fit FMClassifier[mcmc]", m, X[:100], skip=("distributed_",))
        Xg, yg, _ = make_gfm(6000, 12, 2, random_state=0)
        m = fd.fit_one_pass(GFMRegressor(2, random_state=0), da.from_array(Xg, chunks=(1500, 12)),
                            da.from_array(yg, chunks=1500), batch_size=1000)
        record("distributed.fit_one_pass GFMRegressor", m, Xg[:100])
        rng = np.random.default_rng(0)
        Xc = rng.normal(size=(500, 8))
        yc = Xc[:, 0] * Xc[:, 1] + Xc[:, 2]
        m = fd.fit_convex(ConvexFMRegressor(trace_bound=2.0, max_iter=10, tol=0, random_state=0),
                          da.from_array(Xc, chunks=(200, 8)), da.from_array(yc, chunks=200))
        record("distributed.fit_convex ConvexFMRegressor", m, Xc[:100])


def predictions(est, X):
    out = {"predict": digest(np.asarray(est.predict(X)))}
    for name in ("decision_function", "predict_proba"):
        if hasattr(est, name):
            out[name] = digest(np.asarray(getattr(est, name)(X)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the digests to this JSON file")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two outputs")
    ap.add_argument("--only", help="run only the groups whose name contains this")
    args = ap.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    import fmlearn

    results = {"fmlearn": fmlearn.__file__}

    def record(name, est, X, extra=None, skip=()):
        entry = {}
        if est is not None:
            entry["state"] = {k: v for k, v in state_of(est).items() if k not in skip}
            entry["predictions"] = predictions(est, X)
        if extra is not None:
            entry["extra"] = digest(extra)
        results[name] = entry
        print(f"  {name}", file=sys.stderr)

    groups = [run_fm, run_gfm, run_sensing, run_convex, run_online, run_stream, run_dask]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for run in groups:
            if args.only and args.only not in run.__name__:
                continue
            print(run.__name__, file=sys.stderr)
            run(record)
    text = json.dumps(results, indent=1, sort_keys=True)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    else:
        print(text)


def compare(path_a, path_b):
    """Print the fits whose digests differ; returns 1 when any result differs."""
    with open(path_a) as fh:
        a = json.load(fh)
    with open(path_b) as fh:
        b = json.load(fh)
    a.pop("fmlearn", None)
    b.pop("fmlearn", None)
    differ = missing = 0
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            print(f"{name}: only in {path_a if name in a else path_b}")
            missing += 1
            continue
        ea, eb = a[name], b[name]
        for part in ("predictions", "extra"):
            if ea.get(part) != eb.get(part):
                print(f"{name}: {part} differ")
                differ += 1
        sa, sb = ea.get("state", {}), eb.get("state", {})
        for attr in sorted(set(sa) | set(sb)):
            if attr not in sa or attr not in sb:
                print(f"{name}: attribute {attr} only in {path_a if attr in sa else path_b}")
            elif sa[attr] != sb[attr]:
                print(f"{name}: {attr} differs")
                differ += 1
    n = len(set(a) & set(b))
    print(f"{n} fits compared, {differ} differences in results"
          + (f" ({missing} fits run on one side only)" if missing else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    main()
