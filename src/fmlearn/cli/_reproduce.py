"""``fmlearn reproduce``: run a registered paper experiment (see :mod:`fmlearn.reproduce`)."""

import os

from ._common import CLIError


def cmd_reproduce(args):
    from fmlearn import reproduce

    if args.list:
        if args.name:
            raise CLIError("give either --list or an experiment NAME")
        names = reproduce.names()
        if not names:
            print("no experiments are registered yet")
            return 0
        width = max(len(n) for n in names)
        for name in names:
            print(f"{name.ljust(width)}  {reproduce.REGISTRY[name].summary}")
        return 0
    if not args.name:
        raise CLIError("fmlearn reproduce needs an experiment NAME (fmlearn reproduce --list)")
    try:
        reproduce.get(args.name)
    except KeyError as exc:
        raise CLIError(exc.args[0]) from None
    out_dir = args.out or os.path.join("fmlearn-reproduce", args.name)
    if getattr(args, "rinex", None):
        if args.name != "vtec":
            raise CLIError("--rinex goes with the vtec experiment only")
        from fmlearn.reproduce import vtec_rinex

        os.makedirs(out_dir, exist_ok=True)
        try:
            vtec_rinex.run(out_dir, quick=args.quick, rinex_dir=args.rinex)
        except (FileNotFoundError, ValueError) as exc:
            raise CLIError(str(exc)) from None
        print(f"outputs written to {out_dir}")
        return 0
    reproduce.run(args.name, out_dir, quick=args.quick)
    print(f"outputs written to {out_dir}")
    return 0
