"""svmlight / libsvm files as the partitions of a distributed fit, read on the workers
(:func:`read_svmlight`); used by :func:`fmlearn.distributed.fit` and
:func:`fmlearn.distributed.fit_convex`."""

import numbers
import os

import numpy as np
from dask import delayed

__all__ = ["SvmlightFiles", "read_svmlight"]


class SvmlightFiles:
    """svmlight / libsvm files read lazily, one partition per file, on the workers (see
    :func:`read_svmlight`)."""

    def __init__(self, paths, n_features, zero_based, dtype):
        self.paths = list(paths)
        self.n_features = n_features
        self.zero_based = zero_based
        self.dtype = np.dtype(dtype)

    def partitions(self):
        read = delayed(_read_svmlight_file, pure=True)
        return [read(p, self.n_features, self.zero_based, self.dtype) for p in self.paths]


def _read_svmlight_file(path, n_features, zero_based, dtype):
    # fmlearn's validating reader: a malformed line, a NaN or a bad index is refused with the
    # file and the line named (sklearn's parser names neither).
    from ..datasets import load_svmlight

    return load_svmlight(path, n_features=n_features, dtype=dtype, zero_based=zero_based)


def read_svmlight(paths, n_features=None, *, zero_based=False, dtype=np.float64):
    """Files in svmlight / libsvm format as the partitions of a distributed fit.

    Nothing is read on the client: each file is one partition, read on a worker by
    :func:`fmlearn.datasets.load_svmlight` when :func:`fit` needs it (and read again
    there if its worker is lost): a malformed line, a NaN or infinite value or an index
    outside the file's base is refused with an error naming the file and the line.

    Parameters
    ----------
    paths : str or list of str
        Paths as the workers see them (a shared file system).
    n_features : int, optional
        Width of every partition. Without it each file's width is its largest index, and
        files of different widths are refused by :func:`fit`.
    zero_based : bool, default=False
        Whether the files' feature indices start at 0 (libsvm's start at 1). Not guessed per
        file: a guess could differ between files and shift their columns.
    dtype : float32 or float64, default=float64

    Returns
    -------
    SvmlightFiles
        Pass it as ``X`` to :func:`fit` (with ``y=None``).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("read_svmlight needs at least one path")
    if n_features is not None and (isinstance(n_features, bool) or not isinstance(
            n_features, numbers.Integral) or n_features < 1):
        raise ValueError(f"n_features must be a positive int or None, got {n_features!r}")
    if np.dtype(dtype) not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    return SvmlightFiles(paths, n_features, bool(zero_based), dtype)
