"""RouterManager: starts, stops and watches SGLang routers, and keeps each one's workers = the ready replicas.

It rides on a FleetController: the host's link runs the router's commands and forwards its ports, and
the fleet state says which replicas serve. A replica that crashes or stops is removed at the router
through the router's own API (DELETE /workers/ID), one that serves again is added (POST /workers).
The TUI runs `watch()`; the CLI calls `refresh`, `up`, `down` and `sync` once.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import httpx

from console.fleet.api import ActionOutcome
from console.fleet.journalview import operation
from console.router import command as rc
from console.router import look
from console.router.api import RouterApi, RouterWorker
from console.router.reconcile import Changes, plan_changes
from console.router.spec import ROUTER_PREFIX
from console.router.state import RouterView, crash_cause
from console.transport.base import TransportError

if TYPE_CHECKING:
    from console.fleet.controller import FleetController
    from console.sglang.bench import BenchTarget

START_TIMEOUT_S = 60.0
LOAD_POLICIES = ("cache_aware", "power_of_two")
"""Policies under which sglang-router 0.3 counts a worker's in-flight requests (`load` in /workers)."""
PROCESS_EVERY_S = 3.0
Listener = Callable[[str], None]


async def router_base_url(ctl: FleetController, name: str) -> str:
    """A router's OpenAI base URL as this machine reaches it (`router:NAME` or NAME): the host's tunnel, or direct."""
    return await ctl.server_url(ROUTER_PREFIX + name.removeprefix(ROUTER_PREFIX))


async def router_target(api: FleetController, name: str, wait_s: float = 20.0) -> BenchTarget:
    """`bench router:NAME`: a BenchTarget for the router's endpoint (no preset, no GPUs of its own)."""
    from console.sglang.bench import BenchTarget

    rname = name.removeprefix(ROUTER_PREFIX)
    if rname not in api.fleet.routers:
        raise LookupError(f"no router '{rname}' in hosts.toml (routers: {', '.join(api.fleet.routers) or 'none'})")
    await api.start()
    spec = api.fleet.routers[rname]
    if not await api.links[spec.host].wait_up(wait_s):
        raise LookupError(f"host {spec.host} of router {rname} is unreachable")
    return BenchTarget(
        server=ROUTER_PREFIX + rname, host=spec.host, port=spec.port, url=await router_base_url(api, rname)
    )


