"""Checkpoints of a long fit: the estimator, written atomically in the safe model format.

A checkpoint is one file, ``<directory>/checkpoint.fmz``, written with
:func:`fmlearn.io.save_model` (so through :func:`fmlearn._files.atomic_write`: a reader, or a
restarted client, sees the previous checkpoint or the new one, never a torn file) and read
back with :func:`fmlearn.load` (no code from the file runs; a corrupt or crafted file is
refused with :class:`~fmlearn.exceptions.ModelFileError`). It holds the estimator as a fit of
the steps done so far would leave it (model, MCMC chain and kept samples, counters), plus one
attribute ``checkpoint_``, a JSON dict::

    {"kind": "...",            # what wrote it, e.g. "fd.fit/mcmc" or "fit_stream"
     "step": 12,               # steps (sweeps, epochs, batches) done
     "total": 20,              # steps the call runs in all
     "params": {...},          # the estimator's parameters (verbose, n_jobs left out)
     "fingerprint": {...},     # what identifies the data (shape, partitions, ...)
     "progress": {...}}        # whatever else the writer needs to continue exactly
                               # (random seed, stream position, ...)

The interface for a fitting loop (:class:`Checkpointer`):

* ``ck = Checkpointer(directory, every, kind, estimator, fingerprint)``; ``directory=None``
  turns everything off;
* ``found = ck.resume()``: None when there is no checkpoint, else ``(estimator, info)`` with
  the loaded estimator and its ``checkpoint_`` dict. A checkpoint of another call (other
  kind, parameters or data) raises ``ValueError`` naming the difference: it is never silently
  continued nor overwritten;
* ``ck.due(step, total)``: True when ``step`` (steps done, counted from the start of the whole
  fit, not of this process) is a multiple of ``every`` and below ``total``;
* ``ck.write(estimator, step, total, progress)``: writes the checkpoint (the estimator is saved as
  given, with ``checkpoint_`` set on a shallow copy, never on the caller's object);
* ``ck.finish()``: removes the file after a fit that ended normally, so that the next call
  with the same directory starts afresh.
"""

import copy
import math
import os

import numpy as np

from .exceptions import ModelFileError
from .io import _json_value, load, save_model

__all__ = ["CHECKPOINT_FILE", "Checkpointer"]

CHECKPOINT_FILE = "checkpoint.fmz"
# Parameters that do not change the result: a resumed call may set them differently.
_FREE_PARAMS = ("verbose", "n_jobs")


def _params(estimator):
    out = {}
    for key, value in sorted(estimator.get_params(deep=False).items()):
        if key in _FREE_PARAMS:
            continue
        if isinstance(value, np.random.RandomState):
            raise ValueError("checkpoint= needs random_state to be None or an int (a "
                             "RandomState object cannot be restored)")
        out[key] = _json_value(value, f"parameter {key}")
    return out


class Checkpointer:
    """Atomic checkpoints of an estimator every ``every`` steps (see the module docstring).

    Parameters
    ----------
    directory : str, os.PathLike or None
        Folder of the checkpoint file (created when missing); None: no checkpoints.
    every : int
        Write after every ``every`` steps (>= 1).
    kind : str
        What writes the checkpoint (a resumed call must be of the same kind).
    estimator : estimator
        The estimator being fitted (its parameters identify the call).
    fingerprint : dict
        JSON-able description of the data (a resumed call must give the same).
    """

    def __init__(self, directory, every, kind, estimator, fingerprint):
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
            raise ValueError(f"checkpoint_every must be a positive int, got {every!r}")
        self.every = int(every)
        self.kind = str(kind)
        self.params = _params(estimator) if directory is not None else None
        self.fingerprint = _json_value(fingerprint, "fingerprint")
        self.path = None
        if directory is not None:
            directory = os.fspath(directory)
            if os.path.exists(directory) and not os.path.isdir(directory):
                raise ValueError(f"checkpoint={directory!r} exists and is not a directory")
            os.makedirs(directory, exist_ok=True)
            self.path = os.path.join(directory, CHECKPOINT_FILE)

    @property
    def enabled(self):
        return self.path is not None

    def resume(self):
        """``(estimator, info)`` from the checkpoint file, or None when there is none."""
        if self.path is None or not os.path.exists(self.path):
            return None
        est = load(self.path)  # ModelFileError on anything but a valid model file
        info = getattr(est, "checkpoint_", None)
        if not isinstance(info, dict) or not {"kind", "step", "total", "params",
                                              "fingerprint", "progress"} <= set(info):
            raise ModelFileError(f"{self.path!r} is a model file but not a checkpoint (no "
                                 "checkpoint_ record)")
        for key, mine in (("kind", self.kind), ("params", self.params),
                          ("fingerprint", self.fingerprint)):
            if info[key] != mine:
                raise ValueError(
                    f"{self.path!r} is the checkpoint of another call (its {key} differ: "
                    f"{_difference(info[key], mine)}); delete it or use another directory")
        check_position(self.path, info)
        del est.checkpoint_
        return est, info

    def due(self, step, total):
        return self.path is not None and step % self.every == 0 and step < total

    def write(self, estimator, step, total, progress):
        """Save ``estimator`` with its ``checkpoint_`` record, atomically; return the path."""
        snap = copy.copy(estimator)
        snap.checkpoint_ = {"kind": self.kind, "step": int(step), "total": int(total),
                            "params": self.params, "fingerprint": self.fingerprint,
                            "progress": _json_value(progress, "progress")}
        return save_model(snap, self.path)

    def finish(self):
        if self.path is not None and os.path.exists(self.path):
            os.unlink(self.path)


