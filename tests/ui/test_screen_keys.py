"""Keys and on-screen state of issue 14: Cancel-first confirmations, the fleet filter, the server screen's log bar,
wrap, previous logs, and an idle server screen that does not redraw."""

from __future__ import annotations

import time

from textual.widget import Widget

from console.fleet.events import HealthResult
from console.ui.screens.dialogs import ConfirmScreen
from console.ui.screens.fleet import FleetScreen
from console.ui.screens.server import ServerScreen
from console.ui.widgets.gpu_pane import GpuPane
from console.ui.widgets.log_view import LogView
from tests.patience import patient
from tests.ui.fakes import NOW, FakeApi, scenario
from tests.ui.waits import server_log, until

SERVING = "qwen3-8b@ct129:gpu0-1"


async def select(pilot, host: str, gpu_index: int) -> None:  # type: ignore[no-untyped-def]
    await pilot.pause()
    for p in pilot.app.screen.query(GpuPane):
        if (p.host, p.gpu) == (host, gpu_index):
            p.focus()
    await pilot.pause()


def shown(app) -> list[tuple[str, int]]:  # type: ignore[no-untyped-def]
    return [(p.host, p.gpu) for p in app.screen.query(GpuPane) if p.display]


def top(app) -> str:  # type: ignore[no-untyped-def]
    return str(app.screen.query_one("#topbar").render())


def logbar(app) -> str:  # type: ignore[no-untyped-def]
    return str(app.screen.query_one("#logbar").render())


async def test_enter_on_a_stop_confirmation_cancels(make_app) -> None:  # type: ignore[no-untyped-def]
    api = FakeApi()
    app = make_app(api)
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, "ct129", 0)
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("enter")  # Cancel has the focus
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen) and not [c for c in api.calls if c[0] == "stop"]
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("tab", "enter")  # moved to Yes on purpose: that is a yes
        await app.workers.wait_for_complete()
        assert ("stop", SERVING) in api.calls


async def test_fleet_filter_shows_matching_gpus_says_so_and_esc_clears(make_app) -> None:  # type: ignore[no-untyped-def]
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await select(pilot, "ct129", 0)
        assert len(shown(app)) == 6
        await pilot.press("slash", *"crashed", "enter")
        await until(
            pilot,
            lambda: (
                shown(app) == [("blackwell", 1)]
                and "filter “crashed”" in top(app)
                and isinstance(app.screen.focused, GpuPane)
            ),
            lambda: f"the filter applied: {shown(app)}",
        )
        assert shown(app) == [("blackwell", 1)]
        bar = str(app.screen.query_one("#topbar").render())
        assert "filter “crashed”: 1 of 6 GPUs" in bar
        assert isinstance(app.screen.focused, GpuPane) and app.screen.focused.gpu == 1  # keys work on what is shown
        await pilot.press("escape")
        await until(pilot, lambda: len(shown(app)) == 6 and "filter" not in top(app), "the filter cleared")
        assert len(shown(app)) == 6 and "filter" not in str(app.screen.query_one("#topbar").render())
        assert isinstance(app.screen, FleetScreen)


async def test_log_bar_says_follow_filter_wrap_and_wrap_continues_long_lines(make_app) -> None:  # type: ignore[no-untyped-def]
    st = scenario()
    st.servers[SERVING].log.add("x" * 300)
    app = make_app(FakeApi(st))
    async with app.run_test(size=(100, 30)) as pilot:
        app.open_server(SERVING)
        view = await server_log(pilot)
        bar = app.screen.query_one("#logbar")
        await until(pilot, lambda: "following" in str(bar.render()), lambda: f"the log bar: {bar.render()}")
        assert "following · all lines (f) · cut (z: wrap)" in str(bar.render())
        cut_rows = view.virtual_size.height
        assert cut_rows == len(view.lines)
        await pilot.press("z", "f")
        await until(pilot, lambda: "warnings/errors only" in str(bar.render()), lambda: f"the log bar: {bar.render()}")
        assert "warnings/errors only (f) · wrap (z)" in str(bar.render())
        await pilot.press("f")
        await until(
            pilot,
            lambda: not view.filtered and view.virtual_size.height >= cut_rows + 3,
            lambda: f"the long line wrapped: {view.virtual_size.height} rows, {cut_rows} cut",
        )
        assert view.virtual_size.height >= cut_rows + 3  # 300 characters in ~90 columns: four rows
        assert view.virtual_size.width <= view.size.width  # nothing to scroll sideways
        await pilot.press("home")
        await until(pilot, lambda: "paused" in str(bar.render()), lambda: f"the log bar: {bar.render()}")
        assert "paused (G: follow)" in str(bar.render())


class OldLogApi(FakeApi):
    async def read_file(self, host: str, path: str, max_bytes: int = 4_000_000) -> bytes:
        return f"old run of {path}\nTraceback (most recent call last):\nOSError: boom\n".encode()


