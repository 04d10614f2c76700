"""Pure view-model: FleetState (+ now) turned into frozen PaneView/HostView/ServerView values.

Widgets draw a view and redraw only when the next one differs (`==` on frozen dataclasses), so no
widget decides by hand what changed. Nothing here imports Textual: every word a pane shows is
computed (and unit-tested) here; a widget only places it. Text is a tuple of `(text, tone)` spans
where a tone is a semantic colour name (`ready`, `crashed`, `dim`, ...) the widget maps to the theme.
"""

from __future__ import annotations

from collections.abc import Mapping, Reversible, Sequence
from dataclasses import dataclass
from itertools import islice

from console.fleet.events import SpecLaunchRecord
from console.fleet.specstate import FIGURE_STALE_S, SHORT, SpecStatus, spec_line, spec_status
from console.fleet.state import STALE_S, FleetState, GpuPoint, GpuState, HostState, ServerState
from console.sglang.phase import STARTING_PHASES, Phase
from console.sglang.specdec import history_median, percentile
from console.ui import format as fmt

HOT_C = 80
WARM_C = 70
LOG_TAIL = 40
"""Log lines a view carries; a pane shows as many as it has rows for."""
LIVE_S = 2.5
"""GPU figures younger than this are called live (telemetry arrives every second)."""

Span = tuple[str, str]
"""(text, tone): tone is '' (plain), 'bold', or a semantic colour name the widget maps to the theme."""


@dataclass(frozen=True)
class Series:
    """One history graph: values on a fixed zero-based scale `0..top` in `unit`, oldest first."""

    name: str
    unit: str
    top: float
    values: tuple[float, ...]
    tone: str
    interval_s: float = 1.0
    """Seconds between two values (for the graph's time label); 0 when they are not evenly spaced."""

    def scale_text(self) -> str:
        """`VRAM 0–48 GiB`, `util 0–100%`, `tok/s 0–500`."""
        top = f"{self.top:.0f}" if self.top >= 10 else f"{self.top:g}"
        sep = "" if self.unit == "%" else " "
        return f"{self.name} 0–{top}{sep}{self.unit}".rstrip()


@dataclass(frozen=True)
class ServerView:
    """What any screen says about one server: identity, phase, progress, figures or how it ended."""

    name: str
    label: str
    """`qwen3-8b :30000 TP2 gpu0-1`, or `external :30010`."""
    managed: bool
    phase: str
    tone: str
    status: tuple[Span, ...]
    """`● serving`, `◐ loading weights 7/15 shards`, `✖ crashed 50 s ago (exit 1)`."""
    progress: float | None
    """Fraction done of the current startup step, when known (drawn as a bar)."""
    ended: bool
    gpus: tuple[int, ...]
    load: str
    """`run 3 · queue 0 · KV 42%` (live servers)."""
    load_short: str
    """`run 3 · q 0 · KV 42%`, for a compact pane's status line."""
    tok_s: str
    """`267 tok/s` or why there is no figure (`idle: no decode batches yet`)."""
    tok_series: Series | None
    detail: tuple[tuple[Span, ...], ...]
    """Lines under the status: time starting, or the cause, fix and keys of an ended server."""
    log_tail: tuple[str, ...]
    """The log's last lines, cleaned and masked, oldest first."""
    line_count: int
    spec: tuple[Span, ...] = ()
    """`spec DFLASH · accept 3.12` and the standing spec alarm, for a server with speculative decoding."""
    accept_series: Series | None = None
    """Accept length per decode line on a fixed 0..draft tokens + 1 scale."""

    @property
    def tp(self) -> int:
        return len(self.gpus)


@dataclass(frozen=True)
class PaneView:
    """One GPU pane: telemetry, history, and the server on it (or who it belongs to in a TP group)."""

    host: str
    gpu: int
    title: str
    subtitle: str
    kind: str
    """Border class: free, ready, starting, crashed, stopped."""
    stale: bool
    marked: bool
    vram: tuple[Span, ...]
    vram_frac: float | None
    util_pct: int | None
    util: tuple[Span, ...]
    """`87%  71°C  231/300 W`."""
    occupant: tuple[Span, ...]
    """For a GPU without a server: `free` or the process holding it."""
    server: ServerView | None
    group_of: str
    """For a TP group's other GPUs: `TP2 with GPU0 · qwen3-8b serving` (the server is shown on its first GPU)."""
    vram_series: Series | None
    util_series: Series | None


