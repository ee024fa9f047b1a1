"""The classic FM on contrast targets (seed 001 §4.2): FMRegressor.fit(X, y, contrasts=C) with
ALS, MCMC and SGD, their kernels against slow oracles, and the estimator's behaviour."""

import numpy as np
import pytest
import scipy.sparse as sp

import reference as ref
from contrast_cases import bad_contrast_cases, double_differences, snapshot
from fmlearn import FMClassifier, FMRegressor
from fmlearn._data import to_csr
from fmlearn.kernels.cd import Config, Model, Prior
from fmlearn.kernels.cd_contrast import contrast_sweep
from fmlearn.kernels.sgd import Params, SGDConfig
from fmlearn.kernels.sgd_contrast import sgd_target_epoch, target_work
from fmlearn.losses import SQUARED
from fmlearn.solvers import _fm_common as fm_common
from fmlearn.solvers._fm_common import FMState
from fmlearn.solvers.fm_contrast import contrast_data, target_residuals


def planted_fm(d, k, seed):
    """A classic FM w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l with w0 = 0.7."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(d) / np.sqrt(d)
    V = rng.standard_normal((d, k)) / d ** 0.25
    return lambda X: ref.fm_predict(X, 0.7, w, V)


def _data(n, n_targets, d, rng, extra_identity=0):
    X = rng.standard_normal((n, d))
    C = double_differences(n, n_targets, rng)
    if extra_identity:  # targets that are f itself: the bias becomes identifiable
        C = sp.vstack([C, sp.identity(n, format="csr")[:extra_identity]]).tocsr()
    return X, C


# -- the bars: planted recovery, identity = plain ----------------------------------------------

# Measured (d = 12, k = 3, 900 rows, 2,500 double differences, no noise), relative error of the
# held-out contrasts: ALS 5e-16 after 400 sweeps (it leaves a plateau near 0.07 after 100-300
# sweeps from this start); SGD 6e-16 after 300 epochs (noise-free contrasts are consistent, so
# SGD converges without a decaying step); MCMC's posterior mean 6e-5 with noise 1e-4 std(y)
# (300 sweeps, 200 burn-in: the noise precision alpha settles near 2,400, whose spread of the
# samples sets that floor).
RECOVERY = {
    "als": dict(n_iter=400),
    "sgd": dict(n_iter=300, learning_rate=0.01),
    "mcmc": dict(n_iter=300, n_burn_in=200),
}


@pytest.mark.parametrize("solver", ["als", "sgd", "mcmc"])
def test_planted_fm_recovered_from_double_differences(solver):
    rng = np.random.default_rng(1)
    d, k = 12, 3
    f = planted_fm(d, k, seed=2)
    X, C = _data(900, 2500, d, rng)
    Xt, Ct = _data(400, 800, d, rng)
    y = C @ f(X)
    if solver == "mcmc":
        y = y + 1e-4 * np.std(y) * rng.standard_normal(y.shape[0])
    m = FMRegressor(k, solver=solver, random_state=0, **RECOVERY[solver])
    m.fit(X, y, contrasts=C)
    truth = Ct @ f(Xt)
    err = np.linalg.norm(m.predict_contrasts(Xt, Ct) - truth) / np.linalg.norm(truth)
    assert err < 1e-4, err
    # Double differences cancel a constant: w0 is held at its start and f is learned up to it.
    assert m.w0_ == 0.0 and m.intercept_fitted_ is False and m.contrasts_fitted_
    shift = f(Xt) - m.predict(Xt)
    assert np.std(shift) < 1e-3 * np.std(f(Xt)) and abs(np.mean(shift) - 0.7) < 1e-2


@pytest.mark.parametrize("solver", ["als", "mcmc", "sgd"])
@pytest.mark.parametrize("grouped", [False, True])
def test_identity_contrasts_equal_the_plain_fit(solver, grouped):
    if grouped and solver == "sgd":
        pytest.skip("SGD has no per-group settings")
    rng = np.random.default_rng(3)
    n, d = 300, 8
    X = rng.standard_normal((n, d))
    y = planted_fm(d, 2, seed=4)(X) + 0.1 * rng.standard_normal(n)
    sw = rng.uniform(0.3, 2.5, n)
    # SGD in the given order: the plain fit with shuffle=True first sorts its rows by a hash
    # of their content, a different visiting order.
    kw = dict(n_factors=3, solver=solver, n_iter=20, random_state=0, clip_predictions=False,
              reg_bias=0.01, shuffle=False,
              reg_linear=[0.1, 0.3] if grouped and solver == "als" else 0.1,
              reg_pairwise=[0.2, 0.05] if grouped and solver == "als" else 0.2,
              groups=[3, 5] if grouped else None)
    plain = FMRegressor(**kw).fit(X, y, sample_weight=sw)
    ident = FMRegressor(**kw).fit(X, y, sample_weight=sw, contrasts=sp.identity(n, format="csr"))
    assert ident.intercept_fitted_
    scale = np.abs(plain.predict(X)).max()
    np.testing.assert_allclose(ident.predict(X), plain.predict(X), rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(ident.V_, plain.V_, rtol=0, atol=1e-12 * np.abs(plain.V_).max())
    if solver == "mcmc":
        assert ident.samples_V_.shape == plain.samples_V_.shape
        assert ident.chain_["alpha"] == pytest.approx(plain.chain_["alpha"], rel=1e-12)


# -- kernels against the oracles ---------------------------------------------------------------

def _half_dense_case(seed, n, d, n_targets):
    """A kernel's test problem: its generator, X (n x d, about half its entries non-zero, as a
    dense array) and ``n_targets`` double differences of its rows."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.5, random_state=seed, format="csr").toarray()
    return rng, X, double_differences(n, n_targets, rng)


