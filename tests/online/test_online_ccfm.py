"""CCFMRegressor / CCFMClassifier (fmlearn.online.ccfm, seed 002): OCCFM and the projected
and FTRL learners against NumPy oracles, the decision set, regret on a planted stream, bounded
memory, warm start, prequential clipping, bad input and edge numbers."""

import numpy as np
import online_reference as ref
import pytest
from online_cases import LOSS

from fmlearn import (
    CCFMClassifier,
    CCFMRegressor,
)
from fmlearn._data import to_csr
from fmlearn.datasets import make_ccfm_stream
from fmlearn.exceptions import DivergenceError
from fmlearn.losses import SQUARED
from fmlearn.solvers.ftrl import CCFMFTRLLearner, FTRLSettings
from fmlearn.solvers.ocg import OCGLearner, OCGSettings
from fmlearn.solvers.ogd import CCFMOGDLearner, OGDSettings
from fmlearn.solvers.pa import CCFMPALearner, PASettings


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("self_inter", [True, False])
def test_ocg_small_d_is_exact_algorithm_2(loss, self_inter, stream, learn_rows):
    # d + 1 <= 64: C is dense and the linear step is Lanczos on the whole H to a relative
    # residual of 1e-4, so the iterates follow the exact algorithm (eigh) to ~1e-3 over 300
    # rounds (a wrong step, sign or gamma moves them by O(1)). The largest deviations are
    # 1.9e-3 (predictions) and 3.5e-4 (C), the same under the SkylakeX, Haswell and
    # Sandybridge kernels (the Lanczos truncation, not the summation order); the tolerance
    # keeps a margin of 2.5x over them (2e-3 was 96% used).
    rng = np.random.default_rng(1)
    X, y = stream(300, 10, 0.4, rng, loss)
    p_ref, C_ref, _ = ref.ocg(X, y, 0.5, 4.0, self_inter, loss)
    L = OCGLearner(10, OCGSettings(learning_rate=0.5, trace_bound=4.0), LOSS[loss], self_inter)
    assert L.ident
    out = learn_rows(L, X, y)
    np.testing.assert_allclose(out, p_ref, atol=5e-3)
    np.testing.assert_allclose(L.matrix(), C_ref, atol=5e-3)


@pytest.mark.parametrize("self_inter", [True, False])
def test_ocg_linear_step_matches_dense_eigendecomposition(self_inter, stream, learn_rows):
    # d + 1 = 81 > 64: the eigenvector comes from the tracked subspace. Refined to a tight
    # tolerance, its |theta| matches max |eig(H_t)| of H_t = -eta S_t - 2 C_t to rounding in
    # almost every round; Davidson steps can settle on an interior eigenpair when the subspace
    # misses the extreme one, which stays rare and small.
    rng = np.random.default_rng(2)
    d, eta = 80, 0.5
    X, y = stream(200, d, 0.08, rng)
    L = OCGLearner(d, OCGSettings(learning_rate=eta, trace_bound=3.0, eig_max_iter=40,
                                  eig_tol=1e-10, max_rank=60), SQUARED, self_inter)
    assert not L.ident
    errs = []
    for i in range(X.shape[0]):
        C_before = L.matrix()
        learn_rows(L, X, y, [i])
        H = -eta * L.gradient_matrix() - 2 * C_before
        top = np.abs(np.linalg.eigvalsh(H)).max()
        errs.append(abs(top - abs(L.state.theta[0])) / top)
    errs = np.array(errs)
    assert np.median(errs) < 1e-12
    assert np.mean(errs > 1e-8) < 0.05
    assert errs.max() < 0.02


def test_ocg_default_tracked_step_on_one_hot_data(learn_rows):
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
        learn_rows(L, X, y, [i])
        H = -L.settings.learning_rate * L.gradient_matrix() - 2 * C_before
        top = np.abs(np.linalg.eigvalsh(H)).max()
        errs.append((top - abs(L.state.theta[0])) / top)
    errs = np.array(errs)
    assert errs.min() > -1e-9  # a Ritz value never exceeds the extreme eigenvalue
    assert np.median(errs) < 5e-3
    assert np.quantile(errs, 0.9) < 0.1


