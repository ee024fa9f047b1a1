"""Diagnostics for the generalized FM: recovery error against a planted truth and the
moment invertibility of the features (Lin et al. 2019, Definition 2).

Both work without d x d matrices: matrix errors are spectral norms of low-rank (plus diagonal)
operators, computed by :func:`fmlearn.linalg.spectral_norm`, and moments are per-feature sums
over the rows (sparse input stays sparse).
"""

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from .linalg import LowRankOperator, as_operator, spectral_norm

__all__ = ["TAU_CAUTION", "feature_moments", "moment_invertibility", "recovery_error"]

#: Below this tau the moment-eliminating solver warns (a caution: one-pass gFM recovered the
#: diagonal on Rademacher features, tau = 0, through the low-rank structure).
TAU_CAUTION = 0.1


def _difference(M, M_true):
    """M - M_true as an operator, exactly low-rank when both are diagonal-free LowRankOperators."""
    A = as_operator(M)
    B = as_operator(M_true)
    if (isinstance(A, LowRankOperator) and isinstance(B, LowRankOperator)
            and A.shape == B.shape):
        diag = None
        if A.diagonal_term is not None or B.diagonal_term is not None:
            d = A.shape[0]
            diag = np.zeros(d)
            if A.diagonal_term is not None:
                diag = diag + A.diagonal_term
            if B.diagonal_term is not None:
                diag = diag - B.diagonal_term
        return LowRankOperator(np.hstack([A.L, -B.L]), np.hstack([A.R, B.R]), diag)
    return LinearOperator(A.shape, matvec=lambda v: A.matvec(v) - B.matvec(v),
                          rmatvec=lambda v: A.rmatvec(v) - B.rmatvec(v),
                          matmat=lambda V: A.matmat(V) - B.matmat(V),
                          rmatmat=lambda V: A.rmatmat(V) - B.rmatmat(V),
                          dtype=np.float64)


def recovery_error(w, M, w_true, M_true, *, relative=True):
    """``|w - w*|_2 + ||M - M*||_2``, divided by ``|w*|_2 + ||M*||_2`` when ``relative``.

    This is the error of Lin and Ye 2016, Theorem 1 and Lin et al. 2019, Theorem 3 (spectral norm).

    Parameters
    ----------
    w, w_true : ndarray of shape (d,) or None
        Linear terms (None: no linear term, e.g. matrix sensing).
    M, M_true : ndarray, sparse matrix or LinearOperator
        Second-order matrices; :class:`fmlearn.linalg.LowRankOperator` inputs are compared
        exactly in O(d r^2), others by Lanczos on the difference (dense for small d).

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn.linalg import symmetric_low_rank
    >>> U = np.eye(3)[:, :1]; M = symmetric_low_rank(U, 2 * U)
    >>> round(recovery_error(None, M, None, 3 * np.outer(U, U)), 4)  # |2 - 3| / 3
    0.3333
    """
    err = spectral_norm(_difference(M, M_true))
    ref = spectral_norm(M_true)
    if w is not None or w_true is not None:
        w = np.zeros(as_operator(M).shape[0]) if w is None else np.asarray(w, np.float64)
        w_true = np.zeros_like(w) if w_true is None else np.asarray(w_true, np.float64)
        err += float(np.linalg.norm(w - w_true))
        ref += float(np.linalg.norm(w_true))
    if not relative:
        return float(err)
    return float(err / ref) if ref > 0 else float(err)


def feature_moments(X, sample_weight=None):
    """Per-feature mean, standard deviation, and the third and fourth moments of the
    standardised feature (kappa = E z^3, phi = E z^4), as a dict of (d,) arrays.

    Dense or sparse X (sparse stays sparse: central moments from raw power sums). Constant
    features get std 1 and kappa = phi = 0.
    """
    from .solvers.one_pass import standardization, weighted_moments

    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64)
    else:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
    n = X.shape[0]
    if n == 0:
        raise ValueError("X has no rows")
    sw = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
    mean, scale = standardization(X, sw)
    kappa, phi = weighted_moments(X, sw, mean, scale)
    return {"mean": mean, "std": scale, "kappa": kappa, "phi": phi}


def moment_invertibility(X, sample_weight=None):
    """tau_j = |phi_j - 1 - kappa_j^2| per feature (Lin et al. 2019, Definition 2).

    The generalized FM's self-interaction M_jj is identifiable from second-order data only when
    tau_j > 0 (Lin et al. 2019, Theorem 3 needs n >~ 1/tau^2); binary features (Rademacher, one-hot)
    have tau = 0 (Lin et al. 2019, Proposition 1). Gaussian features have tau = 2, centred
    exponential tau = 4.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([rng.normal(size=20000), rng.choice([-1.0, 1.0], 20000)])
    >>> np.round(moment_invertibility(X), 1)
    array([2., 0.])
    """
    m = feature_moments(X, sample_weight)
    tau = np.abs(m["phi"] - 1.0 - m["kappa"] ** 2)
    const = m["phi"] == 0
    tau[const] = 0.0
    return tau
