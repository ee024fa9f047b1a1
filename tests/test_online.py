"""Online FMs (seed 002): learners against NumPy oracles, the decision set, regret on a planted
stream, flat per-round cost, estimator behaviour and bad input."""

import doctest
import os
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone, is_classifier

import online_reference as ref
from fmlearn import (
    CCFMClassifier,
    CCFMRegressor,
    OnlineCFMClassifier,
    OnlineCFMRegressor,
    OnlineFMClassifier,
    OnlineFMRegressor,
    load,
)
from fmlearn._data import raw, to_csr
from fmlearn.datasets import make_ccfm_stream
from fmlearn.exceptions import DivergenceError
from fmlearn.losses import LOGISTIC, SQUARED
from fmlearn.solvers.ftrl import CCFMFTRLLearner, CFMFTRLLearner, FMFTRLLearner, FTRLSettings
from fmlearn.solvers.ocg import OCGLearner, OCGSettings
from fmlearn.solvers.ogd import CCFMOGDLearner, FMOGDLearner, OGDSettings
from fmlearn.solvers.pa import CCFMPALearner, FMPALearner, PASettings

LOSS = {"squared": SQUARED, "logistic": LOGISTIC}


def _stream(n, d, density, rng, task="squared"):
    X = sp.random(n, d, density=density, random_state=rng, format="csr")
    X.data = rng.normal(size=X.nnz)
    X = to_csr(X)
    if task == "squared":
        y = rng.normal(size=n)
    else:
        y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    return X, y


def _learn(learner, X, y, rows=None):
    n = X.shape[0]
    out = np.empty(n)
    order = np.arange(n, dtype=np.int64) if rows is None else np.asarray(rows, np.int64)
    status, row, _ = learner.learn(raw(X), y, np.ones(n), order, out)
    assert row == -1
    return out


# -- learners against the oracles ---------------------------------------------------------------

@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("self_inter", [True, False])
def test_ocg_small_d_is_exact_algorithm_2(loss, self_inter):
    # d + 1 <= 64: C is dense and the linear step is Lanczos on the whole H to a relative
    # residual of 1e-4, so the iterates follow the exact algorithm (eigh) to ~1e-3 over 300
    # rounds (a wrong step, sign or gamma moves them by O(1))
    rng = np.random.default_rng(1)
    X, y = _stream(300, 10, 0.4, rng, loss)
    p_ref, C_ref, _ = ref.ocg(X, y, 0.5, 4.0, self_inter, loss)
    L = OCGLearner(10, OCGSettings(learning_rate=0.5, trace_bound=4.0), LOSS[loss], self_inter)
    assert L.ident
    out = _learn(L, X, y)
    np.testing.assert_allclose(out, p_ref, atol=2e-3)
    np.testing.assert_allclose(L.matrix(), C_ref, atol=2e-3)


@pytest.mark.parametrize("self_inter", [True, False])
def test_ocg_linear_step_matches_dense_eigendecomposition(self_inter):
    # d + 1 = 81 > 64: the eigenvector comes from the tracked subspace. Refined to a tight
    # tolerance, its |theta| matches max |eig(H_t)| of H_t = -eta S_t - 2 C_t to rounding in
    # almost every round; Davidson steps can settle on an interior eigenpair when the subspace
    # misses the extreme one, which stays rare and small.
    rng = np.random.default_rng(2)
    d, eta = 80, 0.5
    X, y = _stream(200, d, 0.08, rng)
    L = OCGLearner(d, OCGSettings(learning_rate=eta, trace_bound=3.0, eig_max_iter=40,
                                  eig_tol=1e-10, max_rank=60), SQUARED, self_inter)
    assert not L.ident
    errs = []
    for i in range(X.shape[0]):
        C_before = L.matrix()
        _learn(L, X, y, [i])
        H = -eta * L.gradient_matrix() - 2 * C_before
        top = np.abs(np.linalg.eigvalsh(H)).max()
        errs.append(abs(top - abs(L.state.theta[0])) / top)
    errs = np.array(errs)
    assert np.median(errs) < 1e-12
    assert np.mean(errs > 1e-8) < 0.05
    assert errs.max() < 0.02


def test_ocg_default_tracked_step_on_one_hot_data():
    # user/item-like rows, d + 1 = 101: the default step (up to 4 Davidson steps) keeps the Ritz
    # value near the top |eigenvalue| (the row-only subspace, eig_iter=0, has a median error of
    # ~0.7 here, which is why refinement is the default; docs/online.md shows its effect)
    X, y, _ = make_ccfm_stream(500, 100, rank=2, trace_norm=40.0, fields=[50, 50], noise=0.1,
                               random_state=3)
    X = to_csr(X)
    L = OCGLearner(100, OCGSettings(learning_rate=1.0, trace_bound=40.0), SQUARED, True)
    errs = []
    for i in range(X.shape[0]):
        C_before = L.matrix()
        _learn(L, X, y, [i])
        H = -L.settings.learning_rate * L.gradient_matrix() - 2 * C_before
        top = np.abs(np.linalg.eigvalsh(H)).max()
        errs.append((top - abs(L.state.theta[0])) / top)
    errs = np.array(errs)
    assert errs.min() > -1e-9  # a Ritz value never exceeds the extreme eigenvalue
    assert np.median(errs) < 5e-3
    assert np.quantile(errs, 0.9) < 0.1


