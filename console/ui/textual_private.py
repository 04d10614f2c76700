"""Every use of a private Textual API, fenced here, each with a test (tests/ui/test_textual_private.py).

Textual is pinned exactly (pyproject.toml) because of these; after a Textual bump, those tests say which
one moved. Nothing else in the console reaches into `textual._*` or an underscored Textual attribute.

1. `Screen._compositor.visible_widgets`: which widgets the last frame put on screen, so off-screen GPU
   panes skip their per-sync work (64 panes, a dozen visible; benchmarks/bench_console_cpu.py). The
   public way, asking a hidden widget for its region, re-arranges the whole screen.
2. `App._exit_renderables`: non-empty once the app is exiting on an error (a crashed worker, `panic`);
   a state sync then must not touch widgets that are being torn down.
3. `LinuxDriver.run_input_thread` with `textual._xterm_parser.XTermParser` (its `_timeout_time`),
   `textual._loop.loop_last` and `textual._time.get_time`: Textual's input loop polls stdin every 100 ms
   and only then notices that a lone ESC was the Escape key, so every Escape took 100-130 ms whatever
   ESCDELAY said (benchmarks/bench_keypress.py). PromptEscapeDriver is the same loop, except that `select`
   wakes when the parser's ESC wait ends, and a read ending in a lone ESC with nothing behind it ends that
   wait at once (`ESCAPE_AT_ONCE`). If Textual's internals move, `driver_class()` keeps Textual's.
4. `FooterKey._disabled`: what a click on a footer key does (bell or the key). ConsoleFooter flips a key's
   enabled state in place instead of letting Textual's Footer remount every key on each focus move
   (console/ui/widgets/footer.py); the `-disabled` class, public, is what the key looks like.
5. `Widget._check_refresh`, `Screen._refresh_layout`, `App._batch_count`: a key that shows or hides a panel
   gets its frame at once instead of after four event-loop turns (`draw_now`); `Screen._refresh_layout`'s scroll
   path, `Screen._layout_widgets` and `Compositor._visible_map` / `_full_map`: the help sheet, on a layer of its
   own, is laid out with only what is on screen (`overlay_change`).
6. `Screen._refresh_layout`, `Screen._compositor_refresh` (Textual's layout-and-frame and frame steps):
   `QuietFrames` runs them with the garbage collector paused (console/ui/gcpolicy.py).
7. `Widget._set_dirty` (every repaint of a widget goes through it): `StillStrips` gives a frame the strips a
   widget gave the last one while nothing has marked it dirty since. For a hidden one it clears
   `Widget._styles_cache`, `_dirty_regions` and `_repaint_regions` itself: Textual's own asks the compositor for
   a widget it cannot find, which builds the map of every widget again.
8. `Widget._scroll_update` (a scrolling widget's scrollbars from its virtual size): `set_virtual_size` grows a
   log view without re-arranging the whole screen.
9. `Screen._on_layout`, `Screen._screen_resized`, `Screen._compositor` (`size`, `widgets`),
   `Screen._layout_widgets`, `Message.time` with `textual._time.get_time`, and `AwaitMount._widgets` seen from
   the frame that calls `Screen.refresh`: `LayoutOnce` drops a layout request that a layout which began after
   it already served, a resize to the size the screen is already laid out at, and the layout a finished mount
   asks for when the last layout already placed every widget it mounted, or those it did not are hidden.
10. `textual._styles_cache.StylesCache` (`render`, `render_line`), `textual._border.get_box`,
   `textual._segment_tools.line_pad` and `Widget._styles_cache`: `BoxRowsCache` composes a GPU pane's content
   rows between its borders with the pieces made once per render.
11. `Event._set_forwarded` (marks an event the app already dispatched, so the app does not take it for new
   input): `KeysToScreen` hands a GPU pane's unhandled key to its screen in one hop.
12. `App._display` (every frame goes to the terminal through it) and `App._batch_count`: `MarksFrames` tells
   `console.keys_first` when a frame was written, which ends the log readers' hold for a key; the input loop
   of item 3 tells it when a key arrived.
13. `Screen._dirty_widgets`, `Widget._is_mounted`, `_layout_cache`, `_rich_style_cache` and `Screen._compositor`:
   `repaint_rows` marks a shown GPU pane's changed rows and tells its screen at once, without Textual's prompt
   and `Update` messages (two per pane per sync).
"""

