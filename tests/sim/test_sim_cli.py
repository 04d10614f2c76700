"""`dflash-console sim up/down/crash`, the hosts.toml it writes, and SGLang's exit codes (docs/sglang.md §6)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from console.cli import main
from console.config import load_fleet
from console.sglang.command import plan_launch
from console.sim.fleet import sim_down

from .conftest import free_port, launch


def _run(plan_argv: list[str], env: dict[str, str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        plan_argv, env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True, timeout=timeout
    )


def test_sim_up_is_idempotent_and_check_prints_runnable_commands(tmp_path: Path, capsys) -> None:
    d = tmp_path / "f"
    assert main(["sim", "up", "--dir", str(d), "--time-scale", "0.04"]) == 0
    first = (d / "hosts.toml").read_text()
    assert main(["sim", "up", "--dir", str(d), "--time-scale", "0.04"]) == 0
    assert (d / "hosts.toml").read_text() == first
    fleet = load_fleet(d / "hosts.toml")
    assert {h.transport for h in fleet.hosts.values()} == {"local"}
    assert fleet.hosts["ct129"].python == str(d.resolve() / "ct129/venv/bin/python3")
    ports = [p.replica.port for n in fleet.presets for p in plan_launch(fleet, n, "x")]
    assert len(set(ports)) == 7 and ports[1:5] == list(range(ports[1], ports[1] + 4)), ports
    shards = sorted((d / "blackwell/models/Qwen3.6-27B").glob("model-*-of-00015.safetensors"))
    assert len(shards) == 15 and sum(f.stat().st_size for f in shards) == 55_630_000_000
    assert sum(f.stat().st_blocks for f in shards) == 0  # sparse placeholders
    capsys.readouterr()
    assert main(["--hosts", str(d / "hosts.toml"), "check"]) == 0
    out = capsys.readouterr().out
    assert "setsid nohup env CUDA_VISIBLE_DEVICES=0,1" in out and "0 errors" in out
    assert main(["sim", "crash", "--dir", str(d), "--host", "nope", "--port", "1", "--kind", "nccl"]) == 2


def test_sim_up_moves_off_taken_ports_and_prints_the_next_command(tmp_path: Path, capsys) -> None:
    """Something here already holds the default ports (another user's sim): the fleet goes elsewhere."""
    import socket

    held = []
    for port in (30000, 31000, 31080):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            s.close()  # taken already: by someone else, which is the case under test too
            continue
        held.append(s)
    try:
        d = tmp_path / "f"
        assert main(["sim", "up", "--dir", str(d), "--time-scale", "0.04"]) == 0
    finally:
        for s in held:
            s.close()
    out, err = capsys.readouterr()
    fleet = load_fleet(d / "hosts.toml")
    ports = {q for n in fleet.presets for p in plan_launch(fleet, n, "x") for q in [p.replica.port]}
    ports |= {r.port for r in fleet.routers.values()}
    assert not ports & {30000, 31000, 31080}, ports
    assert out.strip() == str(d.resolve() / "hosts.toml")
    assert f"dflash-console --hosts {d.resolve() / 'hosts.toml'} launch qwen36-mtp --wait" in err, err
    assert f"dflash-console sim down --dir {d.resolve()}" in err, err


def test_exit_codes_match_sglang(sim) -> None:
    _root, hosts = sim
    fleet = load_fleet(hosts)
    plan = plan_launch(fleet, "qwen36-bench", "x")[0]
    argv, env = plan.argv[:], plan.env
    assert _run([*argv, "--bogus"], env).returncode == 2
    bad = _run([*argv, "--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "2"], env)
    assert bad.returncode == 1 and bad.stderr.rstrip().endswith("AssertionError")
    oom = _run([*argv, "--mem-fraction-static", "0.2"], env)
    assert oom.returncode == -signal.SIGKILL  # shells report 137
    assert "Received sigquit from a child process" in oom.stderr


def test_sim_down_stops_everything(sim) -> None:
    root, hosts = sim
    s = launch(hosts, "qwen36-mtp", port=free_port())
    s.wait("fired up", 30)
    assert httpx.get(f"{s.url}/health", timeout=5).status_code == 200
    assert sim_down(root) >= 3  # main + two ranks
    s.wait_gone(5)
    time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{p}") and open(f"/proc/{p}/stat").read().split()[2] != "Z" for p in [s.pid])