@pytest.mark.parametrize("self_inter", [True, False])
@pytest.mark.parametrize("max_rank", [None, 70])
def test_projected_ogd_and_pa_match_oracle(self_inter, max_rank):
    # max_rank None: d + 1 <= cap, dense C; 70 < d + 1 = 81: low-rank core, exact while the
    # projected rank stays below the cap (a small delta keeps it low)
    rng = np.random.default_rng(4)
    d = 10 if max_rank is None else 80
    X, y = _stream(150, d, 0.15 if max_rank is None else 0.05, rng)
    p_ref, C_ref = ref.ccfm_ogd(X, y, 0.3, 0.5, 1.5, self_inter)
    L = CCFMOGDLearner(d, OGDSettings(learning_rate=0.3, trace_bound=1.5,
                                   max_rank=max_rank or 128), SQUARED,
                       self_inter)
    assert L.ident == (max_rank is None)
    out = _learn(L, X, y)
    np.testing.assert_allclose(out, p_ref, atol=1e-8)
    np.testing.assert_allclose(L.matrix(), C_ref, atol=1e-8)
    # no trace mass dropped (beyond rounding of zero eigenvalues)
    assert L.info()["dropped_mass"] < 1e-10
    p_ref, C_ref = ref.ccfm_pa(X, y, 0.5, 0.1, 1.5, self_inter)
    L = CCFMPALearner(d, PASettings(pa_c=0.5, epsilon=0.1, trace_bound=1.5,
                                    max_rank=max_rank or 128), SQUARED, self_inter)
    out = _learn(L, X, y)
    np.testing.assert_allclose(out, p_ref, atol=1e-8)
    np.testing.assert_allclose(L.matrix(), C_ref, atol=1e-8)
    assert L.info()["dropped_mass"] < 1e-10


def test_rank_cap_reports_the_dropped_trace_mass():
    # a cap far below the rank the projected iterate needs: directions are dropped by
    # smallest |eigenvalue|, the iterate stays in the ball, and the dropped mass is reported
    rng = np.random.default_rng(4)
    X, y = _stream(150, 80, 0.15, rng)
    L = CCFMPALearner(80, PASettings(pa_c=0.5, epsilon=0.1, trace_bound=1.5, max_rank=30), SQUARED,
                      False)
    _learn(L, X, y)
    assert L.info()["dropped_mass"] > 1e-3
    assert L.trace_norm() <= 1.5 * (1 + 1e-9)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_ccfm_ftrl_dense_matches_oracle(loss):
    rng = np.random.default_rng(5)
    X, y = _stream(200, 12, 0.4, rng, loss)
    p_ref, C_ref = ref.ccfm_ftrl(X, y, 0.5, 0.5, 3.0, True, loss)
    L = CCFMFTRLLearner(12, FTRLSettings(learning_rate_pairwise=0.5, trace_bound=3.0), LOSS[loss],
                        True)
    assert L.dense
    out = _learn(L, X, y)
    np.testing.assert_allclose(out, p_ref, atol=1e-8)
    np.testing.assert_allclose(L.matrix(), C_ref, atol=1e-8)


def test_ccfm_ftrl_partial_eigendecomposition_matches_oracle(monkeypatch):
    # the tracked (partial) eigendecomposition path, on a stream whose projection keeps few
    # eigenpairs (early rounds, while eta_t ||S_t||_tr <= delta is guaranteed, use -eta_t S_t)
    import fmlearn.solvers.ftrl as ftrl

    monkeypatch.setattr(ftrl, "DENSE_EIGH_MAX", 10)
    X, y, _ = make_ccfm_stream(300, 40, rank=2, trace_norm=2.0, density=0.15, noise=0.05,
                               random_state=6)
    X = to_csr(X)
    p_ref, C_ref = ref.ccfm_ftrl(X, y, 2.0, 0.5, 1.0, True)
    L = CCFMFTRLLearner(40, FTRLSettings(learning_rate_pairwise=2.0, trace_bound=1.0,
                                         eig_max_iter=30, eig_tol=1e-10, m_max=20, m_keep=10),
                        SQUARED, True)
    assert not L.dense
    out = _learn(L, X, y)
    np.testing.assert_allclose(out, p_ref, atol=1e-8)
    np.testing.assert_allclose(L.matrix(), C_ref, atol=1e-8)


def test_cfm_ftrl_matches_oracle():
    rng = np.random.default_rng(7)
    X, y = _stream(200, 10, 0.4, rng)
    p_ref, W_ref, lin = ref.cfm_ftrl(X, y, 0.5, 0.5, 2.0, 0.1, 1.0, 0.0, 0.0)
    L = CFMFTRLLearner(10, FTRLSettings(learning_rate_pairwise=0.5, trace_bound=2.0,
                                  learning_rate=0.1, ftrl_beta=1.0), SQUARED)
    out = _learn(L, X, y)
    np.testing.assert_allclose(out, p_ref, atol=1e-8)
    np.testing.assert_allclose(L.matrix(), W_ref, atol=1e-8)
    np.testing.assert_allclose(L.state.w, lin[:-1, 2], atol=1e-10)
    assert L.state.w0[0] == pytest.approx(lin[-1, 2], abs=1e-10)
    assert np.linalg.eigvalsh(L.matrix()).min() > -1e-10  # W stays positive semidefinite


