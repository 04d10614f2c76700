"""ServerScreen (`enter`): one server's live log, stats, phase timeline vs. the last launch, command and diagnosis."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from console.config import user_state_dir
from console.fleet.state import ServerState
from console.ui import format as fmt
from console.ui.bindings import refresh_bindings_if_changed
from console.ui.logsearch import find_traceback
from console.ui.screens.fleet import ServerKeys
from console.ui.widgets.gpu_pane import colours, phase_style, progress_text, server_label
from console.ui.widgets.log_view import LogView

TIMELINE = ("launching", "loading_weights", "kv_cache", "cuda_graph", "warming")


def timeline_table(srv: ServerState) -> Table:
    """Seconds per startup phase for this launch and the previous one of the same preset."""
    t = Table(box=None, expand=True, pad_edge=False, show_edge=False)
    t.add_column("phase")
    t.add_column("now", justify="right")
    t.add_column("last", justify="right")
    t.add_column("Δ", justify="right")
    cur, prev = srv.log.timeline, srv.previous_timeline
    for p in TIMELINE:
        a, b = cur.get(p), prev.get(p)
        delta = Text("")
        if a is not None and b is not None:
            d = a - b
            delta = Text(f"{d:+.1f} s", style="red" if d > 0.5 else "green" if d < -0.5 else "")
        t.add_row(fmt.PHASE_WORDS[p], fmt.duration(a), fmt.duration(b), delta)
    ta, tb = sum(cur.get(p, 0.0) for p in TIMELINE), sum(prev.get(p, 0.0) for p in TIMELINE)
    t.add_row(Text("total", style="bold"), fmt.duration(ta if cur else None), fmt.duration(tb if prev else None),
              Text(f"{ta - tb:+.1f} s") if cur and prev else Text(""))
    return t


def fact_items(facts: object) -> list[tuple[str, object]]:
    """The parser's facts (a dataclass or a dict) as (name, value) pairs, unknowns left out."""
    if dataclasses.is_dataclass(facts) and not isinstance(facts, type):
        pairs = [(f.name, getattr(facts, f.name)) for f in dataclasses.fields(facts)]
    elif isinstance(facts, dict):
        pairs = sorted(facts.items())
    else:
        pairs = []
    return [(str(k), v) for k, v in pairs if v not in (None, "", [], {})]



PULL_MIN_S = 0.03
"""New log lines reach the screen within one frame or so, but at most ~33 pulls a second."""

