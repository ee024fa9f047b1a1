"""``fmlearn fit --model ffm``, ``fmlearn ffm-train`` / ``ffm-predict`` (LIBFFM's command
lines) and predict / evaluate of FFM models, in-process on tiny generated libffm files."""

import numpy as np
import pytest

import fmlearn
from fmlearn.cli import main
from fmlearn.datasets import make_ffm_ctr, save_libffm


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ffm")
    X, y, fields, _, _ = make_ffm_ctr(1600, n_fields=3, n_values=12, random_state=0)
    out = {"dir": folder}
    for part, rows in (("train", slice(0, 1200)), ("va", slice(1200, 1400)),
                       ("test", slice(1400, 1600))):
        path = folder / f"{part}.ffm"
        save_libffm(X[rows], y[rows], fields, str(path))
        out[part] = str(path)
    return out


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_ffm_train_and_predict_take_libffm_command_lines(files, capsys, tmp_path):
    model = tmp_path / "m.fmz"
    code, out, err = run(capsys, "ffm-train", "-k", 6, "-t", 12, "-r", 0.1, "-l", 1e-4,
                         "-s", 1, "-p", files["va"], "--auto-stop", files["train"], model)
    assert code == 0, err
    assert out.splitlines()[0].split() == ["iter", "tr_logloss", "va_logloss", "tr_time"]
    m = fmlearn.load(str(model))
    assert (m.n_factors, m.learning_rate, m.reg_pairwise, m.reg_linear) == (6, 0.1, 1e-4, 1e-4)
    assert m.early_stopping and m.n_iter_no_change == 1 and m.tol == 0.0 and m.normalize_rows
    if m.best_iteration_ < m.n_iter_:
        assert f"Auto-stop. Use model at {m.best_iteration_}th iteration." in out
    pred = tmp_path / "p.txt"
    code, out, err = run(capsys, "ffm-predict", files["test"], model, pred)
    assert code == 0, err
    assert out.startswith("logloss = ")
    from fmlearn.datasets import load_libffm

    X, y, _ = load_libffm(files["test"], fields=m.known_fields_)
    np.testing.assert_array_equal(np.loadtxt(pred), m.predict_proba(X)[:, 1])
    code, out, _ = run(capsys, "evaluate", model, files["test"], "--json")
    assert code == 0 and '"auc"' in out


def test_fit_model_ffm_mixes_native_and_libffm_flags(files, capsys, tmp_path):
    model = tmp_path / "m.fmz"
    code, out, err = run(capsys, "fit", "--model", "ffm", files["train"], "--test",
                         files["test"], "-k", 3, "--n-iter", 4, "--no-norm", "--seed", 1,
                         "--save", model, "--float32")
    assert code == 0, err
    m = fmlearn.load(str(model))
    assert (m.n_factors, m.n_iter_, m.normalize_rows, m.dtype_) == (3, 4, False, "float32")
    assert "test log-loss" in out and "test auc" in out and not m.early_stopping_


def test_stream_with_auto_stop_and_hashing(files, capsys, tmp_path):
    model = tmp_path / "h.fmz"
    code, out, err = run(capsys, "fit", "--model", "ffm", files["train"], "--test",
                         files["va"], "--stream", "--batch-size", 300, "--auto-stop",
                         "--hash-buckets", 16, "-t", 5, "--seed", 0, "--save", model)
    assert code == 0, err
    m = fmlearn.load(str(model))
    assert m.n_features_in_ == 3 * 16 and "streamed in chunks" in out
    code, out, err = run(capsys, "evaluate", model, files["test"], "--hash-buckets", 16)
    assert code == 0, err


@pytest.mark.parametrize("argv, message", [
    (["fit", "--model", "ffm", "{train}", "--auto-stop"], "--auto-stop stops on the "
                                                          "validation file"),
    (["fit", "{train}", "--no-norm"], "--no-norm: for --model ffm"),
    (["fit", "--model", "ffm", "{bad}"], "line 2: token '3:1' has no field"),
    (["ffm-train", "-k"], "LIBFFM option -k needs a value"),
    (["ffm-train", "-k", "4"], "usage: fmlearn ffm-train"),
    (["ffm-predict", "{train}"], "usage: fmlearn ffm-predict"),
])
def test_errors_are_one_line_and_exit_2(files, capsys, tmp_path, argv, message):
    bad = tmp_path / "bad.ffm"
    bad.write_text("1 0:1:1 1:2:1\n0 0:1:1 3:1\n")
    argv = [a.format(train=files["train"], bad=bad) for a in argv]
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_model_path_after_model_still_saves_an_fm(files, capsys, tmp_path):
    """``--model OUT.fmz`` (fmlearn's spelling before --save) keeps working for the FM."""
    train = tmp_path / "t.libfm"
    train.write_text("".join(f"{i % 3} 0:{i % 5} {1 + i % 4}:1\n" for i in range(60)))
    model = tmp_path / "fm.fmz"
    code, _, err = run(capsys, "fit", train, "--solver", "als", "--n-iter", 2, "--model", model)
    assert code == 0, err
    assert model.exists()
    assert type(fmlearn.load(str(model))).__name__ == "FMRegressor"