@pytest.mark.parametrize("learner", ["ogd", "pa", "ftrl"])
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_classic_fm_learners_match_oracle(learner, loss):
    rng = np.random.default_rng(8)
    X, y = _stream(150, 9, 0.4, rng, loss)
    cls = {"ogd": FMOGDLearner, "pa": FMPALearner, "ftrl": FMFTRLLearner}[learner]
    st = {"ogd": OGDSettings(learning_rate=0.05, implicit=False), "pa": PASettings(pa_c=0.1),
          "ftrl": FTRLSettings(learning_rate=0.1, ftrl_beta=1.0, learning_rate_pairwise=0.05,
                               ftrl_beta_pairwise=1.0)}[learner]
    L = cls(9, 3, 0.1, np.random.RandomState(0), LOSS[loss], st)
    V0 = L.state.V.copy()
    out = _learn(L, X, y)
    p_ref, w0, w, V = ref.fm_online(X, y, learner, V0, loss)
    np.testing.assert_allclose(out, p_ref, atol=1e-10)
    np.testing.assert_allclose(L.state.V, V, atol=1e-10)
    np.testing.assert_allclose(L.state.w, w, atol=1e-10)
    assert L.state.w0[0] == pytest.approx(w0, abs=1e-10)


def test_implicit_ogd_step_matches_oracle():
    rng = np.random.default_rng(9)
    X, y = _stream(100, 6, 0.5, rng)
    L = FMOGDLearner(6, 2, 0.1, np.random.RandomState(1), SQUARED, OGDSettings(learning_rate=0.5))
    V0 = L.state.V.copy()
    out = _learn(L, X, y)
    p_ref, *_ = ref.fm_online(X, y, "ogd", V0, eta0=0.5, implicit=True)
    np.testing.assert_allclose(out, p_ref, atol=1e-10)


# -- the decision set ----------------------------------------------------------------------------

@pytest.mark.parametrize("learner", ["ocg", "ogd", "pa", "ftrl"])
@pytest.mark.parametrize("d, max_rank", [(12, None), (100, 30)])
def test_iterate_never_leaves_the_ball(learner, d, max_rank):
    # both representations (dense C; a basis of at most 30 vectors for d + 1 = 101, where the
    # cap forces compressions), every learner, checked after every batch
    delta = 2.5
    n = 600
    X, y, _ = make_ccfm_stream(n, d, rank=3, trace_norm=4.0, density=min(1.0, 5.0 / d),
                               noise=0.3, random_state=10)
    m = CCFMRegressor(learner, trace_bound=delta, learning_rate=2.0, gamma_power=0.75,
                      max_rank=max_rank or "auto",
                      shuffle=False)
    for start in range(0, n, 100):
        m.partial_fit(X[start:start + 100], y[start:start + 100])
        assert m.trace_norm() <= delta * (1 + 1e-9)
    C = m.augmented_matrix()
    np.testing.assert_allclose(C, C.T, atol=1e-12)
    assert np.abs(np.linalg.eigvalsh(C)).sum() <= delta * (1 + 1e-9)


# -- regret against a planted comparator (002 Theorem 3) ---------------------------------------

