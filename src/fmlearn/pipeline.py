"""Pipelines whose final estimator gets its ``eval_set`` transformed by the fitted steps.

``sklearn.pipeline.Pipeline`` passes ``fmregressor__eval_set=(X_val, y_val)`` to the final
estimator untouched, so the validation rows reach it raw (a table of strings where the
estimator expects the encoded matrix), and scikit-learn's ``transform_input`` (with metadata
routing) transforms every member of a tuple, ``y_val`` included. :class:`Pipeline` is
scikit-learn's ``Pipeline`` with one change: an ``eval_set`` given to its last step (as
``<name>__eval_set`` in ``fit``, ``fit_predict`` or ``fit_transform``) is handed on as a
deferred value that the estimator resolves when it validates it, after the preceding steps
have been fitted on the training rows: ``X_val`` goes through their ``transform``, ``y_val``
stays as it is. Everything else (caching, routing, slicing, parameters) is scikit-learn's.

Example::

    from fmlearn import FMRegressor
    from fmlearn.encoders import TabularEncoder
    from fmlearn.pipeline import make_pipeline

    pipe = make_pipeline(TabularEncoder(), FMRegressor(solver="als", early_stopping=True))
    pipe.fit(X, y, fmregressor__eval_set=(X_val, y_val))
"""

from sklearn import pipeline as _skl

from ._early_stopping import DeferredEvalSet

__all__ = ["Pipeline", "make_pipeline"]


class Pipeline(_skl.Pipeline):
    """``sklearn.pipeline.Pipeline`` that transforms the final step's ``eval_set``.

    See the module docstring; parameters and attributes are scikit-learn's.
    """

    def _defer_eval_set(self, params):
        if len(self.steps) < 2:
            return params
        key = f"{self.steps[-1][0]}__eval_set"
        value = params.get(key)
        if value is None or isinstance(value, DeferredEvalSet):
            return params
        return {**params, key: DeferredEvalSet(self[:-1], value)}

    def fit(self, X, y=None, **params):
        """``sklearn.pipeline.Pipeline.fit``; ``<last step>__eval_set=(X_val, y_val)`` reaches
        the last step with ``X_val`` transformed by the fitted preceding steps."""
        return super().fit(X, y, **self._defer_eval_set(params))

    def fit_predict(self, X, y=None, **params):
        """``sklearn.pipeline.Pipeline.fit_predict``, the ``eval_set`` handled as in
        :meth:`fit`."""
        return super().fit_predict(X, y, **self._defer_eval_set(params))

    def fit_transform(self, X, y=None, **params):
        """``sklearn.pipeline.Pipeline.fit_transform``, the ``eval_set`` handled as in
        :meth:`fit`."""
        return super().fit_transform(X, y, **self._defer_eval_set(params))


def make_pipeline(*steps, memory=None, verbose=False):
    """:class:`Pipeline` from the steps, named as ``sklearn.pipeline.make_pipeline`` names
    them (the lower-cased class name)."""
    return Pipeline(_skl._name_estimators(steps), memory=memory, verbose=verbose)
