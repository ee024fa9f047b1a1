"""What the harness's children share: the result line and the command line of their modes.

Imported by ``_sbs_fmlearn.py`` (fmlearn's Python) and ``_sbs_peers.py`` (the peers' Python),
which run as scripts from this folder, and by ``_sbs_core.py`` (the harness), which reads the
line back; standard library only, so that it loads in either environment and adds nothing
measurable to a child's start-up.
"""

import argparse
import json

RESULT_TAG = "SBS-RESULT "


def report(rec):
    """Print ``rec`` as the process's one result line (``RESULT_TAG`` then JSON)."""
    print(RESULT_TAG + json.dumps(rec), flush=True)


def parser(doc):
    """The child's parser and its sub-parsers, one per mode; ``doc`` is the module docstring."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    return p, p.add_subparsers(dest="mode", required=True)


def files_mode(sub, name):
    """A mode that fits ``--train`` and predicts ``--test`` into ``--out`` (libFM files)."""
    s = sub.add_parser(name)
    for opt in ("--train", "--test", "--out"):
        s.add_argument(opt, required=True)
    return s
