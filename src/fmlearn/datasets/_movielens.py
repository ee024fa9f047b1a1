"""MovieLens-100K: ratings as one-hot user + item rows, optional side features, the split protocol.

Two on-disk layouts carry the same 100,000 ratings (943 users, 1,682 items):

* GroupLens (the original zip): ``u.data`` (tab-separated ``user item rating timestamp``, no
  header), ``u.user`` (``id|age|gender|occupation|zip``) and ``u.item`` (``id|title|release
  date|video date|url|`` then 19 genre flags), the last two in Latin-1;
* RecBole's atomic files: ``ml-100k.inter`` (tab-separated, header
  ``user_id:token item_id:token rating:float timestamp:float``), ``ml-100k.user`` and
  ``ml-100k.item`` (``item_id movie_title release_year class``, genres space-separated).

Both are read into the same design matrix. Rows stay in file order, which is what the project's
split protocol (:func:`movielens_split`) indexes.
"""

import hashlib
import io
import os
import re
import urllib.error
import urllib.request
import warnings
import zipfile

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch

from .._files import atomic_write
from ._home import get_data_home

GROUPLENS_URL = "https://files.grouplens.org/datasets/movielens/ml-100k.zip"
# The checksum GroupLens publishes next to the zip (ml-100k.zip.md5).
GROUPLENS_MD5 = "0e33842e24a9c977be4e0107933c0723"

# u.item's 19 genre flags, in file order (GroupLens u.genre); RecBole's class tokens use the
# same names.
GENRES = (
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime",
    "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance",
    "Sci-Fi", "Thriller", "War", "Western",
)  # fmt: skip
# ML-100K stores exact ages; they are one-hot encoded in the age groups of MovieLens-1M.
AGE_EDGES = (18, 25, 35, 45, 50, 56)
AGE_GROUPS = ("<18", "18-24", "25-34", "35-44", "45-49", "50-55", "56+")

_LAYOUTS = {
    "grouplens": ("u.data", "u.user", "u.item"),
    "recbole": ("ml-100k.inter", "ml-100k.user", "ml-100k.item"),
}


def default_data_home():
    """Folder for MovieLens-100K: ``$FMLEARN_DATA/ml-100k`` or ``~/.cache/fmlearn/ml-100k``."""
    return os.path.join(get_data_home(), "ml-100k")


def _how_to_get(folder):
    return (
        f"Put MovieLens-100K in {folder!r} in one of two layouts: GroupLens' (unzip "
        f"{GROUPLENS_URL} there so that it holds u.data, and u.user / u.item for side "
        f"features) or RecBole's (ml-100k.inter, and ml-100k.user / ml-100k.item). Or pass "
        f"path= pointing to such a folder or to the u.data / ml-100k.inter file itself, or "
        f"download=True where a network is available. The folder defaults to "
        f"$FMLEARN_DATA/ml-100k, else ~/.cache/fmlearn/ml-100k."
    )


def _find_layout(folder):
    """``(ratings_file, layout)`` of a folder, or None when it holds neither layout."""
    for layout, (ratings, _, _) in _LAYOUTS.items():
        f = os.path.join(folder, ratings)
        if os.path.isfile(f):
            return f, layout
    return None


def _locate(path, download):
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str, os.PathLike or None, got {type(path).__name__}")
    target = default_data_home() if path is None else os.path.expanduser(os.fspath(path))
    if os.path.isfile(target):
        name = os.path.basename(target)
        if name == "u.data":
            return target, "grouplens"
        if name.endswith(".inter"):
            return target, "recbole"
        raise ValueError(
            f"cannot tell the layout of {target!r}: expected GroupLens' u.data or RecBole's "
            f"*.inter (or the folder that holds them)"
        )
    if os.path.isdir(target):
        for folder in (target, os.path.join(target, "ml-100k")):
            found = _find_layout(folder)
            if found is not None:
                return found
    if download and not target.endswith((".data", ".inter")):
        _download(target)
        return os.path.join(target, "u.data"), "grouplens"
    folder = os.path.dirname(target) if target.endswith((".data", ".inter")) else target
    raise FileNotFoundError(f"MovieLens-100K not found at {target!r}. " + _how_to_get(folder))


