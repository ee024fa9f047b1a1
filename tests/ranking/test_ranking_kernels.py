"""The ranking kernels against slow NumPy oracles (tests/ranking/ranking_reference.py): one
BPR / WARP epoch (SGD and Adagrad, one-hot items and items sharing side features), the
pairwise gradient against finite differences, one iCD sweep against brute-force coordinate
minimisation of the all-pairs loss, the iCD objective against the dense loss, and its
monotone decrease."""

import numpy as np
import pytest
from ranking_reference import (
    SplitMix,
    fm_score,
    icd_sweep,
    objective,
    pair_weights,
    pairwise_epoch,
)

from fmlearn.ranking import Interactions
from fmlearn.ranking._data import summarize
from fmlearn.ranking.kernels import sampled as K
from fmlearn.ranking.kernels.icd import Other, icd_objective, icd_side
from fmlearn.ranking.plan import ICDSettings, SampledSettings
from fmlearn.ranking.solvers.icd import _cache, icd_config, sides
from fmlearn.ranking.solvers.sampled import max_step_features, pair_config, pair_data


def _data(side_features, seed=0, n_users=6, n_items=7, n=30, weights=False):
    rng = np.random.default_rng(seed)
    users = rng.integers(n_users, size=n)
    items = rng.integers(n_items, size=n)
    F = (rng.random((n_items, 3)) < 0.5) * rng.uniform(0.5, 1.5, (n_items, 3)) \
        if side_features else None
    U = rng.uniform(0.5, 1.5, (n_users, 2)) if side_features else None
    w = rng.uniform(0.5, 2.0, n) if weights else None
    return summarize(Interactions(users, items, n_users=n_users, n_items=n_items, weights=w,
                                  item_features=F, user_features=U), None)


def _dense(ed):
    return ed.contexts.toarray(), ed.items.toarray()


def test_splitmix_matches_the_kernel():
    rng = np.array([12345], dtype=np.uint64)
    ref = SplitMix(12345)
    got = [K.next_uniform(rng) for _ in range(5)]
    assert got == [ref.uniform() for _ in range(5)]


