"""The narrow faces of the controller that the lifecycle actions, the launch pre-checks and the liveness rechecks
work through.

`console.fleet.actions` (launch, stop, restart, wait-ready) and `console.fleet.prechecks` used to take the
whole FleetController (so did `console.fleet.recheck`); they need only what is named here, so they no longer
import it (the actions ⇄ controller and recheck ⇄ controller cycles are gone), and what an action may touch is written down in one place.
FleetController satisfies both structurally (mypy checks it where the controller passes itself).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from console.config import Fleet
from console.fleet.events import Event, HealthResult, ServerMeta
from console.fleet.hostlink import HostLink
from console.fleet.journal import Journal
from console.fleet.liveness import Absences
from console.fleet.state import FleetState


class FleetView(Protocol):
    """What the pre-checks read: the config and the state as applied so far. Nothing here runs anything."""

    @property
    def fleet(self) -> Fleet: ...

    @property
    def state(self) -> FleetState: ...


class HostOps(FleetView, Protocol):
    """What a lifecycle action needs: a link per host to run commands on, the journal for the launch lock's
    stream, the console's own bookkeeping of launches in flight, and `emit` for what it did."""

    @property
    def read_only(self) -> bool: ...

    @property
    def links(self) -> Mapping[str, HostLink]: ...

    @property
    def journal(self) -> Journal: ...

    @property
    def launching(self) -> dict[str, set[int]]:
        """Host -> ports of launches whose command has not returned (their process is not an external server)."""
        ...

    def emit(self, events: list[Event]) -> object:
        """Apply events to the state and tell subscribers (the actions' ServerAction/ServerSeen)."""
        ...

    def host_lock(self, host: str) -> asyncio.Lock:
        """This console's own one-launch-at-a-time lock per host (the host's flock is taken inside it)."""
        ...

    def note_launched(self, meta: ServerMeta, remote_time: float | None = None) -> None:
        """A launch's pid is known: a process sample before it shows up must not end the server."""
        ...

    async def wait_gone(self, name: str, timeout: float) -> bool:
        """Until the state calls the server ended (True) or `timeout` s pass (False)."""
        ...


class Rechecks(FleetView, Protocol):
    """What the second look before an end (and the log re-read of a server alive after all) needs."""

    @property
    def absences(self) -> Absences:
        """Servers the last process samples missed, since when."""
        ...

    async def check_health(self, name: str) -> HealthResult: ...

    def emit(self, events: list[Event]) -> object: ...
