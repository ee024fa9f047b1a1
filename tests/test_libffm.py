"""The libffm reader and writer (fmlearn.datasets._libffm): round trips (plain, .gz, .bz2),
chunks equal to the whole file, resumed reads, hashing, exact numbers, and errors that name
the file and the line for every kind of bad line."""

import gzip

import numpy as np
import pytest
import scipy.sparse as sp

from fmlearn.datasets import (
    hashed_fields,
    iter_libffm,
    load_libffm,
    load_libffm_files,
    save_libffm,
    scan_libffm,
)
from fmlearn.datasets._libffm import iter_positioned


def _write(tmp_path, text, name="a.ffm"):
    path = tmp_path / name
    if name.endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return str(path)


def _random(n=300, d=40, F=5, seed=0):
    rng = np.random.default_rng(seed)
    fields = (np.arange(d) % F).astype(np.int32)
    X = sp.random(n, d, density=0.15, format="csr", random_state=seed)
    X.data = np.round(rng.normal(size=X.nnz), 3)
    X.data[::7] = 1.0
    X.eliminate_zeros()
    y = rng.integers(0, 2, size=n).astype(float)
    return X, y, fields


@pytest.mark.parametrize("name", ["a.ffm", "a.ffm.gz", "a.ffm.bz2"])
def test_round_trip(tmp_path, name):
    X, y, fields = _random()
    path = str(tmp_path / name)
    save_libffm(X, y, fields, path)
    X2, y2, f2 = load_libffm(path, fields=fields)
    assert (X2 != X).nnz == 0 and np.array_equal(y2, y)
    X3, _, f3 = load_libffm(path)  # the map read back from the file
    assert (X3 != X[:, :X3.shape[1]]).nnz == 0
    seen = np.unique(X.indices)
    np.testing.assert_array_equal(f3[seen], fields[seen])


def test_float32_values_and_long_numbers_come_back_exactly(tmp_path):
    text = ("1 0:0:0.1 1:1:1e-30 2:2:123456789012345678901 3:3:-2.5e+3\n"
            "0 0:4:3.14159265358979 1:5:.5 2:6:5. 3:7:0.000001234\n")
    X, y, _ = load_libffm(_write(tmp_path, text))
    want = [0.1, 1e-30, 123456789012345678901.0, -2500.0, 3.14159265358979, 0.5, 5.0,
            0.000001234]
    assert X.data.tolist() == want  # correctly rounded, as strtod
    X32 = sp.random(20, 10, density=0.5, format="csr", random_state=1, dtype=np.float32)
    path = str(tmp_path / "f32.ffm")
    save_libffm(X32, np.zeros(20), np.arange(10) % 2, path)
    back, _, _ = load_libffm(path, fields=np.arange(10) % 2, dtype=np.float32)
    np.testing.assert_array_equal(back.toarray(), X32.toarray())


def test_chunks_equal_the_whole_file_and_resume_at_a_chunk(tmp_path):
    X, y, fields = _random(n=500)
    for name in ("c.ffm", "c.ffm.gz"):
        path = str(tmp_path / name)
        save_libffm(X, y, fields, path)
        chunks = list(iter_libffm(path, chunk_size_bytes=700, fields=fields))
        assert len(chunks) > 5
        assert (sp.vstack([c[0] for c in chunks]) != X).nnz == 0
        assert np.array_equal(np.concatenate([c[1] for c in chunks]), y)
        pos = list(iter_positioned(path, 700, fields=fields))
        third = pos[3][2]
        rest = list(iter_positioned(path, 700, third, fields=fields))
        # the same chunks as the uninterrupted read from there (a resumed fit_stream)
        assert [(c[2], c[3]) for c in rest] == [(c[2], c[3]) for c in pos[3:]]
        assert (sp.vstack([c[0] for c in rest]) != sp.vstack([c[0] for c in pos[3:]])).nnz == 0


