"""fmlearn's data home, shared by the loaders and the fetchers (see docs/data.md)."""

import os


def get_data_home(data_home=None):
    """fmlearn's data folder: ``data_home``, else ``$FMLEARN_DATA``, else ``~/.cache/fmlearn``."""
    root = data_home or os.environ.get("FMLEARN_DATA") or os.path.join("~", ".cache", "fmlearn")
    return os.path.expanduser(os.fspath(root))
