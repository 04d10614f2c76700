"""A trial that cannot run still shows in the reliability table: a real pytest run of a small suite whose host
will not build (in a fixture, in a test body), a skip, and a test that recorded its own failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.faults import results
from tests.faults.simfleet import REPO

SUITE = """
import pytest
from tests.faults import results
from tests.faults.simfleet import build_sim_fleet


def _not_a_dir(root):
    bad = root / "hosts-root"
    bad.write_text("a file where the host dirs go")
    return bad


@pytest.fixture
def fleet(ssh_host_factory, sim_root):
    return build_sim_fleet(ssh_host_factory, _not_a_dir(sim_root), ["h1"])


def test_fixture_host_will_not_start(fleet):
    results.record("faults", "never reached", 0, True, 0.0)


def test_body_host_will_not_start(ssh_host_factory, sim_root):
    build_sim_fleet(ssh_host_factory, _not_a_dir(sim_root), ["h2"])
    results.record("faults", "never reached", 0, True, 0.0)


def test_skipped():
    pytest.skip("sshd is not installed")


def test_recorded_its_own_failure():
    results.record("faults", "own row", 0, False, 0.0, "the check said no")
    assert False, "the check said no"


def test_passes_with_its_own_row():
    results.record("faults", "own row", 1, True, 0.0)
"""


def test_setup_failures_skips_and_unrecorded_failures_are_rows(tmp_path: Path) -> None:
    """Regression (issue 19.5): a test whose host could not start recorded nothing and vanished from the table."""
    t0 = time.monotonic()
    suite = tmp_path / "t" / "faults"
    suite.mkdir(parents=True)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.fixtures.sshhosts"]\n')
    (suite / "conftest.py").write_text(
        "from tests.faults.conftest import *  # noqa: F403\nfrom tests.faults.conftest import _isolated  # noqa: F401\n"
    )
    (suite / "test_cannot_run.py").write_text(SUITE)
    out = tmp_path / "reliability.json"
    env = dict(os.environ, DFLASH_RELIABILITY_OUT=str(out), PYTHONPATH=str(REPO))
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(suite)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.exists(), r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(out.read_text())
    rows = {rec["case"]: rec for rec in doc["records"]}
    cases = sorted(rows)
    want = {
        "setup failed: test_fixture_host_will_not_start": "hosts-root",
        "failed before recording a trial: test_body_host_will_not_start": "hosts-root",
        "not run: test_skipped": "sshd is not installed",
    }
    probs = [f"no row {c!r} (rows: {cases})" for c in want if c not in rows]
    probs += [
        f"{c}: not a failed trial naming {why!r}: {rows[c]}"
        for c, why in want.items()
        if c in rows and (rows[c]["ok"] or why not in rows[c]["detail"])
    ]
    own = [rec for rec in doc["records"] if rec["case"] == "own row"]
    if [rec["ok"] for rec in own] != [False, True]:
        probs.append(f"a test that recorded its own trials got extra or lost rows: {own}")
    if "never reached" in rows or len(doc["records"]) != 5:
        probs.append(f"unexpected rows: {cases}")
    if doc.get("seed") != results.SEED:
        probs.append(f"the results file does not carry the seed: {doc.get('seed')!r}")
    results.record(
        "faults",
        "a trial that cannot run is a failed row with its reason",
        0,
        not probs,
        time.monotonic() - t0,
        "; ".join(probs),
    )
    assert not probs, (probs, r.stdout[-1500:])
