"""GpuPane: one GPU's box on the fleet screen, drawn from FleetState so nothing it shows is parsed here."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from textual.color import Color
from textual.content import Content
from textual.geometry import Region
from textual.message import Message
from textual.widget import Widget

from console.fleet.state import FleetState, GpuState, HostState, ServerState
from console.ui import format as fmt
from console.ui.themes import SEMANTIC_DEFAULTS
from console.ui.visibility import CatchUpWhenShown, content_width, visible_widgets

HOT_C = 80
WARM_C = 70


def colours(widget: Widget) -> dict[str, str]:
    """The theme's semantic colours, with defaults before the first CSS pass (cached per theme)."""
    try:
        app = widget.app
        tv = app.theme_variables
    except Exception:
        return _colours({})
    cached = getattr(app, "_dfc_colours", None)
    if cached is not None and cached[0] is tv:
        return cached[1]
    out = _colours(tv)
    app._dfc_colours = (tv, out)  # type: ignore[attr-defined]  # a theme change installs a new dict
    return out


def _colours(tv: dict[str, str]) -> dict[str, str]:
    fg, bg = tv.get("foreground", "#D0D0D0"), tv.get("background", "#121417")
    try:
        dim = Color.parse(bg).blend(Color.parse(fg), 0.55).hex
    except Exception:
        dim = "#808080"
    return {k: tv.get(k, v) for k, v in SEMANTIC_DEFAULTS.items()} | {"dim": dim, "fg": fg}


def _row_keys(key: tuple[object, ...]) -> list[tuple[str, tuple[tuple[int, int, str], ...]]]:
    """Per display row: its text and the styles over it (from a drawn key: plain text, spans, size)."""
    plain, spans = key[0], key[1]
    assert isinstance(plain, str) and isinstance(spans, tuple)
    rows: list[tuple[str, tuple[tuple[int, int, str], ...]]] = []
    start = 0
    for text in plain.split("\n"):
        end = start + len(text)
        styles = tuple((max(sp.start, start) - start, min(sp.end, end) - start, str(sp.style))
                       for sp in spans if sp.start < end and sp.end > start)
        rows.append((text, styles))
        start = end + 1
    return rows


def phase_style(phase: str, c: dict[str, str]) -> str:
    """Colour of a phase word: green ready, red crashed, amber starting."""
    if phase == "ready":
        return c["phase-ready"]
    if phase == "serving":
        return c["phase-serving"]
    if phase == "crashed":
        return c["phase-crashed"]
    if phase == "stopped":
        return c["phase-stopped"]
    return c["phase-starting"]


def phase_class(server: ServerState | None) -> str:
    """CSS modifier for the pane border."""
    if server is None:
        return "-free"
    p = server.phase
    if p == "crashed":
        return "-crashed"
    if p in ("ready", "serving"):
        return "-ready"
    if p == "stopped":
        return "-stopped"
    return "-starting"


def log_view_key(server: ServerState) -> tuple[object, ...]:
    """What a pane shows that comes from the server's log: when a log chunk leaves this unchanged
    (lines that are neither progress, batch stats nor a crash), the pane has nothing to redraw."""
    log = server.log
    phase = server.phase
    latest = log.line_count if phase in fmt.STARTING else 0  # a starting pane shows the latest line
    return phase, log.shards, log.graphs, log.batch_lines, latest


def progress_text(server: ServerState) -> str:
    """`7/15 shards`, `bs 24/36`: the startup progress the log parser saw."""
    log = server.log
    if server.phase == "loading_weights" and log.shards:
        return f"{log.shards[0]}/{log.shards[1]} shards"
    if server.phase == "cuda_graph" and log.graphs:
        return f"bs {log.graphs[0]}/{log.graphs[1]}"
    return ""


def progress_fraction(server: ServerState) -> float | None:
    """Fraction done of the current startup step, if known."""
    pair = server.log.shards if server.phase == "loading_weights" else server.log.graphs if server.phase == "cuda_graph" else None
    if not pair or not pair[1]:
        return None
    return pair[0] / pair[1]


