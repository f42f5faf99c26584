"""The zoo's version: the installed distribution's, read from its metadata."""

from __future__ import annotations

import importlib.metadata

DISTRIBUTION = "attention-zoo"


def zoo_version() -> str:
    """The version of the installed `attention-zoo` (pyproject.toml's `version`), or
    "0+unknown" for a checkout run from source without being installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
