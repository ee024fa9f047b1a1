"""kernels.cd_rows: a distributed round on a partition's rows equals a slow NumPy oracle that
visits every row (the round's previous form), bit for bit."""

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn._data import raw
from fmlearn.kernels.cd_rows import Apply, Gather, Rows, class_round, class_rows, layout_round
from fmlearn.kernels.losses import LOGISTIC, SQUARED


def _oracle(X, y, sw, color, pos, E, ap, ga, m):
    """One pass over every row: w0's shift, the applied class's change, the zeroed column,
    the gathered class's sums (squared loss: the derivative is E[i, 0])."""
    E = E.copy()
    G, H = np.zeros(m), np.zeros(m)
    for i in range(X.shape[0]):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        E[i, 0] += ap.shift
        hit = [p for p in range(lo, hi) if color[X.indices[p]] == ap.c]
        if ap.c >= 0 and hit:
            p = hit[0]
            t, x = pos[X.indices[p]], X.data[p]
            d, old = ap.delta[t], ap.old[t]
            if ap.slot == 0:
                E[i, 0] += d * x
            else:
                E[i, 0] += d * x * (E[i, ap.cur] - old * x)
                E[i, ap.cur] += d * x
            if ap.vn.shape[0]:
                E[i, ap.nxt] += ap.vn[t] * x
        if ap.zero >= 0:
            E[i, ap.zero] = 0.0
        hit = [p for p in range(lo, hi) if color[X.indices[p]] == ga.c]
        if ga.c >= 0 and hit:
            p = hit[0]
            t, x = pos[X.indices[p]], X.data[p]
            h = x if ga.slot == 0 else x * (E[i, ga.cur] - ga.old[t] * x)
            G[t] += sw[i] * E[i, 0] * h
            H[t] += sw[i] * h * h
    return E, G, H


def _partition(seed, n=300, n_users=40, n_items=30):
    rng = np.random.default_rng(seed)
    u, it = rng.integers(0, n_users, n), rng.integers(0, n_items, n)
    X = sp.csr_matrix((rng.uniform(0.5, 2.0, 2 * n), np.column_stack([u, n_users + it]).ravel(),
                       np.arange(0, 2 * n + 1, 2)), shape=(n, n_users + n_items))
    # classes: users by id mod 3, items by id mod 2 (no two features of a class share a row)
    color = np.concatenate([np.arange(n_users) % 3, 3 + np.arange(n_items) % 2]).astype(np.int64)
    pos = np.zeros(color.shape[0], np.int64)
    for c in range(5):
        members = np.flatnonzero(color == c)
        pos[members] = np.arange(members.shape[0])
    return rng, X, rng.normal(size=n), rng.uniform(0.5, 2.0, n), color, pos


@pytest.mark.parametrize("seed, a_c, a_slot, g_c, g_slot, shift, zero", [
    (0, 1, 1, 3, 1, 0.0, -1),
    (1, -1, 0, 0, 0, 0.25, -1),
    (2, 3, 0, 4, 1, 0.0, 2),
    (3, 4, 1, -1, 0, -0.5, 1),
])
def test_round_equals_a_pass_over_every_row(seed, a_c, a_slot, g_c, g_slot, shift, zero):
    rng, X, y, sw, color, pos = _partition(seed)
    E0 = rng.normal(size=(X.shape[0], 3))
    m = int(np.bincount(color).max())
    ap = Apply(shift, a_c, a_slot, 1, 2, rng.normal(size=m), rng.normal(size=m),
               rng.normal(size=m) if a_slot else np.zeros(0), zero)
    ga = Gather(g_c, g_slot, 1 if zero != 1 else 2, rng.normal(size=m), SQUARED)
    rows = Rows(*raw(X), y, sw, False)  # the arrays of a distributed partition
    E = E0.copy()
    G, H = np.empty(m), np.empty(m)
    class_round(rows, class_rows(rows.indptr, rows.indices, color), pos, E, ap, ga, G, H)
    E_ref, G_ref, H_ref = _oracle(X, y, sw, color, pos, E0, ap, ga, m)
    np.testing.assert_array_equal(E, E_ref)
    np.testing.assert_array_equal(G, G_ref)
    np.testing.assert_array_equal(H, H_ref)


