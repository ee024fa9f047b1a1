"""Checkpoint/resume of fit_stream (issue 13, deliverable 4): a process killed with SIGKILL
after a checkpoint and restarted with the same call gives every row to partial_fit exactly
once over the two processes and ends bit-identical to an uninterrupted run (one-pass GFM from
a file whose chunks straddle the batches, SGD FM from an iterable over two epochs); a
checkpoint of another call is refused; the file is gone after a normal end."""

import inspect
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn import FMRegressor, GFMRegressor, load
from fmlearn.datasets import make_gfm, save_svmlight
from fmlearn.stream import fit_stream
from test_atomicity import _same

# Run in a child process: the same fit_stream call, logging the y of every batch given to
# partial_fit (one JSON line per batch, flushed), killing itself with SIGKILL when it is
# about to give batch number KILL_AT (counted in this process), and saving the final model.
SCRIPT = r"""
import json, os, signal, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import test_stream_checkpoint as t
from fmlearn.io import save_model
from fmlearn.stream import fit_stream

case, ckdir, log, out, kill_at = sys.argv[2:7]
kill_at = int(kill_at)
est, source, kw = t.CASES[case](os.path.dirname(log))
cls = type(est)
original = cls.partial_fit
calls = [0]

def logged(self, X, y, **k):
    calls[0] += 1
    if calls[0] == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    with open(log, "a") as f:
        f.write(json.dumps(np.asarray(y, dtype=float).tolist()) + "\n")
    return original(self, X, y, **k)

cls.partial_fit = logged
m = fit_stream(est, source, checkpoint=ckdir, checkpoint_every=2, **kw)
save_model(m, out)
with open(out + ".history", "w") as f:
    json.dump(m.stream_history_, f)
"""


def _gfm_file(folder, suffix=""):
    path = os.path.join(folder, "gfm.libfm" + suffix)
    if not os.path.exists(path):
        X, y, _ = make_gfm(9000, 12, 2, intercept=0.3, random_state=4)
        save_svmlight(sp.csr_matrix(X), y, path)
    est = GFMRegressor(n_factors=2, batch_size=700, random_state=0)
    # chunks of ~40 KB (about 300 rows): the checkpoints fall inside chunks (skip > 0)
    return est, path, {"chunk_size_bytes": 40_000, "n_features": 12, "zero_based": True}


def _sgd_chunks(folder):
    rng = np.random.default_rng(5)
    X = sp.random(3000, 40, density=0.1, format="csr", random_state=5)
    y = X @ rng.normal(size=40) + 0.1 * rng.normal(size=3000)
    chunks = [(X[a:a + 230], y[a:a + 230]) for a in range(0, 3000, 230)]
    est = FMRegressor(solver="sgd", n_factors=3, learning_rate=0.05, random_state=1)
    return est, chunks, {"batch_size": 500, "n_epochs": 2}


CASES = {"gfm-file": _gfm_file, "sgd-iterable": _sgd_chunks}


def _child(case, folder, ckdir, log, out, kill_at):
    here = os.path.dirname(os.path.abspath(__file__))
    return subprocess.run([sys.executable, "-c", SCRIPT, here, case, str(ckdir), str(log),
                           str(out), str(kill_at)], capture_output=True, text=True,
                          timeout=600, cwd=folder)


def _batches(log):
    with open(log) as f:
        return [json.loads(line) for line in f]


def _same_model(a, b):
    """Every attribute equal, arrays bit for bit (NaN where NaN), the timings aside."""
    va, vb = vars(a), vars(b)
    assert set(va) == set(vb)
    for key in va:
        if key != "stream_history_":
            _same(va[key], vb[key], key)


