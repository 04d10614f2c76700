"""ConsoleFooter: Textual's Footer that goes compact (and drops the palette hint) on narrow terminals, so the
key labels still fit at 80 columns instead of being cut (`^p pa lette`)."""

from __future__ import annotations

from textual import events
from textual.widgets import Footer

COMPACT_BELOW = 110
"""Terminal columns under which the footer packs its keys tighter."""


class ConsoleFooter(Footer):
    def on_mount(self) -> None:
        self._fit(self.app.size.width)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(self.app.size.width)

    def _fit(self, width: int) -> None:
        narrow = width < COMPACT_BELOW
        if self.compact != narrow:
            self.compact = narrow
        if self.show_command_palette == narrow:
            self.show_command_palette = not narrow  # ctrl+p is still listed by `?`
