"""Docstring paragraphs shared by several estimators, written once and composed into ``__doc__``.

A docstring names a paragraph by a line that holds only ``%(name)s``; :func:`fill_doc` replaces
that line with the paragraph of :data:`PARAGRAPHS`, each of its lines indented like the marker,
so the rendered docstring reads as if it were written out (numpydoc sections, doctests and all).
"""

import re

__all__ = ["PARAGRAPHS", "add_to_section", "fill_doc"]

PARAGRAPHS = {
    # The data arguments of a batch estimator's ``fit``.
    "fit_data": """\
X : {array-like, sparse matrix} of shape (n_samples, n_features)
y : array-like of shape (n_samples,)
sample_weight : array-like of shape (n_samples,), default=None
    Non-negative weights; a weight of m counts like m repeated rows.""",
    # The run settings of the one-pass estimators whose batch products are thread-independent.
    "one_pass_run": """\
init : {"auto", "dense", "randomized", "lanczos"}, default="auto"
warm_start : bool, default=False
random_state : int, RandomState or None, default=None
n_jobs : int or None, default=None
    Threads for the batch products (results do not depend on it).
verbose : int, default=0""",
    # The online learners' scaling of X (fmlearn.online).
    "online_standardize": """\
standardize : {"auto", True, False}, default="auto"
    ``"auto"``: a dense X is standardised with the first batch's mean and standard
    deviation (fitted ``mean_``, ``scale_``; frozen afterwards: later batches,
    ``partial_fit`` after ``fit`` and predictions apply them), a sparse X is learned as
    given; True: a sparse X is centred and scaled too (made dense); False: X as given
    (the behaviour before this parameter). The other parameters apply to the standardised
    rows (docs/online.md).""",
}

_MARKER = re.compile(r"( *)%\((\w+)\)s")


def fill_doc(obj):
    """Replace each marker line ``%(name)s`` of ``obj.__doc__`` with ``PARAGRAPHS[name]``,
    indented as the marker; returns ``obj`` (usable as a class or function decorator).

    Examples
    --------
    >>> from fmlearn._docs import fill_doc
    >>> @fill_doc
    ... def f():
    ...     '''Parameters
    ...     ----------
    ...     %(fit_data)s
    ...     '''
    >>> print(f.__doc__.splitlines()[2].strip())
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    """
    if obj.__doc__ is None:  # python -OO strips docstrings
        return obj
    lines = []
    for line in obj.__doc__.split("\n"):
        marker = _MARKER.fullmatch(line)
        if marker is None:
            lines.append(line)
            continue
        indent, name = marker.groups()
        lines.extend(indent + part if part else part for part in PARAGRAPHS[name].split("\n"))
    obj.__doc__ = "\n".join(lines)
    return obj


def add_to_section(doc, section, text):
    r"""``doc`` with ``text`` (lines indented as the section's entries) appended at the end of its
    numpydoc ``section`` (e.g. ``"Parameters"``), before the next section's header.

    For docstrings composed from a shared part and a class's own entries, so that every entry
    stays in its section (numpydoc and Sphinx read the sections by their headers).

    Examples
    --------
    >>> from fmlearn._docs import add_to_section
    >>> doc = ("Doc.\n\n    Parameters\n    ----------\n    a : int\n\n"
    ...        "    Notes\n    -----\n    N.\n")
    >>> print(add_to_section(doc, "Parameters", "    b : int\n"))
    Doc.
    <BLANKLINE>
        Parameters
        ----------
        a : int
        b : int
    <BLANKLINE>
        Notes
        -----
        N.
    <BLANKLINE>
    """
    lines = doc.split("\n")
    starts = [i for i in range(len(lines) - 1) if lines[i].strip()
              and set(lines[i + 1].strip()) == {"-"}
              and len(lines[i + 1].strip()) == len(lines[i].strip())]
    mine = [i for i in starts if lines[i].strip() == section]
    if not mine:
        raise KeyError(f"no section {section!r} in the docstring")
    nxt = [i for i in starts if i > mine[0]]
    end = nxt[0] if nxt else len(lines)
    while end > mine[0] + 2 and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[:end] + text.rstrip("\n").split("\n") + lines[end:])
