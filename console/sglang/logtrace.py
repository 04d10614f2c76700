"""Tracebacks and crash markers in a log: which traceback belongs to the crash, and whether the log stopped on one.

A block opens at `Traceback`, a bare `File "..."` line (a fragment), an exception line or a
"hit an exception" record, and closes at the next `[ts]` record. Progress after a closed block
(a phase change, a batch line) means SGLang survived it.
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


class Tracebacks:
    """The open block, the last closed fatal block, and the crash (once one is known)."""

    def __init__(self, errors: deque[str]) -> None:
        self.errors = errors
        self.block: CrashInfo | None = None
        self.last: CrashInfo | None = None
        self.crash: CrashInfo | None = None
        self.interrupted = False
        """A KeyboardInterrupt was seen (someone pressed ctrl-C: stopped, not crashed)."""

    def open(self, line: str, ts: float | None, phase: Phase, *, fatal: bool, rank: str | None = None) -> None:
        if self.block is not None:
            self.close()
        self.block = CrashInfo(line, ts, rank=rank, phase_at_crash=phase, fatal=fatal)
        self.add(line)

    def add(self, s: str) -> None:
        b = self.block
        if b is None:
            return
        if len(b.block) >= BLOCK_LINES:
            del b.block[KEEP_HEAD]
        b.block.append(s)
        if s[:1] not in " \t" and EXC.match(s):
            if len(b.exception_lines) < 40:
                b.exception_lines.append(s)
            add_error(self.errors, s)
            if s.startswith("KeyboardInterrupt"):
                self.interrupted = True

    def close(self) -> None:
        b, self.block = self.block, None
        if b is None or not b.fatal:
            return
        if self.crash is not None:
            if not self.crash.block:
                self.crash.block, self.crash.exception_lines = b.block, b.exception_lines
            return
        if b.exception_lines or any("hit an exception" in x for x in b.block[:1]):
            self.last = b

    def progress(self) -> None:
        """The server moved on: a closed traceback was not fatal."""
        if self.crash is None:
            self.last = None

    def pending(self) -> CrashInfo | None:
        """A traceback that nothing after it contradicts: the log stopped on it."""
        b = self.block if self.block is not None and self.block.fatal else None
        if b is not None and b.exception_lines and not b.exception_lines[-1].startswith("KeyboardInterrupt"):
            return b
        lb = self.last
        if lb is not None and lb.exception_lines and lb.exception_lines[-1].startswith("KeyboardInterrupt"):
            return None
        return lb

    def mark(self, line: str, ts: float | None, rank: str | None, phase: Phase) -> bool:
        """A line that says the server died; True when it is the first such line."""
        add_error(self.errors, line)
        if self.crash is not None:
            return False
        src = self.block if self.block is not None else self.last
        self.crash = c = CrashInfo(line, ts, rank=rank, phase_at_crash=phase)
        if src is not None and src.fatal:
            c.block, c.exception_lines = src.block, src.exception_lines
            c.phase_at_crash = src.phase_at_crash
            c.rank = c.rank or src.rank
        return True

    def current(self, terminal: bool, up: bool) -> CrashInfo | None:
        """The crash; or, while still starting (not `up`, no terminal phase), a traceback the log stopped on.

        Once the server is up an idle log prints nothing, so a traceback followed by silence is not
        proof of death: it needs a crash marker or the process's exit (LogParser.mark_exit).
        """
        if self.crash is not None:
            return self.crash
        return None if terminal or up else self.pending()


def add_error(errors: deque[str], line: str) -> None:
    if not errors or errors[-1] != line:
        errors.append(line)
