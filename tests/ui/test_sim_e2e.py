"""The real FleetController over a local-transport sim fleet, driven through the UI: launch -> ready, crash -> relaunch, stop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from console.ui.app import DflashApp
from console.ui.demo import DemoFleet
from console.ui.messages import ActionDone
from console.ui.screens.chat import ChatScreen, Turn
from console.ui.screens.dialogs import ConfirmScreen
from console.ui.screens.launch import LaunchScreen
from console.ui.widgets.gpu_pane import GpuPane
from tests.patience import patient


async def until(pilot, cond: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + patient(timeout)
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {patient(timeout):g} s waiting for {what}")
        await pilot.pause(0.1)


async def focus(pilot, host: str, gpu: int, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    """Focuses that GPU's pane and waits until it has the focus: the bands can still re-form as the hosts report
    (new panes), so it focuses the pane found again until one keeps it."""

    def focused() -> tuple[str, int] | None:
        f = pilot.app.screen.focused
        return (f.host, f.gpu) if isinstance(f, GpuPane) else None

    end = time.monotonic() + patient(timeout)
    while focused() != (host, gpu):
        if time.monotonic() > end:
            raise AssertionError(f"{host}'s GPU{gpu} never kept the focus ({focused()} has it)")
        for p in pilot.app.screen.query(GpuPane):
            if (p.host, p.gpu) == (host, gpu):
                p.focus()
        await pilot.pause(0.1)


async def test_launch_ready_crash_relaunch_stop_on_sim(tmp_path) -> None:  # type: ignore[no-untyped-def]
    demo = DemoFleet(root=str(tmp_path / "sim"), time_scale=0.1, autostart=False)
    app = DflashApp(api_factory=demo.bring_up, demo=demo)
    msgs: list[object] = []
    notes: list[str] = []
    try:
        async with app.run_test(size=(160, 48), message_hook=msgs.append) as pilot:
            real_notify = app.notify
            app.notify = lambda message, **kw: (notes.append(message), real_notify(message, **kw))  # type: ignore
            await until(
                pilot,
                lambda: (
                    app.api is not None
                    and all(h.conn == "up" and h.gpus for h in app.state.hosts.values())
                    and len(app.state.hosts) >= 2
                ),
                what="both sim hosts up",
            )
            await focus(pilot, "ct129", 0)
            await pilot.press("l")
            await until(pilot, lambda: isinstance(app.screen, LaunchScreen), what="launch screen")
            await pilot.pause()
            await pilot.press("enter")
            await until(pilot, lambda: getattr(app.screen, "preview", None) is not None, what="preview")
            assert "sglang.launch_server" in str(app.screen.query_one("#preview-body").render())
            await pilot.press("y")
            name = "qwen36-mtp@ct129:gpu0-1"
            try:
                await until(pilot, lambda: name in app.state.servers, what="server seen")
            except AssertionError as e:  # a refused launch says why in a toast
                raise AssertionError(f"{e}; toasts: {notes}") from None
            await until(pilot, lambda: app.state.servers[name].phase in ("ready", "serving"), 60, "ready")
            await until(pilot, lambda: any(f"{name} is ready" in n for n in notes), 5, f"ready toast in {notes}")
            pane = next(p for p in app.screen.query(GpuPane) if p.host == "ct129" and p.gpu == 0)
            await until(pilot, lambda: pane.has_class("-ready"), 5, "green pane")

            await pilot.press("p")
            await until(
                pilot, lambda: any(isinstance(m, ActionDone) and m.action == "probe" for m in msgs), 30, "probe"
            )
            probe = next(m for m in msgs if isinstance(m, ActionDone) and m.action == "probe")
            assert probe.ok and "health ready" in probe.message and "TTFT" in probe.message, probe.message

            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, ChatScreen), 5, "chat screen")
            await pilot.pause()
            await pilot.press(*"Name a GPU.", "enter")
            await until(
                pilot,
                lambda: (
                    bool(app.screen.query(Turn))
                    and "TTFT" in str(app.screen.query_one(Turn).query_one("#stats").render())
                ),
                30,
                "streamed answer",
            )
            turn = app.screen.query_one(Turn)
            assert turn.answer.strip() and "tok/s" in str(turn.query_one("#stats").render())
            await pilot.press("escape")
            await pilot.pause()

            cmds = {c.title: c for c in app.get_system_commands(app.screen)}
            cmds["sim: crash server"].callback()
            await until(pilot, lambda: app.state.servers[name].phase == "crashed", 30, "crash")
            await until(pilot, lambda: any("crashed" in n for n in notes), 5, "crash toast")
            await until(pilot, lambda: pane.has_class("-crashed"), 5, "red pane")
            first_log = app.state.servers[name].meta.log_path

            await pilot.press("r")
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)  # a crashed server relaunches without asking
            await until(
                pilot,
                lambda: any(isinstance(m, ActionDone) and m.action == "relaunch" for m in msgs),
                60,
                "relaunch done",
            )
            await until(pilot, lambda: app.state.servers[name].phase in ("ready", "serving"), 60, "ready again")
            s = app.state.servers[name]
            assert first_log in s.previous_logs and s.meta.log_path != first_log

            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 5, "stop confirm")
            await pilot.press("y")
            await until(
                pilot,
                lambda: name not in app.state.servers or app.state.servers[name].phase == "stopped",
                60,
                "stopped",
            )
            await asyncio.sleep(0)
    finally:
        demo.cleanup()


async def test_marked_gpus_launch_there_on_free_ports_on_sim(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """13.4 with the real controller: GPUs 2 and 3 of blackwell marked, the 4-replica qwen36-gen previews and
    starts exactly two replicas there, each on a port the pre-check found free, both come up."""
    demo = DemoFleet(root=str(tmp_path / "sim"), time_scale=0.1, autostart=False)
    app = DflashApp(api_factory=demo.bring_up, demo=demo)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await until(
                pilot,
                lambda: (
                    app.api is not None
                    and len(app.state.hosts) >= 2
                    and all(h.conn == "up" and h.gpus for h in app.state.hosts.values())
                ),
                what="both sim hosts up",
            )

            def pane(gpu: int) -> GpuPane | None:
                return next((p for p in app.screen.query(GpuPane) if p.host == "blackwell" and p.gpu == gpu), None)

            await until(pilot, lambda: pane(2) is not None and pane(3) is not None, 10, "blackwell's panes")
            for gpu in (2, 3):
                await focus(pilot, "blackwell", gpu)
                await pilot.press("space")
                await until(
                    pilot, lambda gpu=gpu: ("blackwell", gpu) in app.screen.marks, 10, f"blackwell's GPU{gpu} marked"
                )
            await pilot.press("l")
            await until(pilot, lambda: isinstance(app.screen, LaunchScreen), what="launch screen")
            await pilot.pause()
            opts = app.screen.query_one("OptionList")
            assert opts.get_option_at_index(0).id == "qwen36-gen"
            await pilot.press("enter")
            await until(pilot, lambda: getattr(app.screen, "preview", None) is not None, 30, "preview")
            pv = app.screen.preview
            assert [p.replica.gpus for p in pv.plans] == [(2,), (3,)], pv.plans
            assert not pv.blocked, [c.message for c in pv.checks]
            ports = [p.replica.port for p in pv.plans]
            assert len(set(ports)) == 2
            await pilot.press("y")
            names = [p.replica.name for p in pv.plans]
            assert names == ["qwen36-gen@blackwell:gpu2", "qwen36-gen@blackwell:gpu3"]
            await until(pilot, lambda: all(n in app.state.servers for n in names), 30, "both launched")
            await until(
                pilot, lambda: all(app.state.servers[n].phase in ("ready", "serving") for n in names), 90, "both ready"
            )
            assert [app.state.servers[n].meta.port for n in names] == ports
            assert not [s for s in app.state.servers.values() if s.meta.gpus in ((0,), (1,))]
    finally:
        demo.cleanup()
