"""One test per private Textual API that console/ui/textual_private.py leans on: after a Textual bump, these
name the trick that broke (Textual is pinned exactly in pyproject.toml for their sake)."""

from __future__ import annotations

import inspect
import re
import time
import tomllib
from pathlib import Path

import textual
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.strip import Strip
from textual.widgets import Static

from console.ui import textual_private as tp

ROOT = Path(__file__).resolve().parents[2]


def test_textual_is_the_pinned_version() -> None:
    """The pin and the installed Textual agree, so these tests speak for the version the console ships with."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pin = next(d for d in deps if re.match(r"textual\s*==", d))
    assert pin.split("==")[1].strip() == textual.__version__


class _Tall(App[None]):
    def compose(self) -> ComposeResult:
        with VerticalScroll(id="scroll"):
            for i in range(40):
                yield Static(f"row {i}", id=f"r{i}")


async def test_compositor_visible_widgets_follows_the_last_frame() -> None:
    """1. `Screen._compositor.visible_widgets`: what is on screen now, and it changes with a scroll."""
    app = _Tall()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        first, last = app.query_one("#r0", Static), app.query_one("#r39", Static)
        shown = tp.visible_widgets(first)
        assert shown is not tp.EVERYTHING  # the compositor answered, not the fallback
        assert first in shown and last not in shown
        app.query_one("#scroll", VerticalScroll).scroll_end(animate=False)
        await pilot.pause()
        await pilot.pause()
        shown = tp.visible_widgets(first)
        assert last in shown and first not in shown


async def test_exit_renderables_mark_an_exit_on_error() -> None:
    """2. `App._exit_renderables`: empty while the app runs, filled by `panic` (as by a crashed worker)."""
    app = _Tall()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        assert tp.exiting_on_error(app) is False
        app.panic("boom")
        assert tp.exiting_on_error(app) is True


def test_xterm_parser_holds_a_lone_escape_until_its_timeout() -> None:
    """3a. `XTermParser._timeout_time`: set (a `textual._time.get_time` instant, ahead of now) while a lone ESC
    waits to be told from the start of a sequence, and the key arrives from `tick()` once it has passed."""
    from textual._time import get_time
    from textual._xterm_parser import XTermParser
    from textual.events import Key

    parser = XTermParser(False)
    assert list(parser.feed("\x1b")) == []
    due = parser._timeout_time
    assert isinstance(due, float) and due > get_time()
    while get_time() <= due:
        time.sleep(0.005)
    keys = [e for e in parser.tick() if isinstance(e, Key)]
    assert [k.key for k in keys] == ["escape"]


class _InputLoop:
    """PromptEscapeDriver's real input loop in a thread, reading a pipe instead of the terminal; the keys it
    would post to the app are collected instead."""

    def __init__(self) -> None:
        import asyncio
        import os
        import threading

        from textual.events import Key

        self.keys: list[str] = []
        self._r, self._w = os.pipe()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)  # Driver.__init__ notes the running loop; nothing is posted to it here
        try:
            driver = loop.run_until_complete(self._make())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
        driver.fileno = self._r
        driver.process_message = lambda m: self.keys.append(m.key) if isinstance(m, Key) else None  # type: ignore[method-assign]
        self.driver = driver
        self.thread = threading.Thread(target=driver.run_input_thread, daemon=True)
        self.thread.start()

    async def _make(self) -> tp.PromptEscapeDriver:
        return tp.PromptEscapeDriver(App())

    def write(self, data: bytes) -> None:
        import os

        os.write(self._w, data)

    def wait_keys(self, n: int, timeout: float = 10.0) -> list[str]:
        end = time.monotonic() + timeout
        while len(self.keys) < n and time.monotonic() < end:
            time.sleep(0.01)
        return list(self.keys)

    def close(self) -> None:
        import os

        self.driver.exit_event.set()
        self.thread.join(5)
        os.close(self._w)
        os.close(self._r)


def test_a_read_ending_in_a_lone_escape_is_the_escape_key_at_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """3d. With the ESC wait an hour long, a lone ESC still arrives as Escape (only the at-once path can deliver it
    within the test), while an arrow key's sequence written whole stays the arrow, and a user-set ESCDELAY
    (`ESCAPE_AT_ONCE` off) keeps the lone ESC waiting for the rest of a sequence."""
    from textual import constants

    monkeypatch.setattr(constants, "ESCAPE_DELAY", 3600.0)  # the parser reads it at each ESC
    loop = _InputLoop()
    try:
        loop.write(b"\x1b[A")
        assert loop.wait_keys(1) == ["up"]
        loop.write(b"\x1b")
        assert loop.wait_keys(2) == ["up", "escape"]
        loop.write(b"x\x1b\x1b")  # two Escapes in one read: the first is told by the second, the last at once
        assert loop.wait_keys(5) == ["up", "escape", "x", "escape", "escape"]
    finally:
        loop.close()

    monkeypatch.setattr(tp, "ESCAPE_AT_ONCE", False)
    loop = _InputLoop()
    try:
        loop.write(b"\x1b")
        time.sleep(0.3)
        assert loop.keys == []  # still waiting: the rest of a split sequence may come
        loop.write(b"[B")
        assert loop.wait_keys(1) == ["down"]
    finally:
        loop.close()


def test_a_user_set_escdelay_makes_every_lone_escape_wait(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import os

    from console.commands import tui

    monkeypatch.setattr(tp, "ESCAPE_AT_ONCE", True)
    monkeypatch.setattr(tui, "_USER_ESCDELAY", None)
    monkeypatch.setenv("ESCDELAY", "100")
    monkeypatch.setenv("TEXTUAL_FPS", "60")
    tui.terminal_defaults()
    assert tp.ESCAPE_AT_ONCE is False
    monkeypatch.setattr(tui, "_USER_ESCDELAY", None)
    monkeypatch.delenv("ESCDELAY")
    tui.terminal_defaults()
    assert tp.ESCAPE_AT_ONCE is True
    assert os.environ["ESCDELAY"] == "10" and os.environ["TEXTUAL_FPS"] == "60"
    tui.terminal_defaults()  # again (an entry script that set things up first): the user's choice still holds
    assert tp.ESCAPE_AT_ONCE is True


def test_loop_last_marks_only_the_last_item() -> None:
    """3b. `textual._loop.loop_last`, used by the input loop to decode the last read as final."""
    from textual._loop import loop_last

    assert list(loop_last("abc")) == [(False, "a"), (False, "b"), (True, "c")]
    assert list(loop_last([])) == []


def test_linux_driver_input_loop_is_the_one_prompt_escape_driver_copies() -> None:
    """3c. `LinuxDriver.run_input_thread`: PromptEscapeDriver is its loop with another `select` timeout, so Textual's
    loop must still be made of the same parts (a changed loop means re-copying it, not silently diverging)."""
    from textual.drivers.linux_driver import LinuxDriver

    src = inspect.getsource(LinuxDriver.run_input_thread)
    for part in (
        "XTermParser(self._debug)",
        "loop_last(selector_events)",
        "self.process_message(event)",
        "self.exit_event.is_set()",
        "selector.select(0.1)",
        'getincrementaldecoder("utf-8")',
    ):
        assert part in src, part
    assert tp.driver_class(LinuxDriver) is tp.PromptEscapeDriver
    assert issubclass(tp.PromptEscapeDriver, LinuxDriver)


FENCES = {
    "console/ui/textual_private.py": "the terminal console's",
    "console/serve/web_driver.py": "the browser twin of PromptEscapeDriver: each session's TEXTUAL_DRIVER names "
    "its class by import path",
}


def test_no_other_module_touches_textual_privates() -> None:
    """The fence holds: `textual._*` imports and `._compositor`/`._exit_renderables` only in the fenced modules."""
    pattern = re.compile(
        r"from textual\._|import textual\._|\._compositor\b|\._exit_renderables\b|_timeout_time"
        r"|\._check_refresh\b|\._refresh_layout\b|\._batch_count\b|\._compositor_refresh\b"
        r"|\._layout_widgets\b|\._screen_resized\b|\._layout_required\b|\._on_layout\b"
    )
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in sorted((ROOT / "console").rglob("*.py"))
        if str(p.relative_to(ROOT)) not in FENCES
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


async def test_footer_key_disabled_is_what_a_click_reads() -> None:
    """FooterKey keeps its enabled state in `_disabled` (a click rings the bell instead of pressing the key) and
    shows it with the `-disabled` class; set_footer_key_enabled flips both."""
    from textual.app import App
    from textual.binding import Binding
    from textual.widgets import Footer

    from console.ui.textual_private import set_footer_key_enabled

    class One(App[None]):
        BINDINGS = [Binding("x", "bell", "Ring")]

        def compose(self) -> ComposeResult:
            yield Footer()

    async with One().run_test() as pilot:
        await pilot.pause()
        key = next(k for k in pilot.app.query("FooterKey") if getattr(k, "action", "") == "bell")
        assert key._disabled is False and not key.has_class("-disabled")  # type: ignore[attr-defined]
        set_footer_key_enabled(key, False)
        assert key._disabled is True and key.has_class("-disabled")  # type: ignore[attr-defined]
        set_footer_key_enabled(key, True)
        assert key._disabled is False and not key.has_class("-disabled")  # type: ignore[attr-defined]


class _Side(App[None]):
    CSS = "#log { width: 1fr; } #side { width: 20; } #side.-hidden { display: none; }"

    def compose(self) -> ComposeResult:
        from textual.containers import Horizontal

        with Horizontal():
            yield Static("log", id="log")
            yield Static("side", id="side")


async def test_draw_now_lays_out_and_draws_before_any_message_runs() -> None:
    """5. `Widget._check_refresh`, `Screen._refresh_layout`, `App._batch_count`: after a class hides a panel,
    draw_now re-arranges the screen and draws the frame synchronously; without it nothing has moved yet."""
    frames: list[int] = []
    app = _Side()
    async with app.run_test(size=(60, 10)) as pilot:
        await pilot.pause()
        log, side = app.query_one("#log", Static), app.query_one("#side", Static)
        assert log.size.width == 40 and side in tp.visible_widgets(log)
        real = app._display

        def counted(screen, renderable):  # type: ignore[no-untyped-def]
            frames.append(1)
            return real(screen, renderable)

        app._display = counted  # type: ignore[method-assign]
        side.toggle_class("-hidden")
        assert log.size.width == 40 and side in tp.visible_widgets(log) and not frames  # Textual's way: later
        tp.draw_now(side)
        assert log.size.width == 60 and side not in tp.visible_widgets(log) and frames == [1]
        await pilot.pause()
        assert log.size.width == 60  # the queued messages agree with the frame already drawn


def _tall_app(sheet: type[Static], row: type[Static]) -> App[None]:
    """A screen of two layers: a hidden 3-row sheet docked on the top one, its first child (a last child shown
    renumbers all of them: HelpSheet's mount), and 60 rows in a scrolling column under it."""
    from textual.containers import VerticalScroll
    from textual.screen import Screen

    from console.ui.textual_private import LayoutOnce

    class Tall(LayoutOnce, Screen[None]):
        CSS = "Tall { layers: default top; } #sheet { layer: top; dock: bottom; height: 3; display: none; }"

        def compose(self) -> ComposeResult:
            yield sheet("sheet", id="sheet")
            with VerticalScroll(id="rows"):
                for i in range(60):
                    yield row(f"row {i}", id=f"r{i}")

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(Tall())

    return Host()


async def test_overlay_change_lays_out_only_what_is_on_screen() -> None:
    """5. the scroll path of `Screen._refresh_layout`, `Screen._layout_widgets`, `Compositor._visible_map` and
    `_full_map`: an overlay on a layer of its own is placed and drawn at once, from a layout of what is on screen
    only (the whole screen is not arranged again), its frame draws only its rows, and the `Layout` message its
    refresh posted is spent (no whole layout after it)."""
    app = _tall_app(Static, Static)
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        screen = app.screen
        sheet = screen.query_one("#sheet", Static)
        compositor = screen._compositor
        whole: list[int] = []
        reflow = compositor.reflow

        def counted(*args, **kw):  # type: ignore[no-untyped-def]
            whole.append(1)
            return reflow(*args, **kw)

        compositor.reflow = counted  # type: ignore[method-assign]
        dirty: list[object] = []
        render_update = compositor.render_update

        def spy(*args, **kw):  # type: ignore[no-untyped-def]
            dirty.extend(compositor._dirty_regions)
            return render_update(*args, **kw)

        compositor.render_update = spy  # type: ignore[method-assign]
        with tp.overlay_change(sheet):
            sheet.display = True
        assert sheet.region.height == 3 and sheet.region.bottom == 12 and sheet in tp.visible_widgets(sheet)
        assert dirty and all(sheet.region.contains_region(r) for r in dirty), dirty  # type: ignore[attr-defined]
        await pilot.pause()
        await pilot.pause()
        assert whole == []  # neither the draw nor the Layout message queued before it arranged the whole screen
        with tp.overlay_change(sheet):
            sheet.display = False
        await pilot.pause()
        assert sheet not in tp.visible_widgets(sheet) and whole == []
        assert str(app.screen._compositor.render_strips()[-1].text).startswith("row ")  # the rows are back


async def test_a_still_widget_off_screen_is_marked_dirty_without_a_map_of_the_whole_screen() -> None:
    """7. `Widget._set_dirty` for a StillStrips widget that is not on screen: a sheet shown and hidden as the help
    sheet is (`overlay_change`, with the focus) never has the compositor arrange every widget to look for it
    (Textual's own `_set_dirty` did, for the sheet's display change and its blur: 14 ms a key with 64 hosts); text
    it takes while hidden is what it shows next, and rows scrolled away that change show their change when back."""
    from textual.containers import VerticalScroll

    class Sheet(tp.StillStrips, Static, can_focus=True):
        pass

    class Row(tp.StillStrips, Static):
        pass

    app = _tall_app(Sheet, Row)
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        screen = app.screen
        sheet = screen.query_one("#sheet", Sheet)
        rows = screen.query_one("#rows", VerticalScroll)
        compositor = screen._compositor
        whole: list[int] = []
        arrange = compositor._arrange_root

        def counted(root, size, visible_only=True):  # type: ignore[no-untyped-def]
            if not visible_only:
                whole.append(1)
            return arrange(root, size, visible_only)

        compositor._arrange_root = counted  # type: ignore[method-assign]
        for text in ("keys two", "keys three"):
            sheet.update(text)  # while hidden
            with tp.overlay_change(sheet):
                sheet.display = True
                screen.set_focus(sheet, scroll_visible=False)
            await pilot.pause()
            assert screen.query_one("#r0").region.y == 0
            assert app.screen._compositor.render_strips()[-3].text.startswith(text)
            with tp.overlay_change(sheet):
                sheet.display = False
                screen.set_focus(None)
            await pilot.pause()
            await pilot.pause()
        assert whole == []
        assert app.screen._compositor.render_strips()[-1].text.startswith("row ")

        screen.query_one("#r59", Row).update("row 59 changed")  # off screen (the visible map is Textual's own)
        rows.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        await pilot.pause()
        assert any(s.text.startswith("row 59 changed") for s in app.screen._compositor.render_strips())


async def test_quiet_frames_pause_the_collector_only_while_a_frame_is_drawn() -> None:
    """6. `Screen._refresh_layout`, `Screen._compositor_refresh`: a QuietFrames screen draws with the garbage
    collector off and turns it back on after the frame (a collector someone else turned off stays off)."""
    import gc

    from textual.screen import Screen
    from textual.widget import Widget

    seen: list[bool] = []

    class Probe(Widget):
        def render_line(self, y: int) -> Strip:
            seen.append(gc.isenabled())
            return Strip.blank(self.size.width)

    class Quiet(tp.QuietFrames, Screen[None]):
        def compose(self) -> ComposeResult:
            yield Probe()

    class One(App[None]):
        def on_mount(self) -> None:
            self.push_screen(Quiet())

    async with One().run_test(size=(20, 4)) as pilot:
        await pilot.pause()
        await pilot.pause()
        assert seen and not any(seen) and gc.isenabled()
        gc.disable()
        try:
            seen.clear()
            pilot.app.screen.query_one(Probe).refresh()
            await pilot.pause()
            await pilot.pause()
            assert seen and not gc.isenabled()
        finally:
            gc.enable()


class _Still(tp.StillStrips, Static, can_focus=True):
    pass


class _Board(App[None]):
    CSS = """
    _Still { height: 3; border: round white; }
    _Still:focus { border: double red; }
    _Still.-hot { background: red; }
    """

    def compose(self) -> ComposeResult:
        yield _Still("alpha", id="a")
        yield _Still("beta", id="b")


def _text(strips: list) -> str:  # type: ignore[type-arg]
    return "\n".join(s.text for s in strips)


async def test_still_strips_are_given_again_only_while_nothing_marked_the_widget_dirty() -> None:
    """7. `Widget._set_dirty`: a StillStrips widget gives the same strips (not a render) until a refresh, an update,
    a class, focus or a resize marks it dirty; after each, what it gives is what Textual renders without the memo."""
    from textual.geometry import Region

    app = _Board()
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        a = app.query_one("#a", _Still)

        def crop() -> Region:
            return Region(0, 0, a.outer_size.width, a.outer_size.height)

        def fresh() -> list:  # type: ignore[type-arg]
            a._still = None  # what Textual itself renders now, from a cleared line cache
            a._styles_cache.clear()
            return a.render_lines(crop())

        first = a.render_lines(crop())
        assert a.render_lines(crop()) is first  # nothing happened: the same strips
        assert a.render_lines(Region(0, 1, 10, 1)) is not first  # another crop is rendered

        for change in (
            lambda: a.update("gamma"),
            lambda: a.add_class("-hot"),
            a.focus,
            lambda: setattr(a.styles, "height", 5),
            lambda: a.refresh(Region(0, 0, 5, 1)),
        ):
            before = a.render_lines(crop())
            change()
            await pilot.pause()
            after = a.render_lines(crop())
            assert after is not before
            assert after == fresh(), change
        assert "gamma" in _text(after) and "╔" in _text(after) and a.outer_size.height == 5
        assert any(seg.style and seg.style.bgcolor and seg.style.bgcolor.triplet == (255, 0, 0) for seg in after[1]), (
            "the -hot background is drawn"
        )


async def test_strips_kept_through_a_display_toggle_and_dropped_by_a_change_while_hidden() -> None:
    """7. `strips_kept`: hidden and shown again inside it, the widget gives the strips it gave (Textual's display
    setter marked it dirty); a change while it is hidden (a class here, a theme alike) still drops them, and what
    it then gives is what Textual renders, as when the toggle takes its focus away."""
    from textual.geometry import Region

    app = _Board()
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()

        async def toggled(widget: _Still) -> tuple[Region, list, list]:  # type: ignore[type-arg]
            """Its strips, then hidden and shown inside `strips_kept`, its strips again."""
            crop = Region(0, 0, widget.outer_size.width, widget.outer_size.height)
            before = widget.render_lines(crop)
            for shown in (False, True):
                with widget.strips_kept():
                    widget.display = shown
                await pilot.pause()
            return crop, before, widget.render_lines(crop)

        focused = app.query_one("#a", _Still)
        assert app.focused is focused
        _, first, after = await toggled(focused)
        assert app.focused is not focused and after != first  # its focus border is gone

        app.set_focus(None)  # (#b took the focus #a lost)
        await pilot.pause()
        a = app.query_one("#b", _Still)
        crop, first, after = await toggled(a)
        assert after is first

        a.display = False  # without it: drawn again
        a.display = True
        await pilot.pause()
        again = a.render_lines(crop)
        assert again is not first and again == first

        with a.strips_kept():
            a.display = False
        a.add_class("-hot")
        with a.strips_kept():
            a.display = True
        await pilot.pause()
        hot = a.render_lines(crop)
        assert hot is not again
        a._still = None
        a._styles_cache.clear()
        assert hot == a.render_lines(crop)
        assert any(seg.style and seg.style.bgcolor and seg.style.bgcolor.triplet == (255, 0, 0) for seg in hot[1])


class _Lines(App[None]):
    def compose(self) -> ComposeResult:
        from textual.scroll_view import ScrollView

        yield ScrollView(id="lines")


def _count_calls(obj: object, name: str) -> list[int]:
    """A list that grows by one on every call of `obj.name` from now on (the method still runs)."""
    n: list[int] = []
    real = getattr(obj, name)

    def counted(*a, **k):  # type: ignore[no-untyped-def]
        n.append(1)
        return real(*a, **k)

    setattr(obj, name, counted)
    return n


async def test_set_virtual_size_moves_the_scrollbars_without_a_screen_layout() -> None:
    """8. `Widget._scroll_update`: a taller virtual size updates the thumb and the scroll range with no layout of
    the screen; a scrollbar that must appear still gets the layout that shows it."""
    from textual.geometry import Size
    from textual.scroll_view import ScrollView

    app = _Lines()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        view = app.query_one("#lines", ScrollView)
        tp.set_virtual_size(view, Size(20, 5))  # fits: no scrollbar
        await pilot.pause()
        assert not view.show_vertical_scrollbar
        tp.set_virtual_size(view, Size(20, 100))  # taller than the view: the scrollbar appears (a layout)
        await pilot.pause()
        assert view.show_vertical_scrollbar and view.vertical_scrollbar.window_virtual_size == 100

        layouts = _count_calls(app.screen, "_refresh_layout")
        tp.set_virtual_size(view, Size(20, 5000))
        assert view.vertical_scrollbar.window_virtual_size == 5000 and view.max_scroll_y == 5000 - view.size.height
        view.scroll_end(animate=False, immediate=True)
        assert view.scroll_y == view.max_scroll_y
        await pilot.pause()
        await pilot.pause()
        assert not layouts  # Textual's own `virtual_size = ...` re-arranges the screen here
        view.virtual_size = Size(20, 6000)
        await pilot.pause()
        await pilot.pause()
        assert layouts


class _Once(tp.LayoutOnce, Screen):
    def compose(self) -> ComposeResult:
        yield Static("a", id="a")
        yield Static("b", id="b")


class _OnceApp(App[None]):
    def on_mount(self) -> None:
        self.push_screen(_Once())


async def test_layout_once_lays_out_each_change_once_and_still_every_change() -> None:
    """9. `Screen._on_layout` with `Message.time`, `Screen._screen_resized`, `Screen._compositor.size`/`widgets`,
    and `AwaitMount._widgets` seen from `Screen.refresh`'s caller: a layout request that a later-begun layout
    served, a resize to the laid-out size, and a finished mount of widgets already placed or hidden cost no
    layout; a new change, a new size, a widget not yet placed and a hidden one shown still get theirs."""
    from textual.geometry import Size
    from textual.widget import AwaitMount

    app = _OnceApp()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, _Once)
        a = screen.query_one("#a", Static)
        reflows = _count_calls(screen._compositor, "reflow")

        a.styles.margin = (2, 0, 0, 0)  # moves it (its size stays): asks for a layout by message, which
        tp.draw_now(a)  # draw_now lays out before the message arrives
        assert len(reflows) == 1 and a.region.y == 2
        for _ in range(3):
            await pilot.pause()
        assert len(reflows) == 1  # the message found its layout done (Textual alone: a second, identical one)

        a.styles.margin = (3, 0, 0, 0)  # a change after that layout: laid out as usual
        for _ in range(3):
            await pilot.pause()
        assert len(reflows) == 2 and a.region.y == 3

        screen._screen_resized(app.size)  # the size it is laid out at: nothing to do
        assert len(reflows) == 2
        screen._screen_resized(Size(30, 8))  # a new size: laid out
        assert len(reflows) == 3 and screen._compositor.size == Size(30, 8)
        screen._screen_resized(app.size)
        assert len(reflows) == 4

        for _ in range(3):
            await pilot.pause()
        done = len(reflows)
        await AwaitMount(screen, [a])  # a mount's completion for a widget the last layout placed
        for _ in range(3):
            await pilot.pause()
        assert len(reflows) == done and not screen._layout_required
        late = Static("late", id="late")
        await screen.mount(late)  # a widget no layout has placed yet: its layout comes
        for _ in range(3):
            await pilot.pause()
        assert len(reflows) > done and late.region.height == 1 and late in screen._compositor.widgets
        done = len(reflows)
        hidden = Static("hidden", id="hidden")
        hidden.display = False
        await screen.mount(hidden, before=0)  # takes no room (the help sheet, mounted by the first `?`): no layout
        for _ in range(3):
            await pilot.pause()
        assert len(reflows) == done and hidden not in screen._compositor.widgets
        hidden.display = True  # shown: laid out as any change
        for _ in range(3):
            await pilot.pause()
        assert len(reflows) > done and hidden.region.height == 1 and a.region.y == 4


