"""The stable `status --json` document and the CLI's controller session (connect, wait, exit codes).

Schema `dflash-console/status/1`: additive changes only; a field is never renamed or retyped.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from console.config import Fleet, load_fleet
from console.fleet.journal import mask
from console.fleet.journalview import operation
from console.fleet.specstate import spec_doc, spec_status
from console.fleet.state import FleetState, HostState, ServerState
from console.sglang.phase import Phase

if TYPE_CHECKING:  # the controller (httpx) is imported by the commands that start one, not by one-shot `status`
    from console.fleet.controller import FleetController

SCHEMA = "dflash-console/status/1"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


def _r(v: float | None, nd: int = 1) -> float | None:
    return None if v is None else round(v, nd)


def server_doc(s: ServerState, now: float | None = None, host: HostState | None = None) -> dict[str, Any]:
    """One server. After it ended, the live figures (health, tok/s, running, queued, memory) are null and the last
    ones it had sit under `last`, with `ended_at`: nothing about a dead server reads as current. Every figure has
    its age beside it (`gen_throughput_age_s`: since the decode line it comes from); a live server whose log is
    read and has printed no decode line for DECODE_IDLE_S decodes nothing: 0.0 tok/s, 0 running, `decode_idle`."""
    now = time.time() if now is None else now
    d = s.log.diagnosis if s.phase is Phase.CRASHED else None
    ended = not s.alive
    watching = host is None or host.conn == "up"
    idle = s.decode_idle(now, watching)
    spec = spec_doc(spec_status(s, now), now, alive=not ended)
    figures = {
        "gen_throughput": _r(s.log.gen_throughput if ended else s.live_throughput(now, watching)),
        "running": s.log.running if ended else s.live_running(now, watching),
        "queued": s.log.queued,
        "memory_mib": s.memory_mib,
    }
    apps_at = host.apps_at if host is not None else None
    ages = {
        "gen_throughput_age_s": _r(s.throughput_age(now)),
        "running_age_s": _r(s.batch_age(now)),
        "queued_age_s": _r(s.batch_age(now)),
        "memory_mib_age_s": _r(None if apps_at is None else max(0.0, now - apps_at)),
    }
    health_age = _r(None if s.health_at is None else max(0.0, now - s.health_at))
    return {
        "name": s.name,
        "preset": s.meta.preset,
        "host": s.meta.host,
        "gpus": list(s.meta.gpus),
        "port": s.meta.port,
        "managed": s.meta.managed,
        "phase": s.phase.value,
        "alive": s.alive,
        "health": None if ended else s.health,
        "health_age_s": None if ended else health_age,
        **({k: None for k in figures} if ended else figures),
        **({k: None for k in ages} if ended else ages),
        "decode_idle": idle,
        "pid": s.meta.pid,
        "log_path": s.meta.log_path,
        "started_at": s.meta.started_at,
        "previous_logs": list(s.previous_logs),
        "cause": d.cause if d else None,
        "summary": d.summary if d else None,
        "hint": d.hint if d else None,
        "ended_at": s.ended_at if ended else None,
        "last": {**figures, **ages} if ended else None,
        "spec": spec,
        "warnings": spec["warnings"] if spec else [],
    }


def status_doc(state: FleetState, now: float | None = None) -> dict[str, Any]:
    """The `status --json` document (schema SCHEMA)."""
    now = time.time() if now is None else now
    hosts = []
    for h in state.hosts.values():
        gpus = []
        for i in sorted(h.gpus):
            g = h.gpus[i]
            r = g.reading
            owner = state.live_owner(h.name, i)
            gpus.append(
                {
                    "index": i,
                    "name": r.name,
                    "uuid": r.uuid,
                    "memory_used_mib": r.memory_used_mib,
                    "memory_total_mib": r.memory_total_mib,
                    "utilization_pct": r.utilization_pct,
                    "temperature_c": r.temperature_c,
                    "power_w": r.power_w,
                    "server": owner.name if owner else None,
                    "processes": [
                        {"pid": p.pid, "used_mib": p.used_mib, "name": p.name, "server": p.server} for p in g.processes
                    ],
                }
            )
        hosts.append(
            {
                "name": h.name,
                "state": h.conn,
                "since": h.since,
                "error": mask(h.last_error or "") or None,
                "age_s": _r(h.age_s(now)),
                "stale": h.stale(now),
                "telemetry_error": h.telemetry_error,
                "gpus": gpus,
            }
        )
    return {
        "schema": SCHEMA,
        "generated_at": round(now, 3),
        "hosts": hosts,
        "servers": [server_doc(s, now, state.hosts.get(s.meta.host)) for s in state.servers.values()],
    }


def router_doc(
    v: Any, replica_of: Callable[[str], str | None], ended: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """One router (a console.router.state.RouterView) for the document's `routers` list: `replica_of` names
    the server behind a worker URL, `ended` the ended replica behind a listed URL (the router may still list it and
    call it healthy until a sync removes it: it is not healthy). `rps` is null until two metrics reads."""
    running = v.phase == "running"
    ended = ended or {}
    return {
        "name": v.name,
        "host": v.host,
        "port": v.port,
        "policy": v.policy,
        "phase": v.phase,
        "pid": v.pid if v.phase in ("running", "starting") else None,
        "started_at": v.started_at,
        "log_path": v.log_path,
        "error": mask(v.error) if v.error else None,
        "rps": _r(v.rps) if running else None,
        "healthy_workers": sum(w.healthy and w.url not in ended for w in v.workers) if running else None,
        "workers": [
            {
                "url": w.url,
                "healthy": w.healthy and w.url not in ended,
                "load": w.load,
                "server": replica_of(w.url) or ended.get(w.url),
                "ended": w.url in ended,
            }
            for w in v.workers
        ]
        if running
        else [],
    }


def host_of(name: str, fleet: Fleet) -> str | None:
    """The host of `PRESET@HOST:gpuN`, `external@HOST:PORT`, or of a preset name."""
    if "@" in name:
        h = name.split("@", 1)[1].split(":", 1)[0]
        return h if h in fleet.hosts else None
    p = fleet.presets.get(name)
    return p.host if p else None


def op_name(args: argparse.Namespace) -> str:
    """`launch small`, `stop NAME`: the journal header of a CLI command's steps."""
    target = next((str(v) for k in ("preset", "name", "target") if (v := getattr(args, k, None))), "")
    return f"{getattr(args, 'command', None) or 'cli'} {target}".strip()


