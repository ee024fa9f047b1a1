"""``fmlearn fit``, ``predict`` and ``evaluate``: svmlight/libFM files in, models and
predictions out. Each command takes the parsed arguments and returns an exit status."""

import argparse
import json
import sys
import time

import numpy as np
import scipy.sparse as sp

from ._common import (
    CLIError,
    compile_kernels,
    format_label,
    note,
    print_pairs,
    read_svmlight,
    widen,
    write_values,
)


# -- fit ------------------------------------------------------------------------------------
def parse_reg(text):
    """``R`` (all three), ``R0,R1,R2``, or with groups ``R0,R1_1..R1_G,R2_1..R2_G`` (libFM's
    1 + 2G values) -> (reg_bias, reg_linear, reg_pairwise); the per-group forms are lists."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected R, R0,R1,R2 or R0 and two values per group (numbers), got {text!r}"
        ) from None
    if any(not np.isfinite(v) or v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"regularization must be finite and >= 0, got {text!r}")
    if len(values) == 1:
        return tuple(values * 3)
    if len(values) == 3:
        return tuple(values)
    if len(values) % 2 == 1:
        g = (len(values) - 1) // 2
        return values[0], values[1:1 + g], values[1 + g:]
    raise argparse.ArgumentTypeError(
        f"expected 1, 3 or 1 + 2G comma-separated values (G groups), got {len(values)}")


def read_groups(path):
    """libFM's ``-meta`` file: one group id (an integer >= 0) per feature, one per line."""
    ids = []
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                text = line.strip()
                if not text:
                    continue
                try:
                    value = int(text)
                except ValueError:
                    raise CLIError(f"{path}, line {lineno}: expected one integer group id per "
                                   f"line, got {text!r}") from None
                if value < 0:
                    raise CLIError(f"{path}, line {lineno}: group ids must be >= 0, got {value}")
                ids.append(value)
    except OSError as exc:
        raise CLIError(f"cannot read the groups file {path}: {exc.strerror or exc}") from None
    if not ids:
        raise CLIError(f"{path}: the groups file is empty")
    return np.asarray(ids, dtype=np.int64)


def build_estimator(args):
    """The FMRegressor / FMClassifier described by the ``fit`` arguments."""
    from fmlearn import FMClassifier, FMRegressor

    reg = args.reg if args.reg is not None else (0.0, 0.0, 0.0)
    if args.solver == "mcmc" and args.reg is not None and np.any(np.hstack(reg[1:])):
        note("with --solver mcmc the linear and pairwise regularization are learned from the "
             "data (as in libFM); --reg only sets the prior precision of the bias")
    params = dict(n_factors=args.n_factors, solver=args.solver, n_iter=args.n_iter,
                  init_stdev=args.init_stdev, reg_bias=reg[0], reg_linear=reg[1],
                  reg_pairwise=reg[2], learning_rate=args.learning_rate,
                  n_burn_in=args.n_burn_in, random_state=args.seed, n_jobs=args.n_jobs,
                  verbose=1 if args.verbose else 0)
    if args.solver == "mcmc":  # MCMC learns them; a per-group list would be refused
        params.update(reg_linear=0.0, reg_pairwise=0.0)
    if args.task == "r":
        return FMRegressor(clip_predictions=not args.no_clip, **params)
    if args.no_clip:
        raise CLIError("--no-clip applies to regression (--task r) only")
    return FMClassifier(**params)


def _metric_name(est):
    return "error rate" if _is_classifier(est) else "rmse"


def _is_classifier(est):
    from sklearn.base import is_classifier

    return is_classifier(est)


def _final_metric(est, X, y):
    from sklearn.metrics import root_mean_squared_error, zero_one_loss

    pred = est.predict(X)
    if _is_classifier(est):
        return float(zero_one_loss(y, pred))
    return float(root_mean_squared_error(y, pred))


def _history_rows(est, h=None):
    """Per-iteration rows (iter, train, test, test average over sweeps) from ``history_``."""
    h = getattr(est, "history_", {}) if h is None else h
    cols = [h.get("train", []), h.get("val", []), h.get("val_avg", [])]
    n = max(len(c) for c in cols)
    rows = []
    for i in range(n):
        rows.append([i] + [c[i] if i < len(c) else float("nan") for c in cols])
    return rows


