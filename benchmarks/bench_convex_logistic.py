"""Cost of ConvexFMClassifier's fit on Adult or IJCNN1 (issue 14, item 2): one row per run.

The logistic convex FM re-fits its linear part after every Frank-Wolfe step; this times
``ConvexFMClassifier(trace_bound=..., max_iter=N, tol=0, random_state=0)`` (or, with
``--defaults``, ``ConvexFMClassifier(random_state=0)``) on the set's training file and scores
the test file, so two code versions (two interpreters, each with its own fmlearn) can be run
alternately on the same data:

    python benchmarks/bench_convex_logistic.py --libsvm-data DIR [--set adult] [--max-iter 5]
        [--defaults] [--label main]

``DIR`` (or ``$FMLEARN_LIBSVM``) holds ``SET.trn.bz2`` and ``SET.tst.bz2``. Prints the
iterations, objective, test error, CPU and wall seconds, and the load average.
"""

import argparse
import os
import time
import warnings

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--libsvm-data", default=os.environ.get("FMLEARN_LIBSVM"))
    ap.add_argument("--max-iter", type=int, default=5)
    ap.add_argument("--trace-bound", type=float, default=1.0)
    ap.add_argument("--set", default="adult", choices=["adult", "ijcnn1"])
    ap.add_argument("--defaults", action="store_true", help="the estimator's default parameters")
    ap.add_argument("--label", default="")
    args = ap.parse_args(argv)
    if args.libsvm_data is None:
        ap.error("--libsvm-data or $FMLEARN_LIBSVM is required")
    from fmlearn import ConvexFMClassifier
    from fmlearn.datasets import load_svmlight

    X, y = load_svmlight(os.path.join(args.libsvm_data, f"{args.set}.trn.bz2"))
    Xt, yt = load_svmlight(os.path.join(args.libsvm_data, f"{args.set}.tst.bz2"),
                           n_features=X.shape[1])
    model = (ConvexFMClassifier(random_state=0) if args.defaults else
             ConvexFMClassifier(trace_bound=args.trace_bound, max_iter=args.max_iter, tol=0,
                                random_state=0))
    c0, t0 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    err = float(np.mean(model.predict(Xt) != yt))
    print(f"| {args.label} | {args.set} | {model.n_iter_} | {model.objective_:.6f} | {err:.4f} "
          f"| {cpu:.1f} | {wall:.1f} | {os.getloadavg()[0]:.1f} |")


if __name__ == "__main__":
    main()
