"""fit_stream's binary chunk cache (fmlearn._chunk_cache): later epochs read the parsed chunks
from disk instead of the text, with the same results bit for bit; a cache file changed during
the fit is refused; the cache folder is removed after the call, whether it succeeded or
failed; a cache that cannot be written leaves the text path, with a warning."""

import inspect
import os

import numpy as np
import pytest

import fmlearn
from fmlearn import FFMClassifier
from fmlearn.datasets import _libffm, make_ffm_ctr, save_libffm

KW = dict(batch_size=300, chunk_size_bytes=6000, classes=[0, 1])


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    X, y, fields, _, _ = make_ffm_ctr(1500, n_fields=4, n_values=20, n_factors=4,
                                      random_state=0)
    path = str(tmp_path_factory.mktemp("cache") / "train.ffm")
    save_libffm(X, y, fields, path)
    return path, fields


def _params(fields):
    return dict(fields=fields, random_state=0)


def _state(est):
    return [est.state_factors_, est.state_linear_, est.state_bias_]


def _count_parsed(monkeypatch):
    """Count the text chunks the libffm parser turns into rows."""
    calls = []
    block = _libffm._Parser.block

    def counting(self, begin, text):
        calls.append(begin)
        return block(self, begin, text)

    monkeypatch.setattr(_libffm._Parser, "block", counting)
    return calls


def _watch(monkeypatch, hook):
    """Call ``hook(n)`` before the n-th partial_fit of FFMClassifier (n from 0)."""
    original = inspect.getattr_static(FFMClassifier, "partial_fit")
    count = [0]

    def watched(self, X, y, **k):
        hook(count[0])
        count[0] += 1
        return original(self, X, y, **k)

    monkeypatch.setattr(FFMClassifier, "partial_fit", watched)


def test_cached_epochs_equal_the_text_bit_for_bit(stream, tmp_path, monkeypatch):
    """Three epochs with the cache equal three epochs parsing the text, to the last bit; the
    text is parsed once with the cache (every epoch without), the cache folder holds one
    file per chunk while the fit runs and nothing after."""
    path, fields = stream
    with monkeypatch.context() as mp:
        parsed = _count_parsed(mp)
        text = fmlearn.fit_stream(FFMClassifier(**_params(fields)), path, n_epochs=3,
                                  cache=False, **KW)
    n_chunks = len(parsed) // 3
    assert n_chunks >= 3 and len(parsed) == 3 * n_chunks
    folder = tmp_path / "c"
    folder.mkdir()
    seen = []
    with monkeypatch.context() as mp:
        parsed = _count_parsed(mp)
        _watch(mp, lambda n: seen.append(sorted(
            f for d in os.listdir(folder) for f in os.listdir(folder / d))))
        cached = fmlearn.fit_stream(FFMClassifier(**_params(fields)), path, n_epochs=3,
                                    cache=folder, **KW)
    assert len(parsed) == n_chunks
    assert seen[-1] == [f"chunk-{i:06d}.bin" for i in range(n_chunks)]
    assert os.listdir(folder) == []
    for a, b in zip(_state(text), _state(cached), strict=True):
        np.testing.assert_array_equal(a, b)
    assert cached.stream_history_["rows"] == text.stream_history_["rows"]


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_changed_cache_file_is_refused_and_removed(stream, tmp_path, monkeypatch, damage):
    """The last chunk's file changed at the first call of epoch 2 (1500 rows, 5 batches an
    epoch; the chunk is read later): ValueError naming it, and the folder removed."""
    path, fields = stream
    folder = tmp_path / "c"
    folder.mkdir()
    damaged = []

    def hook(n):
        if n != 5:
            return
        (sub,) = os.listdir(folder)
        name = folder / sub / sorted(os.listdir(folder / sub))[-1]
        data = bytearray(name.read_bytes())
        if damage == "flip":
            data[len(data) // 2] ^= 1
        else:
            data = data[:-4]
        name.write_bytes(bytes(data))
        damaged.append(name.name)

    with monkeypatch.context() as mp:
        _watch(mp, hook)
        with pytest.raises(ValueError, match="cache file .* is corrupt") as info:
            fmlearn.fit_stream(FFMClassifier(**_params(fields)), path, n_epochs=2, cache=folder,
                               **KW)
    assert damaged and damaged[0] in str(info.value)
    assert os.listdir(folder) == []


def test_cache_removed_after_a_failed_fit(stream, tmp_path, monkeypatch):
    """A parse error in the first epoch and an error raised by partial_fit in the second:
    the cache folder is empty afterwards."""
    path, fields = stream
    bad = tmp_path / "bad.ffm"
    text = open(path).read().splitlines()
    text[-5] = "1 0:1:1 junk"
    bad.write_text("\n".join(text) + "\n")
    folder = tmp_path / "c"
    folder.mkdir()
    with pytest.raises(ValueError, match="line"):
        fmlearn.fit_stream(FFMClassifier(**_params(fields)), str(bad), n_epochs=2, cache=folder,
                           **KW)
    assert os.listdir(folder) == []

    def hook(n):
        if n == 7:
            raise RuntimeError("stop")

    with monkeypatch.context() as mp:
        _watch(mp, hook)
        with pytest.raises(RuntimeError, match="stop"):
            fmlearn.fit_stream(FFMClassifier(**_params(fields)), path, n_epochs=2, cache=folder,
                               **KW)
    assert os.listdir(folder) == []


def test_an_unwritable_cache_falls_back_to_the_text(stream, tmp_path, monkeypatch):
    path, fields = stream
    ref = fmlearn.fit_stream(FFMClassifier(**_params(fields)), path, n_epochs=2, cache=False,
                             **KW)
    from fmlearn import _chunk_cache

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    folder = tmp_path / "c"
    folder.mkdir()
    with monkeypatch.context() as mp:
        mp.setattr(_chunk_cache.os, "replace", full)
        with pytest.warns(RuntimeWarning, match="No space left"):
            est = fmlearn.fit_stream(FFMClassifier(**_params(fields)), path, n_epochs=2,
                                     cache=folder, **KW)
    for a, b in zip(_state(ref), _state(est), strict=True):
        np.testing.assert_array_equal(a, b)
    assert os.listdir(folder) == []


def test_cache_argument_checked(stream, tmp_path):
    path, fields = stream
    with pytest.raises(TypeError, match="cache must be"):
        fmlearn.fit_stream(FFMClassifier(**_params(fields)), path, n_epochs=2, cache=3, **KW)
    with pytest.raises(ValueError, match="cache folder not found"):
        fmlearn.fit_stream(FFMClassifier(**_params(fields)), path, n_epochs=2,
                           cache=tmp_path / "missing", **KW)
