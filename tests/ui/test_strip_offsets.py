"""with_offsets: a row with its selection offsets, made in one strip, is Textual's `apply_offsets` cell for cell
(the offsets are where a mouse selection starts)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from console.ui import strip_offsets
from console.ui.strip_offsets import with_offsets


def cells(strip: Strip) -> list[tuple[str, Style | None, object]]:
    """Each character with its style (meta aside) and its offset meta."""
    return [
        (ch, style.clear_meta_and_links() if style else None, style.meta.get("offset") if style else None)
        for text, style, _ in strip
        for ch in text
    ]


ROWS = [
    [Segment("util ", Style(color="#d0d0d0")), Segment("███", Style(color="red", bold=True)), Segment("  12%")],
    [Segment("", Style(color="red")), Segment("plain", None), Segment(" tail", Style(italic=True))],
    [Segment("日本語 wide", Style(color="blue")), Segment(" x", Style(color="green"))],
    [],
]


def test_rows_carry_textuals_offsets_cell_for_cell() -> None:
    for y, row in enumerate(ROWS):
        for width in (40, 8, 3):
            ours = with_offsets(row, y, width)
            theirs = Strip(row).crop(0, width).apply_offsets(0, y)
            assert cells(ours) == cells(theirs), (y, width)
            assert ours.cell_length == theirs.cell_length == min(width, Strip(row).cell_length)


def test_the_kept_styles_start_again_past_their_bound(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(strip_offsets, "_MAX_KEPT", 5)
    monkeypatch.setattr(strip_offsets, "_kept", {})
    for y in range(20):
        row = with_offsets(ROWS[0], y, 40)
        assert len(strip_offsets._kept) <= 5
        assert [seg.style.meta["offset"] for seg in row] == [(0, y), (5, y), (8, y)]  # type: ignore[union-attr]
    again = with_offsets(ROWS[0], 19, 40)  # kept: the very same styles come back
    assert all(a.style is b.style for a, b in zip(again, with_offsets(ROWS[0], 19, 40), strict=True))