def _download(folder):
    """Fetch the GroupLens zip, check its MD5 and unpack its flat files into ``folder``."""
    try:
        with urllib.request.urlopen(GROUPLENS_URL, timeout=60) as response:
            payload = response.read()
    except (urllib.error.URLError, OSError) as exc:  # URLError, timeouts, resets
        raise ConnectionError(
            f"could not download {GROUPLENS_URL} ({exc}). " + _how_to_get(folder)
        ) from None
    digest = hashlib.md5(payload, usedforsecurity=False).hexdigest()
    if digest != GROUPLENS_MD5:
        raise ValueError(
            f"the file downloaded from {GROUPLENS_URL} has MD5 {digest}, expected "
            f"{GROUPLENS_MD5}: refusing it (truncated, tampered or changed upstream). "
            + _how_to_get(folder)
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(payload))
    except zipfile.BadZipFile as exc:
        raise ValueError(f"the file downloaded from {GROUPLENS_URL} is not a zip: {exc}") from None
    members = {}
    for info in archive.infolist():
        # Only the flat files of the top folder, written under their base name: a member
        # path can never escape ``folder``.
        parts = info.filename.split("/")
        if len(parts) == 2 and parts[0] == "ml-100k" and parts[1] and not info.is_dir():
            members[parts[1]] = info
    if "u.data" not in members:
        raise ValueError(f"the file downloaded from {GROUPLENS_URL} has no ml-100k/u.data")
    os.makedirs(folder, exist_ok=True)
    # u.data last: its presence is what marks the folder as complete.
    for name in sorted(members, key=lambda n: n == "u.data"):
        with atomic_write(os.path.join(folder, name)) as out:
            out.write(archive.read(members[name]))


def _first_bad_line(path, sep, n_header, n_fields, encoding="utf-8"):
    """``(line_number, line, problem)`` of the first unreadable line (slow path, on error)."""
    with open(path, encoding=encoding, errors="replace") as f:
        for no, line in enumerate(f, start=1):
            if no <= n_header or not line.strip():
                continue
            fields = line.rstrip("\r\n").split(sep)
            if len(fields) < n_fields:
                return no, line, f"{len(fields)} fields, expected {n_fields}"
            for value in fields[:n_fields]:
                try:
                    float(value)
                except ValueError:
                    return no, line, f"{value!r} is not a number"
    return None


def _read_numeric(path, sep, n_header, usecols, n_fields):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "no data": reported below
            table = np.loadtxt(
                path, delimiter=sep, skiprows=n_header, usecols=usecols, ndmin=2, dtype=np.float64
            )
    except ValueError as exc:
        found = _first_bad_line(path, sep, n_header, n_fields)
        if found is None:
            raise ValueError(f"cannot read MovieLens ratings file {path!r}: {exc}") from None
        no, line, problem = found
        raise ValueError(
            f"malformed MovieLens ratings file {path!r}, line {no}: {problem} "
            f"(the line reads {line.rstrip()!r})"
        ) from None
    return table


def _header(path, encoding="utf-8"):
    """RecBole header ``name:type`` fields -> {name: column}."""
    with open(path, encoding=encoding) as f:
        first = f.readline().rstrip("\r\n")
    names = [field.split(":", 1)[0] for field in first.split("\t")]
    if not all(":" in field for field in first.split("\t")):
        raise ValueError(
            f"{path!r} does not start with a RecBole header ('name:type' fields separated by "
            f"tabs, e.g. 'user_id:token'); it starts with {first[:80]!r}"
        )
    return {name: i for i, name in enumerate(names)}


