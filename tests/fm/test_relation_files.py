"""libFM's binary data and block structure (``fmlearn.datasets``) and relation blocks on the
command line (``-relation``, ``fmlearn fit --relation``, ``predict``/``evaluate``,
``fmlearn convert``), against files written by libFM 1.4.4's own tools
(tests/fixtures/libfm_bs)."""

import filecmp
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import fmlearn
from fmlearn import FMRegressor, RelationBlock, RelationData
from fmlearn.cli import main
from fmlearn.datasets import (
    load_libfm_binary,
    load_libfm_matrix,
    load_libfm_relation,
    load_svmlight,
    save_libfm_binary,
    save_libfm_relation,
)

LIBFM = Path(__file__).resolve().parents[1] / "fixtures" / "libfm_bs"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _clean_error(code, err, *words):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fmlearn: error:"), err
    for w in words:
        assert w in lines[0], lines[0]


@pytest.fixture
def bs(tmp_path):
    """libFM's files copied to a scratch folder, with a test part (the training rows again)."""
    for f in LIBFM.iterdir():
        shutil.copy(f, tmp_path / f.name)
    for ext in ("x", "xt", "y"):
        shutil.copy(tmp_path / f"train.{ext}", tmp_path / f"test.{ext}")
    shutil.copy(tmp_path / "user.train", tmp_path / "user.test")
    return tmp_path


def test_reads_what_libfm_tools_write_and_writes_the_same_bytes(tmp_path):
    X, y = load_libfm_binary(LIBFM / "train")
    Xt, yt = load_svmlight(str(LIBFM / "train.libfm"), zero_based=True, n_features=3)
    np.testing.assert_array_equal(X.toarray(), Xt.toarray())
    np.testing.assert_array_equal(y, yt)
    B, idx, groups = load_libfm_relation(LIBFM / "user", n_rows={"train": 5})
    Bt, _ = load_svmlight(str(LIBFM / "user.libfm"), zero_based=True, n_features=6)
    np.testing.assert_allclose(B.toarray(), Bt.toarray(), rtol=1e-7)  # float32 in the files
    assert idx["train"].tolist() == [0, 1, 0, 2, 1] and groups is None
    # fmlearn's writers produce libFM's bytes
    save_libfm_binary(tmp_path / "train", Xt, yt)
    save_libfm_relation(tmp_path / "user", Bt, {"train": idx["train"]})
    for name in ("train.x", "train.xt", "train.y", "user.x", "user.xt", "user.train"):
        assert filecmp.cmp(tmp_path / name, LIBFM / name, shallow=False), name


def _corrupt(path, edit):
    data = bytearray(path.read_bytes())
    edit(data)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name, edit, words", [
    ("train.x", lambda b: b.__delitem__(slice(-3, None)), "truncated"),
    ("train.x", lambda b: b.__setitem__(0, 7), "not a libFM binary matrix"),
    ("train.x", lambda b: b.__setitem__(slice(28, 32), (9).to_bytes(4, "little")),
     "column 9, outside"),
    ("train.y", lambda b: b.extend(b"\0\0\0\0"), "truncated"),
])
def test_crafted_binary_files_are_refused_by_name(bs, name, edit, words):
    _corrupt(bs / name, edit)
    with pytest.raises(ValueError, match=words) as info:
        load_libfm_matrix(bs / name) if name.endswith(".x") else load_libfm_binary(bs / "train")
    assert name in str(info.value)


def test_relation_files_that_do_not_match_are_refused_by_name(bs):
    (bs / "user.train").write_text("0\n1\n0\n2\n")
    with pytest.raises(ValueError, match="user.train holds 4 block indices but its data file "
                                         "has 5 rows"):
        load_libfm_relation(bs / "user", n_rows={"train": 5})
    (bs / "user.train").write_text("0\n1\n0\n3\n1\n")
    with pytest.raises(ValueError, match=r"user.train: sample 3 has block index 3, but .*has 3"):
        load_libfm_relation(bs / "user")
    (bs / "user.train").write_text("0\n1\nx\n2\n1\n")
    with pytest.raises(ValueError, match="user.train: expected one integer"):
        load_libfm_relation(bs / "user")
    shutil.copy(LIBFM / "user.train", bs / "user.train")
    (bs / "user.groups").write_text("0\n1\n")
    with pytest.raises(ValueError, match="user.groups: 2 group ids for 6 features"):
        load_libfm_relation(bs / "user")
    (bs / "user.groups").unlink()
    shutil.copy(bs / "train.xt", bs / "user.xt")  # .x and .xt of different matrices
    with pytest.raises(ValueError, match="user.x and .*user.xt do not hold the same matrix"):
        load_libfm_relation(bs / "user")


def _python_fit(bs, solver, k, n_iter, seed, reg=None):
    X, y = load_libfm_binary(bs / "train")
    B, idx, _ = load_libfm_relation(bs / "user")
    Xr = RelationData(X, [RelationBlock(idx["train"], B)])
    kw = {} if reg is None else dict(reg_bias=reg[0], reg_linear=reg[1], reg_pairwise=reg[2])
    est = FMRegressor(k, solver=solver, n_iter=n_iter, init_stdev=0.1, random_state=seed,
                      groups=Xr.block_groups(), **kw)
    return est.fit(Xr, y), Xr


