"""ActivityLog: the fleet screen's tail of notices (ready, crashed, host down/back, actions) on tall terminals."""

from __future__ import annotations

import time
from collections import deque

from textual.content import Content
from textual.widgets import Static

from console.fleet.events import Notice
from console.ui import format as fmt
from console.ui.widgets.gpu_pane import colours

MAX_ENTRIES = 200


class ActivityLog(Static):
    """Newest last; every toast also lands here so a missed one can be read later."""

    DEFAULT_CSS = """
    ActivityLog { height: 1fr; border-top: solid $panel-lighten-2; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, entries: deque[Notice], *, id: str | None = None) -> None:
        super().__init__(id=id, markup=False)
        self.entries = entries
        self._shown: tuple[int, int, int] | None = None

    def sync(self) -> None:
        if not self.display or self.has_class("-none"):
            return  # the fleet layout gave it no rows
        height = max(0, self.outer_size.height - self.styles.gutter.height)  # `size` would re-arrange the screen
        key = (id(self.entries[-1]) if self.entries else 0, len(self.entries), height)
        if key == self._shown:
            return
        self._shown = key
        c = colours(self)
        room = max(1, height or 6)
        if not self.entries:
            self.update(
                Content("activity: server ready, crashed and host up/down notices will appear here"), layout=False
            )
            return
        lines = []
        for n in list(self.entries)[-room:]:
            colour = {"error": c["phase-crashed"], "warning": c["phase-starting"], "info": c["fg"]}[n.level]
            icon = {"error": "✖", "warning": "!", "info": "•"}[n.level]
            lines.append(
                Content.assemble(
                    (time.strftime("%H:%M:%S", time.localtime(n.at)) + " ", c["dim"]),
                    (f"{icon} {fmt.clean(n.message, 300)}", colour),
                )
            )
        self.update(Content("\n").join(lines), layout=False)  # its height is set by the screen, not the text
