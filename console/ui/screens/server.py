"""ServerScreen (`enter`): one server's live log, stats, phase timeline vs. the last launch, command and diagnosis."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.events import Key
from textual.screen import Screen
from textual.widgets import Input, Static

from console.config import user_state_dir
from console.fleet.state import ServerState
from console.keys_first import KEYS_FIRST
from console.sglang.phase import Phase
from console.ui import format as fmt
from console.ui.bindings import refresh_bindings_if_changed
from console.ui.console_app import console_app
from console.ui.logsearch import find_traceback
from console.ui.probe_note import shown_probe
from console.ui.screens.fleet import QuietFocus, ServerKeys
from console.ui.static_text import update_static
from console.ui.textual_private import LayoutOnce, QuietFrames, StillStrips, draw_now
from console.ui.views import ServerPage, server_page
from console.ui.widgets.fast_scrollbar import use_cached_bars
from console.ui.widgets.footer import ConsoleFooter
from console.ui.widgets.gpu_pane import colours, spans
from console.ui.widgets.log_view import LogView


def timeline_table(
    rows: tuple[tuple[str, float | None, float | None], ...], c: dict[str, str] | None = None
) -> Content:
    """Seconds per startup phase for this launch and the previous one, as aligned plain Content (a Rich Table
    was ~60 ms of every server-screen open)."""
    c = c or {}
    has_a, has_b = any(a is not None for _, a, _ in rows), any(b is not None for _, _, b in rows)
    ta, tb = sum(a or 0.0 for _, a, _ in rows), sum(b or 0.0 for _, _, b in rows)
    body = [(_phase_word(p), a, b) for p, a, b in rows]
    lines = [Content.styled(f"{'phase':<16}{'now':>9}{'last':>9}{'Δ':>9}", "bold")]
    for word, a, b in [*body, ("total", ta if has_a else None, tb if has_b else None)]:
        delta, tone = "", ""
        if a is not None and b is not None:
            d = a - b
            delta = f"{d:+.1f} s"
            tone = c.get("phase-crashed", "red") if d > 0.5 else c.get("phase-ready", "green") if d < -0.5 else ""
        lines.append(
            Content.assemble(
                (f"{word:<16}", "bold" if word == "total" else ""),
                f"{fmt.duration(a):>9}{fmt.duration(b):>9}",
                (f"{delta:>9}", tone),
            )
        )
    return Content("\n").join(lines)


def _phase_word(p: str) -> str:
    """`loading weights`, and `draft weights` for a draft model's rows (views.timeline_rows)."""
    if p.startswith("draft_"):
        return DRAFT_WORDS.get(p[6:], "draft " + p[6:])[:15]
    return fmt.PHASE_WORDS.get(Phase(p), p)


DRAFT_WORDS = {"loading_weights": "draft weights", "kv_cache": "draft KV cache", "cuda_graph": "draft graphs"}
"""The draft model's timeline rows, in the 16 columns the phase names have."""


PULL_MIN_S = 0.03
"""New log lines reach the screen within one frame or so, at most ~33 pulls a second (a server logging a
line every 50 ms has each one on screen at once: benchmarks/bench_log_latency.py)."""
PULL_DEFER_S = 0.005
"""A pull that comes while a key is on its way (console/keys_first.py) looks again this much later: under a flood
each pull redraws the whole view, and the key's frame should not carry one."""
PULL_FLOOD_S = 0.1
"""While pulls bring more than half a view of lines at a time (a flood: every row changes in every frame
anyway, too fast to read), at most 10 pulls (frames) a second. Each pull redraws the whole view (5-10 ms at
200x60, twice that when the other core is busy), and a key pressed meanwhile waits for the frame in progress
(benchmarks/bench_keypress.py: 20 a second cost 4-8 % more of a core under its flood, and the keys' medians
rose with it)."""

RESUME_LATER_S = 2.0
"""Back on the server screen within this long of leaving it, the screen is drawn before the log pull, not
after: closing a dialog under a log flood drew the pull's whole new log view in the same frame (Escape
closing help; benchmarks/bench_keypress.py). The lines come in the next frame, as they would have within
PULL_FLOOD_S anyway."""


