"""AdaGrad epochs of the field-aware FM (LIBFFM's learner; Juan et al. 2016, Algorithm 1).

:func:`adagrad_solver` is a plain function, ``(rows, visit, state, settings, seed, context)
-> (state, n_iter, info)``: it runs epochs of :func:`~._kernels.ffm_epoch` over the rows
``visit`` lists, shuffled in blocks each epoch, scores the validation rows after each epoch
and lets the context's early-stopping monitor stop it and keep the best epoch's state. It
never touches scikit-learn or the estimator.
"""

from dataclasses import dataclass

import numpy as np

from ._kernels import (
    LANES,
    FFMConfig,
    FFMModel,
    FFMRows,
    compile_vectorized,
    epoch_key,
    ffm_epoch,
    ffm_predict,
    ffm_work,
    run_epoch,
)

# Positions of the visiting list per block of the epoch shuffle: a block is a random subset
# of the rows (``visit`` lists them in the order of a hash of their content), so permuting
# blocks shuffles the epoch with n / 256 random numbers instead of n.
SHUFFLE_BLOCK = 256


@dataclass
class FFMState:
    """The model and its AdaGrad sums: ``W`` (d, F, C, 2, LANES), ``lin`` (d, 2), ``bias``
    float64 [w0, sum] (see :mod:`._kernels`)."""

    W: np.ndarray
    lin: np.ndarray
    bias: np.ndarray

    def copy(self):
        return FFMState(self.W.copy(), self.lin.copy(), self.bias.copy())

    def model(self):
        return FFMModel(self.W, self.lin, self.bias)

    def is_finite(self, features=None):
        """Whether the state (or its rows of ``features``) holds only finite values."""
        if not np.isfinite(self.bias).all():
            return False
        if features is None:
            return bool(np.isfinite(self.W).all() and np.isfinite(self.lin).all())
        from ._kernels import rows_finite

        return bool(rows_finite(self.W, self.lin, features))