# -- the recorded position --------------------------------------------------------------------
# A checkpoint is a file, so its record may be crafted: every number a resumed call starts from
# is checked against what the writer can have written (a negative skip would leave rows
# untrained, an epoch past the end train nothing), and a missing key is named.

def _int(value, lo, hi=None):
    return (isinstance(value, int) and not isinstance(value, bool) and value >= lo
            and (hi is None or value <= hi))


def _need(path, record, where, key, ok, what):
    if not isinstance(record, dict) or key not in record:
        raise ModelFileError(f"{path!r}: checkpoint record has no {where}{key!r}")
    value = record[key]
    if not ok(value):
        raise ModelFileError(f"{path!r}: checkpoint {where}{key!r} = {value!r} is not {what}")
    return value


def _stream_position(path, info):
    """fit_stream's ``progress``: ``position`` (epoch, calls, batches, rows, seconds, offset,
    skip; see :func:`fmlearn.stream._start`) and ``history`` (one entry per finished epoch)."""
    fp = info["fingerprint"]
    n_epochs = fp.get("n_epochs") if isinstance(fp, dict) else None
    source = fp.get("source") if isinstance(fp, dict) else None
    is_file = isinstance(source, dict) and "file" in source
    prog = info["progress"]
    pos = _need(path, prog, "progress ", "position", lambda v: isinstance(v, dict), "a dict")
    hist = _need(path, prog, "progress ", "history", lambda v: isinstance(v, dict), "a dict")
    w = "position "
    epoch = _need(path, pos, w, "epoch", lambda v: _int(v, 0, n_epochs - 1)
                  if _int(n_epochs, 1) else False, f"an epoch in [0, {n_epochs})")
    calls = _need(path, pos, w, "calls", lambda v: v == info["step"],
                  f"the step {info['step']}")
    _need(path, pos, w, "batches", lambda v: _int(v, 0, calls), f"an int in [0, {calls}]")
    rows = _need(path, pos, w, "rows", lambda v: _int(v, 0), "a count >= 0")
    _need(path, pos, w, "skip", lambda v: _int(v, 0, rows), f"a count in [0, rows={rows}]")
    _need(path, pos, w, "seconds", lambda v: isinstance(v, (int, float))
          and not isinstance(v, bool) and math.isfinite(v) and v >= 0, "a duration >= 0")
    if not is_file:
        _need(path, pos, w, "offset", lambda v: v is None, "None (the source is an iterable)")
    else:  # of the decompressed stream for .gz / .bz2: the reader refuses one past its end
        _need(path, pos, w, "offset", lambda v: _int(v, 0), "a byte offset >= 0")
    for key in ("rows", "batches", "seconds") + (("val",) if "val" in hist else ()):
        _need(path, hist, "history ", key, lambda v: isinstance(v, list) and len(v) == epoch,
              f"a list of the {epoch} finished epochs")
    if info["total"] != info["step"] + 1:
        raise ModelFileError(f"{path!r}: checkpoint total {info['total']!r} is not step + 1")


def _seeded_position(path, info, keys):
    """fd.fit's ``progress``: the random seed (and SGD's step count ``t``); ``total`` the
    parameters' n_iter."""
    _need(path, info["progress"], "progress ", "seed",
          lambda v: _int(v, 0, np.iinfo(np.int32).max), "a seed in [0, 2**31)")
    if "t" in keys:
        _need(path, info["progress"], "progress ", "t", lambda v: _int(v, 0), "a count >= 0")
    n_iter = info["params"].get("n_iter") if isinstance(info["params"], dict) else None
    if info["total"] != n_iter:
        raise ModelFileError(f"{path!r}: checkpoint total {info['total']!r} is not the "
                             f"parameters' n_iter {n_iter!r}")


def check_position(path, info):
    """Check the position a checkpoint record ``info`` resumes from (step, total, and the
    ``progress`` of its kind); raise :class:`~fmlearn.exceptions.ModelFileError` naming the
    first key that is missing or out of range."""
    for key in ("step", "total"):
        _need(path, info, "", key, lambda v: _int(v, 0), "a count >= 0")
    if not 0 < info["step"] < info["total"]:
        raise ModelFileError(f"{path!r}: checkpoint step {info['step']!r} out of range "
                             f"(0, {info['total']!r})")
    _need(path, info, "", "progress", lambda v: isinstance(v, dict), "a dict")
    kind = info["kind"]
    if kind == "fit_stream":
        _stream_position(path, info)
    elif kind == "fd.fit/sgd":
        _seeded_position(path, info, ("seed", "t"))
    elif isinstance(kind, str) and kind.startswith("fd.fit/"):
        _seeded_position(path, info, ("seed",))


def _difference(old, new):
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        return ", ".join(f"{k}: {old.get(k)!r} in the file, {new.get(k)!r} now" for k in keys)
    return f"{old!r} in the file, {new!r} now"
