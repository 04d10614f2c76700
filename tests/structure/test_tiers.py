"""The fast tier's directories exist and the tier excludes the parts that need hosts, sims or terminals."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import FAST_DIRS, FAST_FILES, HERE, is_fast


def test_every_fast_directory_and_file_exists() -> None:
    """A renamed directory would silently drop its tests from `scripts/test --fast`."""
    assert all((HERE / d).is_dir() for d in FAST_DIRS), sorted(d for d in FAST_DIRS if not (HERE / d).is_dir())
    assert all((HERE / f).is_file() for f in FAST_FILES), sorted(f for f in FAST_FILES if not (HERE / f).is_file())


def test_the_tier_is_chosen_by_directory() -> None:
    assert is_fast(HERE / "config" / "test_command.py")
    assert is_fast(HERE / "ui" / "test_views.py")
    assert not is_fast(HERE / "ui" / "test_demo_tmux.py")
    assert not is_fast(HERE / "transport" / "test_local.py")
    assert not is_fast(Path("/elsewhere/tests/config/test_command.py"))
