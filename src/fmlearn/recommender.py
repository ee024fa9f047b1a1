"""Top-k recommendations and embedding export for fitted factorization machines.

Every second-order model of the package predicts

    f(x) = bias + <linear, x> + 1/2 <Q^T x, K^T x> + sum_j diagonal_j x_j^2

for some per-feature vectors ``Q`` (query) and ``K`` (key) with ``Q K^T`` symmetric, whose
off-diagonal entries are the pair weights of the model (``<v_j, v_l>`` for the classic FM), and
a per-feature ``diagonal`` that puts the self-interaction convention right (the classic FM and
the iFM have no x_j^2 term, the gFM has ``M_jj``). For a user row ``a`` and an item row ``b``
the score of ``x = a + b`` then splits exactly into

    f(a + b) = bias + part(a) + part(b) + <Q^T a, K^T b> + 2 sum_j diagonal_j a_j b_j

with ``part(x) = <linear, x> + 1/2 <Q^T x, K^T x> + sum_j diagonal_j x_j^2``. The last term
vanishes when users and items use disjoint features (the usual one-hot blocks), so scoring a
batch of users against all items is one matrix product; :func:`recommend` does that batch by
batch under a memory budget and keeps the top k with ``np.argpartition``.

The estimator attributes are read by a small adapter per model family (:func:`feature_embeddings`)
that looks at the class name and the fitted attributes only: this module imports no estimator.
(The module is not called ``recommend``: importing a submodule sets the package attribute of
its name, which would hide the function ``fmlearn.recommend``.)
"""

import warnings
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import ndtr, ndtri
from sklearn.utils.validation import check_is_fitted

from ._base import BaseFM
from ._data import check_sparse_structure
from ._threads import n_threads
from .relation import is_relation_data

__all__ = ["FeatureEmbeddings", "RowEmbeddings", "Recommendations", "feature_embeddings",
           "embed_rows", "recommend"]

#: Default memory budget of one batch of scores in :func:`recommend` (MB).
DEFAULT_BUDGET_MB = 256.0

# Bytes per (user, item) cell of a batch: the scores, the partition's copy, the tie masks
# and their running count, and the product's temporaries.
_BYTES_PER_CELL = 48

_CLASSIC = frozenset({"FMRegressor", "FMClassifier", "OnlineFMRegressor", "OnlineFMClassifier",
                      "FMRanker"})
_FIELD_AWARE = frozenset({"FFMRegressor", "FFMClassifier"})
_CONVEX = frozenset({"ConvexFMRegressor", "ConvexFMClassifier"})
_ONE_PASS = {"GFMRegressor": False, "IFMRegressor": True}  # name -> zero diagonal
_NO_FACTORS = {
    "CCFMRegressor": "its interaction matrix is kept as a trace-norm-bounded matrix (dense "
                     "or a tracked eigen-subspace), not as per-feature factors",
    "CCFMClassifier": "its interaction matrix is kept as a trace-norm-bounded matrix (dense "
                      "or a tracked eigen-subspace), not as per-feature factors",
    "OnlineCFMRegressor": "its interaction matrix W is a convex (PSD, trace-bounded) matrix, "
                          "not per-feature factors",
    "OnlineCFMClassifier": "its interaction matrix W is a convex (PSD, trace-bounded) matrix, "
                           "not per-feature factors",
}


class FeatureEmbeddings(NamedTuple):
    """Per-feature embeddings of a fitted model (see :func:`feature_embeddings`).

    ``f(x) = bias + <linear, x> + 1/2 <query^T x, key^T x> + sum_j diagonal_j x_j^2``, and the
    weight of the pair x_j x_l (j != l) is ``<query[j], key[l]> = <query[l], key[j]>``.
    """

    bias: float
    linear: np.ndarray  # (n_features,)
    query: np.ndarray  # (n_features, r)
    key: np.ndarray  # (n_features, r); the same array as query for PSD models
    diagonal: np.ndarray  # (n_features,)


class RowEmbeddings(NamedTuple):
    """Embeddings of feature rows (users, items, any block of features); see :func:`embed_rows`.

    For two rows a and b with disjoint features ``f(a + b) = bias + part[a] + part[b] +
    <query[a], key[b]>``.
    """

    part: np.ndarray  # (n_rows,) the row's own score without the bias
    query: np.ndarray  # (n_rows, r) sum of the row's features' query vectors
    key: np.ndarray  # (n_rows, r)


