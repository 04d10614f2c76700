"""FleetScreen: every host as a band of GPU panes; the selection drives launch, relaunch, stop, probe and chat."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.events import Key
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Static

from console.fleet.state import ServerState
from console.ui import format as fmt
from console.ui.actions import MUTATING
from console.ui.bindings import refresh_bindings_if_changed
from console.ui.console_app import console_app
from console.ui.layout import FleetLayout, fleet_layout
from console.ui.probe_note import shown_probe
from console.ui.textual_private import LayoutOnce, QuietFrames, StillStrips
from console.ui.topbar import fit, fleet_items
from console.ui.views import pane_matches, pane_view
from console.ui.visibility import update_row, visible_widgets
from console.ui.widgets.activity import ActivityLog
from console.ui.widgets.footer import ConsoleFooter
from console.ui.widgets.gpu_pane import GpuPane
from console.ui.widgets.help_sheet import HelpSheet
from console.ui.widgets.host_band import HostBand
from console.ui.widgets.router_band import RouterBand


class HostList(VerticalScroll, can_focus=False, inherit_bindings=False):
    """The scrolling column of host bands; arrow keys belong to the pane selection, not to scrolling."""

    DEFAULT_CSS = "HostList { height: auto; scrollbar-size-vertical: 1; }"

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):  # panes that scroll into view catch up on what they missed
            self.call_after_refresh(self.catch_up)
            # and again a moment later: on a busy machine the frame that puts them on screen can come after the
            # refresh that callback waited for, and a pane left behind would wait for the next 1 s full sync
            self.set_timer(0.3, self.catch_up)

    def catch_up(self) -> None:
        visible = visible_widgets(self)
        for band in self.query(HostBand):
            band.catch_up(visible)


class Shelf(StillStrips, Horizontal):
    """One row of host bands side by side (console/ui/layout.py decides which hosts share it)."""

    DEFAULT_CSS = "Shelf { height: auto; }"


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
        app = console_app(self)
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
        console_app(self).request_relaunch(srv.name if srv else None)

    def action_stop(self) -> None:
        srv = self.current_server()
        console_app(self).request_stop(srv.name if srv else None)

    def action_probe(self) -> None:
        srv = self.current_server()
        console_app(self).request_probe(srv.name if srv else None)

    def action_chat(self) -> None:
        srv = self.current_server()
        console_app(self).open_chat(srv.name if srv else None)

    def action_bench(self) -> None:
        srv = self.current_server()
        console_app(self).request_bench(srv.name if srv else None)


class QuietFocus:
    """Mixed into the console's screens (before Screen)."""

    focused: Reactive[Widget | None] = Reactive(None, repaint=False)
    """Screen's own `focused`, minus its repaint of the whole screen on every focus move (the widgets losing
    and gaining focus, and their ancestors' focus-within, repaint themselves): an arrow key was a full
    200x60 frame of 64 panes, and `?` on the server screen (the help sheet takes the focus) a full frame of the
    log view (benchmarks/bench_keypress.py, bench_host_growth.py)."""


