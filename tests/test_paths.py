"""No absolute path of a development machine in the package, the docs, the benchmarks or the
README: data locations come from arguments, documented environment variables (docs/data.md)
or the user's cache (``~/.cache/fmlearn``)."""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCANNED = ("src", "docs", "benchmarks", "README.md")
TEXT = (".py", ".md", ".txt", ".rst", ".toml", ".cfg", ".json", ".yaml", ".yml", ".sh")
# /work/..., /root/..., /home/..., /Users/... at the start of a path (not inside a URL or a
# relative path such as ``docs/home/``); ``~/.cache`` is the documented default and allowed
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|root|home|Users)/")


def _files():
    for entry in SCANNED:
        top = os.path.join(ROOT, entry)
        if os.path.isfile(top):
            yield top
            continue
        for folder, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
            for name in names:
                if name.endswith(TEXT):
                    yield os.path.join(folder, name)


def test_pattern_catches_machine_paths_only():
    for bad in ("data in /work/shared/data", "'/root/.cache/x'", "(/home/me/libfm)",
                "cd /Users/x"):
        assert MACHINE_PATH.search(bad), bad
    for ok in ("~/.cache/fmlearn", "https://example.org/home/page", "docs/home/x",
               "$FMLEARN_DATA/libsvm", "a /tmp/fmlearn-bench.lock"):
        assert not MACHINE_PATH.search(ok), ok


def test_no_machine_paths_in_package_docs_benchmarks():
    if not os.path.isdir(os.path.join(ROOT, "src", "fmlearn")):
        pytest.skip("not run from a source checkout")
    found = []
    for path in _files():
        with open(path, encoding="utf-8", errors="replace") as fh:
            for no, line in enumerate(fh, 1):
                if MACHINE_PATH.search(line):
                    found.append(f"{os.path.relpath(path, ROOT)}:{no}: {line.strip()[:120]}")
    assert not found, "machine-specific paths:\n" + "\n".join(found)
