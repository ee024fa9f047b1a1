"""fmlearn._checkpoint: a checkpoint file's record is checked before a fit resumes from it
(the distributed fits' records; fit_stream's in tests/test_stream_checkpoint.py)."""

import numpy as np
import pytest

from fmlearn import FMRegressor
from fmlearn._checkpoint import Checkpointer
from fmlearn.exceptions import ModelFileError


def _written(tmp_path, kind, progress, step=2, total=None):
    X = np.random.default_rng(0).normal(size=(30, 3))
    est = FMRegressor(solver="sgd", n_iter=6, random_state=0).fit(X, X[:, 0])
    ck = Checkpointer(tmp_path, 1, kind, est, {"n_features": 3})
    ck.write(est, step, est.n_iter if total is None else total, progress)
    return Checkpointer(tmp_path, 1, kind, est, {"n_features": 3})


@pytest.mark.parametrize("kind, progress, total, words", [
    ("fd.fit/sgd", {"seed": 5}, None, "has no progress 't'"),
    ("fd.fit/sgd", {"seed": 5, "t": -3}, None, "'t' = -3 is not a count"),
    ("fd.fit/mcmc", {}, None, "has no progress 'seed'"),
    ("fd.fit/mcmc", {"seed": -1}, None, "'seed' = -1 is not a seed"),
    ("fd.fit/als", {"seed": 1.5}, None, "'seed' = 1.5 is not a seed"),
    ("fd.fit/mcmc", {"seed": 5}, 10**9, "total 1000000000 is not the parameters' n_iter 6"),
])
def test_crafted_distributed_record_is_refused(tmp_path, kind, progress, total, words):
    ck = _written(tmp_path, kind, progress, total=total)
    with pytest.raises(ModelFileError, match=words):
        ck.resume()


@pytest.mark.parametrize("kind, progress", [("fd.fit/sgd", {"seed": 5, "t": 40}),
                                            ("fd.fit/mcmc", {"seed": 5})])
def test_a_written_record_resumes(tmp_path, kind, progress):
    est, info = _written(tmp_path, kind, progress).resume()
    assert info["step"] == 2 and info["progress"] == progress and est.n_iter == 6


@pytest.mark.parametrize("step", [0, 6, -1, 7])
def test_step_out_of_range_is_refused(tmp_path, step):
    ck = _written(tmp_path, "fd.fit/mcmc", {"seed": 5}, step=step)
    with pytest.raises(ModelFileError, match="step"):
        ck.resume()
