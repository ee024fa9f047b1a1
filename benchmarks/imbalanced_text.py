"""Does a default classifier predict positives on an imbalanced sparse text set? (issue 14)

The set is generated (``sparse_text`` of tests/online/test_online_defaults.py: 3,600 tf-idf-like
unit-norm rows over 8,000 words, 5% positives from a linear + pairwise score over 20 keywords);
the first 3,000 rows train, the last 600 are held out. For each estimator (a Python expression
evaluated in the ``fmlearn`` namespace, plus scikit-learn's ``CalibratedClassifierCV``) and each
``--seeds`` value set as every ``random_state`` among its parameters (the order ``fit`` visits
the rows in) one Markdown row: held-out AUC, predicted and true positives,
error rate against the majority class's, CPU and wall seconds.

The columns "positives, b refit" and "positives, a and b refit" separate a shifted decision
from compressed scores: the held-out positives once the decision function's constant b (or its
scale a and constant b, Platt's scaling) is refit by maximum likelihood (logistic loss) on the
training rows given the fitted model's scores. A model whose scores rank well but sit under
the threshold by a shift gains positives from the first; a model whose scores are compressed
(too close together to cross the threshold) only from the second, whose "a" column says by
how much the scores are compressed.

    python benchmarks/imbalanced_text.py [--dim D] [--seeds 0,1,2] "OnlineFMClassifier()" \\
        "CCFMClassifier()"
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "online"))


def refit_shift(scores, y):
    """The constant c minimising the logistic loss of ``scores + c`` on the labels y (0/1)."""
    from scipy.optimize import minimize_scalar

    def loss(c):
        z = scores + c
        return float(np.mean(np.logaddexp(0.0, z) - y * z))

    return minimize_scalar(loss, bounds=(-50.0, 50.0), method="bounded").x


def refit_platt(train_scores, y, scores):
    """Platt's a s + b fitted by unpenalised logistic regression of y on the training scores,
    applied to ``scores``; and a."""
    from sklearn.linear_model import LogisticRegression

    lr = LogisticRegression(C=np.inf).fit(train_scores[:, None], y)
    return lr.decision_function(scores[:, None]), float(lr.coef_[0, 0])


def decision(est, X):
    """The estimator's decision function, or the log-odds of its ``predict_proba``."""
    if hasattr(est, "decision_function"):
        return est.decision_function(X)
    p = np.clip(est.predict_proba(X)[:, 1], 1e-15, 1 - 1e-15)
    return np.log(p) - np.log1p(-p)


def main(argv=None):
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.metrics import roc_auc_score
    from test_online_defaults import sparse_text

    import fmlearn

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--dim", type=int, default=8000)
    ap.add_argument("--seeds", default="0", help="comma-separated random_state values")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    namespace = {**vars(fmlearn), "CalibratedClassifierCV": CalibratedClassifierCV}
    X, y = sparse_text(d=args.dim)
    Xtr, ytr, Xte, yte = X[:3000], y[:3000], X[3000:], y[3000:]
    print(f"load average {os.getloadavg()[0]:.1f}; d = {args.dim}")
    print("| estimator | seed | AUC | predicted positives | positives, b refit | positives, a "
          "and b refit | a | true positives | error | majority error | CPU s | wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for seed in seeds:  # the specs alternated (A B A B ...)
        for spec in args.specs:
            est = eval(spec, namespace)
            est.set_params(**{k: seed for k in est.get_params() if k.endswith("random_state")})
            t0, c0 = time.perf_counter(), time.process_time()
            est.fit(Xtr, ytr)
            pred = est.predict(Xte)
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
            scores = decision(est, Xte)
            train = decision(est, Xtr)
            shift = refit_shift(train, ytr)
            platt, a = refit_platt(train, ytr, scores)
            auc = roc_auc_score(yte, scores)
            print(f"| `{spec}` | {seed} | {auc:.3f} | {int((pred == 1).sum())} "
                  f"| {int((scores + shift > 0).sum())} | {int((platt > 0).sum())} | {a:.1f} "
                  f"| {int(yte.sum())} "
                  f"| {np.mean(pred != yte):.4f} | {np.mean(yte != 0):.4f} | {cpu:.1f} "
                  f"| {wall:.1f} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