@dataclass(frozen=True)
class HostView:
    """A host band's header line and whether it has GPUs to show."""

    name: str
    header: tuple[Span, ...]
    gpus: tuple[int, ...]
    empty_text: str
    unplaced: tuple[tuple[Span, ...], ...] = ()
    """One line per server whose GPUs have no pane (no GPU data yet, or nvidia-smi lost them): phase, label and
    its last log line, so a server is never off the fleet screen just because telemetry failed."""


# -- small words --------------------------------------------------------------------------------
def phase_tone(phase: str) -> str:
    """Semantic colour of a phase word."""
    return phase if phase in (Phase.READY, Phase.SERVING, Phase.CRASHED, Phase.STOPPED) else "starting"


def pane_kind(server: ServerState | None) -> str:
    if server is None:
        return "free"
    p = server.phase
    return "ready" if p.up else p.value if p.terminal else "starting"


def progress_text(server: ServerState) -> str:
    """`7/15 shards`, `bs 24/36`: the startup progress the log parser saw."""
    log = server.log
    if server.phase is Phase.LOADING_WEIGHTS and log.shards:
        return f"{log.shards[0]}/{log.shards[1]} shards"
    if server.phase is Phase.CUDA_GRAPH and log.graphs:
        return f"bs {log.graphs[0]}/{log.graphs[1]}"
    return ""


def progress_fraction(server: ServerState) -> float | None:
    p = server.phase
    pair = server.log.shards if p is Phase.LOADING_WEIGHTS else server.log.graphs if p is Phase.CUDA_GRAPH else None
    return pair[0] / pair[1] if pair and pair[1] else None


def server_label(server: ServerState) -> str:
    """`qwen3-8b :30000 TP2 gpu0-1` (or `external :30000` for servers the console did not start)."""
    m = server.meta
    who = fmt.clean(m.preset or m.name, 40) if m.managed else "external"
    port = f" :{m.port}" if m.port else ""
    tp = f" TP{len(m.gpus)} gpu{fmt.gpu_span(m.gpus)}" if len(m.gpus) > 1 else ""
    return f"{who}{port}{tp}"


def load_text(server: ServerState, queue: str = "queue", now: float | None = None, watching: bool = True) -> str:
    """`run 3 · queue 0 · KV 42%`: the one spelling of a live server's load (pane and server screen); with `now`,
    a decode-idle server runs 0 (ServerState.live_running)."""
    log = server.log
    running = log.running if now is None else server.live_running(now, watching)
    run = "—" if running is None else str(running)
    q = "—" if log.queued is None else str(log.queued)
    kv = "—" if log.token_usage is None else f"{log.token_usage * 100:.0f}%"
    return f"run {run} · {queue} {q} · KV {kv}"


def temp_tone(t: int | None) -> str:
    return "hot" if t is not None and t >= HOT_C else "warm" if t is not None and t >= WARM_C else ""


