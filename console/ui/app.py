"""DflashApp: the Textual front end; it renders FleetState from a FleetApi and sends it actions, nothing else."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widget import AwaitMount
from textual.worker import Worker, WorkerState

from console.config import Fleet
from console.fleet.api import FleetApi
from console.fleet.changes import Changes
from console.fleet.events import Event, GpuSample, Notice
from console.fleet.state import FleetState, ServerState, ready_notice
from console.keys_first import KEYS_FIRST
from console.remote_text import for_terminal
from console.sglang.phase import Phase
from console.ui import gcpolicy
from console.ui.actions import MUTATING, ActionsMixin
from console.ui.backend import ChatBackend, ProbeReport, SglangBackend
from console.ui.messages import FleetChanged
from console.ui.probe_note import ProbeNote
from console.ui.textual_private import MarksFrames, exiting_on_error
from console.ui.themes import DEFAULT_THEME, SEMANTIC_DEFAULTS, load_themes
from console.ui.widgets.help_sheet import take_key

SYNC_MIN_S = 1.0
"""Screens repaint from state at most once a second, however many event batches arrive: nvidia-smi samples at
1-2 Hz, and each repaint of the fleet screen is a frame of most of the terminal (nvitop and btop default to
1-2 s). Keys, launches, stops, crashes and host changes repaint at once (`_urgent`); the live log does not wait."""

SETTLE_S = 5.0
"""After the fleet connects, this long until the start-up objects are frozen out of the collector's sight."""

SERVER_SCREENS_KEPT = 4
"""Server screens kept built after they are closed: reopening one is a resume (its log, scroll and search as
left), not a compose and a full style pass (most of an open's ~100 ms)."""

TICK_S = 1.0
"""Without events, screens still re-read state this often: ages and staleness are shown in whole seconds."""

ApiFactory = Callable[[], Awaitable[FleetApi]]