def server_label(server: ServerState) -> str:
    """`qwen3-8b :30000 TP2 gpu0-1` (or `external :30000` for servers the console did not start)."""
    m = server.meta
    who = fmt.clean(m.preset or m.name, 40) if m.managed else "external"
    port = f" :{m.port}" if m.port else ""
    tp = f" TP{len(m.gpus)} gpu{fmt.gpu_span(m.gpus)}" if len(m.gpus) > 1 else ""
    return f"{who}{port}{tp}"


class GpuPane(CatchUpWhenShown, Widget, can_focus=True):
    """One GPU: name, VRAM, util/temp/power, owning server, phase and throughput."""

    DEFAULT_CSS = """
    GpuPane { height: 8; border: round $panel-lighten-2; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    GpuPane.-compact { height: 7; }
    GpuPane.-tall { height: 11; }
    GpuPane.-ready { border: round $phase-ready; }
    GpuPane.-starting { border: round $phase-starting; }
    GpuPane.-crashed { border: heavy $phase-crashed; }
    GpuPane.-stopped { border: round $phase-stopped; }
    GpuPane.-stale { border: round $stale; }
    GpuPane:focus { border: double $accent; background: $boost; }
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
        self.host = host
        self.gpu = gpu
        self.marked = False
        self._titles: tuple[str, str] | None = None
        self._drawn: Content | None = None
        self._drawn_key: tuple[object, ...] | None = None
        self._class_key: tuple[object, ...] | None = None
        self.behind = False
        """State changed while the pane was off screen; it has not been redrawn since."""

    def on_focus(self) -> None:
        self.post_message(self.Selected(self.host, self.gpu))

    # -- data ----------------------------------------------------------------------------
    @property
    def state(self) -> FleetState:
        return self.app.state  # type: ignore[attr-defined]

    def _now(self) -> float:
        return self.app.now()  # type: ignore[attr-defined]

    def server(self) -> ServerState | None:
        return self.state.server_on_gpu(self.host, self.gpu)

    def sync(self, visible: Container[Widget] | None = None) -> None:  # type: ignore[override]
        """Re-reads state: classes, titles and a repaint; a pane off screen only notes that it is behind."""
        if self not in (visible_widgets(self) if visible is None else visible):
            self.behind = True  # caught up on show/resize, or by HostList.catch_up after a scroll
            return
        self.behind = False
        host = self.state.host(self.host)
        g = host.gpus.get(self.gpu)
        srv = self.server()
        now = self._now()
        stale = host.stale(now)
        h = self.app.size.height
        classes = (phase_class(srv), stale and (srv is None or srv.phase != "crashed"), self.marked,
                   h < 30, h >= 44)
        if classes != self._class_key:  # each set_class restyles; 64 panes × 4 syncs/s add up
            self._class_key = classes
            for cls in ("-free", "-ready", "-starting", "-crashed", "-stopped"):
                self.set_class(cls == classes[0], cls)
            self.set_class(classes[1], "-stale")
            self.set_class(self.marked, "-marked")
            self.set_class(classes[3], "-compact")
            self.set_class(classes[4], "-tall")
        name = fmt.short_gpu_name(g.reading.name) if g else "?"
        title = f"GPU{self.gpu} {name}"
        sub = ""
        if stale:
            a = host.age_s(now)
            sub = f"stale {fmt.age(a)}" if a is not None else host.conn
        if self.marked:
            sub = ("✓ marked " + sub).strip()
        if (title, sub) != self._titles:  # assigning a border title repaints even when it is the same
            self._titles = (title, sub)
            self.border_title = Content(title)
            self.border_subtitle = Content(sub) if sub else None
        content = self._build()
        key = (content.plain, tuple(content.spans), self.outer_size)
        if key == self._drawn_key:
            return
        old = self._drawn_key
        self._drawn_key = key
        self._drawn = content
        self._repaint_changed_lines(old, key)

    def _repaint_changed_lines(self, old: tuple[object, ...] | None, new: tuple[object, ...]) -> None:
        """Refresh only the rows whose text or styles changed (a telemetry tick changes one or two).

        Textual redraws the bounding box of a frame's dirty regions across every layer beneath them;
        whole-pane refreshes of a dozen panes made each fleet frame several milliseconds.
        """
        if old is None or old[2] != new[2]:
            self.refresh()
            return
        before, after = _row_keys(old), _row_keys(new)
        if len(before) != len(after):
            self.refresh()
            return
        width = content_width(self)
        rows = [Region(0, y, width, 1) for y, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        if rows:
            self.refresh(*rows)

    # -- drawing -------------------------------------------------------------------------
    def render(self) -> Content:
        if (not self.behind and self._drawn is not None and self._drawn_key is not None
                and self._drawn_key[2] == self.outer_size):
            return self._drawn
        self._drawn = self._build()
        return self._drawn

    def _build(self) -> Content:
        host = self.state.host(self.host)
        g = host.gpus.get(self.gpu)
        srv = self.server()
        c = colours(self)
        stale = host.stale(self._now())
        w = max(10, content_width(self))
        compact = self.has_class("-compact")
        lines = [self._vram(g, w, c), self._telemetry(g, c, host)]
        lines += self._server_lines(srv, g, w, c, compact)
        out = Content("\n").join(lines)
        return out.stylize(c["stale"]) if stale else out

    def _vram(self, g: GpuState | None, w: int, c: dict[str, str]) -> Content:
        if g is None:
            return Content.styled("no data", c["dim"])
        r = g.reading
        nums = fmt.mem_pair(r.memory_used_mib, r.memory_total_mib)
        frac = (r.memory_used_mib / r.memory_total_mib) if r.memory_used_mib is not None and r.memory_total_mib else None
        full, empty = fmt.bar(frac, max(3, w - len(nums) - 1))
        return Content.assemble((full, c["vram-bar"]), (empty, c["dim"]), " ", nums)

    def _telemetry(self, g: GpuState | None, c: dict[str, str], host: HostState) -> Content:
        if g is None:
            return Content.styled(fmt.clean(host.telemetry_error or host.last_error or host.conn, 60), c["dim"])
        r = g.reading
        util = "?" if r.utilization_pct is None else f"{r.utilization_pct}%"
        t = r.temperature_c
        t_style = c["gpu-hot"] if t is not None and t >= HOT_C else c["gpu-warm"] if t is not None and t >= WARM_C else ""
        power = "?" if r.power_w is None else f"{r.power_w:.0f}"
        limit = f"/{r.power_limit_w:.0f}" if r.power_limit_w else ""
        return Content.assemble("util ", (util.rjust(4), "bold"), "  ", ("?°C" if t is None else f"{t}°C", t_style),
                             "  ", f"{power}{limit} W")

    def _server_lines(self, srv: ServerState | None, g: GpuState | None, w: int, c: dict[str, str],
                      compact: bool) -> list[Content]:
        if srv is None:
            procs = g.processes if g else []
            if procs:
                p = procs[0]
                return [Content.styled(f"in use: {fmt.clean(p.name, 30)} pid {p.pid}", c["external"])]
            return [Content.styled("free", c["dim"])]
        head = Content.styled(server_label(srv), c["external"] if not srv.meta.managed else "bold")
        phase = srv.phase
        ps = phase_style(phase, c)
        if phase in ("crashed", "stopped"):
            return self._ended(srv, head, phase, ps, c, compact, w)
        icon = "●" if phase in ("ready", "serving") else "◐"
        word = fmt.PHASE_WORDS.get(phase, phase)
        status = Content.assemble((f"{icon} {word}", f"bold {ps}"))
        prog = progress_text(srv)
        if prog:
            status = status + " " + prog
            frac = progress_fraction(srv)
            room = w - status.cell_length - 1
            if frac is not None and room >= 4:
                full, empty = fmt.bar(frac, room)
                status = status + Content.assemble(" ", (full, ps), (empty, c["dim"]))
        elif phase in ("ready", "serving") and srv.health is not None and srv.health != "ok":
            status = status + Content.styled(f" (health {fmt.clean(srv.health)})", c["phase-starting"])
        rows = [head, status]
        if phase in fmt.STARTING:
            return rows + self._starting(srv, c, compact)
        tput = self._throughput(srv, w, c)
        load = self._load(srv)
        if compact:
            if phase in ("ready", "serving"):
                rows = [head, status + "  " + load, tput]
            return rows
        if self.has_class("-tall") and srv.throughput_history:
            hist = list(srv.throughput_history)
            top = fmt.nice_ceiling(max([*hist, 100.0]))
            tput = Content.assemble((f"{fmt.rate(srv.gen_throughput)} tok/s", "bold"),
                                    (f"   scale 0–{fmt.rate(top)}", c["dim"]))
            graph = [Content.styled(line, c["phase-serving"]) for line in fmt.sparkline_rows(hist, w, 3, top=top)]
            return [*rows, load, tput, *graph]
        return [*rows, tput, load]

    def _ended(self, srv: ServerState, head: Content, phase: str, ps: str, c: dict[str, str],
               compact: bool, w: int) -> list[Content]:
        """After the end only what is true of the end: when, how, and the last figures marked as last."""
        when = fmt.end_words(phase, srv.alive, srv.ended_at, self._now())
        code = f" (exit {srv.exit_status})" if srv.exit_status is not None else ""
        if phase == "crashed":
            d = srv.log.diagnosis
            status = Content.styled(f"✖ {when}{code}", f"bold {ps}")
            cause = Content.styled(fmt.clean(d.summary) if d else srv.signal or "the process ended", ps)
            fix = [Content.styled("fix: " + fmt.clean(d.hint), c["dim"])] if d and d.hint else []
            at = {"traceback": "enter: log at traceback", "error": "enter: log at the error"}.get(
                srv.log.crash_in_log or "", "enter: its log")
            keys = [] if compact else [Content.styled(f"{at} · r: relaunch", c["dim"])]
            if compact or head.cell_length + 2 + status.cell_length <= w:
                return [head + Content.styled(f"  {status.plain}", f"bold {ps}"), cause, *fix, *keys]
            # a narrow pane would cut 'crashed N ago' off the label's line: its own row (the keys are in the footer)
            return [head, status, cause, *fix, *(keys if self.has_class("-tall") else [])]
        rows = [head, Content.styled(f"■ {when}{code}", f"bold {ps}")]
        log = srv.log
        last = fmt.last_figures(log.gen_throughput, log.running, log.queued, log.token_usage)
        if last:
            rows.append(Content.styled(last, c["dim"]))
        if not compact:
            rows.append(Content.styled("enter: its log · r: relaunch", c["dim"]))
        return rows

    def _starting(self, srv: ServerState, c: dict[str, str], compact: bool) -> list[Content]:
        """While coming up: how long it has been at it, and the log's latest line (dimmed)."""
        started = srv.meta.started_at
        since = f"starting for {fmt.age(max(0.0, self._now() - started))}" if started else "starting"
        rows = [Content.styled(since, c["dim"])]
        if not compact and srv.log.lines:
            rows.append(Content.styled(fmt.clean(srv.log.lines[-1])[-200:], c["dim"]))  # masked whole, then cut
        return rows

    def _throughput(self, srv: ServerState, w: int, c: dict[str, str]) -> Content:
        tp = srv.gen_throughput
        if not srv.meta.managed and tp is None:
            pid = f" pid {srv.meta.pid}" if srv.meta.pid else ""
            return Content.styled(f"external: not started here{pid}", c["dim"])
        if tp is None and not srv.throughput_history:
            return Content.styled("idle: no decode batches yet", c["dim"])
        label = f"{fmt.rate(tp)} tok/s".rjust(11)
        spark = fmt.sparkline(list(srv.throughput_history), max(0, w - len(label) - 1))
        return Content.assemble((label, "bold"), " ", (spark, c["phase-serving"]))

    def _load(self, srv: ServerState) -> Content:
        log = srv.log
        run = "—" if log.running is None else str(log.running)
        q = "—" if log.queued is None else str(log.queued)
        kv = "—" if log.token_usage is None else f"{log.token_usage * 100:.0f}%"
        return Content(f"run {run}  queue {q}  KV {kv}")