def libfm_printer(est):
    """``callback(i, history)`` printing libFM's line for iteration ``i`` as it ends:
    ``#Iter= i  Train=..  Test=..`` (MCMC: running averages; classification: accuracy, as
    libFM prints), flushed, so that the lines come live as libFM's do."""
    mcmc = est.solver == "mcmc"
    clf = _is_classifier(est)

    def callback(i, h):
        parts = [f"#Iter={i:3d}"]
        for name, key in (("Train", "train"), ("Test", "val")):
            col = h.get(f"{key}_avg" if mcmc else key, [])
            if i < len(col):
                v = 1.0 - col[i] if clf else col[i]
                parts.append(f"{name}={v:.6g}")
        print("\t".join(parts), flush=True)

    return callback


def _write_log(path, est, h=None):
    rows = _history_rows(est, h)
    lines = ["iter\ttrain\ttest\ttest_avg"]
    lines += ["\t".join([str(r[0])] + [repr(float(v)) for v in r[1:]]) for r in rows]
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc.strerror or exc}") from None


#: ``fit``'s defaults per model family (the options default to None): the estimators' own,
#: so that a fit gives the same model from Python and from the command line (libFM-flag mode
#: keeps libFM's ``-init_stdev 0.1``: :func:`fmlearn.cli._libfm.translate`).
FM_DEFAULTS = {"n_factors": 8, "n_iter": 100, "learning_rate": 0.01, "init_stdev": "auto",
               "solver": "mcmc", "task": "r"}
_FFM_ONLY = ("auto_stop", "early_stopping", "no_norm", "hash_buckets", "float32", "quiet")


def _family_and_save(args):
    """``(family, save path)`` from ``--model`` (a family, or for compatibility the output
    path) and ``--save``."""
    family, save = "fm", args.save
    if args.model in ("fm", "ffm"):
        family = args.model
    elif args.model:
        if save and save != args.model:
            raise CLIError(f"--model {args.model} is an output path (fmlearn's older spelling "
                           "of --save) and --save is given too; use --save only")
        save = args.model
    if family == "fm":
        used = [f"--{n.replace('_', '-')}" for n in _FFM_ONLY if getattr(args, n)]
        if used:
            raise CLIError(f"{', '.join(used)}: for --model ffm (libffm files)")
    return family, save