@pytest.mark.parametrize("self_inter", [True, False])
@pytest.mark.parametrize("max_rank", [None, 70])
def test_projected_ogd_and_pa_match_oracle(self_inter, max_rank, stream, learn_rows):
    # max_rank None: d + 1 <= cap, dense C; 70 < d + 1 = 81: low-rank core, exact while the
    # projected rank stays below the cap (a small delta keeps it low)
    rng = np.random.default_rng(4)
    d = 10 if max_rank is None else 80
    X, y = stream(150, d, 0.15 if max_rank is None else 0.05, rng)
    p_ref, C_ref = ref.ccfm_ogd(X, y, 0.3, 0.5, 1.5, self_inter)
    L = CCFMOGDLearner(d, OGDSettings(learning_rate=0.3, trace_bound=1.5,
                                   max_rank=max_rank or 128), SQUARED,
                       self_inter)
    assert L.ident == (max_rank is None)
    out = learn_rows(L, X, y)
    np.testing.assert_allclose(out, p_ref, atol=1e-8)
    np.testing.assert_allclose(L.matrix(), C_ref, atol=1e-8)
    # no trace mass dropped (beyond rounding of zero eigenvalues)
    assert L.info()["dropped_mass"] < 1e-10
    p_ref, C_ref = ref.ccfm_pa(X, y, 0.5, 0.1, 1.5, self_inter)
    L = CCFMPALearner(d, PASettings(pa_c=0.5, epsilon=0.1, trace_bound=1.5,
                                    max_rank=max_rank or 128), SQUARED, self_inter)
    out = learn_rows(L, X, y)
    np.testing.assert_allclose(out, p_ref, atol=1e-8)
    np.testing.assert_allclose(L.matrix(), C_ref, atol=1e-8)
    assert L.info()["dropped_mass"] < 1e-10


def test_rank_cap_reports_the_dropped_trace_mass(stream, learn_rows):
    # a cap far below the rank the projected iterate needs: directions are dropped by
    # smallest |eigenvalue|, the iterate stays in the ball, and the dropped mass is reported
    rng = np.random.default_rng(4)
    X, y = stream(150, 80, 0.15, rng)
    L = CCFMPALearner(80, PASettings(pa_c=0.5, epsilon=0.1, trace_bound=1.5, max_rank=30), SQUARED,
                      False)
    learn_rows(L, X, y)
    assert L.info()["dropped_mass"] > 1e-3
    assert L.trace_norm() <= 1.5 * (1 + 1e-9)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_ccfm_ftrl_dense_matches_oracle(loss, stream, learn_rows):
    rng = np.random.default_rng(5)
    X, y = stream(200, 12, 0.4, rng, loss)
    p_ref, C_ref = ref.ccfm_ftrl(X, y, 0.5, 0.5, 3.0, True, loss)
    L = CCFMFTRLLearner(12, FTRLSettings(learning_rate_pairwise=0.5, trace_bound=3.0), LOSS[loss],
                        True)
    assert L.dense
    out = learn_rows(L, X, y)
    np.testing.assert_allclose(out, p_ref, atol=1e-8)
    np.testing.assert_allclose(L.matrix(), C_ref, atol=1e-8)


def test_ccfm_ftrl_partial_eigendecomposition_matches_oracle(monkeypatch, learn_rows):
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
    out = learn_rows(L, X, y)
    np.testing.assert_allclose(out, p_ref, atol=1e-8)
    np.testing.assert_allclose(L.matrix(), C_ref, atol=1e-8)


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


