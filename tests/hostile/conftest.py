"""Hostile-input fixtures: sim hosts behind real sshd and isolated state (shared with the fault suite)."""

from tests.faults.suite_fixtures import _isolated, known_gap_recorder, pytest_sessionfinish, sim_root

__all__ = ["_isolated", "pytest_runtest_logreport", "pytest_sessionfinish", "sim_root"]

pytest_runtest_logreport = known_gap_recorder("hostile")
