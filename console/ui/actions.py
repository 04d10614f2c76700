"""The console's actions (launch, relaunch, stop, probe, chat, reconnect) run as App workers, refused in read-only mode."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from rich.text import Text

from console.fleet.events import Notice, NoticeKind
from console.remote_text import for_terminal
from console.ui.messages import ActionDone
from console.ui.probe_note import ProbeNote

if TYPE_CHECKING:
    from collections import deque

    from textual.notifications import SeverityLevel

    from console.fleet.api import FleetApi
    from console.fleet.state import FleetState
    from console.ui.backend import ChatBackend, ProbeReport


class ActionHost(Protocol):
    """What the actions use of the App they are mixed into (DflashApp): mypy checks the App against it."""

    read_only: bool
    api: FleetApi | None
    backend: ChatBackend
    activity: deque[Notice]
    acting: set[str]
    last_probe: ProbeReport | None
    probe_note: ProbeNote | None

    @property
    def bench_runner(self) -> Callable[[Any, str], None] | None:
        """`bench_runner(app, server)`, installed by the bench feature (console/ui/bench_screen.py)."""
        ...

    @property
    def state(self) -> FleetState: ...

    def now(self) -> float: ...

    def notify(self, message: str, *, title: str = ..., severity: SeverityLevel = ..., markup: bool = ...) -> None: ...

    def post_message(self, message: ActionDone) -> bool: ...

    def run_worker(
        self,
        work: Any,
        *,
        name: str | None = ...,
        group: str = ...,
        description: str = ...,
        exit_on_error: bool = ...,
        exclusive: bool = ...,
    ) -> Any: ...

    def push_screen(self, screen: Any, callback: Any = ...) -> Any: ...

    def refuse_if_read_only(self, action: str) -> bool: ...

    def _run(self, action: str, target: str, fn: Callable[[], Awaitable[tuple[bool, str]]]) -> None: ...

    def api_key_for(self, name: str) -> str | None: ...

    def confirm(self, question: Text, then: Callable[[], Any]) -> None: ...

    def offer_force(self, name: str, refusal: str, then: Callable[[], Any]) -> None: ...


TOLD_BY_OUTCOME = frozenset({"launch", "stop", "stopped"})
"""Steps of an action whose outcome line (ActionDone) says the same: while this console runs the action they go
to neither the activity panel nor a toast, so a stop is logged once (a SIGKILL, a crash are still told)."""

MUTATING = frozenset({"launch", "relaunch", "stop", "reconnect", "crash", "drafter", "bench"})
"""Actions --read-only hides from footer and palette and refuses if invoked anyway."""


class ActionsMixin:
    """Mixed into DflashApp: every remote action goes through here, in a worker owned by the App."""

    def refuse_if_read_only(self: ActionHost, action: str) -> bool:
        """True (and a toast) when read-only forbids the action."""
        if self.read_only and action in MUTATING:
            self.notify(f"read-only: {action} is disabled", severity="warning", markup=False)
            return True
        return False

    def _run(self: ActionHost, action: str, target: str, fn: Callable[[], Awaitable[tuple[bool, str]]]) -> None:
        """Runs one action in a named worker and reports it as ActionDone + toast."""

        async def job() -> None:
            self.acting.add(target)
            try:
                ok, message = await fn()
            except Exception as e:
                ok, message = False, f"{type(e).__name__}: {e}"
            finally:
                self.acting.discard(target)
            self.post_message(ActionDone(action, target, ok, message))

        self.run_worker(
            job(),
            group=f"{action}:{target}",
            name=f"{action}:{target}",
            exclusive=True,
            exit_on_error=False,
            description=f"{action} {target}",
        )

    def told_by_outcome(self: ActionHost, n: Notice) -> bool:
        """A step of an action this console is running on the notice's server (a launch's target is the preset
        its replicas are named after), which the action's one outcome line will say."""
        if n.server is None or not (
            n.kind is NoticeKind.STOPPED or (n.kind is NoticeKind.ACTION and n.step in TOLD_BY_OUTCOME)
        ):
            return False
        return n.server in self.acting or n.server.split("@", 1)[0] in self.acting

    def on_action_done(self: ActionHost, msg: ActionDone) -> None:
        sev: SeverityLevel = "information" if msg.ok else "error"
        self.activity.append(
            Notice(
                self.now(),
                "info" if msg.ok else "error",
                f"{msg.action} {msg.target}: {msg.message or ('ok' if msg.ok else 'failed')}",
            )
        )
        self.notify(
            for_terminal(msg.message or f"{msg.action} {msg.target}: {'ok' if msg.ok else 'failed'}"),
            title=f"{msg.action} {msg.target}",
            severity=sev,
            markup=False,
        )

    # -- the verbs ---------------------------------------------------------------------------
    def start_launch(self: ActionHost, preset: str, gpus: list[int] | None, stamp: str | None = None) -> None:
        """`stamp`: the confirmed preview's, so the launch runs the commands it showed (the same log names)."""
        if self.refuse_if_read_only("launch") or self.api is None:
            return
        api = self.api

        async def go() -> tuple[bool, str]:
            out = await api.launch(preset, gpus, stamp=stamp)
            return out.ok, out.message

        self._run("launch", preset, go)

    def request_relaunch(self: ActionHost, name: str | None) -> None:
        if name is None or self.refuse_if_read_only("relaunch") or self.api is None:
            return
        api = self.api
        srv = self.state.servers.get(name)
        app = self

        async def forced() -> tuple[bool, str]:
            out = await api.restart(name, force=True)
            return out.ok, out.message

        async def go() -> tuple[bool, str]:
            out = await api.restart(name)
            if not out.ok and out.forcible:  # other processes hold the VRAM: said with the owner, force offered
                app.offer_force(name, out.message, lambda: app._run("relaunch", name, forced))
            return out.ok, out.message

        if srv is not None and srv.alive and not srv.phase.terminal:
            self.confirm(
                Text.assemble("Relaunch ", (name, "bold"), "? It is running and will be stopped first."),
                lambda: self._run("relaunch", name, go),
            )
        else:
            self._run("relaunch", name, go)

    def offer_force(self: ActionHost, name: str, refusal: str, then: Callable[[], Any]) -> None:
        """A relaunch refused because other processes hold its GPUs' VRAM: the refusal (owners named), then force?"""
        from console.ui.screens.dialogs import ConfirmScreen

        question = Text.assemble(
            ("Relaunch ", "bold"),
            (name, "bold"),
            (" refused:\n", "bold"),
            for_terminal(refusal),
            "\n\nForce it? The server is stopped and relaunched beside them (it may then run out of memory).",
        )

        def done(yes: bool | None) -> None:
            if yes:
                then()

        self.push_screen(ConfirmScreen(question, yes_label="Force relaunch"), done)

    def request_stop(self: ActionHost, name: str | None) -> None:
        if name is None or self.refuse_if_read_only("stop") or self.api is None:
            return
        api = self.api

        async def go() -> tuple[bool, str]:
            out = await api.stop_server(name)
            return out.ok, out.message

        self.confirm(
            Text.assemble("Stop ", (name, "bold"), "? Its GPUs will be freed."), lambda: self._run("stop", name, go)
        )

    def request_reconnect(self: ActionHost, host: str | None) -> None:
        if host is None or self.refuse_if_read_only("reconnect") or self.api is None:
            return
        api = self.api

        async def go() -> tuple[bool, str]:
            await api.reconnect(host)
            return True, f"reconnecting {host}"

        self._run("reconnect", host, go)

    def request_probe(self: ActionHost, name: str | None) -> None:
        if name is None or self.api is None:
            return
        app, api, backend = self, self.api, self.backend

        async def go() -> tuple[bool, str]:
            url = await api.server_url(name)
            report = await backend.probe(url, app.api_key_for(name))
            app.last_probe = report
            app.probe_note = ProbeNote(name, report.ok, report.summary, app.now())
            return report.ok, report.summary

        self._run("probe", name, go)

    def request_bench(self: ActionHost, name: str | None) -> None:
        """Hook for the bench issue: `bench_runner(app, server)` is called when one is installed."""
        if name is None or self.refuse_if_read_only("bench"):
            return
        if self.bench_runner is None:
            self.notify("bench is not available in this build", severity="warning", markup=False)
            return
        self.bench_runner(self, name)

    def api_key_for(self: ActionHost, name: str) -> str | None:
        """The API key from the env var the preset names; read here, never shown."""
        env = self.api.api_key_env(name) if self.api is not None else None
        return os.environ.get(env) if env else None

    def confirm(self: ActionHost, question: Text, then: Callable[[], Any]) -> None:
        """Asks yes/no in a modal and runs `then` on yes."""
        from console.ui.screens.dialogs import ConfirmScreen

        def done(yes: bool | None) -> None:
            if yes:
                then()

        self.push_screen(ConfirmScreen(question), done)
