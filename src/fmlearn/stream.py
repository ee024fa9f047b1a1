"""Out-of-core learning: feed an estimator's ``partial_fit`` from a file or an iterable of
batches, holding one chunk of input (plus at most two batches) in memory at a time.

A source is a svmlight / libFM file (plain, ``.gz`` or ``.bz2``), read in chunks of rows by
:func:`fmlearn.datasets.iter_svmlight` with one width for the whole file, or any iterable of
``(X, y)`` / ``(X, y, sample_weight)`` batches (a list, a generator function, the blocks of a
Dask collection from :func:`fmlearn.distributed.blocks`). :func:`rebatch` cuts the chunks into
the batches the estimator needs (the one-pass generalized FM wants n ~ c k d rows per step, its
own ``batch_size``), and :func:`fit_stream` passes them to ``partial_fit`` in order. The result
is exactly that of calling ``partial_fit`` on the same batches with everything in memory.
"""

import collections
import numbers
import os
import time

import numpy as np
import scipy.sparse as sp

from ._data import check_sparse_structure
from ._renamed import renamed_kwargs

__all__ = ["fit_stream", "rebatch"]

_LAST_BATCH = ("merge", "keep", "drop")


def _n_rows(X):
    return X.shape[0]


def _concat(parts):
    if len(parts) == 1:
        return parts[0]
    if any(sp.issparse(p) for p in parts):
        return sp.vstack([sp.csr_matrix(p) for p in parts], format="csr")
    return np.concatenate(parts, axis=0)


def _as_triple(item, where):
    if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
        raise TypeError(f"{where} must yield (X, y) or (X, y, sample_weight) tuples, got "
                        f"{type(item).__name__}")
    X, y = item[0], item[1]
    sw = item[2] if len(item) == 3 else None
    if not hasattr(X, "shape") or len(X.shape) != 2:
        raise TypeError(f"{where}: X must be a 2-D array or sparse matrix, got "
                        f"{type(X).__name__}")
    check_sparse_structure(X, f"{where}: X")
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"{where}: y has shape {y.shape} but X has {X.shape[0]} rows")
    if sw is not None:
        sw = np.asarray(sw, dtype=np.float64)
        if sw.shape != y.shape:
            raise ValueError(f"{where}: sample_weight has shape {sw.shape}, expected {y.shape}")
    return X, y, sw


