"""scikit-learn's common estimator checks, for every public estimator and every solver.

Nothing is excluded: the checks include sample-weight equivalence, which holds exactly because
``fit`` merges duplicate rows into weights (see ``fmlearn._data.merge_duplicate_rows``).
"""

from sklearn.utils.estimator_checks import parametrize_with_checks

from fmlearn import (
    AsymmetricRankOneSensing,
    ConvexFMClassifier,
    ConvexFMRegressor,
    FMClassifier,
    FMRegressor,
    GFMRegressor,
    IFMRegressor,
    PhaseRetrieval,
    SymmetricRankOneSensing,
)

ESTIMATORS = [
    FMRegressor(),
    FMRegressor(solver="als", n_iter=30, reg_linear=0.1, reg_pairwise=0.1),
    FMRegressor(solver="sgd", n_iter=30),
    FMClassifier(),
    FMClassifier(solver="als", n_iter=30, reg_linear=0.1, reg_pairwise=0.1),
    FMClassifier(solver="sgd", n_iter=30),
    GFMRegressor(),
    GFMRegressor(solver="moment"),
    IFMRegressor(),
    SymmetricRankOneSensing(),
    PhaseRetrieval(),
    AsymmetricRankOneSensing(),
    ConvexFMRegressor(max_iter=10),
    ConvexFMRegressor(max_iter=10, step="standard", reg_linear=0.1),
    ConvexFMClassifier(max_iter=10),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    check(estimator)