class Recommendations(NamedTuple):
    """Top-k items per user: ``indices[u]`` best first, ``scores[u]`` their model scores.

    A slot with no candidate left (every other item excluded) holds index -1 and score -inf.
    """

    indices: np.ndarray  # (n_users, k) int64
    scores: np.ndarray  # (n_users, k) float64


# -- the per-family adapter -------------------------------------------------------------------
def _classic(bias, linear, V):
    """f = bias + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l: query = key = V, diagonal -|v_j|^2/2."""
    V = np.ascontiguousarray(V, dtype=np.float64)
    return FeatureEmbeddings(float(bias), np.asarray(linear, dtype=np.float64), V, V,
                             -0.5 * np.einsum("jf,jf->j", V, V))


def _one_pass(model, zero_diagonal):
    """x^T M x with M = (U V^T + V U^T)/2 (- diag(U V^T) for the iFM): the pair weight
    2 M_jl = <u_j, v_l> + <v_j, u_l> = <[u_j, v_j], [v_l, u_l]>; the x_j^2 coefficient is
    M_jj = <u_j, v_j> (gFM) or 0 (iFM), from which 1/2 <q_j, k_j> = <u_j, v_j> is taken off."""
    w, U, V, b = model.w_, model.U_, model.V_, model.intercept_
    uv = np.einsum("jf,jf->j", U, V)
    diagonal = -uv if zero_diagonal else np.zeros_like(uv)
    return FeatureEmbeddings(float(b), w, np.hstack([U, V]), np.hstack([V, U]), diagonal)


def _field_aware(model):
    """The FFM's pair weight <v_{j,f(l)}, v_{l,f(j)}> as <q_j, k_l> with vectors of F * F * k
    entries in blocks (g, h): q_j holds v_{j,g} in block (g, f(j)), k_l holds v_{l,h} in block
    (f(l), h), so that only block (f(l), f(j)) meets; the x_j^2 coefficient 1/2 <q_j, k_j> =
    1/2 |v_{j,f(j)}|^2 is taken off. Of the model on its rows as given: a model with
    ``normalize_rows`` sees rows divided by their norm (:func:`recommend` does that)."""
    V = np.asarray(model.V_, dtype=np.float64)  # (d, F, k)
    fields = np.asarray(model.fields_, dtype=np.int64)
    d, F, k = V.shape
    q = np.zeros((d, F, F, k))
    key = np.zeros((d, F, F, k))
    rows = np.arange(d)
    q[rows, :, fields] = V  # q[j, g, f(j)] = v_{j,g}
    key[rows, fields] = V  # key[l, f(l), h] = v_{l,h}
    own = V[rows, fields]
    return FeatureEmbeddings(float(model.w0_), np.asarray(model.w_, dtype=np.float64),
                             q.reshape(d, F * F * k), key.reshape(d, F * F * k),
                             -0.5 * np.einsum("jf,jf->j", own, own))


def _forms(model):
    """``(forms, link)``: the model's decision is ``forms[0]`` when ``link`` is None, else
    ``ndtri(mean_s ndtr(f_s))`` over the forms (libFM's probit MCMC classifier)."""
    if not isinstance(model, BaseFM):
        raise TypeError(f"recommend/embeddings need a fitted fmlearn model, not "
                        f"{type(model).__name__} (for a Pipeline, pass its last step and "
                        "transform the user and item rows with the steps before it)")
    check_is_fitted(model)
    name = type(model).__name__
    if name in _NO_FACTORS:
        raise ValueError(f"{name} has no factorised form: {_NO_FACTORS[name]}; score its "
                         "user x item rows with predict, or use a factorised model (FM, gFM, "
                         "iFM, ConvexFM, OnlineFM)")
    if name in _ONE_PASS:
        return [_one_pass(model, _ONE_PASS[name])], None
    if name in _FIELD_AWARE:
        return [_field_aware(model)], None
    if name in _CONVEX:  # W = sum_i lambda_i p_i p_i^T: classic form with V = P sqrt(lambda)
        V = np.asarray(model.atoms_, np.float64) * np.sqrt(np.maximum(model.atom_weights_, 0))
        return [_classic(model.w0_, model.w_, V)], None
    if name not in _CLASSIC:
        raise ValueError(f"{name} is not a factorization machine with a known factorised form")
    if np.ndim(model.w_) != 1:
        raise ValueError(f"{name} holds one model per class ({len(model.classes_)} classes): "
                         "recommend/embeddings score one model; refit on the binary target "
                         "of the class to rank by (e.g. y == label)")
    if getattr(model, "solver_", None) == "mcmc" and hasattr(model, "samples_V_"):
        S = model.samples_w0_.shape[0]
        if name == "FMClassifier":  # the probit average is not linear in the samples
            return [_classic(model.samples_w0_[s], model.samples_w_[s], model.samples_V_[s])
                    for s in range(S)], "probit"
        return [_mean_of_samples(model)], None
    return [_classic(model.w0_, model.w_, model.V_)], None


