"""The cost of ``trace_bound="auto"``: CCFMClassifier(learner="ftrl") with its defaults, the
bound chosen by the library's scan (largest bound first, stop at the first rise) against the
full scan of all six candidates (fmlearn 0.2), alternated A B A B in one process, and the fit
with the chosen bound given (no selection).

    python benchmarks/bench_trace_bound.py [--quick] [--reps 3] [--frappe FILE]

Data: the generated imbalanced sparse text of tests/online/test_online_defaults.py
(``sparse_text``: tf-idf-like unit-norm rows over 8,000 words; 3,000 training rows,
``--quick`` 1,500) and, with ``--frappe`` (or ``$FMLEARN_FRAPPE``: frappe.validation.libfm.bz2 of
the shared data), the first 4,000 rows of Frappe (5,382 one-hot columns; ``--quick`` 2,000).
Prints per (set, variant): the chosen bound, held-out AUC, CPU and wall seconds (median and
min-max over ``--reps``), and the load average.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "online"))


def full_scan(self, X, y, sw):
    """fmlearn 0.2's selection: every candidate, smallest first, the least loss kept."""
    from fmlearn._threads import blas_single_thread
    from fmlearn.kernels.losses import loss_value_np
    from fmlearn.kernels.steps import OK
    from fmlearn.online import _trace

    rows = _trace.sample_rows(X.shape[0])
    rows = rows[np.random.RandomState(0).permutation(rows.shape[0])]
    Xs, ys, ws = X[rows], y[rows], sw[rows]
    csr = self._rows(Xs)
    order = np.arange(rows.shape[0], dtype=np.int64)
    classifier = self._is_classifier()
    off = None
    if self._intercept_outside():
        off, _ = _trace.running_intercepts(ys, ws, order, [0.0, 0.0], classifier)
    scored = order[rows.shape[0] // 4:]
    loss = "logistic" if classifier else "squared"
    best, best_loss = None, np.inf
    for cand in _trace.auto_candidates(ys, ws, classifier, self._augment):
        self.trace_bound_ = cand
        learner = self._new_learner(X.shape[1], None)
        out = np.zeros(rows.shape[0])
        with blas_single_thread():
            try:
                status, _, _ = learner.learn(csr, ys, ws, order, out, self._limit(ys), off)
            except np.linalg.LinAlgError:
                continue
        if status != OK:
            continue
        value = float(np.dot(ws[scored], loss_value_np(loss, out[scored], ys[scored])))
        if value < best_loss:
            best, best_loss = cand, value
    return best


def sets(args):
    from test_online_defaults import sparse_text

    n = 1500 if args.quick else 3000
    X, y = sparse_text(n=n + 600, d=8000)
    out = {"sparse text (8,000 cols)": (X[:n], y[:n], X[n:], y[n:])}
    path = args.frappe or os.environ.get("FMLEARN_FRAPPE")
    if path and os.path.exists(path):
        from sklearn.datasets import load_svmlight_file

        X, y = load_svmlight_file(path, n_features=5382)
        m = 2000 if args.quick else 4000
        y = (y > 0).astype(int)
        out["Frappe (5,382 cols)"] = (X[:m], y[:m], X[m:m + 2000], y[m:m + 2000])
    return out


def main():
    from sklearn.metrics import roc_auc_score

    from fmlearn import CCFMClassifier
    from fmlearn.online._trace import TraceBounded

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--frappe", default=None)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} (1 min)")
    print("| set | variant | trace_bound_ | AUC | CPU s median (min-max) | wall s median "
          "(min-max) |")
    print("|---|---|---|---|---|---|")
    library = TraceBounded._select_trace_bound
    for name, (Xtr, ytr, Xte, yte) in sets(args).items():
        CCFMClassifier(learner="ftrl", trace_bound=10.0, random_state=0).fit(Xtr[:50], ytr[:50])
        times = {"scan, stop at first rise": [], "full scan (0.2)": [], "bound given": []}
        info = {}
        for _ in range(args.reps):
            for variant in times:
                TraceBounded._select_trace_bound = full_scan if variant.startswith(
                    "full") else library
                kw = {}
                if variant == "bound given":
                    kw = {"trace_bound": info["scan, stop at first rise"][0]}
                c0, w0 = time.process_time(), time.perf_counter()
                m = CCFMClassifier(learner="ftrl", random_state=0, **kw).fit(Xtr, ytr)
                times[variant].append((time.process_time() - c0, time.perf_counter() - w0))
                info[variant] = (m.trace_bound_, roc_auc_score(yte, m.decision_function(Xte)))
        TraceBounded._select_trace_bound = library
        for variant, t in times.items():
            t = np.array(t)
            cpu, wall = t[:, 0], t[:, 1]
            print(f"| {name} | {variant} | {info[variant][0]:.4g} | {info[variant][1]:.3f} | "
                  f"{np.median(cpu):.1f} ({cpu.min():.1f}-{cpu.max():.1f}) | "
                  f"{np.median(wall):.1f} ({wall.min():.1f}-{wall.max():.1f}) |", flush=True)


if __name__ == "__main__":
    main()
