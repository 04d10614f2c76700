"""Start one sim SGLang server (the `qwen36-bench` preset of a sim fleet) as a subprocess, for bench tests."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from console.config import load_fleet
from console.sglang.command import plan_launch
from console.sim.fleet import sim_down, sim_up
from console.sim.spec import BLACKWELL_SPEC


@dataclass
class SimServer:
    """A running sim server: its URL, the token rate it was given, and its host's spec."""

    url: str
    token_rate: float
    half_concurrency: float
    hosts_toml: Path
    log: Path


def free_port(addr: str = "127.0.0.1") -> int:
    """A currently free loopback port (the sim fleet's fixed ports may be taken by other tests)."""
    with socket.socket() as s:
        s.bind((addr, 0))
        return int(s.getsockname()[1])


def private_loopback() -> str:
    """A loopback address of this server's own (127.0.0.0/8 is all loopback): a stray poller of another test,
    left aiming at 127.0.0.1:PORT after its server died, can never reach this one and skew its counters."""
    r = random.Random(os.getpid() * 1000003 + time.monotonic_ns())
    return f"127.{r.randrange(1, 255)}.{r.randrange(1, 255)}.{r.randrange(2, 255)}"


@contextlib.contextmanager
def sim_server(
    root: Path, token_rate: float, preset: str = "qwen36-bench", ready_s: float = 30.0
) -> Iterator[SimServer]:
    """Build a blackwell sim host under root, launch `preset` on a free port at DFLASH_SIM_TOKEN_RATE, wait for /health."""
    toml = sim_up(root, hosts=("blackwell",), time_scale=0.01)
    plan = plan_launch(load_fleet(toml), preset, "bench")[0]
    addr = private_loopback()
    port = free_port(addr)
    argv = list(plan.argv)
    argv[argv.index("--port") + 1] = str(port)
    argv[argv.index("--host") + 1] = addr
    if "--enable-metrics" not in argv:  # the bench tests check figures against the server's own /metrics
        argv.append("--enable-metrics")
    env = dict(os.environ) | plan.env | {"DFLASH_SIM_TOKEN_RATE": str(token_rate)}
    log = root / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    url = f"http://{addr}:{port}"
    try:
        end = time.monotonic() + ready_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"sim server exited {proc.returncode}: {log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=2, trust_env=False).status_code == 200:
                    break
            if time.monotonic() > end:
                raise RuntimeError(f"sim server not ready in {ready_s} s: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        yield SimServer(url, token_rate, BLACKWELL_SPEC.half_concurrency, toml, log)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
        sim_down(root)
