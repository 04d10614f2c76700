"""LogView: a Line-API log pane that reads the state's line buffer in batches, with follow, search and filter."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.ui import format as fmt
from console.ui.logsearch import filter_rows, find_matches, level_of

MAX_WIDTH = 4000
"""Horizontal scroll stops here; a 1 MB line is shown cropped, never measured or styled whole."""

LineSource = Callable[[], tuple[Sequence[str], int]]


class LogView(ScrollView, can_focus=True):
    """Renders only the visible rows; new lines are picked up by `pull()` on the screen's timer."""

    DEFAULT_CSS = """
    LogView { background: $surface; scrollbar-size-vertical: 1; }
    LogView > .logview--gutter { color: $text-muted; }
    LogView > .logview--error { color: $error; }
    LogView > .logview--warning { color: $warning; }
    LogView > .logview--match { background: $accent 40%; }
    LogView > .logview--current { background: $accent; color: $background; text-style: bold; }
    """
    COMPONENT_CLASSES = {"logview--gutter", "logview--error", "logview--warning", "logview--match",
                         "logview--current"}

    follow: var[bool] = var(True)
    filtered: var[bool] = var(False)

    def __init__(self, source: LineSource, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.source = source
        self._lines: list[str] = []
        self._count = -1
        self._rows: list[int] = []
        self._width = 0
        self.query_text = ""
        self.matches: list[int] = []
        self.current = -1
        self.cursor_row: int | None = None
        """A row pointed at (traceback jump, search hit), drawn with a marker in the gutter."""
        self._styles: dict[str, Style] = {}

    # -- data ----------------------------------------------------------------------------
    @property
    def lines(self) -> list[str]:
        return self._lines

    @property
    def rows(self) -> list[int]:
        return self._rows

    def pull(self, force: bool = False) -> bool:
        """Takes whatever arrived since the last call (one batch per tick); True if anything changed."""
        lines, count = self.source()
        if count == self._count and not force:
            return False
        grew_only = not force and len(lines) >= len(self._lines) and count - self._count == len(lines) - len(self._lines)
        old = len(self._lines)
        self._lines = list(lines)
        self._count = count
        if not grew_only:
            self.cursor_row = None
        if self.filtered:
            self._rows = (self._rows + filter_rows(self._lines, old)) if grew_only else filter_rows(self._lines)
        else:
            self._rows = list(range(len(self._lines)))
        new = self._lines[old:] if grew_only else self._lines
        if not grew_only:
            self._width = 0
        for x in new:
            self._width = max(self._width, min(len(x), MAX_WIDTH))
        if self.query_text:
            self.matches = find_matches(self._lines, self._rows, self.query_text)
        self.virtual_size = Size(self._width + 8, len(self._rows))
        self._styles.clear()
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
            self.call_after_refresh(self._stick)
        self.refresh()
        return True

    def _stick(self) -> None:
        """Follow after layout too (the first batch arrives before the view knows its height)."""
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def watch_filtered(self) -> None:
        self.pull(force=True)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self.follow = new >= self.max_scroll_y

    def action_follow(self) -> None:
        self.follow = True
        self.cursor_row = None
        self.scroll_end(animate=False, x_axis=False)

    # -- search --------------------------------------------------------------------------
    def search(self, text: str) -> int:
        """Highlights `text` and jumps to the first match at or after the top of the view."""
        self.query_text = text
        self.matches = find_matches(self._lines, self._rows, text)
        self.current = -1
        self.refresh()
        if not self.matches:
            return 0
        top = int(self.scroll_y)
        after = [i for i, r in enumerate(self.matches) if r >= top]
        self.goto_match(after[0] if after else 0)
        return len(self.matches)

    def goto_match(self, i: int) -> None:
        if not self.matches:
            return
        self.current = i % len(self.matches)
        self.show_row(self.matches[self.current])

    def next_match(self, step: int = 1) -> None:
        self.goto_match(self.current + step if self.current >= 0 else 0)

    def show_row(self, row: int, context: int | None = None) -> None:
        """Scrolls so `row` sits a third down the view (context above it); pauses follow."""
        self.follow = False
        ctx = self.size.height // 3 if context is None else context
        self.cursor_row = row
        self.scroll_to(y=max(0, row - ctx), animate=False, immediate=True)
        self.follow = False
        self.refresh()

    def show_line(self, index: int) -> None:
        """Scrolls to a line index of the buffer (leaving the filter if that line is filtered out)."""
        if index not in self._rows and self.filtered:
            self.filtered = False
        if index in self._rows:
            self.show_row(self._rows.index(index), context=2)

    def visible_lines(self) -> list[str]:
        """The lines on screen now (filter applied), cleaned, for copy."""
        top = int(self.scroll_y)
        rows = self._rows[top: top + self.size.height]
        return [fmt.clean(self._lines[i]) for i in rows]

    def shown_lines(self) -> list[str]:
        """Every line the view shows with the current filter, for save."""
        return [fmt.clean(self._lines[i]) for i in self._rows]

    # -- drawing -------------------------------------------------------------------------
    def _style(self, name: str) -> Style:
        if name not in self._styles:
            self._styles[name] = self.get_component_rich_style(name)
        return self._styles[name]

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.size.width
        base = self.rich_style
        if row >= len(self._rows):
            return Strip.blank(width, base)
        idx = self._rows[row]
        raw = self._lines[idx]
        gutter_w = 7
        mark = "▶" if row == self.cursor_row else " "
        number = f"{self._count - len(self._lines) + idx + 1:>6}{mark}"
        room = max(0, width - gutter_w)
        text = fmt.clean(raw[: (scroll_x + room) * 2 + 256])[scroll_x: scroll_x + room]
        lvl = level_of(raw)
        style = base + self._style(f"logview--{lvl}") if lvl else base
        segs = [Segment(number, base + self._style("logview--gutter"))]
        segs += self._highlight(text, style, row)
        strip = Strip(segs).crop_extend(0, width, base)
        return strip

    def _highlight(self, text: str, style: Style, row: int) -> list[Segment]:
        q = self.query_text.lower()
        if not q or q not in text.lower():
            return [Segment(text, style)]
        hl = self._style("logview--current" if self.current >= 0 and self.matches
                         and self.matches[self.current] == row else "logview--match")
        out: list[Segment] = []
        low = text.lower()
        pos = 0
        while True:
            j = low.find(q, pos)
            if j < 0:
                break
            if j > pos:
                out.append(Segment(text[pos:j], style))
            out.append(Segment(text[j: j + len(q)], style + hl))
            pos = j + len(q)
        if pos < len(text):
            out.append(Segment(text[pos:], style))
        return out
