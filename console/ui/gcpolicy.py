"""Garbage-collector settings for the long-running TUI: no 60-100 ms full collections in a key press.

Under a log flood CPython ran a full (generation 2) collection about once a second, each one walking
every widget, style and cache object the console holds, 60-100 ms during which keys wait
(benchmarks/bench_keypress.py). Two standard remedies: once start-up is over, `gc.freeze()` moves
the survivors (the app, its screens, caches, connections) out of the collector's sight; and a larger
first-generation threshold makes young collections, and so full ones, rarer. Reference counting still
frees everything that is not in a cycle at once; cycles are still collected, just less often.
"""

from __future__ import annotations

import gc
import time

GEN0_THRESHOLD = 20_000
"""Allocations between young collections (CPython's default is 700)."""


def tune() -> None:
    """Fewer collections: called once when the app starts."""
    _, g1, g2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, g1, g2)


def settle() -> None:
    """After start-up: collect once, then freeze what survived so later collections skip it."""
    gc.collect()
    gc.freeze()


class paused_during_frame:
    """No collection while a frame is laid out and drawn; the next allocation after it collects instead.

    A full frame (a screen switch, `i`) builds ~20k short-lived strips and segments, enough to trigger a
    young collection in the middle of it: 5-8 ms added to that frame, with every one of those temporaries
    still alive to be walked (trace of benchmarks/bench_keypress.py's log view). After the frame most of
    them are freed already, so the same collection is cheaper and the frame is on screen first.
    Re-entrant: a frame inside a frame keeps collection off until the outer one ends.
    """

    depth = 0
    resume = False
    """Whether the outermost frame found the collector on (one someone else turned off stays off)."""

    def __enter__(self) -> None:
        cls = paused_during_frame
        if cls.depth == 0:
            cls.resume = gc.isenabled()
            gc.disable()
        cls.depth += 1

    def __exit__(self, *exc: object) -> None:
        cls = paused_during_frame
        cls.depth -= 1
        if cls.depth == 0 and cls.resume:
            time.sleep(0)  # the GIL to Textual's writer thread first: the frame goes out before a collection
            gc.enable()
