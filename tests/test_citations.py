"""User-facing text cites papers by authors and year ("Lin et al. 2019", "Zhang et al. 2018"),
never by the project's internal numbering of its reference papers ("seed 001", "000/003 Alg. 1")
or of its issues ("issue 11").

User-facing: the package's source (docstrings, error and warning messages, CLI help, printed
titles and the comments a reader of the source meets), docs/, README.md, ARCHITECTURE.md and the
benchmarks' Markdown pages (which cite the papers, and record which issue's bar a figure answers:
issue numbers are allowed there only). Internal: the tests, the benchmark scripts' notes, tools/
and the git history.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The reference papers' internal numbers were 000-004 (000 and 003: two versions of one paper).
_SECTION = (r"(?:§|Alg\b|Alg\.|Algorithms?\b|Eqs?\b\.?|Theorems?\b|Thm\.|Lemmas?\b|Figs?\b\.?|"
            r"Figures?\b|Tables?\b|Definition\b|Def\.|Propositions?\b|Prop\.|lines?\b|Remark\b|"
            r"Appendix\b|Corollary\b|Sections?\b)")
PAPER_NUMBER = re.compile(
    r"(?i)\bseeds?\s+0\d\d\b"                                   # "seed 001", "seeds 000"
    r"|(?<![\w.,/-])00[0-4](?:/00[0-4])+\b"                     # "000/003"
    r"|(?<![\w.,/-])00[0-4](?:'s)?,?\s+" + _SECTION +            # "001 Theorem 3", "002's Fig. 1"
    r"|(?<![\w.,/-])00[0-4]'s\b")                               # "002's model"
ISSUE_NUMBER = re.compile(r"(?i)\bissues?\s+#?\d+\b|#\d+\b(?=[^\n]*\bissue)")


def _user_facing():
    """(path, check issue numbers too) for every user-facing text file."""
    files = [(p, True) for p in sorted((ROOT / "src" / "fmlearn").rglob("*.py"))]
    files += [(p, True) for p in sorted((ROOT / "docs").glob("*.md"))]
    files += [(ROOT / "README.md", True), (ROOT / "ARCHITECTURE.md", True)]
    files += [(p, False) for p in sorted((ROOT / "benchmarks").glob("*.md"))]
    return [(p, issues) for p, issues in files if p.exists()]


def _offences(text, issues=True):
    found = [m.group(0) for m in PAPER_NUMBER.finditer(text)]
    if issues:
        found += [m.group(0) for m in ISSUE_NUMBER.finditer(text)]
    return found


@pytest.mark.parametrize("text", [
    "the shift of seed 000 §2.1", "Seed 004 Fig. 1: test RMSE", "(seed\n002)",
    "seed 000/003 Alg. 1", "(001 Theorem 3 needs n)", "002's Fig. 1", "the 002's model",
    "(002 Alg. 2 line 4)", "as in issue 11", "Issue 14's bar", "issues 9 and 10",
])
def test_the_rule_catches_internal_numbers(text):
    assert _offences(text)


@pytest.mark.parametrize("text", [
    "Lin et al. 2019, §3.3", "Lin and Ye 2016, Algorithm 1", "Zhang et al.'s (2018) model",
    "seed 0's training split", "random seeds 0, 1, 2", "tol=0.001 Theorem", "1e-003 Eq",
    "arXiv:1608.05995", "0.002 Table", "GitHub issues", "100 000 rows",
])
def test_the_rule_leaves_ordinary_text_alone(text):
    assert not _offences(text)


def test_user_facing_text_cites_papers_by_authors_and_year():
    offences = []
    for path, issues in _user_facing():
        text = path.read_text(encoding="utf-8")
        for m in (*PAPER_NUMBER.finditer(text), *(ISSUE_NUMBER.finditer(text) if issues else ())):
            line = text.count("\n", 0, m.start()) + 1
            offences.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0)!r}")
    assert not offences, ("cite papers by authors and year (docs/references.md), not by internal "
                          "numbers:\n" + "\n".join(offences))


def test_the_scan_covers_the_package_and_the_docs():
    paths = {p.relative_to(ROOT).as_posix() for p, _ in _user_facing()}
    assert {"README.md", "docs/fm.md", "src/fmlearn/cli/_commands.py",
            "src/fmlearn/reproduce/__init__.py"} <= paths
