"""Tracebacks, process aborts and crash markers in a log: which evidence belongs to the crash, and whether the log stopped on one.

A block opens at `Traceback`, a bare `File "..."` line (a fragment), an exception line, a "hit an
exception" record or a process abort (`terminate called ...`, `Fatal Python error`, `Exception
raised from ...`), and closes at the next recognised record. Progress after a closed block (a phase
change, a batch line) means SGLang survived it. Error lines since the last progress are kept as the
crash's context: the decisive error is often printed before the crash marker or above a cut traceback.
"""

from __future__ import annotations

import re
from collections import deque

from console.sglang.logstate import CrashInfo
from console.sglang.phase import Phase

EXC = re.compile(r"(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)(?:: |:$|\(|$)")
"""`RuntimeError: ...`, `torch.OutOfMemoryError: ...`, `Exception: ...`, `ValueError("...")`, bare `AssertionError`."""
BLOCK_LINES = 400
KEEP_HEAD = 40
CONTEXT_LINES = 40
CONTEXT_S = 10.0
"""A record line (it has its own time) counts as a crash's context only if printed this close before it: an
import error SGLang ignored at start-up is not the cause of a crash a minute later. Lines without a header
(asserts, traceback exceptions) have no time of their own and always count until the next progress."""


class Tracebacks:
    """The open block, the last closed fatal block, the recent error lines, and the crash (once one is known)."""

    def __init__(self, errors: deque[str]) -> None:
        self.errors = errors
        self.block: CrashInfo | None = None
        self.last: CrashInfo | None = None
        self.crash: CrashInfo | None = None
        self.recent: deque[tuple[str, float | None]] = deque(maxlen=CONTEXT_LINES)
        """Error lines (with their log time) since the last progress: the crash's context."""
        self.interrupted = False
        """A KeyboardInterrupt was seen (someone pressed ctrl-C: stopped, not crashed)."""
        self.eof = False
        """The input is complete: a traceback the log ends in is the end of the process, even if cut."""

    def open(self, line: str, ts: float | None, phase: Phase, *, fatal: bool, rank: str | None = None) -> None:
        if self.block is not None:
            self.close()
        self.block = b = CrashInfo(line, ts, rank=rank, phase_at_crash=phase, fatal=fatal)
        c = self.crash
        if c is not None and fatal and not c.block:
            c.block, c.exception_lines = b.block, b.exception_lines  # the crash's own traceback, filled as it prints
        self.add(line)

    def add(self, s: str) -> None:
        b = self.block
        if b is None:
            return
        if len(b.block) >= BLOCK_LINES:
            del b.block[KEEP_HEAD]
        b.block.append(s)
        c = s[:1]
        if c not in " \t" and EXC.match(s):
            self._exception(b, s)
            if s.startswith("KeyboardInterrupt"):
                self.interrupted = True
        elif c == " " and s.startswith("  what():"):
            self._exception(b, s.strip())  # a C++ exception's message (`terminate called ...` then `  what():  ...`)

    def _exception(self, b: CrashInfo, s: str) -> None:
        if len(b.exception_lines) < 40:
            b.exception_lines.append(s)
        add_error(self.errors, s)
        self.note(s, None)

    def note(self, line: str, ts: float | None) -> None:
        """An error-looking line: context for a crash that follows soon, before any progress."""
        if self.crash is None and (not self.recent or self.recent[-1][0] != line):
            self.recent.append((line, ts))

    def context(self, own: list[str], ts: float | None, but: str = "") -> list[str]:
        """The recent error lines that are not the crash's own and were printed close before it."""
        return [
            x
            for x, t in self.recent
            if x not in own and x != but and (t is None or ts is None or 0.0 <= ts - t <= CONTEXT_S)
        ]

    def close(self) -> None:
        b, self.block = self.block, None
        if b is None or not b.fatal:
            return
        if self.crash is not None:
            if not self.crash.block:
                self.crash.block, self.crash.exception_lines = b.block, b.exception_lines
            return
        if b.exception_lines or b.abort or any("hit an exception" in x for x in b.block[:1]):
            self.last = b

    def progress(self) -> None:
        """The server moved on: a closed traceback was not fatal, and the errors before it are not the crash's."""
        if self.crash is None:
            self.last = None
            self.recent.clear()

    def pending(self) -> CrashInfo | None:
        """A traceback or abort that nothing after it contradicts: the log stopped on it."""
        b = self.block if self.block is not None and self.block.fatal else None
        if b is not None and (
            b.abort
            or (b.exception_lines and not b.exception_lines[-1].startswith("KeyboardInterrupt"))
            or (self.eof and _is_traceback(b))
        ):
            return self._with_context(b)
        lb = self.last
        if lb is not None and lb.exception_lines and lb.exception_lines[-1].startswith("KeyboardInterrupt"):
            return None
        return self._with_context(lb) if lb is not None else None

    def mark(self, line: str, ts: float | None, rank: str | None, phase: Phase, *, opens_block: bool = False) -> bool:
        """A line that says the server died; True when it is the first such line.

        `opens_block`: the line heads its own traceback ("Scheduler hit an exception: Traceback ..."), so an
        earlier closed block is context, not the crash's own evidence.
        """
        add_error(self.errors, line)
        if self.crash is not None:
            if line not in self.crash.markers:
                self.crash.markers.append(line)
            return False
        src = self.block if self.block is not None else (None if opens_block else self.last)
        self.crash = c = CrashInfo(line, ts, rank=rank, phase_at_crash=phase)
        c.markers.append(line)
        if src is not None and src.fatal:
            c.block, c.exception_lines, c.abort = src.block, src.exception_lines, src.abort
            c.phase_at_crash = src.phase_at_crash
            c.rank = c.rank or src.rank
        c.context = self.context(c.block, ts, line)
        return True

    def current(self, terminal: bool, up: bool) -> CrashInfo | None:
        """The crash; or, while still starting (not `up`, no terminal phase), a traceback the log stopped on.

        Once the server is up an idle log prints nothing, so a traceback followed by silence is not
        proof of death: it needs a crash marker or the process's exit (LogParser.mark_exit).
        """
        if self.crash is not None:
            return self.crash
        return None if terminal or up else self.pending()

    def _with_context(self, b: CrashInfo) -> CrashInfo:
        if not b.context:
            b.context = self.context(b.block, b.ts)
        return b


def _is_traceback(b: CrashInfo) -> bool:
    head = b.block[0].lstrip() if b.block else ""
    return "Traceback (most recent call last)" in head or head.startswith('File "') or "hit an exception" in head


def add_error(errors: deque[str], line: str) -> None:
    if not errors or errors[-1] != line:
        errors.append(line)
