"""The release number of stridec (one place: the package, the cache keys and pyproject agree)."""

__version__ = "0.1.0"
