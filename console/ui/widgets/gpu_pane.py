"""GpuPane: one GPU's box on the fleet screen. It draws a PaneView (console/ui/views.py) and redraws
only when the next view differs; `draw_pane` places the view's words in the rows the pane has."""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from weakref import WeakKeyDictionary

from textual.app import App
from textual.color import Color
from textual.content import Content
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.style import Style
from textual.widget import Widget

from console.ui import format as fmt
from console.ui.console_app import console_app
from console.ui.content_segments import SpanStyles, line_segments
from console.ui.strip_offsets import with_offsets
from console.ui.textual_private import KeysToScreen, StillStrips, repaint_rows, use_box_rows
from console.ui.themes import SEMANTIC_DEFAULTS
from console.ui.views import PaneView, Series, Span, pane_view
from console.ui.visibility import CatchUpWhenShown, content_width, visible_widgets

TONES = {
    "ready": "phase-ready",
    "serving": "phase-serving",
    "starting": "phase-starting",
    "crashed": "phase-crashed",
    "stopped": "phase-stopped",
    "external": "external",
    "hot": "gpu-hot",
    "warm": "gpu-warm",
    "stale": "stale",
    "down": "host-down",
    "vram": "vram-bar",
    "util": "util-bar",
    "dim": "dim",
    "fg": "fg",
}
"""View tones (console/ui/views.py) to theme variables."""
GRAPH_MAX_ROWS = 12
_RUNS = re.compile(r" +|[^ ]+")
_OPEN = object()  # GpuPane._pass: a render under way, its shared values not looked up yet
GRAPH_MIN_ROWS = 7
"""Inner rows from which a pane can hold history graphs (below, its view carries none)."""


_cache: WeakKeyDictionary[App[Any], tuple[dict[str, str], dict[str, str]]] = WeakKeyDictionary()
"""Per app: its theme variables as last seen, and the colours made from them."""


def colours(widget: Widget) -> dict[str, str]:
    """The theme's semantic colours, with defaults before the first CSS pass (cached per theme)."""
    try:
        app = widget.app
        tv = app.theme_variables
    except Exception:
        return _colours({})
    cached = _cache.get(app)
    if cached is not None and cached[0] is tv:
        return cached[1]
    out = _colours(tv)
    _cache[app] = (tv, out)  # a theme change installs a new dict
    return out


def _colours(tv: dict[str, str]) -> dict[str, str]:
    fg, bg = tv.get("foreground", "#D0D0D0"), tv.get("background", "#121417")
    try:
        dim = Color.parse(bg).blend(Color.parse(fg), 0.55).hex
    except Exception:
        dim = "#808080"
    return {k: tv.get(k, v) for k, v in SEMANTIC_DEFAULTS.items()} | {"dim": dim, "fg": fg}


def style_of(tone: str, c: dict[str, str]) -> str:
    """`bold crashed` -> `bold #FF5F5F`: each word a tone name or a text style."""
    return " ".join(c.get(TONES.get(w, ""), w) if w in TONES else w for w in tone.split())


def spans(parts: tuple[Span, ...], c: dict[str, str]) -> Content:
    return Content.assemble(*((t, style_of(tone, c)) if tone else t for t, tone in parts))


def phase_style(phase: str, c: dict[str, str]) -> str:
    """Colour of a phase word (server screen, bench)."""
    from console.ui.views import phase_tone

    return style_of(phase_tone(phase), c)


def _bar(frac: float | None, width: int, tone: str, c: dict[str, str]) -> Content:
    full, empty = fmt.bar(frac, width)
    return Content.assemble((full, style_of(tone, c)), (empty, c["dim"]))


def _fit(content: Content, w: int) -> Content:
    return content if content.cell_length <= w else content.truncate(w, ellipsis=True)


