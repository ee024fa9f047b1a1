"""The ``fmlearn`` command: fit, predict, evaluate, demo, reproduce, online and recommend.

A thin front end over the public estimators: it parses arguments, reads svmlight/libFM files,
calls ``fit`` / ``predict`` / :func:`fmlearn.load` and prints results. libFM's single-dash flags
are accepted by ``fmlearn fit`` (and by ``fmlearn libfm ...`` or a bare ``fmlearn -task ...``);
see docs/cli.md.

Exit status: 0 on success, 2 for an error the user can fix (a missing or malformed file, a model
file that fails to load, a feature count mismatch, invalid options; one line on stderr, no
traceback unless ``--debug``), 1 for an unexpected internal error, 130 when interrupted,
141 when the reader of stdout went away (a broken pipe).
"""

import argparse
import os
import sys
import warnings

from .._renamed import RenamedFlag
from ._common import (
    CLIError,
    add_command,
    add_max_features,
    init_stdev_type,
    nonneg_int,
    positive_float,
    positive_int,
)

__all__ = ["main", "build_parser"]

_DEBUG = "--debug"


def _add_fit(sub):
    from ._commands import parse_reg

    p = add_command(
        sub, "fit", "train an FM on an svmlight/libFM file, an FFM on a libffm file, or a "
        "ranker on implicit feedback",
        "Train an FMRegressor (--task r) or FMClassifier (--task c) on an\n"
        "svmlight/libFM file (feature indices are used as written), with\n"
        "--model ffm an FFMClassifier (FFMRegressor with --task r) on a libffm file,\n"
        "or an FMRanker (--task rank) on an events file: one 'user item [weight]'\n"
        "line per positive event (ids from 0; spaces, tabs or commas).",
        "  fmlearn fit train.libfm --test test.libfm --solver mcmc --n-factors 8 \\\n"
        "      --n-iter 100 --save model.fmz\n"
        "  fmlearn fit plays.txt --task rank --loss warp --test held.txt --save rank.fmz\n"
        "  fmlearn fit -task r -method mcmc -dim 1,1,8 -iter 100 \\\n"
        "      -train train.libfm -test test.libfm -out pred.txt\n"
        "  fmlearn fit --model ffm train.ffm --test va.ffm --auto-stop --save model.fmz\n"
        "  fmlearn ffm-train -k 4 -t 15 -p va.ffm --auto-stop train.ffm model.fmz\n\n"
        "libFM flags: -task -method -dim -iter -train -test -out -init_stdev\n"
        "-regular -learn_rate -seed -meta -relation -verbosity -save_model -rlog;\n"
        "LIBFFM flags (--model ffm): -k -t -r -l -s -p --auto-stop --no-norm --quiet\n"
        "(see docs/cli.md)")
    p.add_argument("train", nargs="?", metavar="TRAIN", help="training file (svmlight/libFM)")
    p.add_argument("--train", dest="train_opt", metavar="TRAIN", help=argparse.SUPPRESS)
    p.add_argument("--test", metavar="TEST",
                   help="held-out file: its metric is recorded after every iteration")
    p.add_argument("--task", choices=["r", "c", "rank"], default=None,
                   help="r: regression (RMSE), c: binary classification (error rate), rank: "
                        "implicit feedback (TRAIN and TEST are events files); default r (c for "
                        "--model ffm)")
    p.add_argument("--loss", choices=["warp", "bpr", "squared"], default="warp",
                   help="--task rank: WARP, BPR or the all-negatives squared loss (iCD); "
                        "default warp")
    p.add_argument("--solver", choices=["mcmc", "als", "sgd"], default=None,
                   help="default mcmc (no regularization to tune); --model fm only")
    p.add_argument("--n-factors", type=nonneg_int, default=None, metavar="K",
                   help="number of factors k (default 8; 4 for --model ffm; --task rank 32)")
    p.add_argument("--n-iter", type=positive_int, default=None, metavar="N",
                   help="sweeps (MCMC, ALS, iCD) or epochs (SGD, WARP, BPR); default 100 (15 "
                        "epochs for --model ffm; --task rank: FMRanker's)")
    p.add_argument("--init-stdev", type=init_stdev_type, default=None, metavar="S",
                   help="standard deviation of the initial factors, or auto (default auto: "
                        "derived from the data, as FMRegressor / FMClassifier / the FFMs do; "
                        "--task rank: FMRanker's); libFM-flag mode (-task ...) keeps libFM's "
                        "-init_stdev 0.1")
    p.add_argument("--reg", type=parse_reg, default=None, metavar="R0,R1,R2",
                   help="L2 on bias, linear, pairwise terms (ALS, SGD); one value sets all three;"
                        " with --groups (ALS) R0 then one R1 and one R2 per group")
    p.add_argument("--groups", metavar="FILE",
                   help="feature groups, one group id per feature and line (libFM's -meta): "
                        "separate priors (MCMC) or penalties (ALS) per group")
    p.add_argument("--relation", metavar="NAME[,NAME...]",
                   help="relation blocks in libFM's block structure (libFM's -relation): "
                        "NAME.x/NAME.xt, NAME.train, NAME.test, NAME.groups (see docs/cli.md)")
    p.add_argument("--learning-rate", type=positive_float, default=None, metavar="LR",
                   help="SGD step size (default 0.01; AdaGrad's 0.2 for --model ffm; --task "
                        "rank: FMRanker's)")
    p.add_argument("--n-burn-in", type=nonneg_int, default=None, metavar="N",
                   help="MCMC sweeps discarded before samples are kept (default n_iter // 10)")
    p.add_argument("--seed", type=nonneg_int, default=None, metavar="S",
                   help="random seed (default: fresh randomness)")
    p.add_argument("--n-jobs", type=int, default=None, metavar="N",
                   help="threads for the compiled loops (results do not depend on it)")
    p.add_argument("--no-clip", action="store_true",
                   help="regression: do not clip predictions to the training target range")
    p.add_argument("--stream", action="store_true",
                   help="read TRAIN in chunks instead of whole (out of core, --solver sgd): "
                        "each epoch re-reads the file; memory holds one chunk")
    p.add_argument("--batch-size", type=positive_int, default=None, metavar="N",
                   help="with --stream: rows per SGD call (default: the chunks as read)")
    # 0.1 flags, accepted until 0.3 with a FutureWarning
    for old, new, dest, kind in (("--rank", "--n-factors", "n_factors", nonneg_int),
                                 ("--burn-in", "--n-burn-in", "n_burn_in", nonneg_int),
                                 ("--batch-rows", "--batch-size", "batch_size", positive_int)):
        p.add_argument(old, dest=dest, type=kind, action=RenamedFlag, new_flag=new,
                       help=argparse.SUPPRESS)
    p.add_argument("--model", metavar="FAMILY",
                   help="fm (default: svmlight/libFM files) or ffm (field-aware FM on libffm "
                        "files); for compatibility a path OUT.fmz here means --save OUT.fmz")
    p.add_argument("--save", metavar="OUT.fmz", help="save the fitted model here")
    ffm = p.add_argument_group("field-aware FM (--model ffm)")
    ffm.add_argument("--auto-stop", action="store_true",
                     help="stop at the first epoch whose --test log-loss does not improve and "
                          "keep the best epoch's model (LIBFFM's --auto-stop)")
    ffm.add_argument("--early-stopping", action="store_true",
                     help="early stopping on 10%% of the training rows (scikit-learn's rule: 2 "
                          "epochs without an improvement of 1e-4)")
    ffm.add_argument("--no-norm", action="store_true",
                     help="do not divide each row by its norm (LIBFFM's --no-norm)")
    ffm.add_argument("--hash-buckets", type=positive_int, default=None, metavar="B",
                     help="the hashing trick: B columns per field, feature ids hashed into "
                          "them (unbounded vocabularies)")
    ffm.add_argument("--float32", action="store_true",
                     help="read the files and learn in float32, as LIBFFM does (half the "
                          "memory)")
    ffm.add_argument("--quiet", action="store_true",
                     help="LIBFFM mode: no per-iteration lines")
    p.add_argument("--out", metavar="PRED.txt",
                   help="write predictions for --test here, one per line")
    p.add_argument("--proba", action="store_true",
                   help="with --out and --task c: write P(positive class) instead of labels")
    p.add_argument("--log", metavar="FILE",
                   help="write the per-iteration metrics as a tab-separated table")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="progress bar while fitting and a per-iteration table afterwards")
    add_max_features(p)
    p.add_argument("--libfm-output", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--libffm-output", action="store_true", help=argparse.SUPPRESS)
    return p


def build_parser():
    """The argparse parser of the ``fmlearn`` command."""
    from fmlearn import __version__

    parser = argparse.ArgumentParser(
        prog="fmlearn",
        description="Factorization machines from the command line (see docs/cli.md).",
        epilog="libFM style also works: fmlearn -task r -method mcmc -dim 1,1,8 -iter 100 "
               "-train TRAIN -test TEST -out PRED")
    parser.add_argument("--version", action="version", version=f"fmlearn {__version__}")
    parser.add_argument(_DEBUG, action="store_true",
                        help="show the full traceback on errors (accepted anywhere)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _add_fit(sub)

    p = sub.add_parser("predict", help="predict with a saved model",
                       description="Write one prediction per row of DATA (label column ignored).")
    p.add_argument("model", metavar="MODEL", help="model file (.fmz)")
    p.add_argument("data", metavar="DATA", help="svmlight/libFM file")
    p.add_argument("--out", metavar="FILE", help="output file (default: stdout)")
    p.add_argument("--proba", action="store_true",
                   help="classifiers: write P(classes_[1]) instead of labels")
    p.add_argument("--log-loss", action="store_true",
                   help="classifiers: also print the log-loss of the file's labels "
                        "(LIBFFM's ffm-predict)")
    p.add_argument("--hash-buckets", type=positive_int, default=None, metavar="B",
                   help="FFM models trained on hashed libffm files: the same B")
    add_max_features(p)
    _add_relation_options(p)

    p = sub.add_parser("evaluate", help="test metrics of a saved model",
                       description="RMSE and MAE for regressors; error rate, AUC and log-loss "
                                   "for classifiers.")
    p.add_argument("model", metavar="MODEL", help="model file (.fmz)")
    p.add_argument("data", metavar="DATA", help="labelled svmlight/libFM file")
    p.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    p.add_argument("--hash-buckets", type=positive_int, default=None, metavar="B",
                   help="FFM models trained on hashed libffm files: the same B")
    add_max_features(p)
    _add_relation_options(p)

    p = sub.add_parser("demo", help="train FMs on generated data (no network, no files)",
                       description="Fit FMs with every solver on generated data and on a small "
                                   "generated recommendation set; print test metrics and times.")
    p.add_argument("--quick", action="store_true", help="tiny data and few iterations (smoke test)")
    p.add_argument("--seed", type=nonneg_int, default=0, metavar="S", help="default 0")
    p.add_argument("--n-jobs", type=int, default=None, metavar="N",
                   help="threads for the compiled loops (default: numba's)")

    p = sub.add_parser("reproduce", help="run a paper experiment (table + PNG)",
                       description="Run a registered paper experiment: it prints a table and "
                                   "writes its figures as PNG into --out.")
    p.add_argument("name", nargs="?", metavar="NAME", help="experiment name (see --list)")
    p.add_argument("--list", action="store_true", help="list the registered experiments")
    p.add_argument("--out", metavar="DIR",
                   help="output folder (default: ./fmlearn-reproduce/NAME)")
    p.add_argument("--quick", action="store_true", help="a smaller run of the same experiment")
    p.add_argument("--rinex", metavar="DIR",
                   help="vtec only: run on the real RINEX files of DIR (observation files, a "
                        "GPS navigation file, optionally an IONEX map) instead of the simulator")

    from ._online import add_parser as _add_online

    _add_online(sub)
    from ._recommend import add_parser as _add_recommend

    _add_recommend(sub)
    from ._relation import add_convert_parser

    add_convert_parser(sub)
    return parser


def _add_relation_options(p):
    p.add_argument("--relation", metavar="NAME[,NAME...]",
                   help="the relation blocks the model was fitted with (libFM's block "
                        "structure): DATA's rows take their block rows from NAME.<part>")
    p.add_argument("--relation-part", choices=["test", "train"], default="test",
                   help="which index file of each relation maps DATA's rows (default test)")


def _route_libfm(argv):
    """Send libFM-style command lines to ``fit`` with its flags rewritten; LIBFFM's
    ``ffm-train`` / ``ffm-predict`` command lines (and its flags in ``fit --model ffm``) to
    ``fit`` / ``predict``."""
    from ._libfm import is_libfm_style, translate

    if argv and argv[0] in ("ffm-train", "ffm-predict"):
        from ._libffm import translate_predict, translate_train

        if argv[0] == "ffm-train":
            return ["fit"] + translate_train(argv[1:])
        return ["predict"] + translate_predict(argv[1:])
    if argv and argv[0] == "fit" and _has_model_ffm(argv):
        from ._libffm import translate_flags

        return ["fit"] + translate_flags(argv[1:])
    if argv and argv[0] == "libfm":
        return ["fit"] + translate(argv[1:])
    if is_libfm_style(argv):
        return ["fit"] + translate(argv)
    if argv and argv[0] == "fit" and any(is_libfm_style([a]) for a in argv[1:]):
        return ["fit"] + translate(argv[1:])
    return argv


def _has_model_ffm(argv):
    return any(a == "--model=ffm" or (a == "--model" and i + 1 < len(argv)
                                      and argv[i + 1] == "ffm")
               for i, a in enumerate(argv))


def _run(args):
    if args.command == "fit":
        from ._commands import cmd_fit

        return cmd_fit(args)
    if args.command == "predict":
        from ._commands import cmd_predict

        return cmd_predict(args)
    if args.command == "evaluate":
        from ._commands import cmd_evaluate

        return cmd_evaluate(args)
    if args.command == "demo":
        from ._demo import cmd_demo

        return cmd_demo(args)
    if args.command == "online":
        from ._online import cmd_online

        return cmd_online(args)
    if args.command == "recommend":
        from ._recommend import cmd_recommend

        return cmd_recommend(args)
    if args.command == "convert":
        from ._relation import cmd_convert

        return cmd_convert(args)
    from ._reproduce import cmd_reproduce

    return cmd_reproduce(args)


def _one_line(exc):
    text = " ".join(str(exc).split())
    if isinstance(exc, OSError) and exc.filename and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"
    return text or type(exc).__name__


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"fmlearn: warning: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv=None):
    """Run the ``fmlearn`` command with ``argv`` (default ``sys.argv[1:]``); return the exit
    status (0 ok, 1 internal error, 2 user error, 130 interrupted)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = _DEBUG in argv
    argv = [a for a in argv if a != _DEBUG]
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            argv = _route_libfm(argv)
            try:
                args = build_parser().parse_args(argv)
            except SystemExit as exc:  # --help, --version or a usage error already printed
                return exc.code if isinstance(exc.code, int) else 2
            return _run(args)
        except BrokenPipeError:
            # the reader went away (``fmlearn predict ... | head``): stop quietly, and keep
            # Python from complaining again when it flushes stdout at exit
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except (OSError, ValueError, AttributeError):
                pass
            return 141
        except KeyboardInterrupt:
            if debug:
                raise
            print("fmlearn: interrupted", file=sys.stderr)
            return 130
        except (CLIError, OSError, ValueError, TypeError, ImportError,
                FloatingPointError, MemoryError) as exc:
            # Includes ModelFileError (a ValueError), DivergenceError (a FloatingPointError)
            # and the estimators' input-validation errors.
            if debug:
                raise
            print(f"fmlearn: error: {_one_line(exc)}", file=sys.stderr)
            return 2
        except Exception as exc:
            if debug:
                raise
            print(f"fmlearn: internal error: {type(exc).__name__}: {_one_line(exc)} "
                  f"(rerun with --debug for the traceback)", file=sys.stderr)
            return 1
