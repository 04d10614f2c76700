"""Hostile-input fixtures: sim hosts behind real sshd and isolated state (shared with the fault suite)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults import results
from tests.faults.simfleet import isolate_env, scratch_root

pytest_plugins = ["tests.fixtures.sshhosts"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(tmp_path, monkeypatch)


@pytest.fixture
def sim_root() -> Iterator[Path]:
    d = scratch_root()
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    results.write()
