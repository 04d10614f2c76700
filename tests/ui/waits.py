"""Waiting in a Pilot run for what a test needs to be true, not for a fixed time: a busy machine only stretches it.

`await until(pilot, lambda: ..., "what")` returns as soon as the condition holds and fails, naming what it waited
for, after `patient(timeout)`. The assertions after it stay as they were: the wait decides *when* to look, never
*what* passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.patience import patient


async def until(
    pilot,
    cond: Callable[[], object],
    what: str | Callable[[], str],
    timeout: float = 2.0,  # type: ignore[no-untyped-def]
    every: float = 0.05,
) -> None:
    """Returns once `cond()` is truthy; an AssertionError naming `what` (a string, or a callable that describes
    the state seen last) after `patient(timeout)` seconds. An exception from `cond` (a widget not mounted yet:
    NoMatches) counts as "not yet", and is chained to the failure if the time runs out."""
    end = time.monotonic() + patient(timeout)
    while True:
        err: Exception | None = None
        try:
            if cond():
                return
        except Exception as e:  # "not yet"; the cause of the failure below
            err = e
        if time.monotonic() > end:
            said = what() if callable(what) else what
            raise AssertionError(f"not within {patient(timeout):g} s: {said}") from err
        await pilot.pause(every)


async def server_log(pilot, timeout: float = 2.0):  # type: ignore[no-untyped-def]
    """Waits for a server screen on top showing its whole log (every line its source holds pulled in, the view laid
    out) and returns its LogView."""
    from console.ui.screens.server import ServerScreen
    from console.ui.widgets.log_view import LogView

    def shown() -> bool:
        screen = pilot.app.screen
        if not isinstance(screen, ServerScreen):
            return False
        view = screen.query_one(LogView)
        lines, _count = view.source()
        return len(view.lines) == len(lines) and view.size.height > 0  # type: ignore[arg-type]

    await until(pilot, shown, lambda: f"a server screen with its log; on top: {pilot.app.screen!r}", timeout)
    return pilot.app.screen.query_one(LogView)
