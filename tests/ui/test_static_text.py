"""update_static: new text on screen always; a whole-screen layout only when the widget's rows change."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.content import Content
from textual.widgets import Static

from console.ui.static_text import update_static


class Page(App[None]):
    CSS = """
    #auto { height: auto; padding: 0 1; }
    #fixed { height: 1; }
    #wide { width: auto; height: 1; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.layouts = 0

    def compose(self) -> ComposeResult:
        yield Static("tok/s 10\nrunning 1", id="auto", markup=False)
        yield Static("following", id="fixed", markup=False)
        yield Static("short", id="wide", markup=False)

    def on_mount(self) -> None:
        self.screen.screen_layout_refresh_signal.subscribe(self, self._laid_out)

    def _laid_out(self, _screen: object) -> None:
        self.layouts += 1

    def row(self, y: int) -> str:
        return "".join(seg.text for seg in self.screen._compositor.render_update(full=True).strips[y]).rstrip()  # type: ignore[attr-defined]


async def settle(app: Page, pilot: object) -> int:
    await pilot.pause()  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    n, app.layouts = app.layouts, 0
    return n


async def test_a_layout_only_when_the_rows_can_change() -> None:
    app = Page()
    async with app.run_test(size=(40, 12)) as pilot:
        await settle(app, pilot)
        auto = app.query_one("#auto", Static)
        update_static(auto, Content("tok/s 12345\nrunning 7"))
        update_static(app.query_one("#fixed", Static), Content("paused (G: follow) and a lot more than fits"))
        assert await settle(app, pilot) == 0
        assert app.row(0) == " tok/s 12345" and app.row(1) == " running 7"
        assert app.row(2).startswith("paused (G: follow) and a lot")
        assert auto.outer_size.height == 2
        # more rows, a wrap, fewer rows, auto width: each lays the screen out and the widget takes its size
        update_static(auto, Content("tok/s 1\nrunning 1\nqueued 4"))
        assert await settle(app, pilot) >= 1
        assert auto.outer_size.height == 3 and app.row(2) == " queued 4" and app.row(3).startswith("paused")
        update_static(auto, Content("x" * 50 + "\nb\nc"))  # the first line now wraps at 38 columns
        assert await settle(app, pilot) >= 1
        assert auto.outer_size.height == 4 and app.row(4).startswith("paused")
        update_static(auto, Content("one row"))
        assert await settle(app, pilot) >= 1
        assert auto.outer_size.height == 1 and app.row(1).startswith("paused")
        wide = app.query_one("#wide", Static)  # auto width: any new text may change its size
        update_static(wide, Content("much longer text"))
        assert await settle(app, pilot) >= 1
        assert wide.outer_size.width == len("much longer text")
