"""Where the CPU of a relational MCMC fit goes: the fit of ``bench_relation.py`` (MovieLens-100K,
TimeSVD++-flipped relation blocks, rank 8, init_stdev 0.1) split into its parts, and one pass
of the relational sweep split into its steps.

Fit parts (CPU seconds, one process, one thread): the sweep kernel
(``RelationColumnData.sweep``), the random numbers of the sweeps (``default_rng([seed, t])``,
its standard normals and gammas, timed apart with the same sizes), the settling test and the
kept samples (``record_sweep``: the copy of each sample into the reservoir, whose pages are
touched for the first time), the residual refresh every ``refresh_every`` sweeps, and the rest
(validation, merging, layout, compilation check, the Python loop).

Pass steps (milliseconds, the minimum over ``--reps`` alternated rounds of 5 calls, on the
fit's own data layout and a random model): the row-level features' pass with the previous
pass's block 1 scatter fused into its first gather, the write of its last class with block 0's
gather, block 0's features, block 0's scatter with block 1's gather, block 1's features; a
sweep runs k + 1 such passes (the w pass is cheaper), the last one with a scatter of its own.
These call private kernels of ``fmlearn.kernels.cd_relation``: a profile of this source tree,
not an API. ``--fit-only`` times the fit's parts only, and runs on another source tree too
(``PYTHONPATH=DIR/src``: a before/after of the fit's parts, run alternately);
``--steps-only`` the pass steps only.

    python benchmarks/profile_relation.py                   # split 0, 200 sweeps
    python benchmarks/profile_relation.py --n-iter 50 --reps 20
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _data(args):
    from bench_relation import make_split

    from fmlearn import RelationBlock, RelationData

    d = make_split(args.data, args.seed)
    X = RelationData(d["date_train"], [RelationBlock(d["u_train"], d["user"]),
                                       RelationBlock(d["i_train"], d["item"])])
    return d, X


def fit_parts(d, X, args):
    import fmlearn.solvers.mcmc as mcmc
    from fmlearn import FMRegressor
    from fmlearn.solvers.relation import RelationColumnData

    spent = {}

    def timed(owner, name, key):
        f = getattr(owner, name)

        def g(*a, **k):
            t = time.process_time()
            try:
                return f(*a, **k)
            finally:
                spent[key] = spent.get(key, 0.0) + time.process_time() - t

        setattr(owner, name, g)
        return f

    def est(n_iter):
        return FMRegressor(n_factors=8, solver="mcmc", n_iter=n_iter, random_state=args.seed,
                           groups=d["group_sizes"], init_stdev=0.1)

    est(2).fit(X, d["y_train"])  # compiled (or loaded from numba's cache) outside the timing
    saved = [(RelationColumnData, "sweep", timed(RelationColumnData, "sweep", "sweep kernel")),
             (RelationColumnData, "refresh", timed(RelationColumnData, "refresh", "refresh")),
             (mcmc, "record_sweep", timed(mcmc, "record_sweep", "kept samples + settling"))]
    try:
        t = time.process_time()
        fitted = est(args.n_iter).fit(X, d["y_train"])
        total = time.process_time() - t
    finally:
        for owner, name, f in saved:
            setattr(owner, name, f)
    # the sweeps' random numbers, drawn again with the fit's sizes (they are drawn inside the
    # timed loop of mcmc_solver, between the kernel calls)
    from fmlearn.kernels.cd import Config, gamma_shapes, n_normals
    from fmlearn.kernels.losses import SQUARED

    dd, k = fitted.V_.shape
    sizes = np.bincount(np.repeat(np.arange(5), d["group_sizes"])).astype(float)
    cfg = Config(SQUARED, 1.0, True, True, True, 0.0, 1.0, 1.0, 1.0, 0.0)
    nz, shapes = n_normals(dd, k, sizes.shape[0]), gamma_shapes(dd, k, sizes, cfg, 1e5)
    t = time.process_time()
    for s in range(args.n_iter):
        rs = np.random.default_rng([args.seed, s])
        rs.standard_normal(nz)
        rs.standard_gamma(shapes)
    spent["random numbers"] = time.process_time() - t
    spent["rest"] = total - sum(spent.values())
    return total, spent


def pass_steps(X, y, args):
    import fmlearn.kernels.cd as cd
    import fmlearn.kernels.cd_relation as K
    from fmlearn.kernels.losses import SQUARED
    from fmlearn.relation import check_relation_data, merge_relation_rows
    from fmlearn.solvers.relation import relation_column_data

    Xr = check_relation_data(X)
    Xr, ym, wm = merge_relation_rows(Xr, y, np.ones(y.shape[0]))
    data = relation_column_data(Xr.X, [(b.indices, b.X) for b in Xr.blocks], ym, wm)
    rel, plan = data.rel, data.plan
    d, k, n = int(rel.foff[-1]), 8, rel.ix.shape[1]
    rng = np.random.default_rng(0)
    V = rng.normal(0.0, 0.3, (d, k))
    E = np.zeros((n, 3))
    E[:, 0] = rng.normal(size=n)
    E[:, 1] = rng.normal(size=n)
    group = np.zeros(d, dtype=np.int64)
    cfg = cd.Config(SQUARED, 1.0, True, True, True, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0)
    pa = cd._Pass(1, V, 0, 1, 2, 1, V, np.full(1, 10.0), np.zeros(1),
                  0.01 * rng.normal(size=d), 0, 1.0)
    par = cd._parallel_flag(plan)

    def rows():
        plan.pend[0] = -1
        cd._sweep_pass(rel.rows, plan, pa, group, E, cfg, par)

    def pending_rows():  # the previous pass's last block pending, as in a sweep
        plan.pend[:5] = [K._BLOCK_PENDING, 1, 2, 1, 1]
        K._rows_pass(rel, plan, pa, group, E, cfg, par)

    def flush():
        rows()  # leaves its last class pending; timed apart below
        K._prepare(rel, 0, pa)
        K._flush_gather(rel, plan, pa, E, cfg)

    steps = {"row-level pass": rows,
             "block 1 scatter + row-level pass": pending_rows,
             "row-level pass + its last write + block 0 gather": flush,
             "block 0 features": lambda: K._block_features(rel, 0, pa, group, cfg),
             "block 0 scatter + block 1 gather": lambda: (
                 K._prepare(rel, 1, pa), K._scatter_gather(rel, 0, 1, pa, E)),
             "block 1 features": lambda: K._block_features(rel, 1, pa, group, cfg)}
    for f in steps.values():
        f()
    best = {name: np.inf for name in steps}
    for _ in range(args.reps):
        for name, f in steps.items():
            t = time.process_time()
            for _ in range(5):
                f()
            best[name] = min(best[name], (time.process_time() - t) / 5 * 1e3)
    rows_ms = best.pop("row-level pass")
    best["row-level pass + its last write + block 0 gather"] -= rows_ms
    steps_ms = {("row-level last write + block 0 gather" if name.startswith("row-level pass +")
                 else name): v for name, v in best.items()}
    return steps_ms, n, tuple(bool(g) for g in rel.grouped)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="MovieLens-100K folder (default: fmlearn's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-iter", type=int, default=200)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--steps-only", action="store_true",
                   help="time the pass steps only (no fit)")
    p.add_argument("--fit-only", action="store_true",
                   help="time the fit's parts only (runs on another source tree's fmlearn "
                        "too: PYTHONPATH=DIR/src)")
    args = p.parse_args(argv)
    load0 = os.getloadavg()[0]
    d, X = _data(args)
    total, spent = fit_parts(d, X, args) if not args.steps_only else (0.0, {})
    steps, n, grouped = pass_steps(X, d["y_train"], args) if not args.fit_only else ({}, 0, ())
    load1 = os.getloadavg()[0]
    print(f"MovieLens-100K relation blocks, MCMC rank 8, {args.n_iter} sweeps, split "
          f"{args.seed}; load average {load0:.2f}-{load1:.2f}.\n")
    if spent:
        print("| fit part | CPU s | share |\n|---|---|---|")
        for name, v in sorted(spent.items(), key=lambda kv: -kv[1]):
            print(f"| {name} | {v:.3f} | {100 * v / total:.0f} % |")
        print(f"| fit | {total:.3f} | 100 % |\n")
    if steps:
        print(f"One factor pass over {n} samples (blocks grouped: {grouped}), min of "
              f"{args.reps} rounds:\n")
        print("| step | ms |\n|---|---|")
        for name, v in steps.items():
            print(f"| {name} | {v:.3f} |")
        print(f"| sum | {sum(steps.values()):.3f} |")


if __name__ == "__main__":
    main()