def draw_pane(v: PaneView, w: int, rows: int, c: dict[str, str]) -> list[Content]:
    """The pane's lines for `w` × `rows` cells: telemetry, the server, then history graphs and log tail."""
    w = max(10, w)
    nums = spans(v.vram, c)
    lines = [_bar(v.vram_frac, max(3, w - nums.cell_length - 1), "vram", c) + " " + nums]
    util = spans(v.util, c)
    ubar = max(3, min(20, w - util.cell_length - 6))
    if v.util_pct is None:  # [N/A]: no bar, an empty one would read as 0 %
        lines.append(Content("util ") + util)
    else:
        lines.append(Content("util ") + _bar(v.util_pct / 100, ubar, "util", c) + util)
    s = v.server
    compact = rows <= 5
    series: list[Series] = []
    tail: tuple[str, ...] = ()
    if s is None:
        lines.append(Content.styled(f"↳ {v.group_of}", c["dim"]) if v.group_of else spans(v.occupant, c))
    else:
        head = Content.styled(s.label, c["external"] if not s.managed else "bold")
        status = spans(s.status, c)
        if s.progress is not None and w - status.cell_length - 1 >= 4:
            status = status + " " + _bar(s.progress, w - status.cell_length - 1, s.tone, c)
        tail = s.log_tail
        if s.ended:
            if compact or head.cell_length + 2 + status.cell_length <= w:
                lines.append(head + "  " + status)
            else:
                lines += [head, status]
            details = [spans(d, c) for d in s.detail]
            lines += details[: max(1, rows - len(lines))] if compact else details
        elif s.phase in fmt.STARTING:
            lines += [head, status, *(spans(d, c) for d in s.detail)]
        else:
            tok_style = "bold" if s.tok_series else c["dim"]
            tok = Content.styled(s.tok_s.rjust(11) if s.tok_series else s.tok_s, tok_style)
            if compact:
                lines += [head, status + "  " + s.load_short]
            else:
                lines += [head, status, Content(s.load)]
            if s.spec and not compact:
                lines.append(spans(s.spec, c))
            elif s.spec:  # one row for both, `310 tok/s · DFLASH accept 3.30`, then what room is left for a sparkline
                first, *rest = s.spec
                short = first[0].removeprefix("spec ").replace(" · accept", " accept", 1)
                tok = Content.styled(s.tok_s, tok_style) + " · " + spans(((short, first[1]), *rest), c)
            if s.tok_series is not None:
                series.append(s.tok_series)
                if s.accept_series is not None:
                    series.append(s.accept_series)
                room = w - tok.cell_length - 1
                if rows - len(lines) < 4 and room > 0:  # no room for a graph: an inline sparkline
                    tok = (
                        tok
                        + " "
                        + Content.styled(
                            fmt.sparkline(s.tok_series.values, room, top=s.tok_series.top), c["phase-serving"]
                        )
                    )
                    series.clear()
            lines.append(tok)
    series += [x for x in (v.util_series, v.vram_series) if x is not None]
    extra = rows - len(lines)
    if extra >= 3 and series:
        busy = s is not None and (s.ended or s.phase in fmt.STARTING)  # its log says more than its graphs
        gh = max(2, min(GRAPH_MAX_ROWS, (extra - 1) // (3 if busy else 2) if tail else extra - 1))
        logs = min(len(tail), extra - 1 - gh)
        gh = min(GRAPH_MAX_ROWS, extra - 1 - logs)
        lines += graphs(series, w, gh, c)
        lines += [Content.styled(x, c["dim"]) for x in tail[-logs:]] if logs > 0 else []
    elif extra > 0 and tail:
        lines += [Content.styled(x, c["dim"]) for x in tail[-extra:]]
    out = [_fit(x, w) for x in lines[:rows]]
    if v.stale:
        out = [x.stylize(c["stale"]) for x in out]
    return out


def graphs(series: list[Series], w: int, height: int, c: dict[str, str]) -> list[Content]:
    """History graphs side by side, each with its fixed zero-based scale and time span above it."""
    k = max(1, min(len(series), (w + 1) // 17))
    cw = (w - (k - 1)) // k
    cols = [_graph_column(sr, cw, height, style_of(sr.tone, c), c["dim"]) for sr in series[:k]]
    if k == 1:
        return list(cols[0])
    return [Content(" ").join(row) for row in zip(*cols, strict=True)]


@lru_cache(maxsize=512)
def _graph_column(sr: Series, cw: int, height: int, tone: str, dim: str) -> tuple[Content, ...]:
    """One graph `cw` wide: its scale line, then `height` rows, the last with the zero line. Kept by what it shows:
    a pane is drawn again when any figure in it moves (a power reading does each second), and most of its graphs
    have not (an idle GPU's flat lines, a VRAM graph between loads); drawing them was a third of a fleet sync with
    64 panes."""
    label = sr.scale_text()
    span = f" · {fmt.age(sr.interval_s * min(cw, len(sr.values)))}" if sr.interval_s > 0 else ""
    if len(label) + len(span) <= cw:  # the time span only whole: a cut '· 1' reads as a wrong figure
        label += span
    rows = fmt.sparkline_rows(sr.values[-cw:], cw, height, top=sr.top)
    out = [Content.styled(label[:cw].ljust(cw), dim)]
    out += [Content.styled(row, tone) for row in rows[:-1]]
    if rows:  # the zero line, so an idle GPU's graph reads as zero, not as missing
        out.append(
            Content.assemble(
                *((run, tone) if run[0] != " " else ("▁" * len(run), dim) for run in _RUNS.findall(rows[-1]))
            )
        )
    return tuple(out)


class GpuPane(KeysToScreen, CatchUpWhenShown, StillStrips, Widget, can_focus=True):
    """One GPU: VRAM and util bars, temperature/power, its server, history graphs and log tail."""

    DEFAULT_CSS = """
    GpuPane { height: 1fr; border: round $pane-free; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    GpuPane.-free { border-title-color: $foreground; }
    GpuPane.-ready { border: round $phase-ready; }
    GpuPane.-starting { border: round $phase-starting; }
    GpuPane.-crashed { border: heavy $phase-crashed; }
    GpuPane.-stopped { border: round $phase-stopped; }
    GpuPane.-stale { border: round $stale; }
    GpuPane:focus { border: double $accent; background: $boost; border-title-style: bold reverse;
                    border-subtitle-style: bold reverse; }
    GpuPane.-ready:focus { border: double $phase-ready; }
    GpuPane.-starting:focus { border: double $phase-starting; }
    GpuPane.-crashed:focus { border: double $phase-crashed; }
    GpuPane.-stopped:focus { border: double $phase-stopped; }
    GpuPane.-stale:focus { border: double $stale; }
    GpuPane.-marked { background: $primary 15%; }
    """

    @dataclass
    class Selected(Message):
        """The pane gained focus: the fleet screen's selection follows it."""

        host: str
        gpu: int

    def __init__(self, host: str, gpu: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        use_box_rows(self)  # its content rows between the borders without Textual's per-row box styling
        self.host = host
        self.gpu = gpu
        self.marked = False
        self.view: PaneView | None = None
        """The view drawn last; a sync that builds an equal one draws nothing."""
        self._drawn: tuple[tuple[int, int, int], list[Content]] = ((0, 0, 0), [])
        """(width, rows, theme colours' id) and the lines `draw_pane` made of the view for them."""
        self.behind = False
        """State changed while the pane was off screen; it has not been redrawn since."""
        self._strips: dict[int, Strip] = {}
        """Rendered rows of `_drawn`: a telemetry tick re-renders the row it changed, not the whole pane."""
        self._strips_key: tuple[int, Style] | None = None
        self._pass: Any = None
        """While Textual renders the pane's rows (`render_lines`): what they share, or `_OPEN` until the first."""
        self._span_styles: SpanStyles = {}
        """The Rich style of each span style in the pane's lines, over the pane's style now (`line_segments`)."""

    def on_focus(self) -> None:
        self._title(True)
        self.post_message(self.Selected(self.host, self.gpu))

    def on_resize(self) -> None:
        self.sync()  # its room sets how much history and log its view carries

    def on_blur(self) -> None:
        self._title(False)  # during Blur `has_focus` can still say True

    def sync(self, visible: Container[Widget] | None = None) -> None:
        """Builds the pane's view; draws it when it differs from the last. Off screen only notes it is behind."""
        if self not in (visible_widgets(self) if visible is None else visible):
            self.behind = True  # caught up on show/resize, or by HostList.catch_up after a scroll
            return
        self.behind = False
        app = console_app(self)
        w, rows = content_width(self), max(0, self.outer_size.height - self.styles.gutter.height)
        view = pane_view(
            app.state,
            self.host,
            self.gpu,
            app.now(),
            marked=self.marked,
            points=max(1, w),
            graphs=rows >= GRAPH_MIN_ROWS,
            tail=max(0, rows - 5),
        )
        old, self.view = self.view, view
        if view == old:
            return
        restyled = old is None or (old.kind, old.stale, old.marked) != (view.kind, view.stale, view.marked)
        if restyled:
            for cls in ("free", "ready", "starting", "crashed", "stopped"):
                self.set_class(cls == view.kind, f"-{cls}")
            self.set_class(view.stale and view.kind != "crashed", "-stale")
            self.set_class(view.marked, "-marked")
        if old is None or (old.title, old.subtitle) != (view.title, view.subtitle):
            self._title()
        c = colours(self)
        key, before = self._drawn
        lines = draw_pane(view, w, rows, c)
        self._drawn = ((w, rows, id(c)), lines)
        if restyled or key != (w, rows, id(c)) or len(before) != len(lines):
            self._strips.clear()
            self.refresh()
            return
        # only the rows whose text or styles changed: Textual repaints (and writes to the terminal) every cell
        # of a dirty region, and a telemetry tick changes one or two rows of a pane
        dirty = [
            Region(0, y, w, 1)
            for y, (a, b) in enumerate(zip(before, lines, strict=True))
            if a.plain != b.plain or a.spans != b.spans
        ]
        for r in dirty:
            self._strips.pop(r.y, None)
        if dirty:
            repaint_rows(self, dirty)

    def _title(self, focused: bool | None = None) -> None:
        v = self.view
        if v is None:
            return
        self.border_title = Content(("▶ " if (self.has_focus if focused is None else focused) else "") + v.title)
        self.border_subtitle = Content(v.subtitle) if v.subtitle else None

    def _lines(self, view: PaneView) -> list[Content]:
        """The rows `draw_pane` made of the view for the pane's size and theme now (drawn again when those moved)."""
        w, rows = content_width(self), max(1, self.outer_size.height - self.styles.gutter.height)
        c = colours(self)
        key, lines = self._drawn
        if key != (w, rows, id(c)):
            lines = draw_pane(view, w, rows, c)
            self._drawn = ((w, rows, id(c)), lines)
            self._strips.clear()
        return lines

    def render(self) -> Content:
        return Content("") if self.view is None else Content("\n").join(self._lines(self.view))

    def render_lines(self, crop: Region) -> list[Strip]:
        self._pass = _OPEN  # what every row of this render shares is looked up at its first uncached row
        try:
            return super().render_lines(crop)
        finally:
            self._pass = None

    def _row_pass(self) -> tuple[int, Style, list[Content]] | None:
        """(width, style, lines) for rendering rows now; None when Textual renders them (no view yet, or text
        selected in the pane)."""
        if self.view is None or self.text_selection is not None:
            return None
        width, style = self.size.width, self.visual_style
        lines = self._lines(self.view)
        if self._strips_key != (width, style):  # resized, focused, marked: every row again
            self._strips_key = (width, style)
            self._strips.clear()
            self._span_styles.clear()
        return width, style, lines

    def render_line(self, y: int) -> Strip:
        """Textual's line API: one row from the per-row cache (Widget.render_line renders every row of
        `render()` whenever any row is dirty)."""
        rows = self._pass
        if rows is _OPEN:
            rows = self._pass = self._row_pass()  # a frame renders ~50 rows: their size and selection once
        elif rows is None:
            rows = self._row_pass()  # a row asked for outside a render
        if rows is None:
            return super().render_line(y)
        strip = self._strips.get(y)
        if strip is None:
            # Content straight to segments (the lines are fitted to the width already, and a pane has no links):
            # Visual.to_strips took 135 us a row against 50 us, and a telemetry tick redraws ~50 rows a frame
            width, style, lines = rows
            strip = (
                with_offsets(line_segments(lines[y], style, self._span_styles), y, width)
                if y < len(lines)
                else Strip.blank(width, style.rich_style).apply_offsets(0, y)
            )
            self._strips[y] = strip
        return strip
