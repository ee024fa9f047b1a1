"""``fmlearn fit --model ffm``: a field-aware FM on libffm files (LIBFFM's ``ffm-train``).

Reads the training (and test) files with one feature-to-field map
(:func:`fmlearn.datasets.load_libffm_files`; with ``--hash-buckets`` the hashing trick), fits
:class:`fmlearn.FFMClassifier` (``--task r``: :class:`fmlearn.FFMRegressor`), prints LIBFFM's
per-iteration lines in LIBFFM mode and a report, and saves / predicts as ``fit`` does.
``--stream`` trains epoch by epoch through :func:`fmlearn.fit_stream`, holding one chunk of
the training file in memory, with the same early stopping (:mod:`fmlearn._early_stopping`).
"""

import copy
import time

import numpy as np

from ._common import CLIError, compile_kernels, print_pairs, write_values

#: LIBFFM's defaults (``ffm-train`` without options).
FFM_DEFAULTS = {"n_factors": 4, "n_iter": 15, "learning_rate": 0.2}
LIBFFM_LAMBDA = 2e-5


def _read(paths, hash_buckets, dtype):
    """``[X_1, y_1, ..., fields]`` of libffm files with one map (or hashed)."""
    from fmlearn.datasets import hashed_fields, load_libffm_files

    try:
        out = load_libffm_files(paths, hash_buckets=hash_buckets, dtype=dtype)
    except ValueError as exc:  # the message names the file and the line
        raise CLIError(str(exc)) from None
    except OSError as exc:
        raise CLIError(f"cannot read: {exc.strerror or exc}") from None
    if hash_buckets is not None:
        n_fields = out[0].shape[1] // hash_buckets
        out[-1] = hashed_fields(n_fields, hash_buckets)
    for path, X in zip(paths, out[:-1:2], strict=True):
        if X.shape[0] == 0:
            raise CLIError(f"{path}: no data rows")
    return out


def build_ffm(args, fields):
    """The FFMClassifier / FFMRegressor of the ``fit --model ffm`` arguments."""
    from fmlearn import FFMClassifier, FFMRegressor

    reg = args.reg if args.reg is not None else (0.0, LIBFFM_LAMBDA, LIBFFM_LAMBDA)
    if any(isinstance(r, list) for r in reg):
        raise CLIError("--reg with one value per group is for --model fm --solver als")
    if args.auto_stop and not args.test:
        raise CLIError("--auto-stop stops on the validation file: give it with --test (-p)")
    if args.auto_stop and args.early_stopping:
        raise CLIError("give --auto-stop (stop on --test, LIBFFM's rule) or --early-stopping "
                       "(on 10% of the training rows), not both")
    params = dict(n_factors=args.n_factors, fields=fields, n_iter=args.n_iter,
                  learning_rate=args.learning_rate, reg_bias=reg[0], reg_linear=reg[1],
                  reg_pairwise=reg[2], normalize_rows=not args.no_norm,
                  init_stdev="auto" if args.init_stdev is None else args.init_stdev,
                  random_state=args.seed, n_jobs=args.n_jobs,
                  verbose=1 if args.verbose and not args.libffm_output else 0)
    if args.auto_stop:  # LIBFFM's rule: the first epoch that does not improve stops
        params.update(early_stopping=True, n_iter_no_change=1, tol=0.0)
    else:
        params.update(early_stopping=bool(args.early_stopping))
    return (FFMRegressor if args.task == "r" else FFMClassifier)(**params)


def _metrics(est, X, y, prefix):
    from sklearn import metrics

    if not hasattr(est, "classes_"):
        pred = est.predict(X)
        return [(f"{prefix} rmse", float(metrics.root_mean_squared_error(y, pred)))]
    proba = est.predict_proba(X)
    pairs = [(f"{prefix} log-loss", float(metrics.log_loss(y, proba, labels=est.classes_)))]
    positive = y == est.classes_[1]
    if 0 < positive.sum() < positive.shape[0]:
        pairs.append((f"{prefix} auc", float(metrics.roc_auc_score(positive, proba[:, 1]))))
    return pairs


