"""Fault-suite fixtures: sim hosts behind real sshd, isolated SSH/console state, per-trial results JSON."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults import results
from tests.faults.simfleet import free_index, isolate_env, scratch_root
from tests.fixtures.sshhosts import SshTestHost, TestHostNet, UnreachableTestHost

# the sshhosts fixtures are registered by the top-level conftest.py (pytest refuses nested pytest_plugins)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_env(tmp_path, monkeypatch)


@pytest.fixture
def ssh_host_factory(ssh_test_net: TestHostNet):  # type: ignore[no-untyped-def]
    """As the fixtures' factory, but reusing the address index of hosts already torn down: the test network
    has 20 addresses per run and the plain factory never hands one out twice (a whole-suite run needs more)."""
    made: list[SshTestHost] = []

    def make(name, hostdir=None, *, kind="sshd", index=None):  # type: ignore[no-untyped-def]
        if kind != "sshd":
            return UnreachableTestHost(ssh_test_net, name, kind)
        h = SshTestHost(ssh_test_net, name, hostdir, free_index(ssh_test_net) if index is None else index)
        made.append(h)
        return h

    yield make
    for h in made:
        h.teardown()


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


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A strict xfail is a known gap: it goes in the results as a failed trial, with its reason."""
    if report.when == "call" and getattr(report, "wasxfail", None) is not None and "/faults/" in report.nodeid:
        results.record("faults", f"known gap: {_short(report.nodeid)}", 0, False, report.duration,
                       str(report.wasxfail).removeprefix("reason: "))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    results.write()
