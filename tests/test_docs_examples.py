"""Every ```python block of docs/*.md and README.md is complete and runs with the suite.

A page is a script: its blocks run in order in one namespace, in a fresh folder, so a block may
use what an earlier block of the same page defined, and nothing else. Two properties:

- **complete**: every name a block reads is a builtin or was bound by that block or an earlier
  block of the page (imports, assignments, loop and ``with`` targets, definitions); checked
  statically on every page, whatever it needs to run;
- **runs**: every page runs; where the output is shown in the block (``print(...)  # value``,
  the value starting like a literal: a digit, ``(``, ``[``, ``'``, ``True``...), the printed
  text contains it.

Pages whose examples read downloaded data (MovieLens-100K, the LIBSVM sets, RINEX files) run on
stand-ins of the same layout made here (:func:`docs_data`), with the network refused: their
printed values are not checked, only that the code runs. Pages whose own test runs every block
and checks more than the printed values are listed in :data:`RUN_ELSEWHERE` and not run twice.
"""

import ast
import builtins
import contextlib
import io
import pathlib
import re
import shutil
import urllib.request

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]

#: page -> the test that runs all of its blocks (and checks what they print)
RUN_ELSEWHERE = {
    "docs/recommend.md": "tests/test_recommend.py::test_docs_examples_print_what_the_page_says",
    "docs/tabular.md": "tests/test_tabular.py::test_docs_examples_run",
    "docs/ffm.md": "tests/ffm/test_ffm_docs.py::test_docs_examples_run",
}
#: calls that read downloaded data: a block making one runs on a stand-in, its output unchecked
STAND_IN_CALLS = ("load_movielens_100k(", "fetch(", "fetch_ijcnn1(", "load_rinex_network(")
#: the comment after ``print(...)`` shows printed text when it starts like a Python literal
_SHOWN = re.compile(r"print\(.*\)[ \t]*#[ \t]*((?:[-\d(\[']|True|False|None).*)$", re.M)


def _name(path):
    return path.relative_to(ROOT).as_posix()


def python_blocks(path):
    """``[(first line number, code), ...]`` of the page's ```python blocks."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1))
            for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]


def _bound_and_read(code):
    """Names a block binds (anywhere in it) and the names it reads, with the line (in the block)
    of the first read; a comprehension's or a function's own names count as bound."""
    tree = ast.parse(code)
    bound, read = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                read[node.id] = min(node.lineno, read.get(node.id, node.lineno))
            else:
                bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            if not isinstance(node, ast.ClassDef):
                a = node.args
                bound.update(x.arg for x in a.posonlyargs + a.args + a.kwonlyargs)
                bound.update(x.arg for x in (a.vararg, a.kwarg) if x is not None)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, read


def undefined_names(path):
    """``[(line, name), ...]``: names a block reads that neither it nor an earlier block of the
    page binds, and that are not builtins (line: in the page, of the name's first read)."""
    known = set(dir(builtins))
    missing = []
    for line, code in python_blocks(path):
        bound, read = _bound_and_read(code)
        missing += sorted((line + read[n] - 1, n) for n in set(read) - bound - known)
        known |= bound
    return missing


def test_the_completeness_check_finds_a_name_no_block_defines(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nimport numpy as np\nX = np.ones(3)\n```\n\ntext\n\n"
                    "```python\nfor i in range(2):\n    print(X[i], y[i], [j for j in X])\n```\n")
    assert undefined_names(page) == [(10, "y")]


@pytest.mark.parametrize("path", PAGES, ids=_name)
def test_every_name_a_docs_example_uses_is_defined_on_its_page(path):
    assert undefined_names(path) == [], f"{_name(path)}: (line, name) used but never defined"


# -- running the pages ------------------------------------------------------------------------
def _movielens_stand_in(folder, n_users=943, n_items=1682, n_ratings=100_000):
    """A MovieLens-100K of the GroupLens layout (u.data, u.user, u.item), every user and item
    rated, random ratings: the examples run on it as on the real file."""
    rng = np.random.default_rng(0)
    users = np.concatenate([np.arange(1, n_users + 1), rng.integers(1, n_users + 1, n_ratings)])
    items = np.concatenate([rng.permutation(np.arange(1, n_items + 1)),
                            rng.integers(1, n_items + 1, n_ratings)])
    users, items = users[:n_ratings], items[:n_ratings]
    ratings = rng.integers(1, 6, n_ratings)
    folder.mkdir(parents=True)
    lines = (f"{u}\t{i}\t{r}\t{880000000 + t}" for t, (u, i, r) in
             enumerate(zip(users.tolist(), items.tolist(), ratings.tolist(), strict=True)))
    (folder / "u.data").write_text("\n".join(lines) + "\n")
    (folder / "u.user").write_text("".join(f"{u}|30|M|engineer|00000\n"
                                           for u in range(1, n_users + 1)))
    (folder / "u.item").write_text("".join(f"{i}|Film {i} (1990)|01-Jan-1990||x|" + "|".join(
        "1" if g == i % 19 else "0" for g in range(19)) + "\n" for i in range(1, n_items + 1)),
        encoding="latin-1")


def _libsvm_stand_in(folder):
    """IJCNN1's two files (22 features, labels -1/+1), a few hundred rows each."""
    from fmlearn.datasets import save_svmlight

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    for stem, n in (("ijcnn1.trn", 400), ("ijcnn1.tst", 200)):
        X = rng.random((n, 22))
        save_svmlight(X, np.where(X[:, 0] > 0.5, 1.0, -1.0), str(folder / stem),
                      zero_based=False)


@pytest.fixture
def docs_data(tmp_path, monkeypatch):
    """A fresh working folder with the stand-ins of the downloaded data, and no network."""
    _movielens_stand_in(tmp_path / "data" / "ml-100k")
    _libsvm_stand_in(tmp_path / "libsvm")
    for name in ("delf0010.21o.gz", "eijs0010.21d.gz", "zegv0010.21o.gz", "cbw10010.21n.gz"):
        shutil.copy(ROOT / "tests" / "fixtures" / "gnss" / name, tmp_path / name)
    monkeypatch.setenv("FMLEARN_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("FMLEARN_LIBSVM", str(tmp_path / "libsvm"))

    def no_network(*args, **kwargs):
        raise OSError("the docs examples run without network")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    monkeypatch.chdir(tmp_path)
    return tmp_path


RUN = [p for p in PAGES if python_blocks(p) and _name(p) not in RUN_ELSEWHERE]


@pytest.mark.parametrize("path", RUN, ids=_name)
def test_docs_examples_run_and_print_what_the_page_shows(path, docs_data):
    if "load_rinex_network(" in path.read_text(encoding="utf-8"):
        pytest.importorskip("georinex")
    namespace = {"__name__": "__docs__"}
    for line, code in python_blocks(path):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile("\n" * (line - 1) + code, _name(path), "exec"), namespace)  # noqa: S102
        if any(call in code for call in STAND_IN_CALLS):
            continue
        for shown in _SHOWN.findall(code):
            assert shown.strip() in out.getvalue(), (f"{_name(path)} line {line}: the page "
                                                     f"shows {shown!r}, the block printed "
                                                     f"{out.getvalue()!r}")


def test_every_page_with_examples_is_run_somewhere():
    pages = {_name(p) for p in PAGES if python_blocks(p)}
    assert pages == {_name(p) for p in RUN} | set(RUN_ELSEWHERE)
    for test in RUN_ELSEWHERE.values():
        file, func = test.split("::")
        assert f"def {func}(" in (ROOT / file).read_text(encoding="utf-8")
