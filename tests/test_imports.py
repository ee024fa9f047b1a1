"""The package's import structure: every public name imports, ``import fmlearn`` stays light,
and using one model family does not import the others (properties, checked in fresh
interpreters through ``sys.modules``; no timing)."""

import json
import subprocess
import sys

import numpy as np
import pytest

import fmlearn

HEAVY = ("numba", "dask", "distributed", "matplotlib")
OTHER_FAMILIES = ("fmlearn.online", "fmlearn.kernels.ocg", "fmlearn.kernels.online_fm",
                  "fmlearn.convex", "fmlearn.solvers.hazan", "fmlearn.gfm",
                  "fmlearn.solvers.one_pass", "fmlearn.sensing", "fmlearn.stream", "fmlearn.ffm")


def _modules_after(code):
    """The names in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    script = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_every_name_in_all_imports():
    assert "FMRegressor" in fmlearn.__all__ and "__version__" in fmlearn.__all__
    for name in fmlearn.__all__:
        assert getattr(fmlearn, name) is not None
    ns = {}
    exec(f"from fmlearn import {', '.join(n for n in fmlearn.__all__)}", ns)  # noqa: S102
    assert set(fmlearn.__all__) <= set(ns)
    # the lazy table and __all__ agree, and each name is defined where the table says
    assert set(fmlearn.__all__) == set(fmlearn._LAZY) | {"__version__"}
    for name, module in fmlearn._LAZY.items():
        defined = getattr(fmlearn, name).__module__
        assert defined == f"fmlearn.{module}" or defined.startswith(f"fmlearn.{module}."), name


def test_dir_lists_every_public_name_and_subpackage():
    listed = dir(fmlearn)
    assert set(fmlearn.__all__) <= set(listed)
    assert {"datasets", "cli", "reproduce", "distributed"} <= set(listed)


def test_submodules_are_attributes_and_unknown_names_raise():
    assert fmlearn.datasets.load_svmlight is not None
    assert fmlearn.exceptions.ModelFileError is not None
    with pytest.raises(AttributeError, match="no attribute 'FMRegresor'"):
        fmlearn.FMRegresor  # noqa: B018
    with pytest.raises(ImportError):
        exec("from fmlearn import FMRegresor", {})  # noqa: S102


def test_import_fmlearn_imports_no_heavy_dependency():
    mods = _modules_after("import fmlearn")
    assert not [m for m in HEAVY if m in mods]
    assert "sklearn" not in mods and "fmlearn.fm" not in mods


def test_classic_fm_imports_only_its_own_family():
    mods = _modules_after("from fmlearn import FMRegressor, FMClassifier")
    assert "fmlearn.fm" in mods
    assert not [m for m in ("dask", "distributed", "matplotlib") if m in mods]
    assert not [m for m in OTHER_FAMILIES if m in mods]


# what the classic FM's estimators and an ALS or MCMC fit do not need: the other solvers of
# the family (SGD, VB, ordinal, relational blocks) load when a fit uses them, and nothing of
# scikit-learn beyond its base modules, tqdm or the command line
CLASSIC_FIT_LAZY = ("fmlearn.fm.ordinal", "fmlearn.solvers.ordinal", "fmlearn.kernels.ordinal",
                    "fmlearn.solvers.vb", "fmlearn.kernels.vb", "fmlearn.solvers.sgd",
                    "fmlearn.kernels.sgd", "fmlearn.solvers.relation",
                    "fmlearn.kernels.cd_relation", "sklearn.metrics", "sklearn.model_selection",
                    "sklearn.linear_model", "tqdm", "fmlearn.cli")


@pytest.mark.parametrize("solver", ["als", "mcmc"])
def test_classic_fm_fit_imports_no_other_solver(solver):
    mods = _modules_after(
        "import numpy as np\n"
        "from fmlearn import FMRegressor\n"
        "X = np.random.default_rng(0).normal(size=(40, 4))\n"
        f"FMRegressor(2, solver={solver!r}, n_iter=3, random_state=0).fit(X, X[:, 0])"
        ".predict(X)")
    assert "fmlearn.kernels.cd" in mods
    assert not [m for m in CLASSIC_FIT_LAZY if m in mods]


def test_lazily_imported_classic_fm_names_still_resolve():
    mods = _modules_after(
        "import pickle\n"
        "from fmlearn import FMOrdinalRegressor\n"
        "from fmlearn.fm import FMOrdinalRegressor as B\n"
        "from fmlearn.fm.ordinal import FMOrdinalRegressor as C\n"
        "assert FMOrdinalRegressor is B is C\n"
        "assert type(pickle.loads(pickle.dumps(B()))) is C\n")
    assert "fmlearn.fm.ordinal" in mods
    import fmlearn.fm

    with pytest.raises(AttributeError, match="no attribute"):
        fmlearn.fm.NoSuchModel  # noqa: B018


def test_loading_a_model_and_predicting_imports_only_its_family(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5))
    y = X[:, 0] * X[:, 1]
    path = str(tmp_path / "m.fmz")
    fmlearn.FMRegressor(2, solver="als", n_iter=3, random_state=0).fit(X, y).save(path)
    mods = _modules_after(
        "import numpy as np, fmlearn\n"
        f"m = fmlearn.load({path!r})\n"
        "assert np.all(np.isfinite(m.predict(np.ones((3, 5)))))")
    assert "fmlearn.kernels.predict" in mods
    assert not [m for m in ("dask", "distributed", "matplotlib", "tqdm") if m in mods]
    assert not [m for m in OTHER_FAMILIES if m in mods]


def test_one_pass_gfm_imports_only_its_own_family():
    # the one-pass solver's row kernels are compiled (fmlearn.kernels.rows); the classic FM's
    # and the online learners' kernels are not imported
    mods = _modules_after("from fmlearn import GFMRegressor")
    assert "fmlearn.gfm" in mods
    assert not [m for m in ("fmlearn.fm", "fmlearn.kernels.cd", "fmlearn.kernels.sgd",
                            "fmlearn.online", "fmlearn.kernels.ocg", "dask", "matplotlib")
                if m in mods]


def test_former_module_paths_import_the_moved_modules():
    # fmlearn.ifm, fmlearn.sensing and fmlearn.losses moved into family packages; importing
    # them by the former path gives the same module, and the estimators keep the module path
    # that model files, pipeline files and pickles record
    mods = _modules_after(
        "import pickle\n"
        "import fmlearn.ifm, fmlearn.sensing, fmlearn.losses\n"
        "import fmlearn.gfm.ifm, fmlearn.gfm.sensing, fmlearn.kernels.losses\n"
        "assert fmlearn.ifm is fmlearn.gfm.ifm and fmlearn.sensing is fmlearn.gfm.sensing\n"
        "assert fmlearn.losses is fmlearn.kernels.losses\n"
        "from fmlearn.sensing import PhaseRetrieval\n"
        "assert PhaseRetrieval.__module__ == 'fmlearn.sensing'\n"
        "assert fmlearn.IFMRegressor.__module__ == 'fmlearn.ifm'\n"
        "blob = pickle.dumps(fmlearn.IFMRegressor(3))\n"
        "assert b'fmlearn.ifm' in blob and pickle.loads(blob).n_factors == 3\n")
    assert {"fmlearn.ifm", "fmlearn.gfm.ifm", "fmlearn.losses"} <= mods
    with pytest.raises(ModuleNotFoundError):
        import fmlearn.no_such_module  # noqa: F401
