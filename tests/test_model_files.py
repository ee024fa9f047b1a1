"""Model files written by an earlier fmlearn load and predict what that version predicted.

``tests/fixtures/models`` holds small models saved by main's code before the fit plans and
the family subpackages (``index.json`` names the version; ``tools/make_model_fixtures.py``
writes them) and, in ``inputs.npz``, the rows predicted and the predictions made then. Loading
them today must give the same predictions up to floating-point rounding, and nothing the
files lack (``init_stdev_`` is recorded since) may stop them from loading.

The tolerance is derived, not observed: each prediction is a sum of at most m terms (the
row's non-zeros, the factors, the kept samples) whose magnitudes are bounded by the row's
"absolute model" M (the same model evaluated with every parameter and feature value made
non-negative, so that nothing cancels). A sum of m terms computed in another order, or by
another BLAS kernel, differs by at most about m u M, u the unit roundoff of the model's dtype
(Higham, "Accuracy and Stability of Numerical Algorithms", 2002, §3.1); the test allows
4 m u M.
"""

import json
import pathlib

import numpy as np
import pytest

import fmlearn

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "models"
INDEX = json.loads((FIXTURES / "index.json").read_text())["models"]


def _unit_roundoff(dtype):
    return float(np.finfo(np.dtype(dtype)).eps) / 2


def _fm_magnitude(w0, w, V, X):
    """|w0| + sum_j |w_j x_j| + sum_f (sum_j |v_jf x_j|)^2 per row (rows of X)."""
    A = np.abs(X)
    return abs(w0) + A @ np.abs(w) + np.sum((A @ np.abs(V)) ** 2, axis=1)


def _bound(est, X):
    """(M per row, m terms per row) for ``est`` on the rows X (see the module docstring)."""
    nnz = np.count_nonzero(X, axis=1)
    name = type(est).__name__
    if name in ("FMRegressor", "FMClassifier"):
        if hasattr(est, "samples_V_"):
            M = np.max([_fm_magnitude(w0, w, V, X) for w0, w, V in
                        zip(est.samples_w0_, est.samples_w_, est.samples_V_, strict=True)],
                       axis=0)
            return M, nnz + est.n_factors + 2 + est.samples_w0_.shape[0]
        return _fm_magnitude(est.w0_, est.w_, est.V_, X), nnz + est.n_factors + 2
    if name == "ConvexFMRegressor":
        U = est.atoms_ * np.sqrt(np.maximum(est.atom_weights_, 0))
        return _fm_magnitude(est.w0_, est.w_, U, X), nnz + U.shape[1] + 2
    if name == "OnlineFMRegressor":
        return _fm_magnitude(est.w0_, est.w_, est.V_, X), nnz + est.n_factors + 2
    if name in ("GFMRegressor", "IFMRegressor"):
        Z = np.abs((X - est.mean_) / est.scale_)
        U, V = np.abs(est.working_U_), np.abs(est.working_V_)
        M = (abs(est.working_intercept_) + Z @ np.abs(est.working_w_)
             + np.sum((Z @ U) * (Z @ V), axis=1))
        if name == "IFMRegressor":
            M = M + (Z * Z) @ np.sum(U * V, axis=1)
        return M, X.shape[1] + U.shape[1] + 2
    raise AssertionError(f"no rounding bound for {name}")


@pytest.mark.parametrize("name", sorted(INDEX))
def test_old_model_file_loads_and_predicts_as_stored(name, tmp_path):
    inputs = np.load(FIXTURES / "inputs.npz")
    X, expected = inputs["X"], inputs[name]
    est = fmlearn.io.load(FIXTURES / name)
    assert type(est).__name__ == INDEX[name]["class"]
    method = INDEX[name]["method"]
    got = np.asarray(getattr(est, method)(X))
    M, m = _bound(est, X)
    tol = 4 * m * _unit_roundoff(getattr(est, "dtype_", "float64")) * M
    if method == "predict_proba":  # |d Phi / d f| <= 1 / sqrt(2 pi); the mean of S samples
        tol = (tol / np.sqrt(2 * np.pi) + 4 * m * _unit_roundoff(np.float64))[:, None]
    assert got.shape == expected.shape
    err = np.abs(got - expected)
    assert np.all(err <= tol), (name, float(np.max(err - tol)))
    # and the loaded model saves and loads again to the same predictions
    est.save(tmp_path / name)
    assert np.array_equal(getattr(fmlearn.io.load(tmp_path / name), method)(X), got)
