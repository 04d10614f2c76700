"""ConsoleFooter: Textual's Footer that goes compact (and drops the palette hint) on narrow terminals, and shows
only the keys that fit, `? Help` always among them, so no label is cut at 80 columns (`…p ▏^p palettet`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer

from console.ui.textual_private import set_footer_key_enabled
from console.ui.widgets.help_sheet import open_sheet

Sig = tuple[tuple[str, str, str, bool, bool, str], ...]
"""Each active binding as the footer shows it: key, action, description, shown, enabled, tooltip."""

COMPACT_BELOW = 110
"""Terminal columns under which the footer packs its keys tighter."""

KEPT_LAST = ("quit", "help")
"""Actions whose keys go last when the footer lacks room (help never: it lists every key the footer leaves out)."""

Key = tuple[str, str, str]
"""A footer key as it is drawn: action, key display, description."""


def key_cells(key_display: str, description: str, compact: bool) -> int:
    """Columns a FooterKey takes, its margin included (Textual's Footer CSS: compact keys have no padding, a space
    before the description and a margin after; wide ones pad the key on both sides and the description after)."""
    k, d = cell_len(key_display), cell_len(description)
    if compact:
        return k + (1 + d if description else 0) + 1
    return k + 2 + (d + 1 if description else 0)


def fit_keys(keys: Sequence[Key], width: int, compact: bool, spare: Sequence[str] = ()) -> list[str]:
    """The actions whose keys the footer shows in `width` columns: all if they fit, else without the `spare`
    actions (in the order named), then without the others from the right, quit and help last (help never)."""
    shown = [a for a, _, _ in keys]
    cells = {a: key_cells(k, d, compact) for a, k, d in keys}
    rest = [a for a in reversed(shown) if a not in spare and a not in KEPT_LAST]
    order = [a for a in spare if a in cells] + rest + [a for a in KEPT_LAST[:-1] if a in cells]
    for action in order:
        if sum(cells[a] for a in shown) <= width:
            break
        shown.remove(action)
    return shown


class ConsoleFooter(Footer):
    """Also recomposes only when what it shows changed: Textual's Footer rebuilds every key widget on each
    bindings signal, which a focus move sends (60 key widgets mounted a press between two GPU panes with the same
    keys: the largest share of a key press's CPU in the fleet view)."""

    _shown: Sig | None = None
    _keys: tuple[Key, ...] = ()
    """Every key the screen's bindings show, as composed last (before `fit_keys` chose among them)."""
    _kept: list[str] | None = None
    """The actions of the keys shown now."""

    def compose(self) -> ComposeResult:
        made = list(super().compose())
        palette = [w for w in made if w.has_class("-command-palette")]
        keys = [w for w in made if w not in palette]
        self._keys = tuple(_drawn(keys))
        self._kept = self._choose(self.app.size.width, self.compact, bool(palette))
        yield from (w for w in keys if str(getattr(w, "action", "")) in self._kept)
        yield from palette

    def _choose(self, width: int, compact: bool, palette: bool) -> list[str]:
        room = width
        if palette:  # docked right: its key, its padding and border
            room -= key_cells("^p", "palette", compact) + 2
        spare: Sequence[str] = getattr(self.screen, "FOOTER_SPARE", ())
        return fit_keys(self._keys, room, compact, spare)

    def bindings_changed(self, screen: Screen[Any]) -> None:
        if open_sheet(screen) is not None:
            return  # the help sheet covers the footer and has the focus: its keys are not the footer's to show
        sig = _signature(screen)
        if sig is not None and sig == self._shown:
            return
        if sig is not None and self._shown is not None and _layout(sig) == _layout(self._shown) and self.is_attached:
            self._shown = sig  # the same keys, only enabled or not: flip them in place (a GPU pane with a server
            enabled: dict[str, bool] = {}  # and one without differ only in that)
            for _key, action, _desc, _show, on, _tip in sorted(sig, key=lambda row: not row[3]):
                enabled.setdefault(action, on)  # a key shows its action's first shown binding, as Footer composes
            for key in self.query("FooterKey"):
                set_footer_key_enabled(key, enabled.get(str(getattr(key, "action", "")), True))
            return
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            first = self._shown is None and not self._bindings_ready
            self._shown = sig  # the recompose Textual schedules now shows these bindings
            if first:  # Textual waits for the frame after (`call_after_refresh`): the screen's first frame has
                self._bindings_ready = True  # no keys and the next one lays the whole screen out again; a new
                self.call_next(self.recompose)  # screen's first frame has them here, in its first layout
                return
        super().bindings_changed(screen)

    def on_mount(self) -> None:
        self._fit(self.app.size.width)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(self.app.size.width)

    def _fit(self, width: int) -> None:
        narrow = width < COMPACT_BELOW
        if self.compact != narrow:
            self.compact = narrow
        palette = self.show_command_palette
        if palette == narrow:
            self.show_command_palette = not narrow  # ctrl+p is still listed by `?`
        if self._kept is not None and (palette == narrow or self._choose(width, narrow, not narrow) != self._kept):
            self._shown = None  # the palette key came or went, or more or fewer keys fit: compose them anew
            self.refresh(recompose=True)


def _drawn(keys: Iterable[Widget]) -> Iterable[Key]:
    for w in keys:
        yield str(getattr(w, "action", "")), str(getattr(w, "key_display", "")), str(getattr(w, "description", ""))


def _signature(screen: Screen[Any]) -> Sig | None:
    """What the footer shows of a screen's bindings: key, action, description, shown, enabled, tooltip."""
    try:
        return tuple(
            (key, ab.binding.action, ab.binding.description, ab.binding.show, ab.enabled, ab.tooltip)
            for key, ab in screen.active_bindings.items()
        )
    except Exception:  # not mounted yet: recompose as Textual does
        return None


def _layout(sig: Sig) -> tuple[tuple[str, str, str, bool, str], ...]:
    """A signature without the enabled flags: what decides the footer's keys and their order."""
    return tuple((k, a, d, show, tip) for k, a, d, show, _on, tip in sig)
