"""Dask backend (optional extra: ``pip install 'fmlearn[dask]'``).

Two ways to train on data that lives on a Dask cluster:

* :func:`blocks` turns a Dask array (or dataframe, bag of ``(X, y)`` blocks, list of delayed
  blocks) into a re-iterable stream of in-memory blocks, each computed on the cluster and
  fetched one after another; :func:`fmlearn.stream.fit_stream` feeds them to any estimator's
  ``partial_fit`` (out-of-core: the client holds one block and one batch).
* :func:`fit_one_pass` runs the one-pass generalized FM (:class:`fmlearn.GFMRegressor`,
  :class:`fmlearn.IFMRegressor`, symmetric sensing / phase retrieval) data-parallel: every
  statistic of a step is a sum over the rows of the batch given the current state, so each
  partition computes its partial sums on the worker that holds it, the client adds them up
  and updates U, V, w (d x O(k) numbers). The iterates equal the in-memory solver's up to the
  order of floating-point summation.

* :func:`fit` runs the classic FM's ALS and MCMC (:class:`fmlearn.FMRegressor`,
  :class:`fmlearn.FMClassifier`) exactly, data-parallel: rows and their caches stay on the
  workers, each colour class of a sweep costs one round of class-length sums; checkpoints
  and lost workers are survived (see :mod:`fmlearn.distributed._fm`). With
  ``solver="sgd"`` it runs data-parallel epochs with iterative parameter mixing, an
  approximation of sequential SGD (:mod:`fmlearn.distributed._fm_sgd`). :func:`read_svmlight`
  gives it files read on the workers.

Importing :mod:`fmlearn` never imports Dask; this subpackage does.
"""

try:
    import dask  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("fmlearn.distributed needs Dask: pip install 'fmlearn[dask]' "
                      "(dask and distributed)") from exc

from ._blocks import DaskBlocks, blocks
from ._files import SvmlightFiles, read_svmlight
from ._fit import fit
from ._hazan import DaskRows, fit_convex
from ._one_pass import DaskBatchRows, fit_one_pass

__all__ = ["DaskBatchRows", "DaskBlocks", "SvmlightFiles", "blocks", "fit", "fit_one_pass",
           "read_svmlight"]
__all__ += ["DaskRows", "fit_convex"]
