"""HelpSheet (`?`): the keys of the screen it opens on, in a sheet over that screen's bottom rows.

A sheet on the screen, not a screen of its own: closing a help screen made Textual draw the whole screen below it
again (the fleet at 200×60: 38 KB, and 22-37 ms of a busy 2-core machine's CPU; benchmarks/bench_keypress.py),
where closing the sheet redraws only the rows it covered. The screen above it stays live meanwhile (panes, log).
It covers the footer: while it is open, the footer's keys do nothing (`take_key`, from the app's key dispatch),
and the sheet's last line says which keys close it.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from console.ui.help_keys import Row, binding_rows, key_table, title_of
from console.ui.textual_private import StillStrips, overlay_change

SHEET_ID = "help-sheet"
FOOT = (
    "esc, q or ? closes · ↑↓ scroll · ctrl+p: command palette (server: relaunch, host: reconnect, …) · "
    'remap any id in hosts.toml [keymap], e.g. launch = "ctrl+l"'
)


class SheetText(StillStrips, Static):
    """The sheet's text, drawn again only when it changed: each show made Textual render the key table anew."""


class HelpSheet(StillStrips, VerticalScroll):
    """Mounted on a screen by its first `?` (`ready_sheet`) and kept: each later `?` only fills it again where the
    keys changed (a server's keys dim on a free GPU) and shows it. It is always its screen's first child: Textual
    numbers a screen's widgets from its last child up, so a last child shown or hidden would renumber all of them,
    and every one would count as changed and be drawn again. The first `?` with 64 hosts cost ~30 ms of CPU, most of
    it a whole-screen layout that the mount's completion asked for; a hidden widget's mount no longer gets one
    (`LayoutOnce`). Mounted ahead instead, it went wrong twice: composed with the fleet screen, no pane showed
    focused once 64 hosts had come up; mounted a second after it, an idle server screen opened meanwhile
    repainted (tests/ui/test_screen_keys.py)."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close", id="help-close")]
    DEFAULT_CSS = """
    HelpSheet {
        layer: help; dock: bottom; display: none;
        height: auto; max-height: 100%;
        background: $panel; border-top: tall $accent; border-title-color: $text; border-title-style: bold;
        padding: 0 1;
    }
    HelpSheet .help-foot { height: auto; color: $text-muted; margin-top: 1; }
    """
    can_focus = True

    def __init__(self) -> None:
        super().__init__(id=SHEET_ID)
        self._shown: tuple[list[Row], int] | None = None
        self._back: Widget | None = None

    def compose(self) -> ComposeResult:
        yield SheetText("", id="help-keys", markup=False)
        yield SheetText(FOOT, classes="help-foot", markup=False)

    @property
    def rows(self) -> list[Row]:
        """The keys it shows (or showed last): the screen's, as they were when it opened."""
        return self._shown[0] if self._shown is not None else []

    @property
    def is_open(self) -> bool:
        return bool(self.display)

    def allow_focus(self) -> bool:
        """Only while open: hidden and first on its screen, it would take the screen's first focus."""
        return self.is_open

    def open(self) -> None:
        """The keys of the screen as they are now (read before the sheet takes the focus, which would make them the
        sheet's own), then the sheet, drawn in this turn of the loop."""
        screen = self.screen
        self.border_title = title_of(screen)
        self._fill(binding_rows(screen), self.app.size.width)
        self._back = screen.focused
        with overlay_change(self):
            self.display = True
            self.scroll_home(animate=False, immediate=True)
            screen.set_focus(self, scroll_visible=False)  # now, not a turn later: the pane's and the sheet's focus
            # styles are drawn in the same frame as the sheet

    def close(self, give_back: bool = True) -> None:
        if not self.display:
            return
        back, self._back = self._back, None
        with overlay_change(self):
            self.display = False
            if give_back and back is not None and back.is_attached and back.screen is self.screen:
                self.screen.set_focus(back, scroll_visible=False)

    def action_close(self) -> None:
        self.close()

    def on_blur(self) -> None:
        self.call_later(self._focus_went)

    def _focus_went(self) -> None:
        """Focus moved to another widget of this screen (a click on a pane): that widget's keys are live again, so
        the sheet that said they were not goes. Focus gone from the app (the terminal lost it), or a screen on top
        (the palette), leaves it open."""
        focused = self.screen.focused if self.is_attached else None
        if self.display and focused is not None and focused is not self:
            self.close(give_back=False)

    def on_resize(self) -> None:
        if self.display and self._shown is not None:
            self._fill(self._shown[0], self.app.size.width)

    def _fill(self, rows: list[Row], width: int) -> None:
        if self._shown == (rows, width):
            return
        self._shown = (rows, width)
        inner = width - 2 - self.styles.scrollbar_size_vertical  # the padding, and a scrollbar if the keys overflow
        # hidden, no layout of its own: showing it lays it out (`overlay_change`); one asked for here was a layout
        # of the whole screen on a `?` whose keys changed (25-37 ms with 64 hosts)
        self.query_one("#help-keys", Static).update(key_table(rows, inner), layout=bool(self.display))


def sheet_of(screen: Screen[Any]) -> HelpSheet | None:
    try:
        sheet = screen.get_child_by_id(SHEET_ID)
    except NoMatches:
        return None
    return sheet if isinstance(sheet, HelpSheet) else None


async def ready_sheet(screen: Screen[Any]) -> HelpSheet:
    """The screen's sheet, mounted (hidden, first among its children) if it has none yet."""
    sheet = sheet_of(screen)
    if sheet is None:
        sheet = HelpSheet()
        await screen.mount(sheet, before=0)
    return sheet


def open_sheet(screen: Screen[Any]) -> HelpSheet | None:
    sheet = sheet_of(screen)
    return sheet if sheet is not None and sheet.is_open else None


async def take_key(screen: Screen[Any], key: str) -> bool:
    """While the screen's sheet is open, every key is the sheet's: its own (close, scroll) run on it and go no
    further (a scroll it cannot do must not fall through to the screen's binding for the same key, as Textual's
    binding chain would), and the rest do nothing, for the keys they would run are under the sheet. Only Textual's
    priority keys (ctrl+q, the palette) pass. True when the key was taken."""
    sheet = open_sheet(screen)
    if sheet is None:
        return False
    bound = screen.active_bindings.get(key)
    if bound is not None and bound.binding.priority:
        return False
    if bound is not None and bound.node is sheet:
        await sheet.app.run_action(bound.binding.action, sheet)
    return True


def rows_uncovered(widget: Widget) -> int | None:
    """How many of `widget`'s top content rows the screen's open help sheet leaves in view; None when no open sheet
    covers any of them. A log view that follows a flood under the sheet repaints only these: a repaint of the
    rows beneath made every frame draw the sheet, the footer and the side panel's rows again too."""
    if not widget.is_attached:
        return None
    sheet = open_sheet(widget.screen)
    if sheet is None:
        return None
    top = sheet.region.y
    region = widget.content_region
    if not sheet.region or top >= region.bottom:
        return None
    return max(0, top - region.y)
