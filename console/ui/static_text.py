"""New text for a Static without re-arranging the whole screen when the text still takes the same rows.

`Static.update` asks for a layout by default, and a layout re-arranges every widget of the screen. On the
server screen under a 10k lines/s flood that was 12-23 ms each, about twice a second as the header's
figures moved, and a key pressed meanwhile waited behind it (benchmarks/bench_keypress.py). A Static
whose width the layout fixes (not `width: auto`) only needs a layout when its height changes: a fixed
height never does, an auto height does when the new text wraps to another number of rows at the width it
has now. Everything else (a not yet laid-out widget, auto width) takes Textual's default.
"""

from __future__ import annotations

from typing import cast

from textual.css.styles import RulesMap
from textual.visual import VisualType
from textual.widgets import Static


def update_static(widget: Static, content: VisualType) -> None:
    """`widget.update(content)`, with a layout only if the widget's rows can change."""
    styles = widget.styles
    width = widget.outer_size.width - styles.gutter.width  # `size` would ask the compositor (a re-arrange)
    fixed_width = styles.width is None or not styles.width.is_auto
    if not widget.is_mounted or width <= 0 or not fixed_width:
        widget.update(content)
        return
    if styles.height is not None and not styles.height.is_auto:
        widget.update(content, layout=False)
        return
    rules = cast(RulesMap, styles)  # what Textual's own get_content_height passes
    rows = widget.visual.get_height(rules, width)
    widget.update(content, layout=False)
    if widget.visual.get_height(rules, width) != rows:
        widget.refresh(layout=True)