# -- servers ------------------------------------------------------------------------------------
def server_view(
    srv: ServerState, now: float, *, tail: int = LOG_TAIL, points: int | None = None, watching: bool = True
) -> ServerView:
    """`tail`: log lines to carry; `points`: the newest throughput points to carry (None: all); `watching`: its
    host is up, so a log with no decode line for a while means nothing runs (ServerState.decode_idle)."""
    phase = srv.phase
    tone = phase_tone(phase)
    ended = phase.terminal
    word = fmt.PHASE_WORDS.get(phase, phase)
    code = f" (exit {srv.exit_status})" if srv.exit_status is not None else ""
    detail: list[tuple[Span, ...]] = []
    progress = None
    if ended:
        when = fmt.end_words(phase, srv.alive, srv.ended_at, now)
        icon = "✖" if phase is Phase.CRASHED else "■"
        status: tuple[Span, ...] = ((f"{icon} {when}{code}", f"bold {tone}"),)
        if phase is Phase.CRASHED:
            d = srv.log.diagnosis
            detail.append(((fmt.clean(d.summary) if d else srv.signal or "the process ended", tone),))
            if d and d.hint:
                detail.append((("fix: " + fmt.clean(d.hint), "dim"),))
        else:
            last = fmt.last_figures(srv.log.gen_throughput, srv.log.running, srv.log.queued, srv.log.token_usage)
            if last:
                detail.append(((last, "dim"),))
        at = {"traceback": "enter: log at traceback", "error": "enter: log at the error"}.get(
            srv.log.crash_in_log or "", "enter: its log"
        )
        detail.append(((f"{at} · r: relaunch", "dim"),))
    elif srv.stopping:  # a stop was sent and the process drains: not `serving` any more, not yet stopped
        status = ((f"■ {fmt.exiting_words(Phase.STOPPED)}", f"bold {phase_tone(Phase.STOPPED)}"),)
    else:
        warm = warming_up(srv)
        icon = "●" if phase.up and not warm else "◐"
        spans: list[Span] = [(f"{icon} {WARMING if warm else word}", f"bold {'starting' if warm else tone}")]
        prog = progress_text(srv)
        if prog:
            spans.append((f" {prog}", ""))
            progress = progress_fraction(srv)
        elif phase.up and srv.health not in (None, "ok", "warming"):
            spans.append((f" (health {fmt.clean(srv.health)})", "starting"))
        status = tuple(spans)
        if phase.starting:
            started = srv.meta.started_at
            detail.append(((f"starting for {fmt.age(max(0.0, now - started))}" if started else "starting", "dim"),))
    spec_spans, accept_series = _spec_fields(srv, now, ended, points)
    return ServerView(
        name=srv.name,
        label=server_label(srv),
        managed=srv.meta.managed,
        phase=phase,
        tone=tone,
        status=status,
        progress=progress,
        ended=ended,
        gpus=tuple(srv.meta.gpus),
        load="" if ended else load_text(srv, now=now, watching=watching),
        load_short="" if ended else load_text(srv, "q", now, watching),
        tok_s=_tok_text(srv, now, watching),
        tok_series=_tok_series(srv, points),
        detail=tuple(detail),
        log_tail=tuple(fmt.clean(x)[-400:] for x in _tail(srv.log.lines, tail)) if tail > 0 else (),
        line_count=srv.log.line_count,
        spec=spec_spans,
        accept_series=accept_series,
    )


def _spec_fields(
    srv: ServerState, now: float, ended: bool, points: int | None
) -> tuple[tuple[Span, ...], Series | None]:
    """The spec line and accept graph of a live server with speculative decoding (nothing for any other)."""
    st = spec_status(srv, now)
    if st is None or ended:
        return (), None
    spans: list[Span] = [(spec_line(st, now, FIGURE_STALE_S), "")]
    if st.warnings:
        kind, text = st.warnings[0]
        spans.append((" ⚠ " + SHORT.get(kind, fmt.clean(text, 40)), "bold hot"))
    series = None
    if st.history:
        vals = st.history if points is None else st.history[-max(0, points) :] if points else ()
        series = Series("accept", "", st.config.accept_max, tuple(vals), "serving", interval_s=0)
    return tuple(spans), series


WARMING = "warming up"
"""The one state of a server whose log said ready while /health still answers 503 (not `ready (health warming)`)."""


def warming_up(srv: ServerState) -> bool:
    return srv.phase.up and srv.health == "warming"


def _tail(lines: Reversible[str], n: int) -> list[str]:
    """The last `n` of a deque (or list) without copying the 20,000 lines before them."""
    return list(islice(reversed(lines), n))[::-1]


def _tok_text(srv: ServerState, now: float, watching: bool = True) -> str:
    tp = srv.live_throughput(now, watching)
    if not srv.meta.managed and tp is None:
        pid = f" pid {srv.meta.pid}" if srv.meta.pid else ""
        return f"external: not started here{pid}"
    if tp is None and not srv.throughput_history:
        return "idle: no decode batches yet"
    return f"{fmt.rate(tp)} tok/s{tok_age(srv, now, watching)}"


def tok_age(srv: ServerState, now: float, watching: bool = True) -> str:
    """` (42 s ago)` beside a tok/s figure older than the stale limit; nothing for a current one or a decode-idle
    server's 0 (that zero is now)."""
    age = srv.throughput_age(now)
    if age is None or age <= STALE_S or srv.decode_idle(now, watching) or not srv.alive:
        return ""
    return f" ({fmt.age(age)} ago)"


def _tok_series(srv: ServerState, points: int | None = None) -> Series | None:
    if not srv.throughput_history or not srv.alive:
        return None
    hist = srv.throughput_history
    top = fmt.nice_ceiling(max(max(hist), 100.0))  # over all it holds, so the scale does not jump as points go
    vals = tuple(hist) if points is None else _newest(hist, points)
    return Series("tok/s", "", top, vals, "serving", interval_s=0)


