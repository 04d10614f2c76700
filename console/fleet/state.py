"""FleetState: the pure, in-memory picture of every host, GPU and server, built only by apply(event).

The UI renders from this and nothing else. `apply` returns a `Changes` (console/fleet/changes.py): the
hosts and servers it touched and the notices it derived (server ready, crashed, host down/back), each with a
NoticeKind, so the UI redraws and toasts without diffing state itself.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from console.fleet.changes import Changes
from console.fleet.events import (
    Event,
    GpuSample,
    HealthResult,
    HostConn,
    HostConnecting,
    HostDown,
    HostUp,
    LogData,
    LogError,
    MetricsSample,
    Notice,
    NoticeKind,
    ProcessSample,
    ServerAction,
    ServerAlive,
    ServerGone,
    ServerMeta,
    ServerRemoved,
    ServerSeen,
    SpecCumulative,
    SpecLaunchRecord,
    TelemetryError,
)
from console.fleet.logmodel import LogModel
from console.gpu.readings import ComputeApp, GpuReading
from console.sglang.phase import Phase
from console.sglang.specdec import accept_alarm, history_median, spec_config

MAX_LINES = 20_000
SPARK_POINTS = 120
GPU_HISTORY_POINTS = 600
"""Per-GPU samples kept for the panes' history graphs: 10 min at nvidia-smi's 1 Hz."""
STALE_S = 5.0
"""A figure older than this is shown with its age (`366.5 (42 s ago)`): the TUI's stale limit for telemetry too."""
DECODE_IDLE_S = 10.0
"""No decode line for this long from a log being read: nothing is decoding, the live tok/s is 0. SGLang prints a
Decode line every `--decode-log-interval` steps (40) while any request runs, and nothing while none does, so the
last figure would otherwise last forever."""
STREAMING = (LogData, GpuSample, ProcessSample, HealthResult, MetricsSample)
"""Events that arrive as a stream: their redraws are coalesced (Changes.urgent is False)."""


@dataclass
class GpuProcess:
    pid: int
    used_mib: int | None
    name: str
    server: str | None = None


@dataclass(frozen=True)
class GpuPoint:
    """One telemetry sample of a GPU, kept for its history graphs."""

    at: float
    used_mib: int | None
    util_pct: int | None


@dataclass
class GpuState:
    reading: GpuReading
    processes: list[GpuProcess] = field(default_factory=list)
    history: deque[GpuPoint] = field(default_factory=lambda: deque(maxlen=GPU_HISTORY_POINTS))
    """VRAM and utilisation over the last minutes, oldest first."""

    @property
    def index(self) -> int:
        return self.reading.index


@dataclass
class HostState:
    name: str
    conn: HostConn = "connecting"
    since: float | None = None
    last_error: str | None = None
    attempt: int = 0
    gpus: dict[int, GpuState] = field(default_factory=dict)
    gpu_at: float | None = None
    apps_at: float | None = None
    telemetry_error: str | None = None
    telemetry_error_at: float | None = None
    procs_by_pid: dict[int, int] = field(default_factory=dict)
    """pid -> session id, from the last process sample."""

    def age_s(self, now: float) -> float | None:
        """Age of the GPU figures; None when there are none yet."""
        return None if self.gpu_at is None else max(0.0, now - self.gpu_at)

    def stale(self, now: float, limit_s: float = STALE_S) -> bool:
        age = self.age_s(now)
        return self.conn != "up" or age is None or age > limit_s


