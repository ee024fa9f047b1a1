"""Slow NumPy oracles of the ranking kernels: the FM score of a dense row, splitmix64, one
epoch of BPR / WARP (the full-row FM formula and its explicit gradient, no decomposition, no
caches), one iCD sweep by brute force (every coordinate set to the minimiser of the all-pairs
loss computed from the dense score matrix), and the all-pairs objective."""

import numpy as np

MASK = (1 << 64) - 1


def fm_score(x, w0, w, V):
    """f(x) = w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l, pair by pair."""
    s = w0 + float(w @ x)
    nz = np.flatnonzero(x)
    for a in range(len(nz)):
        for b in range(a + 1, len(nz)):
            j, l = nz[a], nz[b]
            s += float(V[j] @ V[l]) * x[j] * x[l]
    return s


def fm_grad(x, w, V):
    """(d f / d w, d f / d V) at a dense row x."""
    q = V.T @ x
    return x.copy(), x[:, None] * (q[None, :] - V * x[:, None])


class SplitMix:
    """splitmix64 with Python integers (the kernels' generator)."""

    def __init__(self, state):
        self.state = int(state) & MASK

    def uniform(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        return (z >> 11) * (1.0 / 9007199254740992.0)


def harmonic(r):
    s = 0.0
    for t in range(1, r + 1):  # in order (Python >= 3.12's sum() compensates)
        s += 1.0 / t
    return s


def pairwise_epoch(C, I, ev_ctx, ev_item, ev_w, w, V, Aw, AV, order, rng_state, loss, adagrad,
                   eta, reg_w, reg_v, max_sampled, popularity=False):
    """One epoch of BPR (``loss="bpr"``) or WARP on dense context rows ``C`` and item rows
    ``I``; updates w, V, Aw, AV in place and returns the summed loss. Positives: the
    events' (context, item) pairs; w0 is never touched (it cancels)."""
    rng = SplitMix(rng_state)
    n_items = I.shape[0]
    n_ev = len(ev_item)
    pos = {}
    for c, i in zip(ev_ctx, ev_item, strict=True):
        pos.setdefault(int(c), set()).add(int(i))
    total = 0.0

    def draw():
        u = rng.uniform()
        if popularity:
            return int(ev_item[min(int(u * n_ev), n_ev - 1)])
        return min(int(u * n_items), n_items - 1)

    for e in order:
        c, i, s_w = int(ev_ctx[e]), int(ev_item[e]), float(ev_w[e])
        n_neg = n_items - len(pos[c])
        if n_neg <= 0:
            continue
        fi = fm_score(C[c] + I[i], 0.0, w, V)
        j = -1
        if loss == "bpr":
            for _ in range(max_sampled):
                cand = draw()
                if cand not in pos[c]:
                    j = cand
                    break
            if j < 0:
                continue
            fj = fm_score(C[c] + I[j], 0.0, w, V)
            x = fi - fj
            total += s_w * np.logaddexp(0.0, -x)
            g = -s_w / (1.0 + np.exp(x))
        else:
            for draws in range(1, max_sampled + 1):
                cand = draw()
                fj = fm_score(C[c] + I[cand], 0.0, w, V)
                if fj > fi - 1.0 and cand not in pos[c]:
                    j = cand
                    weight = s_w * harmonic(min(n_items // draws, n_neg))
                    total += weight * (1.0 - fi + fj)
                    g = -weight
                    break
            if j < 0:
                continue
        gwi, gVi = fm_grad(C[c] + I[i], w, V)
        gwj, gVj = fm_grad(C[c] + I[j], w, V)
        gw = g * (gwi - gwj)
        gV = g * (gVi - gVj)
        item_feats = (I[i] != 0) | (I[j] != 0)
        touched = item_feats | (C[c] != 0)
        for m in np.flatnonzero(touched):
            if item_feats[m]:
                gr = gw[m] + reg_w * w[m]
                if adagrad:
                    Aw[m] += gr * gr
                    w[m] -= eta * gr / np.sqrt(Aw[m])
                else:
                    w[m] -= eta * gr
            gr = gV[m] + reg_v * V[m]
            if adagrad:
                AV[m] += gr * gr
                V[m] -= eta * gr / np.sqrt(AV[m])
            else:
                V[m] -= eta * gr
    return total


def score_matrix(C, I, w0, w, V):
    return np.array([[fm_score(C[c] + I[i], w0, w, V) for i in range(I.shape[0])]
                     for c in range(C.shape[0])])


def pair_weights(ev_ctx, ev_item, ev_w, shape, alpha0):
    Wt = np.full(shape, float(alpha0))
    Y = np.zeros(shape)
    for c, i, a in zip(ev_ctx, ev_item, ev_w, strict=True):
        Wt[c, i] = a
        Y[c, i] = 1.0
    return Wt, Y


def masses(C, I, Wt):
    """(mass of w0, mass per feature): the total weight of the pairs holding each feature,
    each pair counted with x^2."""
    per_ctx = Wt.sum(axis=1)
    per_item = Wt.sum(axis=0)
    m = (C ** 2).T @ per_ctx + (I ** 2).T @ per_item
    return float(Wt.sum()), m


def objective(C, I, w0, w, V, Wt, Y, reg_bias, reg_w, reg_v):
    """The all-pairs weighted squared loss with the frequency-scaled penalties."""
    S = score_matrix(C, I, w0, w, V)
    m0, m = masses(C, I, Wt)
    return (float(np.sum(Wt * (S - Y) ** 2)) + reg_bias * m0 * w0 ** 2
            + reg_w * float(m @ w ** 2) + reg_v * float(m @ np.sum(V ** 2, axis=1)))


def icd_sweep(C, I, w0, w, V, Wt, Y, reg_bias, reg_w, reg_v):
    """One sweep of exact coordinate minimisation in the kernels' order: w0, the context
    features' w (by index) then their V (factor-major), then the item features' w and V. The
    loss is a parabola in each coordinate: its minimiser comes from three evaluations."""
    w, V = w.copy(), V.copy()
    state = {"w0": float(w0)}

    def L():
        return objective(C, I, state["w0"], w, V, Wt, Y, reg_bias, reg_w, reg_v)

    def minimise(get, put):
        t = get()
        put(t - 1.0)
        lm = L()
        put(t + 1.0)
        lp = L()
        put(t)
        l0 = L()
        curv = lp - 2.0 * l0 + lm
        if curv > 0:
            put(t - (lp - lm) / (2.0 * curv))

    ctx_feats = np.flatnonzero(np.any(C != 0, axis=0))
    item_feats = np.flatnonzero(np.any(I != 0, axis=0))
    minimise(lambda: state["w0"], lambda t: state.__setitem__("w0", t))
    for feats in (ctx_feats, item_feats):
        for l in feats:
            minimise(lambda l=l: w[l], lambda t, l=l: w.__setitem__(l, t))
        for f in range(V.shape[1]):
            for l in feats:
                minimise(lambda l=l, f=f: V[l, f], lambda t, l=l, f=f: V.__setitem__((l, f), t))
    return state["w0"], w, V
