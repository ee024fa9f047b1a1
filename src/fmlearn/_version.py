"""The package version (its own module, so that fmlearn.io needs no import of the package)."""

__version__ = "0.2.0"
