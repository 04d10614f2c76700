"""LogModel: one server's log as the state keeps it — cleaned lines (bounded) plus the parser's view.

Wraps the incremental SGLang parser so FleetState and the UI read one small interface:
phase, progress, stats, timeline, diagnosis, and the recent lines with a running count.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

MAX_LINES = 20_000


@dataclass(frozen=True)
class Diagnosis:
    cause: str
    summary: str
    hint: str
    error_line: str


class LogModel:
    """Lines in, phase/stats/diagnosis out. (Integration point for console.sglang.logparse.)"""

    def __init__(self, max_lines: int = MAX_LINES) -> None:
        self.lines: deque[str] = deque(maxlen=max_lines)
        self.line_count = 0
        """Total lines ever seen; `line_count - len(lines)` lines have scrolled out."""
        self.gaps = 0
        self.phase = "launching"
        self.shards: tuple[int, int] | None = None
        self.graphs: tuple[int, int] | None = None
        self.gen_throughput: float | None = None
        self.running: int | None = None
        self.queued: int | None = None
        self.token_usage: float | None = None
        self.stats_changed = False
        self.timeline: dict[str, float] = {}
        self.diagnosis: Diagnosis | None = None
        self.facts: dict[str, object] = {}
        self._partial = b""

    def feed(self, data: bytes) -> list[str]:
        """Feed raw bytes; returns the complete cleaned lines they finished."""
        self.stats_changed = False
        buf = self._partial + data
        parts = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        self._partial = parts.pop()
        out = [p.decode("utf-8", "replace") for p in parts]
        self.lines.extend(out)
        self.line_count += len(out)
        return out

    def note_gap(self, nbytes: int) -> None:
        self.gaps += 1

    def finish(self, exit_status: int | None, signal: str | None) -> None:
        """The process ended: settle the phase and diagnose."""
