"""Tests of fmlearn.datasets: svmlight files, MovieLens-100K, synthetic generators.

No network and no real data: MovieLens is read from tiny fixtures (made-up users, items and
ratings in both on-disk layouts) under tests/fixtures/.
"""

import bz2
import gzip
import hashlib
import io
import os
import shutil
import urllib.error
import urllib.request
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn._data import canonical_csr
from fmlearn.datasets import (
    _movielens,
    fm_scores,
    iter_svmlight,
    load_movielens_100k,
    load_svmlight,
    make_fm,
    make_recommendation,
    movielens_split,
    save_svmlight,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
GROUPLENS = os.path.join(FIXTURES, "ml-100k-grouplens")
RECBOLE = os.path.join(FIXTURES, "ml-100k-recbole")
OPENERS = {"": open, ".gz": gzip.open, ".bz2": bz2.open}


def fm_oracle(X, w0, w, V):
    """Slow FM: w0 + <w, x> + sum_{j<l} <v_j, v_l> x_j x_l from the explicit pair sum."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    upper = np.triu(V @ V.T, k=1)  # <v_j, v_l> for j < l only
    return np.array([w0 + x @ w + x @ upper @ x for x in X])


def same_sparse(A, B):
    return A.shape == B.shape and (sp.csr_matrix(A) != sp.csr_matrix(B)).nnz == 0


def write(path, text):
    ext = os.path.splitext(path)[1]
    with OPENERS.get(ext, open)(path, "wb") as f:
        f.write(text.encode())


def messy_file_text(rng, n_lines, n_features=8):
    """svmlight text with comments, blank lines, tail comments, CRLF, a long line, no final
    newline at random: everything the chunk boundaries must survive."""
    lines = []
    for _ in range(n_lines):
        r = rng.random()
        if r < 0.12:
            lines.append("# comment " + "x" * int(rng.integers(0, 30)))
        elif r < 0.2:
            lines.append(" " * int(rng.integers(0, 3)))
        else:
            n_nz = int(rng.integers(0, 5)) if r < 0.95 else n_features  # some long lines
            idx = np.sort(rng.choice(n_features, n_nz, replace=False))
            line = f"{rng.integers(-2, 3)} " + " ".join(
                f"{i}:{rng.integers(1, 9) / 4}" for i in idx
            )
            if rng.random() < 0.2:
                line += " # tail"
            lines.append(line)
    nl = "\r\n" if rng.random() < 0.3 else "\n"
    return nl.join(lines) + (nl if rng.random() < 0.5 else "")


# --------------------------------------------------------------------------- svmlight files


@pytest.mark.parametrize("ext", ["", ".gz", ".bz2"])
@pytest.mark.parametrize("zero_based", [True, False])
def test_save_load_round_trip_is_exact_for_short_decimals(tmp_path, ext, zero_based):
    rng = np.random.default_rng(0)
    X = np.round(rng.normal(size=(40, 7)), 6) * (rng.random((40, 7)) < 0.4)
    X[:, -1] = 0.0  # an all-zero last column: n_features must keep the width
    y = np.round(rng.normal(size=40), 9)
    path = tmp_path / f"data.libfm{ext}"
    save_svmlight(X, y, path, zero_based=zero_based)
    X2, y2 = load_svmlight(path, n_features=7, zero_based=zero_based)
    assert sp.issparse(X2) and X2.shape == (40, 7)
    np.testing.assert_array_equal(X2.toarray(), X)
    np.testing.assert_array_equal(y2, y)
    # the kernels' index dtypes: a fit reads the rows in place (no narrowed copy)
    assert X2.indices.dtype == X2.indptr.dtype == np.int32
    assert canonical_csr(X2, X2.dtype) is X2
    # dtype float32 is honoured
    X3, _ = load_svmlight(path, n_features=7, zero_based=zero_based, dtype=np.float32)
    assert X3.dtype == np.float32


def test_round_trip_of_full_precision_floats_is_within_16_digits(tmp_path):
    rng = np.random.default_rng(1)
    X = sp.csr_matrix(rng.normal(size=(30, 5)) * (rng.random((30, 5)) < 0.5))
    y = rng.normal(size=30)
    save_svmlight(X, y, tmp_path / "f.txt")
    X2, y2 = load_svmlight(tmp_path / "f.txt", n_features=5, zero_based=True)
    np.testing.assert_allclose(X2.toarray(), X.toarray(), rtol=1e-15, atol=0)
    np.testing.assert_allclose(y2, y, rtol=1e-15, atol=0)


@pytest.mark.parametrize("ext", ["", ".gz", ".bz2"])
def test_chunks_concatenate_to_the_whole_file(tmp_path, ext):
    rng = np.random.default_rng(2)
    for trial in range(8):
        path = tmp_path / f"m{trial}.txt{ext}"
        write(path, messy_file_text(rng, int(rng.integers(1, 40))))
        for kwargs in ({"n_features": 8, "zero_based": True}, {}):
            X, y = load_svmlight(path, **kwargs)
            for size in (1, 2, 5, 23, 64, 10**6):
                chunks = list(iter_svmlight(path, chunk_size_bytes=size, **kwargs))
                assert all(Xc.shape[1] == X.shape[1] for Xc, _ in chunks)
                assert all(Xc.shape[0] > 0 for Xc, _ in chunks)
                yc = np.concatenate([c[1] for c in chunks]) if chunks else np.zeros(0)
                np.testing.assert_array_equal(yc, y)
                if chunks:
                    assert same_sparse(sp.vstack([c[0] for c in chunks]), X)


@pytest.mark.parametrize("ext", ["", ".bz2"])
def test_chunks_of_a_larger_file_are_bounded_and_complete(tmp_path, ext):
    rng = np.random.default_rng(3)
    X = sp.csr_matrix(rng.random((3000, 40)) * (rng.random((3000, 40)) < 0.1))
    X.data = np.round(X.data, 4)
    y = rng.integers(1, 6, size=3000).astype(float)
    path = tmp_path / f"big.libfm{ext}"
    save_svmlight(X, y, path)
    chunks = list(iter_svmlight(path, chunk_size_bytes=4096, n_features=40, zero_based=True))
    assert len(chunks) > 10
    # a chunk holds about chunk_size_bytes of text: at most that plus one line
    with OPENERS[ext](path, "rb") as f:
        sizes = [len(line) for line in f if not line.startswith(b"#")]
    ends = np.cumsum([c[0].shape[0] for c in chunks])
    chunk_bytes = np.diff(np.concatenate([[0], np.cumsum(sizes)[ends - 1]]))
    assert chunk_bytes.max() <= 4096 + max(sizes)
    assert same_sparse(sp.vstack([c[0] for c in chunks]), X)
    np.testing.assert_array_equal(np.concatenate([c[1] for c in chunks]), y)


def test_iter_decides_width_and_base_for_the_whole_file(tmp_path):
    # Index 0 and the largest index appear only in the last lines: a per-chunk guess would
    # read the first chunks one-based and narrower.
    lines = ["1 3:1 5:2"] * 50 + ["2 0:1 17:3"]
    path = tmp_path / "late.txt"
    write(path, "\n".join(lines) + "\n")
    X, y = load_svmlight(path)  # zero_based="auto": index 0 occurs, so zero-based
    chunks = list(iter_svmlight(path, chunk_size_bytes=64))
    assert len(chunks) > 3
    assert {c[0].shape[1] for c in chunks} == {18} == {X.shape[1]}
    assert same_sparse(sp.vstack([c[0] for c in chunks]), X)
    # without index 0 the same file is one-based everywhere
    write(path, "\n".join(lines[:-1] + ["2 1:1 17:3"]) + "\n")
    chunks = list(iter_svmlight(path, chunk_size_bytes=64))
    assert {c[0].shape[1] for c in chunks} == {17}
    assert chunks[0][0][0].indices.tolist() == [2, 4]


BAD_LINES = [
    "1 3:1 2:1",  # indices not increasing
    "1 2:abc",  # value not a number
    "1 x:1",  # index not a number
    "1 1:1 junk",  # token without colon
    "oops 1:1",  # target not a number
    "1 -4:1",  # negative index
]


@pytest.mark.parametrize("bad", BAD_LINES)
@pytest.mark.parametrize("ext", ["", ".bz2"])
def test_malformed_line_gives_value_error_naming_file_and_line(tmp_path, bad, ext):
    lines = ["# header comment"] + ["1 1:1 3:0.5"] * 60
    lines[37 - 1] = bad
    path = tmp_path / f"broken.libfm{ext}"
    write(path, "\n".join(lines) + "\n")
    name = os.fspath(path)
    for call in (
        lambda: load_svmlight(path),
        lambda: load_svmlight(path, n_features=9, zero_based=True),
        lambda: list(iter_svmlight(path, chunk_size_bytes=100)),
        lambda: list(iter_svmlight(path, chunk_size_bytes=100, n_features=9, zero_based=True)),
    ):
        with pytest.raises(ValueError, match="line 37") as info:
            call()
        assert name in str(info.value) and bad in str(info.value)


def test_line_numbers_count_newlines_like_the_parser(tmp_path):
    # A lone carriage return does not end a line for the parser, nor for the line count.
    path = tmp_path / "cr.txt"
    path.write_bytes(b"1 1:1 \r 2:1\r\n1 1:1\r\n1 3:1 2:1\r\n1 1:1\r\n")
    with pytest.raises(ValueError, match="line 3: Feature indices"):
        load_svmlight(path)


def test_index_zero_in_a_one_based_file_is_located(tmp_path):
    path = tmp_path / "one.txt"
    write(path, "1 1:1\n1 2:1\n1 0:1\n")
    with pytest.raises(ValueError, match=r"line 3: Invalid index 0"):
        load_svmlight(path, zero_based=False)
    with pytest.raises(ValueError, match=r"line 3: Invalid index 0"):
        list(iter_svmlight(path, zero_based=False))


def test_too_small_n_features_is_reported_with_the_file(tmp_path):
    path = tmp_path / "wide.txt"
    write(path, "1 0:1\n1 0:1 7:2\n")
    for call in (
        lambda: load_svmlight(path, n_features=5),
        lambda: list(iter_svmlight(path, n_features=5)),
        lambda: list(iter_svmlight(path, n_features=5, zero_based=True)),
    ):
        with pytest.raises(ValueError, match="n_features") as info:
            call()
        assert os.fspath(path) in str(info.value)
    with pytest.raises(ValueError, match="line 2"):
        load_svmlight(path, n_features=5, zero_based=True)


@pytest.mark.parametrize("ext", [".gz", ".bz2"])
def test_corrupt_compressed_file_is_a_value_error(tmp_path, ext):
    path = tmp_path / f"data.txt{ext}"
    save_svmlight(np.eye(50), np.arange(50.0), path)
    payload = path.read_bytes()
    path.write_bytes(payload[: len(payload) // 2])  # truncated
    for call in (lambda: load_svmlight(path), lambda: list(iter_svmlight(path))):
        with pytest.raises(ValueError, match="corrupt or truncated") as info:
            call()
        assert os.fspath(path) in str(info.value)


def test_bad_arguments_fail_at_the_call(tmp_path):
    path = tmp_path / "ok.txt"
    write(path, "1 1:1\n")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        load_svmlight(tmp_path / "nope.txt")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        iter_svmlight(tmp_path / "nope.txt")
    with pytest.raises(ValueError, match="chunk_size_bytes"):
        iter_svmlight(path, chunk_size_bytes=0)
    with pytest.raises(ValueError, match="zero_based"):
        load_svmlight(path, zero_based="yes")
    with pytest.raises(ValueError, match="n_features"):
        load_svmlight(path, n_features=0)


def test_save_is_atomic(tmp_path):
    path = tmp_path / "keep.txt"
    save_svmlight(np.eye(3), [1.0, 2.0, 3.0], path)
    before = path.read_bytes()
    with pytest.raises(ValueError):
        save_svmlight(np.eye(3), [1.0, 2.0], path)  # y of the wrong length
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["keep.txt"]  # no temporary file left behind


# ------------------------------------------------------------------------------- MovieLens


def read_ratings_by_hand(path, header):
    with open(path) as f:
        rows = [line.split("\t") for line in f.read().splitlines()[int(header) :]]
    return np.array([[float(v) for v in r] for r in rows])


@pytest.mark.parametrize("side", [False, True])
def test_both_movielens_layouts_give_the_same_data(side):
    a = load_movielens_100k(GROUPLENS, side_features=side)
    b = load_movielens_100k(os.path.join(RECBOLE, "ml-100k.inter"), side_features=side)
    c = load_movielens_100k(os.path.join(GROUPLENS, "u.data"), side_features=side)
    assert (a.layout, b.layout) == ("grouplens", "recbole")
    for other in (b, c):
        assert same_sparse(a.X, other.X)
        for key in ("y", "user_ids", "item_ids", "timestamps", "feature_names"):
            np.testing.assert_array_equal(a[key], other[key])


def test_movielens_rows_are_one_hot_user_then_item_in_file_order():
    ml = load_movielens_100k(GROUPLENS)
    raw = read_ratings_by_hand(os.path.join(GROUPLENS, "u.data"), header=False)
    np.testing.assert_array_equal(ml.user_ids, raw[:, 0])
    np.testing.assert_array_equal(ml.item_ids, raw[:, 1])
    np.testing.assert_array_equal(ml.y, raw[:, 2])
    np.testing.assert_array_equal(ml.timestamps, raw[:, 3])
    users, items = np.unique(raw[:, 0]), np.unique(raw[:, 1])
    assert (ml.n_users, ml.n_items) == (len(users), len(items))
    assert ml.X.shape == (len(raw), len(users) + len(items))
    assert ml.X.dtype == np.float64 and np.all(ml.X.data == 1.0)
    assert np.all(np.diff(ml.X.indptr) == 2)
    names = ml.feature_names
    for r in range(ml.X.shape[0]):
        cols = ml.X.indices[ml.X.indptr[r] : ml.X.indptr[r + 1]]
        assert names[cols[0]] == f"user={ml.user_ids[r]}"
        assert names[cols[1]] == f"item={ml.item_ids[r]}"
        assert cols[0] < ml.n_users <= cols[1]


def test_movielens_side_features_match_the_side_files():
    ml = load_movielens_100k(RECBOLE, side_features=True)
    base = load_movielens_100k(RECBOLE)
    d0 = base.X.shape[1]
    assert same_sparse(ml.X[:, :d0], base.X)
    names = list(ml.feature_names)

    def active(r):
        cols = ml.X.indices[ml.X.indptr[r] : ml.X.indptr[r + 1]]
        return {names[c] for c in cols if c >= d0}

    users = {}
    with open(os.path.join(RECBOLE, "ml-100k.user")) as f:
        for line in f.read().splitlines()[1:]:
            uid, age, gender, occupation, _ = line.split("\t")
            users[int(uid)] = (int(age), gender, occupation)
    items = {}
    with open(os.path.join(RECBOLE, "ml-100k.item"), encoding="utf-8") as f:
        for line in f.read().splitlines()[1:]:
            iid, _, year, genres = line.split("\t")
            items[int(iid)] = (year, genres.split())
    groups = [(0, 17, "<18"), (18, 24, "18-24"), (25, 34, "25-34"), (35, 44, "35-44"),
              (45, 49, "45-49"), (50, 55, "50-55"), (56, 200, "56+")]  # fmt: skip
    for r in range(ml.X.shape[0]):
        age, gender, occupation = users[ml.user_ids[r]]
        year, genres = items[ml.item_ids[r]]
        group = next(g for lo, hi, g in groups if lo <= age <= hi)
        expected = {f"user_age={group}", f"user_gender={gender}", f"user_occupation={occupation}"}
        expected |= {f"item_genre={g}" for g in genres}
        if year.isdigit():
            expected.add(f"item_decade={int(year) // 10 * 10}s")
        assert active(r) == expected
    # the unknown-year item (8) has no decade; vocabularies include unrated users' values
    assert not any(n.startswith("item_decade") for n in active(list(ml.item_ids).index(8)))
    assert "user_occupation=writer" in names  # only user 4, who rated nothing
    assert "item_decade=1950s" in names  # only item 6, never rated


def test_movielens_default_path_and_subfolder(tmp_path, monkeypatch):
    monkeypatch.setenv("FMLEARN_DATA", os.fspath(tmp_path))
    with pytest.raises(FileNotFoundError) as info:
        load_movielens_100k()
    message = str(info.value)
    target = os.path.join(os.fspath(tmp_path), "ml-100k")
    for needle in (target, "u.data", "ml-100k.inter", "download=True"):
        assert needle in message
    shutil.copytree(RECBOLE, target)
    ml = load_movielens_100k()
    assert ml.layout == "recbole" and ml.path == os.path.join(target, "ml-100k.inter")
    # a folder holding an ml-100k sub-folder works too
    assert same_sparse(load_movielens_100k(tmp_path).X, ml.X)


def fake_zip():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("ml-100k/", "")
        for name in ("u.data", "u.user", "u.item"):
            with open(os.path.join(GROUPLENS, name), "rb") as f:
                z.writestr(f"ml-100k/{name}", f.read())
        z.writestr("ml-100k/README", "fixture")
        z.writestr("../evil", "must not be written")
    return buf.getvalue()


class FakeResponse(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def test_movielens_download_is_verified_and_unpacked(tmp_path, monkeypatch):
    payload = fake_zip()
    calls = []

    def urlopen(url, timeout=None):
        calls.append(url)
        return FakeResponse(payload)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    folder = tmp_path / "ml"
    # the real checksum does not match the fake archive: refused, nothing usable written
    with pytest.raises(ValueError, match="MD5"):
        load_movielens_100k(folder, download=True)
    assert not (folder / "u.data").exists()
    monkeypatch.setattr(
        _movielens, "GROUPLENS_MD5", hashlib.md5(payload, usedforsecurity=False).hexdigest()
    )
    ml = load_movielens_100k(folder, download=True, side_features=True)
    assert calls == [_movielens.GROUPLENS_URL] * 2
    assert sorted(os.listdir(folder)) == ["README", "u.data", "u.item", "u.user"]
    assert not (tmp_path / "evil").exists()
    ref = load_movielens_100k(GROUPLENS, side_features=True)
    assert same_sparse(ml.X, ref.X) and np.array_equal(ml.y, ref.y)
    load_movielens_100k(folder, download=True)  # present now: no second download
    assert len(calls) == 2


def test_movielens_download_offline_says_what_to_do(tmp_path, monkeypatch):
    def urlopen(url, timeout=None):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    with pytest.raises(ConnectionError) as info:
        load_movielens_100k(tmp_path / "ml", download=True)
    message = str(info.value)
    for needle in ("name resolution", os.fspath(tmp_path / "ml"), "u.data", "ml-100k.inter"):
        assert needle in message


def test_movielens_malformed_files(tmp_path):
    folder = tmp_path / "g"
    shutil.copytree(GROUPLENS, folder)
    lines = (folder / "u.data").read_text().splitlines()
    lines[6] = "5\tseven\t3\t881250949"
    (folder / "u.data").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="line 7") as info:
        load_movielens_100k(folder)
    assert os.fspath(folder / "u.data") in str(info.value)
    lines[6] = "5\t7\t3"
    (folder / "u.data").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="line 7: 3 fields"):
        load_movielens_100k(folder)
    lines[6] = "5\t7\tnan\t881250949"
    (folder / "u.data").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"NaN or infinity on data row 7 \(header"):
        load_movielens_100k(folder)
    (folder / "u.data").write_text("")
    with pytest.raises(ValueError, match="no rating"):
        load_movielens_100k(folder)
    shutil.copy(os.path.join(GROUPLENS, "u.data"), folder / "u.data")
    os.remove(folder / "u.item")
    load_movielens_100k(folder)  # side files are only needed for side features
    with pytest.raises(FileNotFoundError, match="u.item"):
        load_movielens_100k(folder, side_features=True)
    with pytest.raises(ValueError, match="layout"):
        load_movielens_100k(folder / "u.user")


def test_movielens_split_follows_the_protocol():
    for seed in (0, 1, 2):
        train, test = movielens_split(100000, seed)
        idx = np.random.default_rng(seed).permutation(100000)
        np.testing.assert_array_equal(train, idx[:75000])
        np.testing.assert_array_equal(test, idx[75000:])
        assert len(np.intersect1d(train, test)) == 0
        np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(100000))
        again = movielens_split(100000, seed)
        assert np.array_equal(again[0], train) and np.array_equal(again[1], test)
    assert not np.array_equal(movielens_split(100000, 0)[0], movielens_split(100000, 1)[0])
    ml = load_movielens_100k(GROUPLENS)
    train, test = movielens_split(ml.X.shape[0], 0, n_train=30)
    assert (len(train), len(test)) == (30, 10)
    with pytest.raises(ValueError, match="n_train"):
        movielens_split(10, 0, n_train=11)
    with pytest.raises(TypeError, match="n_rows"):
        movielens_split(10.0, 0)


# ------------------------------------------------------------------------ synthetic makers


@pytest.mark.parametrize("x", ["gaussian", "onehot", "sparse"])
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_make_fm_truth_reproduces_y_without_noise(x, task):
    X, y, d = make_fm(300, 12, 3, x=x, n_fields=3, density=0.3, noise=0.0, task=task,
                      random_state=4)
    assert X.shape == (300, 12) and d.w.shape == (12,) and d.V.shape == (12, 3)
    assert sp.issparse(X) == (x != "gaussian")
    f = fm_oracle(X, d.w0, d.w, d.V)
    np.testing.assert_allclose(d.scores, f, rtol=1e-12, atol=1e-12)
    if task == "regression":
        np.testing.assert_allclose(y, f, rtol=1e-12, atol=1e-12)
    else:
        clear = np.abs(f) > 1e-9
        np.testing.assert_array_equal(y[clear], np.where(f[clear] >= 0, 1, -1))
        assert set(np.unique(y)) == {-1, 1}


def test_make_fm_is_reproducible_and_noise_only_changes_y():
    Xa, ya, a = make_fm(100, 6, 2, x="onehot", noise=0.3, random_state=7)
    Xb, yb, b = make_fm(100, 6, 2, x="onehot", noise=0.3, random_state=7)
    Xc, yc, c = make_fm(100, 6, 2, x="onehot", noise=0.0, random_state=7)
    _, _, e = make_fm(100, 6, 2, x="onehot", noise=0.3, random_state=8)
    np.testing.assert_array_equal(ya, yb)
    for key in ("w", "V", "scores"):
        np.testing.assert_array_equal(a[key], b[key])
    assert same_sparse(Xa, Xb) and a.w0 == b.w0
    assert same_sparse(Xa, Xc) and np.array_equal(a.V, c.V) and not np.array_equal(ya, yc)
    np.testing.assert_allclose(np.std(ya - yc), 0.3, rtol=0.3)
    assert not np.array_equal(a.V, e.V)


def test_make_fm_onehot_has_one_active_feature_per_field():
    X, _, _ = make_fm(500, 10, 2, x="onehot", n_fields=3, random_state=0)
    bounds = [0, 3, 7, 10]  # 10 columns cut into 3 near-equal fields
    X = X.toarray()
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        np.testing.assert_array_equal(X[:, lo:hi].sum(axis=1), 1.0)
        assert np.all(X[:, lo:hi].sum(axis=0) > 0)  # every category drawn
    with pytest.raises(ValueError, match="n_fields"):
        make_fm(10, 2, 2, x="onehot", n_fields=3)
    with pytest.raises(ValueError, match="task"):
        make_fm(10, 2, 2, task="ranking")


def test_fm_scores_dense_equals_sparse_equals_oracle():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(20, 6)) * (rng.random((20, 6)) < 0.5)
    w0, w, V = 0.3, rng.normal(size=6), rng.normal(size=(6, 4))
    f = fm_oracle(X, w0, w, V)
    np.testing.assert_allclose(fm_scores(X, w0, w, V), f, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fm_scores(sp.csr_matrix(X), w0, w, V), f, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("integer_ratings", [True, False])
def test_make_recommendation_truth_reproduces_ratings(integer_ratings):
    d = make_recommendation(
        30, 20, 400, rank=3, noise=0.0, integer_ratings=integer_ratings, random_state=1
    )
    assert d.X.shape == (400, 50) and d.w.shape == (50,) and d.V.shape == (50, 3)
    f = fm_oracle(d.X, d.w0, d.w, d.V)
    np.testing.assert_allclose(d.scores, f, rtol=1e-12, atol=1e-12)
    if integer_ratings:
        clear = np.abs(f - np.floor(f) - 0.5) > 1e-9  # away from a rounding tie
        np.testing.assert_array_equal(d.y[clear], np.clip(np.rint(f[clear]), 1, 5))
    else:
        np.testing.assert_allclose(d.y, np.clip(f, 1, 5), rtol=1e-12, atol=1e-12)
    assert d.y.min() >= 1 and d.y.max() <= 5


def test_make_recommendation_is_movielens_like():
    d = make_recommendation(random_state=0)
    e = make_recommendation(random_state=0)
    assert same_sparse(d.X, e.X) and np.array_equal(d.y, e.y) and np.array_equal(d.V, e.V)
    assert d.X.shape == (10000, 350)
    np.testing.assert_array_equal(np.diff(d.X.indptr), 2)
    cols = d.X.indices.reshape(-1, 2)
    np.testing.assert_array_equal(cols[:, 0], d.user_ids - 1)
    np.testing.assert_array_equal(cols[:, 1], d.n_users + d.item_ids - 1)
    assert d.feature_names[cols[0, 0]] == f"user={d.user_ids[0]}"
    assert len(np.unique(d.user_ids * 1000 + d.item_ids)) == 10000  # distinct pairs
    assert set(np.unique(d.y)) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    assert 0.7 < d.y.std() < 1.4 and 3.0 < d.y.mean() < 4.0  # MovieLens: 1.13 and 3.53
    with pytest.raises(ValueError, match="unique_pairs"):
        make_recommendation(3, 3, 10)
    assert make_recommendation(3, 3, 10, unique_pairs=False, random_state=0).X.shape == (10, 6)


# -- hardening: values, outlying indices, the writer ----------------------------------------
@pytest.mark.parametrize("ext", ["", ".gz"])
@pytest.mark.parametrize("token", ["nan", "inf", "-Infinity"])
def test_non_finite_values_are_refused_with_file_and_line(tmp_path, token, ext):
    path = tmp_path / f"v.libfm{ext}"
    text = "1 0:1\n# comment\n\n2 1:1\n" * 30 + f"3 0:{token}\n" + "4 1:1\n" * 5
    opener = gzip.open if ext else open
    with opener(path, "wt") as f:
        f.write(text)
    line = text[:text.index(token)].count("\n") + 1
    with pytest.raises(ValueError, match=rf"v.libfm{ext}', line {line}: a value is NaN"):
        load_svmlight(path, zero_based=True)
    for chunk in (16, 1 << 20):  # the chunked reader counts lines across chunks
        with pytest.raises(ValueError, match=rf"line {line}: a value is NaN"):
            list(iter_svmlight(path, chunk_size_bytes=chunk, n_features=2, zero_based=True))
    path.write_bytes(b"")
    with opener(path, "wt") as f:
        f.write(f"1 0:1\n{token} 1:1\n")
    with pytest.raises(ValueError, match="line 2: a value is NaN"):
        load_svmlight(path)


@pytest.mark.parametrize("typo", [2**27, 2**30])
def test_a_typo_feature_index_is_an_error_not_a_huge_model(tmp_path, typo):
    path = tmp_path / "t.libfm"
    path.write_text("1 0:1 3:1\n2 7:1 12:1\n" * 10 + f"3 2:1 {typo}:1\n" + "4 1:1\n")
    with pytest.raises(ValueError, match=rf"line 21: a feature index would make a model of "
                                         rf"{typo + 1} features"):
        load_svmlight(path, zero_based=True)
    with pytest.raises(ValueError, match="line 21"):
        next(iter_svmlight(path, zero_based=True))
    # asked for: accepted (the matrix is sparse; a model of that width is the user's call)
    X, _ = load_svmlight(path, zero_based=True, max_features=typo + 1)
    assert X.shape == (22, typo + 1)
    assert next(iter_svmlight(path, zero_based=True, max_features=typo + 1))[0].shape[1] == \
        typo + 1
    with pytest.raises(ValueError, match="more than max_features=100"):
        load_svmlight(path, zero_based=True, max_features=100)


def test_wide_files_that_fill_their_range_are_not_outliers(tmp_path):
    # hashed features: large indices, but no gap of 100x between the two largest
    rng = np.random.default_rng(0)
    idx = np.sort(rng.choice(2**20, size=(50, 3), replace=False), axis=1)
    path = tmp_path / "h.libfm"
    path.write_text("".join(f"1 {a}:1 {b}:1 {c}:1\n" for a, b, c in idx))
    X, _ = load_svmlight(path, zero_based=True)
    assert X.shape[1] == idx.max() + 1
    # small files are never refused, whatever the ratio (a model of < 65,536 features)
    path.write_text("1 0:1\n2 60000:1\n")
    assert load_svmlight(path, zero_based=True)[0].shape == (2, 60001)


def test_svmlight_writer_gives_ordinary_permissions_and_refuses_non_files(tmp_path):
    import stat

    old = os.umask(0o027)
    try:
        save_svmlight(np.eye(2), [1.0, 2.0], tmp_path / "p.libfm")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "p.libfm").st_mode) == 0o640
    with pytest.raises(ValueError, match="directory, not a regular file"):
        save_svmlight(np.eye(2), [1.0, 2.0], tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["p.libfm"]