def _mean_of_samples(model):
    """The posterior-mean predictor mean_s f_s as one form: the samples' factors side by side,
    scaled by 1/sqrt(S), so that <q_j, k_l> = mean_s <v_sj, v_sl> (still one product)."""
    S, d, k = model.samples_V_.shape
    V = np.transpose(np.asarray(model.samples_V_, np.float64), (1, 0, 2)).reshape(d, S * k)
    return _classic(np.mean(model.samples_w0_), np.mean(model.samples_w_, axis=0, dtype=np.float64),
                    V / np.sqrt(S))


def feature_embeddings(model, block=None):
    """Per-feature embeddings of a fitted factorization machine.

    The model is written as ``f(x) = bias + <linear, x> + 1/2 <query^T x, key^T x> +
    sum_j diagonal_j x_j^2`` where the weight of a pair x_j x_l (j != l) is
    ``<query[j], key[l]>``:

    - classic FM (``FMRegressor``, ``FMClassifier``, ``OnlineFM*``): ``query = key = V_`` and
      ``linear = w_``, ``bias = w0_``; with ``solver="mcmc"`` the posterior-mean model, whose
      factors are the kept samples' ``V`` side by side divided by sqrt(S) (an
      ``FMClassifier``'s probit decision averages Phi over the samples and is not linear in
      them: :func:`recommend` scores each sample, these embeddings give the mean latent score);
    - ``ConvexFM*``: ``query = key = atoms_ * sqrt(atom_weights_)``;
    - ``GFMRegressor`` / ``IFMRegressor``, ``M = (U V^T + V U^T)/2`` (minus its diagonal for the
      iFM): ``query = [U, V]``, ``key = [V, U]`` (an indefinite M needs two vectors per
      feature), in the caller's coordinates (``w_``, ``U_``, ``V_``, ``intercept_``);
    - ``FFMClassifier`` / ``FFMRegressor`` (Juan et al. 2016): vectors of F * F * k entries,
      ``query[j]`` holding v_{j,g} in block (g, f(j)) and ``key[l]`` v_{l,h} in block (f(l),
      h); with ``normalize_rows`` these embed rows already divided by their norm.

    ``CCFM*`` and ``OnlineCFM*`` keep a matrix, not factors, and are refused (``ValueError``).

    Parameters
    ----------
    model : fitted fmlearn estimator
    block : (start, stop), optional
        Only the features ``start:stop`` (e.g. the one-hot user block); ``bias`` is kept.

    Returns
    -------
    FeatureEmbeddings
        ``bias``, ``linear`` (d,), ``query`` and ``key`` (d, r), ``diagonal`` (d,).

    Examples
    --------
    >>> import numpy as np
    >>> from fmlearn import FMRegressor
    >>> from fmlearn import feature_embeddings
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 6)); y = X[:, 0] * X[:, 1] + X[:, 2]
    >>> m = FMRegressor(n_factors=3, solver="als", n_iter=20, random_state=0).fit(X, y)
    >>> e = feature_embeddings(m)
    >>> bool(np.allclose(e.query, m.V_)), bool(np.isclose(e.query[0] @ e.key[1], m.V_[0] @ m.V_[1]))
    (True, True)
    """
    forms, _ = _forms(model)
    e = forms[0] if len(forms) == 1 else _mean_of_samples(model)
    if block is None:
        return e
    a, b = _check_block(block, int(model.n_features_in_), "block")
    key = e.query[a:b] if e.key is e.query else e.key[a:b]
    return FeatureEmbeddings(e.bias, e.linear[a:b], e.query[a:b], key, e.diagonal[a:b])


