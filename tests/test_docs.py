"""Shared docstring paragraphs (fmlearn._docs): a composed docstring reads as if written out."""

import inspect

import pytest

import fmlearn
from fmlearn._docs import PARAGRAPHS, fill_doc


def test_fill_doc_indents_each_line_of_the_paragraph_like_its_marker():
    def fit():
        """Fit.

        Parameters
        ----------
        %(fit_data)s
        eval_set : (X_val, y_val), optional
        """

    written_out = """Fit.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; a weight of m counts like m repeated rows.
        eval_set : (X_val, y_val), optional
        """
    assert fill_doc(fit) is fit
    assert fit.__doc__ == written_out
    # inspect.cleandoc (what help() and Sphinx show) sees one uniform indentation
    assert "\n    Non-negative" in inspect.cleandoc(fit.__doc__)


def test_a_docstring_without_markers_is_left_unchanged():
    def f():
        """Text with a literal %(name)s inside a line, and braces {a, b}."""

    before = f.__doc__
    assert fill_doc(f).__doc__ == before


def test_unknown_paragraph_name_is_an_error():
    class C:
        """Doc.

        %(no_such_paragraph)s
        """

    with pytest.raises(KeyError, match="no_such_paragraph"):
        fill_doc(C)


@pytest.mark.parametrize("name", fmlearn.__all__[:-1])
def test_no_marker_is_left_in_a_public_docstring(name):
    obj = getattr(fmlearn, name)
    docs = [obj.__doc__]
    if inspect.isclass(obj):
        docs += [getattr(obj, m).__doc__ for m in ("fit", "partial_fit") if hasattr(obj, m)]
    for doc in docs:
        assert doc and "%(" not in doc
    assert all(p.strip() for p in PARAGRAPHS.values())
