"""One epoch of the sampled pairwise learners of :class:`fmlearn.ranking.FMRanker`: BPR
(Rendle et al. 2009) and WARP (Weston et al. 2011), by SGD or Adagrad.

An event is a positive pair (context c, item i) of weight s (the context holds the user and
any other non-item features). A step draws negatives j (items that are not positives of c;
uniformly, or in proportion to their number of events) and moves the parameters along the
negative gradient of the pair's loss in x = f(c, i) - f(c, j):

- BPR: ``s log(1 + exp(-x))``;
- WARP: draws up to ``max_sampled`` items until a negative violates the margin, f(c, j) >
  f(c, i) - 1; after N draws the rank of i is estimated as floor(n_items / N) (at most the
  number of negatives of c) and the loss is ``s L(rank) (1 - x)`` with L(r) = 1 + 1/2 + ...
  + 1/r (Weston et al. 2011, Eq. 2-3 with alpha_j = 1/j; LightFM uses log(r) instead). No
  violation: no step.

The context's bias w0 + part(c) cancels in x, so x = part(i) - part(j) + <q_c, q_i - q_j>
(see :mod:`.rows`) and its gradient touches the context's factors and both items' weights and
factors: d x / d v_l = x_l (q_i - q_j) for a context feature l; for an item feature m of i,
d x / d w_m = x_m and d x / d v_m = x_m (q_c + q_i - x_m v_m) (minus the same with j for j's
features). The gradient is gathered per distinct feature at the current parameters before
any moves (i and j may share side features), then L2 (``reg_linear`` on w, ``reg_pairwise``
on V) is added for the touched features and the step applied: ``theta -= eta g`` (SGD) or
``A += g^2; theta -= eta g / sqrt(A)`` (Adagrad, Duchi et al. 2011, accumulators starting at
:data:`ADAGRAD_INIT`).

Random numbers come from a splitmix64 stream whose 64-bit state travels in ``rng`` (one
uint64): the epoch is a deterministic function of its inputs, and runs on one thread.
"""

import math
from collections import namedtuple

import numpy as np

from ...kernels._jit import njit

BPR = 0
WARP = 1
LOSS_CODES = {"bpr": BPR, "warp": WARP}
UNIFORM = 0
POPULARITY = 1
SAMPLING_CODES = {"uniform": UNIFORM, "popularity": POPULARITY}
#: Starting value of Adagrad's sums of squared gradients: the first steps are plain SGD steps
#: of size ``learning_rate`` (LightFM's choice), not ``learning_rate * sign(g)``.
ADAGRAD_INIT = 1.0

PairData = namedtuple("PairData", [
    "c_indptr", "c_indices", "c_data", "i_indptr", "i_indices", "i_data",
    "ev_ctx", "ev_item", "ev_weight", "pos_ptr", "n_neg", "harmonic"])
PairData.__doc__ = """Training data of the pairwise learners: the distinct contexts' and items'
CSR rows (int64 indptr, int32 indices, float64 data); the events sorted by (context, item):
``ev_ctx``, ``ev_item`` (int64) and ``ev_weight`` (float64); ``pos_ptr`` (n_contexts + 1):
the positives of context c are ``ev_item[pos_ptr[c]:pos_ptr[c + 1]]``, sorted; ``n_neg``
(n_contexts,) its number of negative items; ``harmonic`` (n_items + 1,): L(r) = 1 + 1/2 + ...
+ 1/r, WARP's rank weights (a table: a step's weight costs one lookup)."""

Model = namedtuple("Model", ["w", "V", "scal"])
Model.__doc__ = """The FM, updated in place: ``w`` (d,), ``V`` (d, k), ``scal`` = [w0]."""

Accum = namedtuple("Accum", ["w", "V"])
Accum.__doc__ = """Adagrad's sums of squared gradients of w (d,) and V (d, k)."""

PairConfig = namedtuple("PairConfig", ["loss", "adagrad", "eta", "reg_linear", "reg_pairwise",
                                       "max_sampled", "sampling", "limit", "disjoint"])
PairConfig.__doc__ = """Scalars of the epoch: loss code (:data:`BPR`, :data:`WARP`), Adagrad or
SGD, step size, L2 penalties of w and V, draws per event (WARP: the most negatives tried;
BPR: the most draws to find one negative), sampling code, and the bound on |f| past which
the epoch stops as diverged; ``disjoint``: no feature is shared by two item rows."""

PairWork = namedtuple("PairWork", ["qc", "qi", "qj", "dv", "slot", "feat", "has_w", "gw",
                                   "gv"])
