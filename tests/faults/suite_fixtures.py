"""Fixtures and hooks shared by the fault and hostile-input suites (each conftest re-exports them).

Hosts come from the sshhosts `ssh_host_factory`, which already reuses torn-down hosts' addresses.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.faults import results
from tests.faults.simfleet import isolate_env, scratch_root


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(tmp_path, monkeypatch)


@pytest.fixture
def sim_root() -> Iterator[Path]:
    """Where a test's sim host dirs live (not tmp_path: see simfleet.scratch_root)."""
    d = scratch_root()
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _short(nodeid: str) -> str:
    name = nodeid.split("::")[-1]
    return name if len(name) < 70 else name[:66] + "…]"


def known_gap_recorder(suite: str) -> Callable[[pytest.TestReport], None]:
    """A `pytest_runtest_logreport` hook: a strict xfail of `suite` is a failed trial, with its reason."""

    def hook(report: pytest.TestReport) -> None:
        if report.when == "call" and getattr(report, "wasxfail", None) is not None and f"/{suite}/" in report.nodeid:
            results.record(suite, f"known gap: {_short(report.nodeid)}", 0, False, report.duration,
                           str(report.wasxfail).removeprefix("reason: "))

    return hook


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    results.write()
