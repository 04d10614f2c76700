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


def _reason(report: pytest.TestReport) -> str:
    """The exception line of a failure (or a skip's reason), for the table's `first failure` column."""
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    return str(crash.message if crash is not None else report.longreprtext).strip().splitlines()[0][:300]


def known_gap_recorder(suite: str) -> Callable[[pytest.TestReport], None]:
    """A `pytest_runtest_logreport` hook for `suite`: a strict xfail is a failed trial, with its reason; so is
    a test that could not set up (a host that would not start), was skipped, or failed before recording a
    trial: none of them vanishes from the table."""
    at_start: dict[str, int] = {}

    def hook(report: pytest.TestReport) -> None:
        if f"/{suite}/" not in report.nodeid:
            return
        if report.when == "call" and getattr(report, "wasxfail", None) is not None:
            results.record(
                suite,
                f"known gap: {_short(report.nodeid)}",
                0,
                False,
                report.duration,
                str(report.wasxfail).removeprefix("reason: "),
            )
            return
        if report.when == "setup":
            at_start[report.nodeid] = results.count()
        if report.skipped and getattr(report, "wasxfail", None) is None:
            results.record(
                suite, f"not run: {_short(report.nodeid)}", 0, False, report.duration, f"skipped: {_reason(report)}"
            )
        elif report.failed and report.when == "setup":
            results.record(suite, f"setup failed: {_short(report.nodeid)}", 0, False, report.duration, _reason(report))
        elif report.failed and report.when == "call" and results.count() == at_start.get(report.nodeid, -1):
            results.record(
                suite,
                f"failed before recording a trial: {_short(report.nodeid)}",
                0,
                False,
                report.duration,
                _reason(report),
            )
        elif report.failed and report.when == "teardown":
            results.record(
                suite, f"teardown failed: {_short(report.nodeid)}", 0, False, report.duration, _reason(report)
            )

    return hook


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    results.write()
