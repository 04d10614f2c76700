"""LogModel: one server's log as the state keeps it — cleaned lines (bounded) plus the parser's view.

Wraps the incremental SGLang parser so FleetState and the UI read one small interface:
phase, progress, stats, timeline, diagnosis, and the recent lines with a running count.
Reads parser attributes directly (no snapshot copy per chunk: this sits on the log hot path).
"""

from __future__ import annotations

from collections import deque

from console.sglang.diagnose import Diagnosis, ProcessFacts, diagnose
from console.sglang.logparse import LogParser
from console.sglang.logstate import Facts, Stats
from console.sglang.phase import Phase

MAX_LINES = 20_000

__all__ = ["MAX_LINES", "Diagnosis", "LogModel"]


class LogModel:
    """Bytes in; phase, progress, stats, diagnosis and display lines out."""

    def __init__(self, max_lines: int = MAX_LINES) -> None:
        self.parser = LogParser()
        self.lines: deque[str] = deque(maxlen=max_lines)
        self.line_count = 0
        """Total lines ever seen; `line_count - len(lines)` have scrolled out of memory."""
        self.gaps = 0
        """Times bytes were known to be missing (a tail resumed past the last offset)."""
        self.stats_changed = False
        """True when the last feed brought a new batch line (a new throughput point)."""
        self._process: ProcessFacts | None = None
        self._diag_key: tuple[int, bool] | None = None
        self._diag: Diagnosis | None = None
        self._stats_key: tuple[int, int] | None = None

    def feed(self, data: bytes) -> list[str]:
        """Feed raw bytes; returns the complete cleaned lines they finished."""
        before = self.parser.stats.decode_lines
        out = self.parser.feed(data)
        self.lines.extend(out)
        self.line_count += len(out)
        self.stats_changed = self.parser.stats.decode_lines != before
        return out

    def note_gap(self, nbytes: int) -> None:
        self.gaps += 1

    def finish(self, exit_status: int | None, signal: str | int | None, stop_requested: bool = False) -> None:
        """The process ended: flush the partial line, settle the phase, keep the facts for diagnosis."""
        rest = self.parser.close()
        self.lines.extend(rest)
        self.line_count += len(rest)
        self._process = ProcessFacts(exit_status=exit_status, signal=signal, stop_requested=stop_requested)
        sig = self._process.signal_number
        self.parser.mark_exit(exit_status, sig, stop_requested=stop_requested)

    # -- the parser's view ------------------------------------------------------------------
    @property
    def stats(self) -> Stats:
        """Runtime stats, materialised from the latest batch lines only when new ones arrived."""
        st = self.parser.stats
        key = (st.decode_lines, st.prefill_lines)
        if key != self._stats_key:
            self._stats_key = key
            return self.parser.current_stats()
        return st

    @property
    def phase(self) -> str:
        return Phase.CRASHED.value if self.parser.crashed else self.parser.phase.value

    @property
    def batch_lines(self) -> int:
        """Decode and prefill batch lines seen: each one brings new throughput and load figures."""
        st = self.parser.stats
        return st.decode_lines + st.prefill_lines

    @property
    def shards(self) -> tuple[int, int] | None:
        s = self.parser.draft_shards if self.parser.draft and self.parser.draft_shards else self.parser.shards
        return s.as_tuple() if s else None

    @property
    def graphs(self) -> tuple[int, int] | None:
        return self.parser.graphs.as_tuple() if self.parser.graphs else None

    @property
    def draft(self) -> bool:
        return self.parser.draft

    @property
    def gen_throughput(self) -> float | None:
        return self.stats.gen_throughput

    @property
    def running(self) -> int | None:
        return self.stats.running_reqs

    @property
    def queued(self) -> int | None:
        return self.stats.queue_reqs

    @property
    def token_usage(self) -> float | None:
        return self.stats.token_usage

    @property
    def accept_len(self) -> float | None:
        return self.stats.accept_len

    @property
    def timeline(self) -> dict[str, float]:
        return dict(self.parser.timeline)

    @property
    def facts(self) -> Facts:
        return self.parser.facts

    @property
    def diagnosis(self) -> Diagnosis | None:
        """Crash cause, summary, hint and decisive line; None while nothing went wrong."""
        key = (self.parser.lines, self._process is not None)
        if key != self._diag_key:
            self._diag_key = key
            crashed = self.parser.crashed or self.phase == Phase.CRASHED.value
            self._diag = diagnose(self.parser.snapshot(), self._process) if crashed else None
        return self._diag