class RouterManager:
    """Every `[routers.NAME]` of the fleet: their views, actions and the worker sync."""

    def __init__(self, ctl: FleetController, http: httpx.AsyncClient | None = None) -> None:
        self.ctl = ctl
        self.fleet = ctl.fleet
        self.http = http or httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(10.0, connect=5.0))
        self.views: dict[str, RouterView] = {
            n: RouterView(n, s.host, s.port, s.policy) for n, s in self.fleet.routers.items()
        }
        self._listeners: list[Listener] = []
        self._pending: dict[str, dict[str, float]] = {n: {} for n in self.fleet.routers}
        self._proc_at: dict[str, float] = {}
        self._busy: set[str] = set()

    # -- plumbing ---------------------------------------------------------------------------------
    def subscribe(self, fn: Listener) -> None:
        self._listeners.append(fn)

    def _set(self, view: RouterView) -> RouterView:
        self.views[view.name] = view
        for fn in list(self._listeners):
            with contextlib.suppress(Exception):  # a broken subscriber must not stop the routers
                fn(view.name)
        return view

    async def aclose(self) -> None:
        await self.http.aclose()

    def routers_on(self, host: str) -> list[str]:
        return [n for n, s in self.fleet.routers.items() if s.host == host]

    async def url(self, name: str) -> str:
        """The router's OpenAI base URL as this machine reaches it (`router:NAME` or NAME)."""
        return await router_base_url(self.ctl, name)

    async def api(self, name: str) -> RouterApi:
        spec = self.fleet.routers[name]
        # the metrics port listens on the host's loopback only (the console sets --prometheus-host 127.0.0.1)
        host = self.fleet.hosts[spec.host]
        if host.http == "direct":
            mbase = None
        else:
            mbase = f"http://127.0.0.1:{await self.ctl.links[spec.host].forward('127.0.0.1', spec.prometheus_port)}"
        return RouterApi(self.http, await self.url(name), mbase)

    # -- which workers --------------------------------------------------------------------------------
    def ready_urls(self, name: str) -> list[str]:
        """Worker URLs of the router's replicas that serve now (alive, ready or serving, /health 200)."""
        spec = self.fleet.routers[name]
        out = []
        for s in self.ctl.state.servers.values():
            m = s.meta
            if (
                m.preset in spec.presets
                and m.host == spec.host
                and m.port is not None
                and s.alive
                and s.phase.up
                and s.health == "ok"
            ):
                out.append(rc.worker_url(m.bind, m.port))
        return sorted(set(out))

    def unsure_urls(self, name: str) -> list[str]:
        """Live replicas whose /health has not answered (or said 503) yet: a console that just re-attached them
        still re-reads their logs, so their phase may say `launching` for a while; the router keeps them."""
        spec = self.fleet.routers[name]
        return sorted(
            {
                rc.worker_url(s.meta.bind, s.meta.port)
                for s in self.ctl.state.servers.values()
                if s.meta.preset in spec.presets
                and s.meta.host == spec.host
                and s.meta.port is not None
                and s.alive
                and s.health in (None, "warming")
            }
        )

    def owned_urls(self, name: str) -> list[str]:
        """Every URL the router's presets plan or have run on: the workers the console may remove."""
        spec = self.fleet.routers[name]
        urls = set(rc.planned_workers(self.fleet, name))
        for s in self.ctl.state.servers.values():
            if s.meta.preset in spec.presets and s.meta.host == spec.host and s.meta.port is not None:
                urls.add(rc.worker_url(s.meta.bind, s.meta.port))
        return sorted(urls)

    def worker_load(self, name: str, w: RouterWorker) -> str:
        """`load N` as the router counts it (cache_aware and power_of_two do; round_robin and random report 0
        whatever runs), else `run N`: the replica's own running requests from its log; `-` when neither is known."""
        if self.fleet.routers[name].policy in LOAD_POLICIES:
            return f"load {'-' if w.load is None else w.load}"
        who = self.replica_of(name, w.url)
        running = self.ctl.state.servers[who].log.running if who else None
        return f"run {'-' if running is None else running}"

    def replica_of(self, name: str, url: str) -> str | None:
        """The server name behind a worker URL (for the band's per-worker lines)."""
        return look.replica_of(self.fleet, self.ctl.state.servers, name, url)

    def ended_replica_of(self, name: str, url: str) -> str | None:
        return look.ended_replica_of(self.fleet, self.ctl.state.servers, name, url)

    def ended_workers(self, name: str) -> dict[str, str]:
        return look.ended_workers(self.fleet, self.ctl.state.servers, self.views[name])

    # -- looking --------------------------------------------------------------------------------------
    async def refresh(self, name: str, *, process: bool = True) -> RouterView:
        """Re-read one router: its process (pid file + ps), then /health, /workers and the metrics."""
        spec = self.fleet.routers[name]
        host = self.fleet.hosts[spec.host]
        v = self.views[name]
        now = time.time()
        if process or v.phase not in ("running", "starting"):
            try:
                r = await self.ctl.links[spec.host].run(
                    rc.status_script(rc.state_dir(host, name)), timeout=15, wait_up=2.0
                )
            except TransportError as e:
                return self._set(replace(v, phase="unknown", error=str(e), checked_at=now))
            self._proc_at[name] = now
            v = look.process_view(v, rc.parse_status(r.stdout), now)
            if v.phase == "stopped":
                return self._set(v)
            if v.phase == "crashed":
                return self._set(replace(v, error=await self._cause(name, v.log_path)))
        try:
            api = await self.api(name)
            code = await api.health()
            if code != 200:
                return self._set(look.not_ready(v, code, now))
            workers = tuple(await api.workers())
            counters = None
            with contextlib.suppress(httpx.HTTPError, TimeoutError, ValueError, TransportError):
                counters = await api.counters()
        except (httpx.HTTPError, TimeoutError, ValueError, TransportError, OSError) as e:
            return self._set(look.unanswered(v, f"{type(e).__name__}: {e}", now))
        return self._set(look.answered(v, workers, counters, now, time.monotonic()))

    async def _cause(self, name: str, log_path: str | None) -> str:
        spec = self.fleet.routers[name]
        host = self.fleet.hosts[spec.host]
        tail = ""
        if log_path:
            with contextlib.suppress(TransportError):
                tail = (await self.ctl.links[spec.host].run(rc.log_tail_script(log_path), timeout=10)).stdout
        return crash_cause(tail, spec.python or host.python, spec.host, spec.port)

    # -- the worker sync ------------------------------------------------------------------------------
    async def sync(self, name: str) -> Changes:
        """Make the router's workers the ready replicas: add the missing, remove the crashed/stopped ones."""
        v = self.views[name]
        if v.phase != "running" or self.ctl.read_only:  # read-only watches, never changes the router
            return Changes()
        if not await self.ctl.wait_discovered(v.host, 0.01):
            return Changes()  # until the host's servers are re-attached, a missing one is unknown, not stopped
        now = time.time()
        pending = self._pending[name]
        ch = plan_changes(
            self.ready_urls(name), self.owned_urls(name), list(v.workers), pending, now, self.unsure_urls(name)
        )
        if not ch:
            return ch
        api = await self.api(name)
        notes, removed = [], set()
        for w in ch.remove:
            ok, msg = await api.remove_worker(w.id)
            pending.pop(w.url, None)
            notes.append(f"removed {w.url}" if ok else f"could not remove {w.url}: {msg}")
            if ok:
                removed.add(w.url)
            self.ctl.journal.event("router-remove-worker", host=v.host, ok=ok, message=f"{name}: {w.url} {msg}")
        for u in ch.add:
            ok, msg = await api.add_worker(u)
            if ok:
                pending[u] = now
            notes.append(f"added {u}" if ok else f"could not add {u}: {msg}")
            self.ctl.journal.event("router-add-worker", host=v.host, ok=ok, message=f"{name}: {u} {msg}")
        self._set(self.views[name].after_change("; ".join(notes), removed))
        return ch

    async def watch(self, every: float = 1.0) -> None:
        """The TUI's loop: every router re-read each `every` s (its process every PROCESS_EVERY_S), then synced."""
        while True:
            for name in list(self.fleet.routers):
                if name in self._busy:
                    continue
                link = self.ctl.links.get(self.fleet.routers[name].host)
                if link is None or not link.up.is_set():
                    if self.views[name].phase != "unknown":
                        self._set(replace(self.views[name], phase="unknown", error="host not connected"))
                    continue
                proc = time.time() - self._proc_at.get(name, 0.0) >= PROCESS_EVERY_S
                with contextlib.suppress(Exception):  # one router's trouble never stops the others' watch
                    await self.refresh(name, process=proc)
                    await self.sync(name)
            await asyncio.sleep(every)

    # -- actions --------------------------------------------------------------------------------------
    async def up(self, name: str, *, wait_s: float = START_TIMEOUT_S) -> ActionOutcome:
        """Start the router over the replicas that serve now; wait for its /health (the sync adds the rest)."""
        name = name.removeprefix(ROUTER_PREFIX)
        if self.ctl.read_only:
            return ActionOutcome(False, "read-only: router up is disabled")
        with operation(f"router up {name}"):
            self._busy.add(name)
            try:
                return await self._up(name, wait_s)
            finally:
                self._busy.discard(name)

    async def _up(self, name: str, wait_s: float) -> ActionOutcome:
        spec = self.fleet.routers[name]
        v = await self.refresh(name)
        if v.phase in ("running", "starting"):
            return ActionOutcome(False, f"router {name} is already {v.phase} on {spec.host} (pid {v.pid})")
        ready = self.ready_urls(name)
        plan = rc.plan_router(self.fleet, name, dt.datetime.now().strftime("%Y%m%d-%H%M%S"), ready)
        self._set(replace(v, phase="starting", error=None, log_path=plan.log_path, workers=()))
        try:
            r = await self.ctl.links[spec.host].run(
                rc.start_script(plan, time.time(), self.fleet.hosts[spec.host].env), timeout=30
            )
        except TransportError as e:
            return ActionOutcome(False, f"router {name}: {e}")
        if not r.ok:
            return ActionOutcome(
                False, f"router {name} did not start on {spec.host}: {(r.stderr or r.stdout).strip()[-300:]}"
            )
        self.ctl.journal.event("router-up", host=spec.host, message=f"{name}: {' '.join(plan.argv)}")
        # the router registers its --worker-urls in the background after /health answers: they are on their way
        self._pending[name] = {u: time.time() for u in ready}
        deadline = time.monotonic() + wait_s
        listed_by = None
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            v = await self.refresh(name)
            if v.phase == "running" and not set(ready) <= {w.url for w in v.workers}:
                listed_by = listed_by or time.monotonic() + 10.0
                if time.monotonic() < listed_by:
                    continue  # up, still registering its workers
            if v.phase == "running":
                await self.sync(name)
                n = len(ready)
                return ActionOutcome(
                    True,
                    f"router {name} is up on {spec.host}:{spec.port} ({spec.policy}) "
                    f"with {n} worker{'s' if n != 1 else ''}; log {plan.log_path}",
                )
            if v.phase == "crashed":
                return ActionOutcome(False, f"router {name} exited: {v.error}")
        return ActionOutcome(False, f"router {name} did not answer /health within {wait_s:g} s; see {plan.log_path}")

    async def down(self, name: str) -> ActionOutcome:
        name = name.removeprefix(ROUTER_PREFIX)
        if self.ctl.read_only:
            return ActionOutcome(False, "read-only: router down is disabled")
        spec = self.fleet.routers[name]
        host = self.fleet.hosts[spec.host]
        with operation(f"router down {name}"):
            self._busy.add(name)
            try:
                r = await self.ctl.links[spec.host].run(
                    rc.stop_script(rc.state_dir(host, name)), timeout=rc.STOP_GRACE_S + 15
                )
            except TransportError as e:
                return ActionOutcome(False, f"router {name}: {e}")
            finally:
                self._busy.discard(name)
            self._pending[name].clear()
            await self.refresh(name)
            out = r.stdout.strip()
            self.ctl.journal.event("router-down", host=spec.host, ok=r.ok, message=f"{name}: {out}")
            if out == "none":
                return ActionOutcome(True, f"router {name} is already stopped")
            if not r.ok:
                return ActionOutcome(
                    False,
                    f"router {name} did not stop ({out or r.stderr.strip()[-300:]}) "
                    f"after SIGTERM, {rc.STOP_GRACE_S} s, then SIGKILL",
                )
            return ActionOutcome(True, f"router {name} stopped")

    async def restart(self, name: str) -> ActionOutcome:
        out = await self.down(name)
        if not out.ok:
            return out
        return await self.up(name)
