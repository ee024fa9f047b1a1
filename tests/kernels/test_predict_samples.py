"""The batched posterior-mean kernel (every kept MCMC sample of a row at once) against a slow
NumPy oracle, and the opt-in compression of an MCMC posterior (``compress_posterior``)."""

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn import FMClassifier, FMRegressor, load
from fmlearn._data import raw, to_csr
from fmlearn.datasets import make_fm
from fmlearn.kernels.predict import fm_predict_samples_csr


def _oracle(X, W0s, Ws, Vs, probit, lo, hi):
    """mean_s clip(f_s(x)) (or Phi(f_s(x))), one sample and one row at a time, in NumPy."""
    from scipy.stats import norm

    X = X.toarray()
    out = np.zeros(X.shape[0])
    for s in range(W0s.shape[0]):
        XV = X @ Vs[s]
        f = W0s[s] + X @ Ws[s] + 0.5 * (np.sum(XV ** 2, 1) - (X ** 2) @ np.sum(Vs[s] ** 2, 1))
        out += norm.cdf(f) if probit else np.clip(f, lo, hi)
    return out / W0s.shape[0]


# the three ways of gathering the rows' features: sorted (few entries of many features),
# marked (fewer entries than features), all features
@pytest.mark.parametrize("n_rows, d, density", [(3, 600, 0.01), (5, 40, 0.15), (60, 40, 0.15)])
def test_batched_samples_kernel_equals_numpy_oracle(n_rows, d, density):
    rng = np.random.default_rng(5)
    k, S = 3, 7
    X = sp.random(n_rows, d, density=density, random_state=1, format="csr")
    X.data = rng.normal(size=X.nnz)
    X = to_csr(X)
    W0s, Ws, Vs = rng.normal(size=S), rng.normal(size=(S, d)), 0.5 * rng.normal(size=(S, d, k))
    per = _oracle(X, W0s, Ws, Vs, False, -np.inf, np.inf)
    lo, hi = np.quantile(per, [0.25, 0.75])
    for probit, clip in ((False, (-np.inf, np.inf)), (False, (lo, hi)), (True, (lo, hi))):
        expected = _oracle(X, W0s, Ws, Vs, probit, *clip)
        for n_blocks in (1, 2):
            out = fm_predict_samples_csr(*raw(X), W0s, Ws, Vs, probit, clip, n_blocks,
                                         np.empty(n_rows))
            np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    # a row's result does not depend on the other rows (their features change the gathering)
    assert X[1].nnz > 0
    one = fm_predict_samples_csr(*raw(X[1:2]), W0s, Ws, Vs, False, (lo, hi), 1, np.empty(1))
    full = fm_predict_samples_csr(*raw(X), W0s, Ws, Vs, False, (lo, hi), 1, np.empty(n_rows))
    assert one[0] == full[1]


def _mcmc(cls=FMRegressor, **kw):
    X, y, _ = make_fm(400, 30, 3, x="onehot", n_fields=2, noise=0.3, random_state=1)
    if cls is FMClassifier:
        y = (y > np.median(y)).astype(int)
    return cls(3, solver="mcmc", n_iter=30, random_state=0, **kw).fit(X, y), X


@pytest.mark.parametrize("cls", [FMRegressor, FMClassifier])
def test_compress_posterior_keeping_every_sample_is_the_same_model(cls):
    m, X = _mcmc(cls)
    S = m.samples_w0_.shape[0]
    before = m.decision_function(X) if cls is FMClassifier else m.predict(X)
    for n in (S, S + 5):
        m.compress_posterior(n)
        after = m.decision_function(X) if cls is FMClassifier else m.predict(X)
        np.testing.assert_array_equal(after, before)
    assert m.samples_w0_.shape[0] == S


def test_compress_posterior_keeps_evenly_spaced_samples_ending_with_the_last():
    m, X = _mcmc()
    W = m.samples_w_.copy()
    S = W.shape[0]
    m.compress_posterior(4)
    assert m.samples_w0_.shape == (4,) and m.samples_V_.shape[0] == 4
    np.testing.assert_array_equal(m.samples_w_[-1], W[-1])
    np.testing.assert_array_equal(m.samples_w_[0], W[0])
    # its prediction is the average over the kept samples (the oracle on those four)
    lo, hi = m.y_range_
    expected = _oracle(to_csr(X), m.samples_w0_, m.samples_w_, m.samples_V_, False, lo, hi)
    np.testing.assert_allclose(m.predict(X), expected, rtol=1e-10)
    m.compress_posterior(1)
    np.testing.assert_array_equal(m.samples_w_[0], W[S - 1])


def test_compress_posterior_of_a_multiclass_model_keeps_each_class_samples():
    X, y, _ = make_fm(300, 20, 2, x="onehot", n_fields=2, random_state=2)
    y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    m = FMClassifier(2, solver="mcmc", n_iter=20, random_state=0).fit(X, y)
    C, S = m.samples_w0_.shape
    proba = m.predict_proba(X)
    m.compress_posterior(S)
    np.testing.assert_array_equal(m.predict_proba(X), proba)
    m.compress_posterior(2)
    assert m.samples_w0_.shape == (C, 2) and m.samples_V_.shape[:2] == (C, 2)
    assert np.all(np.isfinite(m.predict_proba(X)))


def test_compressed_model_saves_and_loads(tmp_path):
    m, X = _mcmc()
    m.compress_posterior(3)
    path = str(tmp_path / "m.fmz")
    m.save(path)
    back = load(path)
    assert back.samples_V_.shape[0] == 3
    np.testing.assert_array_equal(back.predict(X), m.predict(X))


def test_compress_posterior_refuses_bad_input_and_leaves_the_model():
    m, _ = _mcmc()
    S = m.samples_w0_.shape[0]
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="n_samples"):
            m.compress_posterior(bad)
    assert m.samples_w0_.shape[0] == S
    X, y, _ = make_fm(100, 10, 2, random_state=0)
    with pytest.raises(ValueError, match="mcmc"):
        FMRegressor(2, solver="als", n_iter=2, random_state=0).fit(X, y).compress_posterior(1)


def test_batched_samples_kernel_is_the_same_in_row_blocks():
    # more rows than one chunk: the parallel kernel's blocks give the one-block result bitwise
    from fmlearn.kernels.predict import CHUNK

    rng = np.random.default_rng(8)
    n, d, k, S = 2 * CHUNK + 7, 30, 2, 3
    X = to_csr(sp.random(n, d, density=0.1, random_state=2, format="csr"))
    W0s, Ws, Vs = rng.normal(size=S), rng.normal(size=(S, d)), rng.normal(size=(S, d, k))
    one = fm_predict_samples_csr(*raw(X), W0s, Ws, Vs, False, (-1.0, 1.0), 1, np.empty(n))
    three = fm_predict_samples_csr(*raw(X), W0s, Ws, Vs, False, (-1.0, 1.0), 3, np.empty(n))
    np.testing.assert_array_equal(three, one)
    np.testing.assert_allclose(one, _oracle(X, W0s, Ws, Vs, False, -1.0, 1.0), rtol=1e-12,
                               atol=1e-12)