def _records(X, C, y, sw, bias, groups=None):
    data = contrast_data(to_csr(sp.csr_matrix(X), np.float64), C, y, sw, bias)
    return data, data.cols


@pytest.mark.parametrize("sample", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_contrast_sweep_equals_the_coordinate_oracle(sample, bias):
    n, d, k = 40, 6, 2
    rng, X, C = _half_dense_case(5, n, d, 50)
    X[X != 0] = rng.standard_normal(np.count_nonzero(X))
    if bias:  # sparse random targets, those left empty dropped
        extra = rng.standard_normal((5, n)) * (rng.random((5, n)) < .2)
        C = sp.vstack([C, sp.csr_matrix(extra[np.any(extra != 0, axis=1)])]).tocsr()
    y, sw = rng.standard_normal(C.shape[0]), rng.uniform(0.5, 2.0, C.shape[0])
    w0, w, V = 0.3, rng.standard_normal(d), 0.5 * rng.standard_normal((d, k))
    reg = (0.2, 0.3, 0.7)
    alpha = 1.7 if sample else 1.0
    data, (cols, plan) = _records(X, C, y, sw, bias)
    z = rng.standard_normal(1 + 1 + d + k * (1 + d)) if sample else None
    want = ref.contrast_coordinate_sweep(X, C, y, sw, plan.order, w0, w, V, reg,
                                         fit_bias=bias, alpha=alpha, z=z)
    prior = Prior(np.zeros(d, dtype=np.int64), np.array([float(d)]), np.array([reg[1]]),
                  np.zeros(1), np.full((k, 1), reg[2]), np.zeros((k, 1)))
    cfg = Config(SQUARED, 1.0, sample, False, False, reg[0], 1.0, 1.0, 1.0, 0.0)
    model = Model(w.copy(), V.copy(), np.array([w0, alpha]))
    state = FMState(w0, model.w, model.V)
    E = target_residuals(data, state)
    Q, u = np.zeros((n, 2)), np.zeros(C.shape[0])
    rand = (z if sample else np.zeros(0), np.zeros(0))
    assert contrast_sweep(cols, plan, prior, model, E, Q, u, rand, cfg)
    assert model.scal[0] == (pytest.approx(want[0], abs=1e-10) if bias else w0)
    np.testing.assert_allclose(model.w, want[1], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(model.V, want[2], rtol=1e-8, atol=1e-10)
    # The cached residuals are those of the new model; the scatter buffer is back to zero.
    state = FMState(float(model.scal[0]), model.w, model.V)
    np.testing.assert_allclose(E, target_residuals(data, state), rtol=1e-10, atol=1e-12)
    assert not u.any()


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("implicit", [True, False])
def test_sgd_target_epoch_equals_the_oracle(bias, implicit):
    n, d, k = 30, 7, 3
    rng, X, C = _half_dense_case(6, n, d, 40)
    X[:, 0] = 1.0                     # a feature present in every row of every target
    if bias:
        C = sp.vstack([C, sp.identity(n, format="csr")[:6]]).tocsr()
    y = rng.standard_normal(C.shape[0])
    sw = rng.uniform(0.0, 2.5, C.shape[0])
    sw[3] = 0.0
    w0, w, V = 0.2, 0.3 * rng.standard_normal(d), 0.3 * rng.standard_normal((d, k))
    lr, reg = 0.05, (0.1, 0.2, 0.3)
    order = rng.permutation(C.shape[0]).astype(np.int64)
    want = ref.sgd_contrast_epoch(X, C, y, sw, order, w0, w, V, lr, reg, fit_bias=bias,
                                  implicit=implicit)
    data = contrast_data(to_csr(sp.csr_matrix(X), np.float64), C, y, sw, bias)
    cfg = SGDConfig(SQUARED, lr, 0, 0.5, reg[0] if bias else 0.0, reg[1], reg[2], -np.inf,
                    np.inf, 1e10, implicit)
    params = Params(w.copy(), V.copy(), np.array([w0]))
    work = target_work(d, k, 4, 4 * d)
    t, bad = sgd_target_epoch(data.targets, params, order, 0, cfg, work)
    assert bad == -1 and t == int(np.sum(np.ceil(sw[sw > 0])))
    assert params.scal[0] == pytest.approx(want[0], abs=1e-12)
    np.testing.assert_allclose(params.w, want[1], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(params.V, want[2], rtol=1e-10, atol=1e-12)
    assert np.all(work.pos == -1)


# -- threads and colouring ---------------------------------------------------------------------

def test_target_colouring_separates_features_that_share_a_target():
    rng = np.random.default_rng(7)
    X = to_csr(sp.random(200, 40, density=0.05, random_state=7, format="csr"))
    C = double_differences(200, 60, rng)
    data = contrast_data(X, C, np.zeros(60), np.ones(60), False)
    cols, plan = data.cols
    B = (abs(data.C) @ abs(data.X)).toarray() > 0         # target g touches feature j
    for c in range(plan.color_ptr.shape[0] - 1):
        members = plan.order[plan.color_ptr[c]:plan.color_ptr[c + 1]]
        assert B[:, members].sum(axis=1).max() <= 1       # no target seen by two members
    assert plan.color_ptr.shape[0] - 1 < 40               # and it is not one class per feature


@pytest.mark.parametrize("solver", ["als", "mcmc"])
def test_thread_count_does_not_change_results(solver, monkeypatch):
    monkeypatch.setattr(fm_common, "MIN_PARALLEL_NNZ", 0)
    monkeypatch.setattr(fm_common, "MIN_PARALLEL_ROWS", 0)
    rng = np.random.default_rng(8)
    X = sp.random(600, 80, density=0.03, random_state=8, format="csr")
    C = double_differences(600, 900, rng)
    y = C @ rng.standard_normal(600)
    data = contrast_data(to_csr(X), C, y, np.ones(900), False)
    assert data.cols[1].class_parallel.sum() >= 2
    kw = dict(n_factors=3, solver=solver, n_iter=15, reg_linear=0.1, reg_pairwise=0.1,
              random_state=0)
    a = FMRegressor(n_jobs=1, **kw).fit(X, y, contrasts=C)
    b = FMRegressor(n_jobs=2, **kw).fit(X, y, contrasts=C)
    np.testing.assert_array_equal(a.V_, b.V_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


# -- estimator behaviour -----------------------------------------------------------------------

@pytest.mark.parametrize("solver", ["als", "sgd", "mcmc"])
def test_bias_learned_when_identifiable_and_held_when_not(solver):
    rng = np.random.default_rng(9)
    d = 6
    f = planted_fm(d, 2, seed=10)
    X, C = _data(300, 600, d, rng)
    kw = dict(n_factors=2, solver=solver, n_iter=60, reg_bias=1.0, random_state=0)
    m = FMRegressor(warm_start=True, **kw).fit(X, f(X) + 5.0)          # w0 near 5.7
    w0 = m.w0_
    m.fit(X, C @ f(X), contrasts=C)
    assert m.w0_ == w0 and m.intercept_fitted_ is False               # held, not drifted
    # With some targets that are f itself, w0 is learned (a light penalty: SGD shrinks it at
    # every step of a target that holds it).
    Xb, Cb = _data(300, 600, d, rng, extra_identity=100)
    b = FMRegressor(**{**kw, "reg_bias": 0.01}).fit(Xb, Cb @ f(Xb), contrasts=Cb)
    assert b.intercept_fitted_ and abs(b.w0_ - 0.7) < 0.2


def test_weights_are_per_target_and_unused_rows_change_nothing():
    rng = np.random.default_rng(11)
    X, C = _data(200, 400, 5, rng)
    y = C @ planted_fm(5, 2, seed=12)(X)
    kw = dict(n_factors=2, solver="als", n_iter=10, reg_pairwise=0.01, random_state=0)
    sw = np.ones(400)
    sw[:80] = 2.0
    a = FMRegressor(**kw).fit(X, y, sample_weight=sw, contrasts=C)
    b = FMRegressor(**kw).fit(X, np.concatenate([y, y[:80]]),
                              contrasts=sp.vstack([C, C[:80]]).tocsr())
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-10, atol=1e-10)
    # Rows that no target references (and targets of weight 0) carry no information.
    X2 = np.vstack([X, rng.standard_normal((50, 5))])
    C2 = sp.vstack([sp.hstack([C, sp.csr_matrix((400, 50))]),
                    double_differences(250, 30, rng)]).tocsr()
    sw2 = np.concatenate([sw, np.zeros(30)])
    c = FMRegressor(**kw).fit(X2, np.concatenate([y, np.ones(30)]), sample_weight=sw2,
                              contrasts=C2)
    np.testing.assert_array_equal(c.predict(X), a.predict(X))


def test_warm_start_continues_and_predictions_are_not_clipped(tmp_path):
    from fmlearn.io import load

    rng = np.random.default_rng(13)
    X, C = _data(200, 500, 6, rng)
    C = 0.1 * C                       # contrasts narrower than f
    f = planted_fm(6, 2, seed=14)
    y = C @ f(X)
    kw = dict(n_factors=2, solver="als", reg_pairwise=1e-3, random_state=0)
    ten = FMRegressor(n_iter=10, **kw).fit(X, y, contrasts=C)
    five = FMRegressor(n_iter=5, warm_start=True, **kw).fit(X, y, contrasts=C)
    five.fit(X, y, contrasts=C)
    np.testing.assert_allclose(five.predict(X), ten.predict(X), rtol=1e-10, atol=1e-12)
    # f ranges far beyond the double differences' range, which is not a range of f.
    pred = ten.predict(X)
    np.testing.assert_allclose(pred, ref.fm_predict(X, ten.w0_, ten.w_, ten.V_), rtol=1e-12)
    assert pred.max() > ten.y_range_[1] and pred.min() < ten.y_range_[0]
    back = load(ten.save(tmp_path / "m.fmz"))
    np.testing.assert_array_equal(back.predict_contrasts(X, C), ten.predict_contrasts(X, C))
    assert back.contrasts_fitted_ and back.intercept_fitted_ is False
    # A plain fit drops the contrast attributes and clips again.
    ten.fit(X, f(X))
    assert not hasattr(ten, "contrasts_fitted_") and not hasattr(ten, "intercept_fitted_")
    assert ten.predict(X).max() <= f(X).max()


def test_bad_contrasts_are_refused_and_change_nothing():
    rng = np.random.default_rng(15)
    X, C = _data(50, 80, 4, rng)
    y = C @ rng.standard_normal(50)
    m = FMRegressor(2, solver="als", n_iter=3, random_state=0).fit(X, y, contrasts=C)
    before = snapshot(m)
    for Cbad, msg in bad_contrast_cases(C):
        with pytest.raises(ValueError, match=msg):
            m.fit(X, y, contrasts=Cbad)
    with pytest.raises(ValueError, match="sample_weight has 50 entries but X has 80"):
        m.fit(X, y, sample_weight=np.ones(50), contrasts=C)
    with pytest.raises(ValueError, match="eval_set is not used with contrasts"):
        m.fit(X, y, contrasts=C, eval_set=(X, X[:, 0]))
    for key, value in before.items():
        np.testing.assert_array_equal(getattr(m, key), value)
    with pytest.raises(ValueError, match="columns but X has 20 rows"):
        m.predict_contrasts(X[:20], C)
    # Not supported: contrasts in partial_fit (one epoch over rows) and in the classifier.
    with pytest.raises(TypeError, match="contrasts"):
        FMRegressor(solver="sgd").partial_fit(X, y, contrasts=C)
    with pytest.raises(TypeError, match="contrasts"):
        FMClassifier().fit(X, y > 0, contrasts=C)


def test_float32_input_is_close_to_float64():
    rng = np.random.default_rng(16)
    X, C = _data(150, 300, 5, rng)
    y = C @ planted_fm(5, 2, seed=17)(X)
    for solver in ("als", "sgd", "mcmc"):
        kw = dict(n_factors=2, solver=solver, n_iter=10, random_state=0)
        a = FMRegressor(**kw).fit(X, y, contrasts=C)
        b = FMRegressor(**kw).fit(X.astype(np.float32), y, contrasts=C)
        assert b.V_.dtype == np.float32
        np.testing.assert_allclose(b.predict_contrasts(X, C), a.predict_contrasts(X, C),
                                   rtol=1e-3, atol=1e-3 * np.abs(y).max())


def test_doctests_of_the_contrast_glue():
    import doctest

    import fmlearn.fm._contrasts as glue

    assert doctest.testmod(glue).failed == 0


def test_partial_fit_on_rows_after_contrasts_continues_as_a_model_of_rows():
    rng = np.random.default_rng(18)
    X, C = _data(150, 300, 5, rng)
    f = planted_fm(5, 2, seed=19)(X)
    m = FMRegressor(2, solver="sgd", n_iter=5, learning_rate=0.01, random_state=0)
    m.fit(X, 10.0 * (C @ f), contrasts=C)             # contrasts range far wider than f's
    before = m.w_.copy()
    m.partial_fit(X, f)
    assert not hasattr(m, "contrasts_fitted_") and not np.array_equal(m.w_, before)
    assert m.y_range_ == [f.min(), f.max()]
    assert m.predict(X).max() <= f.max() and m.predict(X).min() >= f.min()
