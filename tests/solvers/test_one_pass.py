"""fmlearn.solvers.one_pass: the contraction tracking (model_change against a dense oracle,
the stall test on made-up histories), the pass loop's stopping rule and the auto rules."""

import numpy as np
import pytest

from fmlearn.solvers.one_pass import (
    AUTO_BATCH_FACTOR,
    STALL_WINDOW,
    OnePassSettings,
    OnePassState,
    auto_batch_size,
    auto_max_iter,
    contraction_stalled,
    gaussian_gap,
    model_change,
    new_state,
    one_pass_fit,
)


@pytest.mark.blas
def test_model_change_matches_dense_frobenius():
    rng = np.random.default_rng(0)
    d, k = 15, 3
    a = OnePassState(rng.standard_normal(d), rng.standard_normal((d, k)),
                     rng.standard_normal((d, k)))
    b = OnePassState(rng.standard_normal(d), rng.standard_normal((d, k)),
                     rng.standard_normal((d, k)))

    def dense(s):
        return (s.U @ s.V.T + s.V @ s.U.T) / 2

    want = np.sqrt((np.sum((dense(b) - dense(a)) ** 2) + np.sum((b.w - a.w) ** 2))
                   / (np.sum(dense(b) ** 2) + np.sum(b.w ** 2)))
    assert model_change(a, b) == pytest.approx(want, rel=1e-12)
    assert model_change(b, b) == pytest.approx(0.0, abs=1e-7)


def test_stall_test_on_histories():
    w = STALL_WINDOW
    t = np.arange(3 * w)
    contracting = (np.exp(-t), 0.5 * np.exp(-t))           # RMSE and change fall together
    converged_noisy = (np.full(3 * w, 0.5), np.full(3 * w, 0.05))   # moves by the noise only
    wandering = (1.0 + 0.3 * np.sin(t), np.full(3 * w, 0.4))       # moves, RMSE does not fall
    assert not contraction_stalled(*contracting)
    assert not contraction_stalled(*converged_noisy)
    assert contraction_stalled(*wandering)
    assert not contraction_stalled(wandering[0][:2 * w], wandering[1][:2 * w])  # too short
    assert gaussian_gap(np.zeros(4), np.full(4, 3.0)) == 0.0
    assert gaussian_gap(np.full(4, 2.0), np.full(4, 9.0)) == pytest.approx(8.0)


def test_auto_rules():
    assert auto_batch_size(3, 100) == AUTO_BATCH_FACTOR * 300
    assert auto_max_iter("auto", 10) == 1 and auto_max_iter("auto", 9) > 1
    assert auto_max_iter(7, 1) == 7


def test_pass_loop_stops_on_tol_and_runs_every_pass_without_it():
    rng = np.random.default_rng(1)
    d, k, n = 10, 2, 400
    Q = np.linalg.qr(rng.standard_normal((d, k)))[0]
    X = rng.standard_normal((n, d))
    y = np.einsum("ij,jk,ik->i", X, Q @ np.diag([2.0, -1.0]) @ Q.T, X)
    parts = [(X[i:i + 100], y[i:i + 100], np.ones(100)) for i in range(0, n, 100)]

    def fit(tol):
        return one_pass_fit(lambda: parts, new_state(d, k), OnePassSettings(k), max_iter=30,
                            tol=tol)

    _, steps, info = fit(1e-3)
    assert info["converged"] and 3 <= info["n_passes"] < 30 and steps == 4 * info["n_passes"]
    _, steps, info = fit(None)
    assert info["n_passes"] == 30 and steps == 120 and not info["converged"]
