"""Shared fixtures of the online-estimator tests: data makers and the call that runs a learner
over a batch (fixtures return functions, so a test asks for the data it needs)."""

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn._data import raw, to_csr


def _stream(n, d, density, rng, task="squared"):
    X = sp.random(n, d, density=density, random_state=rng, format="csr")
    X.data = rng.normal(size=X.nnz)
    X = to_csr(X)
    if task == "squared":
        y = rng.normal(size=n)
    else:
        y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    return X, y


def _learn_rows(learner, X, y, rows=None):
    n = X.shape[0]
    out = np.empty(n)
    order = np.arange(n, dtype=np.int64) if rows is None else np.asarray(rows, np.int64)
    status, row, _ = learner.learn(raw(X), y, np.ones(n), order, out)
    assert row == -1
    return out


def _regression_data(n=400, d=8, seed=0, sparse=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.6)
    y = X[:, 0] * X[:, 1] + X[:, 2] + 0.1 * rng.normal(size=n)
    return (sp.csr_matrix(X) if sparse else X), y


@pytest.fixture
def stream():
    """``stream(n, d, density, rng, task="squared")``: a random canonical CSR batch with
    normal values and normal targets (or labels +-1 for ``task="logistic"``)."""
    return _stream


@pytest.fixture
def learn_rows():
    """``learn_rows(learner, X, y, rows=None)``: run a learner over the rows (all, in order, or
    ``rows``) and return the prequential predictions; the rounds must all succeed."""
    return _learn_rows


@pytest.fixture
def regression_data():
    """``regression_data(n=400, d=8, seed=0, sparse=False)``: rows 60% dense with the target
    x0 x1 + x2 + noise, which every online model family can fit."""
    return _regression_data
