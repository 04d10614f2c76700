"""A Linux terminal driver whose Escape key arrives after ESCDELAY, not after the next 100 ms input poll.

Textual's LinuxDriver polls stdin with a fixed 100 ms `select` timeout and only then notices that a
lone ESC byte was not the start of an escape sequence, so every Escape (close a dialog, leave a
screen) took 100-130 ms whatever ESCDELAY said (benchmarks/bench_keypress.py). This driver is the same
input loop with one change: while the parser waits on an ESC, `select` wakes when that wait ends.
Only the timeout differs; if Textual's internals move, `driver_class()` falls back to Textual's driver.
"""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder

from textual.driver import Driver

POLL_S = 0.1
"""Textual's own idle poll (it also bounds how quickly the input thread sees an exit request)."""

try:
    from textual._loop import loop_last
    from textual._time import get_time
    from textual._xterm_parser import XTermParser
    from textual.drivers.linux_driver import LinuxDriver
except ImportError:  # another platform or another Textual: keep Textual's driver
    LinuxDriver = None  # type: ignore[assignment,misc]


def next_wait(timeout_at: float | None, now: float, poll_s: float = POLL_S) -> float:
    """Seconds `select` may sleep: the idle poll, or less when the parser's ESC wait ends sooner."""
    if timeout_at is None:
        return poll_s
    return max(0.0, min(poll_s, timeout_at - now))


if LinuxDriver is not None:

    class PromptEscapeDriver(LinuxDriver):  # type: ignore[misc,valid-type]
        """LinuxDriver with an input loop that honours ESCDELAY for a lone Escape."""

        def run_input_thread(self) -> None:
            selector = selectors.SelectSelector()
            selector.register(self.fileno, selectors.EVENT_READ)
            fileno = self.fileno
            event_read = selectors.EVENT_READ
            parser = XTermParser(self._debug)
            feed, tick = parser.feed, parser.tick
            decode = getincrementaldecoder("utf-8")().decode

            def process(selector_events: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> None:
                for last, (_key, mask) in loop_last(selector_events):
                    if mask & event_read:
                        data = decode(os.read(fileno, 1024 * 4), final=final and last)
                        if not data:
                            break
                        for event in feed(data):
                            self.process_message(event)
                for event in tick():
                    self.process_message(event)

            def wait() -> float:
                return next_wait(getattr(parser, "_timeout_time", None), get_time())

            try:
                while not self.exit_event.is_set():
                    process(selector.select(wait()))
                selector.unregister(self.fileno)
                process(selector.select(POLL_S), final=True)
            finally:
                selector.close()
                try:
                    for _event in feed(""):
                        pass
                except Exception:  # EOF or a parse error at shutdown: nothing more to deliver
                    pass


def driver_class(default: type[Driver]) -> type[Driver]:
    """Our driver where Textual would use its plain LinuxDriver; Textual's choice everywhere else."""
    if LinuxDriver is not None and default is LinuxDriver:
        return PromptEscapeDriver
    return default
