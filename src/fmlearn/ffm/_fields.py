"""The feature-to-field map of a field-aware FM: where it comes from and what it must be.

``fields`` gives each column of X its field (an int per feature, ids 0, 1, ..., F - 1): from
:func:`fmlearn.datasets.load_libffm`, from ``fmlearn.encoders.TabularEncoder().groups_`` (one
field per input column), from :func:`fmlearn.datasets.hashed_fields`, or by hand. ``None``
gives every feature its own field, as Juan et al. (2016, Section 3.2) treat numerical
features ("dummy fields"): F = d, so the model has d^2 k factors and is only for narrow data.
"""

import numpy as np

from ._kernels import LANES

#: ``fields=None`` (one field per feature) is refused when the model it implies (the factors
#: and their AdaGrad sums) would exceed this many bytes: it grows as d^2 k.
NONE_FIELDS_BUDGET = 256 * 2**20


def n_chunks(n_factors):
    """Chunks of ``LANES`` factors that hold ``n_factors``."""
    return -(-int(n_factors) // LANES)


def model_bytes(n_features, n_fields, n_factors, itemsize):
    """Bytes of the factors and their AdaGrad sums."""
    return int(n_features) * int(n_fields) * n_chunks(n_factors) * 2 * LANES * int(itemsize)


def resolve_fields(fields, n_features, n_factors, itemsize):
    """``(field_map, n_fields)`` for a model of ``n_features`` columns: the map as a
    read-only int32 array. Raises ``ValueError`` naming the problem: a map of another length,
    ids that are not integers >= 0, a field id with no feature (ids must be 0, 1, ...,
    F - 1), or ``fields=None`` on data too wide for one field per feature."""
    if fields is None:
        size = model_bytes(n_features, n_features, n_factors, itemsize)
        if size > NONE_FIELDS_BUDGET:
            raise ValueError(
                f"fields=None gives each of the {n_features} features its own field, a model "
                f"of {size / 2**20:.0f} MB (d^2 k factors); pass fields= (one field id per "
                "feature: from fmlearn.datasets.load_libffm, TabularEncoder().groups_ or "
                "fmlearn.datasets.hashed_fields)")
        out = np.arange(n_features, dtype=np.int32)
        out.flags.writeable = False
        return out, int(n_features)
    arr = np.asarray(fields)
    if arr.ndim != 1:
        raise ValueError(f"fields must be a 1-D array with one field id per feature, got "
                         f"shape {arr.shape}")
    if arr.shape[0] != n_features:
        raise ValueError(f"fields has {arr.shape[0]} entries but X has {n_features} features "
                         "(one field id per feature)")
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise ValueError(f"fields must hold integer field ids, got dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        if not (np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
            raise ValueError("fields must hold integer field ids (got non-integral values)")
    if n_features and arr.min() < 0:
        j = int(np.argmin(arr))
        raise ValueError(f"fields[{j}] = {arr[j]}: field ids must be >= 0")
    arr = arr.astype(np.int64)
    n_fields = int(arr.max()) + 1 if n_features else 0
    if n_fields > n_features:
        raise ValueError(f"fields uses field id {n_fields - 1} with only {n_features} "
                         "features: field ids must be 0, 1, ..., F - 1, each with a feature")
    used = np.bincount(arr, minlength=n_fields)
    if not used.all():
        f = int(np.flatnonzero(used == 0)[0])
        raise ValueError(f"field {f} has no feature (fields uses ids up to {n_fields - 1}): "
                         "field ids must be 0, 1, ..., F - 1, each with a feature")
    out = arr.astype(np.int32)
    out.flags.writeable = False
    return out, n_fields


def rows_have_unique_fields(indptr, indices, field_map):
    """Whether no row of the CSR arrays has two features of one field (the fast path of the
    epoch kernel then applies to every row); one compiled pass over the entries."""
    from ._kernels import unique_fields

    if indptr.shape[0] <= 1 or indptr[-1] == 0:
        return True
    return bool(unique_fields(indptr, indices, field_map, int(field_map.max()) + 1))


def mean_pair_weight(indptr, data, sw, normalize):
    """The mean over rows with at least two features, weighted by the sample weights ``sw``,
    of the mean |x_j x_l| over the row's pairs, ((sum |x|)^2 - sum x^2) / (m (m - 1)) for a
    row of m features, each row divided by its norm when ``normalize`` (a row of weight 2
    counts as two rows: ``fit`` on repeated rows equals ``fit`` on weights). 0 when no row has
    a pair. One compiled pass, no copy."""
    from ._kernels import pair_weight

    if indptr.shape[0] <= 1:
        return 0.0
    return float(pair_weight(indptr, data, np.ascontiguousarray(sw, dtype=np.float64),
                             bool(normalize)))