async def test_previous_log_is_viewable_and_esc_returns_to_the_live_one(make_app) -> None:  # type: ignore[no-untyped-def]
    st = scenario()
    st.servers[SERVING].previous_logs = ["/runs/older.log", "/runs/old.log"]
    app = make_app(OldLogApi(st))
    async with app.run_test(size=(120, 36)) as pilot:
        app.open_server(SERVING)
        view = await server_log(pilot)
        await pilot.press("o")
        await app.workers.wait_for_complete()
        await until(pilot, lambda: "previous log" in logbar(app), lambda: f"the previous log; bar: {logbar(app)}")
        assert view.lines[0] == "old run of /runs/old.log"  # the most recent previous launch first
        assert "previous log 1 of 2: /runs/old.log" in str(app.screen.query_one("#logbar").render())
        await pilot.press("o")
        await app.workers.wait_for_complete()
        await until(pilot, lambda: "previous log 2 of 2" in logbar(app), lambda: f"the older log; bar: {logbar(app)}")
        assert view.lines[0] == "old run of /runs/older.log"
        await pilot.press("escape")
        await until(pilot, lambda: "previous log" not in logbar(app), lambda: f"the live log; bar: {logbar(app)}")
        assert isinstance(app.screen, ServerScreen) and "Decode batch" in list(view.lines)[-1]


async def test_an_idle_server_screen_does_not_redraw(make_app, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Frozen clock, no events: the 1 s tick and the 0.25 s log pull find nothing new, so nothing repaints."""
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        app.open_server(SERVING)
        await server_log(pilot)
        screen = app.screen
        assert isinstance(screen, ServerScreen)
        refreshed: list[str] = []
        real = Widget.refresh

        def counting(self, *a, **kw):  # type: ignore[no-untyped-def]
            if self.screen is screen:
                refreshed.append(type(self).__name__ + (f"#{self.id}" if self.id else ""))
            return real(self, *a, **kw)

        monkeypatch.setattr(Widget, "refresh", counting)
        # the screen's own start (its footer recomposes once its bindings settle) can still be under way on a busy
        # machine: wait for a quiet 0.6 s first; a screen that redraws on every tick or pull never gets one ...
        end = time.monotonic() + patient(10)
        while True:
            refreshed.clear()
            await pilot.pause(0.6)
            if not refreshed or time.monotonic() > end:
                break
        assert refreshed == [], f"the server screen never went quiet: {refreshed}"
        await pilot.pause(2.6)  # ... and then nothing may redraw over two ticks and ten pulls
        assert refreshed == [], refreshed
        app.state.servers[SERVING].log.add("[2026-12-01 14:04:00 TP0] one new line")  # the counter does count
        app.api.emit(HealthResult(SERVING, NOW, "ok"))
        await until(pilot, lambda: "LogView#log" in refreshed, lambda: f"the new line drawn: {refreshed}")
        assert "LogView#log" in refreshed


async def test_the_last_probe_stays_on_screen(make_app) -> None:  # type: ignore[no-untyped-def]
    app = make_app()
    async with app.run_test(size=(200, 40)) as pilot:
        await select(pilot, "ct129", 0)
        assert "probe:" not in str(app.screen.query_one("#topbar").render())
        await pilot.press("p")
        await app.workers.wait_for_complete()
        # the next sync, not the toast, puts it in the top bar
        await until(pilot, lambda: "probe:" in top(app), lambda: f"the probe in the top bar: {top(app)}", 3)
        assert f"probe: ✓ {SERVING} health 200 · model Qwen3-8B" in str(app.screen.query_one("#topbar").render())
        app.open_server(SERVING)
        await until(
            pilot, lambda: isinstance(app.screen, ServerScreen) and "probe:" in logbar(app), "the probe in the log bar"
        )
        assert f"probe: ✓ {SERVING} health 200" in str(app.screen.query_one("#logbar").render())


async def test_a_reopened_server_screen_is_resumed_as_it_was_left(make_app) -> None:  # type: ignore[no-untyped-def]
    from console.ui.app import SERVER_SCREENS_KEPT

    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await select(pilot, "ct129", 0)
        await pilot.press("enter")
        await server_log(pilot)
        first = app.screen
        await pilot.press("f", "escape")  # warnings/errors only, then back to the fleet
        await until(pilot, lambda: isinstance(app.screen, FleetScreen), "back on the fleet")
        assert isinstance(app.screen, FleetScreen)
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is first, "the server screen again")
        assert app.screen is first and first.query_one(LogView).filtered  # the same screen, as it was left
        assert "warnings/errors only" in str(first.query_one("#logbar").render())
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen), "back on the fleet")
        for n in range(SERVER_SCREENS_KEPT + 1):  # more servers than are kept: the oldest is let go
            app.state.servers[f"s{n}"] = app.state.servers[SERVING]
            app.open_server(f"s{n}")
            await until(pilot, lambda n=n: getattr(app.screen, "server_name", None) == f"s{n}", f"s{n}'s screen")
            await server_log(pilot)  # mounted and drawn before it is closed
            app.pop_screen()
            await until(pilot, lambda: isinstance(app.screen, FleetScreen), "back on the fleet")
        await until(pilot, lambda: not first.is_attached, "the oldest server screen let go")
        assert not app.is_screen_installed(f"server:{SERVING}") and not first.is_attached
        assert app.is_screen_installed(f"server:s{SERVER_SCREENS_KEPT}")
