"""The seam between the UI/CLI and the fleet: what a front end may ask, and the results it gets.

The UI holds one `FleetApi` (implemented by `console.fleet.controller.FleetController`), renders
`api.state`, and calls these coroutines from workers. Nothing here imports Textual.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from console.config import Fleet
from console.fleet.changes import Changes
from console.fleet.events import Event
from console.fleet.state import FleetState
from console.sglang.command import LaunchPlan
from console.sglang.lint import Finding


@dataclass(frozen=True)
class PreCheck:
    """One launch pre-check (GPU free, port free, model present, lint)."""

    name: str
    ok: bool
    message: str
    blocking: bool = True
    forcible: bool = False
    """Other processes' VRAM in the way: `restart --force` goes ahead (said, not refused)."""


@dataclass(frozen=True)
class LaunchPreview:
    """What `l` shows before confirming: the exact commands, lint findings, pre-check results."""

    preset: str
    plans: list[LaunchPlan]
    findings: list[Finding] = field(default_factory=list)
    checks: list[PreCheck] = field(default_factory=list)
    stamp: str = ""
    """The stamp in the plans' log names: a launch given it starts these very commands (the same log files)."""

    @property
    def blocked(self) -> bool:
        return any(f.severity == "error" for f in self.findings) or any(c.blocking and not c.ok for c in self.checks)

    @property
    def forcible(self) -> bool:
        """Blocked only by checks that `--force` overrides (other processes' VRAM)."""
        return (
            self.blocked
            and not any(f.severity == "error" for f in self.findings)
            and all(c.forcible for c in self.checks if c.blocking and not c.ok)
        )


@dataclass(frozen=True)
class ActionOutcome:
    """Result of launch/stop/restart: ok, the servers touched, and a one-line message."""

    ok: bool
    message: str
    servers: list[str] = field(default_factory=list)
    forcible: bool = False
    """A refusal that `force` overrides (a restart: other processes hold the VRAM its relaunch needs)."""


Listener = Callable[[list[Event], Changes], None]
"""Called after each batch of events is applied, with the batch and what it changed (console/fleet/changes.py)."""


class FleetApi(Protocol):
    fleet: Fleet
    state: FleetState
    read_only: bool

    def subscribe(self, listener: Listener) -> None:
        """Called (on the event loop) after each batch of events is applied."""
        ...

    async def start(self) -> None:
        """Connect every host and start its monitors (returns at once; links come up in background).

        FleetController.start also takes `hosts=[...]` to connect only some (one-shot CLI commands)."""
        ...

    async def close(self) -> None: ...

    async def preview(self, preset: str, gpus: list[int] | None = None) -> LaunchPreview: ...

    async def launch(
        self, preset: str, gpus: list[int] | None = None, *, wait: bool = False, stamp: str | None = None
    ) -> ActionOutcome:
        """`stamp`: a preview's (LaunchPreview.stamp), so what starts is the command it showed, log name and all."""
        ...

    async def stop_server(self, name: str) -> ActionOutcome: ...

    async def restart(self, name: str, *, force: bool = False) -> ActionOutcome:
        """Stop (if running) and relaunch; refused before the stop when the relaunch could not start (`force`:
        other processes' VRAM is no reason)."""
        ...

    async def wait_ready(self, name: str, timeout: float | None = None) -> ActionOutcome:
        """Until the log says ready and /health answers 200 (timeout: the preset's ready_timeout)."""
        ...

    async def reconnect(self, host: str) -> None: ...

    def watch_log(self, name: str, on: bool) -> None:
        """A view that shows this server's log as it comes opened (on) or closed (off; one per on): while any is
        open, the server's host sends log news at once instead of in quarter-second batches (fleet/agent.py)."""
        ...

    async def server_url(self, name: str) -> str:
        """Base URL (`http://127.0.0.1:PORT`) reaching the server, through the tunnel when needed."""
        ...

    def api_key_env(self, name: str) -> str | None:
        """Name of the env var holding the server's API key (from its preset), if any."""
        ...

    async def read_file(self, host: str, path: str, max_bytes: int = 4_000_000) -> bytes:
        """Read a (log) file on a host, e.g. a crashed server's previous log."""
        ...
