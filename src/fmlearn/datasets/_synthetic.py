"""Generic synthetic data with a planted second-order factorization machine.

Both generators return the planted truth ``(w0, w, V)`` next to the data, so that tests can
check a solver's recovery and an oracle can recompute the noiseless scores:

    f(x) = w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l                    (Rendle 2010, Eq. 1)

The generators of the seed papers' experiments (gFM, CFM, sensing) live in their own modules.
"""

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from ._movielens import user_item_onehot

_COUNT = [Interval(Integral, 1, None, closed="left")]
_NONNEG = [Interval(Real, 0, None, closed="left")]


def _checked(**constraints):
    # scikit-learn's parameter validation of a public generator (its errors name the argument)
    return validate_params(constraints, prefer_skip_nested_validation=True)


def fm_scores(X, w0, w, V):
    """Noiseless FM scores ``f(x_i)`` of the rows of ``X`` (dense or sparse), in float64.

    Uses the O(nnz k) identity ``sum_{j<l} <v_j, v_l> x_j x_l = 1/2 sum_f ((XV)_f^2 -
    (X^2 V^2)_f)`` (Rendle 2010, Lemma 3.1).
    """
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64)
        X2 = X.multiply(X)
    else:
        X = np.asarray(X, dtype=np.float64)
        X2 = X * X
    XV = np.asarray(X @ V)
    pair = 0.5 * (np.sum(XV * XV, axis=1) - np.asarray(X2 @ (V * V)).sum(axis=1))
    return w0 + np.asarray(X @ w).ravel() + pair


@_checked(n_samples=_COUNT, n_features=_COUNT, n_factors=_COUNT,
          x=[StrOptions({"gaussian", "onehot", "sparse"})], n_fields=_COUNT,
          density=[Interval(Real, 0, 1, closed="right")], noise=_NONNEG,
          task=[StrOptions({"regression", "classification"})], w_scale=[*_NONNEG, None],
          v_scale=[*_NONNEG, None], random_state=["random_state"])
