"""Fleet integration fixtures: sim GPU hosts behind real sshd, a fleet config, a running controller."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.config import Fleet, parse_fleet
from console.fleet.controller import FleetController
from console.sim.fleet import build_host
from console.sim.spec import PRESET_SPECS

# sshhosts fixtures are registered by the top-level conftest.py

TIME_SCALE = 0.04
"""Sim startups take ~1-2 s at this scale."""


@pytest.fixture(scope="session", autouse=True)
def _interpreter_reachable() -> None:
    """The sim's stand-ins exec this interpreter as the sshd login user: let it traverse to it (o+x only)."""
    if os.geteuid() != 0:
        return
    for parent in Path(os.path.realpath(sys.executable)).parents:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            os.chmod(parent, mode | 0o001)


@pytest.fixture(autouse=True)
def _isolated_ssh_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ~/.ssh/config, agent or real trust file: each test sees only what it writes."""
    empty = tmp_path / "ssh_config"
    empty.write_text("")
    monkeypatch.setenv("DFLASH_SSH_CONFIG", str(empty))
    monkeypatch.setenv("DFLASH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("DFLASH_STATE_DIR", str(d))
    monkeypatch.setenv("DFLASH_SIM_TIME_SCALE", str(TIME_SCALE))
    return d


@dataclass
class SimSsh:
    """A sim host dir served by a real sshd."""

    name: str
    dir: Path
    ssh: object  # tests.fixtures.sshhosts.SshTestHost

    def section(self, **extra: str) -> str:
        lines = [
            self.ssh.hosts_toml_section(self.name),
            f'python = "{self.dir}/venv/bin/python3"',
            f'run_dir = "{self.dir}/run"',
            f'log_dir = "{self.dir}/logs"',
        ]
        lines += [f"{k} = {_toml(v)}" for k, v in extra.items()]
        return "\n".join(lines) + "\n"

    def model(self, name: str = "Qwen3-0.6B") -> str:
        return str(self.dir / "models" / name)


@pytest.fixture
def sim_root() -> Iterator[Path]:
    """Host dirs live outside pytest's tmp root: a concurrent pytest run resets that to mode 0700,
    which the sshd login user could then no longer traverse."""
    d = Path(tempfile.mkdtemp(prefix="dfc-fleet-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sim_ssh(ssh_host_factory, sim_root: Path) -> Callable[..., SimSsh]:
    """`make(name, spec="blackwell", faults=())`: a sim host (its own netns, pid ns, sshd)."""

    def make(name: str, spec: str = "blackwell", faults: tuple[str, ...] = ()) -> SimSsh:
        d = sim_root / f"sim-{name}"
        s = PRESET_SPECS[spec].with_(name=name, time_scale=TIME_SCALE, faults=list(faults))
        build_host(d, s)
        h = ssh_host_factory(name, d)
        return SimSsh(name, d, h)

    return make


def _toml(v: object) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return json.dumps(v)


def preset_toml(
    name: str,
    host: SimSsh,
    gpus: list[int],
    port: int,
    *,
    model: str | None = None,
    args: list[str] | None = None,
    tp: int | None = None,
    **extra: object,
) -> str:
    lines = [
        f"[presets.{name}]",
        f'host = "{host.name}"',
        f"gpus = {gpus}",
        f"model = {_toml(model or host.model())}",
        f"port = {port}",
        f"args = {_toml(args or ['--mem-fraction-static', '0.5'])}",
        "ready_timeout = 60",
    ]
    if tp is not None:
        lines.append(f"tp = {tp}")
    lines += [f"{k} = {_toml(v)}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def make_fleet(text: str) -> Fleet:
    return parse_fleet("[console]\npoll_ms = 500\n" + text, "test-hosts.toml")


async def launch_small(
    h: SimSsh, controller_factory: Callable[..., FleetController]
) -> tuple[FleetController, str, str]:
    """A started controller for sim host `h` with its `small` preset launched on GPU 0 and ready:
    (controller, server name, its log path)."""
    ctl = controller_factory(make_fleet(h.section() + preset_toml("small", h, [0], 30000)))
    await ctl.start()
    out = await ctl.launch("small", wait=True)
    assert out.ok, out.message
    name = out.servers[0]
    return ctl, name, ctl.state.servers[name].meta.log_path or ""


@pytest.fixture
async def controller_factory() -> AsyncIterator[Callable[..., FleetController]]:
    made: list[FleetController] = []

    def make(fleet: Fleet, **kw: object) -> FleetController:
        c = FleetController(fleet, **kw)  # type: ignore[arg-type]
        made.append(c)
        return c

    yield make
    for c in made:
        await c.close()


def journal_lines() -> list[dict]:
    p = Path(os.environ["DFLASH_STATE_DIR"]) / "journal.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []
