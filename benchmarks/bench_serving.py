"""Serving cost per model: predictions per second and top-10 recommendations per 1,000 users.

One command, one table (docs/serving.md)::

    python benchmarks/bench_serving.py [--reps 3] [--rows 100000] [--users 1000]

Data: a generated rating set of MovieLens-100K's size (943 users, 1,682 items, 100,000 ratings,
one-hot user + item rows; ``make_recommendation``), so the table needs no download. Each model
is fitted once with its defaults (``n_factors=8``), then the measurements are alternated over
the models (A B C ... A B C ...): ``predict`` on ``--rows`` rows (rows per CPU second), and
``fmlearn.recommend`` of the top 10 among all items for ``--users`` users (CPU seconds per
1,000 users). CPU seconds (``time.process_time``: every thread of the process) next to wall
seconds, median and min-max over ``--reps``; the 1-minute load average is printed.

``--ab`` adds the recommend kernel before and after its rewrite (the former one-chain-per-pair
kernel, kept here as the reference) on the MCMC model's embeddings, and the MCMC ``predict``
kernel before (one sample at a time over every row, kept here) and after (every sample of a
row at once, ``fmlearn.kernels.predict.fm_predict_samples_csr``), one thread, alternated.

``--compress`` measures instead the accuracy and serving cost of
``FMRegressor.compress_posterior`` on MovieLens-100K (``--data``: a folder or ratings file,
default the fmlearn cache; the project's split ``movielens_split(n, 0)``): the default MCMC
model (``n_factors=8``) with all its kept samples and compressed to ``--keep`` samples, and an
ALS model for reference; test RMSE, ``predict`` on the test rows and top-10 recommendations,
alternated over the variants::

    python benchmarks/bench_serving.py --compress [--reps 3] [--keep 30 10 5 1]
"""

import argparse
import os
import statistics
import time

import numpy as np

from fmlearn import (
    ConvexFMRegressor,
    FMClassifier,
    FMRegressor,
    GFMRegressor,
    OnlineFMRegressor,
    recommend,
)
from fmlearn.datasets import make_recommendation

MODELS = {
    "FM mcmc (default)": lambda: FMRegressor(8, solver="mcmc", random_state=0),
    "FM als": lambda: FMRegressor(8, solver="als", random_state=0),
    # labels: the rating above its median (fitted on y > median(y))
    "FMClassifier mcmc (default)": lambda: FMClassifier(8, solver="mcmc", random_state=0),
    "FM sgd": lambda: FMRegressor(8, solver="sgd", random_state=0),
    "GFM one_pass": lambda: GFMRegressor(8, random_state=0),
    "ConvexFM": lambda: ConvexFMRegressor(max_iter=30, random_state=0),
    "OnlineFM ftrl": lambda: OnlineFMRegressor(n_factors=8, random_state=0),
}


def _timed(fn):
    c, w = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c, time.perf_counter() - w


