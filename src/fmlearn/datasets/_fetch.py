"""Public benchmark data sets: found in the user's cache, else downloaded from their public
homes, checksummed, and cached; offline, a clear message says where to put the files.

Where files live (see docs/data.md):

* ``$FMLEARN_DATA`` (default ``~/.cache/fmlearn``) is the data home; ``data_home=`` overrides it;
* the LIBSVM files (IJCNN1, Adult, Abalone) are in ``$FMLEARN_LIBSVM`` when it is set, else in
  ``<data home>/libsvm``;
* MovieLens-100K is in ``<data home>/ml-100k`` (:func:`fmlearn.datasets.load_movielens_100k`,
  which checks GroupLens' published MD5 of its zip).

Each LIBSVM file is stored under a fixed local name (``ijcnn1.trn.bz2``...; a plain, not
compressed, file of the same stem is accepted too) and carries the SHA-256 of its text (after
bz2 decompression), so that a compressed or a plain copy pass the same check. A download whose
text has another checksum is refused and nothing is written.
"""

import bz2
import hashlib
import os
import urllib.error
import urllib.request
from dataclasses import dataclass

import scipy.sparse as sp
from sklearn.utils import Bunch

from .._files import atomic_write
from ._home import get_data_home
from ._movielens import load_movielens_100k
from ._svmlight import load_svmlight

LIBSVM_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/"


@dataclass(frozen=True)
class RemoteFile:
    """One file of a data set: its local stem, where it is published, the SHA-256 of its text."""

    stem: str
    url: str
    sha256: str


@dataclass(frozen=True)
class LibsvmDataset:
    """A LIBSVM data set: its files (training first, then an optional test file), how its
    feature indices count, its task and the page that describes it."""

    files: tuple
    zero_based: bool
    task: str
    page: str


# The SHA-256 values are those of the copies the project benchmarks with (the text of each
# file). IJCNN1 and Abalone are LIBSVM's files (ijcnn1, ijcnn1.t: 49,990 and 91,701 rows;
# abalone_scale: 4,177 rows); the Adult copy is a zero-based re-encoding of LIBSVM's a9a / a9a.t
# (32,560 and 16,280 rows), so a download of a9a is refused by its checksum: place the files.
_SHA256 = {
    "ijcnn1.trn": "7fe291672c3fefe6a7e3c51529becd23f0e985ba05ffb8d53c9c648c1e91cc19",
    "ijcnn1.tst": "e7b0bbd518641980dc322746c6bc59d019d3153934e6258e48f9d8cfae2c4bb8",
    "adult.trn": "64bf51ab7ce8101364b2d6b569c7bad8f04a4f9684527ff232a0f06474ae35c2",
    "adult.tst": "8de2963e337b73465257c78c8b4b1dbba40c07b0e56a58308f3f10cbde8ed7b8",
    "abalone.trn": "7f1f6ca7f636e684949fc3f6388fc4f7503083717f776876bbdd11098fc5378b",
}
# data set: its files (stem, path below LIBSVM_URL; training first), zero_based, task, page
_LIBSVM_TABLE = {
    "ijcnn1": ((("ijcnn1.trn", "binary/ijcnn1.bz2"), ("ijcnn1.tst", "binary/ijcnn1.t.bz2")),
               False, "classification", "binary.html#ijcnn1"),
    "adult": ((("adult.trn", "binary/a9a"), ("adult.tst", "binary/a9a.t")),
              True, "classification", "binary.html#a9a"),
    "abalone": ((("abalone.trn", "regression/abalone_scale"),),
                False, "regression", "regression.html#abalone"),
}
LIBSVM_DATASETS = {
    name: LibsvmDataset(
        files=tuple(RemoteFile(stem, LIBSVM_URL + path, _SHA256[stem]) for stem, path in files),
        zero_based=zero_based, task=task, page=LIBSVM_URL + page)
    for name, (files, zero_based, task, page) in _LIBSVM_TABLE.items()
}


def get_libsvm_home(data_home=None):
    """Folder of the LIBSVM files: ``$FMLEARN_LIBSVM`` when set (and no ``data_home`` is
    given), else ``<data home>/libsvm``."""
    if data_home is None and os.environ.get("FMLEARN_LIBSVM"):
        return os.path.expanduser(os.environ["FMLEARN_LIBSVM"])
    return os.path.join(get_data_home(data_home), "libsvm")


def _local_name(f):
    return f.stem + (".bz2" if f.url.endswith(".bz2") else "")


def _found(folder, f):
    for name in (f.stem + ".bz2", f.stem):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None


def _how_to_place(name, folder):
    spec = LIBSVM_DATASETS[name]
    files = ", ".join(f"{f.stem}.bz2 (or {f.stem}) from {f.url}" for f in spec.files)
    return (f"Put the {name} files in {folder!r}: {files} (see {spec.page}); the folder is "
            f"$FMLEARN_LIBSVM when set, else $FMLEARN_DATA/libsvm, else "
            f"~/.cache/fmlearn/libsvm (docs/data.md).")


def _text_sha256(payload, url):
    if url.endswith(".bz2"):
        try:
            payload = bz2.decompress(payload)
        except (OSError, ValueError) as exc:
            return f"<not a bz2 file: {exc}>"
    return hashlib.sha256(payload).hexdigest()


