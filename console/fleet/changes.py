"""Changes: what applying events did to FleetState, so front ends redraw and toast from facts, not by diffing.

`FleetState.apply(event)` returns one; `FleetController.emit` unites a batch's and hands it to every
subscriber with the events. A screen redraws the hosts in `hosts` (a server's events count for its host,
even a removed server's), toasts `notices` by their `kind`, and draws at once instead of coalescing when
`urgent` is set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from console.fleet.events import Notice, NoticeKind


@dataclass(frozen=True)
class Changes:
    """The hosts and servers an apply touched, the notices it gave, and whether to draw now."""

    hosts: frozenset[str] = frozenset()
    """Hosts whose band or panes may look different now."""
    servers: frozenset[str] = frozenset()
    """Servers whose own state changed (seen, ended, removed, log, health, metrics, action, VRAM)."""
    notices: tuple[Notice, ...] = ()
    """For a person (toast, activity panel), in order."""
    urgent: bool = False
    """A lifecycle or connection change (launch, stop, end, host down or back): shown at once, not coalesced
    like the telemetry, log, health and metrics stream."""

    @property
    def empty(self) -> bool:
        return not (self.hosts or self.servers or self.notices)

    def of_kind(self, kind: NoticeKind) -> tuple[Notice, ...]:
        return tuple(n for n in self.notices if n.kind is kind)

    def __or__(self, other: Changes) -> Changes:
        return Changes.union((self, other))

    @staticmethod
    def union(parts: Iterable[Changes]) -> Changes:
        """One Changes for a batch (built once: a log flood's batch holds hundreds of events)."""
        hosts: set[str] = set()
        servers: set[str] = set()
        notices: list[Notice] = []
        urgent = False
        for c in parts:
            hosts |= c.hosts
            servers |= c.servers
            notices.extend(c.notices)
            urgent = urgent or c.urgent
        return Changes(frozenset(hosts), frozenset(servers), tuple(notices), urgent)


NOTHING = Changes()
