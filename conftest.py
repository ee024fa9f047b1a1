"""Settings shared by the tests and the package's doctests (``--doctest-modules``).

The OpenBLAS kernel in use is printed in the header (``threadpoolctl``): a run with
``OPENBLAS_CORETYPE`` set shows the kernel OpenBLAS really took (a CPU or build may map the
request to another; .ci/blas_kernels.py checks it before each of its runs).
"""

import importlib.util
import os

import pytest


def openblas_kernel():
    """The architecture OpenBLAS reports (e.g. ``"SkylakeX"``, ``"Haswell"``), or None."""
    import numpy  # noqa: F401 - loads OpenBLAS
    from threadpoolctl import threadpool_info

    for lib in threadpool_info():
        if lib.get("internal_api") == "openblas":
            return lib.get("architecture")
    return None


def pytest_report_header(config):
    wanted = os.environ.get("OPENBLAS_CORETYPE")
    return (f"OpenBLAS kernel: {openblas_kernel()} (OPENBLAS_CORETYPE="
            f"{wanted if wanted else 'unset'})")


# Doctests that need an optional dependency: module -> the dependency.
_OPTIONAL_DOCTESTS = {"fmlearn._skops_io": "skops"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for module, dependency in _OPTIONAL_DOCTESTS.items():
            if (item.name.startswith(module + ".")
                    and importlib.util.find_spec(dependency) is None):
                item.add_marker(pytest.mark.skip(
                    reason=f"{dependency} is not installed (pip install 'fmlearn[{dependency}]')"))