PairWork.__doc__ = """Caller-owned buffers: ``qc``, ``qi``, ``qj``, ``dv`` (k,); ``slot`` (d,)
int64, -1 outside a step; ``feat`` (m,) int64, ``has_w`` (m,) bool, ``gw`` (m,), ``gv`` (m, k) for
the m distinct features of a step (m >= the largest nnz of a context plus twice an item's)."""


def pair_work(n_features, n_factors, max_features):
    """Fresh :class:`PairWork` for steps touching at most ``max_features`` features."""
    k, m = n_factors, max(1, max_features)
    return PairWork(np.empty(k), np.empty(k), np.empty(k), np.empty(k),
                    np.full(n_features, -1, np.int64),
                    np.empty(m, np.int64), np.empty(m, np.bool_), np.empty(m),
                    np.empty((m, k)))


@njit(cache=True, nogil=True, inline="always")
def next_uniform(rng):
    """splitmix64 (Steele et al. 2014): advance ``rng[0]``, return a float in [0, 1)."""
    s = rng[0] + np.uint64(0x9E3779B97F4A7C15)
    rng[0] = s
    z = (s ^ (s >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


# The hot loop unpacks its records once and passes plain arrays to the helpers below: a
# record (or a row view) handed to an inlined helper costs reference-count updates of every
# array it holds, which made a draw 85 ns instead of 6 (MovieLens-100K, k = 1, measured).
@njit(cache=True, nogil=True, inline="always")
def is_positive(pos_ptr, ev_item, c, item):
    """Whether ``item`` is a positive of context c (binary search of its sorted list)."""
    lo = pos_ptr[c]
    hi = pos_ptr[c + 1]
    while lo < hi:
        mid = (lo + hi) // 2
        v = ev_item[mid]
        if v == item:
            return True
        if v < item:
            lo = mid + 1
        else:
            hi = mid
    return False


@njit(cache=True, nogil=True, inline="always")
def _dot_row(a, V, m):
    """<a, V[m]> summed in four interleaved partial sums (a fixed order; four independent
    chains of additions run about four times faster than one)."""
    n = a.shape[0]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    f = 0
    while f + 4 <= n:
        s0 += a[f] * V[m, f]
        s1 += a[f + 1] * V[m, f + 1]
        s2 += a[f + 2] * V[m, f + 2]
        s3 += a[f + 3] * V[m, f + 3]
        f += 4
    while f < n:
        s0 += a[f] * V[m, f]
        f += 1
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, nogil=True, inline="always")
def _dot(a, b):
    """<a, b> of 1-D arrays, in four interleaved partial sums (see :func:`_dot_row`)."""
    n = a.shape[0]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    f = 0
    while f + 4 <= n:
        s0 += a[f] * b[f]
        s1 += a[f + 1] * b[f + 1]
        s2 += a[f + 2] * b[f + 2]
        s3 += a[f + 3] * b[f + 3]
        f += 4
    while f < n:
        s0 += a[f] * b[f]
        f += 1
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, nogil=True, inline="always")
def _dot_rows(A, i, B, j):
    """<A[i], B[j]> of two matrix rows, in four interleaved partial sums."""
    n = A.shape[1]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    f = 0
    while f + 4 <= n:
        s0 += A[i, f] * B[j, f]
        s1 += A[i, f + 1] * B[j, f + 1]
        s2 += A[i, f + 2] * B[j, f + 2]
        s3 += A[i, f + 3] * B[j, f + 3]
        f += 4
    while f < n:
        s0 += A[i, f] * B[j, f]
        f += 1
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, nogil=True, inline="always")
def row_q(indptr, indices, data, r, V, q):
    """q(row r) into ``q``."""
    k = q.shape[0]
    for f in range(k):
        q[f] = 0.0
    for p in range(indptr[r], indptr[r + 1]):
        j = indices[p]
        x = data[p]
        for f in range(k):
            q[f] += V[j, f] * x


@njit(cache=True, nogil=True, inline="always")
def item_score(indptr, indices, data, item, w, V, qc, q):
    """``part(item) + <qc, q(item)>``. An item row with one feature scores as
    ``x (w_m + <qc, v_m>)`` (its part is w_m x exactly) and leaves ``q`` alone; otherwise
    ``q`` receives q(item). A WARP draw that does not violate the margin costs one dot
    product."""
    p0 = indptr[item]
    if indptr[item + 1] - p0 == 1:
        m = indices[p0]
        return data[p0] * (w[m] + _dot_row(qc, V, m))
    k = q.shape[0]
    for f in range(k):
        q[f] = 0.0
    lin = 0.0
    sq = 0.0
    for p in range(p0, indptr[item + 1]):
        j = indices[p]
        x = data[p]
        lin += w[j] * x
        for f in range(k):  # elementwise: vectorised
            q[f] += V[j, f] * x
        sq += x * x * _dot_rows(V, j, V, j)
    return lin + 0.5 * (_dot(q, q) - sq) + _dot(qc, q)


