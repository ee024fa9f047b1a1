"""Planted-truth generators of the generalized-FM seeds.

* :func:`make_gfm`: y = x^T w* + x^T M* x + noise (Lin and Ye 2016, Eq. 1; Lin et al. 2019, Eq. 4)
with
  M* = Q diag(lambda) Q^T of rank k and features drawn i.i.d. from a chosen zero-mean,
  unit-variance distribution (Gaussian, or sub-Gaussian / skewed ones for Lin et al. 2019).
* :func:`make_fm_labels`: the synthetic labels of Lin et al. 2019, §4.1 (Fig. 1): conventional FM
  (M* = U U^T - diag(U U^T)), sign-flipped, and mixed-sign (M* = sym(U V^T) minus its diagonal).
* :func:`make_symmetric_sensing`, :func:`make_asymmetric_sensing`, :func:`make_phase_retrieval`:
  the rank-one matrix sensing problems of Lin and Ye 2016, §2.1.

Every generator returns ``(X, y, truth)``; ``truth`` holds the planted parameters (``w``, and
``M`` as a :class:`fmlearn.linalg.LowRankOperator`, never a dense d x d matrix) and a
``sample(n, random_state)`` method that draws fresh rows from the same model, for streams.
"""

from dataclasses import dataclass

import numpy as np
from sklearn.utils import check_random_state

from ..linalg import LowRankOperator, orthonormal_basis, symmetric_low_rank

__all__ = [
    "FEATURE_DISTRIBUTIONS",
    "PlantedModel",
    "make_asymmetric_sensing",
    "make_fm_labels",
    "make_gfm",
    "make_phase_retrieval",
    "make_symmetric_sensing",
    "sample_features",
]


def _exponential(rng, size):
    return rng.exponential(size=size) - 1.0


def _uniform(rng, size):
    return rng.uniform(-np.sqrt(3.0), np.sqrt(3.0), size=size)


def _rademacher(rng, size):
    return rng.choice(np.array([-1.0, 1.0]), size=size)


def _beta(rng, size):
    # Beta(2, 5) standardised: mildly skewed, bounded (sub-Gaussian).
    a, b = 2.0, 5.0
    mean = a / (a + b)
    sd = np.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
    return (rng.beta(a, b, size=size) - mean) / sd


def _gaussian(rng, size):
    return rng.standard_normal(size=size)


#: Zero-mean, unit-variance feature laws: name -> (sampler(rng, size), kappa = E z^3, phi = E z^4)
FEATURE_DISTRIBUTIONS = {
    "gaussian": (_gaussian, 0.0, 3.0),
    "exponential": (_exponential, 2.0, 9.0),
    "uniform": (_uniform, 0.0, 1.8),
    "rademacher": (_rademacher, 0.0, 1.0),
    "beta": (_beta, 0.5962847939999439, 2.8787878787878785),
}


def sample_features(n_samples, n_features, distribution="gaussian", random_state=None,
                    dtype=np.float64):
    """An (n, d) matrix of i.i.d. zero-mean unit-variance features.

    ``distribution`` is a name of :data:`FEATURE_DISTRIBUTIONS` or a callable
    ``f(rng, size) -> ndarray`` (a ``numpy.random.Generator`` is passed).
    """
    rng = _generator(random_state)
    if callable(distribution):
        X = np.asarray(distribution(rng, (n_samples, n_features)))
    else:
        try:
            sampler = FEATURE_DISTRIBUTIONS[distribution][0]
        except KeyError:
            raise ValueError(f"unknown distribution {distribution!r}; expected one of "
                             f"{sorted(FEATURE_DISTRIBUTIONS)} or a callable") from None
        X = sampler(rng, (n_samples, n_features))
    if X.shape != (n_samples, n_features):
        raise ValueError(f"the distribution returned shape {X.shape}, expected "
                         f"{(n_samples, n_features)}")
    return np.ascontiguousarray(X, dtype=dtype)


def _generator(random_state):
    if isinstance(random_state, np.random.Generator):
        return random_state
    rs = check_random_state(random_state)
    return np.random.default_rng(rs.randint(0, 2**31 - 1))