def test_comments_blank_lines_and_separators(tmp_path):
    text = "# a header\n\n1\t0:3:1  1:1:2 # trailing\n   \n-1 1:0:1\r\n0\n"
    X, y, fields = load_libffm(_write(tmp_path, text))
    assert y.tolist() == [1.0, -1.0, 0.0] and X.shape == (3, 4)
    assert X.toarray().tolist() == [[0, 2, 0, 1], [1, 0, 0, 0], [0, 0, 0, 0]]
    assert fields.tolist() == [1, 1, 0, 0]  # feature 2 never occurs: field 0


def test_scan_and_several_files_share_one_map(tmp_path):
    a = _write(tmp_path, "1 0:0:1 1:5:1\n0 0:1:1 1:6:1\n", "tr.ffm")
    b = _write(tmp_path, "1 0:2:1 1:7:1\n", "te.ffm")
    info = scan_libffm(a)
    assert (info.n_rows, info.n_features, info.n_fields) == (2, 7, 2)
    assert info.labels.tolist() == [0.0, 1.0]
    X1, y1, X2, y2, fields = load_libffm_files([a, b])
    assert X1.shape == (2, 8) and X2.shape == (1, 8)
    assert fields.tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    c = _write(tmp_path, "1 1:0:1\n", "conflict.ffm")
    with pytest.raises(ValueError, match=r"conflict.ffm.*line 1: feature 0 is in field 1 here "
                                         r"but in field 0 in .*tr.ffm"):
        load_libffm_files([a, c])


def test_hashing_maps_ids_to_buckets_of_their_field(tmp_path):
    text = "1 0:123456789012:1 1:7:2 1:9:3\n0 0:5:1 2:123456789012:1\n"
    X, y, fields = load_libffm(_write(tmp_path, text), hash_buckets=4)
    assert X.shape == (2, 12) and fields.tolist() == hashed_fields(3, 4).tolist()
    cols = [X.indices[X.indptr[i]:X.indptr[i + 1]] for i in range(2)]
    assert all(fields[c].tolist() == sorted(fields[c].tolist()) for c in cols)
    assert X[0].sum() == 6.0  # a collision within a row sums its values
    assert set(fields[cols[1]].tolist()) == {0, 2}
    # the same id in two fields goes to two columns, each in its own field
    again, _, _ = load_libffm(_write(tmp_path, text, "b.ffm"), hash_buckets=4, n_fields=3)
    assert (again != X).nnz == 0


@pytest.mark.parametrize("line, message", [
    ("1 0:3:1 5:1", "token '5:1' has no field"),
    ("1 0:3:1 abc", "token 'abc' is not 'field:feature:value'"),
    ("1 0:3:1 1:2:3:4", "is not 'field:feature:value'"),
    ("1 :3:1", "has an empty field, feature or value"),
    ("1 0::1", "has an empty field, feature or value"),
    ("1 0:3:", "has an empty field, feature or value"),
    ("1 x:3:1", "field and feature must be non-negative integers"),
    ("1 0:-3:1", "field and feature must be non-negative integers"),
    ("1 0:3:1e", "value '1e' is not a number"),
    ("1 0:3:nan", "NaN or infinite"),
    ("yes 0:3:1", "label 'yes' is not a number"),
    ("1 0:3:1 0:3:2", "a feature appears twice on the line"),
    ("1 0:99999999999999999999999:1", "field or feature index too large"),
])
def test_bad_lines_are_refused_naming_file_and_line(tmp_path, line, message):
    path = _write(tmp_path, f"1 0:0:1 1:1:1\n\n0 0:2:1 1:1:1\n{line}\n1 0:0:1\n", "bad.ffm.gz")
    with pytest.raises(ValueError, match=r"libffm file '.*bad.ffm.gz', line 4: "):
        load_libffm(path)
    with pytest.raises(ValueError) as info:
        load_libffm(path)
    assert message in str(info.value) and line[:20] in str(info.value)