def _rows_of(emb, X):
    """RowEmbeddings of the validated rows X (CSR or dense) under one form."""
    xq = np.ascontiguousarray(X @ emb.query, dtype=np.float64)
    xk = xq if emb.key is emb.query else np.ascontiguousarray(X @ emb.key, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is raised below
        sq = X.multiply(X) if sp.issparse(X) else X * X
        part = (np.asarray(X @ emb.linear).ravel() + 0.5 * np.einsum("nf,nf->n", xq, xk)
                + np.asarray(sq @ emb.diagonal).ravel())
    if not (np.all(np.isfinite(part)) and np.all(np.isfinite(xq)) and np.all(np.isfinite(xk))):
        raise ValueError("a score is not finite (the model overflows on these rows); check "
                         "the scale of the feature rows")
    return RowEmbeddings(part, xq, xk)


def embed_rows(model, X):
    """Embeddings of feature rows: a user's (an item's, a group's) vector is the sum of its
    features' vectors weighted by their values.

    Parameters
    ----------
    model : fitted fmlearn estimator (see :func:`feature_embeddings`)
    X : {array-like, sparse matrix} of shape (n_rows, n_features)
        One row per user, item or any block of features (zeros elsewhere).

    Returns
    -------
    RowEmbeddings
        ``part`` (n_rows,): the row's own score without the bias (linear and within-row
        pairwise terms); ``query``, ``key`` (n_rows, r): ``X @ query``, ``X @ key``. For rows a
        and b with disjoint features, ``f(a + b) = bias + part[a] + part[b] + <query[a],
        key[b]>``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from fmlearn import FMRegressor
    >>> from fmlearn import embed_rows, feature_embeddings
    >>> rng = np.random.default_rng(0)
    >>> X = sp.random(300, 10, density=0.3, random_state=0, format="csr")
    >>> y = rng.normal(size=300)
    >>> m = FMRegressor(n_factors=2, solver="als", n_iter=5, random_state=0).fit(X, y)
    >>> a = sp.csr_matrix(([1.0], ([0], [1])), shape=(1, 10))  # user 1 of block 0:5
    >>> b = sp.csr_matrix(([1.0], ([0], [7])), shape=(1, 10))  # item 2 of block 5:10
    >>> u, i = embed_rows(m, a), embed_rows(m, b)
    >>> f = feature_embeddings(m).bias + u.part + i.part + u.query @ i.key.T
    >>> bool(np.isclose(f[0, 0], m.set_params(clip_predictions=False).predict(a + b)[0]))
    True
    """
    X = _validate_rows(model, X, "X")
    return _rows_of(feature_embeddings(model), X)


# -- validation ----------------------------------------------------------------------------------
def _check_block(block, d, what):
    try:
        a, b = (int(v) for v in block)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a pair (start, stop) of feature indices, "
                         f"got {block!r}") from None
    if not 0 <= a < b <= d:
        raise ValueError(f"{what}={block!r} must satisfy 0 <= start < stop <= n_features_in_={d}")
    return a, b


def _validate_rows(model, X, what):
    try:
        X = model._validate_X_predict(X)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    if is_relation_data(X):  # relational rows (fmlearn.RelationData): each user/item once
        X = X.to_csr()
    X = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else np.asarray(X, np.float64)
    return X


def _one_hot_rows(ids, block, d, what):
    """CSR rows with a 1 at ``start + id`` for the ids of a one-hot block (None: all)."""
    a, b = _check_block(block, d, f"{what[:-1]}_block")
    if ids is None:
        ids = np.arange(b - a)
    ids = np.asarray(ids)
    if ids.ndim != 1 or not (ids.size == 0 or np.issubdtype(ids.dtype, np.integer)):
        raise ValueError(f"with {what[:-1]}_block, {what} must be a 1-D array of integer ids "
                         f"(0 <= id < {b - a}) or None")
    if ids.size and (ids.min() < 0 or ids.max() >= b - a):
        raise ValueError(f"{what} ids must lie in [0, {b - a}) (the size of "
                         f"{what[:-1]}_block)")
    n = ids.shape[0]
    return sp.csr_matrix((np.ones(n), (np.arange(n), a + ids.astype(np.int64))), shape=(n, d))


def _side_rows(model, rows, block, what):
    """The users' (items') feature rows: validated rows, or one-hot rows of ids in a block."""
    if block is not None:
        return _one_hot_rows(rows, block, int(model.n_features_in_), what)
    if rows is None:
        raise ValueError(f"give {what} (feature rows) or {what[:-1]}_block with ids")
    return _validate_rows(model, rows, what)


