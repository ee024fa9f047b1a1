"""Fit CPU of the MCMC sampler with and without over-relaxation, alternated in one process.

A single-system A/B (the peers are timed by ``sbs.py``): ``FMRegressor(solver="mcmc")`` on one
of the harness's split files, ``overrelaxation`` 0 (libFM's Gibbs draw) and the given value
alternated ``--reps`` times after an untimed fit that loads the compiled kernels; CPU and wall
seconds of each ``fit`` and the load average before and after::

    python benchmarks/mcmc_relax_ab.py --train ml100k-0.train.libfm --test ml100k-0.test.libfm \\
        --meta ml100k.meta --n-iter 500 --relax -0.9

(the files ``rmse_seeds.py run`` writes into its ``--workdir``). ``--validate`` measures
accuracy instead, never on the test file: a random 20 % of the training rows
(``default_rng(0)``) is held out, and ``overrelaxation`` 0 and ``--relax`` (a number or
``auto``) are fitted on the rest for each ``--n-iter`` and ``--init-seeds``; it prints each
fit's validation RMSE and the sweep the chain settled at, then the mean difference::

    python benchmarks/mcmc_relax_ab.py --validate --train ml100k-0.train.libfm \
        --test ml100k-0.test.libfm --meta ml100k.meta --n-iter 100 500 --relax auto
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sbs_fmlearn import _read_pair  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--meta", help="libFM -meta file (feature groups)")
    p.add_argument("--n-iter", type=int, nargs="+", default=[500])
    p.add_argument("--relax", type=_relax, default=-0.9)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--validate", action="store_true",
                   help="validation RMSE on 20%% of the training rows instead of timing")
    p.add_argument("--init-seeds", type=int, nargs="+", default=[1, 2, 3])
    a = p.parse_args(argv)
    from fmlearn import FMRegressor

    X, y, _, _ = _read_pair(a.train, a.test)
    groups = np.loadtxt(a.meta, dtype=np.int64) if a.meta else None
    if a.validate:
        return validate(X, y, groups, a)
    kw = dict(n_factors=8, solver="mcmc", n_iter=a.n_iter[0], init_stdev=0.1, random_state=1,
              groups=groups, n_jobs=1)
    FMRegressor(**{**kw, "n_iter": 2}).fit(X, y)  # load the compiled kernels, untimed
    print("load average before:", os.getloadavg())
    runs = {0.0: [], a.relax: []}
    for rep in range(a.reps):
        for relax in runs:
            c, w = time.process_time(), time.perf_counter()
            FMRegressor(overrelaxation=relax, **kw).fit(X, y)
            runs[relax].append((time.process_time() - c, time.perf_counter() - w))
            print(f"rep {rep} overrelaxation {relax:+.2f}: fit CPU {runs[relax][-1][0]:.2f} s, "
                  f"wall {runs[relax][-1][1]:.2f} s", flush=True)
    print("load average after:", os.getloadavg())
    for relax, r in runs.items():
        cpu, wall = np.median(r, axis=0)
        print(f"overrelaxation {relax:+.2f}: median fit CPU {cpu:.2f} s, wall {wall:.2f} s")


def _relax(text):
    return text if text == "auto" else float(text)


def validate(X, y, groups, a):
    """Validation RMSE of overrelaxation 0 and ``a.relax``, paired by init seed."""
    from fmlearn import FMRegressor

    idx = np.random.default_rng(0).permutation(X.shape[0])
    fit, val = idx[:int(0.8 * idx.shape[0])], idx[int(0.8 * idx.shape[0]):]
    print("load average before:", os.getloadavg())
    for n_iter in a.n_iter:
        diffs = []
        for seed in a.init_seeds:
            rmse = {}
            for relax in (0.0, a.relax):
                est = FMRegressor(n_factors=8, solver="mcmc", n_iter=n_iter, init_stdev=0.1,
                                  random_state=seed, groups=groups, n_jobs=1,
                                  overrelaxation=relax).fit(X[fit], y[fit])
                rmse[relax] = float(np.sqrt(np.mean((est.predict(X[val]) - y[val]) ** 2)))
                print(f"n_iter {n_iter} seed {seed} overrelaxation {relax}: validation RMSE "
                      f"{rmse[relax]:.4f}, settled at sweep {est.chain_['settled_at']}",
                      flush=True)
            diffs.append(rmse[a.relax] - rmse[0.0])
        se = np.std(diffs, ddof=1) / np.sqrt(len(diffs)) if len(diffs) > 1 else float("nan")
        print(f"n_iter {n_iter}: {a.relax} - 0 = {np.mean(diffs):+.4f} +- {se:.4f} "
              f"({len(diffs)} init seeds)")
    print("load average after:", os.getloadavg())


if __name__ == "__main__":
    main()