def _require(columns, names, path):
    missing = [n for n in names if n not in columns]
    if missing:
        raise ValueError(f"{path!r} has no column {missing} (its header has {list(columns)})")


def _integral(values, what, path):
    if not np.all(values == np.round(values)):
        raise ValueError(f"{path!r}: {what} must be integers")
    return values.astype(np.int64)


def _read_ratings(path, layout):
    if layout == "grouplens":
        table = _read_numeric(path, "\t", 0, (0, 1, 2, 3), 4)
        users, items, ratings, times = table.T
    else:
        cols = _header(path)
        _require(cols, ("user_id", "item_id", "rating"), path)
        names = ["user_id", "item_id", "rating"] + (["timestamp"] if "timestamp" in cols else [])
        usecols = tuple(cols[n] for n in names)
        table = _read_numeric(path, "\t", 1, usecols, max(usecols) + 1)
        users, items, ratings = table[:, 0], table[:, 1], table[:, 2]
        times = table[:, 3] if table.shape[1] > 3 else np.zeros(table.shape[0])
    if table.shape[0] == 0:
        raise ValueError(f"MovieLens ratings file {path!r} has no rating")
    if not np.all(np.isfinite(table)):
        row = int(np.flatnonzero(~np.all(np.isfinite(table), axis=1))[0])
        raise ValueError(
            f"MovieLens ratings file {path!r}: NaN or infinity on data row {row + 1} "
            f"(header excluded)"
        )
    users = _integral(users, "user ids", path)
    items = _integral(items, "item ids", path)
    return users, items, np.ascontiguousarray(ratings), _integral(times, "timestamps", path)


def _records(path, layout, fields):
    """Rows of a side file as dicts ``{field: str}`` with an int ``"id"``."""
    if layout == "grouplens":
        sep, encoding, n_header = "|", "latin-1", 0
        columns = {name: i for i, name in enumerate(fields)}
    else:
        sep, encoding, n_header = "\t", "utf-8", 1
        columns = _header(path, encoding)
        _require(columns, fields, path)
    out = []
    with open(path, encoding=encoding) as f:
        for no, line in enumerate(f, start=1):
            if no <= n_header or not line.strip():
                continue
            parts = line.rstrip("\r\n").split(sep)
            if len(parts) <= max(columns[name] for name in fields):
                raise ValueError(
                    f"malformed MovieLens file {path!r}, line {no}: {len(parts)} fields "
                    f"(the line reads {line.rstrip()!r})"
                )
            rec = {name: parts[columns[name]].strip() for name in fields}
            if layout == "grouplens" and fields[-1] == "genre_flags":
                rec["genre_flags"] = parts[columns["genre_flags"] :]
            try:
                rec["id"] = int(rec[fields[0]])
            except ValueError:
                raise ValueError(
                    f"malformed MovieLens file {path!r}, line {no}: id {rec[fields[0]]!r} is "
                    f"not an integer"
                ) from None
            rec["line"] = no
            out.append(rec)
    return out


def _user_table(path, layout):
    table = {}
    for rec in _records(path, layout, ("user_id", "age", "gender", "occupation")):
        try:
            age = int(rec["age"])
        except ValueError:
            raise ValueError(
                f"malformed MovieLens file {path!r}, line {rec['line']}: age {rec['age']!r} is "
                f"not an integer"
            ) from None
        table[rec["id"]] = (age, rec["gender"], rec["occupation"])
    return table


_DATE = re.compile(r"^\d{1,2}-[A-Za-z]{3}-(\d{4})$")