def _exclusions(exclude, n_users, n_items):
    """``exclude`` as a CSR pattern of shape (n_users, n_items) (or None)."""
    if exclude is None:
        return None
    if sp.issparse(exclude):
        # SciPy builds a sparse matrix from raw arrays after a cheap check only: an index -1
        # would silently exclude the last item, one past the end raise a bare IndexError.
        check_sparse_structure(exclude, "exclude")
        if exclude.shape != (n_users, n_items):
            raise ValueError(f"exclude has shape {exclude.shape}, expected (n_users, n_items) = "
                             f"({n_users}, {n_items})")
        E = sp.csr_matrix(exclude)
        E.sum_duplicates()
        return E
    try:
        lists = [np.asarray(list(seen) if not isinstance(seen, np.ndarray) else seen).ravel()
                 for seen in exclude]
    except TypeError:
        raise ValueError("exclude must be a sparse (n_users, n_items) matrix or a sequence of "
                         "item-index lists, one per user") from None
    if len(lists) != n_users:
        raise ValueError(f"exclude holds {len(lists)} lists, expected one per user ({n_users})")
    for u, seen in enumerate(lists):
        if seen.size and not np.issubdtype(seen.dtype, np.integer):
            raise ValueError(f"exclude[{u}] must hold integer item indices, not {seen.dtype}")
        if seen.size and (seen.min() < 0 or seen.max() >= n_items):
            raise ValueError(f"exclude[{u}] has an item index outside [0, {n_items})")
    indptr = np.concatenate([[0], np.cumsum([s.size for s in lists])])
    indices = (np.concatenate(lists).astype(np.int64) if lists and indptr[-1]
               else np.zeros(0, np.int64))
    E = sp.csr_matrix((np.ones(indices.shape[0]), indices, indptr), shape=(n_users, n_items))
    E.sum_duplicates()
    return E


def _normalised_sides(model, U, Iv):
    """The user and item rows as a model with ``normalize_rows`` (an FFM) sees their sums:
    divided by ||u + i|| = sqrt(||u||^2 + ||i||^2) for disjoint features, one factor for every
    pair when all users have one squared norm and all items another (one-hot blocks: 1 and 1).
    Refused otherwise (the score of u + i is then not one product of embeddings)."""
    if not (type(model).__name__ in _FIELD_AWARE and getattr(model, "normalize_rows", False)):
        return U, Iv

    def sq(X):
        X2 = X.multiply(X) if sp.issparse(X) else X * X
        return np.asarray(X2.sum(axis=1)).ravel()

    a, b = sq(U), sq(Iv)
    shared = (np.asarray(abs(U).sum(axis=0)).ravel() * np.asarray(abs(Iv).sum(axis=0)).ravel()
              if U.shape[0] and Iv.shape[0] else np.zeros(1))
    if (np.any(shared) or (a.size and not np.allclose(a, a[0], rtol=1e-12))
            or (b.size and not np.allclose(b, b[0], rtol=1e-12))):
        raise ValueError(f"{type(model).__name__} with normalize_rows=True scores x / ||x||: "
                         "recommend needs user rows of one norm, item rows of one norm and no "
                         "feature shared by both sides (one-hot blocks are); fit with "
                         "normalize_rows=False, or score the pairs with predict")
    total = (a[0] if a.size else 0.0) + (b[0] if b.size else 0.0)
    if not total > 0:
        return U, Iv
    c = 1.0 / np.sqrt(total)
    return U * c, Iv * c


# -- scoring and top k --------------------------------------------------------------------------
class _Side(NamedTuple):
    """One side (users or items) under every form: rows, and per form its RowEmbeddings."""

    rows: object
    emb: list


def _overlap(forms, users, items):
    """Per form the sparse ``2 diag(diagonal)`` restricted to the features that both some user
    row and some item row use (None when the sides are disjoint, the one-hot case)."""
    def used(X):
        if sp.issparse(X):
            return np.unique(X.indices)
        return np.flatnonzero(np.any(X != 0, axis=0))

    shared = np.intersect1d(used(users), used(items))
    out = []
    for e in forms:
        cols = shared[e.diagonal[shared] != 0]
        out.append(None if cols.shape[0] == 0
                   else sp.csr_matrix((2.0 * e.diagonal[cols], (cols, cols)),
                                      shape=(e.diagonal.shape[0],) * 2))
    return out


