"""Compiled kernels of the ranking family (numba, ``cache=True``): row utilities
(:mod:`.rows`), the sampled pairwise epoch of BPR and WARP (:mod:`.sampled`) and the implicit
coordinate descent sweep (:mod:`.icd`). They take raw CSR arrays grouped in named records and
never see a SciPy object or a string; nothing reaches them unchecked (the estimator and
:mod:`fmlearn.ranking._data` validate every array first)."""
