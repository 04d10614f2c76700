"""RouterBand: one SGLang router above its host's GPU panes: phase, per-worker health and load, requests/s.

Keys on the band (focus it with ↑ from the top panes, tab, or a click): `l` starts the router over the
serving replicas, `s` stops it (asks), `r` restarts it, `c` chats through it, `p` probes it, `b` benches
it. The RouterManager (console/router/manager.py) is created on first use and watched in an app worker.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from rich.text import Text
from textual.app import SystemCommand
from textual.binding import Binding
from textual.content import Content
from textual.widgets import Static

from console.router.manager import RouterManager
from console.router.spec import ROUTER_PREFIX
from console.router.state import RouterView
from console.ui import format as fmt
from console.ui.console_app import console_app
from console.ui.textual_private import KeysToScreen
from console.ui.visibility import update_row
from console.ui.widgets.gpu_pane import colours

Part = tuple[str, str]
"""(text, colour key or '')."""


def router_manager(app: Any) -> RouterManager | None:
    """The app's RouterManager, made (and its watch loop started) the first time a band asks for it."""
    mgr: RouterManager | None = getattr(app, "router_manager", None)
    if mgr is not None:
        return mgr
    api = getattr(app, "api", None)
    fleet = getattr(api, "fleet", None)
    if api is None or not getattr(fleet, "routers", None) or not hasattr(api, "links"):
        return None
    mgr = RouterManager(api)
    app.router_manager = mgr
    app.run_worker(mgr.watch(), group="routers", name="routers", exit_on_error=False, description="router watch")
    return mgr


def router_bands(app: Any, host: str) -> list[RouterBand]:
    """The bands for the routers of `host` (the hook HostBand.compose calls)."""
    fleet = getattr(app, "fleet", None)
    routers = getattr(fleet, "routers", None) or {}
    return [RouterBand(n) for n, r in routers.items() if r.host == host]


def band_parts(
    v: RouterView,
    workers: list[tuple[str, str | None, bool, str, float | None]],
    missing: list[tuple[str, str]],
    now: float,
) -> tuple[list[Part], list[Part]]:
    """The band's two rows (pure). `workers`: (url, replica name, healthy, `load N`/`run N`, req/s) as the router
    lists them;
    `missing`: (replica, phase) of the router's replicas it does not list."""
    icon, tone = {
        "running": ("⇄", "phase-ready"),
        "starting": ("◌", "phase-starting"),
        "crashed": ("✖", "phase-crashed"),
        "stopped": ("○", "dim"),
        "unknown": ("?", "stale"),
    }[v.phase]
    head: list[Part] = [
        (f"{icon} router ", tone),
        (fmt.clean(v.name, 40), "bold"),
        (f" :{v.port} {v.policy}  ", ""),
        (v.phase, tone),
    ]
    body: list[Part] = []
    if v.phase == "running":
        healthy = sum(w[2] for w in workers)
        head.append((f" · {healthy}/{len(workers)} workers healthy", "phase-ready" if healthy else "phase-crashed"))
        head.append((" · " + ("- req/s" if v.rps is None else f"{v.rps:.1f} req/s"), ""))
        if v.started_at:
            head.append((f" · up {fmt.age(max(0.0, now - v.started_at))}", "dim"))
        for url, who, ok, load, rps in workers:
            label = who.rsplit(":", 1)[-1] if who else fmt.clean(url.rsplit(":", 1)[-1], 12)
            body.append((("✓ " if ok else "✖ ") + label, "phase-ready" if ok else "phase-crashed"))
            body.append((f" {load}" + ("" if rps is None else f" {rps:.1f}/s") + "   ", ""))
        for who, phase in missing:
            body.append((f"· {who.rsplit(':', 1)[-1]} not routed ({phase})   ", "dim"))
        if v.last_change:
            body.append((fmt.clean(v.last_change, 120), "dim"))
    elif v.phase == "crashed":
        head.append((f": {fmt.clean(v.error or '', 160)}", "phase-crashed"))
        body.append(("l: start it again · its log: " + fmt.clean(v.log_path or "-", 100), "dim"))
    elif v.phase == "stopped":
        n = len(workers)  # worded without phase names: "serving" on the band would read as a server's phase
        body.append(
            (
                f"l: start it over the {n} replica{'s that answer' if n != 1 else ' that answers'} now"
                if n
                else "l: start it (no replica answers yet; they are added as they come up)",
                "dim",
            )
        )
    elif v.phase == "starting" and v.error:
        head.append((f" ({fmt.clean(v.error, 80)})", "dim"))
    elif v.phase == "unknown" and v.error:
        head.append((f": {fmt.clean(v.error, 120)}", "stale"))
    return head, body


