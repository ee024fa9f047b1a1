"""Top-k recommendations and embeddings against brute force: ``model.predict`` on every
user x item row, sorted by (score descending, item index ascending)."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn import (
    ConvexFMRegressor,
    FMClassifier,
    FMRegressor,
    GFMRegressor,
    IFMRegressor,
    OnlineCFMRegressor,
    OnlineFMRegressor,
    embed_rows,
    feature_embeddings,
    recommend,
)

N_USERS, N_ITEMS, N_SIDE = 12, 30, 3


def _layout(n_users=N_USERS, n_items=N_ITEMS):
    """Feature blocks: user one-hot | item one-hot | user side | item side | shared."""
    ub = (0, n_users)
    ib = (n_users, n_users + n_items)
    us = n_users + n_items
    return ub, ib, us, us + N_SIDE, us + 2 * N_SIDE, us + 2 * N_SIDE + 1


def _rows(n_users=N_USERS, n_items=N_ITEMS, seed=0):
    """User and item feature rows: one-hot id, dense side features, and one feature both
    sides use (so the overlap term of the decomposition is exercised)."""
    rng = np.random.default_rng(seed)
    ub, ib, us, is_, shared, d = _layout(n_users, n_items)
    U = sp.lil_matrix((n_users, d))
    U[np.arange(n_users), np.arange(n_users)] = 1.0
    U[:, us:us + N_SIDE] = rng.normal(size=(n_users, N_SIDE))
    U[:, shared] = rng.uniform(0.5, 1.5, size=(n_users, 1))
    Iv = sp.lil_matrix((n_items, d))
    Iv[np.arange(n_items), ib[0] + np.arange(n_items)] = 1.0
    Iv[:, is_:is_ + N_SIDE] = rng.normal(size=(n_items, N_SIDE))
    Iv[:, shared] = rng.uniform(0.5, 1.5, size=(n_items, 1))
    return U.tocsr(), Iv.tocsr()


def _pairs(U, Iv, context=None):
    """Every user x item row (user-major), as the brute force scores them."""
    n_u, n_i = U.shape[0], Iv.shape[0]
    by_user = np.repeat(np.arange(n_u), n_i)
    rows = sp.csr_matrix(U)[by_user] + sp.csr_matrix(Iv)[np.tile(np.arange(n_i), n_u)]
    if context is not None:
        C = sp.csr_matrix(context)
        rows = rows + (C[np.zeros(n_u * n_i, dtype=np.int64)] if C.shape[0] == 1 else C[by_user])
    return sp.csr_matrix(rows)


def _train(n=1500, seed=0, classify=False):
    rng = np.random.default_rng(seed)
    U, Iv = _rows(seed=seed)
    u, i = rng.integers(N_USERS, size=n), rng.integers(N_ITEMS, size=n)
    X = sp.csr_matrix(U[u] + Iv[i])
    y = np.sin(1.3 * u) * np.cos(0.7 * i) + 0.2 * np.asarray(X[:, -1].todense()).ravel()
    y = y + 0.1 * rng.normal(size=n)
    return X, (y > 0).astype(int) if classify else y


def _brute(model, U, Iv, context=None):
    P = _pairs(U, Iv, context)
    f = model.decision_function(P) if hasattr(model, "classes_") else model.predict(P)
    return f.reshape(U.shape[0], Iv.shape[0])


def _fm_oracle(w0, w, V, X):
    """Rendle's FM, f = w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l, on dense rows."""
    X = X.toarray()
    XV = X @ V
    return w0 + X @ w + 0.5 * (np.sum(XV ** 2, axis=1) - (X ** 2) @ np.sum(V ** 2, axis=1))


def _brute_top(F, k, exclude=None):
    F = F.copy()
    if exclude is not None:
        for u, seen in enumerate(exclude):
            F[u, list(seen)] = -np.inf
    idx = np.array([np.lexsort((np.arange(F.shape[1]), -row))[:k] for row in F])
    return idx, np.take_along_axis(F, idx, axis=1)


