"""line_segments: a pane line's segments, with span styles combined once, are what Textual's
`Content.render_segments` gives for every kind of line (the fallback included)."""

from __future__ import annotations

import pytest
from textual.content import Content, Span
from textual.style import Style

from console.ui.content_segments import SpanStyles, line_segments

BASE = Style.parse("#d0d0d0 on #121417")
LINES = {
    "plain": Content("util 12%"),
    "empty": Content(""),
    "styled": Content.styled("[2026-12-07 01:02:03] Decode batch. #running-req: 37", "#808080"),
    "assembled": Content.assemble(("GPU0 ", "bold"), "util ", ("███", "#5fd787"), ("░░", "#808080"), " 12%"),
    "joined": Content(" ").join([Content.styled("▁▂▃", "#5fd787"), Content.styled("▄▅", "bold #ff5f5f")]),
    "style objects": Content("abc def", spans=[Span(0, 3, Style(bold=True)), Span(4, 7, Style(italic=True))]),
    "zero width span": Content("abcdef", spans=[Span(2, 2, "bold"), Span(3, 5, "italic")]),
    "unparsable style": Content("abcdef", spans=[Span(1, 4, "not-a-style ]]")]),
    "overlapping (Textual's)": Content.styled("abcdef", "bold").stylize("#ff0000", 2, 4),
    "out of order (Textual's)": Content("abcdef", spans=[Span(3, 5, "bold"), Span(0, 2, "italic")]),
    "stale (a span over the line)": Content.assemble(("GPU0 ", "bold"), "util").stylize("#5f5f5f"),
    "wide": Content.assemble(("日本語", "bold"), " ok"),
}


@pytest.mark.parametrize("name", list(LINES))
def test_segments_are_textuals(name: str) -> None:
    line = LINES[name]
    styles: SpanStyles = {}
    for base in (BASE, Style.null(), Style.parse("bold reverse")):
        styles.clear()
        for _ in range(2):  # the second time from the kept styles
            assert line_segments(line, base, styles) == line.render_segments(base), (name, base)


def test_span_styles_are_combined_once_per_style() -> None:
    styles: SpanStyles = {}
    line_segments(LINES["assembled"], BASE, styles)
    kept = dict(styles)
    assert set(kept) == {None, "bold", "#5fd787", "#808080"}
    line_segments(LINES["assembled"], BASE, styles)
    assert all(styles[k] is v for k, v in kept.items())
