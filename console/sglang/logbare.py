"""Lines without SGLang's header (a LogParser mixin): a wrapper's prefix, traceback lines, bars, aborts, uvicorn's own output.

Kept apart from the record dispatch so each file stays readable; it only touches the parser's state
through the attributes declared below.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable

from console.sglang.logmarkers import CRASH, FRAGMENT, OWN_BLOCK, classify
from console.sglang.logtext import Header, find_embedded_header, learn_prefix, parse_header, unwrap
from console.sglang.logtrace import EXC, Tracebacks, add_error
from console.sglang.phase import Phase

ERRISH = re.compile(r"error|Error|ERROR|Traceback|exception|failed|FAILED|NCCL WARN|Killed|cannot |No such file")
_ARGPARSE = re.compile(r"(?:[\w./-]+(?: serve)?: error: |Error: --model-path is required)")
_COMPOSE = re.compile(r"[\w.-]+\s*\| ?")
_UVICORN = ("INFO:     ", "ERROR:    ", "WARNING:  ")
_TB_HEAD = "Traceback (most recent call last)"
_PYWARN = re.compile(r"\S*/sglang/[\w/]+\.py:\d+: [A-Z]\w*Warning: ")
"""A Python warning raised in SGLang's own code (`.../sglang/launch_server.py:51: UserWarning: ...`): SGLang is
running, still launching; often all a launch prints before its first record."""


class BareLines:
    """Handlers for header-less lines; `_line` / `_bar` / `_uvicorn` / `_crash_marker` come from LogParser."""

    lines: int
    sglang_lines: int
    ts: float | None
    phase: Phase
    errors: deque[str]
    tail: deque[str]
    _tb: Tracebacks
    _prefix: re.Pattern[str] | None

    _line: Callable[..., None]
    _bar: Callable[[str], None]
    _uvicorn: Callable[[str, str], None]
    _crash_marker: Callable[..., None]
    _check_interrupt: Callable[[], None]
    _spec_note: Callable[[str], bool]

    def _bare(self, line: str) -> None:
        """A line without SGLang's header: a wrapper's prefix, a traceback line, a bar, an abort, uvicorn's own output."""
        s = line
        c = s[:1]
        if c == " " or c == "\t":
            if self._tb.block is not None:  # a traceback's frames: the bulk of bare lines, nothing else to look for
                self._tb.add(s)
                return
        elif c:
            if "Error: DFLASH " in s[:60]:  # a raised spec failure's exception line (draft OOM): an alarm as well
                self._spec_note(s)
            u = unwrap(s) if (c == "[" or c == "(" or c.isdigit() or "]<std" in s[:64]) else None
            if u is not None:
                s, ts = u
                if ts is not None:
                    self.lines -= 1
                    self._line(s, Header(ts, "", 0, 0))
                    return
            elif " | " in s[:48] or "  |" in s[:48]:
                m = _COMPOSE.match(s)
                if m:
                    s = s[m.end() :]
            elif self._prefix is not None and (m := self._prefix.match(s)) is not None:
                s = s[m.end() :]
            elif (
                self._tb.block is None
                and (i := s.find(_TB_HEAD, 1, 160)) > 0
                and not s[:i].isspace()
                and classify(s) is None
            ):
                self._prefix = learn_prefix(s[:i])  # an unknown wrapper in front of a traceback: learn it from there
                s = s[i:]
            if s is not line and s[:1] == "[" and parse_header(s) is not None:
                self.lines -= 1
                self._line(s)
                return
        if self._tb.block is not None:
            k = classify(s, in_block=True) if s[:1] not in " \t" else None
            if k is None or k is FRAGMENT:
                self._tb.add(s)
                self._check_interrupt()
            else:
                self._marker(k, s)
            return
        if "%|" in s or "% Completed" in s:
            self.sglang_lines += 1
            i = find_embedded_header(s)
            self._bar(s[:i] if i > 0 else s)
            if i > 0:
                self._line(s[i:])
            return
        if s.lstrip().startswith(("Traceback (most recent call last)", 'File "')) or EXC.match(s):
            self.sglang_lines += 1
            self._tb.open(s, self.ts, self.phase, fatal=not s.startswith("KeyboardInterrupt"))
            self._check_interrupt()
            return
        if s.startswith(_UVICORN):
            self.sglang_lines += 1
            self._uvicorn(s, line)
            return
        k = classify(s)
        if k is not None:
            self._marker(k, s)
        elif c == "/" and _PYWARN.match(s):
            self.sglang_lines += 1
        elif _ARGPARSE.match(s):
            self.sglang_lines += 1
            self._crash_marker(s, None)
            if self._tb.crash is not None and not self._tb.crash.exception_lines:
                self._tb.crash.exception_lines.append(s)
        elif s == "Killed" or (s and ERRISH.search(s)):
            add_error(self.errors, s)
            self._tb.note(s, None)  # printed at an unknown time (no header of its own): never too old
        if s:
            self.tail.append(s)

    def _marker(self, kind: str, s: str) -> None:
        """A bare line that says the process died (after any prefix): mark the crash, open its block if it heads one."""
        self.sglang_lines += 1
        if kind is CRASH:
            self._crash_marker(s, None)
            return
        if self._tb.block is not None:
            self._tb.close()
        self._crash_marker(s, None, opens_block=True)
        self._tb.open(s, self.ts, self.phase, fatal=True)
        if kind is not OWN_BLOCK and self._tb.block is not None:  # an abort; C++ frames on their own are one too
            self._tb.block.abort = True