@dataclass
class PlantedModel:
    """Planted parameters of y = b + x^T w + x^T M x + noise (or u^T M v for asymmetric sensing).

    Attributes
    ----------
    w : ndarray of shape (d,) or None
    M : LowRankOperator
        The second-order matrix (d x d; d1 x d2 for asymmetric sensing).
    intercept : float
    noise : float
        Standard deviation of the Gaussian label noise.
    distribution : str or callable
        Feature law (see :func:`sample_features`).
    feature_scale : float
        Features are ``feature_scale`` times the standardised draws (Lin et al. 2019, §4.1:
        1/sqrt(d)).
    kind : str
        "gfm", "fm_labels", "asymmetric" or "phase_retrieval".
    n_left : int or None
        Asymmetric sensing: X = [u | v] with u the first ``n_left`` columns.
    signal : ndarray or None
        Phase retrieval: the planted x* (M = x* x*^T).
    """

    w: np.ndarray
    M: LowRankOperator
    intercept: float = 0.0
    noise: float = 0.0
    distribution: object = "gaussian"
    feature_scale: float = 1.0
    kind: str = "gfm"
    n_left: int = None
    signal: np.ndarray = None

    @property
    def n_features(self):
        return self.M.shape[0] + (self.M.shape[1] if self.kind == "asymmetric" else 0)

    def predict(self, X):
        """Noise-free labels of the rows of ``X`` (O(n d k), no d x d matrix)."""
        X = np.asarray(X, dtype=np.float64)
        M = self.M
        if self.kind == "asymmetric":
            Xu, Xv = X[:, :self.n_left], X[:, self.n_left:]
            return np.einsum("ij,ij->i", Xu @ M.L, Xv @ M.R)
        quad = np.einsum("ij,ij->i", X @ M.L, X @ M.R)
        if M.diagonal_term is not None:
            quad += (X * X) @ M.diagonal_term
        lin = X @ self.w if self.w is not None else 0.0
        return self.intercept + lin + quad

    def sample(self, n_samples, random_state=None, dtype=np.float64):
        """Draw ``(X, y)``: fresh rows from the same planted model."""
        rng = _generator(random_state)
        X = sample_features(n_samples, self.n_features, self.distribution, rng, np.float64)
        if self.feature_scale != 1.0:
            X *= self.feature_scale
        y = self.predict(X)
        if self.noise > 0:
            y = y + self.noise * rng.standard_normal(n_samples)
        return np.ascontiguousarray(X, dtype=dtype), y


def _eigenvalues(eigenvalues, k, rng):
    if isinstance(eigenvalues, str):
        mags = rng.uniform(1.0, 2.0, size=k)
        if eigenvalues == "mixed":
            return mags * np.where(np.arange(k) % 2 == 0, 1.0, -1.0)
        if eigenvalues == "positive":
            return mags
        if eigenvalues == "negative":
            return -mags
        raise ValueError(f"eigenvalues must be 'mixed', 'positive', 'negative' or an array, got "
                         f"{eigenvalues!r}")
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if lam.shape != (k,):
        raise ValueError(f"eigenvalues must have {k} entries, got shape {lam.shape}")
    return lam


def _check_sizes(n_samples, n_features, n_factors):
    if n_samples < 1 or n_features < 1 or n_factors < 1:
        raise ValueError("n_samples, n_features and n_factors must be positive")
    if n_factors > n_features:
        raise ValueError(f"n_factors={n_factors} exceeds n_features={n_features}")


def make_gfm(n_samples=1000, n_features=100, n_factors=5, *, eigenvalues="mixed", linear=True,
             intercept=0.0, noise=0.0, distribution="gaussian", truth=None, random_state=None,
             dtype=np.float64):
    """Generalized-FM data y = b + x^T w* + x^T M* x + noise (Lin and Ye 2016, Eq. 1, Lin et al.
    2019, Eq. 4).

    M* = Q diag(lambda) Q^T with Q (d, k) orthonormal and |lambda| uniform in [1, 2] ("mixed":
    alternating signs, so M* is indefinite), w* a unit vector (zero when ``linear=False``),
    features i.i.d. from ``distribution`` (zero mean, unit variance).

    Parameters
    ----------
    n_samples, n_features, n_factors : int
    eigenvalues : {"mixed", "positive", "negative"} or array of shape (k,)
    linear : bool, default=True
    intercept : float, default=0.0
    noise : float, default=0.0
        Standard deviation of Gaussian label noise.
    distribution : str or callable, default="gaussian"
        See :data:`FEATURE_DISTRIBUTIONS` ("gaussian", "exponential" (centred, skewed),
        "uniform", "rademacher", "beta").
    truth : PlantedModel, optional
        Draw new rows from this model instead of planting a new one.
    random_state : int, RandomState, Generator or None
    dtype : float dtype of X

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    truth : PlantedModel

    Examples
    --------
    >>> X, y, truth = make_gfm(500, 20, 3, random_state=0)
    >>> X.shape, truth.M.shape
    ((500, 20), (20, 20))
    >>> bool(np.allclose(y, truth.predict(X)))
    True
    """
    rng = _generator(random_state)
    if truth is None:
        _check_sizes(n_samples, n_features, n_factors)
        Q = orthonormal_basis(rng.standard_normal((n_features, n_factors)))
        lam = _eigenvalues(eigenvalues, n_factors, rng)
        w = np.zeros(n_features)
        if linear:
            w = rng.standard_normal(n_features)
            w /= np.linalg.norm(w)
        truth = PlantedModel(w, LowRankOperator(Q, Q * lam), float(intercept), float(noise),
                             distribution)
    X, y = truth.sample(n_samples, rng, dtype)
    return X, y, truth