def _summary(xs):
    return f"{statistics.median(xs):.4g} ({min(xs):.3g}-{max(xs):.3g})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--ab", action="store_true")
    ap.add_argument("--compress", action="store_true")
    ap.add_argument("--keep", type=int, nargs="*", default=[30, 10, 5, 1])
    ap.add_argument("--data", default=None)
    args = ap.parse_args(argv)
    if args.compress:
        return _compress(args)
    data = make_recommendation(943, 1682, 100_000, random_state=0)
    X, y = data.X.tocsr(), data.y
    n_users, n_items = data.n_users, data.n_items
    users = np.arange(min(args.users, n_users))
    rows = X[np.arange(args.rows) % X.shape[0]]
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    fitted = {}
    for name in args.models:
        target = (y > np.median(y)).astype(int) if name.startswith("FMClassifier") else y
        fitted[name] = MODELS[name]().fit(X, target)
        # warm up: compile the kernels outside the timings
        fitted[name].predict(rows[:10])
        recommend(fitted[name], users[:2], None, k=10, user_block=(0, n_users),
                  item_block=(n_users, n_users + n_items))
    res = {name: {"pc": [], "pw": [], "rc": [], "rw": []} for name in fitted}
    for _ in range(args.reps):
        for name, m in fitted.items():
            c, w = _timed(lambda m=m: m.predict(rows))
            res[name]["pc"].append(c)
            res[name]["pw"].append(w)
            c, w = _timed(lambda m=m: recommend(m, users, None, k=10, user_block=(0, n_users),
                                                item_block=(n_users, n_users + n_items)))
            res[name]["rc"].append(c * 1000 / len(users))
            res[name]["rw"].append(w * 1000 / len(users))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"\n{rows.shape[0]} predict rows, top 10 of {n_items} items for {len(users)} users, "
          f"{args.reps} alternated repetitions: median (min-max)\n")
    print("| model | predictions per CPU s | predict wall s | top-10 CPU s per 1,000 users "
          "| top-10 wall s per 1,000 users |")
    print("|---|---|---|---|---|")
    for name, r in res.items():
        rate = [rows.shape[0] / max(c, 1e-9) for c in r["pc"]]
        print(f"| {name} | {_summary(rate)} | {_summary(r['pw'])} | {_summary(r['rc'])} | "
              f"{_summary(r['rw'])} |")
    if args.ab and "FM mcmc (default)" in fitted:
        _ab(fitted["FM mcmc (default)"], users, n_users, n_items, args.reps)
        _ab_predict(fitted["FM mcmc (default)"], rows, args.reps)


def _ab_predict(model, rows, reps):
    """The posterior-mean predict kernel before (samples outer) and after (batched), one thread."""
    from numba import njit

    from fmlearn._data import raw
    from fmlearn.kernels.predict import _row, fm_predict_samples_csr

    @njit(nogil=True)
    def before(indptr, indices, data, W0s, Ws, Vs, lo, hi, out):
        S, k = W0s.shape[0], Vs.shape[2]
        q, qq = np.empty(k), np.empty(k)
        for i in range(out.shape[0]):
            out[i] = 0.0
        for s in range(S):
            for i in range(out.shape[0]):
                f = _row(indptr, indices, data, i, W0s[s], Ws[s], Vs[s], q, qq)
                out[i] += min(max(f, lo), hi)
        for i in range(out.shape[0]):
            out[i] /= S
        return out

    a, b, c = raw(rows)
    samples = (model.samples_w0_, model.samples_w_, model.samples_V_)
    lo, hi = model.y_range_
    out = {"before": np.empty(rows.shape[0]), "after": np.empty(rows.shape[0])}
    kern = {"before": lambda: before(a, b, c, *samples, lo, hi, out["before"]),
            "after": lambda: fm_predict_samples_csr(a, b, c, *samples, False, (lo, hi), 1,
                                                    out["after"])}
    for name in kern:
        kern[name]()
    assert np.array_equal(out["before"], out["after"])
    times = {name: ([], []) for name in kern}
    for _ in range(reps):
        for name in kern:
            cpu, wall = _timed(kern[name])
            times[name][0].append(cpu)
            times[name][1].append(wall)
    print(f"\nMCMC predict kernel, {rows.shape[0]} rows, S = {samples[0].shape[0]} samples, "
          f"k = {samples[2].shape[2]}, one thread, bit-identical; load {os.getloadavg()[0]:.2f}")
    for name, (cpu, wall) in times.items():
        print(f"  {name}: CPU s {_summary(cpu)}, wall s {_summary(wall)}")


