"""fmlearn._registry and the import structure: io.load finds every public class by name (also
when its module is not imported yet), fmlearn has no import circle (module-level and local
imports alike), and no estimator module imports another."""

import ast
import pathlib
import subprocess
import sys
import textwrap

import pytest

import fmlearn
from fmlearn._base import BaseFM
from fmlearn._registry import PUBLIC, estimator_classes

SRC = pathlib.Path(fmlearn.__file__).parent
FAMILIES = ("fmlearn.fm", "fmlearn.gfm", "fmlearn.convex", "fmlearn.online")


def _family(module):
    return next((f for f in FAMILIES if module == f or module.startswith(f + ".")), None)


def test_registry_lists_exactly_the_public_estimators():
    public = {n for n in fmlearn.__all__
              if isinstance(getattr(fmlearn, n), type) and issubclass(getattr(fmlearn, n), BaseFM)}
    assert set(PUBLIC) == public
    classes = estimator_classes()
    for name in public:
        assert classes[name] is getattr(fmlearn, name)
    assert classes.get("NoSuchEstimator") is None


def test_load_imports_the_estimator_module_on_demand(tmp_path):
    # A fresh process where the estimator module is not imported (removed after the package
    # import) still loads the model: the registry imports "module:Class" on first use.
    path = tmp_path / "m.fmz"
    code = textwrap.dedent(f"""
        import sys
        import numpy as np
        import fmlearn
        X = np.random.default_rng(0).standard_normal((400, 4)); y = X[:, 0] * X[:, 1]
        fmlearn.IFMRegressor(2, random_state=0).fit(X, y).save({str(path)!r})
        import fmlearn._registry as r
        for m in [m for m in sys.modules if m in ("fmlearn.ifm", "fmlearn.gfm.ifm")]:
            del sys.modules[m]
        r._DEFINED.clear()
        from fmlearn.io import load
        m = load({str(path)!r})
        assert type(m).__module__ == "fmlearn.ifm" and "fmlearn.ifm" in sys.modules
        print(type(m).__name__, m.predict(X[:2]).shape)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["IFMRegressor", "(2,)"]


def _former_path(module):
    """A module named by a path it had before the family layout (``fmlearn.losses``, imported
    from its new place by ``fmlearn._MOVED``) as the module at that place."""
    for old, new in fmlearn._MOVED.items():
        if module == f"fmlearn.{old}" or module.startswith(f"fmlearn.{old}."):
            return f"fmlearn.{new}" + module[len(f"fmlearn.{old}"):]
    return module


def _module_imports():
    """{module: set of fmlearn modules it imports anywhere in its source}."""
    mods = {}
    for p in SRC.rglob("*.py"):
        parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
        pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if pkg else parts)] = (p, pkg)
    graph = {}
    for name, (p, pkg) in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if pkg else name.split(".")[:-1]
                    here = here[:len(here) - node.level + 1]
                    base = ".".join(here + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            for t in targets:
                t = _former_path(t)
                while t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != name:
                    deps.add(t)
        graph[name] = deps
    return graph


def test_no_import_circle_and_no_estimator_imports_another():
    graph = _module_imports()
    assert "fmlearn._base" in graph and "fmlearn.io" in graph
    state = {}

    def visit(v, path):
        state[v] = "open"
        for w in sorted(graph[v]):
            if state.get(w) == "open":
                pytest.fail("import circle: " + " -> ".join(path[path.index(w):] + [w]))
            if w not in state:
                visit(w, path + [w])
        state[v] = "done"

    for v in sorted(graph):
        if v not in state:
            visit(v, [v])
    for mod, deps in graph.items():  # a model family imports no other family
        family = _family(mod)
        if family is not None:
            other = {d for d in deps if _family(d) not in (None, family)}
            assert not other, (mod, other)
