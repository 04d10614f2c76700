"""A line of Content to segments, with each span's style combined once per base style instead of once per row.

Textual's `Content.render_segments` is general: a stack of overlapping spans, sorted and combined again for
every line, each span's style string parsed through a cache lookup. A GPU pane's lines are made by
`Content.assemble` and `Content.styled` (spans side by side, none overlapping), and under a log flood most of a
pane's rows are new every second: that general path was the largest piece of a pane row's cost (cProfile of
the fleet's frames, benchmarks/bench_keypress.py). For such a line the result is computed here from the same
pieces (`Style.parse`, `Style.combine`, `rich_style`); any other line is Textual's.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.content import Content
from textual.style import Style

SpanStyles = dict[str | Style | None, RichStyle | None]
"""Per base style: a span's style (None: the base's own) to the Rich style its text is drawn in."""


def _combined(base: Style, style: str | Style | None) -> RichStyle | None:
    """What Content.render gives text under `style` over `base`: the base and the span's style added."""
    if style is None:
        combined = base
    else:
        if isinstance(style, str):
            try:
                parsed = Style.parse(style)
            except Exception:  # Content.render draws an unparsable style as no style
                parsed = Style.null()
        else:
            parsed = style
        combined = Style.combine([base, parsed])
    return combined.rich_style if combined else None


def line_segments(content: Content, base: Style, styles: SpanStyles) -> list[Segment]:
    """`content.render_segments(base)`; `styles` keeps the combined styles for this `base` (the caller clears it
    when its base style changes)."""
    spans = content.spans
    if not spans:
        return content.render_segments(base)
    text = content.plain
    out: list[Segment] = []
    pos = 0
    for start, end, style in spans:
        if start < pos or end < start:  # overlapping or out of order: Textual's span stack
            return content.render_segments(base)
        if start > pos:
            out.append(Segment(text[pos:start], _kept(styles, base, None)))
        if end > start:
            out.append(Segment(text[start:end], _kept(styles, base, style)))
        pos = end
    if pos < len(text):
        out.append(Segment(text[pos:], _kept(styles, base, None)))
    return out


def _kept(styles: SpanStyles, base: Style, style: str | Style | None) -> RichStyle | None:
    try:
        return styles[style]
    except KeyError:
        rich = styles[style] = _combined(base, style)
        return rich