def _cells(strip: Strip) -> list[tuple[str, object]]:
    """A row as its cells (each character and its style), wherever its segments split."""
    return [(ch, style) for text, style, _ in strip for ch in text] + [("len", strip.cell_length)]


async def test_box_rows_are_what_textual_draws_cell_for_cell() -> None:
    """10. BoxRowsCache: every GPU pane of the demo fleet (free, starting, ready, crashed with its heavy border,
    stale, marked), focused and not, whole and cropped, with and without a line filter: the rows Textual's own
    StylesCache draws for it."""
    from textual.filter import Monochrome
    from textual.geometry import Region

    from console.ui.app import DflashApp
    from console.ui.widgets.gpu_pane import GpuPane
    from tests.ui.fakes import NOW, FakeApi, FakeBackend

    app = DflashApp(FakeApi(), clock=lambda: NOW, backend=FakeBackend())
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        panes = [p for p in app.screen.query(GpuPane) if p.region.area]
        assert panes and all(isinstance(p._styles_cache, tp.BoxRowsCache) for p in panes)
        seen: set[str] = set()
        checked = 0
        for i, p in enumerate(panes):
            if i % 3 == 1:
                p.add_class("-marked")
            for focused in (False, True):
                if focused:
                    p.focus()
                    await pilot.pause()
                seen |= set(p.classes) | ({"focus"} if p.has_focus else set())
                w, h = p.outer_size
                for crop in (Region(0, 0, w, h), Region(3, 1, w - 5, h - 2), Region(0, h - 1, w, 1)):
                    for filters in (p.get_line_filters(), [Monochrome()]):
                        p.get_line_filters = lambda f=filters: f  # type: ignore[method-assign]
                        ours = tp.BoxRowsCache().render_widget(p, crop)
                        theirs = tp.StylesCache().render_widget(p, crop)
                        del p.get_line_filters
                        assert list(map(_cells, ours)) == list(map(_cells, theirs)), (
                            p.id,
                            p.classes,
                            focused,
                            crop,
                            filters,
                        )
                        checked += 1
        assert {"-free", "-ready", "-starting", "-crashed", "-marked", "focus"} <= seen, seen
        assert checked >= 6 * len(panes)