class RouterBand(KeysToScreen, Static, can_focus=True):
    """Two rows about one router; the band's own keys act on the router."""

    DEFAULT_CSS = """
    RouterBand { height: 2; padding: 0 1; }
    RouterBand:focus { background: $accent 20%; text-style: none; }
    """
    BINDINGS = [
        Binding("l", "router_up", "Router up", id="router-up", tooltip="Start the router over the serving replicas."),
        Binding("s", "router_down", "Router down", id="router-down", tooltip="Stop the router (asks first)."),
        Binding("r", "router_restart", "Restart", id="router-restart", tooltip="Stop and start the router."),
        Binding("c", "router_chat", "Chat", id="router-chat", tooltip="Chat through the router."),
        Binding(
            "p", "router_probe", "Probe", id="router-probe", tooltip="Health and a short generation via the router."
        ),
        Binding(
            "b", "router_bench", "Bench", id="router-bench", show=False, tooltip="Concurrency sweep via the router."
        ),
    ]

    def __init__(self, router: str) -> None:
        super().__init__(markup=False, id=f"router-{router}")
        self.router = router
        self.text = ""
        """What the band shows now, as plain text."""
        self._phase = ""

    @property
    def target(self) -> str:
        return ROUTER_PREFIX + self.router

    def _on_router_change(self, name: str) -> None:
        if name == self.router and self.is_attached:
            self.call_later(self.sync)

    def on_mount(self) -> None:
        mgr = router_manager(self.app)
        if mgr is not None:
            mgr.subscribe(self._on_router_change)
        self.set_interval(1.0, self.sync)
        self.sync()

    def sync(self) -> None:
        mgr = router_manager(self.app)
        if mgr is None or self.router not in mgr.views:
            return
        v = mgr.views[self.router]
        if v.phase == "crashed" and self._phase in ("running", "starting"):  # told once, as a server crash is
            self.app.notify(
                f"router {self.router} exited: {fmt.clean(v.error or '', 200)}",
                severity="error",
                markup=False,
                timeout=10,
            )
        self._phase = v.phase
        # a listed worker whose replica has ended is not healthy, whatever the router says before the next sync
        ended = mgr.ended_workers(self.router)
        workers = sorted(
            (
                (
                    w.url,
                    mgr.replica_of(self.router, w.url) or ended.get(w.url),
                    w.healthy and w.url not in ended,
                    mgr.worker_load(self.router, w),
                    v.worker_rps.get(w.url),
                )
                for w in v.workers
            ),
            key=lambda w: (w[1] is None, w[1] or w[0]),
        )
        listed = {w.url for w in v.workers}
        if v.phase != "running":  # what `l` would start it over
            workers = [(u, None, True, "", None) for u in mgr.ready_urls(self.router)]
        spec = mgr.fleet.routers[self.router]
        from console.router.command import worker_url

        missing = sorted(
            (s.name, s.phase.value)
            for s in console_app(self).state.servers.values()
            if s.meta.preset in spec.presets
            and s.meta.host == spec.host
            and s.meta.port is not None
            and (s.alive or s.phase == "crashed")
            and worker_url(s.meta.bind, s.meta.port) not in listed
        )
        head, body = band_parts(v, workers, missing if v.phase == "running" else [], time.time())
        c = colours(self)
        lines = [Content.assemble(*((t, c.get(k, k)) if k else t for t, k in row)) for row in (head, body)]
        shown = Content("\n").join(lines)
        self.text = shown.plain
        update_row(self, shown)

    # -- keys -----------------------------------------------------------------------------------
    def _mgr(self) -> RouterManager | None:
        return router_manager(self.app)

    def _act(self, action: str, fn: Any) -> None:
        app = console_app(self)
        if app.refuse_if_read_only("stop" if action == "router down" else "launch"):
            return

        async def go() -> tuple[bool, str]:
            out = await fn()
            self.call_later(self.sync)
            return out.ok, out.message

        app._run(action, self.router, go)

    def action_router_up(self) -> None:
        mgr = self._mgr()
        if mgr is not None:
            self._act("router up", lambda: mgr.up(self.router))

    def action_router_down(self) -> None:
        mgr = self._mgr()
        if mgr is None:
            return
        spec = mgr.fleet.routers[self.router]
        console_app(self).confirm(
            Text.assemble(
                "Stop router ",
                (self.router, "bold"),
                f"? Clients of {spec.host}:{spec.port} lose it (the replicas keep serving).",
            ),
            lambda: self._act("router down", lambda: mgr.down(self.router)),
        )

    def action_router_restart(self) -> None:
        mgr = self._mgr()
        if mgr is not None:
            self._act("router restart", lambda: mgr.restart(self.router))

    def action_router_chat(self) -> None:
        console_app(self).open_chat(self.target)

    def action_router_probe(self) -> None:
        console_app(self).request_probe(self.target)

    def action_router_bench(self) -> None:
        console_app(self).request_bench(self.target)


def router_commands(app: Any) -> Iterator[SystemCommand]:
    """The palette's `router: …` commands for every router (the app's get_system_commands yields them)."""
    mgr = router_manager(app)
    if mgr is None:
        return

    def act(name: str, verb: str) -> None:
        if app.refuse_if_read_only("stop" if verb == "down" else "launch"):
            return
        fn = {"up": mgr.up, "down": mgr.down, "restart": mgr.restart}[verb]

        async def go() -> tuple[bool, str]:
            out = await fn(name)
            return out.ok, out.message

        app._run(f"router {verb}", name, go)

    for name, v in mgr.views.items():
        live = v.phase in ("running", "starting")
        if not app.read_only:
            if not live:
                yield SystemCommand(
                    f"router: up {name}", "Start the router over the serving replicas", lambda n=name: act(n, "up")
                )
            else:
                yield SystemCommand(
                    f"router: down {name}", "Stop the router (the replicas keep serving)", lambda n=name: act(n, "down")
                )
                yield SystemCommand(
                    f"router: restart {name}", "Stop and start the router", lambda n=name: act(n, "restart")
                )
        if v.phase == "running":
            yield SystemCommand(
                f"router: chat {name}", "Chat through the router", lambda n=name: app.open_chat(ROUTER_PREFIX + n)
            )
