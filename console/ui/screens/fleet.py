"""FleetScreen: every host as a band of GPU panes; the selection drives launch, relaunch, stop, probe and chat."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

from console.fleet.state import ServerState
from console.ui import format as fmt
from console.ui.actions import MUTATING
from console.ui.bindings import refresh_bindings_if_changed
from console.ui.visibility import update_row, visible_widgets
from console.ui.widgets.activity import ActivityLog
from console.ui.widgets.gpu_pane import GpuPane
from console.ui.widgets.host_band import HostBand
from console.ui.widgets.router_band import RouterBand


class HostList(VerticalScroll, can_focus=False, inherit_bindings=False):
    """The scrolling column of host bands; arrow keys belong to the pane selection, not to scrolling."""

    DEFAULT_CSS = "HostList { height: auto; max-height: 100%; }"

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):  # panes that scroll into view catch up on what they missed
            self.call_after_refresh(self.catch_up)

    def catch_up(self) -> None:
        visible = visible_widgets(self)
        for band in self.query(HostBand):
            band.catch_up(visible)


SERVER_ACTIONS = {"relaunch", "stop", "probe", "details", "bench"}


class ServerKeys:
    """Bindings shared by screens that have a current server (fleet selection, server screen)."""

    SERVER_BINDINGS = [
        Binding("r", "relaunch", "Relaunch", id="relaunch", tooltip="Relaunch this server's preset."),
        Binding("s", "stop", "Stop", id="stop", tooltip="Stop the server (asks first)."),
        Binding("p", "probe", "Probe", id="probe", tooltip="Health, model info and a short generation."),
        Binding("c", "chat", "Chat", id="chat", tooltip="Open the chat pane on this server."),
        Binding("b", "bench", "Bench", id="bench", show=False, tooltip="Concurrency sweep (when installed)."),
    ]

    def current_server(self) -> ServerState | None:
        raise NotImplementedError

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        app = self.app  # type: ignore[attr-defined]
        if app.read_only and action in MUTATING:
            return False
        if action == "bench" and app.bench_runner is None:
            return False
        if action in SERVER_ACTIONS:
            srv = self.current_server()
            if srv is None:
                return None
            if action == "stop" and not srv.alive:
                return None
            if action == "relaunch" and not srv.meta.preset:
                return None
        return True

    def action_relaunch(self) -> None:
        srv = self.current_server()
        self.app.request_relaunch(srv.name if srv else None)  # type: ignore[attr-defined]

    def action_stop(self) -> None:
        srv = self.current_server()
        self.app.request_stop(srv.name if srv else None)  # type: ignore[attr-defined]

    def action_probe(self) -> None:
        srv = self.current_server()
        self.app.request_probe(srv.name if srv else None)  # type: ignore[attr-defined]

    def action_chat(self) -> None:
        srv = self.current_server()
        self.app.open_chat(srv.name if srv else None)  # type: ignore[attr-defined]

    def action_bench(self) -> None:
        srv = self.current_server()
        self.app.request_bench(srv.name if srv else None)  # type: ignore[attr-defined]


class FleetScreen(ServerKeys, Screen):
    """The first screen: one band per host, one pane per GPU."""

    BINDINGS = [
        Binding("l", "launch", "Launch", id="launch", tooltip="Pick a preset for the selected GPU(s)."),
        *ServerKeys.SERVER_BINDINGS,
        Binding("enter", "details", "Details", id="details", tooltip="Log, timeline and command of the server."),
        Binding("space", "mark", "Mark", id="mark", show=False, tooltip="Mark GPUs for a multi-GPU launch."),
        Binding("left,h", "move(-1, 0)", "←", id="left", show=False, tooltip="Select the GPU to the left."),
        Binding("right", "move(1, 0)", "→", id="right", show=False, tooltip="Select the GPU to the right."),
        Binding("up,k", "move(0, -1)", "↑", id="up", show=False, tooltip="Select the GPU above."),
        Binding("down,j", "move(0, 1)", "↓", id="down", show=False, tooltip="Select the GPU below."),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.selection: tuple[str, int] | None = None
        self._topbar: Static | None = None
        self._box: HostList | None = None
        self._activity: ActivityLog | None = None
        self._bands: dict[str, HostBand] = {}
        self._shape: tuple[int, ...] = ()

    def compose(self) -> ComposeResult:
        self._topbar = Static("", id="topbar", markup=False)
        self._box = HostList(id="hosts")
        self._activity = ActivityLog(self.app.activity, id="activity")  # type: ignore[attr-defined]
        yield self._topbar
        yield self._box
        yield self._activity
        yield Footer()

    def on_mount(self) -> None:
        self.sync()

    def host_names(self) -> list[str]:
        app = self.app
        names = list(app.fleet.hosts)  # type: ignore[attr-defined]
        names += [h for h in app.state.hosts if h not in names]  # type: ignore[attr-defined]
        return names

    def sync(self) -> None:
        """Adds bands for new hosts and re-syncs every band (cheap: off-screen panes wait, the rest only repaint)."""
        self.sync_hosts(None)

    def sync_hosts(self, hosts: set[str] | None) -> None:
        """Re-syncs the bands of `hosts` (None: all); the app passes the hosts that events touched."""
        if self._box is None or not self.children:
            return  # a tick before compose
        box = self._box
        new = [HostBand(h) for h in self.host_names() if h not in self._bands]
        if new:
            self._bands.update((b.host, b) for b in new)
            box.mount_all(new)
        shape = tuple(len(h.gpus) for h in self.app.state.hosts.values())  # type: ignore[attr-defined]
        if shape != self._shape:  # a host's GPU count sets every band's grid columns
            self._shape, hosts = shape, None
        visible = visible_widgets(self)
        for band in self._bands.values():
            if band not in new and (hosts is None or band.host in hosts):
                band.sync(visible)
        self._sync_topbar()
        if self._activity is not None:
            self._activity.sync()
        if self.selection is None and not isinstance(self.focused, (GpuPane, RouterBand)):  # a focused router band keeps focus
            first = next((p for b in self._bands.values() for p in b.panes()), None)
            if first is not None:
                first.focus()
        refresh_bindings_if_changed(self)

    def _sync_topbar(self) -> None:
        app = self.app
        bar = self._topbar
        if bar is None:
            return
        bar.set_class(app.size.height < 30, "-hidden")
        st = app.state  # type: ignore[attr-defined]
        gpus = sum(len(h.gpus) for h in st.hosts.values())
        counts = fmt.server_counts(s.phase for s in st.servers.values())
        parts: list[tuple[str, str] | str] = [("dflash-console", "bold"), f"  {fmt.plural(len(st.hosts), 'host')} · "
                                              f"{fmt.plural(gpus, 'GPU')} · {counts}"]
        if app.read_only:  # type: ignore[attr-defined]
            parts.append(("  READ-ONLY ", "bold reverse"))
        if app.demo is not None:  # type: ignore[attr-defined]
            parts.append(("  demo (simulated fleet)", "italic"))
        if app.status_line:  # type: ignore[attr-defined]
            parts.append("  " + fmt.clean(app.status_line, 200))  # type: ignore[attr-defined]
        update_row(bar, Content.assemble(*parts))

    def on_resize(self) -> None:
        for band in self.query(HostBand):
            band.reflow()
        for p in self.query(GpuPane):
            p.sync()

    # -- selection -----------------------------------------------------------------------
    def on_gpu_pane_selected(self, msg: GpuPane.Selected) -> None:
        self.selection = (msg.host, msg.gpu)
        self.refresh_bindings()

    def current_host(self) -> str | None:
        if self.selection:
            return self.selection[0]
        names = self.host_names()
        return names[0] if names else None

    def current_server(self) -> ServerState | None:
        if self.selection is None:
            return None
        return self.app.state.server_on_gpu(*self.selection)  # type: ignore[attr-defined]

    def marked_gpus(self, host: str) -> list[int]:
        return sorted(p.gpu for p in self.query(GpuPane) if p.host == host and p.marked)

    def action_mark(self) -> None:
        if isinstance(self.focused, GpuPane):
            pane = self.focused
            for p in self.query(GpuPane):
                if p.host != pane.host and p.marked:
                    p.marked = False
                    p.sync()
            pane.marked = not pane.marked
            pane.sync()

    def action_move(self, dx: int, dy: int) -> None:
        panes = list(self.query("GpuPane, RouterBand"))
        cur = self.focused if isinstance(self.focused, (GpuPane, RouterBand)) else None  # ↑ reaches a router band
        if not panes:
            return
        if cur is None:
            panes[0].focus()
            return
        cx, cy = cur.region.center
        best, best_d = None, None
        for p in panes:
            px, py = p.region.center
            if isinstance(p, RouterBand) and p.region.x <= cx < p.region.right:
                px = cx  # a router band spans its host's width: it is straight above each of its panes
            ddx, ddy = px - cx, py - cy
            if (dx and ddx * dx <= 0) or (dy and ddy * dy <= 0):
                continue
            d = (abs(ddx) + 4 * abs(ddy)) if dx else (4 * abs(ddx) + abs(ddy))
            if best_d is None or d < best_d:
                best, best_d = p, d
        if best is not None:
            best.focus()
            best.scroll_visible()

    # -- actions -------------------------------------------------------------------------
    def action_launch(self) -> None:
        host = self.current_host()
        if host is None:
            return
        marked = self.marked_gpus(host)
        gpus = marked or ([self.selection[1]] if self.selection and self.selection[0] == host else [])
        self.app.open_launch(host, gpus, bool(marked))  # type: ignore[attr-defined]

    def action_details(self) -> None:
        srv = self.current_server()
        if srv is not None:
            self.app.open_server(srv.name)  # type: ignore[attr-defined]