from __future__ import annotations

import os
import selectors
import sys
from codecs import getincrementaldecoder
from collections.abc import Callable, Container, Iterator
from contextlib import contextmanager
from typing import Any

from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.terminal_theme import TerminalTheme
from textual import _time, events, messages
from textual._border import get_box
from textual._styles_cache import StylesCache
from textual.app import App
from textual.color import Color
from textual.content import Content
from textual.css.styles import StylesBase
from textual.driver import Driver
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.screen import Screen
from textual.strip import Strip
from textual.style import Style
from textual.widget import AwaitMount, Widget

from console.keys_first import KEYS_FIRST
from console.ui.gcpolicy import paused_during_frame

POLL_S = 0.1
"""Textual's own idle poll (it also bounds how quickly the input thread sees an exit request)."""


class _Everything:
    """Stands in when the compositor cannot be asked: every widget counts as visible."""

    def __contains__(self, _item: object) -> bool:
        return True


EVERYTHING: Container[Widget] = _Everything()


# -- 1. the compositor's visible widgets -----------------------------------------------------------------
def visible_widgets(widget: Widget) -> Container[Widget]:
    """The widgets of `widget`'s screen that the last layout placed on screen (cheap: cached by Textual)."""
    try:
        return widget.screen._compositor.visible_widgets
    except Exception:  # not mounted, or Textual moved it: everything counts as visible (correct, just slower)
        return EVERYTHING


# -- 2. the app's exit renderables -----------------------------------------------------------------------
def exiting_on_error(app: App[Any]) -> bool:
    """The app is going down with an error to print (a crashed worker, `panic`): leave the widgets alone."""
    return bool(getattr(app, "_exit_renderables", None))


# -- 3. the input loop -----------------------------------------------------------------------------------
ESCAPE_AT_ONCE = True
"""A read that ends in a lone ESC with no byte behind it is the Escape key now, not after ESCDELAY (as crossterm
decides it). A local terminal writes a key's escape sequence in one write, so its bytes come in one read; the
wait only delayed every Escape by ESCDELAY (10 ms, and a busy machine's wake-up after it).
`commands.tui.terminal_defaults` turns this off when the user set ESCDELAY: that is the setting for a
terminal whose sequences may come split."""


def release_lone_escape(parser: Any) -> None:
    """End the parser's wait on a lone ESC now: its next `tick()` gives the Escape key (3a: `_timeout_time`)."""
    if getattr(parser, "_timeout_time", None) is not None:
        parser._timeout_time = _time.get_time()


def next_wait(timeout_at: float | None, now: float, poll_s: float = POLL_S) -> float:
    """Seconds `select` may sleep: the idle poll, or less when the parser's ESC wait ends sooner."""
    if timeout_at is None:
        return poll_s
    return max(0.0, min(poll_s, timeout_at - now))


try:
    from textual._loop import loop_last
    from textual._time import get_time
    from textual._xterm_parser import XTermParser
    from textual.drivers.linux_driver import LinuxDriver
except ImportError:  # another platform or another Textual: keep Textual's driver
    LinuxDriver = None  # type: ignore[assignment,misc]  # the name stays bound; driver_class() checks it


if LinuxDriver is not None:

    class PromptEscapeDriver(LinuxDriver):
        """LinuxDriver with an input loop that honours ESCDELAY for a lone Escape."""

        def run_input_thread(self) -> None:
            selector = selectors.SelectSelector()
            selector.register(self.fileno, selectors.EVENT_READ)
            fileno = self.fileno
            event_read = selectors.EVENT_READ
            parser = XTermParser(self._debug)
            feed, tick = parser.feed, parser.tick
            decode = getincrementaldecoder("utf-8")().decode

            def deliver(event: Message) -> None:
                if isinstance(event, events.Key):
                    KEYS_FIRST.key_arrived()  # the log readers step aside until its frame
                self.process_message(event)

            def process(selector_events: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> None:
                for last, (_key, mask) in loop_last(selector_events):
                    if mask & event_read:
                        data = decode(os.read(fileno, 1024 * 4), final=final and last)
                        if not data:
                            break
                        for event in feed(data):
                            deliver(event)
                        if ESCAPE_AT_ONCE and data[-1] == "\x1b" and not selector.select(0):
                            release_lone_escape(parser)
                for event in tick():
                    deliver(event)

            def wait() -> float:
                return next_wait(getattr(parser, "_timeout_time", None), get_time())

            try:
                while not self.exit_event.is_set():
                    process(selector.select(wait()))
                selector.unregister(self.fileno)
                process(selector.select(POLL_S), final=True)
            finally:
                selector.close()
                try:
                    for _event in feed(""):
                        pass
                except Exception:  # EOF or a parse error at shutdown: nothing more to deliver
                    pass


def driver_class(default: type[Driver]) -> type[Driver]:
    """Our driver where Textual would use its plain LinuxDriver; Textual's choice everywhere else."""
    if LinuxDriver is not None and default is LinuxDriver:
        return PromptEscapeDriver
    return default


# -- 4. a footer key's enabled state ----------------------------------------------------------------------
def set_footer_key_enabled(key: Widget, enabled: bool) -> None:
    """Enable or disable one FooterKey in place: its look (the public `-disabled` class) and its click."""
    key.set_class(not enabled, "-disabled")
    if hasattr(key, "_disabled"):
        key._disabled = not enabled


# -- 5. lay out and draw now -----------------------------------------------------------------------------
def draw_now(widget: Widget) -> None:
    """Lay out and draw `widget`'s screen at once, after a key changed how `widget` is laid out.

    Left to Textual, a layout change travels widget idle → Layout message → screen idle → update timer →
    frame: four turns of the event loop, each behind whatever else is queued (under a log flood, SSH
    packets and log frames), 10-45 ms before the frame even starts (benchmarks/bench_keypress.py, `i` on
    the server screen). This runs the widget's pending refresh (which clears its ancestors' arrangement
    caches) and the screen's layout and frame now; the messages still queued then find nothing to do.
    If Textual's internals moved, it does nothing and the frame comes the usual way.
    """
    _lay_out_now(widget, on_screen_only=False)


def _lay_out_now(widget: Widget, on_screen_only: bool) -> float | None:
    """The pending refresh of `widget`, then its screen's layout and frame now (of what is on screen only: Textual's
    scroll path); when that layout began, or None if it did not run here (not on top, a batch, Textual moved)."""
    try:
        widget._check_refresh()
        screen = widget.screen
        if screen.is_current and not widget.app._batch_count:
            began = _time.get_time()
            screen._refresh_layout(scroll=on_screen_only)
            return began
    except (AttributeError, TypeError):  # Textual moved: its own path still draws the change
        pass
    return None


@contextmanager
def overlay_change(widget: Widget) -> Iterator[None]:
    """Shows or hides (inside the `with`) a widget alone on a layer of its own (the help sheet), whose showing or
    hiding moves nothing else, then lays out only what is on screen and draws it at once, as `draw_now` does.

    Textual's fast path for a scroll (`Compositor.reflow_visible`) is used, not a whole layout: with 64 hosts the
    fleet screen has ~780 widgets, and a whole layout for each `?` and Escape was 25-37 ms in process where a help
    screen of its own took 9-12 (benchmarks/bench_host_growth.py). The whole map is rebuilt when something asks
    for an off-screen widget, as after a scroll. The fast path compares with what was on screen before; after a
    whole layout that is not kept, so it is taken here, before the change (the whole map numbers widgets apart,
    and every one would count as changed). The `Layout` message the change posts is then spent (`LayoutOnce`).
    If another layout is pending the whole one runs; if Textual moved, the change is drawn its own way.
    """
    try:
        screen = widget.screen
        compositor = screen._compositor
        if compositor._visible_map is None and compositor.size:
            compositor._visible_map, _ = compositor._arrange_root(screen, compositor.size, visible_only=True)
    except (AttributeError, TypeError):
        pass
    yield
    began = _lay_out_now(widget, on_screen_only=True)
    screen = widget.screen
    if began is not None and isinstance(screen, LayoutOnce) and not getattr(screen, "_layout_widgets", True):
        screen._overlay_laid_out = (widget, began)


# -- 6. frames without a collection in them --------------------------------------------------------------
class QuietFrames:
    """Mixed into the console's big screens (before Screen): their layouts and frames run with the garbage
    collector paused, so a young collection lands after the frame instead of inside it."""

    def _refresh_layout(self, size: Size | None = None, scroll: bool = False) -> None:
        with paused_during_frame():
            Screen._refresh_layout(self, size, scroll)  # type: ignore[arg-type]

    def _compositor_refresh(self) -> None:
        with paused_during_frame():
            Screen._compositor_refresh(self)  # type: ignore[arg-type]


# -- 7. a still widget's strips, given again -------------------------------------------------------------
class StillStrips:
    """Mixed into the fleet screen's many widgets (before Widget): a frame gets the strips this widget gave the
    last one, as long as nothing has marked it dirty since and the frame asks for the same crop.

    A frame renders every widget under the union of its dirty regions, and on the fleet screen that union is
    most of the terminal: one changed pane in each corner makes Textual render all 64 panes, their host bands
    and their rows again from their line caches (background colours, regions, filters on every line). That was
    85 % of an idle fleet frame (benchmarks/bench_console_cpu.py). Textual's own line cache trusts the same
    signal: every repaint goes through `Widget._set_dirty` (a refresh, a resize, a style or focus change, a
    text selection), which drops the memo here; the line filters (theme, NO_COLOR) are part of the key.
    """

    _still: tuple[tuple[object, ...], list[Strip]] | None = None

    def _set_dirty(self, *regions: Region) -> None:
        self._still = None
        if not regions and _not_on_screen(self):  # type: ignore[arg-type]
            # nothing of it is on screen to mark; Textual would ask its size, and a widget missing from the map
            # made the compositor build the map of the whole screen again to look for it: 14 ms with 64 hosts, on
            # every `?` and Escape, for the help sheet shown or hidden (benchmarks/bench_host_growth.py). A later
            # layout that places it marks its region as changed, and it is drawn afresh from the cleared cache.
            widget: Widget = self  # type: ignore[assignment]
            widget._styles_cache.clear()
            widget._repaint_regions.clear()
            widget._dirty_regions.clear()
            widget._dirty_regions.add(Region())  # as Textual's for a widget of no size: the content is rendered anew
            return
        super()._set_dirty(*regions)  # type: ignore[misc]

    def render_lines(self, crop: Region) -> list[Strip]:
        widget: Widget = self  # type: ignore[assignment]
        key = (crop, widget.outer_size, *map(id, widget.get_line_filters()))
        still = self._still
        if still is not None and still[0] == key:
            return still[1]
        strips: list[Strip] = super().render_lines(crop)  # type: ignore[misc]
        self._still = (key, strips)
        return strips

    @contextmanager
    def strips_kept(self) -> Iterator[None]:
        """Its own `display` set inside keeps the memo: a widget hidden and shown again at the same size,
        with nothing marked dirty meanwhile, draws what it drew (Textual's display setter marks the whole
        widget dirty, so the server screen's side panel drew its 56 blank rows again on every `i`). Anything
        that changes it while hidden (a theme, a resize) still drops the memo."""
        still = self._still
        try:
            yield
        finally:
            self._still = still


def _not_on_screen(widget: Widget) -> bool:
    """Known, without building a map, to be in none of what the screen's last layout put on screen: missing from the
    map of what is on screen when there is one (`overlay_change`, a scroll), else hidden (it or a container of it
    has `display: none`)."""
    hidden = False
    node: object = widget
    while isinstance(node, Widget) and not isinstance(node, Screen):  # one walk up: the screen, and any hiding
        hidden = hidden or not node.display
        node = node.parent
    try:
        visible = node._compositor._visible_map  # type: ignore[attr-defined]
    except AttributeError:  # no screen yet, or Textual moved: Textual's own way
        return False
    return widget not in visible if visible is not None else hidden


# -- 8. a virtual size without a layout ------------------------------------------------------------------
def set_virtual_size(widget: Widget, size: Size) -> None:
    """Set a scrolling widget's virtual size and update its scrollbars, without a layout of the whole screen.

    `virtual_size` is a layout reactive: a log view that grows by a pull (every pull, until its buffer is full)
    made Textual re-arrange and redraw the whole screen, a quarter of the console's CPU with a log view open
    under a flood (benchmarks/bench_keypress.py). What a new virtual size changes is the scrollbars' thumbs and,
    rarely, whether a scrollbar is shown; `_scroll_update` does both, and a scrollbar that appears or goes still
    asks for the layout it needs (`show_*_scrollbar` are layout reactives). If Textual moved, the reactive is set.
    """
    if widget.virtual_size == size:
        return
    try:
        update = widget._scroll_update
    except AttributeError:  # Textual moved: its own way, with the layout
        widget.virtual_size = size
        return
    widget.set_reactive(Widget.virtual_size, size)
    update(size)


# -- 9. one layout per change ----------------------------------------------------------------------------
class LayoutOnce:
    """Mixed into the console's screens (before Screen): a change is laid out once, not once more per message.

    Textual asks for a layout by message (`Layout`, from a widget's idle) and lays out when the screen's update
    timer runs. A layout that runs first (`draw_now`, a screen's resume, a resize) does not cancel the messages
    already queued, so each arrives to ask for the same layout again: two or three whole-screen layouts
    (15-50 ms each at 200x60 on a busy 2-core machine) after every server-screen open and every `i`, with
    a key pressed meanwhile waiting behind them (benchmarks/bench_keypress.py). Here a `Layout` message
    created before the last whole layout began is dropped (that layout placed its widget: the widget
    cleared its ancestors' arrangement caches before posting it), and so is a resize to the size the screen
    was last laid out at (a pushed screen gets one just after its first layout). Anything that changes
    afterwards asks anew, with a newer message.
    """

    _laid_out_at = float("-inf")
    _layout_asked_at = float("-inf")
    _overlay_laid_out: tuple[Widget, float] | None = None
    """The overlay `overlay_change` last placed, and when that began: its own earlier `Layout` asks are served."""

    def _refresh_layout(self, size: Size | None = None, scroll: bool = False) -> None:
        screen: Screen[Any] = self  # type: ignore[assignment]
        whole = not scroll or bool(screen._layout_widgets)
        began = _time.get_time()
        super()._refresh_layout(size, scroll)  # type: ignore[misc]
        if whole and screen._compositor.size:
            self._laid_out_at = began
            if screen._layout_required and self._layout_asked_at < began:
                screen._layout_required = False  # asked of the screen before this layout, which served it

    async def _on_layout(self, message: messages.Layout) -> None:
        overlay = self._overlay_laid_out
        if message.time < self._laid_out_at or (overlay and message.widget is overlay[0] and message.time < overlay[1]):
            message.stop()
            message.prevent_default()
            return
        await super()._on_layout(message)  # type: ignore[misc]

    def _screen_resized(self, size: Size) -> None:
        screen: Screen[Any] = self  # type: ignore[assignment]
        if size == screen._compositor.size and screen.is_attached:
            return
        super()._screen_resized(size)  # type: ignore[misc]

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False) -> Any:
        if layout and not regions and not recompose:
            if _mount_already_placed(self, sys._getframe(1)):  # type: ignore[arg-type]
                return self
            self._layout_asked_at = _time.get_time()
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)  # type: ignore[misc]


def _mount_already_placed(screen: Screen[Any], caller: Any) -> bool:
    """True if `caller` is Textual's mount-completion step (`AwaitMount`) and every widget it mounted is in the
    screen's last layout (a pushed screen's own widgets, laid out by its first frame before the mount's awaiter
    runs: one more whole-screen layout and repaint, for nothing, right after every first open) or hidden (the
    help sheet, mounted by the first `?` and shown by `overlay_change`: it takes no room until then, and the
    layout was 30 ms of that `?` with 64 hosts)."""
    try:
        mount = caller.f_locals.get("self")
        if not isinstance(mount, AwaitMount) or mount._parent is not screen:
            return False
        placed = screen._compositor.widgets
        return bool(mount._widgets) and all(w in placed or not w.display for w in mount._widgets)
    except (AttributeError, TypeError):  # Textual moved: lay out as it asks
        return False


# -- 10. a bordered widget's content rows ----------------------------------------------------------------
class BoxRowsCache(StylesCache):
    """Textual's line cache for a widget with a plain box (a border on all four sides, horizontal padding only,
    no outline, tint, hatch or opacity: a GPU pane). Its content rows are the widget's row between the side
    borders and padding, with those pieces made once per render instead of once per row; the top and bottom
    rows (border titles) and any other box are Textual's own `render_line`.

    A focus move redraws every row of two panes (border, background and title all change), and Textual's
    per-row composition (the border and outline tuples, new `Style`s hashed into `get_box`'s cache, the app's
    theme looked up for each row) was most of that frame: the fleet screen's keys under a busy machine wait on
    it (benchmarks/bench_keypress.py with `run_all --busy 1`). The output is the same cell for cell
    (tests/ui/test_textual_private.py).
    """

    _NOT_YET = object()

    def __init__(self) -> None:
        super().__init__()
        self._sides: Any = self._NOT_YET
        """(content width, content height, left pad, right pad, inner style, left border, right border) for the
        render under way, made at its first content row that is not cached (a frame that finds every row cached
        pays nothing); None: the box is not plain, every row is Textual's."""

    def render(self, *args: Any, **kwargs: Any) -> list[Strip]:
        self._sides = self._NOT_YET  # the styles may have changed since the last render
        return super().render(*args, **kwargs)

    @staticmethod
    def _make_sides(
        styles: StylesBase, content_size: Size, pad: Spacing, base_background: Color, background: Color, opacity: float
    ) -> tuple[int, int, int, int, RichStyle, Segment, Segment] | None:
        border = styles.border
        (top, _), (right, right_color), (bottom, _), (left, left_color) = border
        if not (
            top
            and right
            and bottom
            and left
            and not pad.top
            and not pad.bottom
            and opacity == 1.0
            and not any(edge for edge, _ in styles.outline)
            and not styles.tint.a
            and styles.text_opacity == 1.0
            and styles.hatch in (None, "none")
        ):
            return None
        key = (border, content_size, pad.left, pad.right, base_background, background)
        sides = _SIDES.get(key)
        if sides is None:  # new Styles, hashed into get_box's cache, for each pane each frame: 10% of a fleet frame
            inner, outer = Style(background=base_background + background), Style(background=base_background)
            sides = (
                content_size.width,
                content_size.height,
                pad.left,
                pad.right,
                inner.rich_style,
                get_box(left, inner, outer, Style(foreground=base_background + left_color))[1][0],
                get_box(right, inner, outer, Style(foreground=base_background + right_color))[1][2],
            )
            if len(_SIDES) >= 256:
                _SIDES.clear()
            _SIDES[key] = sides
        return sides

    def render_line(
        self,
        styles: StylesBase,
        y: int,
        size: Size,
        content_size: Size,
        padding: Spacing,
        base_background: Color,
        background: Color,
        render_content_line: Callable[[int], Strip],
        border_title: tuple[Content, Color, Color, Style] | None,
        border_subtitle: tuple[Content, Color, Color, Style] | None,
        opacity: float,
        ansi_theme: TerminalTheme,
        native_ansi: bool,
    ) -> Strip:
        sides = None
        if 0 < y < size.height - 1:
            sides = self._sides
            if sides is self._NOT_YET:
                sides = self._sides = self._make_sides(
                    styles, content_size, padding, base_background, background, opacity
                )
        if sides is None:
            return super().render_line(
                styles,
                y,
                size,
                content_size,
                padding,
                base_background,
                background,
                render_content_line,
                border_title,
                border_subtitle,
                opacity,
                ansi_theme,
                native_ansi,
            )
        cw, ch, pad_left, pad_right, inner, left, right = sides
        # one Strip for the row (each comes with caches of its own): border, padding, content, fill, border
        segments = [left, Segment(" " * pad_left, inner)] if pad_left else [left]
        fill = cw + pad_right
        if y - 1 < ch:
            line = render_content_line(y - 1)
            if line.cell_length > cw:
                line = line.crop(0, cw)
            segments.extend(line)
            fill -= line.cell_length
        if fill:
            segments.append(Segment(" " * fill, inner))
        segments.append(right)
        return Strip(segments, size.width)