class DflashApp(MarksFrames, ActionsMixin, App[int]):
    """The console: fleet screen first; server, launch and chat screens on top; `?` a sheet over any of them."""

    TITLE = "dflash-console"
    CSS_PATH = "app.tcss"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit", tooltip="Close the console; servers keep running."),
        Binding("question_mark", "help", "Help", id="help", tooltip="Every key, with its keymap id."),
        Binding("t", "change_theme", "Theme", id="theme", show=False, tooltip="Pick a theme."),
    ]

    def __init__(
        self,
        api: FleetApi | None = None,
        *,
        api_factory: ApiFactory | None = None,
        fleet: Fleet | None = None,
        read_only: bool = False,
        theme: str | None = None,
        clock: Callable[[], float] = time.time,
        backend: ChatBackend | None = None,
        demo: Any = None,
        start_api: bool = True,
        bell: bool | None = None,
    ) -> None:
        super().__init__()
        self.api: FleetApi | None = api
        self._api_factory = api_factory
        self.fleet = fleet if fleet is not None else getattr(api, "fleet", None) or Fleet()
        self.read_only = read_only or bool(getattr(api, "read_only", False))
        self.clock = clock
        self.backend: ChatBackend = backend or SglangBackend()
        self.demo = demo
        """The demo's sim handle (crash injection, cleanup) when run with --demo."""
        self.start_api = start_api
        self.bell_on_error = self.fleet.console.bell if bell is None else bell
        self.bench_runner: Callable[[DflashApp, str], None] | None = None
        """Installed by the bench feature; `b` calls it with the selected server."""
        self.last_probe: ProbeReport | None = None
        self.probe_note: ProbeNote | None = None
        """The last probe's result, on the top bar and its server's log bar for PROBE_SHOWN_S."""
        self.status_line = "" if api is not None else "connecting…"
        self._empty = FleetState()
        self._phases: dict[str, Phase] = {}
        self._last_sync = 0.0
        self._behind: set[Screen[Any]] = set()
        """Screens skipped by syncs while an opaque screen covered them."""
        self._sync_pending = False
        self._change_posted = False
        self._urgent = False
        self._gpus_drawn = 0
        self._server_screens: list[str] = []
        """Names of the installed server screens, least recently opened first."""
        """GPUs in the state at the last event batch: a change re-lays out the fleet screen at once."""
        self._dirty_hosts: set[str] | None = None
        """Hosts that events touched since the last sync; None: all of them."""
        self.activity: deque[Notice] = deque(maxlen=200)
        self.acting: set[str] = set()
        """Targets of the actions running now (ActionsMixin._run): their steps wait for the outcome line."""

        self._screenshot_dirs: dict[str, str] = {}
        """The folder each screenshot on its way was sent to, by delivery key (a failure's notice names it)."""
        """Every notice toasted, for the fleet screen's activity panel."""
        loaded = load_themes()
        self.theme_problems = loaded.problems
        self._install_bench()
        for t in loaded.themes:
            self.register_theme(t)
        self._wanted_theme = theme or self.fleet.console.theme or DEFAULT_THEME
        if self.fleet.keymap:
            self.set_keymap(dict(self.fleet.keymap))

    def _install_bench(self) -> None:
        """`b` comes from the bench feature when it is present (console.ui.bench_screen.install)."""
        try:
            from console.ui.bench_screen import install
        except ImportError:
            return
        install(self)

    # -- state ---------------------------------------------------------------------------
    @property
    def state(self) -> FleetState:
        return self.api.state if self.api is not None else self._empty

    def now(self) -> float:
        return self.clock()

    def get_driver_class(self) -> type[Driver]:
        from console.ui.textual_private import driver_class

        return driver_class(super().get_driver_class())

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(SEMANTIC_DEFAULTS)

    def on_mount(self) -> None:
        gcpolicy.tune()
        if self._wanted_theme in self.available_themes:
            self.theme = self._wanted_theme
        else:
            self.theme = DEFAULT_THEME
            self.notify(
                f"unknown theme {self._wanted_theme!r}; using {DEFAULT_THEME}", severity="warning", markup=False
            )
        for p in self.theme_problems:
            self.notify(p, title="theme not loaded", severity="warning", markup=False)
        from console.ui.screens.fleet import FleetScreen

        self.push_screen(FleetScreen())
        self.set_interval(TICK_S, self._tick)
        if self.start_api:
            self.run_worker(
                self._start_api(),
                name="api-start",
                group="api",
                exit_on_error=False,
                description="connecting the fleet",
            )

    async def _start_api(self) -> None:
        if self.api is None and self._api_factory is not None:
            self.api = await self._api_factory()
            self.fleet = self.api.fleet
            self.read_only = self.read_only or self.api.read_only
        if self.api is None:
            return
        self.api.subscribe(self._on_events)
        await self.api.start()
        self.status_line = ""
        self.post_message(FleetChanged())
        self.set_timer(SETTLE_S, gcpolicy.settle)  # hosts connected, panes built: freeze the survivors
        if self.demo is not None:
            self.run_worker(
                self.demo.after_start(self.api),
                name="demo-scene",
                group="demo",
                exit_on_error=False,
                description="demo: opening servers",
            )

    def _on_events(self, events: list[Event], changes: Changes) -> None:
        """Controller listener (on the loop): toast the notices; one FleetChanged in the queue at a time.

        A log flood delivers hundreds of batches a second; a message per batch was pure overhead.
        """
        if self._dirty_hosts is not None:
            self._dirty_hosts |= changes.hosts  # a removed server's host too: the state names it
        if changes.urgent:
            self._urgent = True  # a launch, stop, crash or host change is shown at once, not coalesced
        if any(isinstance(e, GpuSample) for e in events):
            gpus = sum(len(h.gpus) for h in self.state.hosts.values())
            if gpus != self._gpus_drawn:  # GPUs appeared (a host's first sample): new panes now, not 1 s later
                self._gpus_drawn = gpus
                self._urgent = True
        if not self._change_posted and (self._urgent or not self._sync_pending or self._live_log_pull()):
            # with a repaint already scheduled, the dirty hosts above are all it needs: a message per batch
            # (hundreds a second in a flood) was Textual dispatch work that changed nothing
            self._change_posted = True
            self.post_message(FleetChanged())
        for n in changes.notices:
            self.toast(n)

    def _live_log_pull(self) -> Callable[[], None] | None:
        """The top screen's live-log pull (it pulls on every batch, not on the coalesced repaint), if it has one.
        A host's first events can come before the first screen is up, or after the last is gone at exit
        (`self.screen` raised ScreenStackError there on a busy machine and ended the app)."""
        return getattr(self.screen_stack[-1], "pull_soon", None) if self.screen_stack else None

    def _ready_fallback(self) -> None:
        """Toasts 'is ready' when a server went from starting straight to serving between two syncs and the state
        never decided about it (every READY notice the state gives, or withholds, marks `told`)."""
        for name, s in self.state.servers.items():
            phase = s.phase
            was = self._phases.get(name)
            self._phases[name] = phase
            if was is not None and was.starting and phase.up and "ready" not in s.told:
                self.toast(ready_notice(s, self.now()))

    def toast(self, n: Notice) -> None:
        """Toast (and bell on errors); notices about external servers go to the activity panel only; a step of an
        action in flight here waits for the action's own outcome line (told_by_outcome)."""
        if self.told_by_outcome(n):
            return
        self.activity.append(n)
        srv = self.state.servers.get(n.server or "")
        if srv is not None and not srv.meta.managed:
            return  # we did not start it: its comings and goings are news, not alarms
        sev: SeverityLevel = "information" if n.level == "info" else n.level
        self.notify(for_terminal(n.message), severity=sev, markup=False, timeout=8 if n.level == "error" else 4)
        if n.level == "error" and self.bell_on_error:
            self.bell()

    def on_fleet_changed(self, _msg: FleetChanged) -> None:
        """Repaint at most every SYNC_MIN_S: a log flood sends hundreds of batches a second."""
        self._change_posted = False
        pull = self._live_log_pull()
        if pull is not None:  # the live log does not wait for the coalesced repaint
            pull()
        self._request_sync()

    def _request_sync(self) -> None:
        """Sync now if the last was SYNC_MIN_S ago (or something urgent happened), else once when it is due."""
        wait = self._last_sync + SYNC_MIN_S - time.monotonic()
        if wait <= 0 or self._urgent:
            self._sync_screens()
        elif not self._sync_pending:
            self._sync_pending = True
            self.set_timer(wait, self._deferred_sync)

    def _deferred_sync(self) -> None:
        self._sync_pending = False
        self._sync_screens()

    def _tick(self) -> None:
        """Ages tick even when nothing arrives, so stale numbers are shown as stale: a full sync, within the same
        SYNC_MIN_S budget as the event-driven ones (a tick of its own on top of them was a third repaint a second)."""
        self._dirty_hosts = None
        self._request_sync()

    def _sync_screens(self) -> None:
        """Screens re-read state; the fleet screen only for the hosts that events touched since the last sync."""
        self._last_sync = time.monotonic()
        hosts, self._dirty_hosts = self._dirty_hosts, set()
        self._urgent = False
        if exiting_on_error(self) or not self.is_running:
            return
        self._ready_fallback()
        for screen in self.screen_stack:
            if not screen.is_attached:
                continue
            if self._covered(screen):
                self._behind.add(screen)  # synced in full when it is on screen again (catch_up_screen)
                continue
            self._sync_one(screen, None if screen in self._behind else hosts)
            self._behind.discard(screen)

    def _covered(self, screen: Screen[Any]) -> bool:
        """An opaque screen is above it. Syncing it anyway was not free: Textual repaints the top screen over any
        region a screen below it redraws (the fleet's panes under a server screen, every second)."""
        stack = self.screen_stack
        above = stack[stack.index(screen) + 1 :] if screen in stack else []
        return any(s.styles.background.a == 1 for s in above)

    def _sync_one(self, screen: Screen[Any], hosts: set[str] | None) -> None:
        try:
            partial = getattr(screen, "sync_hosts", None)
            if partial is not None:
                partial(hosts)
            elif (sync := getattr(screen, "sync", None)) is not None:
                sync()
        except NoMatches:  # a screen being torn down between two ticks
            pass

    def catch_up_screen(self, screen: Screen[Any]) -> None:
        """A screen on top again (its ScreenResume) that missed syncs while covered: a full one before its frame."""
        if screen in self._behind and screen.is_attached and not self._covered(screen):
            self._behind.discard(screen)
            self._sync_one(screen, None)

    # -- selection -----------------------------------------------------------------------
    def selected_server(self) -> ServerState | None:
        """The server of the screen on top (server/chat screen), else of the selected GPU."""
        for screen in reversed(self.screen_stack):
            fn: Callable[[], ServerState | None] | None = getattr(screen, "current_server", None)
            if fn is not None:
                return fn()
        return None

    def selected_host(self) -> str | None:
        for screen in reversed(self.screen_stack):
            fn: Callable[[], str | None] | None = getattr(screen, "current_host", None)
            if fn is not None:
                return fn()
        return None

    # -- screens -------------------------------------------------------------------------
    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            KEYS_FIRST.key_taken()  # from the input thread: its frame, a few turns on, ends the readers' hold
            if self.screen_stack and await take_key(self.screen, event.key):
                return
        await super().on_event(event)

    def push_screen(self, *args: Any, **kwargs: Any) -> Any:
        """Opens nothing once the app is quitting: keys typed right after `q` (one read from the terminal, `qc`)
        still run their actions, and a screen pushed then mounted without its children and crashed the exit
        (`NoMatches` from its on_mount, exit status 1)."""
        if self.return_code is not None:
            return AwaitMount(self.screen, [])
        return super().push_screen(*args, **kwargs)

    async def action_help(self) -> None:
        """The sheet over the current screen's bottom rows (console/ui/widgets/help_sheet.py)."""
        from console.ui.widgets.help_sheet import ready_sheet

        sheet = await ready_sheet(self.screen)
        if not sheet.is_open:
            sheet.open()

    def open_server(self, name: str | None) -> None:
        if name is None or name not in self.state.servers:
            return
        from console.ui.screens.server import ServerScreen

        key = f"server:{name}"
        if key in self._server_screens:
            self._server_screens.remove(key)
        elif not self.is_screen_installed(key):
            self.install_screen(ServerScreen(name), key)
        self._server_screens.append(key)  # most recent last
        for old in self._server_screens[:-SERVER_SCREENS_KEPT]:
            screen = self.get_screen(old)
            if screen not in self.screen_stack:  # one still under other screens stays until it is not
                self._server_screens.remove(old)
                self.uninstall_screen(old)
                screen.remove()
        self.push_screen(key)

    def open_chat(self, name: str | None) -> None:
        """Chat with `name`; one that has ended cannot answer, so it is said, not swapped for another server."""
        from console.ui.screens.chat import ChatScreen

        srv = self.state.servers.get(name or "")
        if srv is not None and srv.phase.terminal:
            self.notify(
                f"cannot chat with {name}: it has {srv.phase.value} (nothing answers). r relaunches it; "
                "c on a running server's pane chats with that one",
                severity="warning",
                markup=False,
            )
            return
        self.push_screen(ChatScreen(name))

    def open_launch(self, host: str | None, gpus: list[int], marked: bool = False) -> None:
        """`marked`: the GPUs were marked with space, so they are the launch target (not just the cursor)."""
        if host is None or self.refuse_if_read_only("launch"):
            return
        from console.ui.screens.launch import LaunchScreen

        self.push_screen(LaunchScreen(host, gpus, marked))

    # -- palette -------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        srv = self.selected_server()
        host = self.selected_host()
        name = srv.name if srv else None
        cmds = [
            (
                "server: details",
                "Open the selected server's log, timeline and command",
                lambda: self.open_server(name),
                srv is not None,
                "details",
            ),
            (
                "server: relaunch",
                "Relaunch the selected server's preset",
                lambda: self.request_relaunch(name),
                srv is not None and bool(srv.meta.preset),
                "relaunch",
            ),
            (
                "server: stop",
                "Stop the selected server",
                lambda: self.request_stop(name),
                srv is not None and srv.alive,
                "stop",
            ),
            (
                "server: probe",
                "Health, model info and a short generation",
                lambda: self.request_probe(name),
                srv is not None,
                "probe",
            ),
            ("server: chat", "Chat with the selected server", lambda: self.open_chat(name), True, "chat"),
            (
                "server: bench",
                "Concurrency sweep (when available)",
                lambda: self.request_bench(name),
                srv is not None and self.bench_runner is not None,
                "bench",
            ),
            (
                "host: reconnect",
                "Drop and re-open the selected host's link",
                lambda: self.request_reconnect(host),
                host is not None,
                "reconnect",
            ),
            (
                "host: launch",
                "Launch a preset on the selected host",
                lambda: self._palette_launch(),
                host is not None,
                "launch",
            ),
            ("view: help", "Every key and its keymap id", self.action_help, True, "help"),
        ]
        if self.demo is not None:
            cmds.append(
                (
                    "sim: crash server",
                    "Kill the selected sim server the way a real crash would",
                    lambda: self.demo_crash(name),
                    srv is not None and srv.alive,
                    "crash",
                )
            )
            spec = srv is not None and srv.alive and "--speculative-algorithm" in srv.meta.argv
            cmds.append(
                (
                    "sim: drafter collapse",
                    "Drop the selected sim server's draft acceptance to nothing (accept length ~1.0)",
                    lambda: self.demo_drafter(name, 0.0),
                    spec,
                    "drafter",
                )
            )
            cmds.append(
                (
                    "sim: drafter recover",
                    "Give the selected sim server its drafter's own acceptance back",
                    lambda: self.demo_drafter(name, None),
                    spec,
                    "drafter",
                )
            )
        for title, help_text, cb, ok, action in cmds:
            if ok and not (self.read_only and action in MUTATING):
                yield SystemCommand(title, help_text, cb)
        from console.ui.widgets.router_band import router_commands  # issue 15: `router: up NAME` …

        yield from router_commands(self)

    def _palette_launch(self) -> None:
        launch = getattr(self.screen, "action_launch", None)
        if launch is not None:
            launch()
        else:
            self.open_launch(self.selected_host(), [])

    def demo_crash(self, name: str | None) -> None:
        """Demo only: ask the sim to crash a server (`sim: crash server`)."""
        self._demo_action("crash", name, lambda demo, n: demo.crash(n), f"sim: crashing {name}")

    def demo_drafter(self, name: str | None, p: float | None) -> None:
        """Demo only: set a sim server's draft acceptance (`sim: drafter collapse` / `recover`)."""
        word = "collapsed" if p == 0.0 else "recovered"
        self._demo_action("drafter", name, lambda demo, n: demo.drafter(n, p), f"sim: {name}'s drafter {word}")

    def _demo_action(
        self, action: str, name: str | None, call: Callable[[Any, str], Awaitable[None]], done: str
    ) -> None:
        if name is None or self.demo is None or self.refuse_if_read_only(action):
            return
        demo = self.demo

        async def go() -> tuple[bool, str]:
            await call(demo, name)
            return True, done

        self._run(action, name, go)

    # -- screenshots (the palette's Screenshot) --------------------------------------------
    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """Saved to a folder that exists (console/ui/screenshot.py), not Textual's ~/Downloads, which may not."""
        from console.ui.screenshot import screenshot_dir

        if path is None:
            try:
                path = str(screenshot_dir(demo=self.demo is not None))
            except OSError as e:
                self.notify(f"could not save the screenshot: {e}", title="Screenshot", severity="error", markup=False)
                return None
        key = super().deliver_screenshot(filename, path, time_format)
        if key is not None:
            self._screenshot_dirs[key] = path
        return key

    def on_delivery_complete(self, event: events.DeliveryComplete) -> None:
        """Says where it went, as plain text (Textual's notice reads the path as markup)."""
        if event.name == "screenshot":
            event.prevent_default()
            self._screenshot_dirs.pop(event.key, None)
            where = str(event.path) if event.path is not None else "the browser"
            self.notify(f"saved the screenshot to {where}", title="Screenshot", markup=False)

    def on_delivery_failed(self, event: events.DeliveryFailed) -> None:
        """Says where it tried and why (Textual's notice said neither)."""
        if event.name == "screenshot":
            event.prevent_default()
            where = self._screenshot_dirs.pop(event.key, "?")
            self.notify(
                f"could not save the screenshot in {where}: {event.exception}",
                title="Screenshot",
                severity="error",
                markup=False,
            )

    # -- workers, exit -------------------------------------------------------------------
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Worker failures are reported here, once, instead of killing the app."""
        w = event.worker
        if event.state == WorkerState.ERROR and w.error is not None:
            self.status_line = f"{w.description or w.name}: {w.error}"
            self.notify(
                for_terminal(f"{w.description or w.name}: {type(w.error).__name__}: {w.error}"),
                severity="error",
                markup=False,
                timeout=10,
            )

    async def on_unmount(self) -> None:
        if self.api is not None and self.start_api:
            try:
                await self.api.close()
            except Exception:
                pass


if TYPE_CHECKING:  # mypy checks here that DflashApp is the App that console_app() promises its screens
    from console.ui.console_app import ConsoleApp

    _conforms: type[ConsoleApp] = DflashApp
