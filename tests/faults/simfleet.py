"""Sim GPU hosts behind real sshd, so fault and hostile-input tests drive the console's real SSH code paths.

Each host is a `console.sim` host dir (its own nvidia-smi, SGLang venv, models) fronted by an
`SshTestHost` (network namespace, PID namespace, sshd, login user); `hosts.toml` points at them over
SSH exactly as it would at real GPU machines.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.config import Fleet, load_fleet
from console.fleet.controller import FleetController
from console.fleet.journal import Journal
from console.sim.control import inject
from console.sim.hostdir import build_host
from console.sim.spec import CT129_SPEC, SimHostSpec
from tests.fixtures.sshhosts import SshTestHost
from tests.patience import patient

SCALE = 0.03
"""Sim startup time scale: a full launch -> ready walk in about a second."""
REPO = Path(__file__).resolve().parents[2]
MODEL = "Qwen3-0.6B"


def trials(default: int) -> int:
    """A case's trial count: `default` times $DFLASH_FAULT_TRIALS (a multiplier, default 1), at least 1."""
    raw = os.environ.get("DFLASH_FAULT_TRIALS", "")
    try:
        scale = float(raw) if raw else 1.0
    except ValueError:
        scale = 1.0
    return max(1, round(default * scale))


def make_traversable(path: Path) -> None:
    """o+x on every ancestor, so the sshd login user can exec the console's interpreter (sim stand-ins)."""
    if os.geteuid() != 0:
        return
    for parent in [path, *path.parents]:
        try:
            mode = parent.stat().st_mode
        except OSError:
            continue
        if parent.is_dir() and not mode & 0o001:
            os.chmod(parent, mode | 0o001)


def _interp_reachable() -> None:
    for p in (Path(sys.executable).resolve().parent, Path(sys.executable).parent, REPO):
        make_traversable(p)


@dataclass
class SimHost:
    name: str
    dir: Path
    ssh: SshTestHost
    spec: SimHostSpec

    def section(self, *, run_dir: str | None = None, log_dir: str | None = None) -> str:
        return (
            self.ssh.hosts_toml_section(self.name)
            + f'python = "{self.dir}/venv/bin/python3"\nrun_dir = "{run_dir or self.dir / "run"}"\n'
            + f'log_dir = "{log_dir or self.dir / "logs"}"\n'
        )

    def model(self, name: str = MODEL) -> str:
        return str(self.dir / "models" / name)

    def crash(self, port: int, kind: str = "sigkill", phase: str | None = None) -> None:
        inject(self.dir, port, "crash", kind=kind, **({"phase": phase} if phase else {}))

    def pgrep(self, pattern: str) -> list[int]:
        r = self.ssh.exec(f"pgrep -f -- {_sq(pattern)} || true")
        return [int(x) for x in r.stdout.split()]

    def alive(self, pid: int) -> bool:
        return self.ssh.exec(f"kill -0 {pid} 2>/dev/null && echo yes || echo no").stdout.strip() == "yes"

    def cmdline(self, pid: int) -> list[str]:
        r = self.ssh.exec(f"cat /proc/{pid}/cmdline")
        return r.stdout.split("\0")[:-1]

    def environ(self, pid: int) -> dict[str, str]:
        r = self.ssh.exec(f"cat /proc/{pid}/environ")
        return dict(kv.split("=", 1) for kv in r.stdout.split("\0") if "=" in kv)


def _sq(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


@dataclass
class SimFleet:
    """N sim hosts behind sshd and the hosts.toml that names them (presets appended by tests)."""

    root: Path
    hosts: dict[str, SimHost] = field(default_factory=dict)

    def toml(
        self,
        presets: str = "",
        *,
        extra_hosts: str = "",
        name: str = "hosts.toml",
        host_overrides: dict[str, dict[str, str]] | None = None,
    ) -> Path:
        parts = ["[console]\npoll_ms = 500\n"]
        for h in self.hosts.values():
            parts.append(h.section(**(host_overrides or {}).get(h.name, {})))
        parts += [extra_hosts, presets]
        p = self.root / name
        p.write_text("\n".join(parts))
        return p

    def fleet(self, presets: str = "", **kw: Any) -> Fleet:
        return load_fleet(self.toml(presets, **kw))


def scratch_root() -> Path:
    """A world-traversable scratch dir outside pytest's tmp_path: pytest resets /tmp/pytest-of-USER to 0700
    at every session start (another run's too), which would lock the sshd login user out of the host dirs."""
    d = Path(tempfile.mkdtemp(prefix="dfc-faults-", dir="/tmp"))
    os.chmod(d, 0o755)
    return d


def build_sim_fleet(
    factory: Callable[..., Any],
    root: Path,
    names: list[str],
    spec: SimHostSpec = CT129_SPEC,
    faults: dict[str, list[str]] | None = None,
) -> SimFleet:
    """Sim hosts under `root` (from `scratch_root()`), each fronted by its own sshd from `factory`."""
    _interp_reachable()
    root.mkdir(parents=True, exist_ok=True)
    make_traversable(root)
    fleet = SimFleet(root)
    for n in names:
        s = spec.with_(name=n, time_scale=SCALE, faults=list((faults or {}).get(n, [])))
        d = build_host(root / n, s)
        ssh = factory(n, d)
        fleet.hosts[n] = SimHost(n, d, ssh, s)
    return fleet


def preset_toml(
    name: str,
    host: SimHost,
    *,
    gpus: str = "[0]",
    port: int = 30000,
    args: str = "[]",
    env: str = "{}",
    model: str | None = None,
    extra: str = "",
) -> str:
    model = model if model is not None else json.dumps(host.model())
    return (
        f'[presets.{name}]\nhost = "{host.name}"\ngpus = {gpus}\nmodel = {model}\nport = {port}\n'
        f"args = {args}\nenv = {env}\nready_timeout = 120\n{extra}\n"
    )


async def wait_for(pred: Callable[[], Any], timeout: float, what: str = "condition", every: float = 0.05) -> Any:
    """Poll `pred` on the event loop until truthy; AssertionError naming `what` after `timeout` × PATIENCE."""
    timeout = patient(timeout)
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(every)


def controller(fleet: Fleet, journal_path: Path | None = None, **kw: Any) -> FleetController:
    return FleetController(fleet, journal=Journal(journal_path) if journal_path else None, **kw)


def isolate_env(tmp_path: Path, monkeypatch: Any) -> None:
    """No ~/.ssh/config, agent or real console state: each test sees only what it writes."""
    empty = tmp_path / "ssh_config"
    empty.write_text("")
    monkeypatch.setenv("DFLASH_SSH_CONFIG", str(empty))
    monkeypatch.setenv("DFLASH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("DFLASH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