_SIDES: dict[tuple[Any, ...], tuple[int, int, int, int, RichStyle, Segment, Segment]] = {}
"""`BoxRowsCache._make_sides` by its inputs (a few per theme: a pane's size and its border's kind and colour)."""


def use_box_rows(widget: Widget) -> None:
    """Gives `widget` a BoxRowsCache (at construction, before its first render)."""
    widget._styles_cache = BoxRowsCache()


# -- 11. a key straight to the screen --------------------------------------------------------------------
class KeysToScreen:
    """Mixed into the fleet screen's focus targets (GPU panes, router bands; before Widget): a key the widget
    leaves unhandled goes to its screen in one hop, not up through every container between (pane grid, host
    band, shelf, host list). Each hop is a message of its own and a turn of the event loop; under a log flood
    every turn also runs a step of a stream reader (3-10 ms beside a busy process), and an arrow key waited for
    four or five of them before its binding ran. The same as bubbling while no container between handles keys
    itself (tests/ui/test_textual_private.py checks the fleet's); bindings are looked up along the focus chain
    wherever the key is, so theirs still apply."""

    async def _on_key(self, event: events.Key) -> None:
        widget: Widget = self  # type: ignore[assignment]
        if await widget.handle_key(event):  # its own key_ methods: Textual's Widget._on_key, then bubbling
            return
        screen = widget.screen
        if widget.parent is screen:
            return
        event.stop()
        key = events.Key(event.key, event.character)
        key._set_forwarded()  # dispatched by the app already: at the app it is a bubbled key (its bindings)
        screen.post_message(key)