def cmd_fit(args):
    family, save = _family_and_save(args)
    if getattr(args, "relation", None) and (family == "ffm" or args.task == "rank"):
        raise CLIError("--relation (libFM's block structure) is for the FM's --solver mcmc "
                       "or als, not " + ("--model ffm" if family == "ffm" else "--task rank"))
    if args.task == "rank":
        if family == "ffm":
            raise CLIError("--task rank learns an FMRanker from events files; --model ffm "
                           "learns from libffm files")
        if args.train and args.train_opt and args.train != args.train_opt:
            raise CLIError("give the training file once (TRAIN or --train/-train)")
        train = args.train or args.train_opt
        if not train:
            raise CLIError("fit needs a training file: fmlearn fit EVENTS --task rank ...")
        from ._rank import cmd_fit_rank

        args.save = save
        return cmd_fit_rank(args, train)  # FMRanker's own defaults for the unset options
    if family == "ffm":
        from ._ffm import FFM_DEFAULTS, cmd_fit_ffm

        for name, value in {**FFM_DEFAULTS, "task": "c"}.items():
            if getattr(args, name) is None:
                setattr(args, name, value)
    else:
        for name, value in FM_DEFAULTS.items():
            if getattr(args, name) is None:
                setattr(args, name, value)
    if args.train and args.train_opt and args.train != args.train_opt:
        raise CLIError("give the training file once (TRAIN or --train/-train)")
    train = args.train or args.train_opt
    if not train:
        raise CLIError("fit needs a training file: fmlearn fit TRAIN [--test TEST] ...")
    if args.out and not args.test:
        raise CLIError("--out writes the predictions for --test; give a test file")
    if args.proba and args.task != "c":
        raise CLIError("--proba needs a classifier (--task c)")
    if args.batch_size is not None and not args.stream:
        raise CLIError("--batch-size applies to --stream only")
    if args.groups and args.solver == "sgd":
        raise CLIError("--groups sets the priors of MCMC and the penalties of ALS; "
                       "--solver sgd has none")
    if family == "ffm":
        return cmd_fit_ffm(args, train, save)
    args.save = save
    if args.stream:
        if args.relation:
            raise CLIError("--stream reads TRAIN in chunks; it does not take --relation")
        return _fit_stream(args, train)
    from ._relation import parse_names, read_data, relational_inputs

    X, y = read_data(train, "training", max_features=args.max_features)
    X_test = y_test = None
    groups = read_groups(args.groups) if args.groups else None
    d = X.shape[1]
    if args.test:
        X_test, y_test = read_data(args.test, "test", max_features=args.max_features)
        d = max(X.shape[1], X_test.shape[1])  # libFM sizes the model for both files
    if groups is not None:
        if groups.shape[0] < d:
            raise CLIError(f"{args.groups}: {groups.shape[0]} group ids, but the data have "
                           f"{d} features (one id per feature, as libFM's -meta)")
        d = groups.shape[0]
    X = widen(X, d, train)
    if args.test:
        X_test = widen(X_test, d, args.test)
    if args.relation:  # libFM's -relation: blocks of features shared by many rows
        if args.solver == "sgd":
            raise CLIError("--relation blocks are swept by --solver mcmc or als (as libFM's "
                           "-relation); SGD would expand every row")
        X, X_test, groups = relational_inputs(parse_names(args.relation), X, X_test, groups,
                                              train, args.test)
    est = build_estimator(args)
    if groups is not None:
        est.set_params(groups=groups)
    eval_set = (X_test, y_test) if args.test else None
    compile_s = compile_kernels(est, X, y, with_eval_set=eval_set is not None)
    t0 = time.perf_counter()
    est.fit(X, y, eval_set=eval_set, callback=libfm_printer(est) if args.libfm_output else None)
    fit_s = time.perf_counter() - t0

    if args.verbose and not args.libfm_output:
        from fmlearn.reproduce import format_table

        heads = ["iter", "train", "test"] + (["test avg"] if est.solver == "mcmc" else [])
        rows = [r[:len(heads)] for r in _history_rows(est)]
        print(format_table(rows, heads, floatfmt=".6g"))
    metric = _metric_name(est)
    pairs = [
        ("model", f"{type(est).__name__}(solver={est.solver}, n_factors={est.n_factors}, "
                  f"n_iter={est.n_iter})"),
        ("train", f"{train}: {X.shape[0]} rows, {X.shape[1]} features"),
        ("compiled kernels in", f"{compile_s:.3f} s (not in the fit time)"),
        ("fit time", f"{fit_s:.3f} s"),
        (f"train {metric}", _final_metric(est, X, y)),
    ]
    if args.test:
        pairs.append(("test", f"{args.test}: {X_test.shape[0]} rows"))
        label = f"test {metric}"
        if est.solver == "mcmc":
            label += f" (mean of {est.samples_w0_.shape[0]} kept samples)"
        pairs.append((label, _final_metric(est, X_test, y_test)))
        if est.solver == "mcmc" and est.history_.get("val_avg"):
            pairs.append((f"test {metric} (average of all {len(est.history_['val_avg'])} "
                          f"sweeps, libFM's figure)", est.history_["val_avg"][-1]))
    print_pairs(pairs)
    if args.log:
        _write_log(args.log, est)
    _save_and_predict(args, est, X_test)
    return 0


def _save_and_predict(args, est, X_test):
    if args.save:
        est.save(args.save)
        print(f"model saved to {args.save}")
    if args.out:
        if args.proba:
            write_values(args.out, est.predict_proba(X_test)[:, 1])
        else:
            write_values(args.out, est.predict(X_test), labels=_is_classifier(est))
        if args.out != "-":
            print(f"test predictions written to {args.out}")


def _stream_pass(path, d, chunk, max_features=None):
    """One read of a training file in chunks: ``(Xc, yc)`` CSR float64, width ``d``."""
    from fmlearn.datasets import iter_svmlight

    try:
        yield from iter_svmlight(path, chunk_size_bytes=chunk, n_features=d, zero_based=True,
                                 max_features=max_features)
    except ValueError as exc:  # the message names the file and the offending line
        raise CLIError(str(exc)) from None


def _stream_metric(est, chunks):
    """The training metric (RMSE or error rate) of ``est`` over a pass of ``chunks``."""
    n = errors = 0
    sq = 0.0
    for Xc, yc in chunks:
        pred = est.predict(Xc)
        n += yc.shape[0]
        if _is_classifier(est):
            errors += int(np.sum(pred != yc))
        else:
            sq += float(np.sum((pred - yc) ** 2))
    return errors / n if _is_classifier(est) else float(np.sqrt(sq / n))