def init_state(n_features, n_fields, n_factors, n_chunks, init, dtype, rng):
    """A fresh :class:`FFMState`: factors drawn from ``init`` (:class:`~._plan.InitSettings`)
    with ``rng`` (a ``RandomState``), padding factors 0, linear terms and bias 0, every
    AdaGrad sum 1 (LIBFFM's start). The factors are drawn feature block by feature block, so
    that no float64 copy of the model is made (the same numbers as one draw)."""
    d, F, C = int(n_features), int(n_fields), int(n_chunks)
    W = np.zeros((d, F, C, 2, LANES), dtype=dtype)
    W[:, :, :, 1, :] = 1.0
    if n_factors:
        flat = W.reshape(d, F, C * 2 * LANES)
        # factor f of chunk c sits at c * 2 LANES + f % LANES
        pos = np.array([(f // LANES) * 2 * LANES + f % LANES for f in range(n_factors)])
        step = max(1, (1 << 22) // (F * n_factors))
        for a in range(0, d, step):
            b = min(d, a + step)
            shape = (b - a, F, n_factors)
            if init.kind == "uniform":
                block = rng.uniform(0.0, init.scale, size=shape)
            else:
                block = rng.normal(0.0, init.scale, size=shape)
            flat[a:b, :, pos] = block
    lin = np.zeros((d, 2), dtype=dtype)
    lin[:, 1] = 1.0
    return FFMState(W, lin, np.array([0.0, 1.0]))


def factors_of(W, n_factors):
    """The factors v_{j,g} of ``W`` as an array of shape (d, F, n_factors) (a copy)."""
    d, F, C = W.shape[:3]
    return np.ascontiguousarray(W[:, :, :, 0, :].reshape(d, F, C * LANES)[:, :, :n_factors])


def visiting_order(csr, y, sw, rows, merge):
    """``(visit, sw)``: the rows ``rows`` of the CSR arrays a fit visits and their weights.

    With ``merge``, identical rows (same features, values and target) become one row carrying
    their summed weight, listed in the order of a hash of their content, and rows of zero
    weight are left out: an exact rewriting of the weighted loss that makes the fit
    independent of the input order, and a fit on repeated rows equal to one on weighted rows
    (``fmlearn._data.merge_duplicate_rows`` does the same by copying the rows; here the rows
    stay where they are and only the list is built). Otherwise the rows in the given order.
    """
    indptr, indices, data = csr
    if not merge:
        return rows, sw
    from ..kernels.dedup import group_sorted, row_hashes

    rows = rows[sw[rows] > 0]
    if rows.shape[0] == 0:
        raise ValueError("all sample weights are zero: there is nothing to fit")
    yy = np.ascontiguousarray(y, dtype=np.float64) + 0.0  # maps -0.0 to +0.0
    bits = np.uint32 if data.dtype == np.float32 else np.uint64
    h = row_hashes(indptr, indices, data.view(bits), yy.view(np.uint64))
    order = rows[np.argsort(h[rows], kind="stable")]
    group, reps = group_sorted(order, h, indptr, indices, data, yy)
    merged = np.zeros(indptr.shape[0] - 1)
    merged[reps] = np.bincount(group, weights=sw[order])
    return reps.astype(np.int64), merged


def _config(settings, unit_weights):
    return FFMConfig(settings.loss, float(settings.learning_rate), float(settings.reg_bias),
                     float(settings.reg_linear), float(settings.reg_pairwise),
                     bool(settings.normalize), float(settings.limit), bool(unit_weights),
                     bool(settings.unique_fields))


def predict_scores(csr, fields, state, normalize, parallel=True):
    """phi(x) of the CSR rows ``csr`` under ``state`` (float64)."""
    indptr, indices, data = csr
    out = np.empty(indptr.shape[0] - 1)
    return ffm_predict(indptr, indices, data, fields, state.model(), normalize, out, parallel)


def adagrad_solver(rows, visit, state, settings, seed, context, first_epoch=0, touched=None):
    """Run up to ``settings.n_iter`` epochs over the rows ``visit[t]`` of ``rows``
    (:class:`~._kernels.FFMRows`) from ``state`` (changed in place).

    Each epoch visits the positions of ``visit`` in blocks of :data:`SHUFFLE_BLOCK`, the
    blocks in the order of ``numpy.random.default_rng([seed, first_epoch + epoch])
    .permutation`` (or in order without ``settings.shuffle``): a warm-started fit that
    continues from ``first_epoch`` epochs equals one long fit. After each epoch the
    context's validation rows are scored and ``context.monitor.end_iteration`` decides
    whether to stop; when its rule is active the state returned is the best epoch's.

    ``touched`` (the features of the rows, when few) limits the check for non-finite values
    after each epoch to their rows of the state (a one-row ``partial_fit`` costs O(nnz^2 k),
    not O(d F k)); an empty array skips it, for the logistic loss on normalised rows, where
    no step can leave the floats: |x_j| <= 1 and |dloss/dphi| <= 1 bound every gradient by
    the parameters it reads, and AdaGrad moves a parameter by at most ``learning_rate`` per
    step.

    Returns ``(state, n_iter, info)``: ``info["diverged"]`` is None or a message (the state
    is then partly updated: the caller keeps its previous one), ``info["train_loss"]`` the
    last epoch's mean training loss (before each row's step).
    """
    cfg = _config(settings, bool((rows.sw[visit] == 1).all()))
    model = state.model()
    d, F, C = state.W.shape[:3]
    n = visit.shape[0]
    if n == 1:
        i = int(visit[0])
        max_nnz = max(1, int(rows.indptr[i + 1] - rows.indptr[i]))
    else:
        lengths = np.diff(rows.indptr)
        max_nnz = int(lengths[visit].max()) if n and lengths.shape[0] else 1
    work = ffm_work(max_nnz, F, C, state.W.dtype, settings.unique_fields)
    block = SHUFFLE_BLOCK
    n_blocks = -(-n // block)
    in_order = np.arange(n_blocks, dtype=np.int64)
    compile_vectorized(ffm_epoch, epoch_key(rows, model), rows, model, visit, in_order, block,
                       cfg, work)  # compile, or load from the cache
    if context.on_start is not None:
        context.on_start()
    monitor = context.monitor
    validation = context.validation
    info = {"diverged": None, "train_loss": None}
    n_done = 0
    for it in range(settings.n_iter):
        if settings.shuffle:
            rng = np.random.default_rng([seed, first_epoch + it])
            order = rng.permutation(n_blocks).astype(np.int64)
        else:
            order = in_order
        t0 = context.clock()
        loss, weight, bad = run_epoch(rows, model, visit, order, block, cfg, work)
        seconds = context.clock() - t0
        n_done = it + 1
        if bad >= 0 or (touched is None or touched.shape[0]) and not state.is_finite(touched):
            info["diverged"] = (
                f"AdaGrad diverged in epoch {n_done} (row {bad}: its score became "
                f"non-finite or exceeded {settings.limit:.3g}); lower learning_rate (now "
                f"{settings.learning_rate}), normalize the rows or rescale the features")
            return state, n_done, info
        train = loss / weight if weight > 0 else None
        info["train_loss"] = train
        val = None
        if validation is not None:
            pred = predict_scores(validation.csr, rows.fields, state, settings.normalize)
            val = validation.score(pred)
        if context.bar is not None:
            context.bar.update(1)
            if val is not None:
                context.bar.set_postfix({"val": f"{val:.5g}"})
        if monitor is not None and monitor.end_iteration(it, seconds=seconds, train=train,
                                                         val=val):
            break
    if monitor is not None and monitor.keeps_best():
        best = monitor.best_state
        state.W[...] = best.W
        state.lin[...] = best.lin
        state.bias[...] = best.bias
    return state, n_done, info


def training_rows(csr, y, sw, fields):
    """The kernels' :class:`~._kernels.FFMRows` of validated CSR arrays."""
    indptr, indices, data = csr
    return FFMRows(indptr, indices, data, np.ascontiguousarray(y, dtype=np.float64),
                   np.ascontiguousarray(sw, dtype=np.float64), fields)