def _ab(model, users, n_users, n_items, reps):
    """The recommend kernel before (one dependent chain per pair) and after, alternated."""
    from numba import njit, prange

    from fmlearn import embed_rows, feature_embeddings
    from fmlearn.kernels.topk import pair_scores

    @njit(nogil=True, parallel=True)
    def before(query, key, part_user, part_item, bias, out):
        n, m = out.shape
        r = query.shape[1]
        for a in prange(n):
            pa = bias + part_user[a]
            for b in range(m):
                s = 0.0
                for f in range(r):
                    s += query[a, f] * key[b, f]
                out[a, b] = pa + part_item[b] + s

    import scipy.sparse as sp
    d = model.n_features_in_
    U = sp.csr_matrix((np.ones(len(users)), (np.arange(len(users)), users)), shape=(len(users), d))
    Iv = sp.csr_matrix((np.ones(n_items), (np.arange(n_items), n_users + np.arange(n_items))),
                       shape=(n_items, d))
    e, u, i = feature_embeddings(model), embed_rows(model, U), embed_rows(model, Iv)
    out = {"before": np.empty((len(users), n_items)), "after": np.empty((len(users), n_items))}
    kern = {"before": before, "after": pair_scores}
    for name in kern:
        kern[name](u.query, i.key, u.part, i.part, e.bias, out[name])
    assert np.array_equal(out["before"], out["after"])
    times = {name: ([], []) for name in kern}
    for _ in range(reps):
        for name in kern:
            c, w = _timed(lambda name=name: kern[name](u.query, i.key, u.part, i.part, e.bias,
                                                      out[name]))
            times[name][0].append(c)
            times[name][1].append(w)
    print(f"\nrecommend kernel, {len(users)} users x {n_items} items, r = {u.query.shape[1]} "
          f"(MCMC posterior mean), bit-identical; load {os.getloadavg()[0]:.2f}")
    for name, (c, w) in times.items():
        print(f"  {name}: CPU s {_summary(c)}, wall s {_summary(w)}")


def _compress(args):
    """Test RMSE and serving cost of the MCMC model with all / fewer kept samples (MovieLens)."""
    import copy

    from fmlearn.datasets import load_movielens_100k, movielens_split

    ml = load_movielens_100k(args.data)
    train, test = movielens_split(ml.X.shape[0], 0)
    X, y = ml.X[train].tocsr(), ml.y[train]
    Xt, yt = ml.X[test].tocsr(), ml.y[test]
    n_users, n_items = ml.n_users, ml.n_items
    users = np.arange(min(args.users, n_users))
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    c, w = _timed(lambda: None)
    t0c, t0w = time.process_time(), time.perf_counter()
    mcmc = FMRegressor(8, solver="mcmc", random_state=0).fit(X, y)
    fit = (time.process_time() - t0c, time.perf_counter() - t0w)
    S = mcmc.samples_w0_.shape[0]
    variants = {f"FM mcmc, all {S} samples": mcmc}
    for n in args.keep:
        if n < S:
            variants[f"FM mcmc, compress_posterior({n})"] = \
                copy.deepcopy(mcmc).compress_posterior(n)
    variants["FM als"] = FMRegressor(8, solver="als", random_state=0).fit(X, y)
    blocks = dict(user_block=(0, n_users), item_block=(n_users, n_users + n_items))
    for m in variants.values():  # warm up: compile outside the timings
        m.predict(Xt[:10])
        recommend(m, users[:2], None, k=10, **blocks)
    rmse = {name: float(np.sqrt(np.mean((m.predict(Xt) - yt) ** 2)))
            for name, m in variants.items()}
    res = {name: {"pc": [], "pw": [], "rc": [], "rw": []} for name in variants}
    for _ in range(args.reps):
        for name, m in variants.items():
            c, w = _timed(lambda m=m: m.predict(Xt))
            res[name]["pc"].append(c)
            res[name]["pw"].append(w)
            c, w = _timed(lambda m=m: recommend(m, users, None, k=10, **blocks))
            res[name]["rc"].append(c * 1000 / len(users))
            res[name]["rw"].append(w * 1000 / len(users))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"\nMovieLens-100K, split seed 0 ({X.shape[0]} train / {Xt.shape[0]} test rows); MCMC "
          f"fit {fit[0]:.1f} CPU s / {fit[1]:.1f} wall s; predict on the test rows and top 10 of "
          f"{n_items} items for {len(users)} users, {args.reps} alternated repetitions: median "
          "(min-max)\n")
    print("| model | test RMSE | predictions per CPU s | predict wall s | top-10 CPU s per 1,000 "
          "users | top-10 wall s per 1,000 users |")
    print("|---|---|---|---|---|---|")
    for name, r in res.items():
        rate = [Xt.shape[0] / max(c, 1e-9) for c in r["pc"]]
        print(f"| {name} | {rmse[name]:.4f} | {_summary(rate)} | {_summary(r['pw'])} | "
              f"{_summary(r['rc'])} | {_summary(r['rw'])} |")


if __name__ == "__main__":
    main()