@pytest.mark.parametrize("loss", ["bpr", "warp"])
@pytest.mark.parametrize("side", [False, True])
@pytest.mark.parametrize("adagrad", [False, True])
def test_epoch_equals_the_oracle(loss, side, adagrad):
    ed = _data(side, seed=1, weights=True)
    C, I = _dense(ed)
    d, k = ed.n_features, 3
    rng0 = np.random.default_rng(2)
    w = rng0.normal(0, 0.3, d)
    V = rng0.normal(0, 0.3, (d, k))
    settings = SampledSettings(loss=loss, adagrad=adagrad, learning_rate=0.1, reg_linear=0.01,
                               reg_pairwise=0.02, max_sampled=5, negative_sampling="uniform",
                               n_iter=1)
    disjoint = np.unique(ed.items.indices).shape[0] == ed.items.indices.shape[0]
    assert disjoint != side
    order = rng0.permutation(ed.n_events)
    model = K.Model(w.copy(), V.copy(), np.zeros(1))
    acc = K.Accum(np.full(d, K.ADAGRAD_INIT), np.full((d, k), K.ADAGRAD_INIT))
    work = K.pair_work(d, k, max_step_features(ed))
    loss_k, steps, bad = K.pairwise_epoch(pair_data(ed), model, acc, order.astype(np.int64),
                                          np.array([99], np.uint64),
                                          pair_config(settings, disjoint), work)
    w_r, V_r = w.copy(), V.copy()
    Aw, AV = np.full(d, K.ADAGRAD_INIT), np.full((d, k), K.ADAGRAD_INIT)
    loss_r = pairwise_epoch(C, I, ed.ev_ctx, ed.ev_item, ed.ev_weight, w_r, V_r, Aw, AV, order,
                            99, loss, adagrad, 0.1, 0.01, 0.02, 5)
    assert bad == -1 and steps > 0
    # summation orders differ (decomposed vs pair by pair): tolerance of a few ulps of the
    # scores, grown over one epoch of ~30 steps
    np.testing.assert_allclose(model.w, w_r, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(model.V, V_r, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(acc.V, AV, rtol=1e-10)
    assert loss_k == pytest.approx(loss_r, rel=1e-10)
    assert np.all(work.slot == -1)


def test_popularity_sampling_equals_the_oracle():
    ed = _data(False, seed=3)
    C, I = _dense(ed)
    d, k = ed.n_features, 2
    V = np.random.default_rng(4).normal(0, 0.3, (d, k))
    settings = SampledSettings(loss="warp", adagrad=True, learning_rate=0.05, reg_linear=0.0,
                               reg_pairwise=0.0, max_sampled=4,
                               negative_sampling="popularity", n_iter=1)
    order = np.arange(ed.n_events, dtype=np.int64)
    model = K.Model(np.zeros(d), V.copy(), np.zeros(1))
    acc = K.Accum(np.ones(d), np.ones((d, k)))
    K.pairwise_epoch(pair_data(ed), model, acc, order, np.array([7], np.uint64),
                     pair_config(settings, True), K.pair_work(d, k, 3))
    w_r, V_r = np.zeros(d), V.copy()
    pairwise_epoch(C, I, ed.ev_ctx, ed.ev_item, ed.ev_weight, w_r, V_r, np.ones(d),
                   np.ones((d, k)), order, 7, "warp", True, 0.05, 0.0, 0.0, 4, popularity=True)
    np.testing.assert_allclose(model.V, V_r, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("loss", ["bpr", "warp"])
def test_step_is_the_gradient_of_the_pair_loss(loss):
    # Two users, two items, one positive each: user 0's negative is item 1. One plain SGD
    # step on user 0's event moves theta by -eta g d x / d theta, x = f(c, i) - f(c, j), with
    # g = -sigmoid(-x) (BPR) or -L(1) = -1 (WARP, margin violated at these small scores).
    ed = summarize(Interactions([0, 1], [0, 1], n_users=2, n_items=2,
                                user_features=np.array([[0.7, 1.3], [0.2, 0.0]]),
                                item_features=np.array([[1.0, 0.5], [0.8, 0.0]])), None)
    C, I = _dense(ed)
    d, k = ed.n_features, 3
    rng = np.random.default_rng(5)
    w = rng.normal(0, 0.2, d)
    V = rng.normal(0, 0.2, (d, k))
    eta = 1e-3
    settings = SampledSettings(loss=loss, adagrad=False, learning_rate=eta, reg_linear=0.0,
                               reg_pairwise=0.0, max_sampled=50, negative_sampling="uniform",
                               n_iter=1)
    model = K.Model(w.copy(), V.copy(), np.zeros(1))
    K.pairwise_epoch(pair_data(ed), model, K.Accum(np.ones(d), np.ones((d, k))),
                     np.zeros(1, np.int64), np.array([1], np.uint64), pair_config(settings, False),
                     K.pair_work(d, k, max_step_features(ed)))

    def x_of(w_, V_):
        return fm_score(C[0] + I[0], 0.0, w_, V_) - fm_score(C[0] + I[1], 0.0, w_, V_)

    x = x_of(w, V)
    g = -1.0 / (1.0 + np.exp(x)) if loss == "bpr" else -1.0
    h = 1e-6
    for theta, moved in ((w, model.w), (V, model.V)):
        fd = np.zeros_like(theta)
        for idx in np.ndindex(theta.shape):
            t = theta[idx]
            theta[idx] = t + h
            xp = x_of(w, V)
            theta[idx] = t - h
            xm = x_of(w, V)
            theta[idx] = t
            fd[idx] = (xp - xm) / (2 * h)
        # central differences: error O(h^2) on an O(1) quadratic, then divided by nothing
        np.testing.assert_allclose((theta - moved) / (eta * g), fd, atol=1e-8)


def _icd_setup(side, seed, k=2, alpha0=0.3, weights=True):
    ed = _data(side, seed=seed, n_users=5, n_items=6, n=18, weights=weights)
    C, I = _dense(ed)
    d = ed.n_features
    rng = np.random.default_rng(seed + 10)
    w0 = 0.1
    w = np.zeros(d)
    V = rng.normal(0, 0.4, (d, k))
    Wt, Y = pair_weights(ed.ev_ctx, ed.ev_item, ed.ev_weight, (ed.n_contexts, ed.n_items),
                         alpha0)
    return ed, C, I, w0, w, V, Wt, Y


@pytest.mark.parametrize("side", [False, True])
def test_icd_sweep_equals_brute_force_coordinate_minimisation(side):
    alpha0, regs = 0.3, (0.05, 0.1, 0.2)
    ed, C, I, w0, w, V, Wt, Y = _icd_setup(side, seed=6, alpha0=alpha0)
    settings = ICDSettings(negative_weight=alpha0, reg_bias=regs[0], reg_linear=regs[1],
                           reg_pairwise=regs[2], n_iter=1)
    k = V.shape[1]
    model = K.Model(w.copy(), V.copy(), np.array([w0]))
    ctx, item, m0 = sides(ed, alpha0)
    cc, ic = _cache(ed.n_contexts, k, ed.n_events), _cache(ed.n_items, k, ed.n_events)
    cfg = icd_config(settings, m0)
    icd_objective(item, ic, Other(cc.phi, cc.Q), model, cfg)  # the items' caches
    icd_side(ctx, cc, Other(ic.phi, ic.Q), model, cfg)
    icd_side(item, ic, Other(cc.phi, cc.Q), model, cfg)
    w0_r, w_r, V_r = icd_sweep(C, I, w0, w, V, Wt, Y, *regs)
    # each oracle step is a parabola's vertex from three loss values of size ~10: its
    # rounding (~1e-14 relative) is amplified by 1 / curvature
    assert model.scal[0] == pytest.approx(w0_r, abs=1e-9)
    np.testing.assert_allclose(model.w, w_r, atol=1e-9)
    np.testing.assert_allclose(model.V, V_r, atol=1e-9)
    got = icd_objective(item, ic, Other(cc.phi, cc.Q), model, cfg)
    assert got == pytest.approx(objective(C, I, model.scal[0], model.w, model.V, Wt, Y, *regs),
                                rel=1e-12)


def test_icd_objective_never_increases():
    ed, C, I, w0, w, V, Wt, Y = _icd_setup(True, seed=8, k=3, alpha0=0.1)
    settings = ICDSettings(negative_weight=0.1, reg_bias=0.0, reg_linear=0.01,
                           reg_pairwise=0.01, n_iter=1)
    model = K.Model(w.copy(), V.copy(), np.array([w0]))
    ctx, item, m0 = sides(ed, 0.1)
    cc, ic = _cache(ed.n_contexts, 3, ed.n_events), _cache(ed.n_items, 3, ed.n_events)
    cfg = icd_config(settings, m0)
    last = icd_objective(item, ic, Other(cc.phi, cc.Q), model, cfg)
    for _ in range(8):
        icd_side(ctx, cc, Other(ic.phi, ic.Q), model, cfg)
        icd_side(item, ic, Other(cc.phi, cc.Q), model, cfg)
        now = icd_objective(item, ic, Other(cc.phi, cc.Q), model, cfg)
        assert now <= last * (1 + 1e-12)
        last = now