class SidePanel(StillStrips, VerticalScroll):
    """The timeline, command and facts beside the log: `i` hides and shows it with the rows it drew kept
    (`strips_kept`; they were 2.4 of an `i`'s 13 ms at 200x60, benchmarks/bench_keypress.py)."""


class ServerScreen(QuietFocus, ServerKeys, LayoutOnce, QuietFrames, Screen[Any]):
    """Log on the left, facts on the right (below when narrow; `i` toggles them)."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="back", tooltip="Close the search, then back to the fleet."),
        Binding("slash", "search", "Search", id="search", tooltip="Search the log (highlights, keeps context)."),
        Binding("n", "next_match(1)", "Next", id="search-next", show=False, tooltip="Next search match."),
        Binding("N", "next_match(-1)", "Prev", id="search-prev", show=False, tooltip="Previous search match."),
        Binding("f", "toggle_filter", "Warn/err", id="filter", tooltip="Only warnings, errors and tracebacks."),
        Binding("x", "traceback", "Traceback", id="traceback", tooltip="Jump to the crash's traceback."),
        Binding("end,G", "follow", "Follow", id="follow", show=False, tooltip="Follow the log tail again."),
        Binding("z", "toggle_wrap", "Wrap", id="wrap", show=False, tooltip="Wrap long log lines (or cut them)."),
        Binding(
            "o",
            "older_log",
            "Older log",
            id="older-log",
            show=False,
            tooltip="View the previous launch's log (again: the one before; O: back to the current).",
        ),
        Binding("O", "current_log", "Current log", id="current-log", show=False, tooltip="Back to the current log."),
        Binding("y", "copy", "Copy", id="copy", show=False, tooltip="Copy the visible lines."),
        Binding("w", "save", "Save", id="save", show=False, tooltip="Save the shown lines to a file."),
        Binding("i", "toggle_info", "Info", id="info", tooltip="Show/hide timeline and command."),
        *ServerKeys.SERVER_BINDINGS,
    ]
    FOOTER_SPARE = ("toggle_info", "traceback")
    """Footer keys left out first when they do not all fit (80 columns; `?` lists them, the diagnosis names `x`)."""
    DEFAULT_CSS = """
    ServerScreen #head { height: auto; padding: 0 1; background: $panel; }
    ServerScreen #diag { height: auto; padding: 0 1; border-left: thick $phase-crashed; margin: 0 0 0 1;
                         display: none; }
    ServerScreen #diag.-show { display: block; }
    ServerScreen #body { height: 1fr; }
    ServerScreen LogView { width: 1fr; height: 1fr; }
    ServerScreen #logbar { height: 1; padding: 0 1; background: $panel; color: $text-muted; text-wrap: nowrap;
                           text-overflow: ellipsis; }
    ServerScreen #side { width: 56; height: 1fr; border-left: solid $panel-lighten-2; padding: 0 1; }
    ServerScreen.-narrow #body { layout: vertical; }
    ServerScreen.-narrow #side { width: 1fr; height: 12; border-left: none; border-top: solid $panel-lighten-2; }
    ServerScreen #search { dock: bottom; display: none; }
    ServerScreen #search.-show { display: block; }
    ServerScreen .section { text-style: bold; color: $accent; margin-top: 1; }
    """

    pull_spacing = PULL_MIN_S
    """The least time between two pulls now: PULL_FLOOD_S while the log floods, else PULL_MIN_S."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.server_name = name
        self.export_dir: Path | None = None
        self.page: ServerPage | None = None
        """The page drawn last: a sync that builds an equal one draws nothing (an idle screen stays still)."""
        self.older: tuple[int, str, list[str]] | None = None
        """Viewing a previous log: (how far back, its path, its lines); None: the live one."""
        self._bar: tuple[object, ...] | None = None
        self._matches: tuple[str, int] | None = None
        self._watching = False
        self._suspended_at = float("-inf")
        """When another screen last covered this one (RESUME_LATER_S)."""

    def current_server(self) -> ServerState | None:
        return console_app(self).state.servers.get(self.server_name)

    def current_host(self) -> str | None:
        s = self.current_server()
        return s.meta.host if s else None

    def _source(self) -> tuple[list[str] | object, int]:
        if self.older is not None:
            return self.older[2], len(self.older[2])
        s = self.current_server()
        if s is None:
            return [], 0
        return s.log.lines, s.log.line_count

    def compose(self) -> ComposeResult:
        yield Static(id="head", markup=False)
        yield Static(id="diag", markup=False)
        with Horizontal(id="body"):  # no box around the log: 'i' would redraw its every row too
            yield LogView(self._source, id="log")  # type: ignore[arg-type]
            with SidePanel(id="side"):
                yield Static("Startup timeline (s)", classes="section", markup=False)
                yield Static(id="timeline", markup=False)
                yield Static("Launch command", classes="section", markup=False)
                yield Static(id="command", markup=False)
                yield Static("Facts", classes="section", markup=False)
                yield Static(id="facts", markup=False)
        yield Static(id="logbar", markup=False)
        yield Input(placeholder="search the log (enter: keep, esc: close)", id="search")
        yield ConsoleFooter()

    def on_mount(self) -> None:
        self._narrow: bool | None = None
        self._last_pull = 0.0
        self._pull_pending = False
        self._pull_deferred = False
        self._backstop = self.set_interval(0.25, self._pull)  # new lines normally arrive through pull_soon
        use_cached_bars(self.query_one(SidePanel))  # drawn again with every frame that touches the
        # panel's rows (the help sheet's)
        self.on_resize()
        self.sync()
        self.query_one(LogView).focus()
        srv = self.current_server()
        if srv is not None and srv.phase is Phase.CRASHED:
            self.call_after_refresh(self.action_traceback)

    def on_screen_suspend(self) -> None:
        self._backstop.pause()  # kept built for a quick reopen (DflashApp.open_server), idle meanwhile
        self._watch(False)
        self._suspended_at = time.monotonic()

    def on_screen_resume(self) -> None:
        """Back from a dialog (help, a confirm): the screen as it was is drawn first and the lines that came
        meanwhile a frame later; back after longer (a reopen from the fleet): they are pulled first, so that
        an old view is never shown."""
        if hasattr(self, "_backstop"):
            self._backstop.reset()  # resumed from a fresh period: resume() ticks at once when one ran out meanwhile
            self.sync()
            if time.monotonic() - self._suspended_at < RESUME_LATER_S:
                self.call_after_refresh(self._pull)
            else:
                self._pull()
        self._watch(True)

    def on_unmount(self) -> None:
        self._watch(False)

    def _watch(self, on: bool) -> None:
        """The log is on screen (on) or not: its host sends news at once while it is (FleetApi.watch_log)."""
        api = console_app(self).api
        if on != self._watching and api is not None:
            self._watching = on
            api.watch_log(self.server_name, on)

    def _pull(self) -> None:
        if KEYS_FIRST.holding():  # a key is on its way: its frame without a whole new log view in it
            if not self._pull_deferred:
                self._pull_deferred = True
                self.set_timer(PULL_DEFER_S, self._deferred_pull)
            return
        self._last_pull = time.monotonic()
        self._pull_pending = False
        try:
            view = self.query_one(LogView)
        except NoMatches:  # the screen is being torn down (the app's exit): a FleetChanged still came
            return
        view.pull()
        self.pull_spacing = PULL_FLOOD_S if view.pulled > max(8, view.view_size.height // 2) else PULL_MIN_S
        self._sync_bar()

    def _deferred_pull(self) -> None:
        self._pull_deferred = False
        self._pull()

    def pull_soon(self) -> None:
        """New events arrived: show new log lines now, at most every `pull_spacing` s while they keep coming."""
        wait = self._last_pull + self.pull_spacing - time.monotonic()
        if wait <= 0:
            self._pull()
        elif not self._pull_pending:
            self._pull_pending = True
            self.set_timer(wait, self._pull)

    def on_resize(self) -> None:
        narrow = self.app.size.width < 120
        self.set_class(narrow, "-narrow")
        if narrow != self._narrow:
            self._narrow = narrow
            self.query_one("#side").display = not narrow

    def sync(self) -> None:
        """Header, diagnosis, timeline and command from the server's page view, each only when it changed."""
        srv = self.current_server()
        if srv is None:
            self.query_one("#head", Static).update(Content(f"{self.server_name}: gone"))
            return
        app = console_app(self)
        host = app.state.hosts.get(srv.meta.host)
        page = server_page(
            srv, app.now(), watching=host is None or host.conn == "up", spec_records=app.state.spec_records
        )
        old, self.page = self.page, page
        if page != old:
            self._draw(page, old)
        self._sync_bar()
        refresh_bindings_if_changed(self)

    def _draw(self, page: ServerPage, old: ServerPage | None) -> None:
        c = colours(self)
        if old is None or (old.crumbs, old.state, old.notes) != (page.crumbs, page.state, page.notes):
            head = spans(page.crumbs, c) + "\n" + spans(page.state, c)
            if page.notes:
                head = head + "\n" + spans(page.notes, c)
            update_static(self.query_one("#head", Static), head)
        if old is None or old.diag != page.diag:
            diag = self.query_one("#diag", Static)
            update_static(diag, spans(page.diag, c))
            diag.set_class(bool(page.diag), "-show")
        if old is None or old.timeline != page.timeline:
            update_static(self.query_one("#timeline", Static), timeline_table(page.timeline, c))
        if old is None or old.command != page.command:
            update_static(self.query_one("#command", Static), Content(page.command))
        if old is None or old.facts != page.facts:
            update_static(self.query_one("#facts", Static), Content("\n".join(page.facts) or "—"))

    def _sync_bar(self) -> None:
        """The log's state on screen, not in a toast: follow/paused, filter, wrap, search matches, which log."""
        view = self.query_one(LogView)
        srv = self.current_server()
        matches = len(view.matches) if view.query_text else 0
        app = console_app(self)
        probe = shown_probe(app.probe_note, app.now(), self.server_name)  # its own server's, while recent
        key = (
            view.follow,
            view.filtered,
            view.wrap,
            view.query_text,
            matches,
            view.current,
            self.older[:2] if self.older else None,
            len(srv.previous_logs) if srv else 0,
            probe,
        )
        if key == self._bar:
            return
        self._bar = key
        c = colours(self)
        parts: list[tuple[str, str] | str] = []
        if self.older is not None:
            parts.append(
                (
                    f"previous log {self.older[0]} of {len(srv.previous_logs) if srv else '?'}: "
                    f"{fmt.clean(self.older[1], 80)} (O: current) · ",
                    f"bold {c['phase-starting']}",
                )
            )
        parts.append(("following" if view.follow else "paused (G: follow)", "bold" if view.follow else c["gpu-warm"]))
        parts.append(" · warnings/errors only (f)" if view.filtered else " · all lines (f)")
        parts.append(" · wrap (z)" if view.wrap else " · cut (z: wrap)")
        if view.query_text:
            where = f"{view.current + 1}/{matches}" if matches and view.current >= 0 else f"{matches}"
            parts.append(
                (
                    f" · “{fmt.clean(view.query_text, 30)}” {where} match{'es' if matches != 1 else ''}"
                    " (n/N, esc: clear)",
                    "bold",
                )
            )
        if srv is not None and srv.previous_logs and self.older is None:
            parts.append(f" · {fmt.plural(len(srv.previous_logs), 'older log')} (o)")
        if probe:
            parts.append(" · probe: " + fmt.clean(probe, 80))
        update_static(self.query_one("#logbar", Static), Content.assemble(*parts))

    # -- actions -------------------------------------------------------------------------
    def action_back(self) -> None:
        """Esc closes the innermost thing first: an active search, then a previous log, then the screen."""
        view = self.query_one(LogView)
        if view.query_text:
            view.search("")
            self.query_one("#search", Input).value = ""
            self._sync_bar()
            return
        if self.older is not None:
            self.action_current_log()
            return
        self.app.pop_screen()

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.add_class("-show")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "search":
            self.query_one(LogView).search(event.value)
            self._sync_bar()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            self.query_one(LogView).search(event.value)
            event.input.remove_class("-show")
            self.query_one(LogView).focus()
            self._sync_bar()

    def on_key(self, event: Key) -> None:
        box = self.query_one("#search", Input)
        if event.key == "escape" and box.has_focus:
            box.remove_class("-show")
            self.query_one(LogView).focus()
            event.stop()

    def action_next_match(self, step: int) -> None:
        self.query_one(LogView).next_match(step)
        self._sync_bar()

    def action_toggle_filter(self) -> None:
        view = self.query_one(LogView)
        view.filtered = not view.filtered
        self._sync_bar()

    def action_toggle_wrap(self) -> None:
        view = self.query_one(LogView)
        view.wrap = not view.wrap
        self._sync_bar()

    def action_older_log(self) -> None:
        """Reads the previous launch's log from the host (o again: the one before it) into the log view."""
        srv = self.current_server()
        if srv is None or not srv.previous_logs:
            self.notify("no previous log for this server", markup=False, timeout=3)
            return
        back = (self.older[0] if self.older else 0) % len(srv.previous_logs) + 1
        path = srv.previous_logs[-back]
        api = console_app(self).api
        if api is None:
            return

        async def load() -> None:
            try:
                data = await api.read_file(srv.meta.host, path)
            except Exception as e:  # an unreachable host, a deleted file: say so, keep the current log
                self.notify(
                    f"could not read {fmt.clean(path)}: {fmt.clean(str(e), 200)}", severity="error", markup=False
                )
                return
            self.older = (back, path, data.decode("utf-8", "replace").splitlines())
            view = self.query_one(LogView)
            view.follow = False
            view.pull(force=True)
            view.scroll_home(animate=False)
            self._sync_bar()

        self.run_worker(
            load(),
            name="older-log",
            group="older-log",
            exclusive=True,
            exit_on_error=False,
            description=f"reading {path}",
        )

    def action_current_log(self) -> None:
        if self.older is None:
            return
        self.older = None
        view = self.query_one(LogView)
        view.pull(force=True)
        view.action_follow()
        self._sync_bar()

    def action_traceback(self) -> None:
        view = self.query_one(LogView)
        view.pull(force=True)
        srv = self.current_server()
        d = srv.log.diagnosis if srv else None
        i = find_traceback(view.lines, d.error_line if d else None)
        if i is None:
            self.notify("no traceback in this log", markup=False, timeout=2)
            return
        view.show_line(i)
        self._sync_bar()

    def action_follow(self) -> None:
        self.query_one(LogView).action_follow()
        self._sync_bar()

    def action_copy(self) -> None:
        lines = self.query_one(LogView).visible_lines()
        self.app.copy_to_clipboard("\n".join(lines))
        self.notify(f"copied {len(lines)} lines", markup=False, timeout=2)

    def action_save(self) -> None:
        lines = self.query_one(LogView).shown_lines()
        folder = self.export_dir or user_state_dir() / "exports"
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in self.server_name)
        path = folder / f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}.log"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        except OSError as e:
            self.notify(f"could not save: {e}", severity="error", markup=False)
            return
        self.saved_path = path
        self.notify(f"saved {len(lines)} lines to {path}", markup=False)

    def action_toggle_info(self) -> None:
        """The side panel's `display`, set inline: a class would re-apply the stylesheet to the panel's whole
        subtree first (2 of an `i`'s 14 ms at 200x60, benchmarks/bench_keypress.py)."""
        side = self.query_one(SidePanel)
        with side.strips_kept():
            side.display = not side.display
        draw_now(side)