def _batch_scores(forms, link, U, I, lo, hi, overlap, users):
    """Scores of users lo:hi against every item: one product per form (a compiled kernel
    with a fixed summation order rather than BLAS, whose blocking would make a user's last
    bits, hence exact ties, depend on the batch)."""
    from .kernels.topk import pair_scores

    total = None
    for s, e in enumerate(forms):
        f = np.empty((hi - lo, I.rows.shape[0]))
        pair_scores(U.emb[s].query[lo:hi], I.emb[s].key, U.emb[s].part[lo:hi],
                    I.emb[s].part, e.bias, f)
        if overlap[s] is not None:
            f += np.asarray((sp.csr_matrix(users[lo:hi]) @ overlap[s] @ I.rows.T).todense())
        if link is None:
            return f
        total = ndtr(f) if total is None else total + ndtr(f)
    return ndtri(np.clip(total / len(forms), 1e-300, 1.0 - 1e-16))


def _top_k(scores, k):
    """Exact top k per row, best first; ties go to the smaller index; -inf slots give -1."""
    n, m = scores.shape
    from .kernels.topk import TOP_K_MAX, top_k_rows

    if k <= TOP_K_MAX:
        cols = np.empty((n, k), dtype=np.int64)
        top = np.empty((n, k), dtype=np.float64)
        top_k_rows(np.ascontiguousarray(scores, dtype=np.float64), k, cols, top)
        return cols, top
    if k < m:
        pos = np.argpartition(scores, m - k, axis=1)[:, m - k:m - k + 1]
        kth = np.take_along_axis(scores, pos, axis=1)
    else:
        kth = scores.min(axis=1, keepdims=True)
    above = scores > kth
    tied = scores == kth
    room = k - above.sum(axis=1, keepdims=True)
    keep = above | (tied & (np.cumsum(tied, axis=1, dtype=np.int32) <= room))
    cols = np.nonzero(keep)[1].reshape(n, k)  # ascending item index within each row
    top = np.take_along_axis(scores, cols, axis=1)
    order = np.argsort(-top, axis=1, kind="stable")
    cols = np.take_along_axis(cols, order, axis=1).astype(np.int64)
    top = np.take_along_axis(top, order, axis=1)
    cols[np.isneginf(top)] = -1
    return cols, top


