"""`dflash-console router …`, `check`, `probe router:NAME` and `bench router:NAME` as real processes on a local
sim host, with the real sglang-router."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from console.sim.fleet import sim_down
from tests.router.scenario import rig_toml

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sglang_router") is None, reason="sglang-router is a dev dependency (uv sync)"
)


def run(hosts: Path, *args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DFLASH_STATE_DIR": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "console", "--hosts", str(hosts), *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
        env=env,
    )


def test_router_cli_on_a_local_sim_host():
    root = Path(tempfile.mkdtemp(prefix="dfc-router-cli-", dir="/tmp"))
    hosts = rig_toml(root, 2)
    st = root / "state"
    try:
        r = run(hosts, "check", state=st)
        assert r.returncode == 0, r.stderr
        assert "router lb (host bw" in r.stdout and "-m sglang_router.launch_router" in r.stdout
        r = run(hosts, "router", "up", "lbb", state=st)
        assert r.returncode == 2 and "unknown router 'lbb'; did you mean 'lb'? (known: lb)" in r.stderr
        r = run(hosts, "router", "status", "lb", state=st)
        assert r.returncode == 0 and ": stopped" in r.stdout
        assert json.loads(run(hosts, "status", "--json", state=st).stdout)["routers"][0]["phase"] == "stopped"
        assert run(hosts, "launch", "gen", "--wait", state=st).returncode == 0
        r = run(hosts, "router", "up", "lb", state=st)
        assert r.returncode == 0, r.stderr
        assert "router lb is up on bw:" in r.stdout and "with 2 workers" in r.stdout
        r = run(hosts, "router", "up", "lb", state=st)
        assert r.returncode == 1 and "already running" in r.stderr
        r = run(hosts, "router", "status", "lb", state=st)
        assert r.returncode == 0 and "running" in r.stdout and "workers 2/2 healthy" in r.stdout, r.stdout
        # round_robin: the router counts no load, so each worker shows its replica's own running requests
        assert r.stdout.count("healthy  run ") == 2 and "gen@bw:gpu0" in r.stdout and "gen@bw:gpu1" in r.stdout
        r = run(hosts, "status", "--json", state=st)  # `status` shows routers too, with their workers' servers
        (lb,) = json.loads(r.stdout)["routers"]
        assert lb["name"] == "lb" and lb["phase"] == "running" and lb["healthy_workers"] == 2 and lb["pid"], lb
        assert sorted(w["server"] for w in lb["workers"]) == ["gen@bw:gpu0", "gen@bw:gpu1"]
        r = run(hosts, "status", state=st)
        assert next(ln for ln in r.stdout.splitlines() if ln.startswith("lb ")).split()[3:5] == ["running", "2/2"]
        r = run(hosts, "probe", "router:lb", state=st)
        assert r.returncode == 0 and "ready (HTTP 200" in r.stdout and "answer" in r.stdout, r.stdout + r.stderr
        r = run(
            hosts,
            "bench",
            "router:lb",
            "--concurrency",
            "2",
            "--num-prompts",
            "10",
            "--input-len",
            "16",
            "--output-len",
            "16",
            state=st,
        )
        assert r.returncode == 0, r.stderr
        assert "bench router:lb" in r.stdout
        row = next(ln for ln in r.stdout.splitlines() if ln.startswith("2 "))
        assert row.split()[1] == "10" and row.split()[-1] == "0"  # 10 requests, 0 errors
        r = run(
            hosts,
            "router",
            "bench",
            "lb",
            "--concurrency",
            "2",
            "--num-prompts",
            "10",
            "--input-len",
            "16",
            "--output-len",
            "16",
            state=st,
        )
        assert r.returncode == 0, r.stderr
        assert "(one replica) vs router lb over 2 healthy workers" in r.stdout
        assert next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("2 ")).split()[-1] == "0/0"
        r = run(hosts, "router", "logs", "lb", "-n", "5", state=st)
        assert r.returncode == 0 and "/logs/router-lb_" in r.stdout and "\x1b" not in r.stdout, r.stdout
        assert len(r.stdout.splitlines()) == 6  # the header and 5 lines, its colour codes stripped
        r = run(hosts, "router", "sync", "lb", state=st)
        assert r.returncode == 0 and "workers already match the 2 serving replicas" in r.stdout
        r = run(hosts, "router", "down", "lb", state=st)
        assert r.returncode == 0 and "router lb stopped" in r.stdout
        r = run(hosts, "router", "down", "lb", state=st)
        assert r.returncode == 0 and "already stopped" in r.stdout
        r = run(hosts, "router", "logs", "lb", "-n", "3", state=st)  # the stopped router's last log stays readable
        assert r.returncode == 0 and "/logs/router-lb_" in r.stdout and "(stopped)" in r.stdout, r.stdout + r.stderr
    finally:
        sim_down(root)
        shutil.rmtree(root, ignore_errors=True)