def libffm_printer(has_test, quiet):
    """``callback(i, history)`` printing LIBFFM's line ``iter tr_logloss va_logloss tr_time``
    as epoch ``i`` ends (after its header), flushed."""
    if quiet:
        return None
    head = f"{'iter':>4}{'tr_logloss':>13}" + (f"{'va_logloss':>13}" if has_test else "")
    print(head + f"{'tr_time':>13}", flush=True)
    total = [0.0]

    def callback(i, h):
        total[0] += h["iter_time"][i]
        train = h["train"][i]
        line = f"{i + 1:4d}" + (f"{train:13.5f}" if train is not None else f"{'-':>13}")
        if has_test and i < len(h.get("val", [])):
            line += f"{h['val'][i]:13.5f}"
        print(line + f"{total[0]:13.1f}", flush=True)

    return callback


def _check_labels(y, path, task):
    if task == "c":
        labels = np.unique(y)
        if labels.shape[0] != 2:
            raise CLIError(f"{path}: a classifier needs two labels, the file has "
                           f"{labels.shape[0]} ({labels[:5].tolist()})")


def cmd_fit_ffm(args, train, save):
    if args.groups:
        raise CLIError("--groups is for --model fm (the FFM's fields come from the libffm file)")
    if args.solver not in (None, "sgd"):
        raise CLIError("--model ffm learns by AdaGrad (LIBFFM's learner); --solver is for "
                       "--model fm")
    dtype = np.float32 if args.float32 else np.float64
    if args.stream:
        return _fit_ffm_stream(args, train, save, dtype)
    paths = [train] + ([args.test] if args.test else [])
    data = _read(paths, args.hash_buckets, dtype)
    X, y, fields = data[0], data[1], data[-1]
    X_test, y_test = (data[2], data[3]) if args.test else (None, None)
    _check_labels(y, train, args.task)
    est = build_ffm(args, fields)
    eval_set = (X_test, y_test) if args.test and not args.early_stopping else None
    compile_s = compile_kernels(est, X, y, with_eval_set=eval_set is not None)
    callback = libffm_printer(eval_set is not None, args.quiet) if args.libffm_output else None
    t0 = time.perf_counter()
    est.fit(X, y, eval_set=eval_set, callback=callback)
    fit_s = time.perf_counter() - t0
    if args.libffm_output and est.best_iteration_ is not None and est.n_iter_ > \
            est.best_iteration_ and not args.quiet:
        print(f"Auto-stop. Use model at {est.best_iteration_}th iteration.", flush=True)
    _report(args, est, train, X, y, X_test, y_test, compile_s, fit_s,
            (est.history_, est.n_iter_, est.best_iteration_))
    _save_and_predict(args, est, X_test, save)
    return 0


def _report(args, est, train, X, y, X_test, y_test, compile_s, fit_s, run, streamed=False):
    """Print the fit report; ``run`` = (history, epochs run, epoch kept or None)."""
    h, n_epochs, best = run
    if args.verbose and not args.libffm_output:
        from fmlearn.reproduce import format_table

        rows = [[i + 1, h["train"][i] if h["train"][i] is not None else float("nan")]
                + ([h["val"][i]] if "val" in h else []) for i in range(len(h["train"]))]
        print(format_table(rows, ["epoch", "train loss"] + (["val"] if "val" in h else []),
                           floatfmt=".6g"))
    epochs = f"{n_epochs}" + (f" (model of epoch {best}, early stopping)"
                              if best is not None else "")
    pairs = [
        ("model", f"{type(est).__name__}(n_factors={est.n_factors}, n_fields={est.n_fields_}, "
                  f"learning_rate={est.learning_rate}, normalize_rows={est.normalize_rows})"),
        ("train", f"{train}: " + (f"{X.shape[0]} rows, " if X is not None else "")
                  + f"{est.n_features_in_} features, {est.n_fields_} fields"
                  + (", streamed in chunks" if streamed else "")),
        ("compiled kernels in", f"{compile_s:.3f} s (not in the fit time)"),
        ("fit time", f"{fit_s:.3f} s"),
        ("epochs", epochs),
    ]
    if X is not None:
        pairs += _metrics(est, X, y, "train")
    if X_test is not None:
        pairs.append(("test", f"{args.test}: {X_test.shape[0]} rows"))
        pairs += _metrics(est, X_test, y_test, "test")
    print_pairs(pairs)


