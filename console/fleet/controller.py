"""FleetController: owns one HostLink per host, applies their events to FleetState, runs the actions.

It implements `console.fleet.api.FleetApi` for the CLI (plain asyncio) and the Textual UI (which
awaits `start()` in a worker and subscribes). Events are applied in order on the event loop;
lifecycle events also go to the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine

import httpx

from console.config import Fleet, Host
from console.fleet import actions, discovery, liveness, recheck
from console.fleet.api import ActionOutcome, LaunchPreview, Listener
from console.fleet.changes import Changes
from console.fleet.events import (
    HEALTH_OF_CODE,
    Event,
    HealthResult,
    LogData,
    MetricsSample,
    ProcessSample,
    ServerAlive,
    ServerGone,
    ServerMeta,
    ServerSeen,
    SpecCumulative,
    SpecLaunchRecord,
    TelemetryError,
)
from console.fleet.hostlink import HostLink
from console.fleet.journal import Journal, journal_event
from console.fleet.journalview import operation
from console.fleet.monitor import (
    ProcFrame,
    external_servers,
    shares_process_table,
)
from console.fleet.spechistory import SpecHistory, cumulative_accept, launch_record
from console.fleet.state import FleetState
from console.gpu.readings import ComputeApp
from console.router.spec import ROUTER_PREFIX
from console.sglang.command import shell_path
from console.sglang.httpbound import HEALTH_DEADLINE_S, HEALTH_MAX_BYTES, BodyTooLarge
from console.transport import make_transport
from console.transport.base import CommandHook, Transport, TransportError
from console.transport.httppool import HostHttpPool, get_retrying_stale

TransportFactory = Callable[[str, Host, CommandHook | None], Transport]
LAUNCH_GRACE_S = 0.05
"""A process sample must have started this long after a launch returned its pid to call the server dead
(the pid exists from `echo $!` on, so any later sample sees it while it lives)."""
TAIL_AFTER_GONE_S = 30.0
CLOSE_TIMEOUT_S = 5.0
HEALTH_EVERY_S = 1.0
HEALTH_READY_EVERY_S = 4.0
"""Under the pool's 4.5 s keep-alive, so a ready server's polls reuse one connection (one forward channel)."""
METRICS_EVERY_S = 5.0
SPEC_INFO_EVERY_S = 30.0
"""/server_info for a speculative server's lifetime accept length: a few KB of server args, twice a minute."""


