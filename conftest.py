"""Settings shared by the tests and the package's doctests (``--doctest-modules``)."""

import importlib.util

import pytest

# Doctests that need an optional dependency: module -> the dependency.
_OPTIONAL_DOCTESTS = {"fmlearn._skops_io": "skops"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for module, dependency in _OPTIONAL_DOCTESTS.items():
            if (item.name.startswith(module + ".")
                    and importlib.util.find_spec(dependency) is None):
                item.add_marker(pytest.mark.skip(
                    reason=f"{dependency} is not installed (pip install 'fmlearn[{dependency}]')"))
