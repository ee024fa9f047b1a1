"""Data sets: svmlight/libFM and libffm files, MovieLens-100K, the LIBSVM benchmarks (fetched
and cached), and synthetic generators with planted truth.

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
from ._libffm import (
    LibffmInfo,
    hashed_fields,
    iter_libffm,
    load_libffm,
    load_libffm_files,
    save_libffm,
    scan_libffm,
)
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
from ._synthetic_ffm import PlantedFFM, make_ffm_ctr, planted_scores
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
from ._synthetic_ranking import make_implicit_feedback

__all__ = [
    "FEATURE_DISTRIBUTIONS",
    "GNSSNetwork",
    "GNSSObservations",
    "GNSSSimulation",
    "LibffmInfo",
    "PlantedFFM",
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
    "hashed_fields",
    "iter_libffm",
    "fm_scores",
    "iter_svmlight",
    "load_libfm_binary",
    "load_libfm_matrix",
    "load_libfm_relation",
    "load_gnss_csv",
    "load_libffm",
    "load_libffm_files",
    "load_movielens_100k",
    "load_rinex_network",
    "load_svmlight",
    "make_asymmetric_sensing",
    "make_ccfm_stream",
    "make_cfm_regression",
    "make_fm",
    "make_ffm_ctr",
    "make_fm_labels",
    "make_gnss_vtec",
    "make_implicit_feedback",
    "make_gfm",
    "make_low_rank_tensor",
    "make_phase_retrieval",
    "make_recommendation",
    "make_symmetric_sensing",
    "movielens_split",
    "planted_scores",
    "sample_features",
    "save_libfm_binary",
    "save_libfm_matrix",
    "save_libfm_relation",
    "save_libffm",
    "save_svmlight",
    "scan_libffm",
    "write_gnss_csv",
]
