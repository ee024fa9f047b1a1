"""The id-column warning: dense columns of whole numbers that fill a wide range (user / item
ids) warn at fit and name the encoder; the numeric columns of the bundled data sets do not."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn._id_columns import id_like_columns
from fmlearn.exceptions import IdColumnWarning


def _movielens_style(n=20000, seed=0):
    """user (943 ids), item (1,682 ids, Zipf-like popularity), timestamp: ml-100k's columns."""
    rng = np.random.default_rng(seed)
    users = rng.integers(1, 944, n)
    pop = 1.0 / np.arange(1, 1683) ** 0.8
    items = rng.choice(np.arange(1, 1683), size=n, p=pop / pop.sum())
    stamps = rng.integers(874_724_710, 893_286_638, n)
    return np.column_stack([users, items, stamps]).astype(float)


def _silent_styles(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    abalone = np.column_stack([rng.integers(1, 4, n),                  # sex coded 1..3
                               rng.uniform(0.075, 0.815, (n, 7)),      # lengths, weights
                               rng.integers(1, 30, n)])                # rings as a feature
    ijcnn1 = rng.uniform(-1, 1, (n, 22))
    a9a = (rng.random((n, 123)) < 0.1).astype(float)                   # binary one-hot
    adult = np.column_stack([
        rng.integers(17, 91, n),                                      # age
        np.round(rng.lognormal(12, 0.5, n)),                          # fnlwgt: wide spread
        rng.integers(1, 17, n),                                       # education-num
        np.where(rng.random(n) < 0.08, rng.integers(100, 99_999, n), 0),   # capital-gain
        rng.integers(1, 100, n),                                      # hours-per-week
    ])
    counts = rng.poisson(3.0, (n, 5))                                 # small counts
    ratings = rng.integers(1, 6, n)[:, None]
    stamps = rng.integers(874_724_710, 893_286_638, n)[:, None]       # timestamps
    scaled_ids = (rng.integers(1, 944, n)[:, None] - 472.0) / 272.0   # standardised: no id
    return {"abalone": abalone, "ijcnn1": ijcnn1, "a9a": a9a, "adult": adult,
            "counts": counts, "ratings": ratings, "timestamps": stamps,
            "scaled_ids": scaled_ids}


def test_detector_finds_ids_and_only_ids():
    found = id_like_columns(_movielens_style())
    assert [j for j, _ in found] == [0, 1]
    assert found[0][1] == 943 and 1400 < found[1][1] <= 1682
    row_index = np.arange(500, dtype=float)[:, None]             # a row number is an id too
    assert id_like_columns(row_index) == [(0, 500)]
    for name, X in _silent_styles().items():
        assert id_like_columns(X.astype(float)) == [], name
    assert id_like_columns(np.arange(150.0)[:, None]) == []      # too few rows to tell


@pytest.mark.parametrize("make", ["FMRegressor", "OnlineFMRegressor", "ConvexFMRegressor"])
def test_fit_on_dense_ids_warns_and_names_the_encoder(make):
    import fmlearn

    X = _movielens_style(3000)[:, :2]
    y = np.random.default_rng(1).normal(size=X.shape[0])
    est = getattr(fmlearn, make)()
    est.set_params(**{"n_iter": 1} if "n_iter" in est.get_params() else {"max_iter": 1})
    with pytest.warns(IdColumnWarning, match=r"column\(s\) 0 \(\d+ distinct values\), 1 .*"
                       r"TabularEncoder\(column_types=\{0: 'categorical', 1: 'categorical'\}"):
        est.fit(X, y)


def test_no_warning_on_numeric_styles_sparse_input_or_prediction():
    from fmlearn import FMRegressor

    y = np.random.default_rng(2).normal(size=4000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdColumnWarning)
        for X in _silent_styles().values():
            FMRegressor(2, solver="als", n_iter=1, random_state=0).fit(X.astype(float), y)
        ids = _movielens_style(4000)[:, :2]
        m = FMRegressor(2, solver="als", n_iter=1).fit(sp.csr_matrix(ids), y)  # sparse: no
        m.predict(ids)                                                     # predict: no
