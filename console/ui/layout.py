"""Fleet screen geometry, pure: which hosts share a row ("shelf"), how many pane columns each gets, and
how tall panes are so that the bands fill the terminal instead of leaving half of it empty.

Hosts flow left to right while their panes fit side by side; a shelf with spare columns stretches
its bands (a 2-GPU host alone on a 200-column row gets two 100-column panes). The rows left after
headers and the activity panel are shared out as pane height: bigger panes get taller history
graphs and more log lines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PANE_MIN_WIDTH = 36
PANE_MIN_HEIGHT = 7
"""Five rows inside the border: VRAM, util, server, status, tok/s. Below this the list scrolls."""
PANE_MAX_HEIGHT = 30
ACTIVITY_MIN_ROWS = 30
"""Terminals shorter than this have no activity panel (its rows go to the panes). The top bar stays at every
size: an active filter, a probe's result and the fleet's totals are only on it."""


@dataclass(frozen=True)
class BandPlace:
    """One host's band in a shelf: pane columns and rows of its grid."""

    host: str
    columns: int
    rows: int


@dataclass(frozen=True)
class FleetLayout:
    shelves: tuple[tuple[BandPlace, ...], ...]
    pane_height: int
    activity_height: int

    def place(self, host: str) -> BandPlace | None:
        return next((b for s in self.shelves for b in s if b.host == host), None)


def band_grid(n: int, max_cols: int) -> tuple[int, int]:
    """(columns, rows) for n panes: as many columns as fit, then balanced rows (8 GPUs in 5 -> 4+4)."""
    if n <= 0:
        return 1, 0
    rows = math.ceil(n / max(1, min(n, max_cols)))
    return math.ceil(n / rows), rows


def fleet_layout(
    width: int, height: int, hosts: list[tuple[str, int]], extra: dict[str, int] | None = None
) -> FleetLayout:
    """Shelves, pane height and activity rows for `hosts` ((name, GPU count), in order) in a terminal.

    `extra`: rows a host's band has besides its header and panes (its router bands, 2 rows each).
    """
    extra = extra or {}
    avail = max(0, height - 2)  # the footer, the top bar
    max_cols = max(1, width // PANE_MIN_WIDTH)
    shelves: list[list[BandPlace]] = []
    used = max_cols
    for name, n in hosts:
        cols, rows = band_grid(n, max_cols)
        if used + cols > max_cols:
            shelves.append([])
            used = 0
        shelves[-1].append(BandPlace(name, cols, rows))
        used += cols
    pane_rows = sum(max(b.rows for b in s) for s in shelves)
    fixed = sum(
        1 + max(extra.get(b.host, 0) for b in s) + (1 if all(b.rows == 0 for b in s) else 0) for s in shelves
    )  # headers, router bands, "waiting" lines
    want_activity = 0 if height < ACTIVITY_MIN_ROWS else min(8, max(3, height // 10))
    if pane_rows == 0:
        return FleetLayout(tuple(tuple(s) for s in shelves), PANE_MIN_HEIGHT, max(0, avail - fixed))
    pane_h = (avail - fixed - want_activity) // pane_rows
    pane_h = max(PANE_MIN_HEIGHT, min(PANE_MAX_HEIGHT, pane_h))
    activity = max(0, avail - fixed - pane_h * pane_rows)
    if activity < 3:
        activity = 0  # a one-line activity panel says less than the pane row it would cost
    return FleetLayout(tuple(tuple(s) for s in shelves), pane_h, activity)
