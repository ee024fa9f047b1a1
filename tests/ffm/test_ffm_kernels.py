"""The compiled kernels of the field-aware FM (fmlearn.ffm._kernels) against the NumPy oracles
of ffm_reference: the score, AdaGrad epochs (rows with one feature per field and rows with
several), sample weights, the gradient against finite differences, float32 and threads."""

import ffm_reference as ref
import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn._data import raw, to_csr
from fmlearn.ffm._kernels import LANES, ffm_predict
from fmlearn.ffm._plan import AdaGradSettings, InitSettings, RunContext
from fmlearn.ffm._solver import (
    FFMState,
    adagrad_solver,
    factors_of,
    init_state,
    training_rows,
)
from fmlearn.losses import LOSS_CODES

K = 5  # two chunks of LANES, the second one padded


def _data(n, d, F, rng, repeated, density=0.5):
    """Rows over d features in F fields; with ``repeated`` some rows have two features of a
    field, else at most one feature per field per row."""
    fields = np.arange(d) % F
    X = np.zeros((n, d))
    for i in range(n):
        if repeated:
            cols = np.flatnonzero(rng.random(d) < density)
        else:
            cols = [rng.choice(np.flatnonzero(fields == f)) for f in range(F)
                    if rng.random() < 0.8]
        X[i, cols] = rng.normal(size=len(cols))
    return to_csr(sp.csr_matrix(X)), fields.astype(np.int32)


def _state(d, F, rng, dtype=np.float64, sums=1.0, k=K):
    st = init_state(d, F, k, -(-k // LANES), InitSettings("normal", 0.5), dtype,
                    np.random.RandomState(int(rng.integers(1 << 30))))
    st.lin[:, 0] = rng.normal(size=d) * 0.3
    st.bias[0] = 0.2
    if sums != 1.0:
        st.W[:, :, :, 1, :] = sums
        st.lin[:, 1] = sums
        st.bias[1] = sums
    return st


def _oracle_state(st, k=K):
    d, F = st.W.shape[:2]
    G = st.W[:, :, :, 1, :].reshape(d, F, -1)[:, :, :k]
    return {"w0": float(st.bias[0]), "G0": float(st.bias[1]), "w": st.lin[:, 0].copy(),
            "Gw": st.lin[:, 1].copy(), "V": factors_of(st.W, k), "GV": G.copy()}


def _settings(loss, normalize, n_iter=1, shuffle=False, unique=False, **kw):
    base = dict(n_iter=n_iter, loss=LOSS_CODES[loss], learning_rate=0.3, reg_bias=0.01,
                reg_linear=0.02, reg_pairwise=0.03, normalize=normalize, shuffle=shuffle,
                limit=1e10, unique_fields=unique)
    base.update(kw)
    return AdaGradSettings(**base)


def _oracle_settings(s, loss):
    return {"eta": s.learning_rate, "reg0": s.reg_bias, "reg1": s.reg_linear,
            "reg2": s.reg_pairwise, "normalize": s.normalize, "loss": loss}


@pytest.mark.parametrize("normalize", [False, True])
def test_prediction_matches_the_pairwise_definition(normalize):
    rng = np.random.default_rng(0)
    X, fields = _data(30, 9, 3, rng, repeated=True)
    st = _state(9, 3, rng)
    out = ffm_predict(*raw(X), fields, st.model(), normalize, np.empty(30), parallel=False)
    want = ref.ffm_predict(X, fields, st.bias[0], st.lin[:, 0], factors_of(st.W, K), normalize)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
@pytest.mark.parametrize("repeated", [False, True])
def test_adagrad_epoch_matches_the_oracle(loss, repeated):
    """One epoch in the given order equals AdaGrad on the exact per-row gradient, whether a
    row's vectors each belong to one pair (one feature per field: the paired step) or to
    several (features sharing a field: the summed gradient)."""
    rng = np.random.default_rng(1)
    X, fields = _data(40, 8, 4, rng, repeated=repeated)
    y = np.where(rng.random(40) < 0.5, 1.0, -1.0) if loss == "logistic" else rng.normal(size=40)
    sw = rng.choice([0.0, 0.5, 1.0, 2.5], size=40)
    st = _state(8, 4, rng)
    ref_state = _oracle_state(st)
    settings = _settings(loss, normalize=repeated, unique=not repeated)
    rows = training_rows(raw(X), y, sw, fields)
    visit = rng.permutation(40).astype(np.int64)
    st, n, info = adagrad_solver(rows, visit, st, settings, 0, RunContext())
    assert n == 1 and info["diverged"] is None
    want, total = ref.adagrad_epoch(X, y, sw, visit, fields, ref_state,
                                    _oracle_settings(settings, loss))
    got = _oracle_state(st)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-10, atol=1e-12, err_msg=key)
    assert info["train_loss"] == pytest.approx(total / sw.sum(), rel=1e-10)