def recommend(model, users=None, items=None, k=10, *, user_block=None, item_block=None,
              context=None, exclude=None, memory_budget_mb=DEFAULT_BUDGET_MB, n_jobs=None):
    """The k best items for each user under a fitted factorization machine, exactly.

    Each candidate's score is the model's score of the row ``user + item (+ context)``,
    computed from the FM decomposition ``bias + part(user) + part(item) + <user query, item
    key>`` (see :mod:`fmlearn.recommender`): one matrix product per batch of users, never a loop
    over pairs. Scores are the model's decision values: ``predict`` for a regressor before its
    clipping to the training range (``clip_predictions``, which would tie every item beyond
    the range), ``decision_function`` for a classifier (the order of ``predict_proba``).

    Parameters
    ----------
    model : fitted fmlearn estimator
        ``FMRegressor``/``FMClassifier`` (any solver; MCMC uses the kept samples exactly),
        ``GFMRegressor``, ``IFMRegressor``, ``ConvexFM*``, ``OnlineFM*``, ``FFM*`` (with
        ``normalize_rows``, for users of one norm and items of one norm, as one-hot blocks
        are). ``CCFM*`` and ``OnlineCFM*`` have no factorised form and are refused.
    users : sparse matrix or array of shape (n_users, n_features), RelationData, or ids
        One feature row per user (relational rows, :class:`fmlearn.RelationData`, are
        expanded); with ``user_block``, a 1-D array of user ids (None: all).
    items : sparse matrix or array of shape (n_items, n_features), or ids
        One feature row per item; with ``item_block``, a 1-D array of item ids (None: all).
    k : int, default=10
        Items per user. A ``k`` above the number of items is clipped to it, with a
        ``UserWarning``: the result then has ``n_items`` columns (every item ranked).
    user_block, item_block : (start, stop), optional
        One-hot blocks: user id u is the feature ``start + u`` (e.g. ``user_block=(0,
        n_users)``, ``item_block=(n_users, n_users + n_items)``).
    context : sparse matrix or array of shape (1, n_features) or (n_users, n_features), optional
        Features added to every pair of a user (the same row for all users, or one per user).
    exclude : sparse matrix of shape (n_users, n_items) or sequence of lists, optional
        Items never recommended to a user (e.g. already seen): the stored entries of row u, or
        the item indices of ``exclude[u]`` (positions in ``items``).
    memory_budget_mb : float, default=256
        Bound on the memory of one batch of scores (users per batch = budget / (n_items
        cells)); at least one user per batch.
    n_jobs : int or None, default=None
        Threads of the scoring kernel (``fmlearn._threads``: None or -1 all CPUs numba may
        use); the result does not depend on it, nor on the batch size.

    Returns
    -------
    Recommendations
        ``indices`` (n_users, min(k, n_items)) int64 item positions in ``items``, best first
        (ties: the smaller index first), and ``scores`` of the same shape, float64. A user with
        fewer items left after ``exclude`` gets index -1 and score -inf in the remaining slots.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from fmlearn import FMRegressor
    >>> from fmlearn import recommend
    >>> rng = np.random.default_rng(0)
    >>> n_users, n_items, n = 30, 40, 2000
    >>> u, i = rng.integers(n_users, size=n), rng.integers(n_items, size=n)
    >>> cols = np.column_stack([u, n_users + i]).ravel()
    >>> X = sp.csr_matrix((np.ones(2 * n), (np.repeat(np.arange(n), 2), cols)),
    ...                   shape=(n, n_users + n_items))
    >>> y = np.sin(u) * np.cos(i) + 0.1 * i / n_items
    >>> m = FMRegressor(n_factors=4, solver="als", n_iter=20, random_state=0).fit(X, y)
    >>> top = recommend(m, [0, 1], None, k=3, user_block=(0, n_users),
    ...                 item_block=(n_users, n_users + n_items), exclude=[[5, 6], []])
    >>> top.indices.shape, bool(np.all(top.indices[0] != 5))
    ((2, 3), True)
    """
    forms, link = _forms(model)
    U = _side_rows(model, users, user_block, "users")
    Iv = _side_rows(model, items, item_block, "items")
    n_users, n_items = U.shape[0], Iv.shape[0]
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not (isinstance(memory_budget_mb, (int, float, np.number))
            and np.isfinite(memory_budget_mb) and memory_budget_mb > 0):
        raise ValueError(f"memory_budget_mb must be a positive number, got {memory_budget_mb!r}")
    if context is not None:
        C = _validate_rows(model, context, "context")
        if C.shape[0] not in (1, n_users):
            raise ValueError(f"context has {C.shape[0]} rows, expected 1 or n_users={n_users}")
        if C.shape[0] == 1 and n_users != 1:
            C = sp.vstack([sp.csr_matrix(C)] * n_users) if sp.issparse(C) else \
                np.repeat(C, n_users, axis=0)
        U = (sp.csr_matrix(U) + sp.csr_matrix(C)).tocsr() if sp.issparse(U) or sp.issparse(C) \
            else U + C
    U, Iv = _normalised_sides(model, U, Iv)
    E = _exclusions(exclude, n_users, n_items)
    if k > n_items:
        warnings.warn(f"k={int(k)} is more than the {n_items} items: each user gets all {n_items} "
                      f"items ranked (the result has {n_items} columns, not {int(k)})",
                      UserWarning, stacklevel=2)
    k = min(int(k), n_items)
    indices = np.empty((n_users, k), dtype=np.int64)
    scores = np.empty((n_users, k), dtype=np.float64)
    if n_users == 0 or k == 0:
        return Recommendations(indices, scores)
    users_side = _Side(U, [_rows_of(e, U) for e in forms])
    items_side = _Side(Iv, [_rows_of(e, Iv) for e in forms])
    overlap = _overlap(forms, U, Iv)
    step = max(1, int(memory_budget_mb * 2**20 // (_BYTES_PER_CELL * n_items)))
    for lo in range(0, n_users, step):
        hi = min(n_users, lo + step)
        with np.errstate(over="ignore", invalid="ignore"), n_threads(n_jobs):
            f = _batch_scores(forms, link, users_side, items_side, lo, hi, overlap, U)
        if not np.all(np.isfinite(f)):
            raise ValueError("a score is not finite (the model overflows on these rows); "
                             "check the scale of the user and item features")
        if E is not None:
            block = E[lo:hi]
            f[np.repeat(np.arange(hi - lo), np.diff(block.indptr)), block.indices] = -np.inf
        indices[lo:hi], scores[lo:hi] = _top_k(f, k)
    return Recommendations(indices, scores)
