"""Which widgets the last frame put on screen, so off-screen GPU panes skip their per-sync work.

A fleet of 8 hosts × 8 GPUs has 64 panes but a terminal shows a dozen or two; building and diffing
the hidden ones on every state sync was most of the console's CPU (benchmarks/bench_console_cpu.py).
Asking a hidden widget for its `size` is worse: Textual then re-arranges the whole screen to find it.
The compositor is asked in console/ui/textual_private.py (a private Textual API, fenced there).
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from textual.content import Content
from textual.widget import Widget
from textual.widgets import Static

from console.ui.textual_private import visible_widgets as visible_widgets

_shown: WeakKeyDictionary[Static, tuple[object, ...]] = WeakKeyDictionary()
"""What each one-row Static shows now (text and spans), kept beside the widget rather than on it."""


def update_row(widget: Static, content: Content, *, layout: bool = False) -> None:
    """Show `content` on a one-row Static only when its text or styles changed, without a re-layout
    (`layout=True` where the change adds or drops a row).

    `Static.update` re-lays out the whole screen (64 panes) by default, even for the same text.
    """
    key = (content.plain, tuple(content.spans))
    if key != _shown.get(widget):
        _shown[widget] = key
        widget.update(content, layout=layout)


def content_width(widget: Widget) -> int:
    """The widget's content width from its last layout, without asking the compositor where it is."""
    return max(0, widget.outer_size.width - widget.styles.gutter.width)


class CatchUpWhenShown:
    """For widgets that skip their sync while off screen: `behind` marks that, and showing them syncs.

    Textual sends Show to newly visible widgets and Resize to those a layout resizes; panes a scroll
    brings back unchanged get neither, so their scrolling container calls `sync` on them instead.
    """

    behind = False

    def sync(self) -> None:
        raise NotImplementedError

    def on_show(self) -> None:
        if self.behind:
            self.sync()

    def on_resize(self) -> None:
        if self.behind:
            self.sync()
