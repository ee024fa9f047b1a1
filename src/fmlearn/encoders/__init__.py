"""Encoders: turn raw data into the sparse features an FM learns from.

One module per encoder, all scikit-learn transformers:

- :class:`TensorEncoder` and :class:`MultiViewEncoder` (``_index``): rows of integer indices
  -> one-hot rows, so that tensor completion and multi-view completion become FM regression
  (Yamada et al. 2017, §2.5 and §4.3);
- :class:`PiercePointEncoder` (``_pierce``): Lin et al.'s (2019) local encoding of ionospheric
  pierce points (§4.2);
- :class:`TabularEncoder` (``_tabular``): a DataFrame, list of dicts or 2-D array of
  categorical and numeric columns -> one-hot / numeric / hashed CSR features with one
  feature group per column;
- :func:`feature_groups` (``_groups``): the classic FM's ``groups`` from one-hot feature
  names.
"""

from ._groups import feature_groups
from ._index import MultiViewEncoder, TensorEncoder
from ._pierce import PiercePointEncoder
from ._tabular import TabularEncoder

__all__ = [
    "MultiViewEncoder", "PiercePointEncoder", "TabularEncoder", "TensorEncoder", "feature_groups",
]
