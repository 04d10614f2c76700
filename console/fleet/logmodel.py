"""LogModel: one server's log as the state keeps it — cleaned lines (bounded by count and bytes) plus the parser's view.

Wraps the incremental SGLang parser so FleetState and the UI read one small interface:
phase, progress, stats, timeline, diagnosis, and the recent lines with a running count.
Reads parser attributes directly (no snapshot copy per chunk: this sits on the log hot path).
Kept lines are capped per server by bytes and share one fleet-wide LogBudget, so a fleet of 128
chatty servers holds at most the budget (192 MiB of line objects), not 128 x 20k lines of any length.
"""

from __future__ import annotations

import weakref
from collections import deque
from sys import getsizeof

from console.sglang.diagnose import Diagnosis, ProcessFacts, diagnose
from console.sglang.logparse import LogParser
from console.sglang.logstate import Facts, Stats
from console.sglang.phase import Phase
from console.sglang.specdec import SpecNote

MAX_LINES = 20_000
SERVER_BYTES = 8 * 1024 * 1024
"""One server's kept lines at most (as Python objects: `sys.getsizeof` of each str plus its deque slot)."""
FLEET_BYTES = 192 * 1024 * 1024
"""Every server's kept lines together at most; with many servers each gets an equal share."""
SLOT = 8
"""A deque slot: one pointer per kept line."""

__all__ = ["FLEET_BYTES", "MAX_LINES", "SERVER_BYTES", "Diagnosis", "LogBudget", "LogModel", "line_cost"]


def line_cost(line: str) -> int:
    """Bytes one kept line holds: the str object (1-4 bytes a character plus its header) and its deque slot."""
    return getsizeof(line) + SLOT


class LogBudget:
    """The fleet-wide cap on kept log lines: each live LogModel may hold `share()` bytes.

    Models register themselves (weakly: a replaced log leaves the budget with its last reference).
    A model trims itself to its share on every feed; when a new model shrinks the share and the
    total is over the limit, every model over its share is trimmed once, so the total never stays above.
    """

    def __init__(self, limit: int = FLEET_BYTES, per_server: int = SERVER_BYTES) -> None:
        self.limit = limit
        self.per_server = per_server
        self.total = 0
        self._models: weakref.WeakSet[LogModel] = weakref.WeakSet()

    def join(self, model: LogModel) -> None:
        self._models.add(model)
        weakref.finalize(model, self._leave, model.nbytes_box)

    def _leave(self, box: list[int]) -> None:
        self.total -= box[0]

    def share(self) -> int:
        return min(self.per_server, self.limit // max(1, len(self._models)))

    def rebalance(self) -> None:
        """Trim every model over its share (only runs while the total is over the limit)."""
        share = self.share()
        for m in list(self._models):
            if m.nbytes > share:
                m.trim(share)


FLEET_BUDGET = LogBudget()
"""The budget every LogModel of the process shares unless given its own."""


class LogModel:
    """Bytes in; phase, progress, stats, diagnosis and display lines out."""

    def __init__(self, max_lines: int = MAX_LINES, budget: LogBudget | None = None) -> None:
        self.parser = LogParser()
        self.lines: deque[str] = deque()
        """Oldest first; trimmed from the left by `max_lines` and by the budget's share of bytes."""
        self.max_lines = max_lines
        self.line_count = 0
        """Total lines ever seen; `line_count - len(lines)` have scrolled out of memory."""
        self.nbytes_box = [0]
        """Bytes the kept lines hold (`line_cost`), boxed so the budget can settle up after this model is gone."""
        self.budget = FLEET_BUDGET if budget is None else budget
        self.budget.join(self)
        self.gaps = 0
        """Times bytes were known to be missing (a tail resumed past the last offset)."""
        self.gpus: tuple[int, ...] = ()
        """The server's CUDA_VISIBLE_DEVICES when the console launched it (names torch's GPU N as the fleet's)."""
        self.stats_changed = False
        """True when the last feed brought a new batch line (a new throughput point)."""
        self._process: ProcessFacts | None = None
        self._diag_key: tuple[int, bool] | None = None
        self._diag: Diagnosis | None = None
        self._jump: str | None = None
        self._stats_key: tuple[int, int] | None = None

    def feed(self, data: bytes) -> list[str]:
        """Feed raw bytes; returns the complete cleaned lines they finished."""
        before = self.parser.stats.decode_lines
        out = self.parser.feed(data)
        self._keep(out)
        self.stats_changed = self.parser.stats.decode_lines != before
        return out

    @property
    def nbytes(self) -> int:
        return self.nbytes_box[0]

    def _keep(self, out: list[str]) -> None:
        if not out:
            return
        self.lines.extend(out)
        self.line_count += len(out)
        added = sum(map(getsizeof, out)) + SLOT * len(out)
        self.nbytes_box[0] += added
        b = self.budget
        b.total += added
        if len(self.lines) > self.max_lines or self.nbytes_box[0] > b.per_server or b.total > b.limit:
            self.trim(b.share())
            if b.total > b.limit:
                b.rebalance()

    def trim(self, max_bytes: int) -> None:
        """Drop the oldest lines until at most `max_lines` and `max_bytes` remain (the newest line always stays)."""
        lines, box, dropped = self.lines, self.nbytes_box, 0
        while len(lines) > 1 and (len(lines) > self.max_lines or box[0] - dropped > max_bytes):
            dropped += getsizeof(lines.popleft()) + SLOT
        box[0] -= dropped
        self.budget.total -= dropped

    def note_gap(self, nbytes: int) -> None:
        self.gaps += 1

    def finish(self, exit_status: int | None, signal: str | int | None, stop_requested: bool = False) -> None:
        """The process ended: flush the partial line, settle the phase, keep the facts for diagnosis."""
        self._keep(self.parser.close())
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
    def phase(self) -> Phase:
        return Phase.CRASHED if self.parser.crashed else self.parser.phase

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
        """Read for every log chunk (the sparkline): the parser keeps it per line, no batch-line re-parse."""
        return self.parser.last_gen_throughput

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
    def accept_rate(self) -> float | None:
        return self.stats.accept_rate

    @property
    def accepts(self) -> deque[tuple[float | None, float]]:
        """(log time, accept len) of the decode lines that printed one, oldest first."""
        return self.parser.accepts

    @property
    def spec_notes(self) -> dict[str, tuple[SpecNote, int, float | None]]:
        """Speculative-decoding alarms from the log: kind -> (note, count, last log time)."""
        return self.parser.spec_notes

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
            crashed = self.parser.crashed or self.phase is Phase.CRASHED
            snap = self.parser.snapshot() if crashed else None
            self._diag = diagnose(snap, self._process, self.gpus) if snap is not None else None
            block = snap.crash.block if snap is not None and snap.crash is not None else []
            self._jump = (
                "traceback"
                if any("Traceback (most recent call last)" in x for x in block)
                else "error"
                if block
                else None
            )
        return self._diag

    @property
    def crash_in_log(self) -> str | None:
        """What the log shows of the crash for `x` to jump to: 'traceback', 'error', or None (a process that
        vanished without a word: there is nothing to jump to, so no key may promise it)."""
        _ = self.diagnosis
        return self._jump
