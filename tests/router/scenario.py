"""A real SGLang router (sglang-router's launch_router) in front of sim replicas on a local sim host.

`RouterRig` builds the host dir, a hosts.toml with one preset of N TP=1 replicas and one router, and a
FleetController + RouterManager over it. `crash_under_load` is the failover trial the test and
benchmarks/router_failover.py share: a closed-loop load through the router, one replica SIGKILLed mid-way.
"""

from __future__ import annotations

import asyncio
import socket
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.config import load_fleet
from console.fleet.controller import FleetController
from console.fleet.journal import Journal
from console.router.manager import RouterManager
from console.sglang.bench import BenchSpec, LoadGenerator
from console.sim.control import inject
from console.sim.fleet import build_host, sim_down
from console.sim.spec import PRESET_SPECS

ROUTER = "lb"
PRESET = "gen"


def free_block(n: int) -> int:
    """A port P with P..P+n-1 free now (the sim servers and the router bind this machine's ports)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p + n > 65535:
            continue
        ok = True
        with ExitStack() as st:
            for q in range(p, p + n):
                sk = st.enter_context(socket.socket())
                try:
                    sk.bind(("127.0.0.1", q))
                except OSError:
                    ok = False
                    break
        if ok:
            return p
    raise RuntimeError(f"no block of {n} free ports")


def rig_toml(root: Path, replicas: int, policy: str = "round_robin") -> Path:
    d = build_host(root / "bw", PRESET_SPECS["blackwell"].with_(name="bw", time_scale=0.03))
    base = free_block(replicas + 2)
    text = (
        f'[console]\npoll_ms = 500\n\n[hosts.bw]\ntransport = "local"\npython = "{d}/venv/bin/python3"\n'
        f'run_dir = "{d}/run"\nlog_dir = "{d}/logs"\nenv = {{ PATH = "{d}/bin:/usr/local/bin:/usr/bin:/bin" }}\n\n'
        f'[presets.{PRESET}]\nhost = "bw"\ngpus = {list(range(replicas))}\ntp = 1\nport = {base}\n'
        f'model = "{d}/models/Qwen3.6-27B"\nready_timeout = 120\n'
        f'args = ["--mem-fraction-static", "0.8", "--mamba-scheduler-strategy", "extra_buffer"]\n\n'
        f'[routers.{ROUTER}]\nhost = "bw"\npresets = ["{PRESET}"]\nport = {base + replicas}\n'
        f'metrics_port = {base + replicas + 1}\npolicy = "{policy}"\n'
    )
    p = root / "hosts.toml"
    p.write_text(text)
    return p


@dataclass
class RouterRig:
    root: Path
    ctl: FleetController
    mgr: RouterManager

    @property
    def host_dir(self) -> Path:
        return self.root / "bw"

    def replicas(self) -> list[str]:
        return sorted(n for n, s in self.ctl.state.servers.items() if s.meta.preset == PRESET)

    def port_of(self, name: str) -> int:
        port = self.ctl.state.servers[name].meta.port
        assert port is not None
        return port

    async def close(self) -> None:
        await self.mgr.down(ROUTER)
        await self.mgr.aclose()
        await self.ctl.close()
        await asyncio.to_thread(sim_down, self.root)


async def open_rig(root: Path, replicas: int = 3, policy: str = "round_robin") -> RouterRig:
    fleet = load_fleet(rig_toml(root, replicas, policy))
    ctl = FleetController(fleet, journal=Journal(root / "journal.jsonl"))
    await ctl.start()
    return RouterRig(root, ctl, RouterManager(ctl))


async def wait_until(pred: Any, timeout: float, what: str, every: float = 0.1) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        v = pred()
        if v:
            return v
        if loop.time() > end:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(every)


@dataclass(frozen=True)
class FailoverResult:
    requests: int
    errors: int
    concurrency: int
    killed: str
    killed_after: int
    """Requests finished when the replica was killed."""
    error_examples: tuple[str, ...]
    tok_s: float


async def crash_under_load(
    rig: RouterRig, *, concurrency: int = 12, num_prompts: int = 120, output_len: int = 64, kill_after: int = 24
) -> FailoverResult:
    """Closed-loop streaming load through the router; once `kill_after` requests are done, SIGKILL a replica."""
    url = await rig.mgr.url(ROUTER)
    victim = rig.replicas()[1]
    port = rig.port_of(victim)
    done = asyncio.Event()
    counted = {"n": 0}

    def progress(_c: int, n: int, _total: int) -> None:
        counted["n"] = n
        if n >= kill_after and not done.is_set():
            done.set()
            inject(rig.host_dir, port, "crash", kind="sigkill")

    spec = BenchSpec(
        url=url, concurrency=(concurrency,), input_len=32, output_len=output_len, num_prompts=num_prompts, warmup=False
    )
    async with LoadGenerator(spec) as g:
        await g.discover_model()
        lv = await g.run_level(concurrency, progress=progress)
    return FailoverResult(
        lv.requests, lv.errors, concurrency, victim, kill_after, lv.error_examples, lv.output_throughput_tok_s
    )