@pytest.mark.parametrize("solver", ["mcmc", "als"])
def test_libfm_relation_flag_equals_native_option_and_python(bs, tmp_path, capsys, solver):
    preds = [tmp_path / "libfm.txt", tmp_path / "native.txt"]
    model = tmp_path / "m.fmz"
    reg = ["-regular", "0.1,0.2,0.3"] if solver == "als" else []
    code, out, err = run(capsys, "-task", "r", "-method", solver, "-dim", "1,1,2", "-iter", 6,
                         "-train", bs / "train", "-test", bs / "test", "-relation",
                         bs / "user", "-out", preds[0], "-seed", 1, "-save_model", model, *reg)
    assert code == 0, err
    assert "5 rows, 9 features" in out
    code, out, err = run(capsys, "fit", bs / "train", "--test", bs / "test", "--relation",
                         bs / "user", "--solver", solver, "--n-factors", 2, "--n-iter", 6,
                         "--seed", 1, "--out", preds[1],
                         *(["--reg", "0.1,0.2,0.3"] if solver == "als" else []))
    assert code == 0, err
    assert preds[0].read_text() == preds[1].read_text()
    m = fmlearn.load(model)
    assert m.relation_features_ == [3, 6] and list(m.groups) == [0] * 3 + [1] * 6
    ref, Xr = _python_fit(bs, solver, 2, 6, 1, (0.1, 0.2, 0.3) if solver == "als" else None)
    np.testing.assert_array_equal(m.V_, ref.V_)
    # predict / evaluate with the relation's test indices
    code, out, err = run(capsys, "predict", model, bs / "test", "--relation", bs / "user")
    assert code == 0, err
    np.testing.assert_allclose([float(v) for v in out.split()], m.predict(Xr), rtol=1e-15)
    code, out, err = run(capsys, "evaluate", model, bs / "test", "--relation", bs / "user",
                         "--json")
    assert code == 0 and '"rmse"' in out, err


def test_cli_relation_errors_name_the_file(bs, tmp_path, capsys):
    (bs / "user.test").write_text("0\n1\n")
    code, _, err = run(capsys, "fit", bs / "train", "--test", bs / "test", "--relation",
                       bs / "user", "--solver", "als", "--n-iter", 2)
    _clean_error(code, err, "user.test holds 2 block indices", "5 rows")
    code, _, err = run(capsys, "fit", bs / "train", "--relation", bs / "nope", "--n-iter", 2)
    _clean_error(code, err, "nope.x nor", "nope.xt")
    code, _, err = run(capsys, "fit", bs / "train", "--relation", bs / "user", "--solver",
                       "sgd")
    _clean_error(code, err, "--relation", "mcmc or als")


def test_convert_both_directions(tmp_path, capsys):
    code, _, err = run(capsys, "convert", LIBFM / "train.libfm", tmp_path / "bin")
    assert code == 0, err
    for ext in ("x", "xt", "y"):
        assert filecmp.cmp(tmp_path / f"bin.{ext}", LIBFM / f"train.{ext}", shallow=False)
    code, _, err = run(capsys, "convert", tmp_path / "bin", tmp_path / "back.libfm")
    assert code == 0, err
    X, y = load_svmlight(str(tmp_path / "back.libfm"), zero_based=True, n_features=3)
    X0, y0 = load_libfm_binary(LIBFM / "train")
    np.testing.assert_array_equal(X.toarray(), X0.toarray())
    np.testing.assert_array_equal(y, y0)


def test_binary_main_table_without_relations(bs, tmp_path, capsys):
    code, out, err = run(capsys, "fit", bs / "train", "--solver", "als", "--n-iter", 3,
                         "--n-factors", 2, "--seed", 0, "--model", tmp_path / "m.fmz")
    assert code == 0, err
    X, y = load_libfm_binary(bs / "train")
    m = fmlearn.load(tmp_path / "m.fmz")
    assert not hasattr(m, "relation_features_") and m.n_features_in_ == 3
    assert sp.issparse(X) and np.isfinite(m.predict(X)).all()


def test_failed_cli_calls_keep_the_model_and_refuse_other_relations(bs, tmp_path, capsys):
    model = tmp_path / "m.fmz"
    code, _, err = run(capsys, "-task", "r", "-method", "als", "-dim", "1,1,2", "-iter", 3,
                       "-train", bs / "train", "-relation", bs / "user", "-save_model", model)
    assert code == 0, err
    saved = model.read_bytes()
    # a relation of another width than the model's at predict time (same test file)
    B, idx, _ = load_libfm_relation(bs / "user")
    save_libfm_relation(bs / "wide", sp.hstack([B, sp.csr_matrix((B.shape[0], 1))]).tocsr(),
                        {"test": idx["train"]})
    code, _, err = run(capsys, "predict", model, bs / "test", "--relation", bs / "wide")
    _clean_error(code, err, "block 0: 6 features")
    # the relations forgotten: refused, not predicted from the row-level features alone
    code, _, err = run(capsys, "predict", model, bs / "test")
    _clean_error(code, err, "fitted with relation blocks", "--relation")
    # a relation whose index file does not match its training file: no model written
    (bs / "user.train").write_text("0\n1\n0\n")
    code, _, err = run(capsys, "-task", "r", "-method", "als", "-dim", "1,1,2", "-iter", 3,
                       "-train", bs / "train", "-relation", bs / "user", "-save_model", model)
    _clean_error(code, err, "user.train holds 3 block indices", "5 rows")
    assert model.read_bytes() == saved