@pytest.mark.parametrize("case, kill_at", [("gfm-file", 6), ("sgd-iterable", 9)])
def test_killed_and_restarted_equals_uninterrupted(tmp_path, case, kill_at):
    ck = tmp_path / "ck"
    # the uninterrupted run, in a child process too (same code path, no kill)
    full = _child(case, tmp_path, tmp_path / "ck_full", tmp_path / "full.log",
                  tmp_path / "full.fmz", 0)
    assert full.returncode == 0, full.stderr
    first = _child(case, tmp_path, ck, tmp_path / "a.log", tmp_path / "a.fmz", kill_at)
    assert first.returncode == -signal.SIGKILL, first.stderr
    assert (ck / "checkpoint.fmz").exists()
    second = _child(case, tmp_path, ck, tmp_path / "b.log", tmp_path / "b.fmz", 0)
    assert second.returncode == 0, second.stderr
    assert not (ck / "checkpoint.fmz").exists()  # removed after the normal end

    ref, before, after = (_batches(tmp_path / n) for n in ("full.log", "a.log", "b.log"))
    # killed while giving batch kill_at: the last checkpoint was after batch kill_at - 2
    # (every 2 batches); batch kill_at - 1 was given and lost with the process
    done = kill_at - 2 if kill_at % 2 == 0 else kill_at - 1
    assert len(before) == kill_at - 1
    assert before == ref[:kill_at - 1]
    # the restart gives exactly the batches after the checkpoint: no row twice, none missed
    assert after == ref[done:]
    _same_model(load(tmp_path / "b.fmz"), load(tmp_path / "full.fmz"))
    with open(tmp_path / "b.fmz.history") as f, open(tmp_path / "full.fmz.history") as g:
        hb, hf = json.load(f), json.load(g)
    assert hb["rows"] == hf["rows"] and hb["batches"] == hf["batches"]


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_checkpoint_every_batch_of_a_file_resumes_at_each_position(tmp_path, suffix,
                                                                   monkeypatch):
    """Resuming from the checkpoint after every batch k (in process: the checkpoint file is
    copied as the run goes) gives the uninterrupted model each time; the positions are byte
    offsets of chunks (of the decompressed stream for .gz) and rows into them."""
    import shutil

    est, path, kw = _gfm_file(str(tmp_path), suffix)
    ref = fit_stream(GFMRegressor(**est.get_params()), path, **kw)
    n = ref.stream_history_["batches"][0]
    saved = []
    ck = tmp_path / "ck"
    original = inspect.getattr_static(GFMRegressor, "partial_fit")

    def copying(self, X, y, **k):
        if (ck / "checkpoint.fmz").exists():
            saved.append(tmp_path / f"copy{len(saved)}.fmz")
            shutil.copy(ck / "checkpoint.fmz", saved[-1])
        return original.__get__(self, type(self))(X, y, **k)

    with monkeypatch.context() as mp:  # restores the class as it was (descriptors included)
        mp.setattr(GFMRegressor, "partial_fit", copying)
        fit_stream(GFMRegressor(**est.get_params()), path, checkpoint=ck, checkpoint_every=1,
                   **kw)
    assert len(saved) == n - 1
    where = [load(c).checkpoint_["progress"]["position"] for c in saved]
    assert [p["rows"] for p in where] == [700 * k for k in range(1, n)]
    assert len({p["offset"] for p in where}) > 5 and max(p["skip"] for p in where) > 0
    for k, copy in enumerate(saved, start=1):
        shutil.copy(copy, ck / "checkpoint.fmz")
        m = fit_stream(GFMRegressor(**est.get_params()), path, checkpoint=ck, **kw)
        _same_model(m, ref)
        assert m.stream_history_["rows"] == ref.stream_history_["rows"], k


def test_checkpoint_of_another_call_is_refused(tmp_path, monkeypatch):
    est, chunks, kw = _sgd_chunks(str(tmp_path))
    ck = tmp_path / "ck"
    # partial_fit is an sklearn available_if descriptor: call it through the descriptor
    original = inspect.getattr_static(FMRegressor, "partial_fit")
    calls = [0]

    def stop(self, X, y, **k):
        calls[0] += 1
        if calls[0] == 4:
            raise KeyboardInterrupt
        return original.__get__(self, type(self))(X, y, **k)

    with monkeypatch.context() as mp, pytest.raises(KeyboardInterrupt):
        mp.setattr(FMRegressor, "partial_fit", stop)
        fit_stream(FMRegressor(**est.get_params()), chunks, checkpoint=ck,
                   checkpoint_every=2, **kw)
    assert not hasattr(FMRegressor(solver="als"), "partial_fit")  # the class as it was
    other = FMRegressor(**est.get_params()).set_params(learning_rate=0.01)
    with pytest.raises(ValueError, match="checkpoint of another call.*learning_rate"):
        fit_stream(other, chunks, checkpoint=ck, checkpoint_every=2, **kw)
    with pytest.raises(ValueError, match="checkpoint of another call.*batch_size"):
        fit_stream(FMRegressor(**est.get_params()), chunks, checkpoint=ck,
                   checkpoint_every=2, n_epochs=2, batch_size=400)
    with pytest.raises(ValueError, match="checkpoint_every"):
        fit_stream(FMRegressor(**est.get_params()), chunks, checkpoint=ck, checkpoint_every=0)
    # the same call resumes and ends as an uninterrupted one
    m = fit_stream(FMRegressor(**est.get_params()), chunks, checkpoint=ck, checkpoint_every=2,
                   **kw)
    ref = fit_stream(FMRegressor(**est.get_params()), chunks, **kw)
    _same_model(m, ref)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_positioned_chunks_cover_the_file_and_restart_at_their_boundaries(tmp_path, suffix):
    from fmlearn.datasets import load_svmlight
    from fmlearn.datasets._svmlight import _iter_positioned

    _, path, kw = _gfm_file(str(tmp_path), suffix)
    X, y = load_svmlight(path, n_features=12, zero_based=True)
    chunks = list(_iter_positioned(path, 40_000, 12, np.float64, True, None))
    assert all(a[3] == b[2] for a, b in zip(chunks, chunks[1:], strict=False))
    np.testing.assert_array_equal(np.concatenate([c[1] for c in chunks]), y)
    k = len(chunks) // 2
    rest = list(_iter_positioned(path, 40_000, 12, np.float64, True, None, chunks[k][2]))
    np.testing.assert_array_equal(np.concatenate([c[1] for c in rest]),
                                  np.concatenate([c[1] for c in chunks[k:]]))
    assert list(_iter_positioned(path, 40_000, 12, np.float64, True, None,
                                 chunks[-1][3])) == []
    with pytest.raises(ValueError, match="not where a chunk begins"):
        list(_iter_positioned(path, 40_000, 12, np.float64, True, None, chunks[k][2] + 1))


