"""HostBand: one host's header line (connection, data age, GPU count) above a grid of its GpuPanes."""

from __future__ import annotations

import math
from collections.abc import Container as WidgetSet

from textual.app import ComposeResult
from textual.containers import Container, Vertical
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Static

from console.ui import format as fmt
from console.ui.visibility import CatchUpWhenShown, update_row, visible_widgets
from console.ui.widgets.gpu_pane import GpuPane, colours
from console.ui.widgets.router_band import router_bands

PANE_MIN_WIDTH = 36
LIVE_S = 2.5
"""GPU figures younger than this are called live (telemetry arrives every second)."""


def grid_columns(width: int, n: int) -> int:
    """Columns for n panes in `width` cells: as many as fit, then balanced rows (8 GPUs -> 4+4)."""
    if n <= 0:
        return 1
    most = max(1, min(n, width // PANE_MIN_WIDTH))
    rows = math.ceil(n / most)
    return math.ceil(n / rows)


def pane_height(screen_rows: int) -> int:
    """Compact panes under 30 rows (80×24 fits two hosts), tall ones with a graph from 44."""
    return 7 if screen_rows < 30 else 11 if screen_rows >= 44 else 8


class HostHeader(CatchUpWhenShown, Static):
    """`● ct129  up · 2 GPUs · 1 serving · 1 crashed · live` — the age instead once data is 2.5 s old, greyed when stale."""

    def __init__(self, host: str) -> None:
        super().__init__(markup=False)
        self.host = host

    def sync(self) -> None:
        self.behind = False
        app = self.app
        h = app.state.host(self.host)  # type: ignore[attr-defined]
        now = app.now()  # type: ignore[attr-defined]
        c = colours(self)
        icon, colour = {"up": ("●", c["phase-ready"]), "connecting": ("◌", c["phase-starting"]),
                        "down": ("✖", c["host-down"])}[h.conn]
        parts: list[tuple[str, str] | str] = [(f"{icon} ", colour), (fmt.clean(self.host, 40), "bold"), "  ",
                                              (h.conn, colour)]
        if h.conn == "down" and h.since is not None:
            parts.append((f" for {fmt.age(max(0.0, now - h.since))}", colour))
        if h.conn == "down" and h.last_error:
            parts.append((f": {fmt.clean(h.last_error, 80)}", colour))
        if h.conn == "connecting" and h.attempt > 1:
            parts.append(f" (attempt {h.attempt})")
            if h.last_error:  # each retry flips the host to 'connecting': keep saying why it fails
                parts.append((f": last error {fmt.clean(h.last_error, 80)}", c["dim"]))
        n = len(h.gpus)
        parts.append(f" · {n} GPU{'s' if n != 1 else ''}")
        servers = app.state.servers_on(self.host)  # type: ignore[attr-defined]
        if servers:
            parts.append(f" · {fmt.server_counts(s.phase for s in servers)}")
        a = h.age_s(now)
        if h.stale(now):
            parts.append((f" · stale {fmt.age(a)}" if a is not None else " · no data yet", c["stale"]))
        elif a is not None:  # at 1 Hz the age is always 0-1 s: a flickering number says less than "live"
            parts.append((" · live" if a < LIVE_S else f" · data {fmt.age(a)}", c["dim"]))
        if h.telemetry_error:
            parts.append((f" · {fmt.clean(h.telemetry_error, 60)}", c["gpu-warm"]))
        update_row(self, Content.assemble(*parts))


class HostBand(Vertical):
    """A host and its GPUs; the grid re-flows on resize and when GPUs appear."""

    DEFAULT_CSS = """
    HostBand { height: auto; }
    HostBand HostHeader { height: 1; padding: 0 1; background: $panel; }
    HostBand .gpus { layout: grid; grid-size: 2; grid-rows: auto; height: auto; grid-gutter: 0 0; }
    HostBand .nogpu { height: 1; padding: 0 2; color: $text-muted; }
    """

    def __init__(self, host: str) -> None:
        super().__init__(id=None)
        self.host = host
        self._indices: tuple[int, ...] = ()
        self._rows = ""
        self._header = HostHeader(host)
        self._grid = Container(classes="gpus")
        self._nogpu = Static("waiting for nvidia-smi…", classes="nogpu", markup=False)
        self._panes: list[GpuPane] = []
        """Kept here: a DOM query per sync for 8 hosts × 4 syncs/s showed up in the profile."""

    def compose(self) -> ComposeResult:
        yield self._header
        yield from router_bands(self.app, self.host)  # issue 15: SGLang routers of this host
        yield self._grid
        yield self._nogpu

    def panes(self) -> list[GpuPane]:
        return list(self._panes)

    def on_mount(self) -> None:
        self.sync()

    def sync(self, visible: WidgetSet[Widget] | None = None) -> None:
        if not self.children:
            return  # not composed yet: on_mount syncs
        h = self.app.state.host(self.host)  # type: ignore[attr-defined]
        indices = tuple(sorted(h.gpus))
        if indices != self._indices:
            self._indices = indices
            for p in self._panes:
                p.remove()
            self._panes = [GpuPane(self.host, i) for i in indices]
            self._grid.mount_all(self._panes)
        self._nogpu.display = not indices
        if not indices:
            why = {"down": f"no data: host down ({fmt.clean(h.last_error or '?', 100)})",
                   "connecting": "connecting…"}.get(h.conn, "waiting for nvidia-smi…")
            if h.telemetry_error:
                why = f"no GPU data: {fmt.clean(h.telemetry_error, 200)}"
            update_row(self._nogpu, Content(why))
        self.reflow()
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

    def reflow(self) -> None:
        if not self.children:
            return  # not composed yet: on_mount syncs
        grid = self._grid
        widest = max((len(h.gpus) for h in self.app.state.hosts.values()), default=1)  # type: ignore[attr-defined]
        cols = grid_columns(self.app.size.width, max(widest, len(self._indices)))
        if grid.styles.grid_size_columns != cols:
            grid.styles.grid_size_columns = cols
        rows = str(pane_height(self.app.size.height))
        if self._rows != rows:
            self._rows = rows
            grid.styles.grid_rows = rows