def _newest(values: Reversible[float], n: int) -> tuple[float, ...]:
    return tuple(islice(reversed(values), max(0, n)))[::-1]


# -- panes --------------------------------------------------------------------------------------
def pane_view(
    state: FleetState,
    host: str,
    gpu: int,
    now: float,
    *,
    marked: bool = False,
    points: int | None = None,
    graphs: bool = True,
    tail: int = LOG_TAIL,
) -> PaneView:
    """`points`, `graphs`, `tail`: how much history and log the pane has room for (a 7-row pane draws no
    graph, so its view carries none, and a telemetry tick that moves only the history changes nothing)."""
    h = state.host(host)
    g = h.gpus.get(gpu)
    srv = state.server_on_gpu(host, gpu)
    stale = h.stale(now)
    sub = ""
    if stale:
        a = h.age_s(now)
        sub = f"stale {fmt.age(a)}" if a is not None else h.conn
    if marked:
        sub = ("✓ marked " + sub).strip()
    lead = srv is None or not srv.meta.gpus or min(srv.meta.gpus) == gpu
    group_of = ""
    sv = None
    if srv is not None:
        if lead:
            sv = server_view(srv, now, tail=tail, points=points, watching=h.conn == "up")
        else:
            first = min(srv.meta.gpus)
            group_of = (
                f"TP{len(srv.meta.gpus)} with GPU{first}: {fmt.PHASE_WORDS.get(srv.phase, srv.phase)} · "
                f"{server_label(srv).split(' TP')[0]}"
            )
    return PaneView(
        host=host,
        gpu=gpu,
        title=f"GPU{gpu} {fmt.short_gpu_name(g.reading.name) if g else '?'}",
        subtitle=sub,
        kind=pane_kind(srv),
        stale=stale,
        marked=marked,
        vram=_vram(g),
        vram_frac=_vram_frac(g),
        util_pct=g.reading.utilization_pct if g else None,
        util=_util(g, h),
        occupant=_occupant(g, srv),
        server=sv,
        group_of=group_of,
        vram_series=_vram_series(g, points) if graphs else None,
        util_series=_util_series(g, points) if graphs else None,
    )


def _vram(g: GpuState | None) -> tuple[Span, ...]:
    if g is None:
        return (("no data", "dim"),)
    r = g.reading
    return ((fmt.mem_pair(r.memory_used_mib, r.memory_total_mib), ""),)


def _vram_frac(g: GpuState | None) -> float | None:
    if g is None:
        return None
    r = g.reading
    return r.memory_used_mib / r.memory_total_mib if r.memory_used_mib is not None and r.memory_total_mib else None


def _util(g: GpuState | None, h: HostState) -> tuple[Span, ...]:
    if g is None:
        return ((fmt.clean(h.telemetry_error or h.last_error or h.conn, 60), "dim"),)
    r = g.reading
    util = "?" if r.utilization_pct is None else f"{r.utilization_pct}%"
    t = r.temperature_c
    power = "?" if r.power_w is None else f"{r.power_w:.0f}"
    limit = f"/{r.power_limit_w:.0f}" if r.power_limit_w else ""
    return (
        (util.rjust(4), "bold"),
        ("  ", ""),
        ("?°C" if t is None else f"{t}°C", temp_tone(t)),
        ("  ", ""),
        (f"{power}{limit} W", ""),
    )


def _occupant(g: GpuState | None, srv: ServerState | None) -> tuple[Span, ...]:
    if srv is not None:
        return ()
    procs = g.processes if g else []
    if procs:
        p = procs[0]
        return ((f"in use: {fmt.clean(p.name, 30)} pid {p.pid}", "external"),)
    return (("free", "dim"),)


def _points(g: GpuState, n: int | None) -> list[GpuPoint]:
    return list(g.history) if n is None else list(islice(reversed(g.history), max(0, n)))[::-1]


def _vram_series(g: GpuState | None, n: int | None = None) -> Series | None:
    if g is None or not g.reading.memory_total_mib:
        return None
    vals = tuple((p.used_mib or 0) / 1024 for p in _points(g, n))
    return Series("VRAM", "GiB", g.reading.memory_total_mib / 1024, vals, "vram", _interval(g))