_NO_DASK_SCRIPT = r"""
import sys
import numpy as np

class NoDask:  # any import of dask fails, as without the extra installed
    def find_spec(self, name, path=None, target=None):
        if name == "dask" or name.startswith(("dask.", "distributed")):
            raise ImportError(f"{name} is blocked")

sys.meta_path.insert(0, NoDask())
from fmlearn import FMRegressor
from fmlearn.stream import fit_stream

rng = np.random.default_rng(0)
X = rng.normal(size=(60, 4))
y = X[:, 0] - X[:, 1]
batches = [(X[i:i + 10], y[i:i + 10]) for i in range(0, 60, 10)]
est = FMRegressor(2, solver="sgd", random_state=0)
ck = sys.argv[1]
fit_stream(est, batches, n_epochs=2, checkpoint=ck, checkpoint_every=2)
loaded = sorted(m for m in sys.modules if m == "dask" or m.startswith(("dask.", "distributed")))
print("dask modules:", loaded)
print("fitted:", bool(np.isfinite(est.predict(X)).all()))
"""


def test_checkpointed_fit_stream_needs_no_dask(tmp_path):
    """The checkpoint writer is Dask-free: a checkpointed fit_stream runs in a process where
    importing Dask fails, and leaves no Dask module loaded."""
    out = subprocess.run([sys.executable, "-c", _NO_DASK_SCRIPT, str(tmp_path / "ck")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "dask modules: []" in out.stdout
    assert "fitted: True" in out.stdout


def _interrupted(tmp_path, monkeypatch):
    """A checkpoint of the SGD iterable case, written after 2 of its partial_fit calls."""
    est, chunks, kw = _sgd_chunks(str(tmp_path))
    ck = tmp_path / "ck"
    original = inspect.getattr_static(FMRegressor, "partial_fit")
    calls = [0]

    def stop(self, X, y, **k):
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt
        return original.__get__(self, type(self))(X, y, **k)

    with monkeypatch.context() as mp, pytest.raises(KeyboardInterrupt):
        mp.setattr(FMRegressor, "partial_fit", stop)
        fit_stream(FMRegressor(**est.get_params()), chunks, checkpoint=ck,
                   checkpoint_every=2, **kw)
    return est, chunks, kw, ck


def _tamper(ck, edit):
    from fmlearn.io import save_model

    path = str(ck / "checkpoint.fmz")
    m = load(path)
    edit(m.checkpoint_)
    save_model(m, path)


@pytest.mark.parametrize("edit, words", [
    (lambda r: r["progress"]["position"].update(skip=-50), "'skip' = -50 is not a count"),
    (lambda r: r["progress"]["position"].update(epoch=10**9), "'epoch' = 1000000000 is not an "
                                                              r"epoch in \[0, 2\)"),
    (lambda r: r["progress"]["position"].pop("skip"), "has no position 'skip'"),
    (lambda r: r["progress"].pop("history"), "has no progress 'history'"),
    (lambda r: r.pop("progress"), "not a checkpoint"),
    (lambda r: r["progress"]["position"].update(offset=12), "'offset' = 12 is not None"),
    (lambda r: r["progress"]["position"].update(rows=1, skip=2), r"not a count in \[0, rows=1\]"),
    (lambda r: r.update(total=10**9), "total 1000000000 is not step \\+ 1"),
])
def test_crafted_checkpoint_position_is_refused(tmp_path, monkeypatch, edit, words):
    # A checkpoint is a file: the position it resumes from is checked (skip=-50 trained on 57
    # fewer rows, epoch=10**9 trained nothing, a missing key raised a bare KeyError).
    from fmlearn.exceptions import ModelFileError

    est, chunks, kw, ck = _interrupted(tmp_path, monkeypatch)
    _tamper(ck, edit)
    fresh = FMRegressor(**est.get_params())
    with pytest.raises(ModelFileError, match=words):
        fit_stream(fresh, chunks, checkpoint=ck, checkpoint_every=2, **kw)
    assert not hasattr(fresh, "w0_")  # nothing was restored into the estimator


def test_untampered_checkpoint_still_resumes(tmp_path, monkeypatch):
    est, chunks, kw, ck = _interrupted(tmp_path, monkeypatch)
    _tamper(ck, lambda r: None)
    m = fit_stream(FMRegressor(**est.get_params()), chunks, checkpoint=ck, checkpoint_every=2,
                   **kw)
    _same_model(m, fit_stream(FMRegressor(**est.get_params()), chunks, **kw))
