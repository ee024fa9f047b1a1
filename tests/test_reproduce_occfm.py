"""``fmlearn reproduce occfm``'s protocol on a small generated stream (the real data sets are
not needed): per-fold progress lines, results kept without matplotlib, the cache resumes."""

import json
import sys

import numpy as np
import pytest

from fmlearn.datasets import make_ccfm_stream
from fmlearn.reproduce import occfm


def test_quick_protocol_prints_each_fold_and_survives_without_matplotlib(
        tmp_path, capsys, monkeypatch):
    X, y, _ = make_ccfm_stream(500, 10, rank=2, trace_norm=20.0, density=0.5,
                               task="classification", random_state=3)
    monkeypatch.setattr(occfm, "load", lambda name, data_home=None: (
        X.tocsr(), np.where(y > 0, 1.0, -1.0), "classification"))
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.warns(UserWarning, match="occfm_ijcnn1_time.png not written: .*matplotlib"):
        summary = occfm.run(str(tmp_path), quick=True, datasets=("ijcnn1",))
    out = capsys.readouterr().out
    for alg in occfm.ALGORITHMS:
        # a line when the fold starts (so no fold is silent), one with its figures at the end
        assert f"  {alg} fold 1/1: learning 400 rows, testing on 100 ..." in out
        assert f"  {alg} fold 1: preq_error_rate" in out
        res = summary["ijcnn1"][alg]["error_rate"]
        assert 0 <= res["test"] <= 1 and 0 <= res["prequential"] <= 1
    assert not list(tmp_path.glob("*.png"))
    cache = json.loads((tmp_path / "occfm_results.json").read_text())
    assert len(cache["runs"]) == len(occfm.ALGORITHMS)
    # a second run resumes from the cache: no fold is learned again
    with pytest.warns(UserWarning, match="not written"):
        occfm.run(str(tmp_path), quick=True, datasets=("ijcnn1",))
    assert "rows, testing on" not in capsys.readouterr().out
