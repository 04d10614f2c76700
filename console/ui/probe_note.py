"""The last probe's result as the bars show it, pure: only while it is recent, and a server's log bar only its own."""

from __future__ import annotations

import time
from dataclasses import dataclass

PROBE_SHOWN_S = 30.0
"""How long a probe's result stays on the fleet's top bar and the server's log bar: long enough to read after the
toast has gone, short enough that an old answer is not taken for the server's state now (its time is in it)."""


@dataclass(frozen=True)
class ProbeNote:
    """One probe's answer: which server, whether it passed, what it found, and when."""

    server: str
    ok: bool
    summary: str
    at: float

    @property
    def line(self) -> str:
        """`✓ NAME health 200 · … (14:03:05)`: the verdict first, so that a bar that cuts it short keeps it."""
        when = time.strftime("%H:%M:%S", time.localtime(self.at))
        return f"{'✓' if self.ok else '✖'} {self.server} {self.summary} ({when})"


def shown_probe(note: ProbeNote | None, now: float, server: str | None = None) -> str:
    """The line a bar shows for `note` at `now` ('' once it is PROBE_SHOWN_S old); with `server`, only that
    server's probe (a log bar is about one server)."""
    if note is None or now - note.at >= PROBE_SHOWN_S:
        return ""
    if server is not None and note.server != server:
        return ""
    return note.line
