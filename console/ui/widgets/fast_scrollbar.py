"""A scrollbar renderer that hands Textual ready-made strips, cached by geometry.

Textual's ScrollBarRender goes through Rich on every redraw (a new meta-carrying Style per cell, then
Rich's line splitting): ~1 ms per redraw of a 56-row bar, and a log view's bars are redrawn on every
resize and whenever the thumb moves. The strips depend only on the bar's geometry and colours, which
repeat (a following view sits at the bottom; `i` flips between two widths), so they are cached.
Installed per scrollbar through ScrollBar's public `renderer` attribute.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from rich.color import Color
from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.css.styles import RulesMap
from textual.scrollbar import ScrollBarRender
from textual.strip import Strip
from textual.style import Style
from textual.visual import RenderOptions, Visual
from textual.widget import Widget


@lru_cache(maxsize=64)
def _strips(
    size: int,
    virtual_size: int,
    window_size: int,
    position: float,
    thickness: int,
    vertical: bool,
    back: Color | None,
    bar: Color | None,
    width: int,
    height: int,
    base: RichStyle,
) -> list[Strip]:
    """The bar's rows; `base` (the widget's own style) goes beneath every cell, as Rich's renderer puts it."""
    segments = list(
        Segment.apply_style(
            ScrollBarRender.render_bar(
                size=size,
                virtual_size=virtual_size,
                window_size=window_size,
                position=position,
                thickness=thickness,
                vertical=vertical,
                back_color=back or Color.parse("#555555"),
                bar_color=bar or Color.parse("bright_magenta"),
            ).segments,
            style=base,
        )
    )
    # vertical: a segment a row (Segments adds the line breaks when Rich renders it); horizontal: split at them
    rows: Iterable[list[Segment]] = [[seg] for seg in segments] if vertical else Segment.split_lines(segments)
    return [Strip(row).crop_extend(0, width, None) for row in rows][:height]


class CachedScrollBarRender(ScrollBarRender, Visual):
    """ScrollBarRender as a Visual: the same glyphs and click metadata, built once per geometry."""

    def render_strips(self, width: int, height: int | None, style: Style, options: RenderOptions) -> list[Strip]:
        rich = self.style if isinstance(self.style, RichStyle) else RichStyle.parse(str(self.style))
        h = height if height is not None else 1
        size = h if self.vertical else width
        thickness = width if self.vertical else h
        return _strips(
            size,
            int(self.virtual_size),
            int(self.window_size),
            float(self.position),
            thickness,
            self.vertical,
            rich.bgcolor,
            rich.color,
            width,
            h,
            style.rich_style,
        )

    def get_optimal_width(self, rules: RulesMap, container_width: int) -> int:
        return container_width

    def get_height(self, rules: RulesMap, width: int) -> int:
        return 1


def use_cached_bars(widget: Widget) -> None:
    """Both of a scrolling widget's scrollbars drawn through `CachedScrollBarRender`."""
    for bar in (widget.vertical_scrollbar, widget.horizontal_scrollbar):
        bar.renderer = CachedScrollBarRender  # type: ignore[misc]  # per instance, as ScrollBar's docs show
