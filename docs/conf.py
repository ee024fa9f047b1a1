"""Sphinx configuration of fmlearn's documentation site.

Build (what CI runs through ``tests/test_docs_site.py``; warnings are errors)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Sources: the user guide is every ``docs/*.md`` page (MyST Markdown), listed in the toctree of
``index.md`` (a page not listed there fails the build, so a new page cannot be forgotten); the
API reference is generated here, before Sphinx reads the sources, into ``docs/api/`` (not kept
in git): one page per public estimator and function of ``fmlearn.__all__`` and one per public
module (its ``__all__``), from the numpydoc docstrings. A name added to ``__all__`` gets its
page without editing this file.
"""

import importlib
import inspect
import os
import pathlib
import re
import shutil
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))  # the checkout's package, installed or not

import fmlearn  # noqa: E402

project = "fmlearn"
author = "the fmlearn developers"
copyright = "the fmlearn developers, BSD-3-Clause"  # noqa: A001
version = release = fmlearn.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "numpydoc"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path = []
html_theme_options = {"nosidebar": False, "fixed_sidebar": True, "page_width": "1100px"}
html_sidebars = {"**": ["about.html", "navigation.html", "searchbox.html"]}

# MyST: "## Heading" anchors for links such as tabular.md#safe-files-for-whole-pipelines
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]
suppress_warnings = []

# numpydoc renders the sections; autodoc lists the members (numpydoc's member tables would
# need autosummary stubs)
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
autodoc_default_options = {"members": True, "inherited-members": False, "show-inheritance": False}
autodoc_member_order = "bysource"
autodoc_typehints = "none"

#: Public modules with an API page: name -> one-line title. Their ``__all__`` is documented.
MODULES = {
    "fmlearn.datasets": "Data sets: readers, fetchers, generators",
    "fmlearn.encoders": "Encoders: tables, tensors, multi-view, pierce points",
    "fmlearn.metrics": "Metrics, batch and streaming",
    "fmlearn.distributed": "Dask backend",
    "fmlearn.stream": "Out-of-core fitting",
    "fmlearn.pipeline": "Pipelines that transform the final step's eval_set",
    "fmlearn.evaluate": "Prequential evaluation",
    "fmlearn.recommender": "Recommendation and embeddings",
    "fmlearn.io": "Model files",
    "fmlearn.exceptions": "Exceptions and warnings",
    "fmlearn.diagnostics": "Diagnostics of the features",
    "fmlearn.linalg": "Linear algebra helpers",
    "fmlearn.losses": "Losses",
}


# -- docstrings written as plain text ------------------------------------------------------------
# The docstrings are read in terminals as often as on this site: they write ``n_features_in_``
# and ``|w - w*|`` as plain text, which reST would take for a reference and a substitution.
# Outside literals, doctests and literal blocks, a word's trailing underscore and a bar are
# escaped after numpydoc has turned the sections into reST.
_LITERAL = re.compile(r"(``.+?``|:[\w:.-]+:`[^`]+`|`[^`]+`_{0,2})")


def _escape_plain(text):
    parts = _LITERAL.split(text)
    for i in range(0, len(parts), 2):  # the even parts are outside literals
        part = re.sub(r"(?<=\w)_(?=[^\w*]|$)", r"\\_", parts[i])
        parts[i] = part.replace("|", "\\|")
    return "".join(parts)


def escape_plain_text(app, what, name, obj, options, lines):
    literal_indent = None
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None:
            if not line.strip() or indent > literal_indent:
                continue
            literal_indent = None
        stripped = line.strip()
        if stripped.startswith((">>>", "...", ".. ")):
            continue
        lines[i] = _escape_plain(line)
        if stripped.endswith("::"):
            literal_indent = indent


# -- links to repository files outside docs/ ---------------------------------------------------
# README.md and the pages link to benchmarks/RESULTS.md, ARCHITECTURE.md...: files of the
# repository, not pages of the site. On the site they read as the path in the repository; any
# other link that resolves to nothing is still an error.
_LINK = re.compile(r"\[([^\]]+)\]\(([^()\s#]+)(#[^()\s]*)?\)")
ROOT = HERE.parent


def repo_links(text, folder):
    def plain(m):
        label, target = m.group(1), m.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # a URL
            return m.group(0)
        path = (folder / target).resolve()
        if path.is_relative_to(HERE) or not path.is_relative_to(ROOT) or not path.exists():
            return m.group(0)
        where = path.relative_to(ROOT).as_posix()
        return f"`{where}`" if label.strip("`") == where else f"{label} (`{where}`)"
    return _LINK.sub(plain, text)


def _source_read(app, docname, source):
    source[0] = repo_links(source[0], (HERE / docname).parent)


def _include_read(app, relative_path, parent_docname, content):
    content[0] = repo_links(content[0], (HERE / relative_path).resolve().parent)


def _skip_member(app, what, name, obj, skip, options):
    # scikit-learn's metadata-routing setters (set_fit_request, ...), generated per class
    return True if re.fullmatch(r"set_\w+_request", name) else None


def setup(app):
    app.connect("autodoc-process-docstring", escape_plain_text, priority=900)
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("source-read", _source_read)
    app.connect("include-read", _include_read)


def public_names():
    """``{"estimators": [...], "functions": [...]}`` of ``fmlearn.__all__``."""
    out = {"estimators": [], "functions": []}
    for name in fmlearn.__all__:
        if name.startswith("_"):
            continue
        obj = getattr(fmlearn, name)
        out["estimators" if inspect.isclass(obj) else "functions"].append(name)
    return out


def _title(text, mark="="):
    return f"{text}\n{mark * len(text)}\n"


def write_api_pages(folder):
    """Write the API reference's sources into ``folder`` (replacing what was there)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir()
    names = public_names()
    pages = {}
    for name in names["estimators"]:
        obj = getattr(fmlearn, name)
        pages[f"fmlearn.{name}"] = (_title(f"fmlearn.{name}") + f"\n.. autoclass:: fmlearn.{name}\n"
                                    "   :members:\n   :inherited-members: BaseEstimator\n"
                                    f"\n(defined in ``{obj.__module__}``)\n")
    for name in names["functions"]:
        pages[f"fmlearn.{name}"] = _title(f"fmlearn.{name}") + f"\n.. autofunction:: fmlearn.{name}\n"
    for module, title in MODULES.items():
        importlib.import_module(module)
        pages[module] = (_title(f"{module}: {title}") + f"\n.. automodule:: {module}\n"
                         "   :members:\n")
    for page, text in pages.items():
        (folder / f"{page}.rst").write_text(text, encoding="utf-8")
    index = [_title("API reference"), "",
             "Every public estimator and function of ``fmlearn`` and every public module, from "
             "the docstrings (numpydoc).", "",
             _title("Estimators", "-"), ".. toctree::", "   :maxdepth: 1", ""]
    index += [f"   fmlearn.{n}" for n in names["estimators"]]
    index += ["", _title("Functions", "-"), ".. toctree::", "   :maxdepth: 1", ""]
    index += [f"   fmlearn.{n}" for n in names["functions"]]
    index += ["", _title("Modules", "-"), ".. toctree::", "   :maxdepth: 1", ""]
    index += [f"   {m}" for m in MODULES]
    (folder / "index.rst").write_text("\n".join(index) + "\n", encoding="utf-8")


# Before Sphinx looks for its sources (``sphinx-build`` imports this file first).
if os.environ.get("FMLEARN_DOCS_NO_API") != "1":
    write_api_pages(HERE / "api")
