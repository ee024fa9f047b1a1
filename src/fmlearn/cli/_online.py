"""``fmlearn online``: learn an online FM from an svmlight/libFM stream, predict-then-learn.

Reads TRAIN, feeds its rows in order (or in a seeded random order) to an online estimator in
batches and reports the prequential metrics (each row predicted before it is learned), the
learning speed, optionally held-out metrics on TEST, a learning curve and the saved model.
"""

import argparse
import json
import os
import time
import warnings

import numpy as np

from .._renamed import RenamedFlag
from ._common import (
    CLIError,
    add_command,
    add_max_features,
    nonneg_float,
    note,
    positive_float,
    positive_int,
    print_pairs,
    read_svmlight,
    widen,
)


def _bound(text):
    """``--trace-bound``: a positive number or ``auto``."""
    return text if text == "auto" else positive_float(text)


_LEARNERS = {"ccfm": ("ocg", "ogd", "pa", "ftrl"), "fm": ("ftrl", "ogd", "pa"), "cfm": ("ftrl",)}


def add_parser(sub):
    """Register ``fmlearn online`` on the ``fmlearn`` subparsers."""
    p = add_command(
        sub, "online", "learn an online FM (OCCFM, FTRL, OGD, PA) predict-then-learn",
        "Feed the rows of TRAIN to an online factorization machine, each row\n"
        "predicted before it is learned (prequential evaluation, Zhang et al. 2018, §4.1).\n"
        "Models: ccfm (compact convexified FM: learners ocg = OCCFM, ogd, pa,\n"
        "ftrl), fm (classic FM: ftrl, ogd, pa), cfm (convex FM: ftrl).",
        "  fmlearn online ijcnn1.libsvm --model ccfm --learner ocg --loss logistic \\\n"
        "      --trace-bound 300 --shuffle --seed 0\n"
        "  fmlearn online ratings.libfm --model fm --learner ftrl --n-factors 8 \\\n"
        "      --test test.libfm --save model.fmz --curve curve.tsv")
    p.add_argument("train", metavar="TRAIN", help="svmlight/libFM stream (rows in file order)")
    p.add_argument("--test", metavar="TEST", help="held-out file scored after learning")
    _add_model_arguments(p)
    _add_stream_arguments(p)
    p.add_argument("--save", metavar="OUT.fmz", help="save the model after learning")
    p.add_argument("--curve", metavar="FILE.tsv",
                   help="write the learning curve: rows, seconds, metric values")
    p.add_argument("--plot", metavar="FILE.png", help="plot the learning curve (needs matplotlib)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("-v", "--verbose", action="count", default=0, help="progress bar")
    add_max_features(p)
    return p


def _add_model_arguments(p):
    """The estimator: model family, learner, loss and their settings."""
    p.add_argument("--model", choices=sorted(_LEARNERS), default="ccfm",
                   help="model family (default ccfm)")
    p.add_argument("--learner", default=None,
                   help="ccfm: ocg (default), ogd, pa, ftrl; fm: ftrl (default), ogd, pa; "
                        "cfm: ftrl")
    p.add_argument("--loss", choices=["squared", "logistic"], default="squared",
                   help="squared: regression (RMSE); logistic: binary classification (error "
                        "rate, AUC); default squared")
    p.add_argument("--trace-bound", type=_bound, default="auto", metavar="D",
                   help="ccfm, cfm: trace-norm bound, a number or 'auto' (default: auto, "
                        "derived from the first batch as the estimators' trace_bound='auto')")
    p.add_argument("--learning-rate", type=positive_float, default=None, metavar="E",
                   help="the estimator's learning_rate: ccfm ocg: weight of the accumulated "
                        "gradient; ccfm ogd/ftrl, fm ogd: step size; fm ftrl, cfm: FTRL alpha "
                        "of w0 and w (default: the estimator's)")
    p.add_argument("--gamma-power", type=nonneg_float, default=None, metavar="P",
                   help="ccfm ocg: gamma_t = t^-P (default: the estimator's, 1, an averaged "
                        "iterate; the paper's 0.5 gives the final iterate)")
    p.add_argument("--power-t", type=nonneg_float, default=0.5, metavar="P",
                   help="ogd, ftrl: step size eta / t^P (default 0.5)")
    p.add_argument("--no-self-interaction", action="store_true",
                   help="ccfm: leave out the x_j^2 terms")
    p.add_argument("--n-factors", type=positive_int, default=8, metavar="K",
                   help="fm: number of factors (default 8)")


def _add_stream_arguments(p):
    """How the rows are fed: passes, order, seed, batches."""
    p.add_argument("--n-iter", type=positive_int, default=1, metavar="N",
                   help="passes over TRAIN; metrics are those of every prediction made")
    p.add_argument("--shuffle", action="store_true",
                   help="visit the rows in a random order (--seed) instead of file order")
    p.add_argument("--seed", type=int, default=None, metavar="S",
                   help="random seed (row order, initial factors)")
    p.add_argument("--batch-size", type=positive_int, default=10000, metavar="B",
                   help="rows per compiled call and per point of the learning curve")
    # 0.1 flags, accepted until 0.3 with a FutureWarning
    for old, new, dest, kind in (("--delta", "--trace-bound", "trace_bound", _bound),
                                 ("--eta", "--learning-rate", "learning_rate", positive_float),
                                 ("--rank", "--n-factors", "n_factors", positive_int),
                                 ("--passes", "--n-iter", "n_iter", positive_int)):
        p.add_argument(old, dest=dest, type=kind, action=RenamedFlag, new_flag=new,
                       help=argparse.SUPPRESS)


def build_online_estimator(args):
    """The online estimator described by the ``online`` arguments."""
    from fmlearn.online import ESTIMATORS

    learner = args.learner or _LEARNERS[args.model][0]
    if learner not in _LEARNERS[args.model]:
        raise CLIError(f"--model {args.model} has learners {', '.join(_LEARNERS[args.model])}; "
                       f"got --learner {learner}")
    cls = ESTIMATORS[args.model][args.loss == "logistic"]
    kw = {}
    if args.learning_rate is not None:
        kw["learning_rate"] = args.learning_rate
    if args.model == "ccfm":
        if args.gamma_power is not None:
            kw["gamma_power"] = args.gamma_power
        return cls(learner, trace_bound=args.trace_bound,
                   power_t=args.power_t, self_interaction=not args.no_self_interaction,
                   random_state=args.seed, **kw)
    if args.no_self_interaction:
        raise CLIError("--no-self-interaction applies to --model ccfm")
    if args.model == "fm":
        return cls(learner, n_factors=args.n_factors, power_t=args.power_t,
                   random_state=args.seed, **kw)
    return cls(learner, trace_bound=args.trace_bound, power_t=args.power_t,
               random_state=args.seed, **kw)


def _stream(X, y, args):
    rng = np.random.default_rng(args.seed)
    n = X.shape[0]
    for _ in range(args.n_iter):
        order = rng.permutation(n) if args.shuffle else np.arange(n)
        for start in range(0, n, args.batch_size):
            rows = order[start:start + args.batch_size]
            yield X[rows], y[rows]


def cmd_online(args):
    from fmlearn import evaluate_prequential

    est = build_online_estimator(args)
    X, y = read_svmlight(args.train, "training", max_features=args.max_features)
    X_test = y_test = None
    if args.test:
        X_test, y_test = read_svmlight(args.test, "test", max_features=args.max_features)
        d = max(X.shape[1], X_test.shape[1])
        X, X_test = widen(X, d, args.train), widen(X_test, d, args.test)
    clf = args.loss == "logistic"
    if clf and np.unique(y).shape[0] != 2:
        raise CLIError(f"{args.train}: --loss logistic needs exactly two labels, found "
                       f"{np.unique(y).shape[0]}")
    metrics = ["error_rate", "auc"] if clf else ["rmse"]
    t0 = time.perf_counter()
    res = evaluate_prequential(est, _stream(X, y, args), metrics=metrics,
                               classes=np.unique(y) if clf else None, verbose=args.verbose,
                               total=X.shape[0] * args.n_iter)
    wall = time.perf_counter() - t0
    report = [("model", f"{type(est).__name__}(learner={est.learner})"),
              ("train", f"{args.train}: {X.shape[0]} rows, {X.shape[1]} features"),
              ("rounds", int(res.n_rows[-1])),
              ("compiled kernels in", f"{res.compile_time:.3f} s (not learning time)"),
              ("learning time", f"{res.elapsed[-1]:.3f} s"),
              ("rows per second", float(res.rows_per_second))]
    report += [(f"prequential {name}", float(v)) for name, v in res.metrics.items()]
    if X_test is not None:
        from sklearn.metrics import roc_auc_score, root_mean_squared_error, zero_one_loss

        if clf:
            pred = est.predict(X_test)
            report.append(("test error_rate", float(zero_one_loss(y_test, pred))))
            score = est.decision_function(X_test)
            report.append(("test auc", float(roc_auc_score(y_test == est.classes_[1], score))))
        else:
            pred = est.predict(X_test)
            report.append(("test rmse", float(root_mean_squared_error(y_test, pred))))
    info = getattr(est, "info_", {}) or {}
    for key in ("dropped_mass", "inexact_steps"):
        if key in info and info[key]:
            report.append((key.replace("_", " "), info[key]))
    # The model first: optional outputs (curve, plot) must never cost the learned model.
    if args.save:
        est.save(args.save)
    if args.curve:
        _write_curve(args.curve, res)
    if args.plot:
        try:
            res.plot(args.plot, title=f"{type(est).__name__}({est.learner}) on "
                                      f"{os.path.basename(args.train)}")
        except ImportError as exc:
            warnings.warn(f"{args.plot} not written: {exc}", stacklevel=1)
    if args.json:
        print(json.dumps({k: v for k, v in report}, sort_keys=False))
    else:
        print_pairs(report)
        if args.save:
            print(f"model saved to {args.save}")
    if wall > 0 and args.verbose:
        note(f"total wall time {wall:.2f} s")
    return 0


def _write_curve(path, res):
    names = list(res.curves)
    lines = ["\t".join(["rows", "seconds"] + names)]
    for i in range(res.n_rows.shape[0]):
        lines.append("\t".join([str(int(res.n_rows[i])), repr(float(res.elapsed[i]))]
                               + [repr(float(res.curves[n][i])) for n in names]))
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc.strerror or exc}") from None

