"""Key presses before log floods: while a key is on its way to the screen, the log stream readers step aside.

Under a flood each turn of the event loop runs a step of a host's tail reader (a read of up to 16 KB parsed into
the state: 4-13 ms beside a busy process). A key travels through several turns (the input thread's post, the
app, the focused widget, the screen, the app's bindings, the frame), and each turn waited for a reader's step:
20-40 ms passed before the key's binding even ran (a trace of benchmarks/bench_keypress.py under `--busy 1`).
A reader's bytes can wait a few milliseconds in the SSH channel's buffer without loss; a person waits for the key.

So a key's arrival (the input thread) opens a hold; the readers, before each chunk, wait while it is open. The
hold closes when a frame is drawn a little after the app took the key (that frame shows it; one drawn sooner
counts once `SETTLE_S` has passed), or after `HOLD_MAX_S` whatever happens (a key that changes nothing draws
no frame). Times are `time.monotonic()`; the
input thread writes one float, the event loop reads it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

HOLD_MAX_S = 0.1
"""The longest a hold lasts from its key's arrival: log lines are never held back longer for one key."""
FRAME_AFTER_S = 0.004
"""A frame closes the hold only when drawn this long after the app took the key: a frame already under way
when the key came shows the screen before it. With the readers held, a key's hops take well under this."""
SETTLE_S = 0.02
"""A frame drawn sooner than FRAME_AFTER_S after the app took the key closes the hold once this long has passed
since: a key with the readers held is done by then, and that frame was its own (no later one may come)."""
WAIT_STEP_S = 0.002
"""How often a held reader looks again."""

NEVER = float("-inf")


class KeysFirst:
    """The hold: opened by a key's arrival, closed by its frame or by `HOLD_MAX_S`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.key_at = NEVER
        """When the latest key arrived (the input thread)."""
        self.taken_at = NEVER
        """When the app last took a key from the input thread (before its bindings and widgets see it)."""
        self.drawn_at = NEVER
        """When a frame was last written to the terminal."""
        self._closed_for = NEVER
        """The `key_at` whose hold has closed."""

    def key_arrived(self) -> None:
        """A key was read from the terminal (called from the input thread)."""
        self.key_at = self._clock()

    def key_taken(self) -> None:
        """The app took a key from the input thread."""
        self.taken_at = self._clock()

    def frame_drawn(self) -> None:
        """A frame was written to the terminal."""
        self.drawn_at = self._clock()

    def holding(self) -> bool:
        """True while a key is on its way: the readers wait."""
        key_at = self.key_at
        if key_at <= self._closed_for:
            return False
        now, taken, drawn = self._clock(), self.taken_at, self.drawn_at
        shown = taken >= key_at and (drawn >= taken + FRAME_AFTER_S or (drawn > taken and now >= taken + SETTLE_S))
        if shown or now - key_at >= HOLD_MAX_S:
            self._closed_for = key_at
            return False
        return True

    async def step_aside(self) -> None:
        """Returns once no key is on its way (at once when none is)."""
        while self.holding():
            await asyncio.sleep(WAIT_STEP_S)


KEYS_FIRST = KeysFirst()
"""The process's one: the TUI's input thread and frames open and close it, the hosts' tail readers wait on it.
Without a TUI (the CLI, the tests of the fleet layer) no key ever arrives and it never holds."""
