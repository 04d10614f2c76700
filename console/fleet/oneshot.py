"""`status` in one round trip per host: connect, then ONE exec of the agent's `oneshot` mode, then close.

The remote side (console.fleet.agent, `oneshot_mode`) prints in one answer what the controller's streams
gather over seconds: the GPU query the telemetry stream runs, the re-attach listing (meta.json, history) and
the SGLang sessions the process loop samples, the compute apps, the logs of the servers it lists (the head
re-attach would tail, and the newest part of a long log), and `/health` of every server port, asked on the
host itself (its python3's urllib, all ports at once, each within the controller's deadline), so no forward
channel is opened. The pure functions here turn that answer into the same events the controller feeds
`FleetState.apply` (GpuSample, ServerSeen, LogData, ServerGone, ProcessSample, HealthResult, TelemetryError),
so `status_doc` reads the one state model either way.

A host whose Python cannot run the agent (the answer has no `==> end`) is left to the caller's fallback: the
controller path, which itself falls back to sh loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from console.config import Fleet, Host
from console.fleet import discovery
from console.fleet.agent import AGENT_SOURCE, _python
from console.fleet.events import (
    HEALTH_OF_CODE,
    Event,
    GpuSample,
    HealthResult,
    HostConnecting,
    HostDown,
    HostUp,
    LogData,
    ProcessSample,
    ServerGone,
    ServerSeen,
    TelemetryError,
)
from console.fleet.hostlink import backoff_delay
from console.fleet.journal import Journal, journal_event
from console.fleet.monitor import (
    _MAIN_RE,
    SGLANG_RE,
    external_servers,
    shares_process_table,
)
from console.fleet.state import FleetState
from console.gpu import nvsmi
from console.transport.base import CommandHook, HostKeyError, Transport, TransportError

HEALTH_DEADLINE_S = 5.0
"""The controller's deadline for a whole /health exchange (console.sglang.httpbound.HEALTH_DEADLINE_S, which
imports httpx: this path does not; tests/fleet/test_oneshot.py holds them equal)."""
HEALTH_MAX_BYTES = 64 * 1024
"""As console.sglang.httpbound.HEALTH_MAX_BYTES."""
LIVE_HEAD = 256 * 1024
"""A live server's log: its first bytes (launch to ready: the phases) ..."""
LIVE_TAIL = 64 * 1024
"""... and its newest (the current phase, batch stats, a crash) when the log is longer than both."""
DEAD_HEAD = 4_000_000
"""A dead server's log as re-attach replays it (`head -c 4000000`), for the crash diagnosis."""
CONNECT_ATTEMPTS = 3
"""As the controller path: a host refused three times in a row is unreachable."""

TransportFactory = Callable[[str, Host, CommandHook | None], Transport]


# -- the command --------------------------------------------------------------------------------
def smi_timeout_s(poll_ms: int) -> float:
    """nvidia-smi counts as hung past this (the telemetry stream's rule: three intervals and a second)."""
    return 3 * poll_ms / 1000 + 1


def oneshot_command(
    host: Host,
    *,
    smi_timeout: float = 4.0,
    health_deadline_s: float = HEALTH_DEADLINE_S,
    routers: list[dict[str, Any]] | None = None,
) -> str:
    """The single remote command: the host env's PATH (as HostLink's prefix), then the agent in `oneshot` mode
    (`routers`: what to look at for each router on the host, console.router.look.router_config)."""
    cfg = {
        "routers": routers or [],
        "servers": discovery.servers_dir(host),
        "meta_max": discovery.META_MAX_BYTES,
        "gpu": nvsmi.query_gpu_command(),
        "apps": nvsmi.query_apps_command(),
        "smi_timeout": smi_timeout,
        "pattern": SGLANG_RE,
        "main": _MAIN_RE.pattern,
        "health_deadline": health_deadline_s,
        "health_max": HEALTH_MAX_BYTES,
        "live_head": LIVE_HEAD,
        "live_tail": LIVE_TAIL,
        "dead_head": DEAD_HEAD,
    }
    path = host.env.get("PATH")
    prefix = f"PATH={shlex.quote(path)}; export PATH; " if path else ""
    return (
        f"{prefix}exec {_python(host.python)} -I -S -u -c {shlex.quote(AGENT_SOURCE)} oneshot "
        f"{shlex.quote(json.dumps(cfg, separators=(',', ':')))}"
    )


def command_label(host: Host) -> str:
    """The command as an error names it (the inline script would be 10 kB of noise)."""
    return f"{host.python} -c <agent> oneshot"