_KEY_HANDLERS = ("on_key", "_on_key", "handle_key")
_TEXTUAL_KEY_BASE = {"Widget", "DOMNode", "MessagePump", "object"}


async def test_a_panes_key_goes_to_its_screen_in_one_hop(make_app, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """KeysToScreen: an arrow on a GPU pane goes pane -> fleet screen -> app (three dispatches, not the seven of
    bubbling through grid, band, shelf and host list) and still moves the selection; Escape still reaches the
    screen's own handler (it clears the fleet filter); and no container between a pane and the screen handles
    keys itself, so skipping them changes nothing."""
    from textual import events
    from textual.message_pump import MessagePump

    from console.ui.screens.fleet import FleetScreen
    from console.ui.widgets.gpu_pane import GpuPane
    from tests.ui.waits import until

    seen: list[str] = []
    on_message = MessagePump._on_message

    async def spy(self: MessagePump, message: object) -> None:
        if isinstance(message, events.Key):
            seen.append(type(self).__name__)
        await on_message(self, message)  # type: ignore[arg-type]

    monkeypatch.setattr(MessagePump, "_on_message", spy)
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        await until(pilot, lambda: len(fleet._targets()) > 4, "panes")
        first = fleet._targets()[0]
        first.focus()
        await pilot.pause()
        seen.clear()
        await pilot.press("right")
        await pilot.pause()
        assert isinstance(fleet.focused, GpuPane) and fleet.focused is not first
        assert seen == ["GpuPane", "FleetScreen", "DflashApp"]

        node = fleet.focused.parent
        while node is not fleet and node is not None:
            for cls in type(node).__mro__:
                if cls.__name__ in _TEXTUAL_KEY_BASE:
                    continue
                own = [n for n in vars(cls) if n in _KEY_HANDLERS or n.startswith(("key_", "_key_"))]
                assert own == [], f"{cls.__name__} between a pane and its screen handles keys: {own}"
            node = node.parent

        fleet.filter_text = fleet.focused.host
        fleet.sync()
        await pilot.pause()
        fleet._targets()[0].focus()
        await pilot.pause()
        assert isinstance(fleet.focused, GpuPane) and fleet.filter_text
        seen.clear()
        await pilot.press("escape")
        await pilot.pause()
        assert fleet.filter_text == "" and seen[:2] == ["GpuPane", "FleetScreen"]


def test_the_input_loop_notes_each_key_it_reads() -> None:
    """3e/12. A key read by the input loop opens the log readers' hold (console/keys_first.py) before the app
    gets it."""
    from console.keys_first import FRAME_AFTER_S, KEYS_FIRST

    before = KEYS_FIRST.key_at
    loop = _InputLoop()
    try:
        loop.write(b"x")
        assert loop.wait_keys(1) == ["x"]
        assert KEYS_FIRST.key_at > before
        assert KEYS_FIRST.holding()
    finally:
        loop.close()
        KEYS_FIRST.key_taken()  # close the hold this test opened: no app here draws the key's frame
        time.sleep(FRAME_AFTER_S)
        KEYS_FIRST.frame_drawn()
    assert not KEYS_FIRST.holding()


async def test_the_app_notes_the_keys_it_takes_and_the_frames_it_writes() -> None:
    """12. MarksFrames and DflashApp.on_event: the app notes a key it takes from the input thread (not the same
    key again as it bubbles back), and each frame it writes; a key's frame closes the readers' hold."""
    from console.keys_first import KEYS_FIRST
    from console.ui.app import DflashApp
    from console.ui.widgets.gpu_pane import GpuPane
    from tests.ui.fakes import NOW, FakeApi, FakeBackend

    app = DflashApp(FakeApi(), clock=lambda: NOW, backend=FakeBackend())
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        first = app.focused
        assert isinstance(first, GpuPane)
        KEYS_FIRST.key_arrived()  # as the input loop does
        assert KEYS_FIRST.holding()
        await pilot.press("right")
        await pilot.pause()
        await pilot.pause(0.05)
        assert app.focused is not first  # the key did its work
        assert KEYS_FIRST.taken_at >= KEYS_FIRST.key_at  # the app took it
        assert KEYS_FIRST.drawn_at > KEYS_FIRST.taken_at  # and wrote a frame after
        assert not KEYS_FIRST.holding()


async def test_repaint_rows_tells_the_screen_at_once_and_the_frame_shows_the_rows() -> None:
    """13. repaint_rows: a shown pane's changed rows go to `Screen._dirty_widgets` without the two messages of
    Textual's refresh (no `Update` reaches the screen), and the next frame shows them; a hidden pane takes
    Textual's way."""
    from textual import messages

    from console.fleet.events import GpuSample
    from console.ui.app import DflashApp
    from console.ui.widgets.gpu_pane import GpuPane
    from tests.ui.fakes import NOW, PRO6000, FakeApi, FakeBackend, gpu

    api = FakeApi()
    app = DflashApp(api, clock=lambda: NOW, backend=FakeBackend())
    updates: list[object] = []
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        screen = app.screen
        seen = screen._on_update

        async def on_update(message: messages.Update) -> None:
            updates.append(message.widget)
            await seen(message)

        screen._on_update = on_update  # type: ignore[method-assign]
        pane = next(p for p in screen.query(GpuPane) if p.host == "blackwell" and p.gpu == 3)
        before = "\n".join("".join(t for t, _, _ in strip) for strip in screen._compositor.render_strips())
        assert "59.8/95.6 GiB" not in before
        api.state.apply(
            GpuSample(
                "blackwell",
                NOW,
                tuple(gpu(i, PRO6000, 61_234 if i == 3 else 556, 97_887, 0, 30, 21.0, 600) for i in range(4)),
            )
        )
        app._dirty_hosts = None
        app._sync_screens()
        assert pane in screen._dirty_widgets  # told at once, before any message ran
        await pilot.pause()
        assert pane not in updates and pane not in screen._dirty_widgets
        drawn = "\n".join("".join(t for t, _, _ in strip) for strip in screen._compositor.render_strips())
        assert drawn.count("59.8/95.6 GiB") == 1, drawn  # its VRAM figure, 0.5 GiB before
        pane.display = False
        await pilot.pause()
        tp.repaint_rows(pane, [tp.Region(0, 0, 5, 1)])
        assert pane not in screen._dirty_widgets and pane._repaint_required  # Textual's refresh


async def test_the_first_help_sheet_is_mounted_and_shown_without_a_whole_layout() -> None:
    """9 and 5: the first `?` mounts the sheet hidden and shows it. The mount's completion, for a widget that takes
    no room, does not arrange the whole screen; the sheet is shown from a layout of what is on screen, and its keys
    are in view."""
    from console.ui.app import DflashApp
    from console.ui.widgets.help_sheet import sheet_of
    from tests.ui.fakes import NOW, FakeApi, FakeBackend

    app = DflashApp(FakeApi(), clock=lambda: NOW, backend=FakeBackend())
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        await pilot.pause(0.2)
        screen = app.screen
        assert sheet_of(screen) is None
        whole = _count_calls(screen._compositor, "reflow")
        on_screen = _count_calls(screen._compositor, "reflow_visible")
        await pilot.press("question_mark")
        for _ in range(3):
            await pilot.pause()
        sheet = sheet_of(screen)
        assert sheet is not None and sheet.is_open and sheet.region.height > 5
        assert sheet.rows and sheet.region.bottom == 60  # its keys, over the bottom rows
        assert whole == [] and on_screen, (len(whole), len(on_screen))
        await pilot.press("escape")
        await pilot.pause()
        assert not sheet.is_open and whole == []
