"""ConsoleFooter: Textual's Footer that goes compact (and drops the palette hint) on narrow terminals, so the
key labels still fit at 80 columns instead of being cut (`^p pa lette`)."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.screen import Screen
from textual.widgets import Footer

from console.ui.textual_private import set_footer_key_enabled
from console.ui.widgets.help_sheet import open_sheet

Sig = tuple[tuple[str, str, str, bool, bool, str], ...]
"""Each active binding as the footer shows it: key, action, description, shown, enabled, tooltip."""

COMPACT_BELOW = 110
"""Terminal columns under which the footer packs its keys tighter."""


class ConsoleFooter(Footer):
    """Also recomposes only when what it shows changed: Textual's Footer rebuilds every key widget on each
    bindings signal, which a focus move sends (60 key widgets mounted a press between two GPU panes with the same
    keys: the largest share of a key press's CPU in the fleet view)."""

    _shown: Sig | None = None

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
        if self.show_command_palette == narrow:
            self._shown = None  # the recompose this sets off reads the bindings anew
            self.show_command_palette = not narrow  # ctrl+p is still listed by `?`


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