def test_class_rows_lists_each_class_rows_in_order():
    _, X, _, _, color, _ = _partition(5)
    indptr, indices, _ = raw(X)
    cr = class_rows(indptr, indices, color)
    for c in range(5):
        rows = cr.row[cr.ptr[c]:cr.ptr[c + 1]]
        expect = np.flatnonzero(np.asarray((X[:, color == c] != 0).sum(axis=1)).ravel())
        np.testing.assert_array_equal(rows, expect)
        np.testing.assert_array_equal(color[X.indices[cr.entry[cr.ptr[c]:cr.ptr[c + 1]]]], c)


def _one_hot(seed, n=5000, n_users=60, n_items=50):
    """Two one-hot fields, values 1, unit weights: every class is dense (one entry in every
    row), so the layout round takes the in-memory sweep's unit-value paths."""
    rng = np.random.default_rng(seed)
    u, it = rng.integers(0, n_users, n), rng.integers(0, n_items, n)
    X = sp.csr_matrix((np.ones(2 * n), np.column_stack([u, n_users + it]).ravel(),
                       np.arange(0, 2 * n + 1, 2)), shape=(n, n_users + n_items))
    color = np.concatenate([np.zeros(n_users), np.ones(n_items)]).astype(np.int64)
    pos = np.concatenate([np.arange(n_users), np.arange(n_items)]).astype(np.int64)
    return rng, X, rng.normal(size=n), np.ones(n), color, pos


@pytest.mark.parametrize("data, unit, loss", [
    ("multi", False, SQUARED), ("one_hot", True, SQUARED), ("one_hot", True, LOGISTIC),
    ("one_hot", False, SQUARED)])
def test_layout_round_equals_class_round(data, unit, loss):
    """The workers' class-major layout (``distributed._fm_worker.layout``, the in-memory
    sweep's fused pass, rows sorted by their first feature) gives the round of the CSR rows
    taken in the layout's row order bit for bit, over a sequence of rounds: w0's shift, each
    pass's classes, the zeroed column, the last class's changes."""
    from fmlearn.distributed._fm_worker import layout

    rng, X, y, sw, color, pos = (_partition(7) if data == "multi" else _one_hot(8))
    if loss == LOGISTIC:
        y = np.where(y > 0, 1.0, -1.0)
    cols, plan, perm = layout(Rows(*raw(X), y, sw, unit), color)
    first = X.indices[X.indptr[:-1]]
    np.testing.assert_array_equal(perm, np.argsort(first, kind="stable"))
    np.testing.assert_array_equal(cols.y, y[perm])
    rows = Rows(*raw(X[perm]), y[perm], sw[perm], unit)
    crows = class_rows(rows.indptr, rows.indices, color)
    n_classes = int(color.max()) + 1
    sizes = np.bincount(color)
    m = int(sizes.max())
    E_csr = rng.normal(size=(X.shape[0], 3))
    E_lay = E_csr.copy()
    G, H = np.empty(m), np.empty(m)
    prev = (-1, 0, 1, 1)  # the class applied next: (c, slot, cur, nxt)
    steps = [(0, 1, 1)] + [(1, 1 + f % 2, 2 - f % 2) for f in range(3)]
    for r, (slot, cur, nxt) in enumerate(steps):
        for c in range(n_classes):
            mc, ma = int(sizes[c]), int(sizes[prev[0]]) if prev[0] >= 0 else 0
            ap = Apply(0.5 * rng.normal() if c == 0 else 0.0, prev[0], prev[1], prev[2],
                       prev[3], rng.normal(size=ma), rng.normal(size=ma),
                       rng.normal(size=ma) if r < 3 and ma else np.zeros(0),
                       nxt if c == 0 and r else -1)
            ga = Gather(c, slot, cur, rng.normal(size=mc), loss)
            class_round(rows, crows, pos, E_csr, ap, ga, G[:mc], H[:mc])
            layout_round(cols, plan, E_lay, ap, ga)
            np.testing.assert_array_equal(E_lay, E_csr)
            np.testing.assert_array_equal(plan.G[0, :mc], G[:mc])
            np.testing.assert_array_equal(plan.H[0, :mc], H[:mc])
            prev = (c, slot, cur, nxt)
