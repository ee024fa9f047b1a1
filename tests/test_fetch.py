"""fmlearn.datasets.fetch*: cache lookup, checksummed download (a file:// URL or a patched
urlopen: the suite never uses the network), refusal of a wrong checksum, the offline message."""

import bz2
import hashlib
import os
import urllib.error
import urllib.request

import numpy as np
import pytest

from fmlearn.datasets import (
    _fetch,
    fetch,
    fetch_libsvm_files,
    fetch_movielens_100k,
    get_data_home,
    get_libsvm_home,
    load_svmlight,
    save_svmlight,
)


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A registered two-file data set published as bz2 files under a file:// URL."""
    rng = np.random.default_rng(0)
    X = np.round(rng.normal(size=(30, 5)), 3) * (rng.random((30, 5)) < 0.6)
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    remote = tmp_path / "remote"
    remote.mkdir()
    files = []
    for part, rows in (("trn", slice(0, 20)), ("tst", slice(20, 30))):
        plain = remote / f"tiny.{part}"
        save_svmlight(X[rows], y[rows], str(plain))
        text = plain.read_bytes()
        (remote / f"tiny.{part}.bz2").write_bytes(bz2.compress(text))
        files.append(_fetch.RemoteFile(f"tiny.{part}", (remote / f"tiny.{part}.bz2").as_uri(),
                                       hashlib.sha256(text).hexdigest()))
    spec = _fetch.LibsvmDataset(tuple(files), zero_based=True, task="classification",
                                page="https://example.org/tiny")
    monkeypatch.setitem(_fetch.LIBSVM_DATASETS, "tiny", spec)
    monkeypatch.delenv("FMLEARN_LIBSVM", raising=False)
    monkeypatch.delenv("FMLEARN_DATA", raising=False)
    return X, y, spec, tmp_path / "home"


def _no_network(*args, **kwargs):
    raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")


def test_download_checks_and_caches(tiny, monkeypatch):
    X, y, _, home = tiny
    paths = fetch_libsvm_files("tiny", home)
    assert paths == [str(home / "libsvm" / "tiny.trn.bz2"), str(home / "libsvm" / "tiny.tst.bz2")]
    data = _fetch._fetch_libsvm("tiny", home, download=True)
    np.testing.assert_array_equal(data.X.toarray(), X[:20])
    np.testing.assert_array_equal(data.X_test.toarray(), X[20:])
    np.testing.assert_array_equal(np.concatenate([data.y, data.y_test]), y)
    # a cache hit never touches the network
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    assert fetch_libsvm_files("tiny", home) == paths
    assert fetch_libsvm_files("tiny", home, download=False) == paths


def test_plain_copies_placed_by_hand_are_found(tiny, monkeypatch):
    X, y, spec, home = tiny
    folder = home / "libsvm"
    folder.mkdir(parents=True)
    for f in spec.files:
        remote = f.url.removeprefix("file://")
        (folder / f.stem).write_bytes(bz2.decompress(open(remote, "rb").read()))
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    assert fetch_libsvm_files("tiny", home) == [str(folder / "tiny.trn"), str(folder / "tiny.tst")]


def test_wrong_checksum_is_refused_and_nothing_written(tiny, monkeypatch):
    _, _, spec, home = tiny
    bad = _fetch.RemoteFile(spec.files[0].stem, spec.files[0].url, "0" * 64)
    monkeypatch.setitem(_fetch.LIBSVM_DATASETS, "tiny",
                        _fetch.LibsvmDataset((bad,), True, "classification", spec.page))
    with pytest.raises(ValueError, match="SHA-256 .* expected 0{64}: refusing it") as exc:
        fetch_libsvm_files("tiny", home)
    assert "Put the tiny files in" in str(exc.value)
    folder = home / "libsvm"
    assert not folder.exists() or not any(folder.iterdir())  # no file, no temporary


def test_offline_message_says_where_to_put_the_files(tiny, monkeypatch):
    _, _, spec, home = tiny
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    with pytest.raises(ConnectionError) as exc:
        fetch_libsvm_files("tiny", home)
    msg = str(exc.value)
    folder = os.path.join(str(home), "libsvm")
    assert f"could not download {spec.files[0].url}" in msg
    assert repr(folder) in msg and "tiny.trn.bz2 (or tiny.trn)" in msg and "tiny.tst.bz2" in msg
    assert "$FMLEARN_LIBSVM" in msg and "https://example.org/tiny" in msg
    with pytest.raises(FileNotFoundError, match="tiny.trn.bz2 not found in"):
        fetch_libsvm_files("tiny", home, download=False)


def test_locations_follow_arguments_then_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("FMLEARN_LIBSVM", raising=False)
    monkeypatch.delenv("FMLEARN_DATA", raising=False)
    assert get_data_home() == os.path.expanduser(os.path.join("~", ".cache", "fmlearn"))
    monkeypatch.setenv("FMLEARN_DATA", str(tmp_path / "d"))
    assert get_data_home() == str(tmp_path / "d")
    assert get_libsvm_home() == str(tmp_path / "d" / "libsvm")
    monkeypatch.setenv("FMLEARN_LIBSVM", str(tmp_path / "l"))
    assert get_libsvm_home() == str(tmp_path / "l")
    # an explicit data home wins over both variables
    assert get_libsvm_home(tmp_path / "x") == str(tmp_path / "x" / "libsvm")


def test_movielens_offline_and_unknown_names(tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    with pytest.raises(ConnectionError, match="ml-100k"):
        fetch_movielens_100k(tmp_path)
    with pytest.raises(ConnectionError, match="could not download"):
        fetch("ijcnn1", tmp_path)
    with pytest.raises(ValueError, match="unknown data set 'mnist'"):
        fetch("mnist")


@pytest.mark.skipif(not os.environ.get("FMLEARN_LIBSVM"),
                    reason="needs the LIBSVM copies in $FMLEARN_LIBSVM")
@pytest.mark.parametrize("name", sorted(_fetch.LIBSVM_DATASETS))
def test_registered_checksums_match_the_local_copies(name):
    for path, f in zip(fetch_libsvm_files(name, download=False),
                       _fetch.LIBSVM_DATASETS[name].files, strict=True):
        payload = open(path, "rb").read()
        assert _fetch._text_sha256(payload, path) == f.sha256, path
    X, y = load_svmlight(fetch_libsvm_files(name, download=False)[0],
                         zero_based=_fetch.LIBSVM_DATASETS[name].zero_based)
    assert X.shape[0] == y.shape[0] > 1000
