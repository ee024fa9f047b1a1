"""Parameters renamed in 0.2 (docs/parameters.md, "was ..."): the old names still work until
0.3, with a FutureWarning naming the new one, the value passed through unchanged."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone

import fmlearn
from fmlearn import (
    CCFMClassifier,
    CCFMRegressor,
    ConvexFMClassifier,
    ConvexFMRegressor,
    GFMRegressor,
    IFMRegressor,
    OnlineCFMClassifier,
    OnlineCFMRegressor,
    OnlineFMClassifier,
    OnlineFMRegressor,
    PhaseRetrieval,
    SymmetricRankOneSensing,
)

# (class, learner or None, old name, new name): every rename in the estimators' signatures
# since 0.1.0 (found in the git history of their __init__; docs/parameters.md lists them).
RENAMES = [
    *[(cls, None, "eta", "trace_bound") for cls in (ConvexFMRegressor, ConvexFMClassifier)],
    *[(cls, None, old, new) for cls in (CCFMRegressor, CCFMClassifier)
      for old, new in (("delta", "trace_bound"), ("eta", "learning_rate"),
                       ("eig_iter", "eig_max_iter"))],
    *[(cls, None, old, new) for cls in (OnlineCFMRegressor, OnlineCFMClassifier)
      for old, new in (("delta", "trace_bound"), ("eta", "learning_rate_pairwise"),
                       ("ftrl_alpha", "learning_rate"), ("alpha", "learning_rate"),
                       ("beta", "ftrl_beta"), ("l1", "l1_linear"), ("l2", "reg_linear"),
                       ("eig_iter", "eig_max_iter"))],
    *[(cls, learner, old, new) for cls in (OnlineFMRegressor, OnlineFMClassifier)
      for learner, old, new in (
          ("ogd", "eta", "learning_rate"), ("ftrl", "ftrl_alpha", "learning_rate"),
          ("ftrl", "alpha", "learning_rate"), ("ftrl", "ftrl_alpha_v", "learning_rate_pairwise"),
          ("ftrl", "alpha_v", "learning_rate_pairwise"), ("ftrl", "beta", "ftrl_beta"),
          ("ftrl", "ftrl_beta_v", "ftrl_beta_pairwise"), ("ftrl", "beta_v", "ftrl_beta_pairwise"),
          ("ftrl", "l1", "l1_linear"), ("ftrl", "l1_v", "l1_pairwise"),
          ("ftrl", "l2", "reg_linear"), ("ftrl", "l2_v", "reg_pairwise"),
          ("ogd", "implicit", "implicit_sgd"))],
    *[(cls, None, "n_passes", "max_iter")
      for cls in (GFMRegressor, IFMRegressor, SymmetricRankOneSensing, PhaseRetrieval)],
]


def _make(cls, learner, **kw):
    return cls(learner, **kw) if learner is not None else cls(**kw)


@pytest.mark.parametrize("cls, learner, old, new", RENAMES,
                         ids=[f"{c.__name__}-{o}" for c, _, o, _ in RENAMES])
def test_old_name_is_accepted_with_a_future_warning(cls, learner, old, new):
    value = 0.123 if new not in ("max_iter", "eig_max_iter", "implicit_sgd") else (
        False if new == "implicit_sgd" else 7)
    with pytest.warns(FutureWarning, match=f"'{old}' was renamed '{new}'.*removed in 0.3"):
        est = _make(cls, learner, **{old: value})
    assert getattr(est, new) is value  # passed through unchanged
    params = est.get_params()
    assert params[new] is value and old not in params
    assert not hasattr(est, old)
    # clone and set_params speak the new names; set_params also takes the old one
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        twin = clone(est)
    assert twin.get_params() == params
    with pytest.warns(FutureWarning, match=f"'{old}' was renamed '{new}'"):
        twin.set_params(**{old: value})
    assert getattr(twin, new) is value
    # the new name and its old one together: which one was meant?
    with pytest.raises(TypeError, match=f"both '{old}' and '{new}'"):
        _make(cls, learner, **{old: value, new: value})


def test_old_name_of_another_learner_is_ignored_as_before():
    # OnlineFMRegressor's 0.1 'eta' was the OGD step; FTRL ignored it (it used ftrl_alpha).
    with pytest.warns(FutureWarning) as record:
        est = OnlineFMRegressor("ftrl", eta=0.7, ftrl_alpha=0.2)
    assert est.learning_rate == 0.2
    assert "'eta' has no effect with learner='ftrl'" in str(record[0].message)
    assert "'ftrl_alpha' was renamed 'learning_rate'" in str(record[1].message)
    with pytest.warns(FutureWarning, match="no effect with learner='ogd'"):
        est = OnlineFMRegressor("ogd", l2=3.0, reg_linear=0.5)
    assert est.reg_linear == 0.5
    with pytest.raises(TypeError, match="two old names of 'learning_rate'"), \
            pytest.warns(FutureWarning):
        OnlineCFMRegressor(ftrl_alpha=0.1, alpha=0.2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        CCFMRegressor(bogus=1)


def test_old_name_fits_the_same_model():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    y = X[:, 0] * X[:, 1] + X[:, 2]
    new = GFMRegressor(n_factors=2, max_iter=3, tol=None, random_state=0).fit(X, y)
    with pytest.warns(FutureWarning):
        old = GFMRegressor(n_factors=2, n_passes=3, tol=None, random_state=0).fit(X, y)
    np.testing.assert_array_equal(old.predict(X), new.predict(X))


def test_renamed_function_keywords():
    from fmlearn import datasets
    from fmlearn.reproduce import occfm
    from fmlearn.stream import rebatch

    chunks = [(np.ones((5, 2)), np.arange(5.0))]
    with pytest.warns(FutureWarning, match="'batch_rows' was renamed 'batch_size'"):
        got = [b[0].shape[0] for b in rebatch(chunks, batch_rows=2, last_batch="keep")]
    assert got == [2, 2, 1]
    with pytest.raises(TypeError, match="both 'batch_rows' and 'batch_size'"):
        rebatch(chunks, 2, batch_rows=2)
    est = fmlearn.FMRegressor(solver="sgd", n_iter=1, random_state=0)
    with pytest.warns(FutureWarning, match="'batch_rows' was renamed 'batch_size'"):
        fmlearn.fit_stream(est, chunks * 3, batch_rows=4)
    assert est.stream_history_["batches"] == [3]
    # reproduce.occfm's data folder: the value reaches fetch unchanged
    seen = {}

    def fake_fetch(name, data_home):
        seen["data_home"] = data_home
        raise LookupError("stop")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(datasets, "fetch", fake_fetch)
        with pytest.warns(FutureWarning, match="'data_dir' was renamed 'data_home'"), \
                pytest.raises(LookupError):
            occfm.load("ijcnn1", data_dir="/nowhere")
    assert seen["data_home"] == "/nowhere"


@pytest.mark.parametrize("argv, dest, value", [
    (["fit", "train.libfm", "--rank", "3"], "n_factors", 3),
    (["fit", "train.libfm", "--burn-in", "4"], "n_burn_in", 4),
    (["fit", "train.libfm", "--batch-rows", "50"], "batch_size", 50),
    (["online", "train.libsvm", "--delta", "5"], "trace_bound", 5.0),
    (["online", "train.libsvm", "--eta", "0.5"], "learning_rate", 0.5),
    (["online", "train.libsvm", "--rank", "6"], "n_factors", 6),
    (["online", "train.libsvm", "--passes", "2"], "n_iter", 2),
])
def test_renamed_command_line_flags(argv, dest, value):
    from fmlearn.cli import build_parser

    with pytest.warns(FutureWarning, match=f"{argv[2]} was renamed --"):
        args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value
    assert argv[2] not in build_parser().format_help()