def _save_and_predict(args, est, X_test, save):
    if save:
        est.save(save)
        print(f"model saved to {save}")
    if args.out:
        if args.proba or args.libffm_output and hasattr(est, "classes_"):
            write_values(args.out, est.predict_proba(X_test)[:, 1])
        else:
            write_values(args.out, est.predict(X_test), labels=hasattr(est, "classes_"))
        if args.out != "-":
            print(f"test predictions written to {args.out}")


def _fit_ffm_stream(args, train, save, dtype):
    """``fit --model ffm --stream``: epochs of :func:`fmlearn.fit_stream` over the training
    file (one chunk in memory), the test file scored after each; ``--auto-stop`` stops and
    keeps the best epoch through :class:`fmlearn._early_stopping.EarlyStopping`."""
    from fmlearn._early_stopping import EarlyStopping, resolve_stopping
    from fmlearn.datasets import (
        hashed_fields,
        iter_libffm,
        load_libffm,
        scan_libffm,
    )
    from fmlearn.stream import fit_stream

    from ._common import _check_readable

    _check_readable(train, "training")
    if args.early_stopping:
        raise CLIError("--stream stops early with --auto-stop on --test (a carved-out "
                       "validation set needs the rows in memory)")
    chunk = 16 * 2**20
    try:
        if args.hash_buckets is not None:
            from fmlearn.datasets._libffm import _hash_fields

            n_fields = _hash_fields(train, None)
            fields = hashed_fields(n_fields, args.hash_buckets)
            labels = None
        else:  # one map for the training and the test file, as fit without --stream
            info = scan_libffm([train] + ([args.test] if args.test else []),
                               chunk_size_bytes=chunk)
            fields, labels = info.fields, scan_libffm(train, chunk_size_bytes=chunk).labels
        X_test = y_test = None
        if args.test:
            if args.hash_buckets is not None:
                X_test, y_test, _ = load_libffm(args.test, hash_buckets=args.hash_buckets,
                                                n_fields=n_fields, dtype=dtype)
            else:
                X_test, y_test, _ = load_libffm(args.test, fields=fields, dtype=dtype)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    if labels is not None:
        _check_labels(labels, train, args.task)
    est = build_ffm(args, fields).set_params(early_stopping=False)
    if args.hash_buckets is not None:
        def source():
            return iter_libffm(train, chunk, hash_buckets=args.hash_buckets,
                               n_fields=n_fields, dtype=dtype)
    else:
        source = train
    rule = resolve_stopping(early_stopping=bool(args.auto_stop), validation_fraction=0.1,
                            n_iter_no_change=1, tol=0.0,
                            score="log_loss" if args.task == "c" else "squared_error",
                            n_samples=0, has_eval_set=args.test is not None)
    monitor = EarlyStopping(rule, callback=libffm_printer(args.test is not None, args.quiet)
                            if args.libffm_output else None,
                            copy_state=lambda: copy.deepcopy(est))
    classes = None if args.task == "r" or labels is None else labels
    try:
        if args.hash_buckets is not None:
            X0, y0 = next(iter(source()))
        else:
            X0, y0 = next(iter(iter_libffm(train, 1 << 16, fields=fields, dtype=dtype)))
    except (ValueError, StopIteration) as exc:
        raise CLIError(str(exc) or f"{train}: no data rows") from None
    compile_s = compile_kernels(est, X0[:256], y0[:256], with_eval_set=args.test is not None)
    fit_s = 0.0
    for epoch in range(args.n_iter):
        t0 = time.perf_counter()
        try:
            fit_stream(est, source, batch_size=args.batch_size, classes=classes, dtype=dtype)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        seconds = time.perf_counter() - t0
        fit_s += seconds
        val = None
        if X_test is not None:
            val = dict(_metrics(est, X_test, y_test, "v"))["v log-loss" if args.task == "c"
                                                            else "v rmse"]
            if args.task == "r":
                val = val ** 2
        if monitor.end_iteration(epoch, seconds=seconds, val=val):
            break
    if monitor.keeps_best():
        est = monitor.best_state
        if args.libffm_output and not args.quiet:
            print(f"Auto-stop. Use model at {monitor.best_iteration + 1}th iteration.",
                  flush=True)
    best = monitor.best_iteration + 1 if monitor.keeps_best() else None
    _report(args, est, train, None, None, X_test, y_test, compile_s, fit_s,
            (monitor.history, epoch + 1, best), streamed=True)
    _save_and_predict(args, est, X_test, save)
    return 0