def _item_table(path, layout):
    table = {}
    if layout == "grouplens":
        names = ("item_id", "title", "release_date", "video_date", "url", "genre_flags")
        for rec in _records(path, layout, names):
            flags = rec["genre_flags"]
            if len(flags) < len(GENRES):
                raise ValueError(
                    f"malformed MovieLens file {path!r}, line {rec['line']}: "
                    f"{len(flags)} genre flags, expected {len(GENRES)}"
                )
            genres = tuple(g for g, f in zip(GENRES, flags, strict=False) if f.strip() == "1")
            m = _DATE.match(rec["release_date"])
            table[rec["id"]] = (int(m.group(1)) if m else None, genres)
    else:
        for rec in _records(path, layout, ("item_id", "release_year", "class")):
            genres = tuple(rec["class"].split())
            unknown = [g for g in genres if g not in GENRES]
            if unknown:
                raise ValueError(
                    f"{path!r}, line {rec['line']}: unknown genre(s) {unknown}; "
                    f"MovieLens-100K's genres are {list(GENRES)}"
                )
            year = rec["release_year"]
            # RecBole took the year from the title: a few entries read "unkonwn" or "V".
            table[rec["id"]] = (int(year) if re.fullmatch(r"\d{4}", year) else None, genres)
    return table


def _side_path(ratings_file, layout, which):
    folder = os.path.dirname(ratings_file)
    if layout == "grouplens":
        name = {"user": "u.user", "item": "u.item"}[which]
    else:
        stem = os.path.basename(ratings_file)[: -len(".inter")]
        name = f"{stem}.{which}"
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"side_features=True needs {path!r} next to {os.path.basename(ratings_file)!r} "
            f"(the {which} attributes); it is missing"
        )
    return path


def _lookup(table, ids, path, what):
    missing = [int(i) for i in ids if int(i) not in table]
    if missing:
        shown = missing[:10] + (["..."] if len(missing) > 10 else [])
        raise ValueError(f"{path!r} has no entry for the rated {what} ids {shown}")
    return [table[int(i)] for i in ids]