def test_a_feature_in_two_fields_names_both_lines(tmp_path):
    path = _write(tmp_path, "1 0:0:1 1:1:1\n0 0:2:1 1:3:1\n1 2:1:1\n")
    with pytest.raises(ValueError, match=r"line 3: feature 1 is in field 2 here but in field 1 "
                                         r"on line 1"):
        load_libffm(path)


def test_given_map_and_limits_are_enforced(tmp_path):
    path = _write(tmp_path, "1 0:0:1 1:1:1\n0 0:2:1 1:5:1\n")
    with pytest.raises(ValueError, match="line 2: feature 5 is beyond the 4 features"):
        load_libffm(path, fields=[0, 1, 0, 1])
    with pytest.raises(ValueError, match="line 1: feature 1 is in field 1 here but in field 0 "
                                         "in the given map"):
        load_libffm(path, fields=[0, 0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match="line 2: feature 5 is beyond n_features=4"):
        load_libffm(path, n_features=4)
    with pytest.raises(ValueError, match="line 1: field 1 is beyond n_fields=1"):
        load_libffm(path, n_fields=1)


def test_an_empty_field_and_an_outlying_feature_are_refused(tmp_path):
    with pytest.raises(ValueError, match="field 1 has no feature"):
        load_libffm(_write(tmp_path, "1 0:0:1 2:1:1\n"))
    text = "".join(f"1 0:{j}:1\n" for j in range(20)) + "0 0:900000:1\n"
    with pytest.raises(ValueError, match="line 21: feature 900000 would make a model"):
        load_libffm(_write(tmp_path, text, "wide.ffm"))
    X, _, _ = load_libffm(_write(tmp_path, text, "wide2.ffm"), max_features=1 << 20)
    assert X.shape[1] == 900001


def test_corrupt_compressed_file_is_a_clear_error(tmp_path):
    path = tmp_path / "x.ffm.gz"
    path.write_bytes(gzip.compress(b"1 0:0:1\n" * 1000)[:-12])
    with pytest.raises(ValueError, match="corrupt or truncated"):
        load_libffm(str(path))


def test_bad_arguments(tmp_path):
    path = _write(tmp_path, "1 0:0:1\n")
    with pytest.raises(FileNotFoundError):
        load_libffm(str(tmp_path / "missing.ffm"))
    with pytest.raises(ValueError, match="either fields or hash_buckets"):
        load_libffm(path, fields=[0], hash_buckets=4)
    with pytest.raises(TypeError, match="hash_buckets must be a positive int"):
        load_libffm(path, hash_buckets=2.5)
    with pytest.raises(ValueError, match="fields has 3 entries but X has 2 columns"):
        save_libffm(np.eye(2), [0, 1], [0, 1, 1], str(tmp_path / "o.ffm"))


def test_prefetched_chunks_are_the_same_and_errors_come_through():
    import threading

    from fmlearn.datasets._libffm import prefetched

    assert list(prefetched(iter(range(50)))) == list(range(50))

    def failing():
        yield 1
        raise ValueError("line 7: bad")

    got = []
    with pytest.raises(ValueError, match="line 7"):
        for item in prefetched(failing()):
            got.append(item)
    assert got == [1]
    before = threading.active_count()
    gen = prefetched(iter(range(10**6)))
    next(gen)
    gen.close()  # the consumer stops early: the thread ends
    assert threading.active_count() == before


def test_blocks_depend_on_their_begin_only(tmp_path):
    """A read resumed at any block's begin cuts the same blocks, long lines included."""
    from fmlearn.datasets._libffm import _blocks

    rng = np.random.default_rng(0)
    lines = ["1 " + " ".join(f"0:{j}:1" for j in range(int(n))) for n in rng.integers(1, 40, 200)]
    path = _write(tmp_path, "\n".join(lines) + "\n")
    whole = list(_blocks(path, 64))
    assert b"".join(b for _, b in whole) == open(path, "rb").read()
    for begin, _ in whole[::7]:
        assert list(_blocks(path, 64, begin)) == [b for b in whole if b[0] >= begin]
