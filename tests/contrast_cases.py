"""Contrast matrices shared by tests/gfm/test_contrasts.py (GFM/IFM) and
tests/fm/test_fm_contrasts.py (classic FM): random double differences, and contrasts that
validation must refuse."""

import numpy as np
import scipy.sparse as sp


def double_differences(n_rows, n_targets, rng):
    """Random +1 -1 -1 +1 contrasts of four distinct rows (every row of C sums to zero)."""
    rows = np.array([rng.choice(n_rows, 4, replace=False) for _ in range(n_targets)])
    return sp.csr_matrix((np.tile([1.0, -1.0, -1.0, 1.0], n_targets), rows.ravel(),
                          np.arange(0, 4 * n_targets + 1, 4)), shape=(n_targets, n_rows))


def bad_contrast_cases(C):
    """``(C_bad, message)`` pairs refused by :func:`fmlearn._contrasts.check_contrasts` for
    ``C`` of 80 targets on X of 50 rows (``"y has 80"``: 70 targets for 80 values of y)."""
    bad = C.toarray()
    bad[3, 7] = np.nan
    return [(C[:, :40], "columns but X has 50 rows"), (C[:70], "y has 80"),
            (sp.csr_matrix(bad), "NaN"), (sp.csr_matrix((80, 50)), "reference no row"),
            (sp.csr_matrix((0, 50)), "no rows"), (np.ones(50), "2-D")]


def snapshot(est):
    """The estimator's attributes, arrays copied: compare after a failed call."""
    return {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in vars(est).items()}