class FleetController:
    """The one object a front end holds: state, subscriptions, and every fleet action."""

    def __init__(
        self,
        fleet: Fleet,
        *,
        read_only: bool = False,
        transport_factory: TransportFactory | None = None,
        journal: Journal | None = None,
        poll_ms: int | None = None,
    ) -> None:
        self.fleet = fleet
        self.read_only = read_only
        self.state = FleetState(list(fleet.hosts))
        self.journal = journal or Journal()
        self._factory = transport_factory or (lambda n, h, hook: make_transport(n, h, on_command=hook))
        self._poll_ms = poll_ms or fleet.console.poll_ms
        self._listeners: list[Listener] = []
        self.links: dict[str, HostLink] = {}
        self._log_watch_hosts: dict[str, str] = {}
        """Servers `watch_log` was called for, and their host."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._launched_at: dict[str, float] = {}
        self.launching: dict[str, set[int]] = {}
        """Host -> ports of launches whose remote command has not returned yet: their process can be in a sample
        before the console knows its pid, and must not be taken for an external server."""
        self._launched_remote: dict[str, float] = {}
        self._apps: dict[str, list[ComputeApp]] = {}
        self._discovered: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self.http_pool = HostHttpPool()
        """/health and /metrics: one keep-alive pool per host (a pooled connection is one forward channel kept)."""
        self._started = False
        self._seen_ids: set[str] = set()
        self.absences = liveness.Absences()
        """Servers the last process samples missed, since when (one miss does not end a server)."""
        self._rechecks: dict[str, asyncio.Task[None]] = {}
        self.http_in_flight = 0
        """Health requests open now (each is one forward channel on its host)."""
        self.spec_history = SpecHistory(self.journal.path.parent / "spec_history.jsonl")
        """Launch records of speculative servers, beside the journal (its state dir)."""
        for rec in self.spec_history.load():
            self.state.apply(rec)

    # -- FleetApi: plumbing ----------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def emit(self, events: list[Event]) -> Changes:
        """Apply events in order, journal lifecycle ones, then tell every subscriber what changed."""
        parts: list[Changes] = []
        for ev in events:
            parts.append(self.state.apply(ev))
            self._journal(ev)
            if isinstance(ev, ServerGone):
                self._untail_later(ev.server)
                rec = self._spec_record(ev.server)
                if rec is not None:
                    parts.append(self.state.apply(rec))
        changes = Changes.union(parts)
        for fn in list(self._listeners):
            try:
                fn(events, changes)
            except Exception as e:  # a broken subscriber must not stop the fleet
                self.journal.event("subscriber-error", ok=False, message=f"{type(e).__name__}: {e}")
        return changes

    def _spec_record(self, name: str) -> SpecLaunchRecord | None:
        """An ended speculative launch's figures, kept in the state dir once (a re-attach ends it again)."""
        s = self.state.servers.get(name)
        rec = launch_record(s) if s is not None else None
        if rec is None or any(r.launch_id == rec.launch_id for r in self.state.spec_records.get(rec.preset, [])):
            return None
        try:
            self.spec_history.append(rec)
        except OSError as e:
            self.journal.event("spec-history", ok=False, message=f"{self.spec_history.path}: {e}")
        return rec

    def _untail_later(self, name: str) -> None:
        """A dead server's log stops growing: keep tailing a while for its last words, then stop."""
        s = self.state.servers.get(name)
        if s is None or not s.meta.managed:
            return
        launch_id, host = s.meta.launch_id, s.meta.host

        def drop() -> None:
            cur = self.state.servers.get(name)
            link = self.links.get(host)
            if link is not None and cur is not None and not cur.alive and cur.meta.launch_id == launch_id:
                link.untail(name)

        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().call_later(TAIL_AFTER_GONE_S, drop)

    def _journal(self, ev: Event) -> None:
        journal_event(self.journal, ev, self._seen_ids)

    async def start(self, hosts: list[str] | None = None) -> None:
        """Connect every host (or only `hosts`, for one-shot CLI commands); returns at once."""
        if self._started:
            return
        self._started = True
        for name, host in self.fleet.hosts.items():
            if hosts is not None and name not in hosts:
                continue
            transport = self._factory(name, host, self.journal.command)
            link = HostLink(
                name,
                host,
                transport,
                self.emit,
                poll_ms=self._poll_ms,
                on_up=self._on_up,
                on_frame=self._on_frame,
                on_command=self.journal.stream,
            )
            self.links[name] = link
            await link.start()
            self._tasks.append(asyncio.create_task(self._health_loop(name), name=f"health:{name}"))

    async def close(self) -> None:
        for t in [*self._tasks, *self._rechecks.values()]:
            t.cancel()
        if self._tasks:  # bounded: a task stuck in a cleanup must not hang the console's exit
            await asyncio.wait(self._tasks, timeout=CLOSE_TIMEOUT_S)
        self._tasks = []
        await asyncio.wait_for(
            asyncio.gather(*(link.close() for link in self.links.values()), return_exceptions=True), CLOSE_TIMEOUT_S * 2
        )
        await self.http_pool.aclose()

    async def __aenter__(self) -> FleetController:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def host_lock(self, host: str) -> asyncio.Lock:
        return self._locks.setdefault(host, asyncio.Lock())

    def note_launched(self, meta: ServerMeta, remote_time: float | None = None) -> None:
        self._launched_at[meta.name] = time.time()
        if remote_time is not None:
            self._launched_remote[meta.name] = remote_time
        else:
            self._launched_remote.pop(meta.name, None)
        link = self.links.get(meta.host)
        if link is not None and meta.log_path:
            link.tail(meta.name, meta.log_path, 0)

    async def wait_hosts(self, timeout: float) -> bool:
        """Wait until every host is up (True) or the timeout passes."""
        res = await asyncio.gather(*(link.wait_up(timeout) for link in self.links.values()))
        return all(res)

    async def wait_discovered(self, host: str, timeout: float) -> bool:
        """Wait until the host is up and its managed servers are re-attached."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if host in self._discovered:
                return True
            await asyncio.sleep(0.05)
        return False

    async def wait_gone(self, name: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.state.servers.get(name)
            if s is None or not s.alive:
                return True
            await asyncio.sleep(0.2)
        return False

    # -- link callbacks --------------------------------------------------------------------------
    async def _on_up(self, link: HostLink) -> None:
        """Re-attach: managed servers from meta.json + live session; tails resume where they were."""
        host = self.fleet.hosts[link.name]
        res = await link.run(discovery.list_command(host), timeout=30)
        metas, history, procs = discovery.parse_listing_full(res.stdout, link.name)
        for m in metas:
            cur = self.state.servers.get(m.name)
            alive = discovery.is_alive(m, procs)
            if cur is not None and cur.meta.launch_id == m.launch_id:
                if alive and m.log_path:
                    link.tail(m.name, m.log_path, link.tail_offset(m.name) or 0)
                continue
            if cur is not None and cur.alive and cur.meta.launch_id != m.launch_id:
                continue  # state knows a newer launch
            self.emit([ServerSeen(m, time.time(), alive=True, previous_logs=tuple(history.get(m.name, ())))])
            if not alive:
                await self._replay_dead(link, m)
            elif m.log_path:
                link.tail(m.name, m.log_path, 0)
        self._discovered.add(link.name)

    async def _replay_dead(self, link: HostLink, m: ServerMeta) -> None:
        """A server that died while nobody watched: read its log, then mark it gone (diagnosis)."""
        if m.log_path:
            try:
                r = await link.run(f"head -c 4000000 {shell_path(m.log_path)}", timeout=30)
                if r.stdout:
                    data = r.stdout.encode()
                    self.emit([LogData(m.name, time.time(), m.log_path, 0, data)])
            except TransportError:
                pass
        self.emit([ServerGone(m.name, time.time(), found_ended=True)])

    def _on_frame(self, link: HostLink, frame: ProcFrame, at: float) -> None:
        host = link.name
        if frame.apps is not None:
            self._apps[host] = frame.apps
        apps = self._apps.get(host, [])
        events: list[Event] = [ProcessSample(host, at, tuple(apps), tuple(frame.procs))]
        if frame.apps_error:
            events.append(TelemetryError(host, at, frame.apps_error))
        sids = {p.sid for p in frame.procs}
        pids = {p.pid for p in frame.procs}
        managed = [s for s in self.state.servers_on(host) if s.meta.managed and s.alive]
        for s in managed:
            if s.meta.sid in sids or s.meta.pid in pids:
                self.absences.seen(s.name)
                continue
            if not self._sampled_after_launch(s.name, frame, at):
                continue
            self.absences.missed(s.name, frame.sampled_at or at)
            self._recheck(s.name, recheck.confirm_gone(self, link, s.name))  # one missed sample ends nothing
        for s in self.state.servers_on(host):
            if (
                s.meta.managed
                and not s.alive
                and not s.stopping
                and s.ended_at is not None
                and discovery.is_alive(s.meta, frame.procs)
            ):  # called ended, yet its session is there
                events.append(ServerAlive(s.name, at))
                self._recheck(s.name, recheck.resync_log(self, link, s.name))
        if host in self._discovered:
            # a managed server's session is never external: not while it runs, nor its ranks exiting after its end
            sids = {s.meta.sid for s in self.state.servers_on(host) if s.meta.managed and s.meta.sid is not None}
            events.extend(self._externals(host, frame, apps, at, sids))
        self.emit(events)

    def _recheck(self, name: str, coro: Coroutine[None, None, None]) -> None:
        """One recheck task per server at a time (a sample a second must not pile them up)."""
        cur = self._rechecks.get(name)
        if cur is not None and not cur.done():
            coro.close()
            return
        task = asyncio.create_task(coro, name=f"recheck:{name}")
        self._rechecks[name] = task
        task.add_done_callback(lambda t: self._rechecks.pop(name, None) if self._rechecks.get(name) is t else None)

    def _sampled_after_launch(self, name: str, frame: ProcFrame, at: float) -> bool:
        """Was this ps taken after the launch forked? By the host's clock when both are known, else by ours."""
        remote = self._launched_remote.get(name)
        if remote is not None and frame.remote_time is not None:
            return frame.remote_time > remote
        return (frame.sampled_at or at) - self._launched_at.get(name, 0) >= LAUNCH_GRACE_S

    def _externals(
        self, host: str, frame: ProcFrame, apps: list[ComputeApp], at: float, managed_sids: set[int]
    ) -> list[Event]:
        uuid_index = {g.reading.uuid: i for i, g in self.state.host(host).gpus.items() if g.reading.uuid}
        out: list[Event] = []
        seen: set[str] = set()
        managed_pids = {s.meta.pid for s in self.state.servers_on(host) if s.meta.managed}
        for meta in external_servers(
            host, frame.procs, apps, uuid_index, managed_sids, managed_pids, self._shares_process_table(host)
        ):
            if meta.port in self.launching.get(host, ()):
                continue  # the console's own launch in flight (its pid is known once the launch command returns)
            seen.add(meta.name)
            cur = self.state.servers.get(meta.name)
            if cur is None or cur.meta.launch_id != meta.launch_id or cur.meta.gpus != meta.gpus or not cur.alive:
                out.append(ServerSeen(meta, at))
        for s in self.state.servers_on(host):
            if s.meta.managed or not s.alive:
                continue
            if s.name in seen:
                self.absences.seen(s.name)
            elif self.absences.missed(s.name, at) >= liveness.EXTERNAL_CONFIRM_S:  # two samples apart
                self.absences.seen(s.name)
                out.append(ServerGone(s.name, at))
        return out

    def _shares_process_table(self, host: str) -> bool:
        return shares_process_table([h.transport for h in self.fleet.hosts.values()], self.fleet.hosts[host].transport)

    async def _health_loop(self, host: str) -> None:
        """/health for every live server of a host, one request at a time (one forward channel)."""
        while True:
            link = self.links[host]
            await link.up.wait()
            now = time.time()
            for s in list(self.state.servers_on(host)):
                if not s.alive or s.meta.port is None:
                    continue
                every = HEALTH_READY_EVERY_S if s.health == "ok" else HEALTH_EVERY_S
                if s.health_at is None or now - s.health_at >= every - 0.05:
                    self.emit([await self.check_health(s.name)])
                if (
                    s.health == "ok"
                    and "--enable-metrics" in s.meta.argv
                    and (s.metrics_at is None or now - s.metrics_at >= METRICS_EVERY_S)
                ):
                    m = await self._get_metrics(s.name)
                    if m is not None:
                        self.emit([m])
                if (
                    s.health == "ok"
                    and "--speculative-algorithm" in s.meta.argv
                    and (s.spec_cumulative is None or now - s.spec_cumulative[0] >= SPEC_INFO_EVERY_S)
                ):
                    c = await self._get_spec_cumulative(s.name)
                    if c is not None:
                        self.emit([c])
            await asyncio.sleep(HEALTH_EVERY_S)

    async def _get_body(self, name: str, path: str, max_bytes: int) -> bytes | None:
        """A server's `path` through its host's pool: total deadline, size cap; None unless it answered 200."""
        from console.sglang.httpbound import METRICS_DEADLINE_S

        url = await self.server_url(name)
        http = self.http_pool.client(self.state.servers[name].meta.host)
        self.http_in_flight += 1
        try:
            r, body = await get_retrying_stale(
                http, url + path, deadline_s=METRICS_DEADLINE_S, max_bytes=max_bytes, what=path
            )
        finally:
            self.http_in_flight -= 1
        return body if r.status_code == 200 else None

    async def _get_spec_cumulative(self, name: str) -> SpecCumulative | None:
        """/server_info's lifetime accept length of a speculative server (bounded, parsed off the loop)."""
        from console.sglang.httpbound import JSON_MAX_BYTES

        try:
            body = await self._get_body(name, "/server_info", JSON_MAX_BYTES)
            value = None if body is None else await asyncio.to_thread(cumulative_accept, body)
        except (httpx.HTTPError, TransportError, KeyError, ValueError, TimeoutError):
            return None
        return None if value is None else SpecCumulative(name, time.time(), value)

    async def _get_metrics(self, name: str) -> MetricsSample | None:
        """/metrics (servers started with --enable-metrics): total deadline, size cap, parsed off the event loop."""
        from console.sglang.client import parse_metrics_off_loop
        from console.sglang.httpbound import METRICS_MAX_BYTES

        try:
            body = await self._get_body(name, "/metrics", METRICS_MAX_BYTES)
            if body is None:
                return None
            m = await parse_metrics_off_loop(body)
        except (httpx.HTTPError, TransportError, KeyError, ValueError, TimeoutError):
            return None
        values = {k: float(v) for k, v in vars(m).items() if isinstance(v, (int, float)) and v is not None}
        return MetricsSample(name, time.time(), values)

    async def check_all_health(self) -> None:
        """One /health round for every live server, all at once (a one-shot `status` waits on this, not on the
        host loops' 1 s cadence)."""
        names = [s.name for s in self.state.servers.values() if s.alive and s.meta.port is not None]
        results = await asyncio.gather(*(self.check_health(n) for n in names))
        self.emit(list(results))

    async def check_health(self, name: str) -> HealthResult:
        t0 = time.monotonic()
        try:
            url = await self.server_url(name)
            http = self.http_pool.client(self.state.servers[name].meta.host)
            self.http_in_flight += 1
            try:
                r, _ = await get_retrying_stale(
                    http, url + "/health", deadline_s=HEALTH_DEADLINE_S, max_bytes=HEALTH_MAX_BYTES, what="/health"
                )
            finally:
                self.http_in_flight -= 1
            ms = (time.monotonic() - t0) * 1000
            status = HEALTH_OF_CODE.get(r.status_code, "error")
            return HealthResult(name, time.time(), status, f"HTTP {r.status_code}", ms)
        except TimeoutError:
            return HealthResult(name, time.time(), "error", f"no complete answer within {HEALTH_DEADLINE_S:g} s")
        except BodyTooLarge as e:
            return HealthResult(name, time.time(), "error", str(e))
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as e:
            return HealthResult(name, time.time(), "down", type(e).__name__)
        except (httpx.HTTPError, TransportError, KeyError) as e:
            return HealthResult(name, time.time(), "error", str(e) or type(e).__name__)

    # -- FleetApi: actions -------------------------------------------------------------------------
    async def preview(self, preset: str, gpus: list[int] | None = None) -> LaunchPreview:
        return await actions.preview(self, preset, gpus)

    async def launch(
        self, preset: str, gpus: list[int] | None = None, *, wait: bool = False, stamp: str | None = None
    ) -> ActionOutcome:
        with operation(f"launch {preset}"):  # the journal groups an action's steps (a CLI command's own wins)
            return await actions.launch(self, preset, gpus, wait=wait, stamp=stamp)

    async def stop_server(self, name: str) -> ActionOutcome:
        with operation(f"stop {name}"):
            return await actions.stop(self, name)

    async def restart(self, name: str, *, force: bool = False) -> ActionOutcome:
        with operation(f"restart {name}"):
            return await actions.restart(self, name, force=force)

    async def wait_ready(self, name: str, timeout: float | None = None) -> ActionOutcome:
        s = self.state.servers.get(name)
        if s is None:
            return ActionOutcome(False, f"no server named '{name}'")
        preset = self.fleet.presets.get(s.meta.preset or "")
        ok, msg = await actions.wait_ready(self, name, timeout or (preset.ready_timeout if preset else 900))
        return ActionOutcome(ok, msg, [name])

    async def reconnect(self, host: str) -> None:
        await self.links[host].reconnect()

    def watch_log(self, name: str, on: bool) -> None:
        s = self.state.servers.get(name)
        host = s.meta.host if on and s is not None else self._log_watch_hosts.get(name)
        if host is None:
            return
        if on:
            self._log_watch_hosts[name] = host  # the off call finds it even after the server left the state
        link = self.links.get(host)
        if link is not None:
            link.watch_log(name, on)

    async def server_url(self, name: str) -> str:
        if name.startswith(ROUTER_PREFIX):  # an SGLang router in front of replicas (console/router/): chat/probe/bench
            spec = self.fleet.routers[name.removeprefix(ROUTER_PREFIX)]
            return await self._url(spec.host, spec.bind, spec.port)
        s = self.state.servers[name]
        if s.meta.port is None:
            raise KeyError(f"{name} has no port")
        return await self._url(s.meta.host, s.meta.bind, s.meta.port)

    async def _url(self, host_name: str, bind: str, port: int) -> str:
        """How this machine reaches `bind:port` on a host: straight (`http = "direct"`) or through its tunnel."""
        host = self.fleet.hosts[host_name]
        loopback = bind in ("0.0.0.0", "::", "", "localhost")
        if host.http == "direct":
            return f"http://{host.address if loopback else bind}:{port}"
        local = await self.links[host_name].forward("127.0.0.1" if loopback else bind, port)
        return f"http://127.0.0.1:{local}"

    def api_key_env(self, name: str) -> str | None:
        s = self.state.servers.get(name)
        p = self.fleet.presets.get(s.meta.preset or "") if s else None
        return p.api_key_env if p else None

    async def read_file(self, host: str, path: str, max_bytes: int = 4_000_000) -> bytes:
        r = await self.links[host].run(f"head -c {int(max_bytes)} {shell_path(path)}", timeout=60)
        if not r.ok:
            raise TransportError(host, r.stderr.strip() or f"exit {r.exit_status}", f"head -c {max_bytes} {path}")
        return r.stdout.encode()
