"""BPR and WARP by stochastic gradient (SGD or Adagrad) over shuffled events: the solver
around :func:`fmlearn.ranking.kernels.sampled.pairwise_epoch` (see it for the updates).

Rendle, Freudenthaler, Gantner & Schmidt-Thieme, "BPR: Bayesian personalized ranking from
implicit feedback", UAI 2009. Weston, Bengio & Usunier, "WSABIE: scaling up to large
vocabulary image annotation", IJCAI 2011 (the WARP loss), with LightFM's adaptive sampling
(Kula 2015): draw negatives until one violates the margin, estimate the rank from the number
of draws.
"""

import numpy as np

from ..kernels.sampled import (
    ADAGRAD_INIT,
    LOSS_CODES,
    SAMPLING_CODES,
    Accum,
    PairConfig,
    PairData,
    pair_work,
    pairwise_epoch,
)

#: |f| beyond which an epoch stops as diverged (squares of it still fit in float64).
SCORE_LIMIT = 1e100


def pair_data(data):
    """:class:`~fmlearn.ranking.kernels.sampled.PairData` of an
    :class:`~fmlearn.ranking._data.EventData`."""
    c, i = data.contexts, data.items
    return PairData(
        np.ascontiguousarray(c.indptr, np.int64), np.ascontiguousarray(c.indices, np.int32),
        np.ascontiguousarray(c.data, np.float64), np.ascontiguousarray(i.indptr, np.int64),
        np.ascontiguousarray(i.indices, np.int32), np.ascontiguousarray(i.data, np.float64),
        data.ev_ctx, data.ev_item, data.ev_weight, data.pos_ptr,
        np.ascontiguousarray(data.n_negatives(), np.int64), harmonic_numbers(data.n_items))


def harmonic_numbers(n):
    """L(r) = 1 + 1/2 + ... + 1/r for r = 0..n (summed in that order; L(0) = 0)."""
    out = np.zeros(n + 1)
    np.cumsum(1.0 / np.arange(1, n + 1), out=out[1:])
    return out


def pair_config(settings, disjoint):
    """The kernel's :class:`~fmlearn.ranking.kernels.sampled.PairConfig` of a
    :class:`~fmlearn.ranking.plan.SampledSettings`."""
    return PairConfig(LOSS_CODES[settings.loss], bool(settings.adagrad),
                      float(settings.learning_rate), float(settings.reg_linear),
                      float(settings.reg_pairwise), int(settings.max_sampled),
                      SAMPLING_CODES[settings.negative_sampling], SCORE_LIMIT,
                      bool(disjoint))


def max_step_features(data):
    """Most distinct features a step can touch: a context's plus two items'."""
    c = np.diff(data.contexts.indptr)
    i = np.diff(data.items.indptr)
    return int((c.max() if c.size else 0) + 2 * (i.max() if i.size else 0))


def sampled_solver(data, model, settings, seed, run):
    """Run ``settings.n_iter`` epochs of BPR or WARP from ``model`` (updated in place).

    Parameters
    ----------
    data : EventData
    model : kernels.sampled.Model (w, V, [w0])
    settings : plan.SampledSettings
    seed : int
        Keys the epochs' event orders and negative draws.
    run : plan.RunContext

    Returns
    -------
    model, n_iter, info
        ``info["diverged"]``: None, or a message naming the epoch.
    """
    d, k = model.V.shape
    pdata = pair_data(data)
    cols = data.items.indices
    disjoint = np.unique(cols).shape[0] == cols.shape[0]  # no feature in two item rows
    cfg = pair_config(settings, disjoint)
    acc = Accum(np.full(d, ADAGRAD_INIT), np.full((d, k), ADAGRAD_INIT))
    work = pair_work(d, k, max_step_features(data))
    rs = np.random.default_rng(seed)
    total_weight = float(np.sum(data.ev_weight))
    rng = np.zeros(1, dtype=np.uint64)
    pairwise_epoch(pdata, model, acc, np.zeros(0, np.int64), rng, cfg, work)  # compile
    run.start()
    n_done = 0
    for it in range(settings.n_iter):
        order = rs.permutation(data.n_events).astype(np.int64)
        rng[0] = np.uint64(rs.integers(0, 2**63 - 1))
        loss, _, bad = pairwise_epoch(pdata, model, acc, order, rng, cfg, work)
        n_done = it + 1
        if bad >= 0 or not np.isfinite(loss) or not (np.all(np.isfinite(model.V))
                                                      and np.all(np.isfinite(model.w))):
            return model, n_done, {"diverged": (
                f"{settings.loss.upper()} diverged in epoch {it + 1} (a score passed "
                f"{SCORE_LIMIT:g} or became non-finite); lower learning_rate or raise "
                "reg_pairwise")}
        if run.end_iteration(it, loss / total_weight):
            break
    return model, n_done, {"diverged": None}