@njit(cache=True, nogil=True, inline="always")
def _row_step(theta, acc, r, d, scale, gx, reg, eta, adagrad):
    """Row r of theta: ``theta -= eta g / sqrt(acc += g^2)`` (Adagrad) or ``eta g`` (SGD),
    with g = gx (d + scale theta) + reg theta elementwise."""
    k = d.shape[0]
    if adagrad:
        for f in range(k):
            v = theta[r, f]
            g = gx * (d[f] + scale * v) + reg * v
            a = acc[r, f] + g * g
            acc[r, f] = a
            theta[r, f] = v - eta * g / math.sqrt(a)
    else:
        for f in range(k):
            v = theta[r, f]
            theta[r, f] = v - eta * (gx * (d[f] + scale * v) + reg * v)


@njit(cache=True, nogil=True, inline="always")
def _scalar_step(theta, acc, m, g, eta, adagrad):
    if adagrad:
        a = acc[m] + g * g
        acc[m] = a
        theta[m] -= eta * g / math.sqrt(a)
    else:
        theta[m] -= eta * g


@njit(cache=True, nogil=True, inline="always")
def _gather(indptr, indices, vals, r, sign, g, is_item, V, d, slot, feat, has_w, gw, gv, nf):
    """Add row r's part of ``g * d x / d theta`` to the per-feature buffers: for a context
    row (``is_item`` False) ``g x_l d`` per factor row (d = q_i - q_j); for an item row
    ``sign g x_m`` on w_m and ``sign g x_m (d - x_m v_m)`` on v_m (d = q_c + q_item)."""
    k = d.shape[0]
    for p in range(indptr[r], indptr[r + 1]):
        m = indices[p]
        x = vals[p]
        s = slot[m]
        if s < 0:
            s = nf
            slot[m] = s
            feat[s] = m
            has_w[s] = False
            gw[s] = 0.0
            for f in range(k):
                gv[s, f] = 0.0
            nf += 1
        gx = sign * g * x
        if is_item:
            has_w[s] = True
            gw[s] += gx
            for f in range(k):
                gv[s, f] += gx * (d[f] - x * V[m, f])
        else:
            for f in range(k):
                gv[s, f] += gx * d[f]
    return nf


@njit(cache=True, nogil=True, inline="always")
def _apply(w, V, Aw, AV, nf, slot, feat, has_w, gw, gv, rw, rv, eta, adagrad):
    """Add L2 to the gathered gradients and step every touched parameter; resets ``slot``."""
    k = V.shape[1]
    for s in range(nf):
        j = feat[s]
        slot[j] = -1
        if has_w[s]:
            _scalar_step(w, Aw, j, gw[s] + rw * w[j], eta, adagrad)
        if adagrad:
            for f in range(k):
                v = V[j, f]
                g = gv[s, f] + rv * v
                a = AV[j, f] + g * g
                AV[j, f] = a
                V[j, f] = v - eta * g / math.sqrt(a)
        else:
            for f in range(k):
                v = V[j, f]
                V[j, f] = v - eta * (gv[s, f] + rv * v)


