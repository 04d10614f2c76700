"""The test tiers, marked by directory: `scripts/test --fast` runs the `fast` tier (`-m fast`) in well under a
minute; the full suite runs everything. Markers are registered in pyproject.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent

FAST_DIRS = frozenset({"config", "sglang", "gpu", "structure"})
"""Parsers, config, the SGLang and nvidia-smi knowledge and the layer rules: no sshd, sim fleet, tmux or browser
(a few talk to a local HTTP server or run the CLI once)."""

FAST_FILES = frozenset({"ui/test_views.py", "ui/test_units.py"})
"""The pure view code of tests/ui, whose other files drive the app, tmux or snapshots."""


def is_fast(path: Path) -> bool:
    """Whether the test file at `path` belongs to the fast tier."""
    try:
        rel = path.relative_to(HERE)
    except ValueError:
        return False
    return rel.parts[0] in FAST_DIRS or rel.as_posix() in FAST_FILES


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_fast(item.path):
            item.add_marker(pytest.mark.fast)