@dataclass
class ServerState:
    meta: ServerMeta
    alive: bool = True
    stopping: bool = False
    exit_status: int | None = None
    signal: str | None = None
    ended_at: float | None = None
    seen_at: float | None = None
    log: LogModel = field(default_factory=LogModel)
    log_offset: int = 0
    log_error: str | None = None
    health: str | None = None
    health_detail: str = ""
    health_at: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    metrics_at: float | None = None
    throughput_history: deque[float] = field(default_factory=lambda: deque(maxlen=SPARK_POINTS))
    previous_logs: list[str] = field(default_factory=list)
    previous_timeline: dict[str, float] = field(default_factory=dict)
    last_action: str = ""
    memory_mib: int = 0
    """VRAM held by all of this server's processes (every TP rank), from compute apps."""
    told: set[str] = field(default_factory=set)
    """Notices already given for this launch ("ready", "crashed"): each is toasted once."""
    log_resync: bool = False
    """The log model was reset (the server was alive after all): tail chunks wait for a re-read from byte 0."""
    last_health_at: float | None = None
    """When /health last answered 200 (kept after the end, when `health` no longer says anything)."""
    spec_cumulative: tuple[float, float] | None = None
    """(when, /server_info's lifetime mean accept length) of a speculative server, read every SPEC_INFO_EVERY_S."""
    decode_at: float | None = None
    """When (console clock) the newest decode line was written, as far as the log's stamps tell: the gen
    throughput's time."""
    batch_at: float | None = None
    """The same for the newest batch line of either kind (running and queued come from it)."""

    def __post_init__(self) -> None:
        self.attach_log(self.log)

    def attach_log(self, log: LogModel) -> None:
        """A launched server's GPUs let its diagnosis name torch's `GPU 0` as the GPU it is (an external one's order is unknown)."""
        log.gpus = tuple(self.meta.gpus) if self.meta.managed else ()
        self.log = log

    @property
    def launched_here(self) -> bool:
        """This console launched it (a launch or restart action): its readiness is news whenever it comes."""
        return self.last_action.startswith("launch")

    def tell_once(self, what: str) -> bool:
        if what in self.told:
            return False
        self.told.add(what)
        return True

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def phase(self) -> Phase:
        """Parser phase, overridden by what the process and /health say."""
        p = self.log.phase
        if not self.alive:
            return Phase.STOPPED if self.stopping or p is Phase.STOPPED else Phase.CRASHED
        if p is Phase.CRASHED:
            return p
        if self.health == "ok" and p.starting:
            return Phase.READY
        return p

    @property
    def ready_confirmed(self) -> bool:
        return self.health == "ok"

    @property
    def gen_throughput(self) -> float | None:
        return self.log.gen_throughput if self.alive else None

    def throughput_age(self, now: float) -> float | None:
        """Seconds since the newest decode line was written; None before the first."""
        return None if self.decode_at is None else max(0.0, now - self.decode_at)

    def batch_age(self, now: float) -> float | None:
        return None if self.batch_at is None else max(0.0, now - self.batch_at)

    def decode_idle(self, now: float, watching: bool = True) -> bool:
        """Alive, its log read (`watching`: the host up, the tail working) and no decode line for DECODE_IDLE_S:
        nothing is running. A log not being read says nothing about now, so its figure stays, with its age."""
        age = self.throughput_age(now)
        return self.alive and watching and not self.log_error and age is not None and age > DECODE_IDLE_S

    def live_throughput(self, now: float, watching: bool = True) -> float | None:
        """tok/s now: the newest decode line's figure, or 0.0 once decode-idle; None when ended or never seen."""
        tp = self.gen_throughput
        return 0.0 if tp is not None and self.decode_idle(now, watching) else tp

    def live_running(self, now: float, watching: bool = True) -> int | None:
        """Requests running now: the newest batch line's count, or 0 once decode-idle."""
        return 0 if self.log.running is not None and self.decode_idle(now, watching) else self.log.running

    def note_batches(self, at: float, clock: float | None, decodes: bool, batches: bool) -> None:
        """Date the newest batch lines a feed brought: `at` less how much older their stamp is than the host's
        `clock` (or, unknown, than the newest line's stamp: a backlog read at once is not all new)."""
        st, ref = self.log.parser.stats, clock if clock is not None else self.log.parser.ts

        def when(ts: float | None) -> float:
            return at - max(0.0, ref - ts) if ref is not None and ts is not None else at

        if decodes:
            self.decode_at = when(st.last_decode_ts)
        if batches:
            self.batch_at = when(st.last_batch_ts)