@pytest.mark.parametrize("fields", [None, [20, 20]])
def test_average_regret_falls_with_log_log_slope_below_0_8(fields):
    # Theorem 3: regret_T <= 12 D G T^(3/4) + D G T^(1/4): cumulative regret against the planted
    # C* (inside the ball) must grow sublinearly; we assert the slope of log R(T) on log T over
    # the last decade, and that the average regret falls.
    T, d = 20000, 40
    X, y, C = make_ccfm_stream(T, d, rank=3, trace_norm=4.0, density=0.2, fields=fields,
                               noise=0.1, random_state=11)
    X = to_csr(X)
    Xh = np.column_stack([X.toarray(), np.ones(T)])
    comparator = 0.5 * (0.5 * np.einsum("ij,jk,ik->i", Xh, C, Xh) - y) ** 2
    L = OCGLearner(d, OCGSettings(learning_rate=1.0, trace_bound=4.0, gamma_power=0.5), SQUARED,
                   True)
    out = _learn(L, X, y)
    R = np.cumsum(0.5 * (out - y) ** 2 - comparator)
    Ts = np.unique(np.logspace(np.log10(T // 10), np.log10(T), 6).astype(int))
    assert np.all(R[Ts - 1] > 0)
    slope = np.polyfit(np.log(Ts), np.log(R[Ts - 1]), 1)[0]
    assert slope <= 0.8
    avg = R[Ts - 1] / Ts
    assert avg[-1] < avg[0]


# -- bounded state (the per-round time along the stream is measured in
# benchmarks/bench_online_flat.py, not asserted here) --------------------------------------------

def test_memory_does_not_grow_with_rounds():
    X, y, _ = make_ccfm_stream(6000, 500, rank=2, trace_norm=3.0, fields=[250, 250],
                               random_state=13)
    m = CCFMRegressor(trace_bound=3.0, shuffle=False)
    sizes = []
    for start in range(0, 6000, 2000):
        m.partial_fit(X[start:start + 2000], y[start:start + 2000])
        sizes.append(sum(v.nbytes for k, v in vars(m).items()
                         if k.startswith("state_") and isinstance(v, np.ndarray)))
    # the only growing part is the gradient pattern, bounded by the pairs of features seen
    assert sizes[-1] <= sizes[0] * 1.6
    assert m.state_S_indices_.shape[0] <= 3 * 6000 + 2 * 501 + 1


# -- estimators ---------------------------------------------------------------------------------

ESTIMATORS = [
    CCFMRegressor(trace_bound=3.0, gamma_power=1.0),
    CCFMRegressor("ogd", trace_bound=3.0),
    CCFMRegressor("pa", trace_bound=3.0),
    CCFMRegressor("ftrl", trace_bound=3.0),
    OnlineFMRegressor(n_factors=3),
    OnlineFMRegressor("ogd", n_factors=3),
    OnlineFMRegressor("pa", n_factors=3),
    OnlineCFMRegressor(trace_bound=3.0),
]
CLASSIFIERS = [
    CCFMClassifier(trace_bound=20.0, gamma_power=1.0),
    CCFMClassifier("ftrl", trace_bound=20.0),
    OnlineFMClassifier(n_factors=3),
    OnlineCFMClassifier(trace_bound=20.0),
]


def _regression_data(n=400, d=8, seed=0, sparse=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.6)
    y = X[:, 0] * X[:, 1] + X[:, 2] + 0.1 * rng.normal(size=n)
    return (sp.csr_matrix(X) if sparse else X), y


def _pred(m, X):
    return m.decision_function(X) if hasattr(m, "decision_function") else m.predict(X)


@pytest.mark.parametrize("est", ESTIMATORS, ids=repr)
def test_fit_without_shuffle_equals_partial_fit_batches(est):
    X, y = _regression_data()
    base = clone(est).set_params(shuffle=False, random_state=0)
    a = clone(base).fit(X, y)
    b = clone(base)
    for start in range(0, 400, 70):
        b.partial_fit(X[start:start + 70], y[start:start + 70])
    c = clone(base)
    for i in range(0, 40):  # single rows equal a batch of the same rows
        c.partial_fit(X[i:i + 1], y[i:i + 1])
    d = clone(base).partial_fit(X[:40], y[:40])
    np.testing.assert_allclose(_pred(a, X), _pred(b, X), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(_pred(c, X), _pred(d, X), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("est", ESTIMATORS + CLASSIFIERS, ids=repr)
def test_sparse_equals_dense_and_float32_close(est):
    X, y = _regression_data(seed=1)
    if is_classifier(est):
        y = np.where(y > 0, "pos", "neg")
    a = est.__class__(**est.get_params()).set_params(random_state=0).fit(X, y)
    b = est.__class__(**est.get_params()).set_params(random_state=0).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(_pred(a, X), _pred(b, X), atol=1e-10)
    # float32 rows hash differently, so the shuffled order differs: compare in given order
    a = est.__class__(**est.get_params()).set_params(shuffle=False, random_state=0).fit(X, y)
    c = est.__class__(**est.get_params()).set_params(shuffle=False, random_state=0).fit(
        X.astype(np.float32), y)
    np.testing.assert_allclose(_pred(a, X), _pred(c, X), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("est", ESTIMATORS + CLASSIFIERS, ids=repr)
def test_save_load_continues_learning_identically(est, tmp_path):
    X, y = _regression_data(seed=2)
    if is_classifier(est):
        y = np.where(y > 0, 1, -1)
    a = est.__class__(**est.get_params()).set_params(shuffle=False).fit(X[:200], y[:200])
    path = os.fspath(tmp_path / "m.fmz")
    a.save(path)
    b = load(path)
    np.testing.assert_array_equal(_pred(a, X), _pred(b, X))
    a.partial_fit(X[200:], y[200:])
    b.partial_fit(X[200:], y[200:])
    np.testing.assert_array_equal(_pred(a, X), _pred(b, X))
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(_pred(a, X), _pred(c, X))


@pytest.mark.parametrize("est", ESTIMATORS[:4] + ESTIMATORS[7:], ids=repr)
def test_weights_equal_repeated_rows(est):
    X, y = _regression_data(n=120, seed=3)
    w = np.random.default_rng(0).integers(0, 4, size=120)
    a = est.__class__(**est.get_params()).set_params(random_state=0).fit(X, y, sample_weight=w)
    Xr, yr = np.repeat(X, w, axis=0), np.repeat(y, w)
    perm = np.random.default_rng(1).permutation(Xr.shape[0])
    b = est.__class__(**est.get_params()).set_params(random_state=0).fit(Xr[perm], yr[perm])
    np.testing.assert_allclose(_pred(a, X), _pred(b, X), atol=1e-9)


def test_warm_start_continues_and_refit_restarts():
    X, y = _regression_data(seed=4)
    a = CCFMRegressor(trace_bound=3.0, warm_start=True, shuffle=False).fit(X, y)
    r1 = a.n_rounds_
    a.fit(X, y)
    assert a.n_rounds_ == 2 * r1
    b = CCFMRegressor(trace_bound=3.0, shuffle=False, n_iter=2).fit(X, y)
    np.testing.assert_allclose(a.predict(X), b.predict(X), atol=1e-10)
    c = CCFMRegressor(trace_bound=3.0, shuffle=False).fit(X, y).fit(X, y)
    assert c.n_rounds_ == r1


def test_prequential_predictions_precede_each_update():
    X, y = _regression_data(n=60, seed=5)
    m = CCFMRegressor(trace_bound=3.0, clip_predictions=False)
    pre = m._prequential(X, y)
    m2 = CCFMRegressor(trace_bound=3.0, clip_predictions=False)
    expected = [0.0]
    m2.partial_fit(X[:1], y[:1])
    for i in range(1, 60):
        expected.append(m2.predict(X[i:i + 1])[0])
        m2.partial_fit(X[i:i + 1], y[i:i + 1])
    np.testing.assert_allclose(pre, expected, atol=1e-12)


def test_regression_clipping_uses_only_past_targets():
    X, y = _regression_data(n=50, seed=6)
    m = CCFMRegressor(trace_bound=3.0)
    pre = m._prequential(X, y)
    lo = np.minimum.accumulate(np.r_[np.inf, y[:-1]])
    hi = np.maximum.accumulate(np.r_[-np.inf, y[:-1]])
    assert np.all((pre[1:] >= lo[1:] - 1e-12) & (pre[1:] <= hi[1:] + 1e-12))
    assert np.all(m.predict(X) <= y.max()) and np.all(m.predict(X) >= y.min())


def test_self_interaction_switch_changes_only_the_diagonal_terms():
    # one-hot rows (x_j^2 = x_j) against rows with values 2: without self-interactions the
    # prediction is linear in the diagonal-free part only
    X, y = _regression_data(n=300, seed=7)
    m = CCFMRegressor(trace_bound=3.0, self_interaction=False, shuffle=False).fit(X, y)
    C = m.augmented_matrix()
    Xh = np.column_stack([X, np.ones(len(X))])
    expected = 0.5 * np.einsum("ij,jk,ik->i", Xh, C, Xh) - 0.5 * (X**2) @ np.diag(C)[:-1]
    np.testing.assert_allclose(m._raw_predict(X), expected, atol=1e-10)
    # the bias entry is kept: a model on constant targets learns the mean through C_dd
    Xz = np.zeros((200, 3))
    mz = CCFMRegressor(trace_bound=3.0, self_interaction=False, gamma_power=1.0)
    mz.fit(Xz, np.ones(200))
    assert mz.predict(Xz[:1])[0] == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("cls", [CCFMClassifier, OnlineFMClassifier, OnlineCFMClassifier])
def test_classifier_any_two_labels_and_probabilities(cls):
    X, y = _regression_data(seed=8)
    labels = np.where(y > 0, "up", "down")
    m = cls(random_state=0).fit(X, labels)
    assert set(m.predict(X)) <= {"up", "down"}
    P = m.predict_proba(X)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert np.array_equal(m.classes_, np.array(["down", "up"]))
    assert np.mean(m.predict(X) == labels) > 0.6
    part = cls(random_state=0).partial_fit(X[:1], labels[:1], classes=["up", "down"])
    assert part.classes_.tolist() == ["down", "up"]


def test_learning_beats_the_mean_on_a_planted_stream():
    # a planted model without self-interactions, which every model family can represent
    X, y, _ = make_ccfm_stream(12000, 30, rank=2, trace_norm=4.0, density=0.2, noise=0.1,
                               self_interaction=False, random_state=14)
    for est in [CCFMRegressor(trace_bound=4.0, gamma_power=1.0),
                CCFMRegressor("ogd", trace_bound=4.0),
                CCFMRegressor("ftrl", trace_bound=4.0), OnlineFMRegressor(n_factors=4, n_iter=3),
                OnlineCFMRegressor(trace_bound=4.0, n_iter=3)]:
        est.set_params(random_state=0).fit(X[:10000], y[:10000])
        rmse = np.sqrt(np.mean((est.predict(X[10000:]) - y[10000:]) ** 2))
        assert rmse < 0.7 * y.std(), est


# -- bad input ------------------------------------------------------------------------------

def test_bad_input_raises_clear_errors():
    X, y = _regression_data()
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        CCFMRegressor().fit(Xn, y)
    with pytest.raises(ValueError):
        CCFMRegressor(trace_bound=0.0).fit(X, y)
    with pytest.raises(ValueError):
        CCFMRegressor(learner="sgd").fit(X, y)
    m = CCFMRegressor().partial_fit(X, y)
    with pytest.raises(ValueError, match="features"):
        m.partial_fit(X[:, :5], y)
    with pytest.raises(ValueError, match="too large"):
        CCFMRegressor().fit(X * 1e160, y)
    with pytest.raises(ValueError, match="learner"):
        m.set_params(learner="ogd").predict(X)
    with pytest.raises(ValueError, match="two classes"):
        CCFMClassifier().fit(X, np.ones(len(X)))
    with pytest.raises(MemoryError, match="budget"):
        CCFMRegressor(memory_budget_mb=0.01).fit(np.ones((5, 200)), np.ones(5))
    with pytest.raises(ValueError, match="max_rank"):
        CCFMRegressor("ogd", max_rank=20).fit(np.ones((5, 100)), np.ones(5))


def test_divergence_stops_and_keeps_the_previous_model():
    X, y = _regression_data(seed=9)
    m = OnlineFMRegressor("ogd", learning_rate=5.0, power_t=0.0, implicit=False, n_factors=4,
                          random_state=0, shuffle=False)
    m.partial_fit(X[:5] * 0.01, y[:5])
    before = {k: np.array(v, copy=True) for k, v in vars(m).items()
              if k.startswith("state_") and isinstance(v, np.ndarray)}
    with pytest.raises(DivergenceError, match="learning_rate"):
        m.partial_fit(X * 100, y * 100)
    for k, v in before.items():
        np.testing.assert_array_equal(getattr(m, k), v)


def test_doctests_of_the_online_modules():
    import fmlearn.datasets._synthetic_ccfm as synth
    import fmlearn.evaluate as evaluate
    import fmlearn.metrics as metrics
    import fmlearn.online.ccfm as ccfm
    import fmlearn.online.cfm as cfm
    import fmlearn.online.fm as fm

    for mod in (ccfm, fm, cfm, evaluate, metrics, synth):
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, mod.__name__
        assert result.attempted > 0, mod.__name__


# -- command line ---------------------------------------------------------------------------

def test_cli_online_learns_saves_and_reports(tmp_path, capsys):
    from fmlearn.cli import main
    from fmlearn.datasets import save_svmlight

    X, y, _ = make_ccfm_stream(600, 8, rank=2, trace_norm=20.0, density=0.5,
                               task="classification", random_state=15)
    train, test = os.fspath(tmp_path / "train.svm"), os.fspath(tmp_path / "test.svm")
    save_svmlight(X[:500], y[:500], train)
    save_svmlight(X[500:], y[500:], test)
    model, curve = os.fspath(tmp_path / "m.fmz"), os.fspath(tmp_path / "c.tsv")
    rc = main(["online", train, "--model", "ccfm", "--learner", "ocg", "--loss", "logistic",
               "--trace-bound", "20", "--test", test, "--save", model, "--curve", curve,
               "--batch-size", "100", "--seed", "0", "--json"])
    assert rc == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["rounds"] == 500
    # the first call's compilation is reported on its own, not as learning time
    assert report["compiled kernels in"].endswith("s (not learning time)")
    assert report["rows per second"] > 0
    assert 0 <= report["prequential error_rate"] <= 1 and 0 <= report["test auc"] <= 1
    m = load(model)
    assert isinstance(m, CCFMClassifier) and m.n_rounds_ == 500
    rows = open(curve).read().splitlines()
    assert rows[0].split("\t") == ["rows", "seconds", "error_rate", "auc"] and len(rows) == 6
    assert main(["online", train, "--model", "fm", "--learner", "ocg"]) == 2
    assert "learners" in capsys.readouterr().err


@pytest.mark.parametrize("self_inter", [True, False])
@pytest.mark.parametrize("fields", [None, [10, 10]])
def test_planted_stream_targets_equal_the_dense_model(self_inter, fields):
    # the generator scores rows from the factors of C*; noise-free targets must equal
    # 1/2 x^' C* x^ (minus the self-interactions when excluded) computed densely
    X, y, C = make_ccfm_stream(300, 20, rank=3, trace_norm=4.0, fields=fields, noise=0.0,
                               self_interaction=self_inter, random_state=1)
    Xd = X.toarray()
    Xh = np.hstack([Xd, np.ones((300, 1))])
    f = 0.5 * np.einsum("ij,jk,ik->i", Xh, C, Xh)
    if not self_inter:
        f -= 0.5 * (Xd ** 2) @ np.diag(C)[:-1]
    np.testing.assert_allclose(y, f, rtol=1e-12, atol=1e-12)


# -- live learner, failure atomicity, edge numbers, loaded state ---------------------------------

ALL_LEARNERS = ESTIMATORS + CLASSIFIERS[:1]


def _snapshot_dict(est):
    return {k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else copy_value(v))
            for k, v in vars(est).items() if not k.startswith("_")}


def copy_value(v):
    import copy

    return copy.deepcopy(v)


def _assert_same_dict(est, before):
    after = {k: v for k, v in vars(est).items() if not k.startswith("_")}
    assert set(after) == set(before)
    for k, v in before.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(after[k], v, err_msg=k)
        else:
            assert after[k] == v, k


@pytest.mark.parametrize("est", ALL_LEARNERS, ids=repr)
def test_one_row_calls_keep_the_live_learner_without_copying_its_state(est):
    # the state attributes are the live learner's arrays: a partial_fit changes them in place
    # (no per-call copy of the O(d k) state), and a save finds them by name
    X, y = _regression_data(n=60, seed=11, sparse=True)
    if is_classifier(est):
        y = np.where(y > 0, 1, -1)
    m = clone(est).set_params(shuffle=False)
    m.partial_fit(X[:20], y[:20])
    arrays = {k: v for k, v in vars(m).items() if k.startswith("state_") and v.size > 1}
    for i in range(20, 25):
        m.partial_fit(X[i:i + 1], y[i:i + 1])
    for k, v in arrays.items():
        if k in ("state_S_indptr_", "state_S_indices_", "state_S_data_"):
            continue  # the exact pattern of S grows when a row brings new feature pairs
        assert getattr(m, k) is v, k
    assert m.n_rounds_ == 25


@pytest.mark.parametrize("est", ALL_LEARNERS, ids=repr)
@pytest.mark.parametrize("failure", ["divergence", "bad_input", "interrupt"])
def test_a_failed_call_leaves_every_attribute_as_it_was(est, failure, monkeypatch):
    X, y = _regression_data(n=80, seed=12)
    if is_classifier(est):
        y = np.where(y > 0, 1, -1)
    m = clone(est).set_params(shuffle=False, random_state=0)
    m.partial_fit(X[:40], y[:40])
    before = _snapshot_dict(m)
    pred = _pred(m, X)
    if failure == "divergence":
        # a limit that a later row's prediction exceeds: the call learns some rows, then stops
        monkeypatch.setattr(type(m), "_limit", lambda self, yy: 1e-3)
        expected = DivergenceError
        Xb, yb = X[40:].copy(), y[40:]
        Xb[:3] = 0.0  # rows of zeros: predicted near 0 and learned before the stop
    elif failure == "bad_input":
        expected = ValueError
        Xb, yb = X[40:].copy(), y[40:]
        Xb[-1, 0] = np.nan
    else:
        from fmlearn.solvers._online_common import OnlineLearner

        real = OnlineLearner.learn
        calls = []

        def interrupted(self, *args, **kw):
            real(self, *args, **kw)  # the rows are learned, then Ctrl-C arrives
            calls.append(1)
            raise KeyboardInterrupt

        monkeypatch.setattr(OnlineLearner, "learn", interrupted)
        expected = KeyboardInterrupt
        Xb, yb = X[40:], y[40:]
    with pytest.raises(expected):
        m.partial_fit(Xb, yb)
    monkeypatch.undo()
    _assert_same_dict(m, before)
    np.testing.assert_array_equal(_pred(m, X), pred)
    # and the model goes on learning as if the failed call never happened
    ref = clone(est).set_params(shuffle=False, random_state=0).partial_fit(X[:40], y[:40])
    m.partial_fit(X[40:60], y[40:60])
    ref.partial_fit(X[40:60], y[40:60])
    np.testing.assert_array_equal(_pred(m, X), _pred(ref, X))


@pytest.mark.parametrize("learner", ["ocg", "ogd", "ftrl"])
@pytest.mark.parametrize("d", [6, 80])
def test_edge_numbers_raise_named_errors_never_crash(learner, d):
    # issue 10 item 4: huge or tiny targets, huge weights and steps end in a ValueError or a
    # DivergenceError naming the cause (before: ZeroDivisionError from the kernel)
    rng = np.random.default_rng(13)
    X = rng.normal(size=(30, d)) * (rng.random((30, d)) < 0.3)
    y = rng.normal(size=30)
    for kw, data in [({}, (X, y * 1e300)), ({}, (X, y, np.full(30, 1e300))),
                     ({"learning_rate": 1e300}, (X, y)), ({}, (X, y * 1e-300))]:
        m = CCFMRegressor(learner, trace_bound=3.0, **kw)
        try:
            m.fit(*data[:2], sample_weight=data[2] if len(data) > 2 else None)
        except DivergenceError as exc:
            assert "diverged" in str(exc)
            continue
        except ValueError as exc:
            assert "rescale" in str(exc)
            continue
        assert np.all(np.isfinite(m.predict(X)))


def test_auto_parameters_are_documented_defaults_and_explicit_values_are_honoured():
    X, y = _regression_data(n=30)
    auto = CCFMRegressor("ftrl").fit(X, y)._learner().settings
    assert (auto.eig_max_iter, auto.eig_tol) == (10, 1e-6)
    given = CCFMRegressor("ftrl", eig_max_iter=2, eig_tol=1e-3).fit(X, y)._learner().settings
    assert (given.eig_max_iter, given.eig_tol) == (2, 1e-3)
    ocg = CCFMRegressor("ocg", max_rank=5).fit(np.hstack([X] * 10), y)._learner()
    assert ocg.settings.max_rank == 5 and ocg.state.C.K.shape == (5, 5)
    assert CCFMRegressor("ogd").fit(X, y)._learner().settings.max_rank == 128


def _crafted(tmp_path, est, edit):
    """Save ``est``, change one state array with ``edit`` and recompute every digest."""
    import hashlib
    import io as _io
    import json
    import zipfile

    from fmlearn.io import manifest_digest

    src, dst = tmp_path / "m.fmz", tmp_path / "evil.fmz"
    est.save(src)
    with zipfile.ZipFile(src) as zf:
        meta = json.loads(zf.read("fmlearn.json"))
        blobs = {n: zf.read(n) for n in zf.namelist() if n != "fmlearn.json"}
    name, arr = edit({k: np.load(_io.BytesIO(blobs[s["file"]]))
                      for k, s in meta["arrays"].items()})
    buf = _io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr))
    spec = meta["arrays"][name]
    blobs[spec["file"]] = buf.getvalue()
    spec.update(shape=list(arr.shape), dtype=arr.dtype.str,
                sha256=hashlib.sha256(buf.getvalue()).hexdigest())
    meta["digest"] = manifest_digest(meta)
    with zipfile.ZipFile(dst, "w") as zf:
        zf.writestr("fmlearn.json", json.dumps(meta))
        for n, b in blobs.items():
            zf.writestr(n, b)
    return dst


MUTATIONS = {
    "C_r beyond the cap": ("state_C_r_", lambda a: a + 10_000),
    "negative counter": ("state_t_", lambda a: a - 10**6),
    "S index out of range": ("state_S_indices_", lambda a: a + 10_000),
    "S pointer past the end": ("state_S_indptr_", lambda a: a * 3 + 1),
    "NaN in C": ("state_C_K_", lambda a: a * np.nan),
    "truncated basis": ("state_C_K_", lambda a: a[:-1]),
    "tracker size": ("state_tr_nb_", lambda a: a + 100),
    "V of the wrong width": ("state_V_", lambda a: a[:, :-1]),
    "w truncated": ("state_w_", lambda a: a[:-1]),
    "huge k": ("state_k_", lambda a: a + 100),
}


_S = ["S index out of range", "S pointer past the end", "tracker size"]
CRAFTED = [
    (CCFMRegressor(trace_bound=3.0), ["C_r beyond the cap", "negative counter", "NaN in C",
                                      "truncated basis"] + _S),
    (CCFMRegressor("ogd", trace_bound=3.0, max_rank=20),
     ["C_r beyond the cap", "negative counter", "NaN in C", "truncated basis"]),
    (CCFMRegressor("ftrl", trace_bound=3.0), ["negative counter", "huge k"] + _S),
    (OnlineFMRegressor("ftrl", n_factors=3),
     ["negative counter", "V of the wrong width", "w truncated"]),
    (OnlineCFMRegressor(trace_bound=3.0), ["negative counter", "huge k", "w truncated"] + _S),
]


@pytest.mark.parametrize("est, mutation", [(e, m) for e, ms in CRAFTED for m in ms], ids=repr)
def test_crafted_state_is_refused_before_any_kernel_runs(est, mutation, tmp_path):
    from fmlearn.exceptions import ModelFileError

    X, y = _regression_data(n=50, d=8, seed=14)
    m = clone(est).set_params(shuffle=False).fit(X, y)
    key, change = MUTATIONS[mutation]
    path = _crafted(tmp_path, m, lambda arrays: (key, change(arrays[key])))
    with pytest.raises(ModelFileError, match="inconsistent model state|cannot predict"):
        load(path)


def test_a_version_1_file_is_refused_with_the_remedy(tmp_path):
    import json
    import zipfile

    from fmlearn.exceptions import ModelFileError
    from fmlearn.io import manifest_digest

    X, y = _regression_data(n=30)
    CCFMRegressor().fit(X, y).save(tmp_path / "m.fmz")
    with zipfile.ZipFile(tmp_path / "m.fmz") as zf:
        meta = json.loads(zf.read("fmlearn.json"))
        blobs = {n: zf.read(n) for n in zf.namelist() if n != "fmlearn.json"}
    meta["format_version"] = 1
    meta["digest"] = manifest_digest(meta)
    with zipfile.ZipFile(tmp_path / "old.fmz", "w") as zf:
        zf.writestr("fmlearn.json", json.dumps(meta))
        for n, b in blobs.items():
            zf.writestr(n, b)
    with pytest.raises(ModelFileError, match="version 1.*fit the model again"):
        load(tmp_path / "old.fmz")


def test_state_of_ocg_on_wide_sparse_rows_is_bounded_by_the_sketch():
    # 60 features per row of 3,000: S's exact pattern would hold up to 61^2 pairs a row; beyond
    # 4 * sketch_size * (d + 1) entries it becomes the sketch and the state stops growing
    X, y, _ = make_ccfm_stream(1500, 3000, rank=2, trace_norm=5.0, fields=[50] * 60,
                               noise=0.1, random_state=15)
    m = CCFMRegressor(trace_bound=5.0, sketch_size=4, shuffle=False)
    sizes = []
    for start in range(0, 1500, 300):
        m.partial_fit(X[start:start + 300], y[start:start + 300])
        sizes.append(sum(v.nbytes for k, v in vars(m).items() if k.startswith("state_")))
    assert m.info_["gradient_sketch"] and m.state_S_P_.shape == (8, 3001)
    assert max(sizes[1:]) == min(sizes[1:])
    assert np.all(np.isfinite(m.predict(X[:50])))
