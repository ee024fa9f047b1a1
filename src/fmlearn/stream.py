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

import numbers
import os
import time

import numpy as np
import scipy.sparse as sp

from ._data import check_sparse_structure

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


def _open_source(source, n_epochs, chunk_size_bytes, n_features, zero_based, dtype):
    """A function returning a fresh iterable of chunks for every epoch."""
    if isinstance(source, (str, os.PathLike)):
        from .datasets import iter_svmlight

        kw = {} if chunk_size_bytes is None else {"chunk_size_bytes": chunk_size_bytes}
        return lambda: iter_svmlight(source, n_features=n_features, dtype=dtype,
                                     zero_based=zero_based, **kw)
    if hasattr(source, "__dask_graph__"):
        raise TypeError("fit_stream got a Dask collection: wrap it as "
                        "fmlearn.distributed.blocks(X, y) (each block is then computed on the "
                        "cluster and streamed)")
    if callable(source):
        return source
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

    def reopen():
        return first.pop() if first else iter(source)

    return reopen


def _eval_metric(estimator, eval_set):
    from sklearn.base import is_classifier
    from sklearn.metrics import root_mean_squared_error, zero_one_loss

    X_val, y_val = eval_set
    pred = estimator.predict(X_val)
    if is_classifier(estimator):
        return float(zero_one_loss(np.asarray(y_val), pred))
    return float(root_mean_squared_error(np.asarray(y_val, dtype=np.float64), pred))


def _epoch(estimator, chunks, batch_size, last_batch, classes, bar):
    """One pass over ``chunks`` through ``partial_fit`` (``classes`` passed to the first call
    when not None); returns (rows, batches)."""
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
    return rows, batches


def fit_stream(estimator, source, *, n_epochs=1, batch_size=None, last_batch="merge",
               eval_set=None, classes=None, chunk_size_bytes=None, n_features=None,
               zero_based="auto", dtype=np.float64, verbose=0):
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
        :func:`fmlearn.datasets.iter_svmlight`; or an iterable of ``(X, y)`` or
        ``(X, y, sample_weight)`` chunks; or a callable returning such an iterable (called once
        per epoch). A one-shot iterator (e.g. a generator object) allows only ``n_epochs=1``.
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
    if n_features is None and hasattr(estimator, "n_features_in_"):
        n_features = int(estimator.n_features_in_)
    reopen = _open_source(source, n_epochs, chunk_size_bytes, n_features, zero_based, dtype)

    import inspect

    takes_classes = "classes" in inspect.signature(estimator.partial_fit).parameters
    history = {"rows": [], "batches": [], "seconds": []}
    if eval_set is not None:
        history["val"] = []
    from ._base import progress

    calls = 0
    with progress(verbose, None, f"fit_stream[{type(estimator).__name__}]") as bar:
        for _ in range(n_epochs):
            t0 = time.perf_counter()
            first_call = classes if (takes_classes and calls == 0) else None
            rows, batches = _epoch(estimator, iter(reopen()), batch_size, last_batch,
                                   first_call, bar)
            calls += batches
            if rows == 0:
                raise ValueError("the source yielded no rows" + (
                    "" if not history["rows"] else f" in epoch {len(history['rows']) + 1}"))
            history["rows"].append(rows)
            history["batches"].append(batches)
            history["seconds"].append(time.perf_counter() - t0)
            if eval_set is not None:
                history["val"].append(_eval_metric(estimator, (X_val, y_val)))
                bar.set_postfix({"val": f"{history['val'][-1]:.4g}"})
    estimator.stream_history_ = history
    return estimator