@njit(cache=True)
def pairwise_epoch(data, model, acc, order, rng, cfg, work):
    """Visit the events ``order`` once; returns ``(loss, n_steps, bad_event)``.

    ``loss`` sums the visited events' losses before their steps (a pair without a step, no
    negative found or no violation, adds 0), ``bad_event`` is -1 unless a score passed
    ``cfg.limit`` or became non-finite (the epoch then stops at that event, before its step).
    When no feature is shared by two item rows (``cfg.disjoint``, e.g. one-hot item ids) each
    parameter's gradient is complete as soon as it is computed and is applied at once;
    otherwise the gradient is gathered per distinct feature first (:func:`_gather`) and then
    applied (:func:`_apply`): the same arithmetic.
    """
    c_indptr, c_indices, c_data = data.c_indptr, data.c_indices, data.c_data
    i_indptr, i_indices, i_data = data.i_indptr, data.i_indices, data.i_data
    ev_ctx, ev_item, ev_weight = data.ev_ctx, data.ev_item, data.ev_weight
    pos_ptr, n_neg, harm = data.pos_ptr, data.n_neg, data.harmonic
    w, V = model.w, model.V
    Aw, AV = acc.w, acc.V
    qc, qi, qj, dv = work.qc, work.qi, work.qj, work.dv
    slot, feat, has_w, gw, gv = work.slot, work.feat, work.has_w, work.gw, work.gv
    k = V.shape[1]
    n_items = i_indptr.shape[0] - 1
    n_events = ev_item.shape[0]
    eta, rw, rv, adagrad = cfg.eta, cfg.reg_linear, cfg.reg_pairwise, cfg.adagrad
    limit = cfg.limit
    popularity = cfg.sampling == POPULARITY
    total = 0.0
    steps = 0
    for t in range(order.shape[0]):
        e = order[t]
        c = ev_ctx[e]
        i = ev_item[e]
        s_w = ev_weight[e]
        if n_neg[c] <= 0 or s_w <= 0.0:
            continue
        row_q(c_indptr, c_indices, c_data, c, V, qc)
        fi = item_score(i_indptr, i_indices, i_data, i, w, V, qc, qi)
        if not abs(fi) <= limit:
            return total, steps, e
        j = -1
        g = 0.0
        if cfg.loss == BPR:
            for _ in range(cfg.max_sampled):
                u = next_uniform(rng)
                cand = (ev_item[min(int(u * n_events), n_events - 1)] if popularity
                        else min(int(u * n_items), n_items - 1))
                if not is_positive(pos_ptr, ev_item, c, cand):
                    j = cand
                    break
            if j < 0:
                continue
            fj = item_score(i_indptr, i_indices, i_data, j, w, V, qc, qj)
            if not abs(fj) <= limit:
                return total, steps, e
            x = fi - fj
            # -log sigmoid(x) and its derivative -sigmoid(-x), without overflow
            if x >= 0.0:
                ex = math.exp(-x)
                total += s_w * math.log1p(ex)
                g = -s_w * ex / (1.0 + ex)
            else:
                ex = math.exp(x)
                total += s_w * (math.log1p(ex) - x)
                g = -s_w / (1.0 + ex)
        else:
            # a draw is scored first and checked against the positives only when it
            # violates the margin (most draws do not). With V violating negatives among
            # n_items, a uniform draw violates with probability V / n_items: after N draws,
            # rank ~ n_items / N (at most the context's negatives).
            for draws in range(1, cfg.max_sampled + 1):
                u = next_uniform(rng)
                cand = (ev_item[min(int(u * n_events), n_events - 1)] if popularity
                        else min(int(u * n_items), n_items - 1))
                fj = item_score(i_indptr, i_indices, i_data, cand, w, V, qc, qj)
                if not abs(fj) <= limit:
                    return total, steps, e
                if fj > fi - 1.0 and not is_positive(pos_ptr, ev_item, c, cand):
                    j = cand
                    weight = s_w * harm[min(n_items // draws, n_neg[c])]
                    total += weight * (1.0 - fi + fj)
                    g = -weight
                    break
            if j < 0:
                continue
        row_q(i_indptr, i_indices, i_data, i, V, qi)
        row_q(i_indptr, i_indices, i_data, j, V, qj)
        steps += 1
        if not cfg.disjoint:  # i and j may share features: gather, then step
            for f in range(k):
                dv[f] = qi[f] - qj[f]
                qi[f] += qc[f]
                qj[f] += qc[f]
            nf = _gather(c_indptr, c_indices, c_data, c, 1.0, g, False, V, dv, slot, feat,
                         has_w, gw, gv, 0)
            nf = _gather(i_indptr, i_indices, i_data, i, 1.0, g, True, V, qi, slot, feat,
                         has_w, gw, gv, nf)
            nf = _gather(i_indptr, i_indices, i_data, j, -1.0, g, True, V, qj, slot, feat,
                         has_w, gw, gv, nf)
            _apply(w, V, Aw, AV, nf, slot, feat, has_w, gw, gv, rw, rv, eta, adagrad)
            continue
        for f in range(k):
            dv[f] = qi[f] - qj[f]
        for p in range(c_indptr[c], c_indptr[c + 1]):
            _row_step(V, AV, c_indices[p], dv, 0.0, g * c_data[p], rv, eta, adagrad)
        for f in range(k):
            qi[f] += qc[f]
            qj[f] += qc[f]
        for p in range(i_indptr[i], i_indptr[i + 1]):
            m = i_indices[p]
            x = i_data[p]
            _scalar_step(w, Aw, m, g * x + rw * w[m], eta, adagrad)
            _row_step(V, AV, m, qi, -x, g * x, rv, eta, adagrad)
        for p in range(i_indptr[j], i_indptr[j + 1]):
            m = i_indices[p]
            x = i_data[p]
            _scalar_step(w, Aw, m, -g * x + rw * w[m], eta, adagrad)
            _row_step(V, AV, m, qj, -x, -g * x, rv, eta, adagrad)
    return total, steps, -1
