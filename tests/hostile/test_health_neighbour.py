"""A server whose /health drips a byte every 0.25 s next to a healthy one on the same host (issue 19.2): the
host's health loop (one request at a time) still reaches the healthy one, and its `launch --wait` returns."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from console.config import parse_fleet
from console.fleet import discovery
from console.fleet.controller import HEALTH_EVERY_S, FleetController
from console.fleet.events import ServerMeta
from console.sglang.httpbound import HEALTH_DEADLINE_S
from tests.faults import results
from tests.fixtures.testnet import free_port
from tests.hostile.badhttp import RUN_FOR_S

BADHTTP = Path(__file__).with_name("badhttp.py")


def _server(mode: str, port: int) -> subprocess.Popen[bytes]:
    """A real process whose argv reads like SGLang's (so the console's process loop owns it), in its own session."""
    p = subprocess.Popen(
        [sys.executable, str(BADHTTP), mode, str(port), "sglang.launch_server"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert p.stdout is not None and p.stdout.readline() == b"listening\n"
    return p


def _meta(run_dir: Path, name: str, port: int, pid: int) -> None:
    d = run_dir / "servers" / discovery.safe_name(name)
    d.mkdir(parents=True)
    log = run_dir / f"{discovery.safe_name(name)}.log"
    log.write_text("")
    m = ServerMeta(
        name=name,
        host="box",
        gpus=(0,),
        port=port,
        preset=None,
        managed=True,
        pid=pid,
        sid=pid,
        log_path=str(log),
        argv=("python", "-m", "sglang.launch_server"),
        launch_id=name,
    )
    (d / "meta.json").write_text(discovery.meta_to_json(m))


async def test_a_dripping_neighbour_leaves_the_health_loop_and_wait_ready_going(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DFLASH_STATE_DIR", str(tmp_path / "state"))
    run_dir = tmp_path / "run"
    ports = {"a-drip@box:gpu0": free_port("127.0.0.1"), "b-ok@box:gpu1": free_port("127.0.0.1")}
    procs = {name: _server("drip" if "drip" in name else "ok", port) for name, port in ports.items()}
    for name, port in ports.items():
        _meta(run_dir, name, port, procs[name].pid)
    fleet = parse_fleet(
        f'[console]\npoll_ms = 500\n[hosts.box]\ntransport = "local"\nhttp = "direct"\n'
        f'python = "{sys.executable}"\nrun_dir = "{run_dir}"\n',
        "test-hosts.toml",
    )
    ctl = FleetController(fleet)
    try:
        t0 = time.monotonic()
        await ctl.start()
        assert await ctl.wait_hosts(10)
        end = time.monotonic() + 10
        while set(ports) - set(ctl.state.servers) and time.monotonic() < end:  # re-attached from meta.json
            await asyncio.sleep(0.05)
        assert set(ports) <= set(ctl.state.servers), list(ctl.state.servers)  # (others' servers are external)
        out = await ctl.wait_ready("b-ok@box:gpu1", timeout=RUN_FOR_S - 5)
        ok, msg = out.ok, out.message
        took = time.monotonic() - t0
        drip = ctl.state.servers["a-drip@box:gpu0"]
        # the drip is checked first (listing order): one full deadline, then the next request is the neighbour's
        bound = HEALTH_DEADLINE_S + 2 * HEALTH_EVERY_S + 3.0
        passed = ok and drip.health == "error" and "within 5 s" in drip.health_detail and took <= bound
        results.record(
            "hostile",
            "http: a dripping /health next to a healthy server: its wait_ready returns",
            0,
            passed,
            took,
            f"{msg}; drip: {drip.health} {drip.health_detail}",
            took_s=took,
            bound_s=bound,
        )
        assert passed, (ok, msg, drip.health, drip.health_detail, took)
    finally:
        await ctl.close()
        for p in procs.values():
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(10)