def make_fm(
    n_samples=1000,
    n_features=20,
    n_factors=4,
    *,
    x="gaussian",
    n_fields=2,
    density=0.1,
    noise=0.1,
    task="regression",
    w_scale=None,
    v_scale=None,
    random_state=None,
):
    """Data from a planted classic factorization machine.

    ``y = f(x) + noise * e`` (regression) or ``y = sign(f(x) + noise * e)`` (classification,
    labels -1 / +1, a tie counts as +1), with ``e`` standard normal and

        f(x) = w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l          (Rendle 2010, Eq. 1)

    ``w0 ~ N(0, 0.5^2)``, ``w_j ~ N(0, w_scale^2)``, ``V_jf ~ N(0, v_scale^2)``. By default the
    scales make the linear part and the pairwise part each of variance about 1 whatever the
    shape: ``w_scale = 1 / sqrt(m)`` and ``v_scale = (k P)^(-1/4)``, with ``m`` the expected
    number of nonzeros of a row and ``P`` the expected number of nonzero pairs in it.

    Parameters
    ----------
    n_samples, n_features, n_factors : int, default=1000, 20, 4
        Rows, columns (``d``) and rank ``k`` of ``V`` (shape ``(d, k)``).
    x : {"gaussian", "onehot", "sparse"}, default="gaussian"
        How rows are drawn. ``"gaussian"``: dense, i.i.d. N(0, 1) entries (returned as an
        ndarray). ``"onehot"``: the columns are cut into ``n_fields`` contiguous fields of
        near-equal size and each row has one 1 per field, drawn uniformly (a categorical
        design like user x item; CSR). ``"sparse"``: each entry is nonzero with probability
        ``density``, with N(0, 1) values (CSR; a row may be empty).
    n_fields : int, default=2
        Fields of the one-hot design (``n_fields <= n_features``).
    density : float in (0, 1], default=0.1
        Fraction of nonzeros of the sparse design.
    noise : float, default=0.1
        Standard deviation of the Gaussian noise added to ``f(x)``. With ``noise=0``, ``y`` is
        exactly ``f(x)`` (regression) or ``sign(f(x))`` (classification). The same
        ``random_state`` gives the same ``X`` and truth whatever ``noise``.
    task : {"regression", "classification"}, default="regression"
    w_scale, v_scale : float, default=None
        Standard deviations of ``w`` and ``V`` (``None``: the defaults above).
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    X : ndarray or csr_matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), float64 (regression) or int64 in {-1, +1}
    truth : :class:`sklearn.utils.Bunch`
        Like every planted-model generator of :mod:`fmlearn.datasets`, which return ``X, y,
        truth``; its fields:

        - ``w0`` : float
        - ``w`` : ndarray of shape (n_features,)
        - ``V`` : ndarray of shape (n_features, n_factors)
        - ``scores`` : ndarray of shape (n_samples,)
          The noiseless ``f(x_i)``.

    References
    ----------
    S. Rendle, "Factorization Machines", ICDM 2010, Eq. 1 and Lemma 3.1.

    Examples
    --------
    >>> from fmlearn.datasets import make_fm
    >>> X, y, truth = make_fm(200, 10, 3, noise=0.0, random_state=0)
    >>> X.shape, truth.V.shape
    ((200, 10), (10, 3))
    >>> bool(abs(y - truth.scores).max() == 0.0)
    True
    """
    n, d, k = n_samples, n_features, n_factors
    rs = check_random_state(random_state)
    if x == "gaussian":
        X = rs.standard_normal((n, d))
        nnz, pairs = d, d * (d - 1) / 2
    elif x == "onehot":
        if n_fields > d:
            raise ValueError(f"n_fields={n_fields} must be <= n_features={d} for x='onehot'")
        bounds = np.linspace(0, d, n_fields + 1).round().astype(np.int64)
        sizes = np.diff(bounds)
        cols = bounds[:-1] + (rs.random_sample((n, n_fields)) * sizes).astype(np.int64)
        indptr = np.arange(0, n * n_fields + 1, n_fields, dtype=np.int64)
        X = sp.csr_matrix(
            (np.ones(n * n_fields), cols.ravel().astype(np.int32), indptr), shape=(n, d)
        )
        nnz, pairs = n_fields, n_fields * (n_fields - 1) / 2
    else:
        # Bernoulli(density) pattern drawn in row blocks of about a million entries, to bound
        # the memory of the dense mask.
        blocks, block = [], max(1, (1 << 20) // d)
        for start in range(0, n, block):
            mask = rs.random_sample((min(block, n - start), d)) < density
            values = np.zeros(mask.shape)
            values[mask] = rs.standard_normal(int(mask.sum()))
            blocks.append(sp.csr_matrix(values))
        X = sp.vstack(blocks, format="csr")
        nnz, pairs = density * d, (density * d) ** 2 / 2
    if w_scale is None:
        w_scale = 1.0 / np.sqrt(max(nnz, 1.0))
    if v_scale is None:
        v_scale = (k * max(pairs, 1.0)) ** -0.25
    w0 = float(rs.normal(0.0, 0.5))
    w = rs.normal(0.0, w_scale, size=d)
    V = rs.normal(0.0, v_scale, size=(d, k))
    e = rs.standard_normal(n)
    scores = fm_scores(X, w0, w, V)
    if task == "regression":
        y = scores + noise * e if noise else scores.copy()
    else:
        y = np.where(scores + noise * e >= 0, 1, -1).astype(np.int64)
    return X, y, Bunch(w0=w0, w=w, V=V, scores=scores)


# Spread of the planted rating model: a MovieLens-like mean and rating spread (about 1.1).
_MEAN, _USER_SD, _ITEM_SD, _INTERACTION_SD = 3.5, 0.4, 0.5, 0.6


@_checked(n_users=_COUNT, n_items=_COUNT, n_ratings=_COUNT, rank=_COUNT, noise=_NONNEG,
          integer_ratings=["boolean"], unique_pairs=["boolean"], random_state=["random_state"])
def make_recommendation(
    n_users=200,
    n_items=150,
    n_ratings=10000,
    *,
    rank=4,
    noise=0.5,
    integer_ratings=True,
    unique_pairs=True,
    random_state=None,
):
    """A small MovieLens-like rating set from a planted biases + low-rank model.

    Each rating is a (user, item) pair drawn uniformly (distinct pairs unless
    ``unique_pairs=False``) with

        r(u, i) = clip(round(w0 + b_u + c_i + <p_u, q_i> + noise * e), 1, 5)

    (no rounding if ``integer_ratings=False``), ``w0 = 3.5``, ``b_u ~ N(0, 0.4^2)``,
    ``c_i ~ N(0, 0.5^2)``, ``p_u, q_i ~ N(0, s^2 I_rank)`` with ``s = (0.36 / rank)^(1/4)``
    (so ``<p_u, q_i>`` has standard deviation 0.6) and ``e`` standard normal. The rows are
    one-hot user + item vectors as in :func:`load_movielens_100k`, and the model is exactly
    the factorization machine ``w = [b; c]``, ``V = [P; Q]`` on them (the only active pair of
    a row is its user and its item). Generation is instantaneous and offline.

    Parameters
    ----------
    n_users, n_items : int, default=200, 150
        The design has ``n_users + n_items`` columns, users first, whether or not every user
        and item got a rating.
    n_ratings : int, default=10000
        Rows. With ``unique_pairs=True`` at most ``n_users * n_items``.
    rank : int, default=4
    noise : float, default=0.5
        Standard deviation of ``e``. The same ``random_state`` gives the same pairs and truth
        whatever ``noise``.
    integer_ratings : bool, default=True
        Round to the integers 1..5 like MovieLens; otherwise real values in [1, 5].
    unique_pairs : bool, default=True
        Rate each (user, item) pair at most once. ``False`` samples pairs with replacement,
        for larger sets (e.g. millions of rows for timing).
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    data : :class:`sklearn.utils.Bunch` with

        - ``X`` : csr_matrix of shape (n_ratings, n_users + n_items)
        - ``y`` : ndarray of shape (n_ratings,), float64 in [1, 5]
        - ``user_ids``, ``item_ids`` : int64 ndarrays of shape (n_ratings,)
          1-based ids (column ``user_id - 1`` and ``n_users + item_id - 1``).
        - ``feature_names`` : ndarray of str objects, ``"user=<id>"`` then ``"item=<id>"``
        - ``n_users``, ``n_items`` : int
        - ``w0`` : float
        - ``w`` : ndarray of shape (n_users + n_items,), the biases ``[b; c]``
        - ``V`` : ndarray of shape (n_users + n_items, rank), the factors ``[P; Q]``
        - ``scores`` : ndarray of shape (n_ratings,)
          The noiseless, unclipped ``f(x)``: ``y == clip(round(scores), 1, 5)`` when
          ``noise=0``.

    Examples
    --------
    >>> from fmlearn.datasets import make_recommendation
    >>> data = make_recommendation(random_state=0)
    >>> data.X.shape, sorted(set(data.y.tolist()))
    ((10000, 350), [1.0, 2.0, 3.0, 4.0, 5.0])
    """
    if unique_pairs and n_ratings > n_users * n_items:
        raise ValueError(
            f"n_ratings={n_ratings} exceeds the n_users * n_items = {n_users * n_items} "
            f"distinct pairs; pass unique_pairs=False to sample pairs with replacement"
        )
    rs = check_random_state(random_state)
    cell = rs.choice(n_users * n_items, size=n_ratings, replace=not unique_pairs)
    user, item = np.divmod(cell, n_items)
    s = (_INTERACTION_SD**2 / rank) ** 0.25
    w = np.concatenate([rs.normal(0.0, _USER_SD, n_users), rs.normal(0.0, _ITEM_SD, n_items)])
    V = rs.normal(0.0, s, size=(n_users + n_items, rank))
    e = rs.standard_normal(n_ratings)
    w0 = _MEAN
    scores = w0 + w[user] + w[n_users + item] + np.einsum("ij,ij->i", V[user], V[n_users + item])
    y = scores + noise * e if noise else scores.copy()
    if integer_ratings:
        y = np.rint(y)
    y = np.clip(y, 1.0, 5.0)
    names = [f"user={u}" for u in range(1, n_users + 1)] + [
        f"item={i}" for i in range(1, n_items + 1)
    ]
    return Bunch(
        X=user_item_onehot(user, item, n_users, n_items),
        y=y,
        user_ids=(user + 1).astype(np.int64),
        item_ids=(item + 1).astype(np.int64),
        feature_names=np.asarray(names, dtype=object),
        n_users=int(n_users),
        n_items=int(n_items),
        w0=w0,
        w=w,
        V=V,
        scores=scores,
    )