def crash_notice(s: ServerState, at: float) -> Notice:
    """The crash toast, worded from the same diagnosis the pane shows."""
    diag = s.log.diagnosis
    cause = f": {diag.summary}" if diag is not None else ""
    return Notice(at, "error", f"{s.name} crashed{cause}", server=s.name, host=s.meta.host, kind=NoticeKind.CRASHED)


def ready_notice(s: ServerState, at: float) -> Notice:
    return Notice(at, "info", f"{s.name} is ready", server=s.name, host=s.meta.host, kind=NoticeKind.READY)


SPEC_RECORDS_KEPT = 50
"""Launch records kept per preset in memory."""


class FleetState:
    """All hosts and servers. Only `apply` mutates it."""

    def __init__(self, host_names: list[str] | None = None) -> None:
        self.hosts: dict[str, HostState] = {n: HostState(n) for n in host_names or []}
        self.servers: dict[str, ServerState] = {}
        self.version = 0
        """Bumped on every apply: a cheap 'anything changed?' for renderers."""
        self.spec_records: dict[str, list[SpecLaunchRecord]] = {}
        """Per preset, the last launches with speculative decoding (oldest first): the screens' comparison and the
        collapse alarm's usual figure."""

    # -- queries ----------------------------------------------------------------------------
    def host(self, name: str) -> HostState:
        if name not in self.hosts:
            self.hosts[name] = HostState(name)
        return self.hosts[name]

    def servers_on(self, host: str) -> list[ServerState]:
        return [s for s in self.servers.values() if s.meta.host == host]

    def server_on_gpu(self, host: str, gpu: int) -> ServerState | None:
        """The live server owning a GPU (managed first), else the most recent dead one."""
        cands = [s for s in self.servers_on(host) if gpu in s.meta.gpus]
        if not cands:
            return None
        cands.sort(key=lambda s: (s.alive, s.meta.managed, s.meta.started_at or 0), reverse=True)
        return cands[0]

    def live_owner(self, host: str, gpu: int) -> ServerState | None:
        s = self.server_on_gpu(host, gpu)
        return s if s is not None and s.alive else None

    # -- the reducer ------------------------------------------------------------------------
    def apply(self, ev: Event) -> Changes:
        """The only writer: folds one event in and says what it touched and what to tell."""
        self.version += 1
        handler = _HANDLERS.get(type(ev))
        host, server = self._about(ev)  # before: a removed server's host is known only now
        notices = handler(self, ev) if handler else []
        if host is None or server is None:
            after_host, after_server = self._about(ev)  # after: a server just seen
            host, server = host or after_host, server or after_server
        servers = {server} if server is not None else set()
        if isinstance(ev, ProcessSample):
            servers.update(s.name for s in self.servers_on(ev.host))  # VRAM per server is recomputed
        return Changes(
            frozenset((host,)) if host is not None else frozenset(),
            frozenset(servers),
            tuple(notices),
            urgent=not isinstance(ev, STREAMING),
        )

    def _about(self, ev: Event) -> tuple[str | None, str | None]:
        """(host, server) an event is about, as far as the state knows them now."""
        if isinstance(ev, ServerSeen):
            return ev.meta.host, ev.meta.name
        name = getattr(ev, "server", None)
        srv = self.servers.get(name) if isinstance(name, str) else None
        host = getattr(ev, "host", None)
        if not isinstance(host, str):
            host = srv.meta.host if srv is not None else None
        return host, srv.name if srv is not None else None

    def _host_connecting(self, ev: HostConnecting) -> list[Notice]:
        h = self.host(ev.host)
        if h.conn != "down" and h.last_error is None:
            h.since = ev.at
        h.conn = "connecting"
        h.attempt = ev.attempt
        return []

    def _host_up(self, ev: HostUp) -> list[Notice]:
        h = self.host(ev.host)
        was_down = h.last_error is not None
        h.conn, h.since, h.last_error, h.attempt = "up", ev.at, None, 0
        return (
            [Notice(ev.at, "info", f"host {ev.host} is back", host=ev.host, kind=NoticeKind.HOST_BACK)]
            if was_down
            else []
        )

    def _host_down(self, ev: HostDown) -> list[Notice]:
        h = self.host(ev.host)
        notices = []
        already = h.conn == "down" or h.last_error is not None  # a retry failing again: no new toast
        if not already:
            h.since = ev.at
            notices.append(
                Notice(ev.at, "error", f"host {ev.host} is down: {ev.error}", host=ev.host, kind=NoticeKind.HOST_DOWN)
            )
        h.conn, h.last_error = "down", ev.error
        return notices

    def _gpu_sample(self, ev: GpuSample) -> list[Notice]:
        h = self.host(ev.host)
        for r in ev.gpus:
            g = h.gpus.get(r.index)
            if g is None:
                g = h.gpus[r.index] = GpuState(r)
            else:
                g.reading = r
            g.history.append(GpuPoint(ev.at, r.memory_used_mib, r.utilization_pct))
        h.gpu_at = ev.at
        h.telemetry_error = None
        return []

    def _telemetry_error(self, ev: TelemetryError) -> list[Notice]:
        h = self.host(ev.host)
        first = h.telemetry_error is None
        h.telemetry_error, h.telemetry_error_at = ev.message, ev.at
        return (
            [Notice(ev.at, "warning", f"{ev.host}: {ev.message}", host=ev.host, kind=NoticeKind.TELEMETRY)]
            if first
            else []
        )

    def _process_sample(self, ev: ProcessSample) -> list[Notice]:
        h = self.host(ev.host)
        h.apps_at = ev.at
        h.procs_by_pid = {p.pid: p.sid for p in ev.procs}
        by_uuid = {g.reading.uuid: g for g in h.gpus.values() if g.reading.uuid}
        for g in h.gpus.values():
            g.processes = []
        servers = self.servers_on(ev.host)
        by_sid = {s.meta.sid: s for s in servers if s.meta.sid is not None and s.alive}
        by_pid = {s.meta.pid: s for s in servers if s.meta.pid is not None and s.alive}
        mem: dict[str, int] = {}
        for app in ev.apps:
            owner = self._owner_of(app, h, by_sid, by_pid)
            on = by_uuid.get(app.gpu_uuid)
            if on is not None:
                on.processes.append(GpuProcess(app.pid, app.used_mib, app.process_name, owner.name if owner else None))
            if owner is not None and app.used_mib:
                mem[owner.name] = mem.get(owner.name, 0) + app.used_mib
        for s in servers:
            s.memory_mib = mem.get(s.name, 0)
        return []

    @staticmethod
    def _owner_of(
        app: ComputeApp, h: HostState, by_sid: dict[int, ServerState], by_pid: dict[int, ServerState]
    ) -> ServerState | None:
        if app.pid in by_pid:
            return by_pid[app.pid]
        sid = h.procs_by_pid.get(app.pid)
        return by_sid.get(sid) if sid is not None else None

    def _server_seen(self, ev: ServerSeen) -> list[Notice]:
        m = ev.meta
        s = self.servers.get(m.name)
        if s is None or (m.launch_id and m.launch_id != s.meta.launch_id):
            fresh = ServerState(m, alive=ev.alive, seen_at=ev.at)
            fresh.previous_logs = [p for p in ev.previous_logs if p != m.log_path]
            if s is not None:
                older = [*s.previous_logs, *([s.meta.log_path] if s.meta.log_path else [])]
                fresh.previous_logs = [p for p in dict.fromkeys([*fresh.previous_logs, *older]) if p != m.log_path]
                fresh.previous_timeline = dict(s.log.timeline) or s.previous_timeline
            self.servers[m.name] = fresh
            return []
        s.meta, s.seen_at = m, ev.at
        if ev.alive and not s.alive:
            s.alive, s.ended_at = True, None
        return []

    def _server_gone(self, ev: ServerGone) -> list[Notice]:
        s = self.servers.get(ev.server)
        if s is None or not s.alive:
            return []
        s.alive, s.ended_at, s.exit_status, s.signal = False, ev.at, ev.exit_status, ev.signal
        s.health, s.health_detail = None, ""  # nothing answers any more: no 'health ok' after the end
        s.log.finish(ev.exit_status, ev.signal, stop_requested=s.stopping)
        if s.stopping:
            return [
                Notice(ev.at, "info", f"{s.name} stopped", server=s.name, host=s.meta.host, kind=NoticeKind.STOPPED)
            ]
        if not s.tell_once("crashed"):
            return []
        return [crash_notice(s, ev.at)]

    def _server_alive(self, ev: ServerAlive) -> list[Notice]:
        """Un-ends a server a sample missed: fresh log model (re-read from byte 0), no end, no crash told."""
        s = self.servers.get(ev.server)
        if s is None or s.alive or s.stopping:
            return []
        s.alive, s.ended_at, s.exit_status, s.signal = True, None, None, None
        s.attach_log(LogModel())
        s.log_offset, s.log_resync = 0, True
        s.decode_at = s.batch_at = None
        s.throughput_history.clear()
        s.told.discard("crashed")
        return [
            Notice(
                ev.at,
                "warning",
                f"{s.name} is running: it was called ended, but its process is alive",
                server=s.name,
                host=s.meta.host,
                kind=NoticeKind.RUNNING_AGAIN,
            )
        ]

    def _server_removed(self, ev: ServerRemoved) -> list[Notice]:
        self.servers.pop(ev.server, None)
        return []

    def _log_data(self, ev: LogData) -> list[Notice]:
        s = self.servers.get(ev.server)
        if s is None or (s.meta.log_path and ev.path != s.meta.log_path):
            return []
        if s.log_resync:
            if ev.offset != 0:
                return []  # the re-read from byte 0 brings these bytes too
            s.log_resync = False
        data = ev.data
        if ev.offset < s.log_offset:  # a resumed tail re-sent bytes we have: drop the overlap
            skip = s.log_offset - ev.offset
            if skip >= len(data):
                return []
            data = data[skip:]
        elif ev.offset > s.log_offset:
            s.log.note_gap(ev.offset - s.log_offset)
        s.log_offset = max(s.log_offset, ev.offset) + len(data)
        s.log_error = None
        before, batches = s.log.phase, s.log.batch_lines
        s.log.feed(data)
        if s.log.batch_lines != batches:
            s.note_batches(ev.at, ev.clock, s.log.stats_changed, True)
        after = s.log.phase
        tp = s.log.gen_throughput
        if tp is not None and s.log.stats_changed:
            s.throughput_history.append(tp)
        spec = self._spec_notices(s, ev.at, s.log.stats_changed) if s.log.accepts or s.log.spec_notes else []
        # the first bytes of the file saying "fired up": a server ready before the console looked (re-attach,
        # another console's launch), read from its log's start; that it is ready is shown, not announced
        return spec + self._phase_notices(s, before, after, ev.at, news=ev.offset > 0 or s.launched_here)

    def _spec_cumulative(self, ev: SpecCumulative) -> list[Notice]:
        s = self.servers.get(ev.server)
        if s is not None and s.alive:
            s.spec_cumulative = (ev.at, ev.accept_len)
        return []

    def _spec_record(self, ev: SpecLaunchRecord) -> list[Notice]:
        recs = self.spec_records.setdefault(ev.preset, [])
        if all(r.launch_id != ev.launch_id for r in recs):
            recs.append(ev)
            del recs[:-SPEC_RECORDS_KEPT]
        return []

    def spec_median(self, preset: str | None) -> float | None:
        """The preset's usual accept length (median of its launches' means), None without history."""
        return history_median(r.accept_mean for r in self.spec_records.get(preset or "", ()))

    def _spec_notices(self, s: ServerState, at: float, new_batch: bool) -> list[Notice]:
        """Each spec alarm as a notice once: a DFLASH warning per kind; the accept collapse when it starts and when it
        clears (judged on the log's own clock, as the figures were printed)."""
        out: list[Notice] = []
        for kind, (note, _, _) in s.log.spec_notes.items():
            if s.tell_once(f"spec:{kind}"):
                lvl: Literal["warning", "error"] = "error" if note.severity == "error" else "warning"
                out.append(Notice(at, lvl, f"{s.name}: {note.text}", s.name, s.meta.host, NoticeKind.SPEC))
        if not new_batch:
            return out
        pts = [(t, v) for t, v in s.log.accepts if t is not None]
        if not pts or spec_config(s.meta.argv) is None:
            return out
        alarm = accept_alarm(pts, pts[-1][0], median=self.spec_median(s.meta.preset))
        if alarm is not None and s.tell_once("spec:collapse"):
            out.append(Notice(at, "warning", f"{s.name}: {alarm.text}", s.name, s.meta.host, NoticeKind.SPEC))
        elif alarm is None and "spec:collapse" in s.told:
            s.told.discard("spec:collapse")
            out.append(
                Notice(
                    at,
                    "info",
                    f"{s.name}: accept length back at {pts[-1][1]:.2f}",
                    s.name,
                    s.meta.host,
                    NoticeKind.SPEC,
                )
            )
        return out

    def _phase_notices(self, s: ServerState, before: Phase, after: Phase, at: float, news: bool) -> list[Notice]:
        if before is after:
            return []
        if after.up and not before.up and s.tell_once("ready") and news:  # a backlog can go straight to serving
            return [ready_notice(s, at)]
        return []  # a crash is told when the process has ended and its log is read to the end (_server_gone)

    def _log_error(self, ev: LogError) -> list[Notice]:
        s = self.servers.get(ev.server)
        if s is not None:
            s.log_error = ev.message
        return []

    def _health(self, ev: HealthResult) -> list[Notice]:
        s = self.servers.get(ev.server)
        if s is None or not s.alive:
            return []  # an answer that was in flight when the server ended says nothing now
        before, answered_before = s.phase, s.health_at is not None
        s.health, s.health_detail, s.health_at = ev.status, ev.detail, ev.at
        if ev.status == "ok":
            s.last_health_at = ev.at
        # news only when the console watched it load: it launched it, or it had read the log loading and an
        # earlier answer was not 200. Ready at the first answer, or before any of its log was read (a
        # re-attach's first poll can fail while its forward opens), it was up before the console looked.
        watched = s.launched_here or (answered_before and (s.log_offset > 0 or not s.meta.log_path))
        if before is not Phase.READY and s.phase is Phase.READY and s.tell_once("ready") and watched:
            return [ready_notice(s, ev.at)]
        return []

    def _metrics(self, ev: MetricsSample) -> list[Notice]:
        s = self.servers.get(ev.server)
        if s is not None:
            s.metrics, s.metrics_at = dict(ev.values), ev.at
        return []

    def _action(self, ev: ServerAction) -> list[Notice]:
        s = self.servers.get(ev.server)
        if s is not None:
            s.last_action = f"{ev.action}: {ev.message}" if ev.message else ev.action
            if ev.action == "stop" and ev.ok:
                s.stopping = True
        return [
            Notice(
                ev.at,
                "info" if ev.ok else "error",
                f"{ev.server}: {ev.action}{' — ' + ev.message if ev.message else ''}",
                server=ev.server,
                host=s.meta.host if s is not None else None,
                kind=NoticeKind.ACTION,
                step=ev.action,
            )
        ]

    def _notice(self, ev: Notice) -> list[Notice]:
        return [ev]


_HANDLERS: dict[type, Callable[[FleetState, Any], list[Notice]]] = {
    HostConnecting: FleetState._host_connecting,
    HostUp: FleetState._host_up,
    HostDown: FleetState._host_down,
    GpuSample: FleetState._gpu_sample,
    TelemetryError: FleetState._telemetry_error,
    ProcessSample: FleetState._process_sample,
    ServerSeen: FleetState._server_seen,
    ServerGone: FleetState._server_gone,
    ServerAlive: FleetState._server_alive,
    ServerRemoved: FleetState._server_removed,
    LogData: FleetState._log_data,
    LogError: FleetState._log_error,
    HealthResult: FleetState._health,
    MetricsSample: FleetState._metrics,
    ServerAction: FleetState._action,
    Notice: FleetState._notice,
    SpecLaunchRecord: FleetState._spec_record,
    SpecCumulative: FleetState._spec_cumulative,
}