# -- the answer (pure) ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Section:
    name: str
    head: dict[str, Any]
    data: bytes


@dataclass(frozen=True)
class HealthAnswer:
    """/health of one address:port, asked on the host: kind `http` (what = status code), `big` (body over the
    cap), `timeout`, `down` (what = why) or `error`."""

    addr: str
    port: int
    kind: str
    what: str
    ms: float | None


@dataclass(frozen=True)
class ToolAnswer:
    """An nvidia-smi query: exit status (124: killed at the hung limit) and its stdout+stderr."""

    rc: int | None
    text: str
    seconds: float | None = None


@dataclass(frozen=True)
class RouterPart:
    """One piece of a router's look: `proc` (the status script's output), `log` (its end), or an endpoint's
    answer (`health`, `workers`, `metrics`) of kind `http` (status = the code, text = the body) or as HealthAnswer."""

    kind: str
    status: int | None
    text: str


@dataclass
class OneShot:
    listing: str | None = None
    gpu: ToolAnswer | None = None
    apps: ToolAnswer | None = None
    health: list[HealthAnswer] = field(default_factory=list)
    logs: list[tuple[str, int, bytes]] = field(default_factory=list)
    """(log path as meta.json has it, byte offset, bytes), in the order the host read them."""
    routers: dict[str, dict[str, RouterPart]] = field(default_factory=dict)
    """Router name -> part -> what the host found."""
    complete: bool = False
    """The `==> end` line came: the agent ran to its end."""
    clock: float | None = None
    """The host's clock as it read the logs, on the log stamps' scale (local time read as UTC)."""


def parse_sections(data: bytes) -> tuple[list[Section], bool]:
    """`==> NAME {json}` lines, each followed by its `n` bytes and a newline; (sections, ended). Anything else
    (a shell's error, a cut answer) stops the reading: what came before it stands."""
    out: list[Section] = []
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0 or not data.startswith(b"==> ", pos):
            break
        name, _, rest = data[pos + 4 : nl].decode("utf-8", "replace").partition(" ")
        try:
            head = json.loads(rest) if rest else {}
        except ValueError:
            break
        if not isinstance(head, dict):
            break
        if name == "end":
            return out, True
        n = head.get("n", 0)
        if not isinstance(n, int) or n < 0 or nl + 1 + n > len(data):
            break
        out.append(Section(name, head, data[nl + 1 : nl + 1 + n]))
        pos = nl + 1 + n + 1  # the newline after the bytes
    return out, False


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def parse_oneshot(data: bytes) -> OneShot:
    sections, ended = parse_sections(data)
    shot = OneShot(complete=ended)
    for s in sections:
        text = s.data.decode("utf-8", "replace")
        if s.name == "listing":
            shot.listing = text
        elif s.name in ("gpu", "apps"):
            setattr(shot, s.name, ToolAnswer(_int(s.head.get("rc")), text, _num(s.head.get("s"))))
        elif s.name == "health":
            port = _int(s.head.get("port"))
            if port is not None:
                shot.health.append(
                    HealthAnswer(
                        str(s.head.get("addr", "")), port, str(s.head.get("kind", "")), text, _num(s.head.get("ms"))
                    )
                )
        elif s.name == "router":
            name, part = s.head.get("router"), s.head.get("part")
            if isinstance(name, str) and isinstance(part, str):
                shot.routers.setdefault(name, {})[part] = RouterPart(
                    str(s.head.get("kind", part)), _int(s.head.get("status")), text
                )
        elif s.name == "clock":
            shot.clock = _num(s.head.get("local"))
        elif s.name == "log":
            off = _int(s.head.get("offset"))
            if isinstance(s.head.get("path"), str) and off is not None:
                shot.logs.append((s.head["path"], off, s.data))
    return shot


