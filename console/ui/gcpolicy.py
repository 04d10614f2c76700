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
