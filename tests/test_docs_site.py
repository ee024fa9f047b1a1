"""The documentation site (docs/conf.py): it builds with Sphinx, warnings as errors, from the
docstrings (numpydoc) and docs/*.md (MyST), and every page and public name is on it.

The build is the one README's test command runs (``python -m sphinx -W --keep-going -b html docs
OUT``), in a fresh process; it costs about 10 CPU seconds (numba kernels are imported, not
compiled).
"""

import pathlib
import re
import subprocess
import sys

import pytest

import fmlearn

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def toctree_entries():
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    entries = []
    for body in re.findall(r"```\{toctree\}\n(.*?)```", text, re.S):
        entries += [line.strip() for line in body.splitlines()
                    if line.strip() and not line.startswith(":")]
    return entries


def test_every_docs_page_is_in_the_user_guide():
    """A new docs/*.md page is listed in index.md's toctree (Sphinx also fails the build on a
    page in no toctree: 'document isn't included in any toctree')."""
    pages = {p.stem for p in DOCS.glob("*.md")} - {"index"}
    entries = set(toctree_entries())
    assert pages - entries == set(), "add these pages to the toctree of docs/index.md"
    assert entries - pages == {"api/index"}


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("sphinx", reason="the docs extra (part of dev) is not installed")
    out = tmp_path / "html"
    run = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q",
                          "-b", "html", "-d", str(tmp_path / "doctrees"), str(DOCS), str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    # a page per public estimator and function, and per public module
    for name in fmlearn.__all__:
        if not name.startswith("_"):
            page = out / "api" / f"fmlearn.{name}.html"
            assert page.exists(), page
    html = (out / "api" / "fmlearn.FMRegressor.html").read_text(encoding="utf-8")
    assert "n_factors" in html and "Examples" in html  # the numpydoc sections rendered
    for module in ("datasets", "encoders", "metrics", "distributed", "io", "exceptions"):
        assert (out / "api" / f"fmlearn.{module}.html").exists(), module
    for page in DOCS.glob("*.md"):
        assert (out / f"{page.stem}.html").exists(), page.name