# -- 12. a frame written -----------------------------------------------------------------------------------
class MarksFrames:
    """Mixed into the app (before App): each frame written to the terminal is noted in `console.keys_first`, whose
    hold on the log readers a key's frame ends."""

    def _display(self, screen: Screen[Any], renderable: Any) -> None:
        app: App[Any] = self  # type: ignore[assignment]
        drawn = renderable is not None and not getattr(app, "_batch_count", 0)  # Textual writes nothing else
        App._display(app, screen, renderable)
        if drawn:
            KEYS_FIRST.frame_drawn()


# -- 13. rows repainted straight to the screen -----------------------------------------------------------
def repaint_rows(widget: Widget, regions: list[Region]) -> None:
    """`widget.refresh(*regions)` for a shown widget whose size and styles did not change (a GPU pane whose
    figures moved), with the screen told at once. Textual's way is two messages per widget: a prompt to the
    widget, whose idle handler then posts an `Update` to its screen, which adds it to `Screen._dirty_widgets`.
    A fleet sync repaints every pane on screen each second, so that was 128 messages a sync with 64 panes
    (benchmarks/bench_console_cpu.py). Anything else (hidden, not mounted yet, no screen) takes Textual's way."""
    try:
        screen = widget.screen
        dirty = screen._dirty_widgets
        mounted = widget._is_mounted and widget.display and screen in screen._compositor
    except Exception:  # no screen yet, or Textual moved
        mounted = False
    if not mounted:
        widget.refresh(*regions)
        return
    widget._layout_cache.clear()
    widget._set_dirty(*regions)
    widget.clear_cached_dimensions()
    widget._rich_style_cache.clear()
    dirty.add(widget)
    screen.check_idle()
