"""A row's text-selection offsets, with the styles that carry them made once instead of once per segment.

Textual finds where a mouse selection starts from the `offset` meta of the cell under the pointer, so every
row a widget renders itself must carry them (`Strip.apply_offsets`). That builds a meta style and adds it to
each segment's style for every new row: under a log flood a GPU pane renders most of its rows anew each
second, and the offsets were a quarter of a row's cost (cProfile of the fleet's frames,
benchmarks/bench_keypress.py). Segments start at the same columns with the same styles frame after frame,
so the combined styles are kept, keyed by (style, column, row).
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

_MAX_KEPT = 8192
"""Combined styles kept (64 panes of ~10 rows of a few segments need ~2,500); past it the memo starts again."""

_kept: dict[tuple[Style | None, int, int], Style] = {}


def with_offsets(segments: Iterable[Segment], y: int, width: int) -> Strip:
    """`Strip(segments).crop(0, width).apply_offsets(0, y)` in one strip: the same text and styles, each segment
    with its selection offset (a Strip is costly to make: each comes with three caches of its own)."""
    kept = _kept
    out: list[Segment] = []
    x = cells = 0
    for text, style, _control in segments:
        key = (style, x, y)
        offset_style = kept.get(key)
        if offset_style is None:
            meta = Style.from_meta({"offset": (x, y)})
            offset_style = style + meta if style else meta
            if len(kept) >= _MAX_KEPT:
                kept.clear()
            kept[key] = offset_style
        out.append(Segment(text, offset_style))
        x += len(text)
        cells += cell_len(text)
    strip = Strip(out, cells)
    return strip if cells <= width else strip.crop(0, width)