def _fit_stream(args, train):
    """``fit --stream``: SGD epochs over the training file read in chunks (out of core).

    Before training, one pass finds the file's width (and, for a classifier, its labels); after
    it, one more computes the training metric chunk by chunk. With ``--log``, libFM's output or
    ``--verbose`` that pass follows every epoch instead (the per-epoch train metric, printed
    live in libFM mode); the epochs are the same (``fit_stream`` continues from the estimator's
    state). The test file is read whole.
    """
    from fmlearn.stream import fit_stream

    from ._common import _check_readable

    if args.solver != "sgd":
        raise CLIError("--stream trains with partial_fit, which needs --solver sgd")
    _check_readable(train, "training")
    chunk = 16 * 2**20
    labels = set()
    d = first = None
    for Xc, yc in _stream_pass(train, None, chunk, args.max_features):
        d = Xc.shape[1]
        if first is None:
            first = (Xc[:64], yc[:64])
        if args.task == "r":
            break
        labels.update(np.unique(yc).tolist())
    if d is None:
        raise CLIError(f"{train}: no data rows")
    X_test = y_test = None
    if args.test:
        X_test, y_test = read_svmlight(args.test, "test", max_features=args.max_features)
        d = max(d, X_test.shape[1])  # libFM sizes the model for both files
        X_test = widen(X_test, d, args.test)
    est = build_estimator(args)
    classes = sorted(labels) if args.task == "c" else None
    compile_s = compile_kernels(est, widen(first[0], d, train), first[1],
                                with_eval_set=args.test is not None)
    per_epoch = bool(args.log or args.libfm_output or args.verbose)
    printer = libfm_printer(est) if args.libfm_output else None
    h = {"train": [], "val": []}
    fit_s = 0.0
    for epoch in range(args.n_iter if per_epoch else 1):
        t0 = time.perf_counter()
        try:
            fit_stream(est, lambda: _stream_pass(train, d, chunk),
                       n_epochs=1 if per_epoch else args.n_iter, batch_size=args.batch_size,
                       eval_set=(X_test, y_test) if args.test else None, classes=classes,
                       verbose=1 if args.verbose else 0)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        fit_s += time.perf_counter() - t0
        h["val"] += est.stream_history_.get("val", [])
        if per_epoch:
            h["train"].append(_stream_metric(est, _stream_pass(train, d, chunk)))
            if printer is not None:
                printer(epoch, h)
    if args.verbose and not args.libfm_output:
        from fmlearn.reproduce import format_table

        print(format_table(_history_rows(est, h), ["iter", "train", "test", "test avg"],
                           floatfmt=".6g"))
    train_metric = (h["train"][-1] if per_epoch
                    else _stream_metric(est, _stream_pass(train, d, chunk)))
    metric = _metric_name(est)
    rows = est.stream_history_["rows"][0]
    pairs = [
        ("model", f"{type(est).__name__}(solver=sgd, n_factors={est.n_factors}, "
                  f"epochs={args.n_iter}, streamed)"),
        ("train", f"{train}: {rows} rows, {d} features, read in chunks of {chunk >> 20} MiB"),
        ("compiled kernels in", f"{compile_s:.3f} s (not in the fit time)"),
        ("fit time", f"{fit_s:.3f} s"),
        (f"train {metric}", train_metric),
    ]
    if args.test:
        pairs.append(("test", f"{args.test}: {X_test.shape[0]} rows"))
        pairs.append((f"test {metric}", _final_metric(est, X_test, y_test)))
    print_pairs(pairs)
    if args.log:
        _write_log(args.log, est, h)
    _save_and_predict(args, est, X_test)
    return 0


# -- predict / evaluate ---------------------------------------------------------------------
def load_model(path):
    """Load an fmlearn model file; a missing file is a user error (exit status 2)."""
    import fmlearn

    try:
        return fmlearn.load(path)
    except FileNotFoundError:
        raise CLIError(f"model file not found: {path}") from None
    except IsADirectoryError:
        raise CLIError(f"model path is a directory, not a file: {path}") from None


def _is_field_aware(model):
    return "fields" in model.get_params(deep=False)


