"""HostBand: one host's header line (connection, data age, GPU count) above a grid of its GpuPanes."""

from __future__ import annotations

from collections.abc import Container as WidgetSet

from textual.app import ComposeResult
from textual.containers import Container, Vertical
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Static

from console.ui.console_app import console_app
from console.ui.layout import BandPlace
from console.ui.textual_private import StillStrips
from console.ui.views import HostView, host_view
from console.ui.visibility import CatchUpWhenShown, update_row, visible_widgets
from console.ui.widgets.gpu_pane import GpuPane, colours, spans
from console.ui.widgets.router_band import router_bands


class HostHeader(CatchUpWhenShown, StillStrips, Static):
    """`● ct129  up · 2 GPUs · 1 serving · 1 crashed · live` — the age instead once data is 2.5 s old."""

    def __init__(self, host: str) -> None:
        super().__init__(markup=False)
        self.host = host
        self.view: HostView | None = None

    def sync(self) -> None:
        self.behind = False
        app = console_app(self)
        view = host_view(app.state, self.host, app.now())
        if view != self.view:
            self.view = view
            update_row(self, spans(view.header, colours(self)))


class PaneGrid(StillStrips, Container):
    """The grid of a host's GPU panes."""


class HostBand(StillStrips, Vertical):
    """A host and its GPUs; its place in the fleet layout sets its grid's columns and row height."""

    DEFAULT_CSS = """
    HostBand { height: auto; width: 1fr; }
    HostBand HostHeader { height: 1; padding: 0 1; background: $panel; }
    HostBand .gpus { layout: grid; grid-size: 2; grid-rows: 8; height: auto; grid-gutter: 0 0; }
    HostBand .nogpu { height: auto; padding: 0 2; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, host: str) -> None:
        super().__init__(id=None)
        self.host = host
        self._indices: tuple[int, ...] = ()
        self._place: tuple[int, int, int] = (0, 0, 0)
        self._header = HostHeader(host)
        self._grid = PaneGrid(classes="gpus")
        self._nogpu = Static("waiting for nvidia-smi…", classes="nogpu", markup=False)
        self._nogpu_rows = 1
        self._panes: list[GpuPane] = []
        """Kept here: a DOM query per sync for 8 hosts × 4 syncs/s showed up in the profile."""
        self.marked: set[int] = set()
        self.shown: tuple[int, ...] | None = None
        """GPUs the fleet filter lets through; None: all."""

    def compose(self) -> ComposeResult:
        yield self._header
        yield from router_bands(self.app, self.host)  # issue 15: SGLang routers of this host
        yield self._grid
        yield self._nogpu

    def panes(self) -> list[GpuPane]:
        return list(self._panes)

    def on_mount(self) -> None:
        self.sync()

    def place(self, where: BandPlace, pane_height: int) -> None:
        """Grid columns from the layout; the row height is the fleet's pane height."""
        key = (where.columns, where.rows, pane_height)
        if key != self._place:
            self._place = key
            self._grid.styles.grid_size_columns = where.columns
            self._grid.styles.grid_rows = str(pane_height)
            self._grid.styles.height = where.rows * pane_height  # 'auto' over 1fr panes came out as the screen
            self.styles.width = f"{max(1, where.columns)}fr"

    def sync(self, visible: WidgetSet[Widget] | None = None) -> None:
        if not self.children:
            return  # not composed yet: on_mount syncs
        view = host_view(console_app(self).state, self.host, console_app(self).now())
        if view.gpus != self._indices:
            self._indices = view.gpus
            for p in self._panes:
                p.remove()
            self._panes = [GpuPane(self.host, i) for i in view.gpus]
            for p in self._panes:
                p.marked = p.gpu in self.marked
            self._grid.mount_all(self._panes)
        for p in self._panes:
            want = self.shown is None or p.gpu in self.shown
            if p.display != want:
                p.display = want
        self._nogpu.display = not view.gpus or bool(view.unplaced)
        if self._nogpu.display:
            c = colours(self)
            rows = ([Content(view.empty_text)] if not view.gpus else []) + [spans(u, c) for u in view.unplaced]
            text = Content("\n").join(rows)
            update_row(self._nogpu, text, layout=len(rows) != self._nogpu_rows)
            self._nogpu_rows = len(rows)
        vis = visible_widgets(self) if visible is None else visible
        if self._header in vis:
            self._header.sync()
        else:
            self._header.behind = True
        for p in self._panes:
            p.sync(vis)

    def catch_up(self, visible: WidgetSet[Widget]) -> None:
        """Sync what is on screen now but was skipped while off it (after a scroll)."""
        if self._header.behind and self._header in visible:
            self._header.sync()
        for p in self._panes:
            if p.behind and p in visible:
                p.sync(visible)