def gpu_events(host: str, ans: ToolAnswer | None, at: float, smi_timeout: float = 4.0) -> list[Event]:
    """A GPU sample, or the telemetry error the stream would tell for the same output."""
    if ans is None:
        return [TelemetryError(host, at, "nvidia-smi exited without a sample")]
    buf = nvsmi.GpuLineBuffer()
    ticks, bad = buf.feed(ans.text if ans.text.endswith("\n") or not ans.text else ans.text + "\n")
    last = buf.flush()
    if last:
        ticks.append(last)
    out: list[Event] = [GpuSample(host, at, tuple(ticks[0]))] if ticks else []
    if bad:
        err = nvsmi.error_text("\n".join(bad))
        out.append(TelemetryError(host, at, err or f"nvidia-smi printed garbage: {bad[0][:120]!r}"))
    if ticks:
        return out
    if ans.rc == 124:
        return [TelemetryError(host, at, f"nvidia-smi hung: no sample for {smi_timeout:.0f} s")]
    err = nvsmi.error_text("\n".join(bad))
    if err:
        msg = f"nvidia-smi exited without a sample: {err}"
    elif bad:
        msg = f"nvidia-smi printed garbage, no sample could be read: {bad[-1][:120]!r}"
    else:
        msg = "nvidia-smi exited without a sample"
    return [*out, TelemetryError(host, at, msg)]


def apps_of(ans: ToolAnswer | None) -> tuple[list[Any], str | None]:
    """(compute apps, error) as the process loop's frame parser reads the same answer."""
    if ans is None:
        return [], None
    err = nvsmi.error_text(ans.text)
    if ans.rc == 124:
        return [], "nvidia-smi --query-compute-apps timed out"
    if ans.rc not in (0, None) or err:
        return [], f"nvidia-smi --query-compute-apps failed: {err or ans.text.strip()[:200] or f'exit {ans.rc}'}"
    try:
        return nvsmi.parse_apps_csv(ans.text), None
    except nvsmi.NvsmiParseError as e:
        return [], f"nvidia-smi printed garbage: {e}"


def health_result(
    server: str, a: HealthAnswer | None, at: float, deadline_s: float = HEALTH_DEADLINE_S
) -> HealthResult:
    """The controller's HealthResult for the same outcome (status and detail as check_health words them)."""
    if a is None or a.kind == "timeout":
        return HealthResult(server, at, "error", f"no complete answer within {deadline_s:g} s")
    if a.kind == "http" and a.what.isdigit():
        code = int(a.what)
        return HealthResult(server, at, HEALTH_OF_CODE.get(code, "error"), f"HTTP {code}", a.ms)
    if a.kind == "big":
        return HealthResult(server, at, "error", f"/health larger than {HEALTH_MAX_BYTES // 1024} KiB; refused")
    if a.kind == "down":
        return HealthResult(server, at, "down", a.what or "ConnectError")
    return HealthResult(server, at, "error", a.what or "error")


def _target(bind: str, port: int) -> tuple[str, int]:
    return ("127.0.0.1" if bind in ("0.0.0.0", "::", "", "localhost") else bind), port


def oneshot_events(
    host: str, shot: OneShot, at: float, *, shares_process_table: bool = False, smi_timeout: float = 4.0
) -> list[Event]:
    """Everything a complete answer says, as events in the order the controller would apply them: the GPU sample,
    the re-attached servers (with their logs; a dead one's end), the external servers, the process sample, then
    one /health result per live server. Call after HostUp."""
    events: list[Event] = gpu_events(host, shot.gpu, at, smi_timeout)
    metas, history, procs = discovery.parse_listing_full(shot.listing or "", host)
    logs: dict[str, list[tuple[int, bytes]]] = {}
    for path, off, data in shot.logs:
        logs.setdefault(path, []).append((off, data))
    live: list[tuple[str, str, int | None]] = []
    managed_sids: set[int] = set()
    for m in metas:
        alive = discovery.is_alive(m, procs)
        events.append(ServerSeen(m, at, alive=True, previous_logs=tuple(history.get(m.name, ()))))
        if m.log_path:
            events.extend(
                LogData(m.name, at, m.log_path, off, data, shot.clock) for off, data in logs.get(m.log_path, ())
            )
        if alive:
            live.append((m.name, m.bind, m.port))
        else:
            events.append(ServerGone(m.name, at, found_ended=True))
        if m.sid is not None:
            managed_sids.add(m.sid)
    apps, apps_error = apps_of(shot.apps)
    samples = [e for e in events if isinstance(e, GpuSample)]
    uuid_index = {r.uuid: r.index for r in samples[0].gpus if r.uuid} if samples else {}
    seen: set[str] = set()
    for meta in external_servers(
        host, procs, apps, uuid_index, managed_sids, {m.pid for m in metas}, shares_process_table
    ):
        if meta.name in seen:
            continue
        seen.add(meta.name)
        events.append(ServerSeen(meta, at))
        live.append((meta.name, meta.bind, meta.port))
    events.append(ProcessSample(host, at, tuple(apps), tuple(procs)))
    if apps_error:
        events.append(TelemetryError(host, at, apps_error))
    answers = {(a.addr, a.port): a for a in shot.health}
    events.extend(
        health_result(name, answers.get(_target(bind, port)), at) for name, bind, port in live if port is not None
    )
    return events


