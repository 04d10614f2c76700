"""The log view's cached scrollbar draws exactly what Textual's own ScrollBarRender draws through Rich."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult
from textual.scrollbar import ScrollBarRender
from textual.style import Style as VisualStyle
from textual.visual import RenderOptions

from console.ui.widgets.fast_scrollbar import CachedScrollBarRender
from console.ui.widgets.log_view import LogView

STYLE = Style.parse("#264656 on #101010")
BASE = Style.parse("#d0d0d0 on #1a1d22")
"""The widget's own style, beneath every cell (Textual passes it to both renderers)."""


def rich_rows(bar: ScrollBarRender, width: int, height: int) -> list[list[tuple[str, Style | None]]]:
    console = Console(width=width, height=height, color_system="truecolor", force_terminal=True)
    opts = console.options.update(width=width, height=height)
    lines = console.render_lines(bar, opts, style=BASE, pad=True)
    return [[(s.text, s.style) for s in Segment.simplify(line) if s.text] for line in lines]


def cached_rows(bar: CachedScrollBarRender, width: int, height: int) -> list[list[tuple[str, Style | None]]]:
    strips = bar.render_strips(width, height, VisualStyle.from_rich_style(BASE), RenderOptions(lambda *_: Style(), {}))  # type: ignore[arg-type]
    return [[(s.text, s.style) for s in Segment.simplify(list(strip)) if s.text] for strip in strips]


@pytest.mark.parametrize("vertical", [True, False])
@pytest.mark.parametrize(
    ("virtual", "window", "position"),
    [
        (20_000, 56, 0.0),
        (20_000, 56, 9_000.5),
        (20_000, 56, 19_944.0),  # top, middle, followed to the bottom
        (300, 144, 156.0),
        (100, 0, 0.0),  # a wide log scrolled right; nothing to scroll
    ],
)
def test_cells_match_textuals_renderer(vertical: bool, virtual: int, window: int, position: float) -> None:
    width, height = (1, 56) if vertical else (144, 1)
    kw = {
        "virtual_size": virtual,
        "window_size": window,
        "position": position,
        "vertical": vertical,
        "style": STYLE,
        "thickness": width if vertical else height,
    }
    assert cached_rows(CachedScrollBarRender(**kw), width, height) == rich_rows(ScrollBarRender(**kw), width, height)


class Tail(App[None]):
    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def compose(self) -> ComposeResult:
        yield LogView(lambda: (self.lines, len(self.lines)))


async def test_a_followed_log_draws_its_thumb_at_the_bottom() -> None:
    app = Tail([f"line {i} " + "x" * 300 for i in range(5_000)])
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(LogView)
        view.pull()
        await pilot.pause()
        await pilot.pause()
        bar = view.vertical_scrollbar
        assert bar.renderer is CachedScrollBarRender and view.horizontal_scrollbar.renderer is CachedScrollBarRender
        rows = [bar.render_line(y) for y in range(bar.size.height)]
        thumb = [y for y, strip in enumerate(rows) if any(s.style and s.style.reverse for s in strip)]
        assert thumb and thumb[-1] == bar.size.height - 1 and thumb[0] > bar.size.height // 2
