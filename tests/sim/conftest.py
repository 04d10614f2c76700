"""Fixtures for the sim fleet tests: a fast sim fleet, launches through plan_launch + /bin/sh, log waits."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.config import Fleet, load_fleet
from console.sglang.command import launch_command, plan_launch
from console.sim.fleet import sim_down, sim_up
from console.sim.state import proc_start_ticks
from tests.samples import SAMPLES

__all__ = ["SAMPLES"]

SCALE = 0.02


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Launched:
    pid: int
    log: Path
    port: int
    fleet: Fleet

    def text(self) -> str:
        return self.log.read_bytes().decode(errors="replace") if self.log.exists() else ""

    def wait(self, pattern: str, timeout: float = 20.0) -> re.Match[str]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = re.search(pattern, self.text(), re.M)
            if m:
                return m
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} not in log within {timeout}s:\n{self.text()[-3000:]}")

    def wait_gone(self, timeout: float = 15.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if proc_start_ticks(self.pid) is None:
                return
            time.sleep(0.05)
        raise AssertionError(f"pid {self.pid} still alive:\n{self.text()[-2000:]}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def sim(tmp_path: Path):
    root = tmp_path / "fleet"
    path = sim_up(root, hosts=["ct129", "blackwell"], time_scale=SCALE)
    yield root, path
    sim_down(root, timeout=3)


def launch(
    hosts_toml: Path,
    preset: str,
    *,
    args: list[str] | None = None,
    drop: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    gpus: list[int] | None = None,
    model: str | None = None,
    port: int | None = None,
    update: dict | None = None,
) -> Launched:
    """Launch a preset exactly as the console would: plan_launch's command, run by /bin/sh."""
    fleet = load_fleet(hosts_toml)
    p = fleet.presets[preset]
    kept: list[str] = []
    skip = False
    for a in p.args:
        if skip:
            skip = False
            continue
        if a in drop:
            skip = _takes_value(a)
            continue
        kept.append(a)
    upd = {"port": port or free_port(), "args": kept + (args or []), "env": {**p.env, **(env or {})}}
    if model:
        upd["model"] = model
    upd.update(update or {})
    fleet = fleet.model_copy(update={"presets": {**fleet.presets, preset: p.model_copy(update=upd)}})
    plan = plan_launch(fleet, preset, f"t{time.monotonic_ns()}", gpus)[0]
    # the whole argv and env, secrets included (plan.command leaves them to the console's 0600 files)
    cmd = launch_command(plan.argv, plan.env, plan.log_path)
    out = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, check=True, timeout=10)
    return Launched(int(out.stdout.split()[-1]), Path(plan.log_path), plan.replica.port, fleet)


_SWITCHES = {"--trust-remote-code", "--enable-metrics", "--skip-server-warmup", "--disable-radix-cache"}


def _takes_value(flag: str) -> bool:
    return flag not in _SWITCHES


def smi(host_dir: Path, *args: str, timeout: float = 10) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(host_dir / "bin" / "nvidia-smi"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PATH": "/usr/bin:/bin", **({"HOME": os.environ["HOME"]} if "HOME" in os.environ else {})},
    )
