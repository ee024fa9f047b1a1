"""Does a default classifier predict positives on an imbalanced sparse text set? (issue 14)

The set is generated (``sparse_text`` of tests/online/test_online_defaults.py: 3,600 tf-idf-like
unit-norm rows over 8,000 words, 5% positives from a linear + pairwise score over 20 keywords);
the first 3,000 rows train, the last 600 are held out. For each estimator (a Python expression
evaluated in the ``fmlearn`` namespace, ``random_state=0`` set) one Markdown row: held-out AUC,
predicted and true positives, error rate against the majority class's, CPU and wall seconds.

    python benchmarks/imbalanced_text.py [--dim D] "OnlineFMClassifier()" "CCFMClassifier()"
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "online"))


def main(argv=None):
    from sklearn.metrics import roc_auc_score
    from test_online_defaults import sparse_text

    import fmlearn

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--dim", type=int, default=8000)
    args = ap.parse_args(argv)
    X, y = sparse_text(d=args.dim)
    Xtr, ytr, Xte, yte = X[:3000], y[:3000], X[3000:], y[3000:]
    print(f"load average {os.getloadavg()[0]:.1f}; d = {args.dim}")
    print("| estimator | AUC | predicted positives | true positives | error | majority error "
          "| CPU s | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for spec in args.specs:
        est = eval(spec, vars(fmlearn)).set_params(random_state=0)
        t0, c0 = time.perf_counter(), time.process_time()
        est.fit(Xtr, ytr)
        pred = est.predict(Xte)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        auc = roc_auc_score(yte, est.decision_function(Xte))
        print(f"| `{spec}` | {auc:.3f} | {int((pred == 1).sum())} | {int(yte.sum())} "
              f"| {np.mean(pred != yte):.4f} | {np.mean(yte != 0):.4f} | {cpu:.1f} | {wall:.1f} |",
              flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
