"""When a server missing from a process sample is really gone: one missed sample is not an end.

A sample can miss a live process (a race with a fork, a `ps` that failed to read one /proc entry);
calling the server crashed on that left a live server red for good. A managed server is ended only
after a second look taken apart in time (a fresh `ps` run as a command) also misses it and, when it
has a port, `/health` does not answer; that same command reads the rest of its log, so the crash
notice is diagnosed from the whole log, the one the pane shows. Pure: the controller does the IO.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from console.fleet.events import ProcInfo
from console.fleet.monitor import parse_ps
from console.sglang.command import shell_path

CONFIRM_DELAY_S = 0.25
"""The second look waits this long after the sample that missed the server."""
HEALTH_VETO_S = 5.0
"""A port that answers /health keeps a server alive while ps has missed it for less than this (after that
the port is someone else's: a server that lost an `address already in use` race)."""
EXTERNAL_CONFIRM_S = 0.9
"""External servers (no command is spent on them): gone once missing from samples this far apart."""
ANSWERING = ("ok", "warming", "unauthorized")
"""/health outcomes that mean a server listens on the port."""
LOG_REST_MAX = 4_000_000
_LOG_MARK = "==> log\n"


@dataclass
class Absences:
    """Server name -> time of the first sample in a row that missed it."""

    first_missed: dict[str, float] = field(default_factory=dict)

    def seen(self, name: str) -> None:
        self.first_missed.pop(name, None)

    def missed(self, name: str, at: float) -> float:
        """Record a miss at `at`; returns how long it has been missing (0 for the first miss)."""
        first = self.first_missed.setdefault(name, at)
        return max(0.0, at - first)

    def missing(self, name: str) -> bool:
        return name in self.first_missed

    def absent_for(self, name: str, now: float) -> float:
        first = self.first_missed.get(name)
        return 0.0 if first is None else max(0.0, now - first)


def confirm_command(log_path: str | None, offset: int) -> str:
    """A fresh process table, then the log from byte `offset` on (what the tail has not delivered yet)."""
    cmd = "ps -ww -eo pid=,ppid=,sid=,args="
    if log_path:
        cmd += (
            f'; echo "==> log"; tail -c +{int(offset) + 1} {shell_path(log_path)} 2>/dev/null | head -c {LOG_REST_MAX}'
        )
    return cmd


def parse_confirm(text: str) -> tuple[list[ProcInfo], str]:
    """(process table, the log's remaining text) from confirm_command's output."""
    ps, _, rest = text.partition(_LOG_MARK)
    return parse_ps(ps), rest


FIRST_FRAME_S = 20.0
"""How long a connection may wait for its process agent's first frame: the agent is an interpreter starting on the
host, which on a loaded host (a model loading; 64 stand-in hosts starting on two cores) took over 6 s, and a host
that was only slow to start was called down and reconnected, a burst that slowed the rest further. After the
first frame the agent answers every second and the plain limit applies."""


def frame_limit(limit_s: float, first: bool) -> float:
    """The silence allowed before a frame counts as missing: FIRST_FRAME_S (if longer) until the first one came."""
    return max(limit_s, FIRST_FRAME_S) if first else limit_s


class Silence:
    """A host's silence as the watchdog should judge it: the time since its last frame, less the time this console's
    own event loop was late (a starved console reads a live host's frames late; it must not call the host dead and
    reconnect, a burst that starves it further). Pure: times are passed in."""

    TICK_SLACK_S = 0.2
    """A tick later than this counts as the console's own stall."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.stalled_s = 0.0
        """Console stall within the current silence (reset when a frame arrives)."""
        self._frame_seen = 0.0

    def tick(self, now: float, expected: float, last_frame: float, *, first: bool = False) -> float | None:
        """One watchdog tick at `now` that was due at `expected`: the excused silence when it exceeds the limit
        (`first`: no frame has come on this connection yet, so the limit is FIRST_FRAME_S if that is longer)."""
        if last_frame != self._frame_seen:
            self._frame_seen = last_frame
            self.stalled_s = 0.0
        self.stalled_s += max(0.0, now - expected - self.TICK_SLACK_S)
        quiet = now - last_frame - self.stalled_s
        return quiet if quiet > frame_limit(self.limit_s, first) else None
