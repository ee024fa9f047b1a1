"""Implicit feedback from the command line: ``fmlearn fit EVENTS --task rank`` and the events
files of ``fmlearn recommend --seen``.

An events file holds one positive event per line, ``user item [weight]``, separated by
spaces, tabs or commas (a line without a weight weighs 1); ids are integers from 0 used as
written (user u is feature u, item i is feature n_users + i); blank lines and lines starting
with ``#`` are skipped.
"""

import re
import time

import numpy as np

from ._common import CLIError, _check_readable, print_pairs

_SPLIT = re.compile(r"[\s,]+")


def _bad_line(path, what):
    """(line number, text, problem) of the first malformed line (slow path, on error)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for no, line in enumerate(fh, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            fields = _SPLIT.split(text)
            if len(fields) not in (2, 3):
                return no, text, f"{len(fields)} fields, expected 'user item [weight]'"
            for name, value in zip(("user", "item"), fields[:2], strict=False):
                if not re.fullmatch(r"\d+", value):
                    return no, text, f"{name} id {value!r} is not an integer >= 0"
            if len(fields) == 3:
                try:
                    v = float(fields[2])
                except ValueError:
                    return no, text, f"weight {fields[2]!r} is not a number"
                if not np.isfinite(v) or v < 0:
                    return no, text, f"weight {fields[2]!r} is not a finite number >= 0"
    return None


def read_events(path, what="events"):
    """``(users, items, weights or None)`` of an events file (see the module docstring)."""
    _check_readable(path, what)
    try:
        with open(path, encoding="utf-8") as fh:
            lines = [ln for ln in fh.read().splitlines()
                     if ln.strip() and not ln.lstrip().startswith("#")]
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read the {what} file {path}: {exc}") from None
    if not lines:
        raise CLIError(f"{path}: the {what} file holds no event ('user item [weight]' lines)")
    rows = [_SPLIT.split(ln.strip()) for ln in lines]
    widths = {len(r) for r in rows}
    table = None
    if widths <= {2, 3}:
        if len(widths) == 2:  # a line without a weight weighs 1
            rows = [r if len(r) == 3 else r + ["1"] for r in rows]
        try:
            table = np.array(rows, dtype=np.float64)
        except ValueError:
            table = None
    ok = table is not None and np.all(np.isfinite(table))
    if ok:
        ids = table[:, :2]
        ok = bool(np.all(ids >= 0) and np.all(ids == np.round(ids)) and np.all(ids < 2**31))
        if ok and table.shape[1] == 3:
            ok = bool(np.all(table[:, 2] >= 0))
    if not ok:
        found = _bad_line(path, what)
        if found is None:
            raise CLIError(f"{path}: every line must read 'user item' or 'user item weight'")
        no, text, problem = found
        raise CLIError(f"{path}, line {no}: {problem} (the line reads {text[:80]!r})")
    users = table[:, 0].astype(np.int64)
    items = table[:, 1].astype(np.int64)
    weights = table[:, 2].copy() if table.shape[1] == 3 else None
    return users, items, weights


def cmd_fit_rank(args, train):
    """``fmlearn fit EVENTS --task rank``: an FMRanker on user/item ids."""
    from fmlearn.ranking import FMRanker, Interactions, evaluate_ranking

    for flag, given in (("--groups", args.groups), ("--stream", args.stream),
                        ("--out", args.out), ("--proba", args.proba),
                        ("--no-clip", args.no_clip), ("--log", args.log)):
        if given:
            raise CLIError(f"{flag} does not apply to --task rank")
    users, items, weights = read_events(train, "training events")
    test = read_events(args.test, "test events") if args.test else None
    n_users = int(max(users.max(), test[0].max() if test else 0)) + 1
    n_items = int(max(items.max(), test[1].max() if test else 0)) + 1
    data = Interactions(users, items, n_users=n_users, n_items=n_items, weights=weights)
    params = dict(loss=args.loss, random_state=args.seed, n_jobs=args.n_jobs,
                  verbose=1 if args.verbose else 0)
    for name in ("n_factors", "n_iter", "learning_rate", "init_stdev"):
        if getattr(args, name) is not None:
            params[name] = getattr(args, name)
    if args.reg is not None:
        if any(np.ndim(r) for r in args.reg):
            raise CLIError("--task rank takes --reg R or R0,R1,R2 (no per-group values)")
        params.update(reg_bias=args.reg[0], reg_linear=args.reg[1], reg_pairwise=args.reg[2])
    est = FMRanker(**params)
    t0 = time.perf_counter()
    est.fit(data)
    fit_s = time.perf_counter() - t0
    s = est.settings_
    pairs = [
        ("model", f"FMRanker(loss={s['loss']}, solver={s['solver']}, "
                  f"n_factors={s['n_factors']}, n_iter={est.n_iter_})"),
        ("train", f"{train}: {len(data)} events, {n_users} users, {n_items} items"),
        ("feature blocks", f"users 0:{n_users}, items {n_users}:{n_users + n_items}"),
        ("fit time", f"{fit_s:.3f} s (the first run also compiles the kernels)"),
    ]
    if test is not None:
        held = Interactions(*test[:2], n_users=n_users, n_items=n_items)
        k = min(10, n_items)
        res = evaluate_ranking(est, held, train=data, k=k)
        pairs.append(("test", f"{args.test}: {len(held)} events, {res['n_users']} users "
                              "evaluated (training items excluded)"))
        for name, label in (("precision", f"precision@{k}"), ("recall", f"recall@{k}"),
                            ("ndcg", f"NDCG@{k}"), ("map", f"MAP@{k}"), ("auc", "AUC")):
            pairs.append((f"test {label}", res[name]))
    if args.save:
        est.save(args.save)
        pairs.append(("saved", f"{args.save} (fmlearn recommend {args.save} --user-block "
                               f"0:{n_users} --item-block {n_users}:{n_users + n_items} "
                               f"--seen {train})"))
    print_pairs(pairs)
    return 0


def seen_lists(path, user_names, n_items):
    """``exclude=`` lists of :func:`fmlearn.recommend` from an events file: for each output
    user (``user_names``: its id), the items of its events."""
    users, items, _ = read_events(path, "seen events")
    if items.size and items.max() >= n_items:
        raise CLIError(f"{path}: item {int(items.max())} is outside the item block "
                       f"(0..{n_items - 1})")
    names = np.asarray(user_names)
    pos = {int(u): a for a, u in enumerate(names)}
    out = [[] for _ in range(names.shape[0])]
    for u, i in zip(users.tolist(), items.tolist(), strict=True):
        a = pos.get(u)
        if a is not None:
            out[a].append(i)
    return [np.asarray(sorted(set(x)), dtype=np.int64) for x in out]