def _fitted(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "fm_als":
            X, y = _train()
            return FMRegressor(4, solver="als", n_iter=10, clip_predictions=False,
                               random_state=0).fit(X, y)
        if name == "fm_sgd":
            X, y = _train()
            return FMRegressor(4, solver="sgd", n_iter=5, learning_rate=0.05,
                               clip_predictions=False, random_state=0).fit(X, y)
        if name == "fm_mcmc":
            X, y = _train()
            return FMRegressor(4, solver="mcmc", n_iter=30, n_burn_in=10, clip_predictions=False,
                               random_state=0).fit(X, y)
        if name == "fmc_mcmc":
            X, y = _train(classify=True)
            return FMClassifier(4, solver="mcmc", n_iter=30, n_burn_in=10,
                                random_state=0).fit(X, y)
        if name == "fmc_als":
            X, y = _train(classify=True)
            return FMClassifier(4, solver="als", n_iter=10, random_state=0).fit(X, y)
        if name in ("gfm", "ifm"):
            X, y = _train(n=4000)
            cls = GFMRegressor if name == "gfm" else IFMRegressor
            return cls(3, batch_size=2000, random_state=0).fit(X, y)
        if name == "gfm_als":
            X, y = _train()
            return GFMRegressor(3, solver="als", standardize=False, random_state=0).fit(X, y)
        if name == "convex":
            X, y = _train()
            return ConvexFMRegressor(trace_bound=5.0, max_iter=20, clip_predictions=False,
                                     random_state=0).fit(X, y)
        if name == "online_fm":
            X, y = _train()
            return OnlineFMRegressor(n_factors=4, clip_predictions=False,
                                     random_state=0).fit(X, y)
    raise AssertionError(name)


MODELS = ["fm_als", "fm_sgd", "fm_mcmc", "fmc_mcmc", "fmc_als", "gfm", "ifm", "gfm_als",
          "convex", "online_fm"]


@pytest.fixture(scope="module", params=MODELS)
def fitted(request):
    return _fitted(request.param)


def test_recommend_equals_brute_force_with_overlap_and_exclude(fitted):
    U, Iv = _rows()
    F = _brute(fitted, U, Iv)
    assert np.ptp(F) > 1e-3  # the model learned something to rank
    rng = np.random.default_rng(1)
    exclude = [rng.choice(N_ITEMS, size=rng.integers(0, 6), replace=False) for _ in range(N_USERS)]
    for k, exc in [(5, None), (5, exclude), (N_ITEMS, None)]:
        top = recommend(fitted, U, Iv, k, exclude=exc)
        idx, best = _brute_top(F, k, exc)
        np.testing.assert_allclose(top.scores, best, rtol=1e-9, atol=1e-9)
        np.testing.assert_array_equal(top.indices, idx)
        for u, seen in enumerate(exc or []):
            assert not set(top.indices[u]) & set(seen)


def test_batches_budget_and_threads_do_not_change_the_result(fitted):
    U, Iv = _rows()
    whole = recommend(fitted, U, Iv, 7)
    tiny = recommend(fitted, U, Iv, 7, memory_budget_mb=1e-6, n_jobs=1)  # one user a batch
    np.testing.assert_array_equal(whole.indices, tiny.indices)
    np.testing.assert_array_equal(whole.scores, tiny.scores)


def test_embed_rows_decomposes_the_score(fitted):
    U, Iv = _rows()
    e = feature_embeddings(fitted)
    # one-hot ids only (disjoint supports): f(a + b) = bias + part(a) + part(b) + <q_a, k_b>
    a, b = U[:, :N_USERS + N_ITEMS], Iv[:, :N_USERS + N_ITEMS]
    d = U.shape[1]
    a = sp.csr_matrix((a.data, a.indices, a.indptr), shape=(N_USERS, d))
    b = sp.csr_matrix((b.data, b.indices, b.indptr), shape=(N_ITEMS, d))
    ea, eb = embed_rows(fitted, a), embed_rows(fitted, b)
    F = e.bias + ea.part[:, None] + eb.part[None, :] + ea.query @ eb.key.T
    if type(fitted).__name__ == "FMClassifier" and fitted.solver_ == "mcmc":
        # the probit decision is ndtri(mean Phi(f_s)); the embeddings give the mean of f_s
        P = _pairs(a, b)
        want = np.mean([_fm_oracle(w0, w, V, P) for w0, w, V in
                        zip(fitted.samples_w0_, fitted.samples_w_, fitted.samples_V_, strict=True)],
                       axis=0)
    else:
        want = _brute(fitted, a, b)
    np.testing.assert_allclose(F.ravel(), want.ravel(), rtol=1e-9, atol=1e-9)
    # a row's vector is the sum of its features' vectors
    np.testing.assert_allclose(ea.query[3], e.query[3])
    np.testing.assert_allclose(eb.key[2], e.key[N_USERS + 2])


def test_one_hot_blocks_and_context_equal_explicit_rows():
    model = _fitted("fm_als")
    ub, ib, us, is_, shared, d = _layout()
    ids_u = np.array([4, 0, 7])
    by_block = recommend(model, ids_u, None, 6, user_block=ub, item_block=ib)
    Uo = sp.csr_matrix((np.ones(3), (np.arange(3), ids_u)), shape=(3, d))
    Io = sp.csr_matrix((np.ones(N_ITEMS), (np.arange(N_ITEMS), ib[0] + np.arange(N_ITEMS))),
                       shape=(N_ITEMS, d))
    explicit = recommend(model, Uo, Io, 6)
    np.testing.assert_array_equal(by_block.indices, explicit.indices)
    np.testing.assert_allclose(by_block.scores, explicit.scores, rtol=1e-12)
    idx, best = _brute_top(_brute(model, Uo, Io), 6)
    np.testing.assert_array_equal(by_block.indices, idx)
    # a context row (side features of the moment) is added to every pair
    ctx = np.zeros((1, d))
    ctx[0, us:us + N_SIDE] = [0.5, -1.0, 2.0]
    ctx[0, shared] = 1.0
    with_ctx = recommend(model, ids_u, None, 6, user_block=ub, item_block=ib, context=ctx)
    idx, best = _brute_top(_brute(model, Uo, Io, ctx), 6)
    np.testing.assert_array_equal(with_ctx.indices, idx)
    np.testing.assert_allclose(with_ctx.scores, best, rtol=1e-9, atol=1e-9)


def test_ties_go_to_the_smaller_item_index():
    model = _fitted("fm_als")
    U, Iv = _rows()
    # items 3, 10, 20 are copies of item 3: bitwise equal scores everywhere
    Iv = sp.lil_matrix(Iv)
    for j in (10, 20):
        Iv[j] = Iv[3]
    Iv = Iv.tocsr()
    F = _brute(model, U, Iv)
    top = recommend(model, U, Iv, N_ITEMS)
    idx, best = _brute_top(F, N_ITEMS)
    np.testing.assert_array_equal(top.indices, idx)
    for u in range(N_USERS):
        pos = [list(top.indices[u]).index(j) for j in (3, 10, 20)]
        assert pos == sorted(pos) and pos[2] - pos[0] == 2
    # k cuts inside the tied group: the smaller indices are kept
    for u in range(N_USERS):
        k = list(top.indices[u]).index(10)  # 3 is in the first k, 10 and 20 are not
        cut = recommend(model, U[u], Iv, k)
        assert 3 in cut.indices[0] and 10 not in cut.indices[0] and 20 not in cut.indices[0]
    # an all-constant model ties every item: the first k indices in order
    flat = recommend(model, U, Iv[[3, 10, 20, 3]], 3)
    np.testing.assert_array_equal(flat.indices, np.tile([0, 1, 2], (N_USERS, 1)))


def test_exclude_formats_and_exhausted_users():
    model = _fitted("fm_als")
    U, Iv = _rows()
    lists = [[0, 1, 2]] * N_USERS
    E = sp.csr_matrix((np.ones(3 * N_USERS), (np.repeat(np.arange(N_USERS), 3),
                                              np.tile([0, 1, 2], N_USERS))),
                      shape=(N_USERS, N_ITEMS))
    a, b = recommend(model, U, Iv, 5, exclude=lists), recommend(model, U, Iv, 5, exclude=E)
    np.testing.assert_array_equal(a.indices, b.indices)
    # a user with every item but two excluded gets two items, then -1 / -inf
    lists = [list(range(2, N_ITEMS))] + [[]] * (N_USERS - 1)
    top = recommend(model, U, Iv, 4, exclude=lists)
    assert set(top.indices[0, :2]) == {0, 1}
    np.testing.assert_array_equal(top.indices[0, 2:], [-1, -1])
    assert np.all(np.isneginf(top.scores[0, 2:])) and np.all(np.isfinite(top.scores[1:]))


def test_shape_100_users_by_1682_items():
    rng = np.random.default_rng(0)
    n_users, n_items, n = 943, 1682, 20000
    u, i = rng.integers(n_users, size=n), rng.integers(n_items, size=n)
    d = n_users + n_items
    X = sp.csr_matrix((np.ones(2 * n), (np.repeat(np.arange(n), 2),
                                        np.column_stack([u, n_users + i]).ravel())), shape=(n, d))
    y = rng.integers(1, 6, size=n).astype(float)
    model = FMRegressor(8, solver="als", n_iter=3, clip_predictions=False,
                        random_state=0).fit(X, y)
    users = rng.choice(n_users, size=100, replace=False)
    seen = [i[u == user] for user in users]
    top = recommend(model, users, None, 10, user_block=(0, n_users),
                    item_block=(n_users, d), exclude=seen, memory_budget_mb=0.5)
    assert top.indices.shape == (100, 10) and top.scores.shape == (100, 10)
    # brute force on every pair
    Uo = sp.csr_matrix((np.ones(100), (np.arange(100), users)), shape=(100, d))
    Io = sp.csr_matrix((np.ones(n_items), (np.arange(n_items), n_users + np.arange(n_items))),
                       shape=(n_items, d))
    idx, best = _brute_top(_brute(model, Uo, Io), 10, seen)
    np.testing.assert_array_equal(top.indices, idx)
    np.testing.assert_allclose(top.scores, best, rtol=1e-9, atol=1e-9)


def test_clipped_regressor_ranks_before_clipping():
    X, y = _train()
    model = FMRegressor(4, solver="als", n_iter=10, random_state=0).fit(X, y)  # clips
    U, Iv = _rows()
    top = recommend(model, U, Iv, N_ITEMS)
    lo, hi = model.y_range_
    np.testing.assert_allclose(np.clip(top.scores, lo, hi),
                               np.take_along_axis(_brute(model, U, Iv), top.indices, axis=1),
                               rtol=1e-9, atol=1e-9)
    assert np.all(np.diff(top.scores, axis=1) <= 0)


def test_feature_embeddings_per_family():
    fm = _fitted("fm_als")
    e = feature_embeddings(fm)
    np.testing.assert_array_equal(e.query, fm.V_)
    assert e.key is e.query and e.bias == fm.w0_
    np.testing.assert_allclose(e.diagonal, -0.5 * np.sum(fm.V_ ** 2, axis=1))
    blk = feature_embeddings(fm, block=(N_USERS, N_USERS + N_ITEMS))
    np.testing.assert_array_equal(blk.query, fm.V_[N_USERS:N_USERS + N_ITEMS])
    np.testing.assert_array_equal(blk.linear, fm.w_[N_USERS:N_USERS + N_ITEMS])
    # gFM / iFM: <q_j, k_l> + <q_l, k_j> = 2 (M_jl + M_lj) off the diagonal, query K^T symmetric
    for name in ("gfm", "ifm"):
        m = _fitted(name)
        e = feature_embeddings(m)
        M = m.M_.toarray() if hasattr(m.M_, "toarray") else m.M_
        QK = e.query @ e.key.T
        np.testing.assert_allclose(QK, QK.T, atol=1e-12)
        off = ~np.eye(M.shape[0], dtype=bool)
        np.testing.assert_allclose(QK[off], 2 * M[off], atol=1e-10)
        # the x_j^2 coefficient is M_jj: 1/2 <q_j, k_j> + diagonal_j
        np.testing.assert_allclose(0.5 * np.diag(QK) + e.diagonal, np.diag(M), atol=1e-10)
    # MCMC: the kept samples side by side give the posterior-mean pair weights
    mc = _fitted("fm_mcmc")
    e = feature_embeddings(mc)
    S = mc.samples_V_.shape[0]
    mean_pair = np.mean([V @ V.T for V in mc.samples_V_], axis=0)
    np.testing.assert_allclose(e.query @ e.key.T, mean_pair, rtol=1e-10, atol=1e-12)
    assert e.query.shape[1] == S * mc.n_factors


def test_refusals_and_bad_input():
    X, y = _train(n=300)
    cfm = OnlineCFMRegressor().fit(X.toarray(), y)
    U, Iv = _rows()
    with pytest.raises(ValueError, match="OnlineCFMRegressor has no factorised form"):
        recommend(cfm, U, Iv, 3)
    with pytest.raises(ValueError, match="no factorised form"):
        feature_embeddings(cfm)
    model = _fitted("fm_als")
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        recommend(FMRegressor(), U, Iv, 3)
    with pytest.raises(ValueError, match="users: .*features"):
        recommend(model, U[:, :5], Iv, 3)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        recommend(model, U, Iv, 0)
    with pytest.raises(ValueError, match=r"exclude\[0\] has an item index outside"):
        recommend(model, U, Iv, 3, exclude=[[N_ITEMS]] + [[]] * (N_USERS - 1))
    with pytest.raises(ValueError, match="one per user"):
        recommend(model, U, Iv, 3, exclude=[[1]])
    with pytest.raises(ValueError, match="exclude has shape"):
        recommend(model, U, Iv, 3, exclude=sp.csr_matrix((2, 2)))
    with pytest.raises(ValueError, match="user_block"):
        recommend(model, [0], None, 3, user_block=(0, 10**6), item_block=(0, 3))
    with pytest.raises(ValueError, match=r"users ids must lie in \[0, 3\) \(the size of user_b"):
        recommend(model, [5], None, 3, user_block=(0, 3), item_block=(3, 6))
    with pytest.raises(ValueError, match="items: .*NaN"):
        bad = Iv.toarray()
        bad[0, 0] = np.nan
        recommend(model, U, bad, 3)
    with pytest.raises(TypeError, match="Pipeline"):
        from sklearn.pipeline import make_pipeline
        recommend(make_pipeline(model), U, Iv, 3)
    with pytest.raises(ValueError, match="not finite"):
        recommend(model, U * 1e200, Iv, 3)
    # k above the number of items gives every item, ranked, and says so
    with pytest.warns(UserWarning, match=f"k={10 * N_ITEMS} is more than the {N_ITEMS} items"):
        top = recommend(model, U, Iv, 10 * N_ITEMS)
    assert top.indices.shape == top.scores.shape == (N_USERS, N_ITEMS)
    np.testing.assert_array_equal(np.sort(top.indices, axis=1),
                                  np.tile(np.arange(N_ITEMS), (N_USERS, 1)))


@pytest.mark.parametrize("index, words", [(-1, "column index -1 is outside"),
                                          (N_ITEMS, f"column index {N_ITEMS} is outside")])
def test_exclude_matrix_structure_is_checked(index, words):
    # A sparse exclude built from raw arrays skips SciPy's full check: an index -1 would
    # silently drop the last item for every user, one past the end raise a bare IndexError.
    model = _fitted("fm_als")
    U, Iv = _rows()
    E = sp.csr_matrix((np.ones(N_USERS), np.full(N_USERS, index), np.arange(N_USERS + 1)),
                      shape=(N_USERS, N_ITEMS))
    with pytest.raises(ValueError, match=f"exclude \\(csr\\) is malformed: {words}"):
        recommend(model, U, Iv, 3, exclude=E)
    bad = sp.coo_matrix((np.ones(N_USERS), (np.arange(N_USERS), np.zeros(N_USERS, int))),
                        shape=(N_USERS, N_ITEMS))
    bad.col[:] = index
    with pytest.raises(ValueError, match="exclude \\(coo\\) is malformed"):
        recommend(model, U, Iv, 3, exclude=bad)


def test_cli_recommend_equals_the_function(tmp_path, capsys):
    from fmlearn.cli import main
    from fmlearn.io import save_model

    model = _fitted("fm_als")
    path = tmp_path / "m.fmz"
    save_model(model, path)
    ub, ib, *_ = _layout()
    (tmp_path / "seen.txt").write_text("0 1\n\n5,6,7\n")
    code = main(["recommend", str(path), "--user-block", f"{ub[0]}:{ub[1]}", "--user-ids",
                 "3,0,8", "--item-block", f"{ib[0]}:{ib[1]}", "-k", "4", "--exclude",
                 str(tmp_path / "seen.txt")])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and out[0] == "user\trank\titem\tscore"
    want = recommend(model, [3, 0, 8], None, 4, user_block=ub, item_block=ib,
                     exclude=[[0, 1], [], [5, 6, 7]])
    got = np.array([line.split("\t") for line in out[1:]], dtype=float)
    np.testing.assert_array_equal(got[:, 0], np.repeat([3, 0, 8], 4))
    np.testing.assert_array_equal(got[:, 1], np.tile([1, 2, 3, 4], 3))
    np.testing.assert_array_equal(got[:, 2], want.indices.ravel())
    np.testing.assert_array_equal(got[:, 3], want.scores.ravel())  # repr round-trips
    # feature-row files, and a clear error for an exclude file of the wrong length
    from sklearn.datasets import dump_svmlight_file
    U, Iv = _rows()
    dump_svmlight_file(U, np.zeros(N_USERS), str(tmp_path / "u.libfm"))
    dump_svmlight_file(Iv, np.zeros(N_ITEMS), str(tmp_path / "i.libfm"))
    code = main(["recommend", str(path), "--users", str(tmp_path / "u.libfm"), "--items",
                 str(tmp_path / "i.libfm"), "-k", "2"])
    rows = np.array([line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]],
                    dtype=float)
    assert code == 0
    np.testing.assert_array_equal(rows[:, 2], recommend(model, U, Iv, 2).indices.ravel())
    code = main(["recommend", str(path), "--users", str(tmp_path / "u.libfm"), "--items",
                 str(tmp_path / "i.libfm"), "--exclude", str(tmp_path / "seen.txt")])
    assert code == 2 and "3 lines, expected one per user (12)" in capsys.readouterr().err


def test_docs_examples_print_what_the_page_says(tmp_path, monkeypatch, capsys):
    import pathlib
    import re

    from fmlearn.cli import main

    text = (pathlib.Path(__file__).parent.parent / "docs" / "recommend.md").read_text()
    monkeypatch.chdir(tmp_path)
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        if "load_movielens_100k" in block:  # the MovieLens guide needs the data set
            continue
        exec(compile(block, "docs/recommend.md", "exec"), {})  # noqa: S102
        printed = capsys.readouterr().out
        # every "print(...)  # value" line of the block shows what it printed
        shown = [c.strip() for c in re.findall(r"print\(.*?\)[ \t]*#[ \t]*(.*)", block)]
        shown += [c.strip() for c in re.findall(r"^# (\(.*|\S.*\])$", block, re.M)]
        for value in shown:
            assert value in printed, (value, printed)
    bash = re.findall(r"```bash\n(.*?)```", text, re.S)[-1]
    command = bash.split("\n#")[0].replace("\\\n", " ").split()
    assert main(command[1:]) == 0
    out = capsys.readouterr().out.splitlines()
    expected = [line[2:] for line in bash.splitlines() if line.startswith("# ") and
                "..." not in line]
    assert out[:len(expected)] == expected
