"""The validation layer between every entry point and the kernels (issue 10, deliverable 1).

Malformed sparse input (indices out of range, a broken indptr, inconsistent lengths, non-finite
values) must end in a ValueError naming the problem, through fit, predict and partial_fit of
every estimator, the stream reader and the prequential evaluation; never in a crash of the
process. The crash cases run in a child process (tests/hardening.py), so a segfault is a test
failure and not a dead test run.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import fmlearn
from fmlearn._data import check_sparse_structure, to_csc, to_csr
from hardening import estimators, malformed, run_in_child

NAMES = sorted(estimators())
GROUPS = [NAMES[i::3] for i in range(3)]


@pytest.fixture(scope="module")
def malformed_report():
    # one child process: its import and the kernels' cache load cost more than its cases
    return run_in_child("malformed", NAMES)


@pytest.mark.parametrize("group", GROUPS, ids=["group0", "group1", "group2"])
def test_malformed_sparse_input_never_crashes(malformed_report, group):
    report = {k: v for k, v in malformed_report.items() if k.split("/", 1)[0] in group}
    assert {k.split("/", 1)[0] for k in report} == set(group)
    cases = malformed(240, 6)
    # every estimator has fit and predict; the online and SGD ones partial_fit too
    assert len(report) >= 2 * len(group) * len(cases)
    wrong = {k: v for k, v in report.items() if not v.startswith("ValueError")}
    assert not wrong, wrong
    for key, message in report.items():
        case = key.split("/")[1]
        if case in ("nan_value", "inf_value"):
            assert "NaN" in message or "infinity" in message, (key, message)
        else:
            assert "malformed" in message, (key, message)


def _scipy_full_check_rejects(X):
    try:
        X.check_format(full_check=True) if X.format != "coo" else X._check()
        if X.format == "coo":
            # SciPy's COO check runs in the constructor only: rebuild it from the fields
            sp.coo_matrix((X.data, (X.row, X.col)), shape=X.shape)
    except (ValueError, IndexError):
        return True
    return False


@pytest.mark.parametrize("case", sorted(malformed(5, 4)))
def test_structure_check_rejects_what_scipys_full_check_rejects(case):
    X = malformed(5, 4)[case]
    if case in ("nan_value", "inf_value"):  # structure fine: finiteness is the callers' check
        assert check_sparse_structure(X) is X
        return
    assert _scipy_full_check_rejects(X), "the oracle should reject this case"
    with pytest.raises(ValueError, match="malformed"):
        check_sparse_structure(X)


def test_structure_check_accepts_every_valid_format_and_edge_shape():
    rng = np.random.default_rng(0)
    for shape in [(0, 3), (3, 0), (1, 1), (7, 5), (50, 40)]:
        dense = rng.normal(size=shape) * (rng.random(shape) < 0.3)
        for fmt in ("csr", "csc", "coo", "bsr", "lil", "dok", "dia"):
            for ctor in (sp.csr_matrix, sp.csr_array):
                X = ctor(dense).asformat(fmt)
                assert check_sparse_structure(X) is X
        # unsorted indices and duplicates are valid: to_csr sums them
        X = sp.csr_matrix(dense)
        if X.nnz > 1:
            X.indices[:2] = X.indices[:2][::-1] if X.indptr[1] >= 2 else X.indices[:2]
            check_sparse_structure(X)
    # trailing unused capacity (len(indices) > indptr[-1]) is valid SciPy and is cut off
    X = sp.csr_matrix((np.array([1.0, 2.0, 9.0]), np.array([0, 1, 7]), np.array([0, 1, 2])),
                      shape=(2, 3))
    assert to_csr(X).toarray().tolist() == [[1.0, 0, 0], [0, 2.0, 0]]
    assert to_csc(X).toarray().tolist() == [[1.0, 0, 0], [0, 2.0, 0]]


def test_conversions_check_before_scipy_indexes():
    bad = malformed(4, 3)["csc_row_index_too_large"]
    for convert in (to_csr, to_csc):
        with pytest.raises(ValueError, match="row index 7 is outside"):
            convert(bad)


def test_stream_and_prequential_paths_check_the_structure():
    bad = malformed(30, 4)["indptr_decreasing"]
    y = np.zeros(30)
    with pytest.raises(ValueError, match="malformed"):
        fmlearn.fit_stream(fmlearn.OnlineFMRegressor(), [(bad, y)])
    with pytest.raises(ValueError, match="malformed"):
        fmlearn.evaluate_prequential(fmlearn.OnlineFMRegressor(),
                                     (malformed(30, 4)["csc_row_index_too_large"], y))


def test_valid_sparse_formats_predict_like_dense():
    X = np.random.default_rng(1).normal(size=(60, 5))
    y = X[:, 0] * X[:, 1]
    m = fmlearn.FMRegressor(n_factors=2, solver="als", n_iter=3, random_state=0).fit(X, y)
    expected = m.predict(X)
    for fmt in ("csr", "csc", "coo", "bsr", "lil", "dok"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = m.predict(sp.csr_matrix(X).asformat(fmt))
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_canonical_csr_fast_path_takes_only_what_to_csr_would_return():
    # the fitted-stream fast path: X itself (no copy) when it is canonical float64 CSR of the
    # model's width; None for anything to_csr would change; malformed structure raises as on
    # the general path
    from fmlearn._data import canonical_csr_or_none

    X = to_csr(sp.random(5, 7, density=0.4, random_state=0, format="csr"), np.float64)
    assert canonical_csr_or_none(X, 7) is X
    assert canonical_csr_or_none(X, 8) is None
    assert canonical_csr_or_none(X.astype(np.float32), 7) is None
    assert canonical_csr_or_none(X.toarray(), 7) is None
    assert canonical_csr_or_none(X.tocsc(), 7) is None
    unsorted = sp.csr_matrix((np.array([1.0, 2.0]), np.array([3, 1]), np.array([0, 2])),
                             shape=(1, 7))
    dup = sp.csr_matrix((np.array([1.0, 2.0]), np.array([1, 1]), np.array([0, 2])),
                        shape=(1, 7))
    zero = sp.csr_matrix((np.array([0.0, 2.0]), np.array([1, 2]), np.array([0, 2])),
                         shape=(1, 7))
    nan = sp.csr_matrix((np.array([np.nan]), np.array([1]), np.array([0, 1])), shape=(1, 7))
    for other in (unsorted, dup, zero, nan):
        assert canonical_csr_or_none(other, 7) is None
        assert to_csr(other, np.float64) is not other
    bad = sp.csr_matrix((np.ones(1), np.array([10**6]), np.array([0, 1])), shape=(1, 7))
    with pytest.raises(ValueError, match="column index 1000000 is outside"):
        canonical_csr_or_none(bad, 7)