@pytest.mark.parametrize("fields", [None, [20, 20]])
def test_average_regret_falls_with_log_log_slope_below_0_8(fields, learn_rows):
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
    out = learn_rows(L, X, y)
    R = np.cumsum(0.5 * (out - y) ** 2 - comparator)
    Ts = np.unique(np.logspace(np.log10(T // 10), np.log10(T), 6).astype(int))
    assert np.all(R[Ts - 1] > 0)
    slope = np.polyfit(np.log(Ts), np.log(R[Ts - 1]), 1)[0]
    assert slope <= 0.8
    avg = R[Ts - 1] / Ts
    assert avg[-1] < avg[0]


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


def test_warm_start_continues_and_refit_restarts(regression_data):
    X, y = regression_data(seed=4)
    a = CCFMRegressor(trace_bound=3.0, warm_start=True, shuffle=False).fit(X, y)
    r1 = a.n_rounds_
    a.fit(X, y)
    assert a.n_rounds_ == 2 * r1
    b = CCFMRegressor(trace_bound=3.0, shuffle=False, n_iter=2).fit(X, y)
    np.testing.assert_allclose(a.predict(X), b.predict(X), atol=1e-10)
    c = CCFMRegressor(trace_bound=3.0, shuffle=False).fit(X, y).fit(X, y)
    assert c.n_rounds_ == r1


def test_prequential_predictions_precede_each_update(regression_data):
    X, y = regression_data(n=60, seed=5)
    m = CCFMRegressor(standardize=False, trace_bound=3.0, clip_predictions=False)
    pre = m._prequential(X, y)
    m2 = CCFMRegressor(standardize=False, trace_bound=3.0, clip_predictions=False)
    expected = [0.0]
    m2.partial_fit(X[:1], y[:1])
    for i in range(1, 60):
        expected.append(m2.predict(X[i:i + 1])[0])
        m2.partial_fit(X[i:i + 1], y[i:i + 1])
    np.testing.assert_allclose(pre, expected, atol=1e-12)


def test_regression_clipping_uses_only_past_targets(regression_data):
    X, y = regression_data(n=50, seed=6)
    m = CCFMRegressor(trace_bound=3.0)
    pre = m._prequential(X, y)
    lo = np.minimum.accumulate(np.r_[np.inf, y[:-1]])
    hi = np.maximum.accumulate(np.r_[-np.inf, y[:-1]])
    assert np.all((pre[1:] >= lo[1:] - 1e-12) & (pre[1:] <= hi[1:] + 1e-12))
    assert np.all(m.predict(X) <= y.max()) and np.all(m.predict(X) >= y.min())


def test_self_interaction_switch_changes_only_the_diagonal_terms(regression_data):
    # one-hot rows (x_j^2 = x_j) against rows with values 2: without self-interactions the
    # prediction is linear in the diagonal-free part only
    X, y = regression_data(n=300, seed=7)
    m = CCFMRegressor(standardize=False, trace_bound=3.0, self_interaction=False,
                      shuffle=False).fit(X, y)
    C = m.augmented_matrix()
    Xh = np.column_stack([X, np.ones(len(X))])
    expected = (m.intercept_ + 0.5 * np.einsum("ij,jk,ik->i", Xh, C, Xh)
                - 0.5 * (X**2) @ np.diag(C)[:-1])
    np.testing.assert_allclose(m._raw_predict(X), expected, atol=1e-10)
    # the bias entry is kept: a model on constant targets learns the mean through C_dd (rows
    # without features after a first row with one: an all-zero X is refused by fit)
    Xz = np.zeros((200, 3))
    Xz[0, 0] = 1.0
    mz = CCFMRegressor(standardize=False, trace_bound=3.0, self_interaction=False,
                       gamma_power=1.0, shuffle=False, fit_intercept=False)
    mz.fit(Xz, np.ones(200))
    assert mz.predict(np.zeros((1, 3)))[0] == pytest.approx(1.0, abs=0.05)


def test_bad_input_raises_clear_errors(regression_data):
    X, y = regression_data()
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        CCFMRegressor(standardize=False).fit(Xn, y)
    with pytest.raises(ValueError):
        CCFMRegressor(standardize=False, trace_bound=0.0).fit(X, y)
    with pytest.raises(ValueError):
        CCFMRegressor(standardize=False, learner="sgd").fit(X, y)
    m = CCFMRegressor(standardize=False).partial_fit(X, y)
    with pytest.raises(ValueError, match="features"):
        m.partial_fit(X[:, :5], y)
    with pytest.raises(ValueError, match="too large"):
        CCFMRegressor(standardize=False, trace_bound=10.0).fit(X * 1e160, y)
    with pytest.raises(ValueError, match="too large"):  # "auto" too, whatever col_scale_
        CCFMRegressor(standardize=False).fit(X * 1e160, y)
    with pytest.raises(ValueError, match="learner"):
        m.set_params(learner="ogd").predict(X)
    with pytest.raises(ValueError, match="two classes"):
        CCFMClassifier(standardize=False).fit(X, np.ones(len(X)))
    with pytest.raises(MemoryError, match="budget"):
        CCFMRegressor(standardize=False, memory_budget_mb=0.01).fit(np.ones((5, 200)), np.ones(5))
    with pytest.raises(ValueError, match="max_rank"):
        CCFMRegressor("ogd", standardize=False, max_rank=20).fit(np.ones((5, 100)), np.ones(5))


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


def test_auto_parameters_are_documented_defaults_and_explicit_values_are_honoured(regression_data):
    X, y = regression_data(n=30)
    auto = CCFMRegressor("ftrl").fit(X, y)._learner().settings
    assert (auto.eig_max_iter, auto.eig_tol) == (10, 1e-6)
    given = CCFMRegressor("ftrl", eig_max_iter=2, eig_tol=1e-3).fit(X, y)._learner().settings
    assert (given.eig_max_iter, given.eig_tol) == (2, 1e-3)
    ocg = CCFMRegressor("ocg", max_rank=5).fit(np.hstack([X] * 10), y)._learner()
    assert ocg.settings.max_rank == 5 and ocg.state.C.K.shape == (5, 5)
    assert CCFMRegressor("ogd").fit(X, y)._learner().settings.max_rank == 128


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



def _platt_oracle(s, y, sw):
    """Platt's (a, b) by scikit-learn: unpenalised logistic regression of the smoothed
    targets t, each row as a positive of weight w t and a negative of weight w (1 - t)."""
    from sklearn.linear_model import LogisticRegression

    pos = y > 0
    n_pos, n_neg = sw[pos].sum(), sw[~pos].sum()
    t = np.where(pos, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    Xs = np.concatenate([s, s])[:, None]
    lab = np.concatenate([np.ones_like(s), np.zeros_like(s)])
    w = np.concatenate([sw * t, sw * (1 - t)])
    lr = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10000).fit(Xs, lab, w)
    return lr.coef_[0, 0], lr.intercept_[0]


def test_platt_link_equals_logistic_regression_and_never_flips_the_order():
    from scipy.special import logit

    from fmlearn.online._platt import platt_link

    rng = np.random.default_rng(0)
    s = 0.05 * rng.normal(size=400) - 0.3  # compressed scores, as OCCFM's
    y = np.where(rng.random(400) < 1 / (1 + np.exp(-(40 * s + 8))), 1.0, -1.0)
    sw = rng.uniform(0.2, 3.0, size=400)
    a, b = platt_link(s, y, sw)
    np.testing.assert_allclose([a, b], _platt_oracle(s, y, sw), rtol=1e-5)
    # separable scores: Platt's targets keep (a, b) finite, still the oracle's
    sep = np.where(y > 0, 1.0, -1.0) + 0.1 * rng.normal(size=400)
    np.testing.assert_allclose(platt_link(sep, y, sw), _platt_oracle(sep, y, sw), rtol=1e-4)
    # invariant to the scale and shift of the scores
    a2, b2 = platt_link(1e4 * s + 7.0, y, sw)
    np.testing.assert_allclose([a2 * 1e4, b2 + 7.0 * a2], [a, b], rtol=1e-6)
    # scores that rank backwards: a = 0, b the log-odds of the mean target (never flipped)
    pos = y > 0
    t = np.where(pos, (sw[pos].sum() + 1) / (sw[pos].sum() + 2), 1 / (sw[~pos].sum() + 2))
    assert platt_link(-s, y, sw) == (0.0, logit(np.dot(sw, t) / sw.sum()))
    # nothing to fit: one class, or scores without spread
    assert platt_link(s, np.ones(400), sw) is None
    assert platt_link(np.full(400, 0.3), y, sw) is None


def test_ccfm_link_fit_and_partial_fit_agree_and_none_is_the_raw_score():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = (X[:, 0] * X[:, 1] + X[:, 2] > 0.8).astype(int)
    kw = {"trace_bound": 10.0, "random_state": 0}
    a = CCFMClassifier(shuffle=False, **kw).fit(X, y)
    c = CCFMClassifier(**kw).partial_fit(X, y, classes=[0, 1])
    assert (c.calibration_scale_, c.calibration_offset_) == (a.calibration_scale_,
                                                            a.calibration_offset_)
    np.testing.assert_array_equal(c.decision_function(X), a.decision_function(X))
    # the link is Platt's fit on the final model's training scores y^(x)
    raw = CCFMClassifier(shuffle=False, calibration=None, **kw).fit(X, y).decision_function(X)
    np.testing.assert_allclose(a.set_params(calibration=None).decision_function(X), raw)
    np.testing.assert_allclose(_platt_oracle(raw, np.where(y > 0, 1.0, -1.0), np.ones(400)),
                               (c.calibration_scale_, c.calibration_offset_), rtol=1e-5)
    np.testing.assert_allclose(c.decision_function(X),
                               c.calibration_scale_ * raw + c.calibration_offset_)
    # a batch of one class keeps the link; a one-row first call starts from (1, 0)
    link = (c.calibration_scale_, c.calibration_offset_)
    c.partial_fit(X[y == 1][:5], y[y == 1][:5])
    assert (c.calibration_scale_, c.calibration_offset_) == link
    one = CCFMClassifier(**kw).partial_fit(X[:1], y[:1], classes=[0, 1])
    assert (one.calibration_scale_, one.calibration_offset_) == (1.0, 0.0)
    # calibration=None fits no link; asking for one it lacks is a clear error
    none = CCFMClassifier(calibration=None, **kw).fit(X, y)
    assert "calibration_scale_" not in vars(none)
    with pytest.raises(ValueError, match="calibration_scale_"):
        none.set_params(calibration="platt").decision_function(X)


def test_files_written_before_the_link_load_without_it(tmp_path):
    """A CCFMClassifier file without the ``calibration`` parameter (written before it
    existed) loads with ``calibration=None``, the decision it was fitted with."""
    import json
    import zipfile

    import fmlearn
    from fmlearn.io import manifest_digest

    rng = np.random.default_rng(0)
    X = rng.random((200, 5))
    y = (X[:, 0] * X[:, 1] > 0.25).astype(int)
    raw = CCFMClassifier(calibration=None, trace_bound=4.0, random_state=0).fit(X, y)
    src, old = tmp_path / "m.fmz", tmp_path / "old.fmz"
    raw.save(src)
    with zipfile.ZipFile(src) as zf:
        meta = json.loads(zf.read("fmlearn.json"))
        blobs = {n: zf.read(n) for n in zf.namelist() if n != "fmlearn.json"}
    del meta["params"]["calibration"]
    meta["digest"] = manifest_digest(meta)
    with zipfile.ZipFile(old, "w") as zf:
        zf.writestr("fmlearn.json", json.dumps(meta))
        for n, b in blobs.items():
            zf.writestr(n, b)
    back = fmlearn.load(old)
    assert back.calibration is None
    np.testing.assert_array_equal(back.decision_function(X), raw.decision_function(X))



def test_auto_trace_bound_scans_from_the_largest_bound_and_stops_at_the_first_rise(
        monkeypatch):
    # trace_bound="auto" runs its candidates from the largest down and stops at the first whose
    # prequential loss rises: it picks the full scan's minimum (ties: the smaller bound) without
    # running the small bounds past it, whose saturated projections are the costly runs (on
    # wide sparse text, 100 times a large bound's)
    import fmlearn.online.ccfm as ccfm_module
    from fmlearn.online import _trace

    rng = np.random.default_rng(0)
    n, d = 800, 12
    X = rng.normal(size=(n, d))
    y = X[:, 0] * X[:, 1] + X[:, 2] * X[:, 3] + 0.1 * rng.normal(size=n)
    runs = []  # (bound, loss) of each candidate run, in order
    new_learner, loss_value = ccfm_module._CCFMBase._new_learner, _trace.loss_value_np

    def recording_learner(self, n_features, rng_):
        if rng_ is None:  # the selection's runs (the final learner gets the estimator's rng)
            runs.append([self.trace_bound_, None])
        return new_learner(self, n_features, rng_)

    def recording_loss(loss, f, y_):
        values = loss_value(loss, f, y_)
        runs[-1][1] = values
        return values

    monkeypatch.setattr(ccfm_module._CCFMBase, "_new_learner", recording_learner)
    monkeypatch.setattr(_trace, "loss_value_np", recording_loss)
    chosen = CCFMRegressor(random_state=0).fit(X, y).trace_bound_
    tried = [b for b, _ in runs]
    # the full scan, one candidate at a time (delta0 depends on the targets only)
    full = {}
    for factor in _trace.AUTO_TRACE_FACTORS:
        monkeypatch.setattr(_trace, "AUTO_TRACE_FACTORS", (factor,))
        runs.clear()
        bound = CCFMRegressor(random_state=0).fit(X, y).trace_bound_
        full[bound] = float(np.sum(runs[0][1]))  # unit weights
    best = min(full, key=lambda b: (full[b], b))
    assert chosen == best
    grid = sorted(full, reverse=True)
    stop = grid.index(best) + 2  # one past the best, unless it is the last
    assert tried == grid[:stop]
    assert len(tried) < len(grid)