@pytest.mark.parametrize("k", [3, 9])
def test_paired_steps_of_one_and_three_chunks_match_the_oracle(k):
    """The paired step of one-hot rows for k = 3 (one chunk, padded: the one-chunk vector
    step alone) and k = 9 (three chunks: the two-chunk step, then the one-chunk step), one
    epoch against the oracle (the module's K = 5 runs the two-chunk step alone)."""
    rng = np.random.default_rng(7)
    X, fields = _data(30, 8, 4, rng, repeated=False)
    y = np.where(rng.random(30) < 0.5, 1.0, -1.0)
    sw = np.ones(30)
    st = _state(8, 4, rng, k=k)
    ref_state = _oracle_state(st, k)
    settings = _settings("logistic", normalize=False, unique=True)
    visit = rng.permutation(30).astype(np.int64)
    st, _, info = adagrad_solver(training_rows(raw(X), y, sw, fields), visit, st, settings, 0,
                                 RunContext())
    assert info["diverged"] is None
    want, _ = ref.adagrad_epoch(X, y, sw, visit, fields, ref_state,
                                _oracle_settings(settings, "logistic"))
    got = _oracle_state(st, k)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-10, atol=1e-12, err_msg=key)
    pad = st.W[:, :, :, 0, :].reshape(8, 4, -1)[:, :, k:]
    np.testing.assert_array_equal(pad, 0.0)  # padded factors stay 0


@pytest.mark.parametrize("normalize", [False, True])
def test_step_follows_the_gradient_of_the_loss(normalize):
    """With AdaGrad sums far above the gradients, a step is -eta * g / sqrt(G) with g the
    gradient of the row's loss plus its L2 terms: the kernel's step, read back, equals the
    gradient of the loss computed by central finite differences of the oracle's score."""
    rng = np.random.default_rng(2)
    X, fields = _data(1, 6, 3, rng, repeated=True, density=1.0)
    x, y = X.toarray()[0], np.array([1.0])
    big = 1e12
    st = _state(6, 3, rng, sums=big)
    before = st.copy()
    settings = _settings("logistic", normalize, learning_rate=1.0, reg_bias=0.0,
                         reg_linear=0.0, reg_pairwise=0.0)
    adagrad_solver(training_rows(raw(X), y, np.ones(1), fields), np.zeros(1, np.int64), st,
                   settings, 0, RunContext())
    step_V = (factors_of(st.W, K) - factors_of(before.W, K)) * -np.sqrt(big)
    step_w = (st.lin[:, 0] - before.lin[:, 0]) * -np.sqrt(big)
    V0, w0, lin0 = factors_of(before.W, K), before.bias[0], before.lin[:, 0]

    def loss(w, V):
        phi = ref.ffm_score(x, fields, w0, w, V, normalize)
        return np.logaddexp(0.0, -phi)

    h = 1e-6
    for j in range(6):
        e = np.zeros(6)
        e[j] = h
        fd = (loss(lin0 + e, V0) - loss(lin0 - e, V0)) / (2 * h)
        assert step_w[j] == pytest.approx(fd, rel=1e-6, abs=1e-9)
        for g in range(3):
            for f in range(K):
                E = np.zeros_like(V0)
                E[j, g, f] = h
                fd = (loss(lin0, V0 + E) - loss(lin0, V0 - E)) / (2 * h)
                assert step_V[j, g, f] == pytest.approx(fd, rel=1e-6, abs=1e-9)


