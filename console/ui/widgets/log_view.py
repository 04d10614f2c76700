"""LogView: a Line-API log pane that reads the state's line buffer incrementally, with follow, search, filter and wrap."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import islice
from typing import overload

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.ui import format as fmt
from console.ui.logsearch import filter_rows, level_of
from console.ui.textual_private import set_virtual_size
from console.ui.widgets.fast_scrollbar import use_cached_bars
from console.ui.widgets.help_sheet import rows_uncovered

GUTTER = 7
"""Line number (6) and the cursor mark."""
MAX_WIDTH = 4000
"""Horizontal scroll stops here; a 1 MB line is shown cropped, never measured or styled whole."""

LineSource = Callable[[], tuple[Sequence[str], int]]


class LogView(ScrollView, can_focus=True):
    """Renders only the visible rows; new lines are picked up by `pull()` on the screen's timer."""

    DEFAULT_CSS = """
    LogView { background: $surface; scrollbar-size-vertical: 1; overflow-x: scroll; overflow-y: scroll; }
    LogView.-wrap { overflow-x: hidden; }
    LogView > .logview--gutter { color: $text-muted; }
    LogView > .logview--error { color: $error; }
    LogView > .logview--warning { color: $warning; }
    LogView > .logview--match { background: $accent 40%; }
    LogView > .logview--current { background: $accent; color: $background; text-style: bold; }
    """
    COMPONENT_CLASSES = {"logview--gutter", "logview--error", "logview--warning", "logview--match", "logview--current"}

    follow: var[bool] = var(True)
    filtered: var[bool] = var(False)
    wrap: var[bool] = var(False)
    """Long lines continue on the next rows (no horizontal scroll) instead of being cut at the edge."""

    def __init__(self, source: LineSource, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.source = source
        self._src: object = None
        """The source's line sequence last pulled from: a new one (a resynced log) is read whole."""
        self._buf: list[str] = []
        self._head = 0
        """`_buf[_head:]` are the lines shown; dropped lines are skipped, then compacted away in bulk."""
        self._count = -1
        self._frows: list[int] = []
        self._fhead = 0
        """Filtered: absolute line numbers kept (`_frows[_fhead:]`); unfiltered every line is a row."""
        self._width = 0
        self.query_text = ""
        self._hits: list[int] = []
        """Absolute line numbers containing the query, in order."""
        self.current = -1
        self._cursor: int | None = None
        self._styles: dict[str, Style] = {}
        self._wrows: list[int] = []
        """Wrapped: the absolute line of each row; `_wstart` the offset in it where the row starts."""
        self._wstart: list[int] = []
        self._wupto = -1
        """Wrapped: the last absolute line whose rows are in `_wrows`."""
        self._wroom = 0
        self.pulled = 0
        """How many lines the last `pull()` took in (all it holds after a full re-read)."""
        self._frame: tuple[Style, Style, int, int, int] | None = None
        """(base style, gutter style, width, scroll x, scroll y) while `render_lines` runs."""

    @property
    def view_size(self) -> Size:
        """The rows and columns a line can show in: the view less its scrollbars (always shown, so that a
        log view's first layout does not ask for a second one when they appear: a whole-screen layout)."""
        return self.scrollable_content_region.size

    # -- data ----------------------------------------------------------------------------
    @property
    def _first(self) -> int:
        """Absolute number (0-based, over the log's life) of the first line held."""
        return self._count - (len(self._buf) - self._head)

    @property
    def lines(self) -> Sequence[str]:
        return _Tail(self._buf, self._head)

    @property
    def rows(self) -> Sequence[int]:
        """Line indices (into `lines`) shown, one per row."""
        if not self.filtered:
            return range(len(self._buf) - self._head)
        first = self._first
        return [a - first for a in self._frows[self._fhead :]]

    @property
    def _nrows(self) -> int:
        if self.wrap:
            return len(self._wrows)
        return len(self._frows) - self._fhead if self.filtered else len(self._buf) - self._head

    def _abs_of_row(self, row: int) -> int:
        if self.wrap:
            return self._wrows[row]
        return self._frows[self._fhead + row] if self.filtered else self._first + row

    def _row_of_abs(self, a: int) -> int | None:
        if self.wrap:
            i = bisect_left(self._wrows, a)
            return i if i < len(self._wrows) and self._wrows[i] == a else None
        if not self.filtered:
            r = a - self._first
            return r if 0 <= r < self._nrows else None
        i = bisect_left(self._frows, a, self._fhead)
        return i - self._fhead if i < len(self._frows) and self._frows[i] == a else None

    @property
    def matches(self) -> list[int]:
        """Rows whose line contains the query."""
        rows = (self._row_of_abs(a) for a in self._hits)
        return [r for r in rows if r is not None]

    @property
    def cursor_row(self) -> int | None:
        """A row pointed at (traceback jump, search hit), drawn with a marker in the gutter."""
        return None if self._cursor is None else self._row_of_abs(self._cursor)

    @cursor_row.setter
    def cursor_row(self, row: int | None) -> None:
        self._cursor = None if row is None or not 0 <= row < self._nrows else self._abs_of_row(row)

    def pull(self, force: bool = False) -> bool:
        """Takes whatever arrived since the last call; True if anything changed.

        Appends only the new lines (and their filter rows, search hits and widths) and drops the ones
        the source let go from the front: no copy or re-measure of the whole 20k-line buffer per pull.
        """
        lines, count = self.source()
        if count == self._count and lines is self._src and not force:
            self.pulled = 0
            return False
        new_n = count - self._count
        if force or lines is not self._src or new_n < 0 or new_n > len(lines) or self._count < 0:
            self.pulled = len(lines)
            self._rebuild(lines, count)
        else:
            self.pulled = new_n
            self._append(list(islice(reversed(lines), new_n))[::-1] if new_n else [], count, len(lines))
        if self.wrap:
            self._rewrap_tail()
        set_virtual_size(self, Size(self.view_size.width if self.wrap else self._width + 8, self._nrows))
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
            self.call_after_refresh(self._stick)
        self.refresh()
        return True

    # -- wrap ----------------------------------------------------------------------------
    def _shown_abs(self, after: int) -> Sequence[int]:
        """Absolute numbers of the lines shown (filter applied) after line `after`."""
        first = self._first
        if self.filtered:
            return self._frows[bisect_left(self._frows, after + 1, self._fhead) :]
        return range(max(first, after + 1), self._count)

    def _rewrap_tail(self) -> None:
        """Rows for the lines added since the last call; rows of lines dropped from the front go."""
        room = max(8, self.view_size.width - GUTTER)
        if room != self._wroom:
            self._wroom, self._wrows, self._wstart, self._wupto = room, [], [], -1
        first = self._first
        if self._wrows and self._wrows[0] < first:
            k = bisect_left(self._wrows, first)
            del self._wrows[:k]
            del self._wstart[:k]
        for a in self._shown_abs(max(self._wupto, first - 1)):
            n = min(len(self._buf[self._head + a - first]), MAX_WIDTH)
            for j in range(max(1, math.ceil(n / room))):
                self._wrows.append(a)
                self._wstart.append(j * room)
        self._wupto = self._count - 1

    def watch_wrap(self) -> None:
        self.set_class(self.wrap, "-wrap")
        self._wrows, self._wstart, self._wupto, self._wroom = [], [], -1, 0
        self.pull(force=True)

    def on_resize(self) -> None:
        if self.wrap and max(8, self.view_size.width - GUTTER) != self._wroom:
            self._wroom = 0
            self.pull(force=True)

    def _rebuild(self, lines: Sequence[str], count: int) -> None:
        self._wrows, self._wstart, self._wupto = [], [], -1
        self._src = lines
        self._buf, self._head, self._count = list(lines), 0, count
        self._frows, self._fhead, self._hits, self._width, self._cursor = [], 0, [], 0, None
        self._index(self._buf, count - len(self._buf))

    def _append(self, new: list[str], count: int, held: int) -> None:
        base = self._count
        self._buf.extend(new)
        self._count = count
        self._index(new, base)
        drop = len(self._buf) - self._head - held  # what the source let go from the front
        if drop > 0:
            self._head += drop
            first = self._first
            if self._head > 4096 and self._head * 2 > len(self._buf):
                del self._buf[: self._head]
                self._head = 0
            if self.filtered:
                self._fhead = bisect_left(self._frows, first, self._fhead)
                if self._fhead > 4096 and self._fhead * 2 > len(self._frows):
                    del self._frows[: self._fhead]
                    self._fhead = 0
            if self._hits and self._hits[0] < first:
                gone = bisect_left(self._hits, first)
                del self._hits[:gone]
                self.current = max(-1, self.current - gone) if self.current >= 0 else -1
            if self._cursor is not None and self._cursor < first:
                self._cursor = None

    def _index(self, new: Sequence[str], base: int) -> None:
        """Width, filter rows and search hits of lines `new`, the first of which is absolute line `base`."""
        for x in new:
            n = len(x)
            if n > self._width:
                self._width = min(n, MAX_WIDTH)
        kept = filter_rows(new) if self.filtered else range(len(new))
        if self.filtered:
            self._frows.extend(base + i for i in kept)
        if self.query_text:
            q = self.query_text.lower()
            self._hits.extend(base + i for i in kept if q in new[i].lower())

    def _stick(self) -> None:
        """Follow after layout too (the first batch arrives before the view knows its height)."""
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def on_mount(self) -> None:
        use_cached_bars(self)
        # shown from the first layout on (overflow: scroll), so that layout does not ask for a second one
        self.vertical_scrollbar.display = True
        self.horizontal_scrollbar.display = not self.wrap

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
        q = text.lower()
        first = self._first
        self._hits = [first + i for i, x in enumerate(self.lines) if q and q in x.lower()]
        if self.filtered:
            kept = set(self._frows[self._fhead :])
            self._hits = [a for a in self._hits if a in kept]
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
        ctx = self.view_size.height // 3 if context is None else context
        self.cursor_row = row
        self.scroll_to(y=max(0, row - ctx), animate=False, immediate=True)
        self.follow = False
        self.refresh()

    def show_line(self, index: int) -> None:
        """Scrolls to a line index of the buffer (leaving the filter if that line is filtered out)."""
        a = self._first + index
        if self._row_of_abs(a) is None and self.filtered:
            self.filtered = False
        row = self._row_of_abs(a)
        if row is not None:
            self.show_row(row, context=2)

    def _line_of_row(self, row: int) -> str:
        return self._buf[self._head + self._abs_of_row(row) - self._first]

    def visible_lines(self) -> list[str]:
        """The lines on screen now (filter applied), cleaned, for copy."""
        top = int(self.scroll_y)
        rows = range(top, min(self._nrows, top + self.view_size.height))
        return [fmt.clean(self._line_of_row(r)) for r in rows if not self.wrap or self._wstart[r] == 0 or r == top]

    def shown_lines(self) -> list[str]:
        """Every line the view shows with the current filter, for save."""
        return [fmt.clean(self._line_of_row(r)) for r in range(self._nrows) if not self.wrap or self._wstart[r] == 0]

    # -- drawing -------------------------------------------------------------------------
    def _style(self, name: str) -> Style:
        if name not in self._styles:
            self._styles[name] = self.get_component_rich_style(name)
        return self._styles[name]

    def _new_frame(self) -> tuple[Style, Style, int, int, int]:
        """(base style, gutter style, width, scroll x, scroll y), read afresh: the component styles too, so a
        theme or class change anywhere above is honoured."""
        self._styles.clear()
        base = self.rich_style
        return base, base + self._style("logview--gutter"), self.size.width, *self.scroll_offset

    def render_lines(self, crop: Region) -> list[Strip]:
        """Styles, size and scroll offset are read once per render, not once per row (`rich_style` walks every
        ancestor's styles; per row it was over half of a log frame's cost).

        A bare view (no border, outline, padding, tint, hatch or opacity: the console's) gives its rows
        straight to the frame, through the app's line filters: Textual's per-line box styling would change
        nothing in them, and its line cache cannot help a view whose every row changes with each pull of a
        flooding log. That was over a third of the view's share of a frame (benchmarks/bench_keypress.py).
        """
        self._frame = self._new_frame()
        try:
            if not self._bare():
                return super().render_lines(crop)
            shown = rows_uncovered(self)
            if shown is None:
                strips = [self.render_line(y) for y in crop.line_range]
            else:  # rows under the help sheet: never seen, so not drawn (they are when it closes)
                blank = Strip.blank(self._frame[2], self._frame[0])
                strips = [self.render_line(y) if y < shown else blank for y in crop.line_range]
            filters = self.get_line_filters()
            if filters:
                background = self.background_colors[1]
                for f in filters:
                    strips = [strip.apply_filter(f, background) for strip in strips]
            x1, x2 = crop.column_span
            if (x1, x2) != (0, self._frame[2]):
                strips = [strip.crop(x1, x2) for strip in strips]
            return strips
        finally:
            self._frame = None

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False) -> LogView:
        """A whole repaint (each pull) covers only the rows above an open help sheet: see `rows_uncovered`."""
        if not regions and repaint and not layout and not recompose:
            shown = rows_uncovered(self)
            if shown == 0:
                return self  # wholly under the sheet
            if shown is not None:
                regions = (Region(0, 0, self.size.width, shown),)
        super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
        return self

    def _bare(self) -> bool:
        st = self.styles
        return (
            not any(edge for edge, _ in st.border)
            and not any(edge for edge, _ in st.outline)
            and not any(st.padding)
            and not st.tint.a
            and st.text_opacity == 1.0
            and self.opacity == 1.0
            and st.hatch in (None, "none")
        )

    def render_line(self, y: int) -> Strip:
        # outside render_lines (Textual's own paths, a test): a frame of its own
        base, gutter, width, scroll_x, scroll_y = self._frame or self._new_frame()
        row = scroll_y + y
        if row >= self._nrows:
            return Strip.blank(width, base)
        a = self._abs_of_row(row)
        raw = self._buf[self._head + a - self._first]
        mark = "▶" if a == self._cursor else " "
        room = max(0, width - GUTTER)
        if self.wrap:
            start = self._wstart[row]
            number = f"{a + 1:>6}{mark}" if start == 0 else "     ↪ "
            text = fmt.clean(raw[: (start + room) * 2 + 256])[start : start + room]
        else:
            number = f"{a + 1:>6}{mark}"
            text = fmt.clean(raw[: (scroll_x + room) * 2 + 256])[scroll_x : scroll_x + room]
        lvl = level_of(raw)
        style = self._level_style(base, lvl) if lvl else base
        segs = [Segment(number, gutter)]
        segs += self._highlight(text, style, row)
        cells = cell_len(number) + cell_len(text)
        if cells > width:
            return Strip(segs, cells).crop(0, width)
        if cells < width:  # padded in the same strip: a second one (crop_extend) was a third of a row's cost
            segs.append(Segment(" " * (width - cells), base))
        return Strip(segs, width)

    def _level_style(self, base: Style, lvl: str) -> Style:
        key = f"base+{lvl}"
        if key not in self._styles:
            self._styles[key] = base + self._style(f"logview--{lvl}")
        return self._styles[key]

    def _highlight(self, text: str, style: Style, row: int) -> list[Segment]:
        q = self.query_text.lower()
        if not q or q not in text.lower():
            return [Segment(text, style)]
        hl = self._style(
            "logview--current"
            if 0 <= self.current < len(self._hits) and self._hits[self.current] == self._abs_of_row(row)
            else "logview--match"
        )
        out: list[Segment] = []
        low = text.lower()
        pos = 0
        while True:
            j = low.find(q, pos)
            if j < 0:
                break
            if j > pos:
                out.append(Segment(text[pos:j], style))
            out.append(Segment(text[j : j + len(q)], style + hl))
            pos = j + len(q)
        if pos < len(text):
            out.append(Segment(text[pos:], style))
        return out


class _Tail(Sequence[str]):
    """`buf[head:]` without copying it: the lines a LogView holds, indexed from its first."""

    __slots__ = ("_buf", "_head")

    def __init__(self, buf: list[str], head: int) -> None:
        self._buf, self._head = buf, head

    def __len__(self) -> int:
        return len(self._buf) - self._head

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        n = len(self)
        if isinstance(i, slice):
            return [self._buf[self._head + j] for j in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._buf[self._head + i]