# -- the round trip (IO) ------------------------------------------------------------------------
@dataclass
class Look:
    """What one look at the fleet found: the state, each answering host's complete answer (with the wall and
    monotonic times it came; its routers' parts are read by console.router.look), and the hosts whose Python
    could not run the agent (the caller looks at those the controller's way)."""

    state: FleetState
    shots: dict[str, tuple[OneShot, float, float]]
    fallback: list[str]


RouterConfig = Callable[[str], list[dict[str, Any]]]
"""Host name -> what the agent is to look at for each router there (console.router.look.router_config)."""


async def look_once(
    fleet: Fleet,
    wait_s: float,
    *,
    factory: TransportFactory | None = None,
    journal: Journal | None = None,
    hosts: list[str] | None = None,
    routers: RouterConfig | None = None,
) -> Look:
    """Every host at once, one exec each (with its routers, when `routers` says what to look at)."""
    journal = journal or Journal()
    state = FleetState(list(fleet.hosts))
    shots: dict[str, tuple[OneShot, float, float]] = {}
    seen_ids: set[str] = set()

    def emit(events: list[Event]) -> None:
        for ev in events:
            state.apply(ev)
            journal_event(journal, ev, seen_ids)

    if factory is None:
        from console.transport import make_transport

        def factory(n: str, h: Host, hook: CommandHook | None) -> Transport:
            return make_transport(n, h, on_command=hook)

    names = hosts if hosts is not None else list(fleet.hosts)
    deadline = time.monotonic() + wait_s
    oks = await asyncio.gather(
        *(
            look_host(
                fleet,
                n,
                factory(n, fleet.hosts[n], journal.command),
                emit,
                deadline,
                shots,
                routers(n) if routers else None,
            )
            for n in names
        )
    )
    return Look(state, shots, [n for n, ok in zip(names, oks, strict=True) if not ok])


async def look_host(
    fleet: Fleet,
    name: str,
    transport: Transport,
    emit: Callable[[list[Event]], None],
    deadline: float,
    shots: dict[str, tuple[OneShot, float, float]] | None = None,
    routers: list[dict[str, Any]] | None = None,
) -> bool:
    """Connect (up to three tries, as the controller's first look), one exec, close; a complete answer goes into
    `shots`. False: the agent could not run there (the caller falls back to the controller for this host)."""
    host = fleet.hosts[name]
    try:
        attempt = 0
        while True:
            attempt += 1
            emit([HostConnecting(name, time.time(), attempt)])
            left = deadline - time.monotonic()
            if left <= 0:
                return True  # still connecting when the wait ended, as the controller path shows it
            try:
                await asyncio.wait_for(transport.connect(), left)
                break
            except TimeoutError:
                return True
            except HostKeyError as e:
                emit([HostDown(name, time.time(), str(e), None)])
                return True
            except Exception as e:  # TransportError, or an unexpected library error: named, never raised
                msg = str(e) if isinstance(e, TransportError) else f"{type(e).__name__}: {e}"
                delay = backoff_delay(attempt)
                emit([HostDown(name, time.time(), msg, round(delay, 2))])
                if attempt >= CONNECT_ATTEMPTS or time.monotonic() + delay >= deadline:
                    return True
                await asyncio.sleep(delay)
        emit([HostUp(name, time.time())])
        smi = smi_timeout_s(fleet.console.poll_ms)
        try:
            res = await transport.run(
                oneshot_command(host, smi_timeout=smi, routers=routers), timeout=smi + HEALTH_DEADLINE_S + 10
            )
        except TransportError as e:
            emit([HostDown(name, time.time(), f"{name}: `{command_label(host)}`: {e.message}")])
            return True
        shot = parse_oneshot(res.stdout.encode("utf-8", "surrogateescape"))
        if not shot.complete:
            return False
        now = time.time()
        emit(oneshot_events(name, shot, now, smi_timeout=smi, shares_process_table=_shares_process_table(fleet, name)))
        if shots is not None:
            shots[name] = (shot, now, time.monotonic())
        return True
    finally:
        with contextlib.suppress(Exception):
            await transport.close()


def _shares_process_table(fleet: Fleet, host: str) -> bool:
    return shares_process_table([h.transport for h in fleet.hosts.values()], fleet.hosts[host].transport)