def test_float32_epoch_is_close_to_float64():
    """The same epoch in float32 stays within float32 rounding of the float64 one (relative
    1e-7 per operation, a few hundred operations per parameter)."""
    rng = np.random.default_rng(3)
    X, fields = _data(50, 8, 4, rng, repeated=False)
    y = np.where(rng.random(50) < 0.5, 1.0, -1.0)
    st64 = _state(8, 4, rng)
    st32 = FFMState(st64.W.astype(np.float32), st64.lin.astype(np.float32), st64.bias.copy())
    settings = _settings("logistic", True, n_iter=3, unique=True)
    visit = np.arange(50, dtype=np.int64)
    adagrad_solver(training_rows(raw(X), y, np.ones(50), fields), visit, st64, settings, 0,
                   RunContext())
    X32 = to_csr(X, np.float32)
    adagrad_solver(training_rows(raw(X32), y, np.ones(50), fields), visit, st32, settings, 0,
                   RunContext())
    np.testing.assert_allclose(st32.W, st64.W, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(st32.lin, st64.lin, rtol=1e-4, atol=1e-5)


def test_parallel_prediction_equals_serial():
    """Rows are scored independently: the parallel kernel gives the serial result bit for
    bit, whatever the chunking."""
    rng = np.random.default_rng(4)
    X, fields = _data(1500, 8, 4, rng, repeated=True)
    st = _state(8, 4, rng)
    a = ffm_predict(*raw(X), fields, st.model(), True, np.empty(1500), parallel=False)
    from fmlearn.ffm import _kernels

    out = np.empty(1500)
    b = _kernels.call_vectorized(_kernels._predict_parallel, "test", *raw(X), fields,
                                 st.model(), True, 8, out)
    np.testing.assert_array_equal(a, b)


def test_divergence_is_reported_before_the_bad_row_is_stepped():
    rng = np.random.default_rng(5)
    X, fields = _data(5, 6, 3, rng, repeated=False)
    X.data[:] = 1e6  # pairs of 1e12 without normalisation
    st = _state(6, 3, rng)
    settings = _settings("squared", False, limit=1e3)
    rows = training_rows(raw(X), np.zeros(5), np.ones(5), fields)
    _, _, info = adagrad_solver(rows, np.arange(5, dtype=np.int64), st, settings, 0,
                                RunContext())
    assert "diverged" in info["diverged"]


def test_kernels_compile_only_with_the_vectorizer():
    """numba compiles a dispatcher at the first call of each new signature with LLVM's SLP
    vectorizer off and caches that code for later processes. Every signature the epoch and
    prediction kernels hold was compiled by compile_vectorized, also after a fit (read-only
    field map) that follows a second partial_fit (writable one) in the same process; a call of a new
    signature does not compile by itself."""
    from fmlearn.ffm import FFMClassifier, _kernels

    rng = np.random.default_rng(6)
    X, fields = _data(40, 8, 4, rng, repeated=False)
    y = (rng.random(40) < 0.5).astype(int)
    online = FFMClassifier(n_factors=4, fields=fields, random_state=0)
    online.partial_fit(X, y, classes=[0, 1])
    online.partial_fit(X, y)  # the fitted field map, writable
    clf = FFMClassifier(n_factors=4, fields=fields, n_iter=2, random_state=0,
                        early_stopping=False).fit(X, y)
    clf.predict_proba(X)
    seen = 0
    for kernel in _kernels.VECTORIZED:
        for sig in kernel.overloads:
            assert (kernel.py_func, sig) in _kernels.SLP_SIGNATURES, (kernel, sig)
            seen += 1
    assert seen >= 3
    indptr, indices, data = raw(X)
    with pytest.raises(TypeError, match="No matching definition"):
        _kernels._predict_serial(indptr, indices, data.astype(np.float16), fields,
                                 clf._state().model(), True, 8, np.empty(40))