def read_data(model, path, args):
    """``(X, y)`` of a data file for ``model``: a libffm file read with the model's field map
    for a field-aware model (hashed with ``--hash-buckets``), else an svmlight/libFM file."""
    if not _is_field_aware(model):  # libFM's binary data too (fmlearn.cli._relation)
        from ._relation import read_data as read_file

        return read_file(path, "data", n_features=model.n_features_in_,
                         max_features=args.max_features)
    from fmlearn.datasets import load_libffm

    from ._common import _check_readable

    _check_readable(path, "data")
    buckets = getattr(args, "hash_buckets", None)
    dtype = np.dtype(getattr(model, "dtype_", "float64"))
    try:
        if buckets is not None:
            if model.n_features_in_ % buckets:
                raise CLIError(f"--hash-buckets {buckets} does not divide the model's "
                               f"{model.n_features_in_} features")
            X, y, _ = load_libffm(path, hash_buckets=buckets,
                                  n_fields=model.n_features_in_ // buckets, dtype=dtype)
        else:
            X, y, _ = load_libffm(path, fields=model.known_fields_, dtype=dtype)
    except ValueError as exc:  # the message names the file and the line
        raise CLIError(str(exc)) from None
    if X.shape[0] == 0:
        raise CLIError(f"{path}: no data rows")
    return X, y


def _model_rows(args, model):
    """The rows of ``args.data`` for ``model``: its width, and with ``--relation`` the
    relations' blocks (indices of ``NAME.<--relation-part>``)."""
    from ._relation import parse_names, predict_inputs
    from ._relation import read_data as read_file

    if not getattr(args, "relation", None):
        X, y = read_data(model, args.data, args)
        layout = getattr(model, "relation_features_", None)
        if layout and len(layout) > 1 and X.shape[0] and not sp.csr_matrix(X)[:, layout[0]:].nnz:
            # rows without any block feature: the blocks were forgotten, not expanded
            raise CLIError(f"{args.model} was fitted with relation blocks (feature counts "
                           f"{layout}) but {args.data} holds only row-level features: give "
                           "--relation NAME,... (or the expanded rows)")
        return X, y
    if _is_field_aware(model):
        raise CLIError(f"--relation: {args.model} holds a {type(model).__name__}; relation "
                       "blocks are for FMRegressor / FMClassifier models")
    X, y = read_file(args.data, "data", max_features=args.max_features)
    layout = getattr(model, "relation_features_", None)
    Xr = predict_inputs(parse_names(args.relation), X, args.data, args.relation_part)
    d_main = layout[0] if layout else model.n_features_in_ - sum(Xr.layout[1:])
    Xr.X = widen(X, d_main, args.data) if d_main >= 0 else X
    return Xr, y


def cmd_predict(args):
    model = load_model(args.model)
    X, y = _model_rows(args, model)
    if args.log_loss:
        if not _is_classifier(model):
            raise CLIError("--log-loss needs a classifier")
        from sklearn.metrics import log_loss

        _check_labels(model, y, args.data)
        value = log_loss(y, model.predict_proba(X), labels=model.classes_)
        print(f"logloss = {value:.5f}", file=sys.stdout if args.out not in (None, "-")
              else sys.stderr)
    if args.proba:
        if not _is_classifier(model):
            raise CLIError(f"--proba needs a classifier; {args.model} holds a "
                           f"{type(model).__name__}")
        write_values(args.out, model.predict_proba(X)[:, 1])
    else:
        write_values(args.out, model.predict(X), labels=_is_classifier(model))
    return 0


def _check_labels(model, y, path):
    classes = model.classes_
    unknown = np.setdiff1d(np.unique(y), classes) if classes.dtype.kind in "biuf" else np.unique(y)
    if unknown.shape[0]:
        shown = ", ".join(format_label(v) for v in unknown[:5])
        raise CLIError(f"{path}: labels {shown} are not among the model's classes "
                       f"({', '.join(format_label(c) for c in classes)})")


def evaluate_metrics(model, X, y, path="data"):
    """Metrics of ``model`` on (X, y) as an ordered list of (name, value) pairs."""
    from sklearn import metrics

    pairs = [("rows", int(X.shape[0]))]
    if _is_classifier(model):
        _check_labels(model, y, path)
        proba = model.predict_proba(X)
        pred = model.classes_[np.argmax(proba, axis=1)]
        pairs.append(("error_rate", float(metrics.zero_one_loss(y, pred))))
        positive = y == model.classes_[1]
        if 0 < positive.sum() < positive.shape[0]:
            auc = float(metrics.roc_auc_score(positive, proba[:, 1]))
        else:
            auc = float("nan")  # undefined with one class present
            note(f"{path}: only one class present, AUC is undefined")
        pairs.append(("auc", auc))
        pairs.append(("log_loss", float(metrics.log_loss(y, proba, labels=model.classes_))))
    else:
        pred = model.predict(X)
        pairs.append(("rmse", float(metrics.root_mean_squared_error(y, pred))))
        pairs.append(("mae", float(metrics.mean_absolute_error(y, pred))))
    return pairs


def cmd_evaluate(args):
    model = load_model(args.model)
    X, y = _model_rows(args, model)
    pairs = evaluate_metrics(model, X, y, args.data)
    if args.json:
        json.dump({k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in pairs},
                  sys.stdout)
        sys.stdout.write("\n")
    else:
        print_pairs(pairs)
    return 0
