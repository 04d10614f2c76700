"""A server that died while no console watched is found ended by every later command: that is watching (polling),
not an action repeated in `journal`'s default view. Local-transport sim host, real processes."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from console.fleet.journalview import record_kind
from console.sim.fleet import sim_down
from tests.fleet.test_cli import cli
from tests.fleet.test_ports import _free_port_pair, _host, _preset
from tests.patience import PATIENCE


def _records() -> list[dict]:
    p = Path(os.environ["DFLASH_STATE_DIR"]) / "journal.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def test_each_command_finding_a_dead_server_adds_no_action(
    sim_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: every `status`/`logs` after the death wrote a 'gone' action, so `journal -n 10` was those."""
    monkeypatch.setenv("DFLASH_SIM_TIME_SCALE", "0.1")
    hosts = tmp_path / "hosts.toml"
    preset = _preset("gen", "deadbox", [0], _free_port_pair(), sim_root).replace('"0.5"', '"0.8"')  # KV must fit
    hosts.write_text(_host(sim_root, "deadbox") + preset)
    name = "gen@deadbox:gpu0"
    try:
        r = cli(hosts, "launch", "gen", "--wait")
        assert r.returncode == 0, r.stdout + r.stderr
        pid = next(s["pid"] for s in json.loads(cli(hosts, "status", "--json").stdout)["servers"] if s["name"] == name)
        os.killpg(os.getpgid(pid), signal.SIGKILL)  # dies while no console watches
        deadline = time.monotonic() + 10 * PATIENCE
        while True:  # each status is a new console finding it (the kernel reaps the process in its own time)
            srv = next(s for s in json.loads(cli(hosts, "status", "--json").stdout)["servers"] if s["name"] == name)
            if srv["phase"] == "crashed":
                break
            assert time.monotonic() < deadline, srv
            time.sleep(0.5)
        r = cli(hosts, "status", "--json")
        srv = next(s for s in json.loads(r.stdout)["servers"] if s["name"] == name)
        assert srv["phase"] == "crashed", srv
        ends = [x for x in _records() if x.get("server") == name and x.get("action") in ("gone", "found-ended")]
        assert len(ends) >= 2 and all(x["action"] == "found-ended" for x in ends), ends
        assert all(record_kind(x) == "polling" for x in ends)
        r = cli(hosts, "journal", "-n", "10")
        mine = [x for x in r.stdout.splitlines() if name in x and ("gone" in x or "found-ended" in x)]
        assert r.returncode == 0 and not mine, r.stdout  # (other tests' sim servers may come and go as externals)
        r = cli(hosts, "journal", "-n", "10", "--kind", "polling")
        assert any(name in x and "found-ended" in x for x in r.stdout.splitlines()), r.stdout
    finally:
        sim_down(sim_root)