def _util_series(g: GpuState | None, n: int | None = None) -> Series | None:
    if g is None:
        return None
    return Series("util", "%", 100.0, tuple(float(p.util_pct or 0) for p in _points(g, n)), "util", _interval(g))


def _interval(g: GpuState) -> float:
    h = g.history
    if len(h) < 2:
        return 1.0
    # to a tenth of a second: the mean spacing moves in its third decimal with every sample, which made every
    # pane's view differ from its last on each tick (and redrawn) though no cell on screen changed
    return round(max(0.0, (h[-1].at - h[0].at) / (len(h) - 1)), 1)


# -- hosts --------------------------------------------------------------------------------------
def host_view(state: FleetState, host: str, now: float) -> HostView:
    """`● ct129  up · 2 GPUs · 1 serving · 1 crashed · live`; the age instead once data is 2.5 s old."""
    h = state.host(host)
    icon, tone = {"up": ("●", "ready"), "connecting": ("◌", "starting"), "down": ("✖", "down")}[h.conn]
    parts: list[Span] = [(f"{icon} ", tone), (fmt.clean(host, 40), "bold"), ("  ", ""), (h.conn, tone)]
    if h.conn == "down" and h.since is not None:
        parts.append((f" for {fmt.age(max(0.0, now - h.since))}", tone))
    if h.conn == "down" and h.last_error:
        parts.append((f": {fmt.clean(h.last_error, 80)}", tone))
    if h.conn == "connecting" and h.attempt > 1:
        parts.append((f" (attempt {h.attempt})", ""))
        if h.last_error:  # each retry flips the host to 'connecting': keep saying why it fails
            parts.append((f": last error {fmt.clean(h.last_error, 80)}", "dim"))
    parts.append((f" · {fmt.plural(len(h.gpus), 'GPU')}", ""))
    servers = state.servers_on(host)
    if servers:
        parts.append((f" · {fmt.server_counts(s.phase for s in servers)}", ""))
    a = h.age_s(now)
    if h.stale(now):
        parts.append((f" · stale {fmt.age(a)}" if a is not None else " · no data yet", "stale"))
    elif a is not None:  # at 1 Hz the age is always 0-1 s: a flickering number says less than "live"
        parts.append((" · live" if a < LIVE_S else f" · data {fmt.age(a)}", "dim"))
    if h.telemetry_error:
        parts.append((f" · {fmt.clean(h.telemetry_error, 60)}", "warm"))
    empty = {"down": f"no data: host down ({fmt.clean(h.last_error or '?', 100)})", "connecting": "connecting…"}.get(
        h.conn, "waiting for nvidia-smi…"
    )
    if h.telemetry_error:
        empty = f"no GPU data: {fmt.clean(h.telemetry_error, 200)}"
    unplaced = tuple(_unplaced_line(s, now) for s in servers if not any(g in h.gpus for g in s.meta.gpus))
    return HostView(host, tuple(parts), tuple(sorted(h.gpus)), empty, unplaced)


def _unplaced_line(srv: ServerState, now: float) -> tuple[Span, ...]:
    """`◐ launching  qwen3-8b :30000 TP2 gpu0-1 · <last log line>`."""
    v = server_view(srv, now, tail=1)
    last = ((" · ", ""), (v.log_tail[-1], "")) if v.log_tail else ()  # the row's muted colour
    return (*v.status, ("  ", ""), (v.label, "bold"), *last)


# -- the fleet filter -----------------------------------------------------------------------------
def pane_matches(view: PaneView, query: str) -> bool:
    """The fleet filter (`/`): every word must appear in the host, GPU, preset/server or phase."""
    words = query.lower().split()
    if not words:
        return True
    s = view.server
    hay = " ".join(
        [
            view.host,
            f"gpu{view.gpu}",
            view.title,
            view.kind,
            view.group_of,
            *(t for t, _ in view.occupant),
            *((s.name, s.label, s.phase, fmt.PHASE_WORDS.get(s.phase, s.phase)) if s else ()),
        ]
    ).lower()
    return all(w in hay for w in words)


# -- the server screen ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ServerPage:
    """Everything the server screen shows besides the log lines; its parts redraw only when they differ."""

    crumbs: tuple[Span, ...]
    """`fleet › ct129 › qwen3-8b@ct129:gpu0-1`."""
    state: tuple[Span, ...]
    notes: tuple[Span, ...]
    diag: tuple[Span, ...]
    """The crash (or diagnosis) block; empty when there is none."""
    timeline: tuple[tuple[str, float | None, float | None], ...]
    command: str
    facts: tuple[str, ...]


