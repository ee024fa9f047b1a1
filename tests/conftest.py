"""The test suite's layout (see README.md, "Layout").

``tests/`` mirrors ``src/fmlearn``: the model families (``fm/``, ``gfm/``, ``convex/``,
``online/``) and the layers (``kernels/``, ``solvers/``, ``distributed/``) have their own
folder; the tests of the other modules are ``test_<module>.py`` here, beside the suite-wide
properties (scikit-learn's common checks, failure atomicity, bad input, model files, docs,
imports). The helpers shared across folders live here too: ``reference.py`` (the slow NumPy
oracles), ``hardening.py``, ``contrast_cases.py``. This file makes pytest put ``tests/`` on
``sys.path`` (its folder, in the default "prepend" import mode), so a test in any folder
imports them by name; test module names stay unique across folders.
"""