class ServerScreen(ServerKeys, Screen):
    """Log on the left, facts on the right (below when narrow; `i` toggles them)."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="back", tooltip="Back to the fleet."),
        Binding("slash", "search", "Search", id="search", tooltip="Search the log (highlights, keeps context)."),
        Binding("n", "next_match(1)", "Next", id="search-next", show=False),
        Binding("N", "next_match(-1)", "Prev", id="search-prev", show=False),
        Binding("f", "toggle_filter", "Warn/err", id="filter", tooltip="Only warnings, errors and tracebacks."),
        Binding("x", "traceback", "Traceback", id="traceback", tooltip="Jump to the crash's traceback."),
        Binding("end,G", "follow", "Follow", id="follow", show=False, tooltip="Follow the log tail again."),
        Binding("y", "copy", "Copy", id="copy", show=False, tooltip="Copy the visible lines."),
        Binding("w", "save", "Save", id="save", show=False, tooltip="Save the shown lines to a file."),
        Binding("i", "toggle_info", "Info", id="info", tooltip="Show/hide timeline and command."),
        *ServerKeys.SERVER_BINDINGS,
    ]
    DEFAULT_CSS = """
    ServerScreen #head { height: auto; padding: 0 1; background: $panel; }
    ServerScreen #diag { height: auto; padding: 0 1; border-left: thick $phase-crashed; margin: 0 0 0 1;
                         display: none; }
    ServerScreen #diag.-show { display: block; }
    ServerScreen #body { height: 1fr; }
    ServerScreen LogView { width: 1fr; height: 1fr; }
    ServerScreen #side { width: 56; height: 1fr; border-left: solid $panel-lighten-2; padding: 0 1; }
    ServerScreen.-narrow #body { layout: vertical; }
    ServerScreen.-narrow #side { width: 1fr; height: 12; border-left: none; border-top: solid $panel-lighten-2; }
    ServerScreen #side.-hidden { display: none; }
    ServerScreen #search { dock: bottom; display: none; }
    ServerScreen #search.-show { display: block; }
    ServerScreen .section { text-style: bold; color: $accent; margin-top: 1; }
    """

    def __init__(self, name: str) -> None:
        super().__init__()
        self.server_name = name
        self.export_dir: Path | None = None

    def current_server(self) -> ServerState | None:
        return self.app.state.servers.get(self.server_name)  # type: ignore[attr-defined]

    def current_host(self) -> str | None:
        s = self.current_server()
        return s.meta.host if s else None

    def _source(self) -> tuple[list[str] | object, int]:
        s = self.current_server()
        if s is None:
            return [], 0
        return s.log.lines, s.log.line_count

    def compose(self) -> ComposeResult:
        yield Static(id="head", markup=False)
        yield Static(id="diag", markup=False)
        with Horizontal(id="body"):
            yield LogView(self._source, id="log")  # type: ignore[arg-type]
            with VerticalScroll(id="side"):
                yield Static("Startup timeline (s)", classes="section", markup=False)
                yield Static(id="timeline", markup=False)
                yield Static("Launch command", classes="section", markup=False)
                yield Static(id="command", markup=False)
                yield Static("Facts", classes="section", markup=False)
                yield Static(id="facts", markup=False)
        yield Input(placeholder="search the log (enter: keep, esc: close)", id="search")
        yield Footer()

    def on_mount(self) -> None:
        self._narrow = None
        self._last_pull = 0.0
        self._pull_pending = False
        self.set_interval(0.25, self._pull)  # a backstop; new lines normally arrive through pull_soon
        self.sync()
        self.query_one(LogView).focus()
        srv = self.current_server()
        if srv is not None and srv.phase == "crashed":
            self.call_after_refresh(self.action_traceback)

    def _pull(self) -> None:
        self._last_pull = time.monotonic()
        self._pull_pending = False
        self.query_one(LogView).pull()

    def pull_soon(self) -> None:
        """New events arrived: show new log lines now, at most every PULL_MIN_S during a flood."""
        wait = self._last_pull + PULL_MIN_S - time.monotonic()
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
            self.query_one("#side").set_class(narrow, "-hidden")

    def sync(self) -> None:
        """Header, diagnosis, timeline and command from state (the log pulls itself)."""
        srv = self.current_server()
        if srv is None:
            self.query_one("#head", Static).update(Content(f"{self.server_name}: gone"))
            return
        c = colours(self)
        now = self.app.now()  # type: ignore[attr-defined]
        m = srv.meta
        phase = srv.phase
        log = srv.log
        head = Content.assemble(
            (fmt.clean(m.name), "bold"), f"  {fmt.clean(m.host)} · GPU {fmt.gpu_span(m.gpus)} · ",
            server_label(srv), "\n", *self._state_line(srv, phase, now, c), f" · {log.line_count} lines",
        )
        notes = []
        if not m.managed:
            notes.append("external: not started by this console" + ("" if log.line_count else "; its log is not tailed"))
        if srv.log_error:
            notes.append(f"log: {fmt.clean(srv.log_error, 160)}")
        if notes:
            head = head + Content.styled("\n" + " · ".join(notes), c["external"] if not m.managed else c["gpu-warm"])
        self.query_one("#head", Static).update(head)
        diag = self.query_one("#diag", Static)
        d = log.diagnosis
        if phase == "crashed" or d is not None:
            cause = fmt.clean(d.summary) if d else "the process ended"
            parts: list[tuple[str, str] | str] = [("✖ crashed: " if phase == "crashed" else "! ", f"bold {c['phase-crashed']}"),
                                                  (cause, c["phase-crashed"])]
            if d and d.hint:
                parts += ["\n", ("fix: ", "bold"), fmt.clean(d.hint)]
            if d and d.error_line:
                parts += ["\n", ("at: ", "bold"), (fmt.clean(d.error_line, 300), c["dim"])]
            jump = {"traceback": "x: jump to traceback · ", "error": "x: jump to the error · "}.get(log.crash_in_log or "", "")
            parts += ["\n", (f"{jump}r: relaunch (this log is kept)", c["dim"])]
            diag.update(Content.assemble(*parts))
            diag.add_class("-show")
        else:
            diag.remove_class("-show")
        self.query_one("#timeline", Static).update(timeline_table(srv))
        self.query_one("#command", Static).update(Content(fmt.clean(m.command or " ".join(m.argv) or "(unknown)")))
        facts = [f"{k.replace('_', ' ')}: {fmt.clean(str(v), 120)}" for k, v in fact_items(log.facts)]
        if srv.previous_logs:
            facts.append(f"previous logs: {len(srv.previous_logs)} (last: {fmt.clean(srv.previous_logs[-1])})")
        if m.log_path:
            facts.append(f"log: {fmt.clean(m.log_path)}")
        self.query_one("#facts", Static).update(Content("\n".join(facts) or "—"))
        refresh_bindings_if_changed(self)

    @staticmethod
    def _state_line(srv: ServerState, phase: str, now: float, c: dict[str, str]) -> list[tuple[str, str] | str]:
        """Live figures while it runs; after the end only the end (when, how, how long it ran, last figures)."""
        m, log = srv.meta, srv.log
        word = (fmt.PHASE_WORDS.get(phase, phase), f"bold {phase_style(phase, c)}")
        if phase in ("crashed", "stopped"):
            how = "stop requested by the console" if srv.stopping else ""
            ran = (f"ran {fmt.age(max(0.0, srv.ended_at - m.started_at))}"
                   if srv.ended_at is not None and m.started_at else "")
            when = ("process still running" if srv.alive else
                    f"ended {fmt.age(max(0.0, now - srv.ended_at))} ago" if srv.ended_at is not None else "")
            last = fmt.last_figures(log.gen_throughput, log.running, log.queued, log.token_usage)
            return [word, *(f" · {x}" for x in (when, how, ran, last) if x)]
        prog = progress_text(srv)
        up = f"up {fmt.age(max(0.0, now - m.started_at))}" if m.started_at else "up ?"
        return [word, f" {prog}" if prog else "",
                f" · health {srv.health or '—'} · {up} · {fmt.rate(srv.gen_throughput)} tok/s · run "
                f"{'—' if log.running is None else log.running} · queue {'—' if log.queued is None else log.queued}"
                f" · KV {'—' if log.token_usage is None else f'{log.token_usage * 100:.0f}%'}"
                f"{f' · VRAM {fmt.gib(srv.memory_mib)} GiB' if srv.memory_mib else ''}"]

    # -- actions -------------------------------------------------------------------------
    def action_back(self) -> None:
        self.app.pop_screen()

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.add_class("-show")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "search":
            self.query_one(LogView).search(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            n = self.query_one(LogView).search(event.value)
            self.notify(f"{n} match{'es' if n != 1 else ''} for {event.value!r}", markup=False, timeout=2)
            self.query_one(LogView).focus()

    def on_key(self, event) -> None:  # type: ignore[no-untyped-def]
        box = self.query_one("#search", Input)
        if event.key == "escape" and box.has_focus:
            box.remove_class("-show")
            self.query_one(LogView).focus()
            event.stop()

    def action_next_match(self, step: int) -> None:
        self.query_one(LogView).next_match(step)

    def action_toggle_filter(self) -> None:
        view = self.query_one(LogView)
        view.filtered = not view.filtered
        self.notify("warnings and errors only" if view.filtered else "all lines", timeout=2, markup=False)

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

    def action_follow(self) -> None:
        self.query_one(LogView).action_follow()

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
        self.query_one("#side").toggle_class("-hidden")