TIMELINE = STARTING_PHASES
"""The startup phases the server screen times, against the previous launch's."""


def timeline_rows(
    cur: Mapping[str, float], prev: Mapping[str, float]
) -> tuple[tuple[str, float | None, float | None], ...]:
    """Seconds per startup phase now and at the last launch; a speculative server's draft model (its weights, KV
    and graphs) gets rows of its own (`draft_loading_weights` ...) after the target's CUDA graphs, where SGLang
    loads it."""
    rows = [(str(p), cur.get(p), prev.get(p)) for p in TIMELINE]
    draft = [(f"draft_{p}", cur.get(f"draft_{p}"), prev.get(f"draft_{p}")) for p in TIMELINE]
    draft = [r for r in draft if r[1] is not None or r[2] is not None]
    at = next((i + 1 for i, r in enumerate(rows) if r[0] == Phase.CUDA_GRAPH), len(rows))
    return tuple(rows[:at] + draft + rows[at:])


def server_page(
    srv: ServerState,
    now: float,
    *,
    watching: bool = True,
    spec_records: Mapping[str, Sequence[SpecLaunchRecord]] | None = None,
) -> ServerPage:
    """`spec_records`: the fleet state's launch records per preset (this launch is set beside them)."""
    m, log = srv.meta, srv.log
    v = server_view(srv, now, watching=watching)
    crumbs: tuple[Span, ...] = (
        ("fleet", "dim"),
        (" › ", "dim"),
        (fmt.clean(m.host, 40), "dim"),
        (" › ", "dim"),
        (fmt.clean(m.name), "bold"),
        (f"   GPU {fmt.gpu_span(m.gpus)} · {v.label}", ""),
    )
    state: list[Span] = []
    if v.ended:
        how = "stop requested by the console" if srv.stopping else ""
        ran = (
            f"ran {fmt.age(max(0.0, srv.ended_at - m.started_at))}" if srv.ended_at is not None and m.started_at else ""
        )
        when = (
            f"ended {fmt.age(max(0.0, now - srv.ended_at))} ago" if srv.ended_at is not None and not srv.alive else ""
        )
        last = fmt.last_figures(log.gen_throughput, log.running, log.queued, log.token_usage)
        word = fmt.exiting_words(v.phase) if srv.alive else fmt.PHASE_WORDS.get(v.phase, v.phase)
        state = [
            (word, f"bold {v.tone}"),
            *((f" · {x}", "") for x in (when, how, ran, last) if x),
        ]
    else:
        up = f"up {fmt.age(max(0.0, now - m.started_at))}" if m.started_at else "up ?"
        prog = progress_text(srv)
        state = [
            (fmt.exiting_words(Phase.STOPPED), "bold stopped")
            if srv.stopping
            else (WARMING, "bold starting")
            if warming_up(srv)
            else (fmt.PHASE_WORDS.get(v.phase, v.phase), f"bold {v.tone}"),
            (f" {prog}" if prog else "", ""),
            (
                f" · health {fmt.clean(srv.health or '—')} · {up} · {fmt.rate(srv.live_throughput(now, watching))} tok/s"
                f"{tok_age(srv, now, watching)} · "
                f"{v.load}{f' · VRAM {fmt.gib(srv.memory_mib)} GiB' if srv.memory_mib else ''}",
                "",
            ),
        ]
    spec = spec_status(srv, now)
    if spec is not None and not v.ended:
        state.append((" · " + spec_line(spec, now, FIGURE_STALE_S), ""))
    state.append((f" · {log.line_count} lines", "dim"))
    notes = [fmt.clean(text, 160) for _, text in spec.warnings] if spec is not None and not v.ended else []
    if not m.managed:
        notes.append("external: not started by this console" + ("" if log.line_count else "; its log is not tailed"))
    if srv.log_error:
        notes.append(f"log: {fmt.clean(srv.log_error, 160)}")
    note_spans: tuple[Span, ...] = ((" · ".join(notes), "external" if not m.managed else "warm"),) if notes else ()
    d = log.diagnosis
    diag: tuple[Span, ...] = ()
    if v.phase == "crashed" or d is not None:
        cause = fmt.clean(d.summary) if d else "the process ended"
        parts: list[Span] = [("✖ crashed: " if v.phase == "crashed" else "! ", "bold crashed"), (cause, "crashed")]
        if d and d.hint:
            parts += [("\n", ""), ("fix: ", "bold"), (fmt.clean(d.hint), "")]
        if d and d.error_line:
            parts += [("\n", ""), ("at: ", "bold"), (fmt.clean(d.error_line, 300), "dim")]
        jump = {"traceback": "x: jump to traceback · ", "error": "x: jump to the error · "}.get(
            log.crash_in_log or "", ""
        )
        parts += [("\n", ""), (f"{jump}r: relaunch (this log is kept)", "dim")]
        diag = tuple(parts)
    cur, prev = log.timeline, srv.previous_timeline
    timeline = timeline_rows(cur, prev)
    facts = [f"{k.replace('_', ' ')}: {fmt.clean(str(val), 120)}" for k, val in _fact_items(log.facts)]
    if spec is not None:
        facts = [*_spec_facts(spec), *spec_history_facts(spec, m.preset, m.launch_id, spec_records or {}), *facts]
    if srv.previous_logs:
        facts.append(f"previous logs: {len(srv.previous_logs)} (o: view; last: {fmt.clean(srv.previous_logs[-1])})")
    if m.log_path:
        facts.append(f"log: {fmt.clean(m.log_path)}")
    return ServerPage(
        crumbs,
        tuple(state),
        note_spans,
        diag,
        timeline,
        fmt.clean(m.command or " ".join(m.argv) or "(unknown)"),
        tuple(facts),
    )