class FleetScreen(QuietFocus, ServerKeys, LayoutOnce, QuietFrames, Screen[Any]):
    """The first screen: host bands flowed into shelves that fill the terminal, one pane per GPU."""

    BINDINGS = [
        Binding("l", "launch", "Launch", id="launch", tooltip="Pick a preset for the selected GPU(s)."),
        *ServerKeys.SERVER_BINDINGS,
        Binding("enter", "details", "Details", id="details", tooltip="Log, timeline and command of the server."),
        Binding(
            "slash",
            "filter",
            "Filter",
            id="fleet-filter",
            tooltip="Show only GPUs whose host, preset, server or phase match (esc clears).",
        ),
        Binding("space", "mark", "Mark", id="mark", show=False, tooltip="Mark GPUs for a multi-GPU launch."),
        Binding("left,h", "move(-1, 0)", "←", id="left", show=False, tooltip="Select the GPU to the left."),
        Binding("right", "move(1, 0)", "→", id="right", show=False, tooltip="Select the GPU to the right."),
        Binding("up,k", "move(0, -1)", "↑", id="up", show=False, tooltip="Select the GPU above."),
        Binding("down,j", "move(0, 1)", "↓", id="down", show=False, tooltip="Select the GPU below."),
    ]
    FOOTER_SPARE = ("details", "filter")
    """Footer keys left out first when they do not all fit (a focused router band's keys are longer; `?` has all)."""
    DEFAULT_CSS = """
    FleetScreen #fleet-filter { dock: bottom; display: none; height: 3; }
    FleetScreen #fleet-filter.-show { display: block; }
    FleetScreen ActivityLog.-none { display: none; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.selection: tuple[str, int] | None = None
        self._topbar: Static | None = None
        self._box: HostList | None = None
        self._box_rows = 0
        self._activity: ActivityLog | None = None
        self._bands: dict[str, HostBand] = {}
        self._shelves: tuple[tuple[str, ...], ...] = ()
        self.layout_now: FleetLayout | None = None
        self.marks: set[tuple[str, int]] = set()
        self.filter_text = ""
        """The fleet filter (`/`): only GPUs whose views match every word are shown."""
        self._shown: dict[str, tuple[int, ...]] = {}
        self._auto = True
        """The selection is the console's pick (the first pane), not the person's: a re-layout may move it."""
        self._auto_target: tuple[str, int] | None = None
        """The pane the console focused last on its own."""

    def compose(self) -> ComposeResult:
        self._topbar = Static("", id="topbar", markup=False)
        self._box = HostList(id="hosts")
        self._activity = ActivityLog(console_app(self).activity, id="activity")
        yield self._topbar
        yield self._box
        yield self._activity
        yield Input(
            placeholder="filter GPUs: host, preset, server or phase words (enter: keep, esc: clear)",
            id="fleet-filter",
            disabled=True,
        )
        yield ConsoleFooter()

    def on_mount(self) -> None:
        self.sync()

    def on_screen_resume(self) -> None:
        # the syncs it missed under a server screen, after the frame that shows it again: with 64 hosts a
        # full sync before that frame was ~10 ms of every Escape (the panes show the state of a second ago for one
        # frame, as they do between any two syncs)
        self.call_after_refresh(console_app(self).catch_up_screen, self)

    def host_names(self) -> list[str]:
        app = console_app(self)
        names = list(app.fleet.hosts)
        names += [h for h in app.state.hosts if h not in names]
        return names

    def sync(self) -> None:
        """Lays the bands out again if needed and re-syncs every band (off-screen panes wait)."""
        self.sync_hosts(None)

    def _shown_gpus(self) -> dict[str, tuple[int, ...]]:
        """Per host, the GPUs the filter lets through (all of them without a filter)."""
        app = console_app(self)
        st = app.state
        out: dict[str, tuple[int, ...]] = {}
        now = app.now()
        for h in self.host_names():
            gpus = tuple(sorted(st.host(h).gpus))
            if self.filter_text:
                gpus = tuple(g for g in gpus if pane_matches(pane_view(st, h, g, now), self.filter_text))
            out[h] = gpus
        return out

    def sync_hosts(self, hosts: set[str] | None) -> None:
        """Re-syncs the bands of `hosts` (None: all); the app passes the hosts that events touched."""
        if self._box is None or not self.children:
            return  # a tick before compose
        shown = self._shown_gpus()
        if shown != self._shown:
            self._shown, hosts = shown, None
        names = [h for h in self.host_names() if not self.filter_text or shown[h]]
        size = self.app.size
        routers = getattr(console_app(self).fleet, "routers", None) or {}
        extra: dict[str, int] = {}
        for r in routers.values():
            extra[r.host] = extra.get(r.host, 0) + 2  # a RouterBand is two rows (console/ui/widgets/router_band.py)
        lay = fleet_layout(size.width, size.height, [(h, len(shown[h])) for h in names], extra)
        rows = max(1, size.height - 2)  # all but the top bar and the footer: the list scrolls, not the screen
        if rows != self._box_rows:
            self._box_rows = rows
            self._box.styles.max_height = rows
        if lay != self.layout_now:
            self.layout_now, hosts = lay, None
            self._place(lay)
        visible = visible_widgets(self)
        for band in self._bands.values():
            if hosts is None or band.host in hosts:
                band.shown = shown.get(band.host, ())
                band.sync(visible)
        self._sync_topbar()
        if self._activity is not None:
            self._activity.sync()
        if (
            not isinstance(self.focused, (GpuPane, RouterBand, HelpSheet))  # a focused router band keeps focus
            # (issue 15), and so does the open help, which gives it back when it closes
            or (
                self._auto
                and isinstance(self.focused, GpuPane)  # the console's pick follows the order,
                and (self.focused.host, self.focused.gpu) == self._auto_target
            )
        ):  # never a pane focused since
            self._refocus()
        refresh_bindings_if_changed(self)

    def _place(self, lay: FleetLayout) -> None:
        """Mounts the shelves the layout names (only when which hosts share a row changed) and sizes the bands."""
        box = self._box
        assert box is not None
        shelves = tuple(tuple(b.host for b in s) for s in lay.shelves)
        if shelves != self._shelves:
            self._shelves = shelves
            box.remove_children()
            self._bands = {}
            rows = []
            for s in lay.shelves:
                bands = [HostBand(b.host) for b in s]
                for band in bands:
                    band.marked = {g for h, g in self.marks if h == band.host}
                    band.shown = self._shown.get(band.host, ())
                    self._bands[band.host] = band
                rows.append(Shelf(*bands))
            box.mount_all(rows)
            self.call_after_refresh(self._refocus)
        for s in lay.shelves:
            for b in s:
                placed = self._bands.get(b.host)
                if placed is not None:
                    placed.place(b, lay.pane_height)
        if self._activity is not None:
            self._activity.set_class(lay.activity_height == 0, "-none")  # else it takes the rows left (1fr)

    def _refocus(self) -> None:
        """Focus the selected GPU's pane again (after a re-layout), else the first pane."""
        panes = [p for b in self._bands.values() for p in b.panes() if p.display]
        want = None if self._auto else next((p for p in panes if (p.host, p.gpu) == self.selection), None)
        target = want or (panes[0] if panes else None)
        if target is not None and self.focused is not target and not isinstance(self.focused, Input):
            if want is None:  # not the person's choice: the first pane in order, even as hosts come up
                self._auto_target = (target.host, target.gpu)
            target.focus(scroll_visible=False)

    def _sync_topbar(self) -> None:
        app = console_app(self)
        bar = self._topbar
        if bar is None:
            return
        st = app.state
        gpus = sum(len(h.gpus) for h in st.hosts.values())
        filter_note = None
        if self.filter_text:
            n = sum(len(v) for v in self._shown.values())
            said = f"filter “{fmt.clean(self.filter_text, 40)}”: {n} of {fmt.plural(gpus, 'GPU')}"
            filter_note = (f"{said} (/ edit · esc clear)", f"{said} (esc clears)", said)
        items = fleet_items(
            hosts=fmt.plural(len(st.hosts), "host"),
            gpus=fmt.plural(gpus, "GPU"),
            counts=fmt.server_counts(s.phase for s in st.servers.values()),
            filter_note=filter_note,
            read_only=app.read_only,
            demo=app.demo is not None,
            probe=fmt.clean(shown_probe(app.probe_note, app.now()), 200),
            status=fmt.clean(app.status_line, 200) if app.status_line else "",
        )
        width = max(0, self.app.size.width - bar.styles.gutter.width)
        update_row(bar, Content.assemble(*fit(items, width)))

    def on_resize(self) -> None:
        self.sync()

    # -- the fleet filter ------------------------------------------------------------------
    def action_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.value = self.filter_text
        box.disabled = False
        box.add_class("-show")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "fleet-filter":
            self.filter_text = event.value.strip()
            self.sync()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "fleet-filter":
            self._close_filter_box()

    def _close_filter_box(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.remove_class("-show")
        box.disabled = True  # a hidden box must not take focus (or the keys the footer shows)
        self._refocus()

    def on_key(self, event: Key) -> None:
        """Esc closes the innermost thing first: the filter box, then the filter itself."""
        if event.key != "escape":
            return
        box = self.query_one("#fleet-filter", Input)
        if box.has_class("-show"):
            self.filter_text = ""
            self._close_filter_box()
            self.sync()
            event.stop()
        elif self.filter_text:
            self.filter_text = ""
            self.sync()
            event.stop()

    # -- selection -----------------------------------------------------------------------
    def on_gpu_pane_selected(self, msg: GpuPane.Selected) -> None:
        self.selection = (msg.host, msg.gpu)
        self._auto = self.selection == self._auto_target  # a pane the person moved to stays selected
        self.refresh_bindings()

    def current_host(self) -> str | None:
        if self.selection:
            return self.selection[0]
        names = self.host_names()
        return names[0] if names else None

    def current_server(self) -> ServerState | None:
        if self.selection is None:
            return None
        return console_app(self).state.server_on_gpu(*self.selection)

    def marked_gpus(self, host: str) -> list[int]:
        return sorted(g for h, g in self.marks if h == host)

    def action_mark(self) -> None:
        if not isinstance(self.focused, GpuPane):
            return
        pane = self.focused
        key = (pane.host, pane.gpu)
        others = {m for m in self.marks if m[0] != pane.host}
        self.marks -= others  # marks are one host's GPUs: a launch goes to one host
        self.marks ^= {key}
        self._show_marks()

    def clear_marks(self) -> bool:
        """A launch used the marks: they go, so the next `l` targets the cursor, not the GPUs just launched on.
        True when there were any."""
        had = bool(self.marks)
        self.marks = set()
        self._show_marks()
        return had

    def _show_marks(self) -> None:
        for band in self._bands.values():
            band.marked = {g for h, g in self.marks if h == band.host}
            for p in band.panes():
                if p.marked != ((p.host, p.gpu) in self.marks):
                    p.marked = not p.marked
                    p.sync()

    def _targets(self) -> list[GpuPane | RouterBand]:
        """What the arrows move between, in screen order: each host's router bands, then its GPU panes.

        From the bands the screen keeps, not a DOM query: a selector match over every node (64 hosts: ~850) was
        most of an arrow key's CPU (~15 ms of 18; benchmarks/bench_host_growth.py)."""
        out: list[GpuPane | RouterBand] = []
        for band in self._bands.values():
            out += [r for r in band.children if isinstance(r, RouterBand) and r.display and r.is_mounted]
            out += [p for p in band.panes() if p.display and p.is_mounted]
        return out

    def action_move(self, dx: int, dy: int) -> None:
        panes = self._targets()
        cur = self.focused if isinstance(self.focused, (GpuPane, RouterBand)) else None  # ↑ reaches a router band
        if not panes:
            return
        if cur is None:
            panes[0].focus()
            return
        # the panes on screen first: asking an off-screen pane for its region makes Textual arrange the whole
        # screen again after a scroll (64 hosts: ~780 widgets, 30-40 ms of a key), and the next pane that way
        # is nearly always on screen; the rest only when none is
        shown = visible_widgets(cur)
        best = _nearest(cur, [p for p in panes if p in shown], dx, dy) or _nearest(cur, panes, dx, dy)
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
        console_app(self).open_launch(host, gpus, bool(marked))

    def action_details(self) -> None:
        srv = self.current_server()
        if srv is not None:
            console_app(self).open_server(srv.name)


def _nearest(cur: Widget, panes: list[GpuPane | RouterBand], dx: int, dy: int) -> GpuPane | RouterBand | None:
    """The pane an arrow (dx, dy) moves to from `cur`: the closest that way, weighting the other axis 4×."""
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
    return best
