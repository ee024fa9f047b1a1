"""Data sets: svmlight/libFM files, MovieLens-100K, the LIBSVM benchmarks (fetched and cached),
and synthetic generators with planted truth.

Loaders read files; generators return the data together with the model that made it, so that
tests and reproductions can check what a solver recovers.
"""

from ._fetch import (
    fetch,
    fetch_abalone,
    fetch_adult,
    fetch_ijcnn1,
    fetch_libsvm_files,
    fetch_movielens_100k,
    get_libsvm_home,
)
from ._gnss import (
    GNSSObservations,
    GNSSSimulation,
    load_gnss_csv,
    make_gnss_vtec,
    write_gnss_csv,
)
from ._gnss_rinex import GNSSNetwork, RinexError, load_rinex_network
from ._home import get_data_home
from ._libfm_binary import (
    load_libfm_binary,
    load_libfm_matrix,
    load_libfm_relation,
    save_libfm_binary,
    save_libfm_matrix,
    save_libfm_relation,
)
from ._movielens import load_movielens_100k, movielens_split
from ._svmlight import iter_svmlight, load_svmlight, save_svmlight
from ._synthetic import fm_scores, make_fm, make_recommendation
from ._synthetic_ccfm import make_ccfm_stream
from ._synthetic_cfm import make_cfm_regression, make_low_rank_tensor
from ._synthetic_gfm import (
    FEATURE_DISTRIBUTIONS,
    PlantedModel,
    make_asymmetric_sensing,
    make_fm_labels,
    make_gfm,
    make_phase_retrieval,
    make_symmetric_sensing,
    sample_features,
)

__all__ = [
    "FEATURE_DISTRIBUTIONS",
    "GNSSNetwork",
    "GNSSObservations",
    "GNSSSimulation",
    "PlantedModel",
    "RinexError",
    "fetch",
    "fetch_abalone",
    "fetch_adult",
    "fetch_ijcnn1",
    "fetch_libsvm_files",
    "fetch_movielens_100k",
    "get_data_home",
    "get_libsvm_home",
    "fm_scores",
    "iter_svmlight",
    "load_libfm_binary",
    "load_libfm_matrix",
    "load_libfm_relation",
    "load_gnss_csv",
    "load_movielens_100k",
    "load_rinex_network",
    "load_svmlight",
    "make_asymmetric_sensing",
    "make_ccfm_stream",
    "make_cfm_regression",
    "make_fm",
    "make_fm_labels",
    "make_gnss_vtec",
    "make_gfm",
    "make_low_rank_tensor",
    "make_phase_retrieval",
    "make_recommendation",
    "make_symmetric_sensing",
    "movielens_split",
    "sample_features",
    "save_libfm_binary",
    "save_libfm_matrix",
    "save_libfm_relation",
    "save_svmlight",
    "write_gnss_csv",
]