def _side_blocks(ratings_file, layout, users, items, dtype):
    """User- and item-attribute matrices (one row per user / item column) and their names."""
    upath = _side_path(ratings_file, layout, "user")
    ipath = _side_path(ratings_file, layout, "item")
    utable, itable = _user_table(upath, layout), _item_table(ipath, layout)
    # Vocabularies come from the whole side files (not only the rated ids) and are sorted, so
    # that both layouts give the same columns.
    genders = sorted({g for _, g, _ in utable.values()})
    occupations = sorted({o for _, _, o in utable.values()})
    decades = sorted({y // 10 * 10 for y, _ in itable.values() if y is not None})

    urows = _lookup(utable, users, upath, "user")
    n_u = len(AGE_GROUPS) + len(genders) + len(occupations)
    r, c = [], []
    for i, (age, gender, occupation) in enumerate(urows):
        r += [i, i, i]
        c += [
            int(np.searchsorted(AGE_EDGES, age, side="right")),
            len(AGE_GROUPS) + genders.index(gender),
            len(AGE_GROUPS) + len(genders) + occupations.index(occupation),
        ]
    U = sp.csr_matrix((np.ones(len(r), dtype=dtype), (r, c)), shape=(len(users), n_u), dtype=dtype)
    unames = (
        [f"user_age={a}" for a in AGE_GROUPS]
        + [f"user_gender={g}" for g in genders]
        + [f"user_occupation={o}" for o in occupations]
    )

    irows = _lookup(itable, items, ipath, "item")
    n_i = len(GENRES) + len(decades)
    r, c = [], []
    for i, (year, genres) in enumerate(irows):
        for g in genres:
            r.append(i)
            c.append(GENRES.index(g))
        if year is not None:
            r.append(i)
            c.append(len(GENRES) + decades.index(year // 10 * 10))
    V = sp.csr_matrix((np.ones(len(r), dtype=dtype), (r, c)), shape=(len(items), n_i), dtype=dtype)
    inames = [f"item_genre={g}" for g in GENRES] + [f"item_decade={d}s" for d in decades]
    return U, unames, V, inames


def user_item_onehot(user_index, item_index, n_users, n_items, dtype=np.float64):
    """CSR rows with a 1 in column ``user_index[r]`` and in ``n_users + item_index[r]``.

    Parameters
    ----------
    user_index, item_index : int arrays of shape (n_rows,)
        Zero-based user and item positions.
    n_users, n_items : int
        Width of the user block and of the item block (``n_users + n_items`` columns).
    dtype : float dtype, default=np.float64

    Returns
    -------
    X : csr_matrix of shape (n_rows, n_users + n_items), canonical (sorted indices, int32
        indices, int64 indptr).
    """
    n = user_index.shape[0]
    indices = np.empty(2 * n, dtype=np.int32)
    indices[0::2] = user_index
    indices[1::2] = n_users + np.asarray(item_index)
    indptr = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
    data = np.ones(2 * n, dtype=dtype)
    return sp.csr_matrix((data, indices, indptr), shape=(n, n_users + n_items))


def load_movielens_100k(path=None, *, download=False, side_features=False, dtype=np.float64):
    """Load MovieLens-100K as one-hot user + item rows (the usual FM encoding).

    Row ``r`` of ``X`` is rating ``r`` of the ratings file, in file order (a header line is
    not a row): a 1 in the column of its user, a 1 in the column of its item and, with
    ``side_features=True``, the attributes of that user and that item. On the full data set
    the user and item blocks have 943 + 1682 = 2625 columns.

    Parameters
    ----------
    path : str or os.PathLike, default=None
        A folder holding either layout (GroupLens' ``u.data``, preferred when both are there,
        or RecBole's ``ml-100k.inter``; a sub-folder ``ml-100k`` is looked in too), or the
        ratings file itself (``u.data`` or ``*.inter``). ``None`` means
        ``$FMLEARN_DATA/ml-100k``, else ``~/.cache/fmlearn/ml-100k``.
    download : bool, default=False
        When nothing is found at ``path`` (which must then be a folder or None), fetch
        GroupLens' zip, check its published MD5 and unpack it there. Without a network this
        raises ``ConnectionError`` saying where to put the files instead.
    side_features : bool, default=False
        Append user attributes (age group, gender, occupation; from ``u.user`` or
        ``ml-100k.user``) and item attributes (genres, release decade; from ``u.item`` or
        ``ml-100k.item``) as extra 0/1 columns. Ages are one-hot encoded in MovieLens-1M's
        seven groups; genres are multi-hot (several 1s); zip codes and titles are not used.
        A missing release year gives no decade column. The release year comes from the
        release date in GroupLens' ``u.item`` but from the title in RecBole's file, so a few
        items differ in decade between the two layouts.
    dtype : float dtype, default=np.float64
        dtype of ``X``.

    Returns
    -------
    data : :class:`sklearn.utils.Bunch` with
        - ``X`` : csr_matrix of shape (n_ratings, n_features)
          Columns: ``n_users`` user indicators (users sorted by id), ``n_items`` item
          indicators (sorted by id), then the side features if asked.
        - ``y`` : ndarray of shape (n_ratings,), float64
          The ratings.
        - ``user_ids``, ``item_ids`` : ndarray of shape (n_ratings,), int64
          The original ids of each row's user and item.
        - ``timestamps`` : ndarray of shape (n_ratings,), int64
          Unix time of each rating (zeros if a RecBole file has no timestamp column).
        - ``feature_names`` : ndarray of shape (n_features,), object
          ``"user=<id>"``, ``"item=<id>"``, ``"user_age=25-34"``, ``"item_genre=Drama"``...
        - ``n_users``, ``n_items`` : int
          Width of the user and item blocks (distinct rated users and items).
        - ``user_index``, ``item_index`` : ndarray of shape (n_ratings,), int64
          Each rating's user and item as 0-based positions in those blocks (the ids an
          :class:`fmlearn.ranking.Interactions` takes).
        - ``user_features``, ``item_features`` : csr_matrix of shape (n_users, ...), (n_items, ...)
          With ``side_features=True``: one row of attributes per user and per item (the
          side features of the implicit-feedback models), named by ``user_feature_names``
          and ``item_feature_names``.
        - ``layout`` : {"grouplens", "recbole"}
        - ``path`` : str
          The ratings file that was read.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path`` and ``download=False``; or ``side_features=True`` and a side
        file is missing. The message says where to put which files.
    ConnectionError
        ``download=True`` without a network.
    ValueError
        A malformed file (named, with the line number), a failed checksum.

    See Also
    --------
    movielens_split : the project's 75,000 / 25,000 random split of these rows.
    make_recommendation : an offline MovieLens-like data set with a planted model.

    Examples
    --------
    >>> from fmlearn.datasets import load_movielens_100k, movielens_split
    >>> ml = load_movielens_100k()                       # doctest: +SKIP
    >>> ml.X.shape                                       # doctest: +SKIP
    (100000, 2625)
    >>> train, test = movielens_split(ml.X.shape[0], seed=0)  # doctest: +SKIP
    """
    ratings_file, layout = _locate(path, download)
    users, items, y, times = _read_ratings(ratings_file, layout)
    user_vocab, user_col = np.unique(users, return_inverse=True)
    item_vocab, item_col = np.unique(items, return_inverse=True)
    n_users, n_items = user_vocab.shape[0], item_vocab.shape[0]
    X = user_item_onehot(user_col, item_col, n_users, n_items, dtype)
    names = [f"user={u}" for u in user_vocab] + [f"item={i}" for i in item_vocab]
    side = {}
    if side_features:
        U, unames, V, inames = _side_blocks(ratings_file, layout, user_vocab, item_vocab, dtype)
        X = sp.hstack([X, U[user_col], V[item_col]], format="csr", dtype=dtype)
        X.sort_indices()
        X.indices = X.indices.astype(np.int32, copy=False)
        X.indptr = X.indptr.astype(np.int64, copy=False)
        names += unames + inames
        side = dict(user_features=U, item_features=V,
                    user_feature_names=np.asarray(unames, dtype=object),
                    item_feature_names=np.asarray(inames, dtype=object))
    return Bunch(
        X=X,
        y=y,
        user_ids=users,
        item_ids=items,
        timestamps=times,
        feature_names=np.asarray(names, dtype=object),
        n_users=int(n_users),
        n_items=int(n_items),
        layout=layout,
        path=ratings_file,
        user_index=user_col.astype(np.int64),
        item_index=item_col.astype(np.int64),
        **side,
    )


def movielens_split(n_rows, seed, n_train=75000):
    """The project's random train/test split of MovieLens rows (file order).

    Exactly::

        idx = np.random.default_rng(seed).permutation(n_rows)
        train, test = idx[:n_train], idx[n_train:]

    The benchmark protocol uses ``n_rows=100000``, ``n_train=75000`` and seeds 0, 1, 2.
    Indices keep the permutation's order (they are not sorted).

    Parameters
    ----------
    n_rows : int
        Number of ratings (rows of :func:`load_movielens_100k`'s ``X``).
    seed : int
        Seed of :func:`numpy.random.default_rng`.
    n_train : int, default=75000
        Size of the training part, ``0 <= n_train <= n_rows``.

    Returns
    -------
    train, test : int64 ndarrays of shapes (n_train,) and (n_rows - n_train,)

    Examples
    --------
    >>> from fmlearn.datasets import movielens_split
    >>> train, test = movielens_split(10, seed=0, n_train=7)
    >>> sorted(train.tolist() + test.tolist()) == list(range(10))
    True
    """
    for name, value in (("n_rows", n_rows), ("n_train", n_train)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if n_rows < 0:
        raise ValueError(f"n_rows must be >= 0, got {n_rows}")
    if not 0 <= n_train <= n_rows:
        raise ValueError(f"n_train must be in [0, n_rows={n_rows}], got {n_train}")
    idx = np.random.default_rng(seed).permutation(n_rows)
    return idx[:n_train], idx[n_train:]
