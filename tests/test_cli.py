"""The ``fmlearn`` command, run in-process through ``fmlearn.cli.main`` on tiny generated
svmlight files: fit -> model -> predict -> evaluate, libFM flags, demo, reproduce, errors."""

import json
import sys
import types

import numpy as np
import pytest
from sklearn import metrics
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

import fmlearn
from fmlearn import reproduce
from fmlearn.cli import main

N_TRAIN, N_TEST, D = 160, 60, 10


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Regression and classification train/test files (0-based indices, as libFM writes)."""
    folder = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    n = N_TRAIN + N_TEST
    X = rng.normal(size=(n, D)) * (rng.random((n, D)) < 0.4)
    X[:, D - 1] = 1.0  # every file uses the last index, so train and test have the same width
    f = X[:, 0] * X[:, 1] + X[:, 2] - X[:, 3] * X[:, 4]
    y = f + 0.1 * rng.normal(size=n)
    out = {"dir": folder}
    for name, target in (("r", y), ("c", np.where(f > np.median(f), 1, -1))):
        for part, rows in (("train", slice(0, N_TRAIN)), ("test", slice(N_TRAIN, n))):
            path = folder / f"{name}.{part}.libfm"
            dump_svmlight_file(X[rows], target[rows], str(path), zero_based=True)
            out[f"{name}_{part}"] = str(path)
    return out


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _read(path, n_features):
    return load_svmlight_file(path, zero_based=True, n_features=n_features)


def _values(text):
    return np.array([float(v) for v in text.split()])


def _report(out):
    """The 'name  value' lines of a fit/evaluate report as a dict of strings."""
    pairs = {}
    for line in out.splitlines():
        name, _, value = line.rpartition("  ")
        if name:
            pairs[name.strip()] = value.strip()
    return pairs


# -- fit -> model -> predict -> evaluate ----------------------------------------------------
@pytest.mark.parametrize("solver", ["mcmc", "als", "sgd"])
def test_regression_round_trip(files, tmp_path, capsys, solver):
    model, pred = tmp_path / "m.fmz", tmp_path / "pred.txt"
    code, out, err = run(capsys, "fit", files["r_train"], "--test", files["r_test"],
                         "--solver", solver, "--n-factors", 3, "--n-iter", 15, "--seed", 0,
                         "--reg", "0,0.1,0.1", "--learning-rate", 0.05, "--model", model,
                         "--out", pred)
    assert code == 0, err
    loaded = fmlearn.load(model)
    assert (loaded.solver, loaded.n_factors, loaded.n_iter, loaded.random_state) == (
        solver, 3, 15, 0)
    X_test, y_test = _read(files["r_test"], loaded.n_features_in_)
    expected = loaded.predict(X_test)
    # the --out file holds the model's predictions exactly (shortest round-trip floats)
    assert np.array_equal(_values(pred.read_text()), expected)
    code, out_pred, _ = run(capsys, "predict", model, files["r_test"])
    assert code == 0 and np.array_equal(_values(out_pred), expected)

    rmse = float(np.sqrt(np.mean((expected - y_test) ** 2)))
    code, out_eval, _ = run(capsys, "evaluate", model, files["r_test"], "--json")
    assert code == 0
    got = json.loads(out_eval)
    assert got["rows"] == N_TEST
    assert got["rmse"] == pytest.approx(rmse, rel=1e-12)
    assert got["mae"] == pytest.approx(np.mean(np.abs(expected - y_test)), rel=1e-12)
    # the model learned something: better than predicting the training mean
    _, y_train = _read(files["r_train"], loaded.n_features_in_)
    assert rmse < 0.8 * np.sqrt(np.mean((y_test - y_train.mean()) ** 2))

    report = _report(out)
    test_key = next(k for k in report if k.startswith("test rmse") and "average" not in k)
    assert float(report[test_key]) == pytest.approx(rmse, rel=1e-5)
    if solver == "mcmc":
        avg_key = next(k for k in report if "average of all 15 sweeps" in k)
        assert float(report[avg_key]) == pytest.approx(loaded.history_["val_avg"][-1],
                                                       rel=1e-5)


@pytest.mark.parametrize("solver", ["mcmc", "sgd"])
def test_fit_compiles_apart_and_learns_the_same_model(files, tmp_path, capsys, solver):
    # the kernels are compiled (or loaded) on a throw-away copy before the timed fit: the
    # report says so, and the model is exactly the one the Python API learns with that seed
    model = tmp_path / "m.fmz"
    code, out, err = run(capsys, "fit", files["r_train"], "--test", files["r_test"],
                         "--solver", solver, "--n-factors", 3, "--n-iter", 6, "--seed", 3,
                         "--model", model)
    assert code == 0, err
    report = _report(out)
    assert report["compiled kernels in"].endswith("s (not in the fit time)")
    assert float(report["fit time"].split()[0]) >= 0
    X, y = _read(files["r_train"], D)
    # one default everywhere: the CLI's --init-stdev is the API's "auto"
    api = fmlearn.FMRegressor(3, solver=solver, n_iter=6, random_state=3).fit(X, y)
    X_test, _ = _read(files["r_test"], D)
    assert np.array_equal(fmlearn.load(model).predict(X_test), api.predict(X_test))


def test_same_seed_same_model(files, tmp_path, capsys):
    outs = []
    for i in range(2):
        pred = tmp_path / f"p{i}.txt"
        code, _, err = run(capsys, "fit", files["r_train"], "--test", files["r_test"],
                           "--n-factors", 2, "--n-iter", 8, "--seed", 7, "--out", pred)
        assert code == 0, err
        outs.append(pred.read_text())
    assert outs[0] == outs[1]


def test_classification_round_trip(files, tmp_path, capsys):
    model, pred = tmp_path / "c.fmz", tmp_path / "p.txt"
    code, out, err = run(capsys, "fit", files["c_train"], "--test", files["c_test"], "--task",
                         "c", "--solver", "sgd", "--n-factors", 3, "--n-iter", 20, "--seed", 0,
                         "--learning-rate", 0.05, "--model", model, "--out", pred)
    assert code == 0, err
    loaded = fmlearn.load(model)
    assert isinstance(loaded, fmlearn.FMClassifier)
    assert loaded.classes_.tolist() == [-1.0, 1.0]
    X_test, y_test = _read(files["c_test"], loaded.n_features_in_)
    labels = pred.read_text().split()
    assert labels == [str(int(v)) for v in loaded.predict(X_test)]  # labels, printed as ints

    code, out_proba, _ = run(capsys, "predict", model, files["c_test"], "--proba")
    proba = loaded.predict_proba(X_test)
    assert code == 0 and np.array_equal(_values(out_proba), proba[:, 1])

    code, out_eval, _ = run(capsys, "evaluate", model, files["c_test"], "--json")
    got = json.loads(out_eval)
    assert got["error_rate"] == pytest.approx(np.mean(loaded.predict(X_test) != y_test))
    assert got["auc"] == pytest.approx(metrics.roc_auc_score(y_test, proba[:, 1]))
    assert got["log_loss"] == pytest.approx(metrics.log_loss(y_test, proba))
    assert got["error_rate"] < 0.4  # majority class is ~0.5 by construction

    code, out_text, _ = run(capsys, "evaluate", model, files["c_test"])
    assert code == 0 and set(_report(out_text)) == {"rows", "error_rate", "auc", "log_loss"}


def test_verbose_table_and_log(files, tmp_path, capsys):
    log = tmp_path / "log.tsv"
    code, out, err = run(capsys, "fit", files["r_train"], "--test", files["r_test"],
                         "--solver", "mcmc", "--n-factors", 2, "--n-iter", 6, "--seed", 0,
                         "--log", log, "--verbose")
    assert code == 0, err
    rows = [line.split("\t") for line in log.read_text().splitlines()]
    assert rows[0] == ["iter", "train", "test", "test_avg"]
    assert [int(r[0]) for r in rows[1:]] == list(range(6))
    assert all(np.isfinite(float(v)) for r in rows[1:] for v in r[1:])
    assert "test avg" in out.splitlines()[0]


# -- libFM flags ----------------------------------------------------------------------------
def test_libfm_flags_equal_native_options(files, tmp_path, capsys):
    libfm_pred, native_pred = tmp_path / "libfm.txt", tmp_path / "native.txt"
    libfm_model = tmp_path / "libfm.fmz"
    code, out, err = run(capsys, "fit", "-task", "r", "-method", "als", "-dim", "1,1,3",
                         "-iter", 9, "-train", files["r_train"], "-test", files["r_test"],
                         "-out", libfm_pred, "-init_stdev", 0.05, "-regular", "0,0.2,0.3",
                         "-learn_rate", 0.02, "-seed", 3, "-verbosity", 0,
                         "-save_model", libfm_model)
    assert code == 0, err
    iter_lines = [line for line in out.splitlines() if line.startswith("#Iter=")]
    assert len(iter_lines) == 9 and "Test=" in iter_lines[-1]
    code, _, err = run(capsys, "fit", files["r_train"], "--test", files["r_test"], "--task",
                       "r", "--solver", "als", "--n-factors", 3, "--n-iter", 9, "--init-stdev",
                       0.05, "--reg", "0,0.2,0.3", "--learning-rate", 0.02, "--seed", 3,
                       "--out", native_pred)
    assert code == 0, err
    assert libfm_pred.read_text() == native_pred.read_text()
    params = fmlearn.load(libfm_model).get_params()
    assert (params["reg_bias"], params["reg_linear"], params["reg_pairwise"]) == (0, 0.2, 0.3)
    assert (params["init_stdev"], params["learning_rate"]) == (0.05, 0.02)


def test_init_stdev_default_is_the_estimators_but_libfm_mode_keeps_libfms(files, tmp_path,
                                                                          capsys):
    # native fit: FMRegressor's "auto" (resolved from the data, not libFM's 0.1); libFM-flag
    # mode: libFM's own -init_stdev 0.1; both said in --help
    native, libfm, auto = tmp_path / "n.fmz", tmp_path / "l.fmz", tmp_path / "a.fmz"
    common = ["--solver", "als", "--n-factors", 3, "--n-iter", 4, "--seed", 1]
    assert run(capsys, "fit", files["r_train"], *common, "--save", native)[0] == 0
    assert run(capsys, "fit", files["r_train"], *common, "--init-stdev", "auto",
               "--save", auto)[0] == 0
    code, _, err = run(capsys, "-task", "r", "-method", "als", "-dim", "1,1,3", "-iter", 4,
                       "-train", files["r_train"], "-seed", 1, "-save_model", libfm)
    assert code == 0, err
    X, y = _read(files["r_train"], D)
    api = fmlearn.FMRegressor(3, solver="als", n_iter=4, random_state=1).fit(X, y)
    assert api.init_stdev_ != 0.1
    for path in (native, auto):
        model = fmlearn.load(path)
        assert model.get_params()["init_stdev"] == "auto"
        assert model.init_stdev_ == api.init_stdev_
        assert np.array_equal(model.predict(X), api.predict(X))
    model = fmlearn.load(libfm)
    assert model.get_params()["init_stdev"] == 0.1 and model.init_stdev_ == 0.1
    code, out, _ = run(capsys, "fit", "--help")
    help_text = " ".join(out.split())
    assert "default auto" in help_text and "keeps libFM's -init_stdev 0.1" in help_text


@pytest.mark.parametrize("solver, reg", [("mcmc", None), ("als", "0,0.1,0.2,1,2")])
def test_libfm_meta_equals_groups_option_and_the_estimator(files, tmp_path, capsys, solver,
                                                           reg):
    meta = tmp_path / "groups.txt"
    group = [0] * 5 + [1] * (D - 5)
    meta.write_text("\n".join(map(str, group)) + "\n")
    preds = [tmp_path / "libfm.txt", tmp_path / "native.txt"]
    model = tmp_path / "m.fmz"
    regs = ["-regular", reg] if reg else []
    code, _, err = run(capsys, "fit", "-task", "r", "-method", solver, "-dim", "1,1,2",
                       "-iter", 8, "-train", files["r_train"], "-test", files["r_test"],
                       "-meta", meta, "-seed", 2, "-out", preds[0], "-save_model", model,
                       *regs)
    assert code == 0, err
    # libFM mode keeps libFM's -init_stdev 0.1; native fit defaults to "auto"
    code, _, err = run(capsys, "fit", files["r_train"], "--test", files["r_test"], "--solver",
                       solver, "--n-factors", 2, "--n-iter", 8, "--groups", meta, "--seed", 2,
                       "--init-stdev", 0.1, "--out", preds[1], *(["--reg", reg] if reg else []))
    assert code == 0, err
    assert preds[0].read_text() == preds[1].read_text()
    est = fmlearn.load(model)
    assert list(est.groups) == group
    if solver == "als":
        assert list(est.reg_linear) == [0.1, 0.2] and list(est.reg_pairwise) == [1, 2]
    X, y = _read(files["r_train"], D)
    X_test, _ = _read(files["r_test"], D)
    direct = fmlearn.FMRegressor(**est.get_params()).fit(X, y)
    np.testing.assert_allclose(_values(preds[1].read_text()), direct.predict(X_test),
                               rtol=1e-6)


@pytest.mark.parametrize("content, words", [
    ("0\n1\n", "2 group ids, but the data have 10 features"),
    ("0\nx\n", "line 2"),
    ("0\n-1\n", "must be >= 0"),
])
def test_bad_groups_file(files, tmp_path, capsys, content, words):
    meta = tmp_path / "groups.txt"
    meta.write_text(content)
    code, _, err = run(capsys, "fit", files["r_train"], "--groups", meta)
    _assert_clean_error(code, err, words)


@pytest.mark.parametrize("prefix", [["libfm"], [], ["fit"]])
def test_libfm_entry_points(files, tmp_path, capsys, prefix):
    model = tmp_path / "m.fmz"
    code, out, err = run(capsys, *prefix, "-task", "r", "-train", files["r_train"], "-test",
                         files["r_test"], "-dim", "1,1,2", "-iter", 4, "-method", "sgd",
                         "-regular", 0.5, "-seed", 1, "-save_model", model)
    assert code == 0, err
    assert out.count("#Iter=") == 4
    params = fmlearn.load(model).get_params()
    # one -regular value applies to all three terms, as in libFM
    assert params["reg_bias"] == params["reg_linear"] == params["reg_pairwise"] == 0.5


def test_libfm_classification_writes_probabilities(files, tmp_path, capsys):
    pred, model = tmp_path / "p.txt", tmp_path / "m.fmz"
    code, out, err = run(capsys, "-task", "c", "-method", "mcmc", "-dim", "1,1,2", "-iter", 10,
                         "-train", files["c_train"], "-test", files["c_test"], "-out", pred,
                         "-seed", 0, "-save_model", model)
    assert code == 0, err
    loaded = fmlearn.load(model)
    X_test, _ = _read(files["c_test"], loaded.n_features_in_)
    p = _values(pred.read_text())
    assert np.array_equal(p, loaded.predict_proba(X_test)[:, 1])
    assert np.all((p > 0) & (p < 1))
    # libFM prints accuracies on its iteration lines
    acc = [float(line.split("Test=")[1]) for line in out.splitlines() if "Test=" in line]
    assert acc[-1] == pytest.approx(1 - loaded.history_["val_avg"][-1], abs=1e-6)


@pytest.mark.parametrize("argv, words", [
    (["-dim", "0,1,8"], "global bias"),
    (["-dim", "1,0,8"], "linear terms"),
    (["-dim", "1,1"], "three integers"),
    (["-method", "sgda"], "sgda"),
    (["-method", "bpr"], "unknown libFM method"),
    (["-meta", "no-such-groups.txt"], "cannot read the groups file"),
    (["-relation", "rel"], "neither rel.x nor rel.xt"),
    (["-load_model", "m.txt"], "not supported"),
    (["-iter"], "needs a value"),
])
def test_libfm_flags_that_cannot_be_honoured(files, capsys, argv, words):
    code, out, err = run(capsys, "-task", "r", "-train", files["r_train"], *argv)
    assert code == 2
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


# -- errors ---------------------------------------------------------------------------------
def _assert_clean_error(code, err, *words):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fmlearn: error:"), err
    for w in words:
        assert w in lines[0]


def test_missing_training_file(tmp_path, capsys):
    code, _, err = run(capsys, "fit", tmp_path / "nope.libfm")
    _assert_clean_error(code, err, "not found", "nope.libfm")


@pytest.mark.parametrize("content", ["1 1:2 x\n", "1 a:2\n", "abc 1:1\n", "1 3:1 2:1\n"])
def test_malformed_svmlight_file(tmp_path, capsys, content):
    bad = tmp_path / "bad.libfm"
    bad.write_text("1 0:1 1:2\n" + content)
    code, _, err = run(capsys, "fit", bad)
    _assert_clean_error(code, err, "bad.libfm", "malformed", "line 2")


def test_model_file_errors(files, tmp_path, capsys):
    garbage = tmp_path / "g.fmz"
    garbage.write_bytes(b"not a model")
    for cmd in ("predict", "evaluate"):
        code, _, err = run(capsys, cmd, garbage, files["r_test"])
        _assert_clean_error(code, err, "g.fmz", "not an fmlearn model file")
        code, _, err = run(capsys, cmd, tmp_path / "missing.fmz", files["r_test"])
        _assert_clean_error(code, err, "model file not found")


@pytest.fixture(scope="module")
def small_model(files, tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "m.fmz"
    assert main(["fit", files["r_train"], "--solver", "als", "--n-factors", "2", "--n-iter", "3",
                 "--model", str(path)]) == 0
    return path


def test_feature_count_mismatch(small_model, tmp_path, capsys):
    wide = tmp_path / "wide.libfm"
    wide.write_text(f"1 0:1 {D + 5}:1\n")
    for cmd in ("predict", "evaluate"):
        code, _, err = run(capsys, cmd, small_model, wide)
        _assert_clean_error(code, err, "feature count mismatch", "wide.libfm")
    narrow = tmp_path / "narrow.libfm"  # fewer features is fine: columns are appended
    narrow.write_text("1 0:1\n2 1:1\n")
    code, out, _ = run(capsys, "predict", small_model, narrow)
    assert code == 0 and len(out.split()) == 2


def test_option_errors(files, small_model, tmp_path, capsys):
    code, _, err = run(capsys, "fit", files["r_train"], "--out", tmp_path / "p.txt")
    _assert_clean_error(code, err, "--test")
    code, _, err = run(capsys, "predict", small_model, files["r_test"], "--proba")
    _assert_clean_error(code, err, "classifier")
    code, _, err = run(capsys, "evaluate", small_model, files["c_test"] + ".missing")
    _assert_clean_error(code, err, "not found")
    code, _, err = run(capsys, "fit")
    _assert_clean_error(code, err, "training file")
    code, _, err = run(capsys, "fit", files["r_train"], "--reg", "1,2")  # argparse usage error
    assert code == 2 and "--reg" in err
    code, _, err = run(capsys, "fit", files["r_train"], "--task", "c")  # non-binary labels
    _assert_clean_error(code, err, "label")


def test_labels_unknown_to_the_model(files, tmp_path, capsys):
    model = tmp_path / "c.fmz"
    assert main(["fit", files["c_train"], "--task", "c", "--solver", "als", "--n-iter", "2",
                 "--model", str(model)]) == 0
    code, _, err = run(capsys, "evaluate", model, files["r_test"])
    _assert_clean_error(code, err, "not among the model's classes")


@pytest.mark.parametrize("exc, status, words", [
    (fmlearn.exceptions.DivergenceError("SGD diverged at epoch 3; lower the learning rate"), 2,
     ["fmlearn: error:", "diverged at epoch 3"]),
    (RuntimeError("boom"), 1, ["fmlearn: internal error: RuntimeError: boom", "--debug"]),
])
def test_solver_failures_exit_cleanly(files, capsys, monkeypatch, exc, status, words):
    def failing_fit(self, *args, **kwargs):
        raise exc

    monkeypatch.setattr(fmlearn.FMRegressor, "fit", failing_fit)
    code, _, err = run(capsys, "fit", files["r_train"])
    assert code == status
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    for w in words:
        assert w in err


def test_warnings_are_one_line(files, capsys, monkeypatch):
    import warnings

    real_fit = fmlearn.FMRegressor.fit

    def warning_fit(self, *args, **kwargs):
        warnings.warn("did not converge\n  try more iterations",
                      fmlearn.exceptions.ConvergenceWarning, stacklevel=2)
        return real_fit(self, *args, **kwargs)

    monkeypatch.setattr(fmlearn.FMRegressor, "fit", warning_fit)
    code, _, err = run(capsys, "fit", files["r_train"], "--solver", "als", "--n-iter", 2)
    assert code == 0
    assert err.strip() == "fmlearn: warning: did not converge try more iterations"


def test_debug_shows_the_exception(tmp_path):
    with pytest.raises(Exception, match="not found"):
        main(["fit", str(tmp_path / "nope.libfm"), "--debug"])


def test_help_and_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and fmlearn.__version__ in out
    code, out, _ = run(capsys, "fit", "--help")
    assert code == 0 and "--n-iter" in out and "-dim" in out


# -- demo and reproduce ---------------------------------------------------------------------
def test_demo_quick(capsys):
    code, out, err = run(capsys, "demo", "--quick")
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()
            if line.split()[:1] and line.split()[0] in ("fm", "fm-sign", "ratings")
            and len(line.split()) == 9]
    assert {(r[0], r[2]) for r in rows} == {(t, s) for t in ("fm", "fm-sign", "ratings")
                                            for s in ("mcmc", "als", "sgd")}
    for data, _, solver, _, test, baseline, planted, _, _ in rows:
        # every model beats the trivial baseline and none beats the planted model
        assert float(planted) <= float(test) < float(baseline), (data, solver)


@pytest.fixture
def fake_experiment(monkeypatch):
    module = types.ModuleType("fmlearn_fake_experiment")
    calls = []

    def run_experiment(out_dir, quick=False):
        calls.append((out_dir, quick))
        print(reproduce.format_table([["a", 1.5]], ["name", "value"]))
        plt = reproduce.pyplot()
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        reproduce.save_figure(fig, out_dir, "fake.png")

    module.run = run_experiment
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(reproduce.REGISTRY, "fake-exp",
                        reproduce.Experiment(module.__name__, "a fake experiment for tests"))
    return calls


def test_reproduce_runs_a_registered_experiment(fake_experiment, tmp_path, capsys):
    code, out, _ = run(capsys, "reproduce", "--list")
    assert code == 0 and "fake-exp" in out and "a fake experiment for tests" in out
    out_dir = tmp_path / "out"
    code, out, err = run(capsys, "reproduce", "fake-exp", "--out", out_dir, "--quick")
    assert code == 0, err
    assert fake_experiment == [(str(out_dir), True)]
    assert "1.5000" in out
    assert (out_dir / "fake.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_reproduce_errors(fake_experiment, capsys):
    code, _, err = run(capsys, "reproduce", "fake-exq")
    _assert_clean_error(code, err, "unknown experiment", "did you mean fake-exp")
    code, _, err = run(capsys, "reproduce")
    _assert_clean_error(code, err, "--list")


def test_registry_entries_name_importable_modules():
    # entries added by other modules must point at a module with run(out_dir, quick)
    for name in reproduce.names():
        assert callable(reproduce.load_runner(name)), name


# -- hardening: pipes, data values, model paths ---------------------------------------------
def test_closed_pipe_exits_141_quietly(files, small_model, tmp_path):
    import subprocess

    from fmlearn.datasets import save_svmlight

    rng = np.random.default_rng(3)
    big = tmp_path / "big.libfm"  # ~0.5 MB of predictions: far more than a pipe buffer
    save_svmlight(rng.normal(size=(30000, D)), np.zeros(30000), big)
    proc = subprocess.Popen([sys.executable, "-c", "from fmlearn.cli import main; "
                             "raise SystemExit(main())", "predict", str(small_model), str(big)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = [proc.stdout.readline() for _ in range(2)]  # what `| head -2` reads
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert all(float(v) == float(v) for v in first)
    assert err == b""


@pytest.mark.parametrize("token", ["nan", "inf", "-inf", "NaN"])
def test_non_finite_tokens_are_reported_with_file_and_line(tmp_path, capsys, token):
    bad = tmp_path / "vals.libfm"
    bad.write_text(f"1 0:1 1:2\n# a comment\n2 0:{token} 1:1\n3 1:1\n")
    code, _, err = run(capsys, "fit", bad)
    _assert_clean_error(code, err, "vals.libfm", "line 3", "NaN or infinite")
    bad.write_text(f"1 0:1 1:2\n{token} 0:1\n")
    code, _, err = run(capsys, "fit", bad)
    _assert_clean_error(code, err, "vals.libfm", "line 2", "NaN or infinite")


def test_typo_feature_index_is_an_error_with_its_line(tmp_path, capsys):
    bad = tmp_path / "typo.libfm"
    bad.write_text("1 0:1 5:1\n2 3:1 12:1\n3 2:1 134217728:1\n")
    code, _, err = run(capsys, "fit", bad)
    _assert_clean_error(code, err, "typo.libfm", "line 3", "134217729 features")


def test_model_paths_that_are_not_files(files, small_model, tmp_path, capsys):
    code, _, err = run(capsys, "predict", tmp_path, files["r_test"])
    _assert_clean_error(code, err)
    code, _, err = run(capsys, "predict", "/dev/zero", files["r_test"])
    _assert_clean_error(code, err, "not a regular file")
    out = tmp_path / "no-such-folder" / "m.fmz"
    code, _, err = run(capsys, "fit", files["r_train"], "--solver", "als", "--n-iter", "1",
                       "--model", out)
    _assert_clean_error(code, err, str(out))
    assert ".fmlearn-" not in err


# -- optional outputs, live progress, --max-features -----------------------------------------
def test_online_without_matplotlib_still_saves_the_model(files, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    model, png = tmp_path / "m.fmz", tmp_path / "curve.png"
    code, out, err = run(capsys, "online", files["c_train"], "--loss", "logistic", "--model",
                         "fm", "--seed", 0, "--plot", png, "--save", model)
    assert code == 0, err
    assert "warning" in err and "curve.png not written" in err and "matplotlib" in err
    assert not png.exists()
    X, _ = _read(files["c_train"], D)
    loaded = fmlearn.load(model)
    assert loaded.n_features_in_ == D and loaded.predict(X).shape == (N_TRAIN,)
    assert f"model saved to {model}" in out


def test_online_ccfm_takes_the_estimators_defaults(files, tmp_path, capsys):
    """Without --trace-bound / --gamma-power the CLI's CCFM is the estimator's default one (the
    bound derived from the data, gamma_power 1), and fits what the API fits."""
    model = tmp_path / "m.fmz"
    code, _, err = run(capsys, "online", files["r_train"], "--model", "ccfm", "--seed", 0,
                       "--save", model)
    assert code == 0, err
    m = fmlearn.load(model)
    ref = fmlearn.CCFMRegressor(random_state=0)
    assert m.trace_bound == "auto" and m.gamma_power == ref.gamma_power
    X, y = _read(files["r_train"], D)
    ref.partial_fit(X, y)  # one batch of 10,000 rows: the whole file, as the CLI feeds it
    assert m.trace_bound_ == ref.trace_bound_
    assert np.allclose(m.predict(X), ref.predict(X), rtol=1e-10, atol=1e-10)
    code, _, err = run(capsys, "online", files["r_train"], "--model", "ccfm", "--trace-bound",
                       "-1")
    assert code == 2 and "argument --trace-bound: expected a finite number > 0" in err
    assert "Traceback" not in err


def test_reproduce_without_matplotlib_keeps_its_results(tmp_path, capsys, monkeypatch):
    module = types.ModuleType("fmlearn_fake_plotting_experiment")

    def run_experiment(out_dir, quick=False):
        print(reproduce.format_table([["a", 2.5]], ["name", "value"]))
        plt = reproduce.optional_pyplot("fake.png")
        if plt is None:
            return
        fig, _ = plt.subplots()
        reproduce.save_figure(fig, out_dir, "fake.png")

    module.run = run_experiment
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(reproduce.REGISTRY, "fake-plot",
                        reproduce.Experiment(module.__name__, "plots"))
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, out, err = run(capsys, "reproduce", "fake-plot", "--out", tmp_path / "o")
    assert code == 0, err
    assert "2.5000" in out and "fake.png not written" in err and "matplotlib" in err
    assert not (tmp_path / "o" / "fake.png").exists()


class _Recorder:
    """A stdout that records each write with the state of the fit at that moment."""

    def __init__(self, state):
        self.state, self.writes = state, []

    def write(self, text):
        self.writes.append((text, dict(self.state)))
        return len(text)

    def flush(self):
        pass

    def iter_lines(self):
        return [(t, s) for t, s in self.writes if "#Iter=" in t]


@pytest.mark.parametrize("solver", ["mcmc", "als", "sgd"])
def test_libfm_lines_arrive_while_fitting(files, monkeypatch, solver):
    state = {"in_fit": False}
    original = fmlearn.FMRegressor.fit

    def fit(self, *args, **kwargs):
        state["in_fit"] = True
        try:
            return original(self, *args, **kwargs)
        finally:
            state["in_fit"] = False

    monkeypatch.setattr(fmlearn.FMRegressor, "fit", fit)
    rec = _Recorder(state)
    monkeypatch.setattr(sys, "stdout", rec)
    code = main(["-task", "r", "-method", solver, "-dim", "1,1,2", "-iter", "5", "-train",
                 files["r_train"], "-test", files["r_test"], "-seed", "0"])
    assert code == 0
    lines = rec.iter_lines()
    # one line per iteration, each written before fit returned (the compile-only fit on a few
    # rows runs first and prints nothing)
    assert [t.split()[0] for t, _ in lines] == [f"#Iter={i:3d}".split()[0] for i in range(5)]
    assert all(s["in_fit"] for _, s in lines)
    assert all("Train=" in t and "Test=" in t for t, _ in lines)


def test_libfm_lines_arrive_between_streamed_epochs(files, monkeypatch):
    state = {"calls": 0}
    original = fmlearn.FMRegressor.partial_fit

    def partial_fit(self, *args, **kwargs):
        state["calls"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(fmlearn.FMRegressor, "partial_fit", partial_fit)
    rec = _Recorder(state)
    monkeypatch.setattr(sys, "stdout", rec)
    code = main(["fit", files["r_train"], "--test", files["r_test"], "--solver", "sgd",
                 "--stream", "--batch-size", "40", "--n-iter", "3", "--seed", "0",
                 "--libfm-output"])
    assert code == 0
    calls = [s["calls"] for _, s in rec.iter_lines()]
    # 160 rows in batches of 40: each epoch's line comes after its 4 calls, before the next
    assert calls == [4, 8, 12] and state["calls"] == 12


def test_max_features_option(files, small_model, tmp_path, capsys):
    wide = tmp_path / "outlier.libfm"
    wide.write_text("1 0:1 1:1\n2 1:1 69999:1\n")
    code, _, err = run(capsys, "fit", wide, "--solver", "als", "--n-iter", 1)
    _assert_clean_error(code, err, "outlier.libfm", "line 2", "max_features")
    code, out, err = run(capsys, "fit", wide, "--solver", "als", "--n-iter", 1, "--n-factors",
                         1, "--max-features", 70000)
    assert code == 0, err
    assert "70000 features" in out
    for argv in (["fit", wide], ["online", wide], ["predict", small_model, wide],
                 ["evaluate", small_model, wide]):
        code, _, err = run(capsys, *argv, "--max-features", 100)
        _assert_clean_error(code, err, "outlier.libfm", "line 2", "max_features=100")
    code, _, err = run(capsys, "fit", wide, "--max-features", 0)
    assert code == 2 and "--max-features" in err