def fail(msg: str, code: int) -> int:
    print(mask(f"error: {msg}"), file=sys.stderr)
    return code


async def session(
    args: argparse.Namespace,
    hosts: list[str] | None,
    body: Callable[[FleetController], Awaitable[int]],
    *,
    wait_s: float = 12.0,
    fleet: Fleet | None = None,
) -> int:
    """Start a controller on `hosts`, wait for them (exit 3 naming the host if unreachable), run body."""
    from console.fleet.controller import FleetController

    fleet = fleet or load_fleet(args.hosts)
    ctl = FleetController(fleet, read_only=bool(getattr(args, "read_only", False)))
    await ctl.start(hosts)
    try:
        names = hosts if hosts is not None else list(fleet.hosts)
        oks = await asyncio.gather(*(_wait_host(ctl, h, wait_s) for h in names))
        down = [h for h, ok in zip(names, oks, strict=True) if not ok]
        if down and hosts is not None:
            return fail(
                "; ".join(f"host {h} unreachable: {ctl.state.hosts[h].last_error or 'timed out'}" for h in down),
                EXIT_UNREACHABLE,
            )
        with operation(op_name(args)):  # after start: the links' own polling tasks stay outside the op
            return await body(ctl)
    finally:
        await ctl.close()


async def _wait_host(ctl: FleetController, host: str, timeout: float) -> bool:
    """Up and re-attached (True), or refused three times in a row / timed out (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await ctl.wait_discovered(host, 0.1):
            return True
        h = ctl.state.hosts[host]
        if h.conn != "up" and h.last_error and h.attempt >= 3:
            return False
    return False


def run_async(coro: Coroutine[Any, Any, int]) -> int:
    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        return 130
