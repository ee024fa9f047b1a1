"""Implicit coordinate descent (iCD) on the all-negatives squared loss: the solver around
:func:`fmlearn.ranking.kernels.icd.icd_side` (see it for the updates).

Bayer, He, Kanagal & Rendle, "A generic coordinate descent framework for learning from
implicit feedback", WWW 2017, applied to the classic FM; with one-hot users and items and no
linear terms this is implicit ALS's objective (Hu, Koren & Volinsky, "Collaborative filtering
for implicit feedback datasets", ICDM 2008) minimised one coordinate at a time (as in He et
al. 2016's eALS) rather than one vector at a time.

A sweep updates the context side (w0, the context features' w and V) with the items fixed,
then the item side with the contexts fixed; each side starts from caches recomputed from the
model (no drift across sweeps).
"""

import numpy as np

from ..kernels.icd import Cache, ICDConfig, Other, Side, icd_objective, icd_side


def _side(rows, ev_ptr, ev_other, ev_alpha, bias, mass):
    T = rows.T.tocsr()
    T.sort_indices()
    return Side(np.ascontiguousarray(T.indptr, np.int64),
                np.ascontiguousarray(T.indices, np.int32),
                np.ascontiguousarray(T.data, np.float64),
                np.ascontiguousarray(rows.indptr, np.int64),
                np.ascontiguousarray(rows.indices, np.int32),
                np.ascontiguousarray(rows.data, np.float64),
                np.ascontiguousarray(ev_ptr, np.int64), np.ascontiguousarray(ev_other, np.int64),
                np.ascontiguousarray(ev_alpha, np.float64), bias, mass)


def pair_masses(data, alpha0):
    """(m_0, m): the total weight of all (context, item) pairs, and of the pairs holding each
    feature, each counted with x^2: events weigh their weight, other pairs ``alpha0``."""
    per_ctx = alpha0 * data.n_items + np.bincount(data.ev_ctx, weights=data.ev_weight - alpha0,
                                                  minlength=data.n_contexts)
    per_item = alpha0 * data.n_contexts + np.bincount(
        data.ev_item, weights=data.ev_weight - alpha0, minlength=data.n_items)
    m = (data.contexts.multiply(data.contexts).T @ per_ctx
         + data.items.multiply(data.items).T @ per_item)
    return float(per_ctx.sum()), np.ascontiguousarray(np.asarray(m).ravel(), np.float64)


def sides(data, alpha0):
    """The context side (with w0) and the item side of an EventData, and m_0."""
    m0, mass = pair_masses(data, alpha0)
    ctx = _side(data.contexts, data.pos_ptr, data.ev_item, data.ev_weight, True, mass)
    order = np.argsort(data.ev_item, kind="stable")
    ptr = np.zeros(data.n_items + 1, dtype=np.int64)
    np.cumsum(np.bincount(data.ev_item, minlength=data.n_items), out=ptr[1:])
    item = _side(data.items, ptr, data.ev_ctx[order], data.ev_weight[order], False, mass)
    return ctx, item, m0


def _cache(n, k, n_events):
    return Cache(np.zeros(n), np.zeros((k, n)), np.zeros(n), np.zeros(n), np.zeros(n),
                 np.zeros(n_events))


def icd_config(settings, mass0):
    return ICDConfig(float(settings.negative_weight), float(settings.reg_bias),
                     float(settings.reg_linear), float(settings.reg_pairwise), float(mass0))


def icd_solver(data, model, settings, run):
    """Run ``settings.n_iter`` iCD sweeps from ``model`` (updated in place).

    Returns ``(model, n_iter, info)``; ``info["objective"]`` is the loss after the last sweep
    and ``info["diverged"]`` None or a message (a non-finite objective: an input overflow).
    """
    k = model.V.shape[1]
    ctx, item, m0 = sides(data, settings.negative_weight)
    cc = _cache(data.n_contexts, k, data.n_events)
    ic = _cache(data.n_items, k, data.n_events)
    cfg = icd_config(settings, m0)
    # the items' phi and q for the first context side (loads the kernels too)
    icd_objective(item, ic, Other(cc.phi, cc.Q), model, cfg)
    run.start()
    n_done = 0
    objective = np.nan
    for it in range(settings.n_iter):
        icd_side(ctx, cc, Other(ic.phi, ic.Q), model, cfg)
        icd_side(item, ic, Other(cc.phi, cc.Q), model, cfg)
        n_done = it + 1
        last = it + 1 == settings.n_iter
        if run.tracking or last:  # the objective costs about a fifth of a sweep
            objective = icd_objective(item, ic, Other(cc.phi, cc.Q), model, cfg)
            if not np.isfinite(objective):
                return model, n_done, {"objective": objective, "diverged": (
                    f"iCD produced a non-finite objective in sweep {it + 1}: the features' "
                    "values overflow; rescale them")}
        loss = objective / max(data.n_events, 1) if run.tracking or last else np.nan
        if run.end_iteration(it, loss):
            break
    return model, n_done, {"objective": objective, "diverged": None}
