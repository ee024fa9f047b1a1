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


# --- fresh-process cost (issue 27, item 8): what importing and a first fit load -------------

# imported by neither ``import fmlearn`` nor ``from fmlearn import FMRegressor`` (nor a plain
# fit below): the optional extras, the progress bar, and scikit-learn's model-selection,
# metrics and linear-model packages
NEVER_ON_IMPORT = ("tqdm", "dask", "distributed", "matplotlib", "skops", "sklearn.metrics",
                   "sklearn.model_selection", "sklearn.linear_model", "fmlearn.cli",
                   "fmlearn.io", "fmlearn._skops_io")

# what numba's full CPU target registers (typed containers, jitclass, sets, the NumPy random
# generators, polynomials, datetimes, cffi, ...): numba's own cache imports all of it before its
# first load; fmlearn's kernels load from the cache without it (fmlearn.kernels._jit)
NUMBA_FULL_TARGET = ("numba.typed.typeddict", "numba.typed.dictimpl", "numba.typed.typedlist",
                     "numba.typed.typedset", "numba.cpython.setobj", "numba.cpython.heapq",
                     "numba.experimental.jitclass.base", "numba.np.polynomial",
                     "numba.np.random.generator_methods", "numba.np.npdatetime",
                     "numba.misc.cffiimpl", "numba.misc.gdb_hook", "numba.np.npyimpl")

_FIRST_FIT = (
    "import numpy as np\n"
    "from fmlearn import FMRegressor\n"
    "rng = np.random.default_rng(0)\n"
    "X = rng.normal(size=(60, 5))\n"
    "y = X @ rng.normal(size=5) + X[:, 0] * X[:, 1]\n"
    "pred = FMRegressor(4, n_iter=20, random_state=0).fit(X, y).predict(X)\n"
)


def test_import_then_classic_fm_loads_nothing_beyond_sklearns_base():
    mods = _modules_after("import fmlearn\nfrom fmlearn import FMRegressor")
    assert not [m for m in NEVER_ON_IMPORT if m in mods]
    # every SciPy, scikit-learn and pandas module the estimator's import loads is one that
    # scikit-learn's base modules (which every estimator subclasses) load themselves
    base = _modules_after("import sklearn.base, sklearn.utils.validation, "
                          "sklearn.utils.multiclass, scipy.sparse, scipy.special")
    extra = [m for m in mods - base if m.split(".")[0] in ("scipy", "sklearn", "pandas")]
    assert not extra


def _kernel_cache_misses():
    # how many kernel signatures the fit compiled instead of loading from numba's cache
    return ("import sys\n"
            "from numba.core.dispatcher import Dispatcher\n"
            "miss = sum(sum(v.stats.cache_misses.values()) for m in list(sys.modules.values())\n"
            "           if getattr(m, '__name__', '').startswith('fmlearn.kernels')\n"
            "           for v in vars(m).values() if isinstance(v, Dispatcher))\n")


def test_first_fit_loads_kernels_without_numbas_full_target():
    # the first run fills numba's cache if it is cold (a clean clone); the second is the fresh
    # process with a warm cache that the property is about
    _modules_after(_FIRST_FIT)
    mods = _modules_after(_FIRST_FIT + _kernel_cache_misses()
                          + "assert miss == 0, f'{miss} kernels compiled: cache not warm'\n")
    assert {"fmlearn.kernels.cd", "fmlearn.kernels.predict"} <= mods
    assert not [m for m in NUMBA_FULL_TARGET if m in mods]
    assert not [m for m in NEVER_ON_IMPORT if m in mods]


def test_kernels_loaded_without_the_full_target_give_the_same_fit():
    # a fresh process loads the kernels the light way; this one has compiled or loaded them
    # after numba's full refresh (other tests ran here): the same machine code, so bit for bit
    # the same predictions, for the default MCMC fit, ALS, SGD and a classifier
    code = ("import numpy as np, scipy.sparse as sp\n"
            "from fmlearn import FMClassifier, FMRegressor\n"
            "def fits():\n"
            "    rng = np.random.default_rng(0)\n"
            "    X = rng.normal(size=(60, 5)); y = X @ rng.normal(size=5)\n"
            "    Xs = sp.random(80, 12, density=0.3, format='csr', random_state=1)\n"
            "    ys = Xs.sum(1).A1\n"
            "    out = [FMRegressor(4, n_iter=20, random_state=0).fit(X, y).predict(X),\n"
            "           FMRegressor(4, solver='als', n_iter=5, random_state=0)\n"
            "           .fit(Xs, ys).predict(Xs),\n"
            "           FMRegressor(4, solver='sgd', n_iter=3, random_state=0)\n"
            "           .fit(X, y).predict(X),\n"
            "           FMClassifier(4, solver='als', n_iter=5, random_state=0)\n"
            "           .fit(X, y > 0).predict_proba(X)]\n"
            "    return b''.join(np.ascontiguousarray(a).tobytes() for a in out).hex()\n")
    ns = {}
    exec(code, ns)  # noqa: S102
    here = ns["fits"]()
    # then the user's own numba code compiles in that process (numba's compiler builds the
    # full target then), and the loaded kernels still give the same results
    script = code + ("first = fits()\n"
                     "import numba\n"
                     "@numba.njit\n"
                     "def user(n):\n"
                     "    return np.arange(n).sum()\n"
                     "assert user(4) == 6 and fits() == first\n"
                     "print(first)\n")
    for _ in range(2):  # the first run fills a cold cache
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             check=True).stdout
    assert out.strip().splitlines()[-1] == here


def test_fmlearn_kernels_cache_through_the_light_loader():
    from numba.core.caching import FunctionCache

    from fmlearn.kernels import _jit, cd, dedup, predict

    for kernel in (cd._coordinate_sweep, predict._samples_block, dedup.exact_square_sums):
        assert isinstance(kernel._cache, _jit._KernelCache)
        assert isinstance(kernel._cache, FunctionCache)  # numba's cache files and index

    @_jit.njit(cache=False)
    def plain(x):
        return x + 1

    assert plain(1) == 2 and not isinstance(plain._cache, FunctionCache)


def test_importing_every_public_name_compiles_or_loads_no_kernel():
    # kernels are compiled or read from numba's cache on first use, never at import (no
    # explicit signature lists, no warm-up calls in module bodies)
    script = ("import numba.core.dispatcher as D\n"
              "loaded = []\n"
              "compile = D.Dispatcher.compile\n"
              "def spy(self, sig):\n"
              "    loaded.append(self.py_func.__qualname__)\n"
              "    return compile(self, sig)\n"
              "D.Dispatcher.compile = spy\n"
              "import fmlearn\n"
              "for name in fmlearn.__all__:\n"
              "    getattr(fmlearn, name)\n"
              "import fmlearn.kernels.cd_relation, fmlearn.ffm._kernels\n"
              "print(loaded)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_every_cached_kernel_module_takes_njit_from_the_light_loader():
    # a module importing numba's own njit would cache through numba's full load again
    import re
    from pathlib import Path

    import fmlearn

    root = Path(fmlearn.__file__).parent
    own = re.compile(r"from numba import[^\n]*\bnjit\b|numba\.njit\(|\bnb\.njit\(")
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name != "_jit.py" and own.search(p.read_text())]
    assert offenders == []