def make_fm_labels(n_samples=15000, n_features=100, n_factors=5, *, kind="conventional",
                   noise=0.0, truth=None, random_state=None, dtype=np.float64):
    """The synthetic data of Lin et al. 2019, §4.1 (Fig. 1 a-c).

    w*, U*, V* and x have i.i.d. N(0, 1/d) entries, and y = x^T w* + x^T M* x with

    * ``"conventional"``: M* = U* U*^T - diag(U* U*^T) (the classic FM, Lin et al. 2019, Eq. 1-2);
    * ``"sign_flipped"``: the labels of "conventional" with their sign flipped;
    * ``"mixed_sign"``: M* = (U* V*^T + V* U*^T)/2 minus its diagonal, which has eigenvalues of
      both signs (rank up to 2k: an iFM needs n_factors = 2k to represent it).

    Returns ``(X, y, truth)`` with ``truth.M`` zero-diagonal.
    """
    rng = _generator(random_state)
    if truth is None:
        _check_sizes(n_samples, n_features, n_factors)
        d = n_features
        s = 1.0 / np.sqrt(d)
        w = rng.standard_normal(d) * s
        U = rng.standard_normal((d, n_factors)) * s
        if kind in ("conventional", "sign_flipped"):
            V = U
        elif kind == "mixed_sign":
            V = rng.standard_normal((d, n_factors)) * s
        else:
            raise ValueError(f"kind must be 'conventional', 'sign_flipped' or 'mixed_sign', got "
                             f"{kind!r}")
        sign = -1.0 if kind == "sign_flipped" else 1.0
        M = symmetric_low_rank(U, sign * V, zero_diagonal=True)
        truth = PlantedModel(sign * w, M, 0.0, float(noise), "gaussian", feature_scale=s,
                             kind="fm_labels")
    X, y = truth.sample(n_samples, rng, dtype)
    return X, y, truth


def make_symmetric_sensing(n_samples=1000, n_features=100, n_factors=5, *, eigenvalues="mixed",
                           noise=0.0, truth=None, random_state=None, dtype=np.float64):
    """Symmetric rank-one sensing y_i = x_i^T M* x_i + noise, x_i standard Gaussian (w* = 0;
    Lin and Ye 2016, §2.1). Same planting as :func:`make_gfm` with ``linear=False``."""
    return make_gfm(n_samples, n_features, n_factors, eigenvalues=eigenvalues, linear=False,
                    noise=noise, truth=truth, random_state=random_state, dtype=dtype)


def make_asymmetric_sensing(n_samples=1000, n_left=50, n_right=50, n_factors=5, *, noise=0.0,
                            truth=None, random_state=None, dtype=np.float64):
    """Asymmetric rank-one sensing (inductive matrix completion) y_i = u_i^T M* v_i + noise.

    u_i (d1) and v_i (d2) are independent standard Gaussian; M* = A diag(sigma) B^T with
    orthonormal A, B and sigma uniform in [1, 2]. ``X = [u | v]`` of shape (n, d1 + d2), and
    ``truth.M`` is the d1 x d2 operator.
    """
    rng = _generator(random_state)
    if truth is None:
        _check_sizes(n_samples, min(n_left, n_right), n_factors)
        A = orthonormal_basis(rng.standard_normal((n_left, n_factors)))
        B = orthonormal_basis(rng.standard_normal((n_right, n_factors)))
        sig = rng.uniform(1.0, 2.0, size=n_factors)
        truth = PlantedModel(None, LowRankOperator(A * sig, B), 0.0, float(noise), "gaussian",
                             kind="asymmetric", n_left=int(n_left))
    X, y = truth.sample(n_samples, rng, dtype)
    return X, y, truth


def make_phase_retrieval(n_samples=1000, n_features=100, *, noise=0.0, truth=None,
                         random_state=None, dtype=np.float64):
    """Phase retrieval y_i = (x_i^T x*)^2 + noise with x_i standard Gaussian and |x*| = 1
    (the rank-one case M* = x* x*^T of symmetric sensing, Lin and Ye 2016, §1)."""
    rng = _generator(random_state)
    if truth is None:
        _check_sizes(n_samples, n_features, 1)
        x = rng.standard_normal(n_features)
        x /= np.linalg.norm(x)
        truth = PlantedModel(np.zeros(n_features), LowRankOperator(x[:, None], x[:, None]), 0.0,
                             float(noise), "gaussian", kind="phase_retrieval", signal=x)
    X, y = truth.sample(n_samples, rng, dtype)
    return X, y, truth
