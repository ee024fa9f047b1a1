"""``fmlearn recommend``: the top-k items per user of a saved model (:func:`fmlearn.recommend`).

Users and items are either svmlight/libFM files of feature rows (one row per user, one per
item; the labels are ignored) or one-hot blocks of the model's features given by index ranges.
The output is a tab-separated table ``user  rank  item  score``, one line per recommendation.
"""

import argparse
import sys

import numpy as np

from ._common import CLIError, add_command, positive_float, positive_int, read_svmlight


def _block(text):
    try:
        start, stop = (int(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected START:STOP (feature indices), got {text!r}") from None
    if not 0 <= start < stop:
        raise argparse.ArgumentTypeError(f"expected 0 <= START < STOP, got {text!r}")
    return start, stop


def _ids(text):
    try:
        ids = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integer ids, got {text!r}") from None
    if not ids:
        raise argparse.ArgumentTypeError("expected at least one id")
    return np.asarray(ids, dtype=np.int64)


def add_parser(sub):
    """Register ``fmlearn recommend`` on the ``fmlearn`` subparsers."""
    p = add_command(
        sub, "recommend", "top-k items per user from a saved model",
        "Score every user against every item with the model's decomposition\n"
        "(exact; one matrix product per batch of users) and print the k best\n"
        "items per user as a table: user, rank, item, score (tab-separated).",
        "  fmlearn recommend model.fmz --user-block 0:943 --item-block 943:2625 \\\n"
        "      --user-ids 0,1,2 -k 10 --exclude seen.txt\n"
        "  fmlearn recommend model.fmz --users users.libfm --items items.libfm -k 5\n"
        "  fmlearn recommend rank.fmz --user-block 0:943 --item-block 943:2625 \\\n"
        "      --seen plays.txt -k 10")
    p.add_argument("model", metavar="MODEL", help="model file written by fmlearn (.fmz)")
    users = p.add_mutually_exclusive_group(required=True)
    users.add_argument("--users", metavar="FILE",
                       help="svmlight/libFM file, one feature row per user")
    users.add_argument("--user-block", type=_block, metavar="START:STOP",
                       help="one-hot user block: user u is feature START + u")
    p.add_argument("--user-ids", type=_ids, metavar="IDS",
                   help="with --user-block: comma-separated user ids (default: all)")
    items = p.add_mutually_exclusive_group(required=True)
    items.add_argument("--items", metavar="FILE",
                       help="svmlight/libFM file, one feature row per item")
    items.add_argument("--item-block", type=_block, metavar="START:STOP",
                       help="one-hot item block: item i is feature START + i")
    p.add_argument("-k", type=positive_int, default=10, metavar="K",
                   help="items per user (default 10; at most the number of items)")
    p.add_argument("--exclude", metavar="FILE",
                   help="one line per user (in output order): the item indices never to "
                        "recommend to that user, separated by spaces or commas")
    p.add_argument("--seen", metavar="EVENTS",
                   help="an events file ('user item [weight]' lines, as fmlearn fit --task "
                        "rank reads): each user's items are never recommended to it (user: "
                        "its id in --user-block, or its row in --users)")
    p.add_argument("--memory-budget-mb", type=positive_float, default=256.0, metavar="MB",
                   help="memory of one batch of scores (default 256)")
    p.add_argument("--out", metavar="FILE", help="output file (default: stdout)")


def read_exclude(path, n_users):
    """One line per user: item indices separated by spaces or commas (blank: none)."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise CLIError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(lines) != n_users:
        raise CLIError(f"{path}: {len(lines)} lines, expected one per user ({n_users})")
    out = []
    for number, line in enumerate(lines, 1):
        try:
            out.append(np.asarray([int(v) for v in line.replace(",", " ").split()],
                                  dtype=np.int64))
        except ValueError:
            raise CLIError(f"{path}, line {number}: expected integer item indices, got "
                           f"{line.strip()[:60]!r}") from None
    return out


def cmd_recommend(args):
    from fmlearn import recommend

    from ._commands import load_model

    model = load_model(args.model)
    d = int(model.n_features_in_)
    if args.user_ids is not None and args.user_block is None:
        raise CLIError("--user-ids needs --user-block")
    if args.users:
        users, _ = read_svmlight(args.users, "users", n_features=d)
        user_names = np.arange(users.shape[0])
    else:
        users = args.user_ids
        start, stop = args.user_block
        user_names = np.arange(stop - start) if users is None else users
    items = read_svmlight(args.items, "items", n_features=d)[0] if args.items else None
    if args.exclude and args.seen:
        raise CLIError("give --exclude or --seen, not both")
    exclude = None if args.exclude is None else read_exclude(args.exclude, len(user_names))
    if args.seen:
        from ._rank import seen_lists

        n_items = (items.shape[0] if items is not None
                   else args.item_block[1] - args.item_block[0])
        exclude = seen_lists(args.seen, user_names, n_items)
    top = recommend(model, users, items, args.k, user_block=args.user_block,
                    item_block=args.item_block, exclude=exclude,
                    memory_budget_mb=args.memory_budget_mb)
    lines = ["user\trank\titem\tscore"]
    for a, user in enumerate(user_names):
        for rank, (item, score) in enumerate(zip(top.indices[a], top.scores[a], strict=True), 1):
            if item >= 0:
                lines.append(f"{user}\t{rank}\t{item}\t{float(score)!r}")
    text = "\n".join(lines) + "\n"
    if args.out in (None, "-"):
        sys.stdout.write(text)
        return 0
    try:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise CLIError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    return 0
