"""dflash-console: a terminal console for SGLang GPU fleets."""

from __future__ import annotations

from functools import cache

DISTRIBUTION = "dflash-console"
"""The name the package is installed under (pyproject's [project] name): its metadata holds the version."""


@cache
def version() -> str:
    """The installed distribution's version, from its metadata (pyproject.toml is the one place it is written).

    Read on first use, not at import: importlib.metadata costs tens of milliseconds to import and scan, which every
    command's start would pay. A source tree run without installing has no metadata: "unknown" then.
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"