def _spec_facts(st: SpecStatus) -> list[str]:
    """The spec settings as launched and the accept figures of this launch, first among the facts."""
    c = st.config
    out = [f"spec: {c.algorithm} · {c.shape()}"]
    if c.draft_model:
        out.append(f"draft model: {fmt.clean(c.draft_model, 120)}")
    if c.draft_attention_backend:
        out.append(f"draft attention: {fmt.clean(c.draft_attention_backend, 40)}")
    if c.draft_window:
        out.append(f"draft window: {c.draft_window}")
    if st.history:
        p10, p90 = percentile(st.history, 10), percentile(st.history, 90)
        out.append(f"accept length: mean {st.mean():.2f} · p10 {p10:.2f} · p90 {p90:.2f} ({len(st.history)} figures)")
    if st.cumulative is not None:
        out.append(f"accept length since start (server): {st.cumulative[1]:.2f}")
    return out


def spec_history_facts(
    st: SpecStatus, preset: str | None, launch_id: str, records: Mapping[str, Sequence[SpecLaunchRecord]]
) -> list[str]:
    """This launch beside the last launches of its preset, and the other presets' last launch: which drafter is
    better is the question these figures answer."""
    out: list[str] = []
    mine = [r for r in records.get(preset or "", ()) if r.launch_id != launch_id][-SPEC_LAUNCHES_SHOWN:]
    now_mean = st.mean()
    if mine:
        med = history_median(r.accept_mean for r in mine) or 0.0
        last = " · ".join(f"{r.accept_mean:.2f}" for r in mine)
        vs = f"; this launch {now_mean:.2f} ({now_mean - med:+.2f})" if now_mean is not None else ""
        out.append(f"last {len(mine)} launches: accept {last} · median {med:.2f}{vs}")
    others = []
    for name, recs in sorted(records.items()):
        if name != preset and recs:
            r = recs[-1]
            tps = f", {r.tok_s_mean:.0f} tok/s" if r.tok_s_mean is not None else ""
            others.append(f"{fmt.clean(name, 30)} {r.algorithm} {r.accept_mean:.2f}{tps}")
    if others:
        out.append("other presets (last launch): " + " · ".join(others[:4]))
    return out


SPEC_LAUNCHES_SHOWN = 5


def _fact_items(facts: object) -> list[tuple[str, object]]:
    """The parser's facts (a dataclass or a dict) as (name, value) pairs, unknowns left out."""
    import dataclasses

    if dataclasses.is_dataclass(facts) and not isinstance(facts, type):
        pairs = [(f.name, getattr(facts, f.name)) for f in dataclasses.fields(facts)]
    elif isinstance(facts, dict):
        pairs = sorted(facts.items())
    else:
        pairs = []
    return [(str(k), v) for k, v in pairs if v not in (None, "", [], {})]
