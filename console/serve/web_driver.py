"""Textual's WebDriver with an input loop that delivers a lone Escape after ESCDELAY, not after the next poll.

Each browser session's console runs under Textual's WebDriver, whose input reader wakes every 100 ms when idle;
a lone ESC byte (the Escape key) waits for that wake-up before the parser may call it Escape, so Escape took
~100 ms longer in the browser than `?` (benchmarks/bench_serve_browser.py). As console/ui/driver.py does for
the terminal, the reader's timeout shrinks to the parser's pending ESC wait, and a key read opens the log
readers' hold (console/keys_first.py). Only these differ from Textual's loop; if Textual's internals move,
the session falls back to Textual's own WebDriver. The session's TEXTUAL_DRIVER names this class (console/serve/server.py).
"""

from __future__ import annotations

from codecs import getincrementaldecoder

from console.keys_first import KEYS_FIRST

POLL_S = 0.1
"""Textual's own idle wake-up of the input reader."""

DRIVER = "textual.drivers.web_driver:WebDriver"
"""What a session uses when this module cannot (another Textual)."""

try:
    from textual._time import get_time
    from textual._xterm_parser import XTermParser
    from textual.drivers._byte_stream import ByteStream
    from textual.drivers.web_driver import WebDriver, _ExitInput
    from textual.events import Key
    from textual.message import Message
except ImportError:  # pragma: no cover - another Textual: keep its driver
    WebDriver = None  # type: ignore[assignment,misc]


def reader_timeout(timeout_at: float | None, now: float, poll_s: float = POLL_S) -> float:
    """How long the reader may block: the idle poll, or less when the parser's ESC wait ends sooner."""
    if timeout_at is None:
        return poll_s
    return max(0.0, min(poll_s, timeout_at - now))


if WebDriver is not None:
    DRIVER = f"{__name__}:PromptEscapeWebDriver"

    class PromptEscapeWebDriver(WebDriver):
        """WebDriver whose input loop honours ESCDELAY for a lone Escape."""

        def run_input_thread(self) -> None:
            reader = self._input_reader
            parser = XTermParser(debug=self._debug)
            decode = getincrementaldecoder("utf-8")().decode
            packets = ByteStream()

            def deliver(event: Message) -> None:
                if isinstance(event, Key):
                    KEYS_FIRST.key_arrived()  # the log readers step aside until its frame
                self.process_message(event)

            try:
                for data in reader:
                    if data:
                        for packet_type, payload in packets.feed(data):
                            if packet_type == "D":
                                for event in parser.feed(decode(payload)):
                                    deliver(event)
                            else:
                                self._on_meta(packet_type, payload)
                    for event in parser.tick():
                        deliver(event)
                    reader.timeout = reader_timeout(getattr(parser, "_timeout_time", None), get_time())
            except _ExitInput:
                pass
            except Exception:
                from traceback import format_exc

                from textual import log

                log(format_exc())
            finally:
                reader.close()
