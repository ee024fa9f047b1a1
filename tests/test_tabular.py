"""TabularEncoder: raw tables (DataFrame, dicts, arrays) -> one-hot / numeric / hashed CSR
features with one feature group per column."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks

from fmlearn.encoders import TabularEncoder

pd = pytest.importorskip("pandas")


@parametrize_with_checks([TabularEncoder(), TabularEncoder(standardize=True)])
def test_sklearn_common_checks(estimator, check):
    check(estimator)


def _hand_one_hot(values, categories):
    out = np.zeros((len(values), len(categories)))
    for i, v in enumerate(values):
        if v in categories:
            out[i, categories.index(v)] = 1.0
    return out


def _table(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "user": rng.choice(["ann", "bob", "cid", "dan"], size=n),
        "hour": rng.integers(0, 24, size=n),                     # numeric (a number)
        "price": rng.normal(10.0, 3.0, size=n),
        "member": rng.random(n) < 0.5,                           # bool -> categorical
        "genre": pd.Categorical(rng.choice(["pop", "rock"], size=n)),
    })


def test_dataframe_matches_a_hand_built_one_hot():
    df = _table()
    enc = TabularEncoder(standardize=False).fit(df)
    assert enc.column_types_ == {"user": "categorical", "hour": "numeric", "price": "numeric",
                                 "member": "categorical", "genre": "categorical"}
    users, genres = ["ann", "bob", "cid", "dan"], ["pop", "rock"]
    expected = np.hstack([
        _hand_one_hot(list(df["user"]), users),
        df[["hour", "price"]].to_numpy(dtype=float),
        _hand_one_hot([str(b) for b in df["member"]], ["False", "True"]),
        _hand_one_hot(list(df["genre"]), genres),
    ])
    Z = enc.transform(df)
    assert sp.isspmatrix_csr(Z) and Z.dtype == np.float64 and Z.has_sorted_indices
    np.testing.assert_array_equal(Z.toarray(), expected)
    assert enc.get_feature_names_out().tolist() == (
        [f"user={u}" for u in users] + ["hour", "price", "member=False", "member=True"]
        + [f"genre={g}" for g in genres])
    assert enc.groups_.tolist() == [0] * 4 + [1, 2, 3, 3, 4, 4]
    assert enc.blocks_ == [(0, 4), (4, 5), (5, 6), (6, 8), (8, 10)]
    # the same table as dicts, and as an object array with positions, encodes the same
    rows = df.astype({"genre": object}).to_dict("records")
    np.testing.assert_array_equal(
        TabularEncoder(standardize=False).fit_transform(rows).toarray(), expected)
    arr = df.astype(object).to_numpy()
    enc_arr = TabularEncoder({1: "numeric", 2: "numeric"}, standardize=False).fit(arr)
    np.testing.assert_array_equal(enc_arr.transform(arr).toarray(), expected)


def test_numeric_columns_are_standardised_by_default():
    # the default chosen on real tables (benchmarks/bench_tabular_standardize.py): numeric
    # columns to zero mean and unit variance of fit, the one-hot blocks unchanged
    df = _table()
    Z = TabularEncoder().fit(df).transform(df).toarray()
    raw = TabularEncoder(standardize=False).fit(df).transform(df).toarray()
    for j, name in ((4, "hour"), (5, "price")):
        col = df[name].to_numpy(dtype=float)
        np.testing.assert_allclose(Z[:, j], (col - col.mean()) / col.std(), rtol=1e-12)
    keep = [j for j in range(Z.shape[1]) if j not in (4, 5)]
    np.testing.assert_array_equal(Z[:, keep], raw[:, keep])


def test_integer_ids_declared_categorical_and_standardised_numbers():
    X = np.array([[3, 10, 1.5], [7, 10, 2.5], [3, 11, 3.5], [7.0, 12, 4.5]])
    enc = TabularEncoder({0: "categorical", 1: "categorical"}, standardize=True).fit(X)
    assert enc.get_feature_names_out().tolist() == ["0=3", "0=7", "1=10", "1=11", "1=12", "2"]
    Z = enc.transform(X).toarray()
    np.testing.assert_array_equal(Z[:, :5], np.hstack([_hand_one_hot([3, 7, 3, 7], [3, 7]),
                                                       _hand_one_hot([10, 10, 11, 12],
                                                                     [10, 11, 12])]))
    col = X[:, 2]
    np.testing.assert_allclose(Z[:, 5], (col - col.mean()) / col.std())
    # an id read as an int, a float or a string is one category
    Zs = enc.transform(np.array([[7, 12, 1.5]], dtype=object))
    Zs2 = enc.transform(np.array([["7", "12", 1.5]], dtype=object))
    np.testing.assert_array_equal(Zs.toarray(), Zs2.toarray())
    assert Zs.toarray()[0, :5].tolist() == [0, 1, 0, 0, 1]


def test_unknown_categories_ignored_or_bucketed():
    train = [{"c": "a", "x": 1.0}, {"c": "b", "x": 2.0}, {"c": "a", "x": 3.0}]
    test = [{"c": "zzz", "x": 1.0}, {"c": "b", "x": 1.0}, {"x": 4.0}]   # unseen, known, absent
    ign = TabularEncoder(standardize=False).fit(train)
    np.testing.assert_array_equal(ign.transform(test).toarray(),
                                  [[0, 0, 1], [0, 1, 1], [0, 0, 4]])
    buck = TabularEncoder(handle_unknown="bucket", standardize=False).fit(train)
    assert buck.get_feature_names_out().tolist() == ["c=a", "c=b", "c=<unknown>", "x"]
    np.testing.assert_array_equal(buck.transform(test).toarray(),
                                  [[0, 0, 1, 1], [0, 1, 0, 1], [0, 0, 1, 4]])
    np.testing.assert_array_equal(buck.transform(train).toarray()[:, 2], 0)
    # rare training categories train the bucket
    rare = TabularEncoder(handle_unknown="bucket", min_frequency=2).fit(train)
    assert rare.get_feature_names_out().tolist() == ["c=a", "c=<unknown>", "x"]
    np.testing.assert_array_equal(rare.transform(train).toarray()[:, :2],
                                  [[1, 0], [0, 1], [1, 0]])


def test_hashing_is_deterministic_one_bucket_per_value_and_collisions_bounded():
    values = [f"item{i}" for i in range(300)]
    n_buckets = 4096
    enc = TabularEncoder({"item": "hashed"}, n_hash_buckets=n_buckets).fit(
        [{"item": v} for v in values])
    Z = enc.transform([{"item": v} for v in values])
    assert Z.shape == (300, n_buckets) and np.all(Z.getnnz(axis=1) == 1)
    np.testing.assert_array_equal(Z.data, 1.0)
    again = TabularEncoder({"item": "hashed"}, n_hash_buckets=n_buckets).fit(
        [{"item": "other"}]).transform([{"item": v} for v in values])
    assert (Z != again).nnz == 0                      # stateless: same value, same bucket
    # c values in B buckets: about c^2 / (2 B) = 11 colliding pairs; Poisson tail bound
    n_collided = 300 - np.unique(Z.indices).shape[0]
    assert n_collided <= 25
    # hash_above switches an inferred-categorical column with too many values to hashing
    auto = TabularEncoder(hash_above=100, n_hash_buckets=64).fit(
        [{"item": v, "kind": v[-1]} for v in values])
    assert auto.column_types_ == {"item": "hashed", "kind": "categorical"}
    assert auto.n_features_out_ == 64 + 10 and auto.groups_.tolist() == [0] * 64 + [1] * 10


def test_bad_input_is_named():
    enc = TabularEncoder()
    with pytest.raises(ValueError, match="'price' has missing values"):
        enc.fit([{"price": 1.0}, {"price": None}])
    with pytest.raises(ValueError, match="'price' contains NaN"):
        enc.fit(pd.DataFrame({"price": [1.0, np.nan]}))
    with pytest.raises(ValueError, match="'when' holds dates"):
        enc.fit(pd.DataFrame({"when": pd.to_datetime(["2024-01-01", "2024-01-02"])}))
    with pytest.raises(ValueError, match="names column"):
        TabularEncoder({"nope": "categorical"}).fit([{"a": 1}])
    with pytest.raises(ValueError, match="one of"):
        TabularEncoder({"a": "ordinal"}).fit([{"a": 1}])
    with pytest.raises(ValueError, match="handle_unknown"):
        TabularEncoder(handle_unknown="error").fit([{"a": 1}])
    fitted = TabularEncoder().fit(_table())
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['price'\]"):
        fitted.transform(_table().drop(columns="price"))
    arr = TabularEncoder().fit(np.ones((3, 2)))
    with pytest.raises(ValueError, match="X has 3 features, but TabularEncoder is expecting 2"):
        arr.transform(np.ones((3, 3)))
    with pytest.raises(TypeError, match="sparse input"):
        TabularEncoder().fit(sp.csr_matrix(np.ones((2, 2))))
    with pytest.raises(TypeError, match="list of dicts"):
        TabularEncoder().fit({"a": [1, 2]})


def test_red_team_inputs_end_in_a_clear_error():
    # Two columns of one name: fit filled both blocks from the last one (refused now, in fit
    # and in transform).
    dup = pd.DataFrame([["a", 1.0], ["b", 2.0]], columns=["c", "c"])
    with pytest.raises(ValueError, match=r"column name\(s\) \['c'\] appear more than once"):
        TabularEncoder().fit(dup)
    fitted = TabularEncoder().fit(pd.DataFrame({"c": ["a", "b"], "d": [1.0, 2.0]}))
    with pytest.raises(ValueError, match="appear more than once"):
        fitted.transform(dup.set_axis(["c", "c"], axis=1))
    assert not hasattr(TabularEncoder(), "columns_")
    # every category rarer than min_frequency: a bare IndexError from OneHotEncoder before
    rows = [{"c": v, "x": 1.0} for v in "aabbc"]
    with pytest.raises(ValueError, match="'c': every category is rarer than min_frequency=3 "
                                         r"\(the most frequent has 2 rows\)"):
        TabularEncoder(handle_unknown="bucket", min_frequency=3).fit(rows)
    assert TabularEncoder(handle_unknown="bucket", min_frequency=2).fit(rows).blocks_[0] == (0, 3)
    # hash buckets bounded as FeatureHasher bounds them (10**12 allocated 8 TB of groups_)
    with pytest.raises(ValueError, match="n_hash_buckets.*range"):
        TabularEncoder({"c": "hashed"}, n_hash_buckets=10**12).fit(rows)
    with pytest.raises(ValueError, match="more than the 2147483646 the FM kernels index"):
        TabularEncoder({"c": "hashed", "x": "hashed"}, n_hash_buckets=2**31 - 1).fit(rows)


def _ratings(n_users=60, n_items=40, n=3000, seed=0):
    """Planted rank-2 user x item ratings plus a numeric side column, as a DataFrame."""
    rng = np.random.default_rng(seed)
    U, V = rng.normal(size=(n_users, 2)), rng.normal(size=(n_items, 2))
    u, i = rng.integers(0, n_users, n), rng.integers(0, n_items, n)
    age = rng.uniform(18, 70, n)
    y = (U[u] * V[i]).sum(axis=1) + 0.02 * (age - 40) + 0.1 * rng.normal(size=n)
    return pd.DataFrame({"user": u, "item": i, "age": age}), y


def test_groups_drive_the_grouped_mcmc_fm():
    from fmlearn import FMRegressor

    df, y = _ratings()
    tr, te = slice(0, 2400), slice(2400, None)
    enc = TabularEncoder({"user": "categorical", "item": "categorical"},
                         standardize=True).fit(df[tr])
    assert np.bincount(enc.groups_).tolist() == [60, 40, 1]
    m = FMRegressor(2, solver="mcmc", n_iter=150, random_state=0, groups=enc.groups_)
    m.fit(enc.transform(df[tr]), y[tr])
    rmse = np.sqrt(np.mean((m.predict(enc.transform(df[te])) - y[te]) ** 2))
    baseline = np.std(y[te])                             # predicting the mean: ~1.0
    assert rmse < 0.35 * baseline, (rmse, baseline)
    # the same ids given as numbers learn nothing useful (the failure the encoder prevents)
    raw = FMRegressor(2, solver="mcmc", n_iter=150, random_state=0).fit(
        df[tr].to_numpy(dtype=float) / [60, 40, 70], y[tr])
    rmse_raw = np.sqrt(np.mean((raw.predict(df[te].to_numpy(dtype=float) / [60, 40, 70])
                                - y[te]) ** 2))
    assert rmse_raw > 0.8 * baseline


def test_in_a_pipeline_with_grid_search():
    from sklearn.dummy import DummyRegressor
    from sklearn.model_selection import GridSearchCV, cross_val_score
    from sklearn.pipeline import make_pipeline

    from fmlearn import FMRegressor

    df, y = _ratings(n=3000, seed=1)
    pipe = make_pipeline(TabularEncoder({"user": "categorical", "item": "categorical"},
                                        standardize=True),
                         FMRegressor(2, solver="als", n_iter=20, random_state=0))
    grid = GridSearchCV(pipe, {"tabularencoder__handle_unknown": ["ignore", "bucket"],
                               "fmregressor__reg_pairwise": [0.1, 10.0]},
                        cv=3, scoring="neg_root_mean_squared_error").fit(df, y)
    dummy = -cross_val_score(DummyRegressor(), df, y, cv=3,
                             scoring="neg_root_mean_squared_error").mean()
    # measured: 0.107 with reg_pairwise=0.1 (noise 0.1), 0.44 with 10, the mean 1.2
    assert -grid.best_score_ < 0.3 * dummy, (grid.best_score_, dummy)
    assert grid.best_params_["fmregressor__reg_pairwise"] == 0.1
    assert grid.best_estimator_.predict(df.iloc[:5]).shape == (5,)


def test_docs_examples_run(capsys):
    """Every ```python block of docs/tabular.md, in order, in one namespace, printing what
    the page says."""
    import os
    import re

    path = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "tabular.md")
    text = open(path, encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 4
    namespace = {}
    if not __import__("importlib").util.find_spec("skops"):
        blocks = blocks[:3]
    for code in blocks:
        exec(compile(code, "docs/tabular.md", "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "(1600, 81) ['user=0' 'item=0' 'hour']"
    rmse, _, mean = out[1].split()[:3]
    assert float(rmse) < 0.3 * float(mean)
    assert out[2] == "['city=Oslo', 'city=<unknown>']"
    assert out[3] == "[[0.0, 1.0], [0.0, 1.0]]"
    assert np.all(np.array(out[4].strip("[]").split(), dtype=float) < 0.5)
    if len(blocks) == 4:
        assert out[5] == "True"


def test_id_like_integer_columns_warn_whatever_their_cardinality():
    # a school id of 79 values (the case that cost 13% RMSE) is named by its name; an unnamed
    # column by its values (many whole numbers filling their range); quantities stay silent;
    # a declared type silences the warning
    import warnings

    from fmlearn.exceptions import IdColumnWarning

    rng = np.random.default_rng(0)
    n = 600
    df = pd.DataFrame({"schoolId": rng.integers(1, 80, n), "hour": rng.integers(0, 24, n),
                       "price": rng.normal(10.0, 3.0, n), "user_id": rng.integers(0, 5, n),
                       "paid": rng.integers(0, 2, n)})
    with pytest.warns(IdColumnWarning) as caught:
        TabularEncoder().fit(df)
    message = str(caught[0].message)
    assert "'schoolId' (79 distinct" in message and "'user_id' (5 distinct" in message
    assert "'hour'" not in message and "'price'" not in message and "'paid'" not in message
    assert "column_types={'schoolId': 'categorical', 'user_id': 'categorical'}" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdColumnWarning)
        TabularEncoder({"schoolId": "categorical", "user_id": "numeric"}).fit(df)
        TabularEncoder().fit(df[["hour", "price", "paid"]])
        TabularEncoder().fit(np.column_stack([rng.integers(0, 24, n), rng.normal(size=n)]))
    with pytest.warns(IdColumnWarning, match=r"column\(s\) 0 "):
        TabularEncoder().fit(np.column_stack([rng.permutation(n), rng.normal(size=n)]))


@pytest.mark.parametrize("name", ["FMRegressor", "OnlineFMRegressor", "ConvexFMRegressor"])
def test_a_string_column_without_the_encoder_points_to_it(name):
    import fmlearn

    df = pd.DataFrame({"city": ["Oslo", "Bergen"] * 10, "x": np.arange(20.0)})
    y = np.arange(20.0)
    with pytest.raises(ValueError, match=r"X holds text .*'Oslo'.*TabularEncoder"):
        getattr(fmlearn, name)().fit(df, y)
    est = getattr(fmlearn, name)().fit(np.c_[np.ones(20), np.arange(20.0)], y)
    with pytest.raises(ValueError, match="TabularEncoder"):
        est.predict(df.to_numpy())