def _download(name, f, folder):
    """Fetch ``f.url``, check the SHA-256 of its text, then write it atomically into
    ``folder``; return the local path."""
    try:
        with urllib.request.urlopen(f.url, timeout=60) as response:
            payload = response.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:  # offline, refused, timeout
        raise ConnectionError(f"could not download {f.url} ({exc}). "
                              + _how_to_place(name, folder)) from None
    digest = _text_sha256(payload, f.url)
    if digest != f.sha256:
        raise ValueError(f"the file downloaded from {f.url} has SHA-256 {digest}, expected "
                         f"{f.sha256}: refusing it (truncated, tampered or changed upstream). "
                         + _how_to_place(name, folder))
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, _local_name(f))
    with atomic_write(path) as out:
        out.write(payload)
    return path


def fetch_libsvm_files(name, data_home=None, *, download=True):
    """Local paths of the files of LIBSVM data set ``name`` ("ijcnn1", "adult", "abalone"),
    downloading the missing ones when ``download`` (see the module notes).

    Raises ``FileNotFoundError`` (``download=False``) or ``ConnectionError`` (no network) with
    a message saying where to put which files, and ``ValueError`` for a download whose
    checksum is wrong (nothing is written then).
    """
    if name not in LIBSVM_DATASETS:
        raise ValueError(f"unknown LIBSVM data set {name!r} (known: "
                         f"{', '.join(sorted(LIBSVM_DATASETS))})")
    folder = get_libsvm_home(data_home)
    paths = []
    for f in LIBSVM_DATASETS[name].files:
        path = _found(folder, f)
        if path is None:
            if not download:
                raise FileNotFoundError(f"{f.stem}.bz2 not found in {folder!r}. "
                                        + _how_to_place(name, folder))
            path = _download(name, f, folder)
        paths.append(path)
    return paths


def _fetch_libsvm(name, data_home, download):
    spec = LIBSVM_DATASETS[name]
    paths = fetch_libsvm_files(name, data_home, download=download)
    parts = [load_svmlight(p, zero_based=spec.zero_based) for p in paths]
    d = max(X.shape[1] for X, _ in parts)
    parts = [(sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d)), y)
             for X, y in parts]
    out = Bunch(X=parts[0][0], y=parts[0][1], X_test=None, y_test=None, task=spec.task,
                paths=paths)
    if len(parts) > 1:
        out.X_test, out.y_test = parts[1]
    return out


def fetch_ijcnn1(data_home=None, *, download=True):
    """IJCNN1 (LIBSVM; 49,990 training and 91,701 test rows, 22 features, labels -1/+1).

    Parameters
    ----------
    data_home : str, optional
        fmlearn's data folder (default ``$FMLEARN_DATA`` or ``~/.cache/fmlearn``; the files
        are in its ``libsvm`` sub-folder, or in ``$FMLEARN_LIBSVM`` when that is set).
    download : bool, default=True
        Download missing files from the LIBSVM page (checksummed) when a network is there.

    Returns
    -------
    Bunch with ``X``, ``y`` (training), ``X_test``, ``y_test`` (CSR float64, same width),
    ``task`` and ``paths``.

    Examples
    --------
    >>> from fmlearn.datasets import fetch_ijcnn1
    >>> data = fetch_ijcnn1()  # doctest: +SKIP
    >>> data.X.shape, data.X_test.shape  # doctest: +SKIP
    ((49990, 22), (91701, 22))
    """
    return _fetch_libsvm("ijcnn1", data_home, download)


def fetch_adult(data_home=None, *, download=True):
    """Adult (LIBSVM's a9a, zero-based copy; 32,560 training and 16,280 test rows, 123
    features, labels -1/+1). Parameters and result as in :func:`fetch_ijcnn1`."""
    return _fetch_libsvm("adult", data_home, download)


def fetch_abalone(data_home=None, *, download=True):
    """Abalone (LIBSVM's abalone_scale; 4,177 rows, 8 features scaled to [-1, 1], ring counts
    as targets; no test file: ``X_test`` is None). Parameters as in :func:`fetch_ijcnn1`."""
    return _fetch_libsvm("abalone", data_home, download)


def fetch_movielens_100k(data_home=None, *, download=True, side_features=False):
    """MovieLens-100K from ``<data home>/ml-100k``, downloaded from GroupLens (MD5-checked)
    when missing: :func:`fmlearn.datasets.load_movielens_100k` with the same data home."""
    return load_movielens_100k(os.path.join(get_data_home(data_home), "ml-100k"),
                               download=download, side_features=side_features)


FETCHERS = {"ijcnn1": fetch_ijcnn1, "adult": fetch_adult, "abalone": fetch_abalone,
            "movielens-100k": fetch_movielens_100k}


def fetch(name, data_home=None, *, download=True):
    """One of the bundled benchmark data sets by name: "ijcnn1", "adult", "abalone" or
    "movielens-100k" (see the ``fetch_*`` functions)."""
    if name not in FETCHERS:
        raise ValueError(f"unknown data set {name!r} (known: {', '.join(sorted(FETCHERS))})")
    return FETCHERS[name](data_home, download=download)