@renamed_kwargs(batch_rows="batch_size")
def rebatch(batches, batch_size, last_batch="merge"):
    """Cut a stream of ``(X, y[, sample_weight])`` chunks into batches of ``batch_size`` rows.

    Rows keep their order; chunks may be larger or smaller than a batch. Every batch but the
    last has exactly ``batch_size`` rows; ``last_batch`` says what happens to the rows left at
    the end of the stream:

    * ``"merge"`` (default): they join the previous batch, so the last batch has between
      ``batch_size`` and ``2 * batch_size - 1`` rows (a short batch would be a poor step for
      the one-pass generalized FM). This looks one batch ahead: at most about two batches
      plus one chunk are held in memory.
    * ``"keep"``: they form a last, shorter batch.
    * ``"drop"``: they are discarded.

    A stream shorter than one batch gives one short batch ("merge", "keep") or none ("drop").

    Parameters
    ----------
    batches : iterable of (X, y) or (X, y, sample_weight)
        ``X`` dense 2-D arrays or scipy sparse matrices (the output is CSR when any chunk is
        sparse), all with the same number of columns.
    batch_size : int or None
        Rows per batch; ``None`` passes the chunks through unchanged.
    last_batch : {"merge", "keep", "drop"}, default="merge"

    Yields
    ------
    X, y, sample_weight : sample_weight is None unless some chunk carried weights (chunks
        without weights then count as weight 1).

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn.stream import rebatch
    >>> chunks = [(np.zeros((n, 2)), np.arange(n)) for n in (3, 7, 4)]
    >>> [X.shape[0] for X, y, sw in rebatch(chunks, 5)]
    [5, 9]
    >>> [X.shape[0] for X, y, sw in rebatch(chunks, 5, last_batch="keep")]
    [5, 5, 4]
    """
    if batch_size is not None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
            raise TypeError(f"batch_size must be a positive int or None, got {batch_size!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if last_batch not in _LAST_BATCH:
        raise ValueError(f"last_batch must be one of {_LAST_BATCH}, got {last_batch!r}")
    return _rebatch(batches, None if batch_size is None else int(batch_size), last_batch)


def _rebatch(batches, size, last_batch):
    width = None
    Xs, ys, sws = [], [], []
    held = 0
    weighted = False
    # Emit a full batch only when the rows after it can still make a batch of their own: then
    # the rows left at the end are >= size and can be merged without holding a third batch.
    threshold = 2 * size if (size is not None and last_batch == "merge") else size

    def joined():
        ws = None
        if weighted:
            ws = np.concatenate([np.ones(_n_rows(x)) if w is None else w
                                 for x, w in zip(Xs, sws, strict=True)])
        return _concat(Xs), np.concatenate(ys), ws

    for i, item in enumerate(batches):
        X, y, sw = _as_triple(item, f"batch source (item {i})")
        if width is None:
            width = X.shape[1]
        elif X.shape[1] != width:
            raise ValueError(f"batch source (item {i}): X has {X.shape[1]} columns, the first "
                             f"chunk had {width}")
        if X.shape[0] == 0:
            continue
        if size is None:
            yield X, y, sw
            continue
        weighted = weighted or sw is not None
        Xs.append(X)
        ys.append(y)
        sws.append(sw)
        held += X.shape[0]
        if held < threshold:
            continue
        Xa, ya, wa = joined()
        start = 0
        while held - start >= threshold:
            stop = start + size
            yield Xa[start:stop], ya[start:stop], None if wa is None else wa[start:stop]
            start = stop
        Xs, ys = [Xa[start:]], [ya[start:]]
        sws = [None if wa is None else wa[start:]]
        held -= start
    if size is None or held == 0:
        return
    Xa, ya, wa = joined()
    if last_batch != "drop":  # "drop" discards a remainder shorter than a batch
        yield Xa, ya, wa


def _resolve_batch_size(estimator, batch_size, n_features):
    """``batch_size``, else the estimator's own batch size for ``n_features`` columns (the
    one-pass models resolve "auto" with ``resolve_batch_size``)."""
    if batch_size is not None:
        return batch_size
    if hasattr(estimator, "resolve_batch_size"):
        return int(estimator.resolve_batch_size(n_features))
    size = getattr(estimator, "batch_size", None)
    if size is None or isinstance(size, str):
        return None
    return int(size)


def _libffm_source(estimator, source, chunk_size_bytes, n_features, dtype):
    """``reopen`` of a libffm file for a field-aware estimator: chunks of the width of its
    feature-to-field map (``fields_`` once fitted, else ``fields``; when both are None the map
    is read from the file by a first pass and given to the estimator as ``fields``), the next
    chunk parsed in a background thread while the estimator learns from this one (one more
    chunk in memory)."""
    from .datasets._libffm import DEFAULT_CHUNK, iter_positioned, scan_libffm

    path = os.fspath(source)
    chunk = DEFAULT_CHUNK if chunk_size_bytes is None else int(chunk_size_bytes)
    fields = getattr(estimator, "fields_", None)
    if fields is None:
        fields = estimator.get_params(deep=False)["fields"]
    if fields is None:
        fields = scan_libffm(path, chunk_size_bytes=chunk).fields
        estimator.set_params(fields=fields)
    if n_features is not None and int(n_features) != len(fields):
        raise ValueError(f"n_features={n_features} differs from the estimator's field map "
                         f"({len(fields)} features)")

    def read_file(start=0):
        # the next chunk is parsed in a thread while partial_fit learns from this one
        for X, y, begin, end in iter_positioned(path, chunk, start, fields=fields, dtype=dtype,
                                                prefetch=True):
            yield (X, y), begin, end

    return read_file


def _open_source(source, n_epochs, chunk_size_bytes, n_features, zero_based, dtype,
                 estimator=None):
    """A function ``reopen(start)`` returning a fresh iterable of ``(chunk, begin, end)`` for
    every epoch: ``begin`` / ``end`` the chunk's byte range in a file (None for an iterable);
    a file is read from byte ``start`` (a chunk boundary), an iterable from its start. A file
    is a libffm file for a field-aware estimator (one with a ``fields`` parameter), else a
    svmlight / libFM file."""
    if (isinstance(source, (str, os.PathLike)) and estimator is not None
            and "fields" in estimator.get_params(deep=False)):
        return _libffm_source(estimator, source, chunk_size_bytes, n_features, dtype)
    if isinstance(source, (str, os.PathLike)):
        from .datasets import iter_svmlight
        from .datasets._svmlight import _iter_positioned

        kw = {} if chunk_size_bytes is None else {"chunk_size_bytes": chunk_size_bytes}
        iter_svmlight(source, n_features=n_features, dtype=dtype, zero_based=zero_based,
                      **kw)  # checks the arguments now; the generator below reads the file

        def read_file(start=0):
            chunk = kw.get("chunk_size_bytes", 64 * 2**20)
            for X, y, begin, end in _iter_positioned(os.fspath(source), int(chunk), n_features,
                                                     dtype, zero_based, None, start):
                yield (X, y), begin, end

        return read_file
    if hasattr(source, "__dask_graph__"):
        raise TypeError("fit_stream got a Dask collection: wrap it as "
                        "fmlearn.distributed.blocks(X, y) (each block is then computed on the "
                        "cluster and streamed)")
    if callable(source):
        opener = source
    else:
        try:
            it = iter(source)
        except TypeError:
            raise TypeError("source must be a path to a svmlight/libFM file, an iterable of "
                            "(X, y) batches or a callable returning one; got "
                            f"{type(source).__name__}") from None
        if it is source and n_epochs > 1:
            raise ValueError("source is a one-shot iterator and cannot be read for n_epochs="
                             f"{n_epochs}: pass a list, a callable returning a fresh iterator "
                             "(e.g. a generator function) or a path")
        first = [it]

        def opener():
            return first.pop() if first else iter(source)

    def reopen(start=0):
        for item in opener():
            yield item, None, None

    return reopen


def _eval_metric(estimator, eval_set):
    from sklearn.base import is_classifier
    from sklearn.metrics import root_mean_squared_error, zero_one_loss

    X_val, y_val = eval_set
    pred = estimator.predict(X_val)
    if is_classifier(estimator):
        return float(zero_one_loss(np.asarray(y_val), pred))
    return float(root_mean_squared_error(np.asarray(y_val, dtype=np.float64), pred))


class _Position:
    """Where, in the source, the next row not yet given to ``partial_fit`` is.

    ``rows`` counts the rows of the epoch given to ``partial_fit``; the chunks read but not
    wholly given (the rebatcher holds up to two batches ahead) are kept as ``(begin, end,
    first_row, n_rows)``. :meth:`at` turns ``rows`` into ``(offset, skip)``: for a file the
    byte offset where the chunk holding the next row begins and how many of its rows were
    given (``skip``); for an iterable ``offset`` is None and ``skip`` counts the rows of the
    epoch to pass over."""

    def __init__(self, rows, offset, skip):
        self.rows = rows  # rows of the epoch given to partial_fit (before this process, too)
        self.read = rows - skip  # rows of the epoch before the first chunk read here
        self.offset = offset
        self.pending = collections.deque()

    def chunks(self, positioned, skip):
        """The chunks of ``positioned`` (``(chunk, begin, end)``), the first ``skip`` rows of
        the stream left out; records where each comes from."""
        for i, (item, begin, end) in enumerate(positioned):
            if not (isinstance(item, (tuple, list)) and len(item) in (2, 3)
                    and len(getattr(item[0], "shape", ())) == 2):
                yield item  # not a chunk: rebatch names the problem
                continue
            n = item[0].shape[0]
            if begin is not None:
                self.pending.append((begin, end, self.read, n))
            self.read += n
            if skip >= n:
                skip -= n
                continue
            if skip:
                X, y, sw = _as_triple(item, f"batch source (item {i})")
                X = X.tocsr() if sp.issparse(X) else X
                item = (X[skip:], y[skip:]) if sw is None else (X[skip:], y[skip:], sw[skip:])
                skip = 0
            yield item
        if skip:
            raise ValueError(f"the source has {skip} rows fewer than the checkpoint recorded "
                             "as read: is it the same source?")

    def at(self):
        if self.offset is None and not self.pending:  # an iterable: skip rows from its start
            return None, self.rows
        while self.pending and self.pending[0][2] + self.pending[0][3] <= self.rows:
            self.offset = self.pending.popleft()[1]  # chunk given: the next begins at its end
        if not self.pending:
            return self.offset, 0
        begin, _, first, _ = self.pending[0]
        return begin, self.rows - first


def _epoch(estimator, chunks, batch_size, last_batch, classes, bar, after_batch):
    """One pass over ``chunks`` through ``partial_fit`` (``classes`` passed to the first call
    when not None; ``after_batch(rows)`` called after every call with the rows given so
    far); returns (rows, batches)."""
    rows = batches = 0
    head = next(chunks, None)
    if head is None:
        return rows, batches
    X0 = _as_triple(head, "batch source (item 0)")[0]
    size = _resolve_batch_size(estimator, batch_size, X0.shape[1])

    def stream():
        yield head
        yield from chunks

    for Xb, yb, swb in rebatch(stream(), size, last_batch):
        kw = {}
        if swb is not None:
            kw["sample_weight"] = swb
        if classes is not None and batches == 0:
            kw["classes"] = classes
        estimator.partial_fit(Xb, yb, **kw)
        rows += Xb.shape[0]
        batches += 1
        bar.update(1)
        after_batch(Xb.shape[0])
    return rows, batches


def _checkpointer(directory, every, estimator, source, n_epochs, batch_size, last_batch,
                  chunk_size_bytes, n_features, zero_based, dtype):
    """The :class:`~fmlearn._checkpoint.Checkpointer` of a ``fit_stream`` call, or
    None. The fingerprint holds what fixes the stream's rows and batches (a file's name and
    size; an iterable cannot be identified: the caller must pass the same one)."""
    if directory is None:
        if isinstance(every, bool) or not isinstance(every, numbers.Integral) or every < 1:
            raise ValueError(f"checkpoint_every must be a positive int, got {every!r}")
        return None
    from ._checkpoint import Checkpointer

    if isinstance(source, (str, os.PathLike)):
        src = {"file": os.path.basename(os.fspath(source)),
               "bytes": os.path.getsize(source)}
    else:
        src = {"iterable": type(source).__name__}
    fingerprint = {"source": src, "n_epochs": int(n_epochs), "batch_size": batch_size,
                   "last_batch": last_batch, "chunk_size_bytes": chunk_size_bytes,
                   "n_features": n_features, "zero_based": zero_based,
                   "dtype": np.dtype(dtype).name, "estimator": type(estimator).__name__}
    return Checkpointer(directory, every, "fit_stream", estimator, fingerprint)


def _restore(estimator, loaded):
    """Give ``estimator`` the learned state of ``loaded`` (same class and parameters: the
    checkpoint checked them), keeping its own parameters."""
    params = set(estimator.get_params(deep=False))
    for key in [k for k in vars(estimator) if k not in params]:
        delattr(estimator, key)
    for key, value in vars(loaded).items():
        if key not in params:
            setattr(estimator, key, value)


def _check_arguments(estimator, n_epochs, batch_size, last_batch, eval_set):
    """Refuse the arguments of :func:`fit_stream` that cannot stream; returns ``eval_set`` as a
    pair (or None)."""
    if not hasattr(estimator, "partial_fit"):
        extra = ""
        if getattr(estimator, "solver", None) not in (None, "sgd") and hasattr(
                type(estimator), "partial_fit"):
            extra = " (partial_fit needs solver='sgd')"
        raise TypeError(f"{type(estimator).__name__} has no partial_fit{extra}; fit_stream "
                        "feeds estimators batch by batch through it")
    if isinstance(n_epochs, bool) or not isinstance(n_epochs, numbers.Integral) or n_epochs < 1:
        raise ValueError(f"n_epochs must be a positive int, got {n_epochs!r}")
    if batch_size is not None:
        rebatch([], batch_size, last_batch)  # validates batch_size / last_batch
    if last_batch not in _LAST_BATCH:
        raise ValueError(f"last_batch must be one of {_LAST_BATCH}, got {last_batch!r}")
    if eval_set is not None:
        try:
            X_val, y_val = eval_set
        except (TypeError, ValueError):
            raise ValueError("eval_set must be a pair (X_val, y_val)") from None
        eval_set = (X_val, y_val)
    return eval_set


def _start(ck, estimator, eval_set):
    """Where a :func:`fit_stream` call starts: the position and history of the checkpoint
    ``ck`` holds (the estimator restored from it), else the beginning."""
    history = {"rows": [], "batches": [], "seconds": []}
    if eval_set is not None:
        history["val"] = []
    # where the call is: epochs done, and in the current epoch the batches and rows given to
    # partial_fit, the seconds spent, and (offset, skip) of the next row (see _Position)
    pos = {"calls": 0, "epoch": 0, "batches": 0, "rows": 0, "seconds": 0.0,
           "offset": 0, "skip": 0}
    found = ck.resume() if ck is not None else None
    if found is not None:
        _restore(estimator, found[0])
        pos = found[1]["progress"]["position"]
        history = found[1]["progress"]["history"]
    return pos, history


def _batch_hook(ck, estimator, pos, history, where, epoch, t0):
    """The ``after_batch(n)`` of one epoch of :func:`fit_stream`: counts the call and the rows
    and, when the checkpointer ``ck`` is due, writes the estimator and the position ``pos``."""
    spent, batches0 = pos["seconds"], pos["batches"] - pos["calls"]

    def after_batch(n):
        pos["calls"] += 1
        where.rows += n
        if ck is None or not ck.due(pos["calls"], pos["calls"] + 1):
            return
        offset, skip = where.at()
        pos.update(epoch=epoch, rows=where.rows, offset=offset, skip=skip,
                   batches=batches0 + pos["calls"], seconds=spent + time.perf_counter() - t0)
        # the stream's length is unknown: the record's total is "one step more"
        ck.write(estimator, pos["calls"], pos["calls"] + 1,
                 {"position": pos, "history": history})

    return after_batch


def _end_epoch(estimator, history, rows, batches, seconds, eval_set, bar):
    """Record an epoch of :func:`fit_stream` in ``history`` (scored on ``eval_set``)."""
    if rows == 0:
        raise ValueError("the source yielded no rows" + (
            "" if not history["rows"] else f" in epoch {len(history['rows']) + 1}"))
    history["rows"].append(rows)
    history["batches"].append(batches)
    history["seconds"].append(seconds)
    if eval_set is not None:
        history["val"].append(_eval_metric(estimator, eval_set))
        bar.set_postfix({"val": f"{history['val'][-1]:.4g}"})


@renamed_kwargs(batch_rows="batch_size")
def fit_stream(estimator, source, *, n_epochs=1, batch_size=None, last_batch="merge",
               eval_set=None, classes=None, chunk_size_bytes=None, n_features=None,
               zero_based="auto", dtype=np.float64, checkpoint=None, checkpoint_every=10,
               cache=True, verbose=0):
    """Train ``estimator`` with ``partial_fit`` on a stream read chunk by chunk.

    Equivalent to calling ``estimator.partial_fit`` on the batches of
    ``rebatch(chunks, batch_size, last_batch)`` in order, ``n_epochs`` times, with the whole
    data in memory (the results are identical); a fitted estimator continues from its state
    (pass ``sklearn.base.clone(estimator)`` to start afresh). Memory holds one chunk and at most
    two batches, whatever the length of the stream.

    Parameters
    ----------
    estimator : estimator with ``partial_fit``
        For example ``FMRegressor(solver="sgd")`` / ``FMClassifier(solver="sgd")`` (one SGD
        epoch per call), :class:`fmlearn.GFMRegressor`, :class:`fmlearn.IFMRegressor`, the
        rank-one sensing models (one step of the one-pass solver per batch), or any
        scikit-learn estimator with ``partial_fit``.
    source : str, os.PathLike, iterable or callable
        A svmlight / libFM file (``.gz`` / ``.bz2`` decompressed on the fly), read with
        :func:`fmlearn.datasets.iter_svmlight`; for a field-aware estimator
        (:class:`fmlearn.FFMClassifier`, :class:`fmlearn.FFMRegressor`) a libffm file, read
        with :func:`fmlearn.datasets.iter_libffm` and the estimator's field map (read from
        the file by a first pass, and set as its ``fields``, when it has none), the next
        chunk parsed in a background thread while the estimator learns; or an
        iterable of ``(X, y)`` or ``(X, y, sample_weight)`` chunks; or a callable returning
        such an iterable (called once per epoch). A one-shot iterator (e.g. a generator
        object) allows only ``n_epochs=1``.
    n_epochs : int, default=1
        Passes over the source (a file is re-read, a callable called again).
    batch_size : int or None, default=None
        Rows per ``partial_fit`` call. ``None`` uses the estimator's own ``batch_size`` when it
        has one ("auto" resolved for the stream's width: 10 k d rows for the one-pass models),
        and otherwise passes the chunks as they come.
    last_batch : {"merge", "keep", "drop"}, default="merge"
        What to do with the rows left at the end of an epoch (see :func:`rebatch`).
    eval_set : (X_val, y_val), optional
        Held-out data scored after every epoch: RMSE for a regressor, error rate for a
        classifier.
    classes : array-like, optional
        Both labels, passed to the first ``partial_fit`` of a classifier (needed when the first
        batch holds only one label).
    chunk_size_bytes : int, optional
        Size of the file chunks in bytes of text (default: that of
        :func:`~fmlearn.datasets.iter_svmlight`).
    n_features, zero_based : optional
        As in :func:`~fmlearn.datasets.iter_svmlight`. ``n_features=None`` takes the width of
        a fitted estimator, else that of the file; give both to read the file once per epoch
        (otherwise a first pass finds the width).
    dtype : {np.float64, np.float32}, default=np.float64
        dtype of the chunks read from a file.
    checkpoint : str or os.PathLike, optional
        A folder for a checkpoint: every ``checkpoint_every`` batches the estimator and the
        stream position (epoch, batches, rows given to ``partial_fit`` in the epoch and, for
        a file, the byte offset of the chunk holding the next row) are written atomically to
        ``<checkpoint>/checkpoint.fmz`` in the safe model format. The same call run again
        after the process died resumes from it: the estimator is restored, a file is read from
        that offset (an iterable is read from its start and the rows already given are passed
        over), and the fit ends as an uninterrupted run would, bit for bit. A checkpoint of
        another call (other parameters, source, batching) is refused with ``ValueError``; the
        file is removed when the stream ends normally. Only fmlearn estimators (those
        :func:`fmlearn.io.save_model` can write) are checkpointed, and ``random_state`` must be
        None or an int. See docs/distributed.md for what is guaranteed.
    checkpoint_every : int, default=10
        Batches between checkpoints (counted over the whole call, across epochs).
    cache : bool or str or os.PathLike, default=True
        For a file read for more than one epoch: the first epoch that reads the whole file
        writes its parsed chunks to a binary cache, a private temporary folder made in the
        system's temporary folder (``True``) or in the folder given, and the later epochs read
        the chunks from there instead of parsing the text again (as LIBFFM's binary cache;
        the results are the same, bit for bit). The disk holds the parsed rows once (8 bytes
        per non-zero in float32, 12 in float64, about 12 per row); memory still holds one chunk.
        A cache file changed while the fit runs is refused with ``ValueError``; when the cache
        cannot be written (e.g. a full disk) a ``RuntimeWarning`` says so and every epoch
        reads the text. The folder is removed when the call returns or fails (a process
        killed outright leaves it: ``fmlearn-stream-cache-*``). ``False`` parses the text
        every epoch.
    verbose : int, default=0
        Progress bar over batches (with the epoch's validation score).

    Returns
    -------
    estimator
        The same object, trained. ``estimator.stream_history_`` holds one entry per epoch:
        ``"rows"``, ``"batches"``, ``"seconds"`` and, with ``eval_set``, ``"val"``.

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import GFMRegressor
    >>> from fmlearn.datasets import make_gfm
    >>> from fmlearn.stream import fit_stream
    >>> X, y, truth = make_gfm(12000, 20, 2, random_state=0)
    >>> chunks = [(X[i:i + 700], y[i:i + 700]) for i in range(0, 12000, 700)]
    >>> m = fit_stream(GFMRegressor(n_factors=2, batch_size=1000, random_state=0), chunks)
    >>> m.n_batches_, m.stream_history_["rows"]
    (12, [12000])
    """
    eval_set = _check_arguments(estimator, n_epochs, batch_size, last_batch, eval_set)
    if n_features is None and hasattr(estimator, "n_features_in_"):
        n_features = int(estimator.n_features_in_)
    reopen = _open_source(source, n_epochs, chunk_size_bytes, n_features, zero_based, dtype,
                          estimator)

    import inspect

    from ._base import progress

    takes_classes = "classes" in inspect.signature(estimator.partial_fit).parameters
    is_file = isinstance(source, (str, os.PathLike))
    ck = _checkpointer(checkpoint, checkpoint_every, estimator, source, n_epochs, batch_size,
                       last_batch, chunk_size_bytes, n_features, zero_based, dtype)
    pos, history = _start(ck, estimator, eval_set)

    from ._chunk_cache import make_cache

    cached = make_cache(cache, source, n_epochs - pos["epoch"])
    items = None
    try:
        with progress(verbose, None, f"fit_stream[{type(estimator).__name__}]") as bar:
            for epoch in range(pos["epoch"], n_epochs):
                t0 = time.perf_counter()
                first_call = classes if (takes_classes and pos["calls"] == 0) else None
                where = _Position(pos["rows"], pos["offset"] if is_file else None, pos["skip"])
                start_rows, start_batches, spent = pos["rows"], pos["batches"], pos["seconds"]
                after_batch = _batch_hook(ck, estimator, pos, history, where, epoch, t0)
                items = (reopen(pos["offset"] or 0) if cached is None
                         else cached.chunks(reopen, pos["offset"] or 0))
                chunks = where.chunks(items, pos["skip"])
                rows, batches = _epoch(estimator, chunks, batch_size, last_batch, first_call,
                                       bar, after_batch)
                _end_epoch(estimator, history, rows + start_rows, batches + start_batches,
                           spent + time.perf_counter() - t0, eval_set, bar)
                pos.update(epoch=epoch + 1, batches=0, rows=0, seconds=0.0, offset=0, skip=0)
    finally:
        if items is not None and hasattr(items, "close"):
            items.close()  # stops a read-ahead thread before its files are removed
        if cached is not None:
            cached.close()
    if ck is not None:
        ck.finish()
    estimator.stream_history_ = history
    return estimator
