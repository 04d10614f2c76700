"""What the screen says at a transition is one thing and true: a launch runs the command its preview showed and
uses up the marks it went to; ended-but-still-exiting servers say so in one state."""

from __future__ import annotations

from textual.widgets import Static

from tests.ui.fakes import NOW, FakeApi, scenario
from tests.ui.test_truthful import SERVING, fleet_with_gen4, text_of


async def test_a_launch_from_marks_runs_the_previewed_command_and_clears_the_marks(make_app) -> None:  # type: ignore[no-untyped-def]
    from console.ui.screens.fleet import FleetScreen
    from console.ui.screens.launch import LaunchScreen
    from tests.ui.test_pilot import select

    api = FakeApi(scenario(crashed=False), fleet=fleet_with_gen4())
    app = make_app(api)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        await select(pilot, "blackwell", 1)
        await pilot.press("space")
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, LaunchScreen)
        opts = app.screen.query_one("OptionList")
        ids = [opts.get_option_at_index(i).id for i in range(opts.option_count)]
        opts.highlighted = ids.index("gen4")
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        pv = app.screen.preview
        assert pv is not None
        shown = pv.plans[0].log_path
        assert shown.rsplit("/", 1)[1] in str(app.screen.query_one("#preview-body").render())
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.state.servers["gen4@blackwell:gpu1"].meta.log_path == shown  # the very file the preview named
        fleet = app.screen
        assert isinstance(fleet, FleetScreen) and fleet.marks == set()
        assert not any(p.marked for p in fleet.query("GpuPane"))  # type: ignore[attr-defined]
        toasts = [str(n.message) for n in app._notifications]
        assert any("marks cleared" in t for t in toasts), toasts
        assert "marked" not in text_of(fleet.query_one("#topbar", Static))


def _server(phase: str, *, alive: bool = True, health: str | None = None, stopping: bool = False):  # type: ignore[no-untyped-def]
    from console.fleet.events import ServerMeta
    from console.fleet.state import ServerState
    from tests.ui.fakes import ScriptedLog

    m = ServerMeta(name="p@h:gpu0", host="h", gpus=(0,), port=30000, log_path="/l", started_at=NOW - 60)
    return ServerState(m, alive=alive, log=ScriptedLog(phase), health=health, stopping=stopping)  # type: ignore[arg-type]


def _said(spans) -> str:  # type: ignore[no-untyped-def]
    return "".join(t for t, _ in spans)


def test_a_crashed_log_whose_ranks_still_run_says_one_state() -> None:
    from console.ui.views import server_page, server_view

    s = _server("crashed")
    assert _said(server_view(s, NOW).status) == "✖ crashed, ranks exiting"
    page = _said(server_page(s, NOW).state)
    assert page.startswith("crashed, ranks exiting") and "still running" not in page, page


def test_a_stop_whose_process_has_not_left_says_stopping() -> None:
    from console.ui.views import server_page, server_view

    s = _server("stopped", stopping=True)
    assert _said(server_view(s, NOW).status) == "■ stopping…"
    page = _said(server_page(s, NOW).state)
    assert page.startswith("stopping…") and "stopped" not in page and "still running" not in page, page


def test_a_server_draining_after_a_stop_says_stopping_not_serving() -> None:
    from console.ui.views import server_page, server_view

    s = _server("serving", health="ok", stopping=True)
    assert _said(server_view(s, NOW).status) == "■ stopping…"
    page = _said(server_page(s, NOW).state)
    assert page.startswith("stopping…") and "serving" not in page, page


def test_ready_with_health_warming_is_one_state_warming_up() -> None:
    from console.ui.views import server_page, server_view

    s = _server("ready", health="warming")
    assert _said(server_view(s, NOW).status) == "◐ warming up"
    page = _said(server_page(s, NOW).state)
    assert page.startswith("warming up") and "ready" not in page, page
    assert _said(server_view(_server("ready", health="ok"), NOW).status) == "● ready"


async def test_a_stop_is_logged_once_in_the_activity_panel_and_toasted_once(make_app) -> None:  # type: ignore[no-untyped-def]
    """The controller's steps (SIGTERM, the end, GPUs released) are said by the stop's outcome line: one entry."""
    from console.ui.screens.dialogs import ConfirmScreen
    from tests.ui.test_pilot import select

    api = FakeApi()
    app = make_app(api)
    toasts: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        app.notify = lambda message, **kw: toasts.append(message)  # type: ignore[method-assign]
        await select(pilot, "ct129", 1)
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        mine = [n.message for n in app.activity if SERVING in n.message]
        assert mine == [f"stop {SERVING}: stopped {SERVING}; GPUs released"], mine
        assert len([t for t in toasts if SERVING in t]) == 1, toasts
        assert app.state.servers[SERVING].phase == "stopped"


class HeldBackend:
    """A chat backend that streams one token, then waits to be let go (the moment a reader sees the answer
    streaming)."""

    def __init__(self) -> None:
        import asyncio

        from tests.ui.fakes import FakeBackend

        self.go = asyncio.Event()
        self.inner = FakeBackend()

    async def stream_chat(self, base_url, req, api_key):  # type: ignore[no-untyped-def]
        from console.ui.backend import ChatDelta

        yield ChatDelta("content", "Paris ")
        await self.go.wait()
        yield ChatDelta("content", "it is.")
        yield ChatDelta("finish", finish_reason="stop")

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)


async def test_waiting_for_the_first_token_goes_once_tokens_stream(make_app) -> None:  # type: ignore[no-untyped-def]
    from console.ui.screens.chat import ChatScreen, Turn
    from tests.ui.test_pilot import select
    from tests.ui.waits import until

    backend = HeldBackend()
    app = make_app(backend=backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, "ct129", 0)
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen)
        await pilot.press(*"capital?", "enter")
        turn = await _turn(pilot, app, Turn)
        await until(pilot, lambda: turn.answer == "Paris ", "the first token shown")
        stats = str(turn.query_one("#stats").render())
        assert "waiting" not in stats and "streaming" in stats, stats
        backend.go.set()
        await app.workers.wait_for_complete()
        assert "finish stop" in str(turn.query_one("#stats").render())


async def _turn(pilot, app, cls):  # type: ignore[no-untyped-def]
    from tests.ui.waits import until

    await until(pilot, lambda: app.screen.query(cls), "a turn mounted")
    return app.screen.query_one(cls)


async def test_chat_on_a_crashed_server_says_it_cannot_and_opens_no_other(make_app) -> None:  # type: ignore[no-untyped-def]
    from console.ui.screens.chat import ChatScreen
    from console.ui.screens.fleet import FleetScreen
    from tests.ui.test_pilot import CRASHED, select

    app = make_app(FakeApi(scenario()))
    toasts: list[str] = []
    async with app.run_test(size=(140, 44)) as pilot:
        app.notify = lambda message, **kw: toasts.append(message)  # type: ignore[method-assign]
        await select(pilot, "blackwell", 1)
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        assert any(t.startswith(f"cannot chat with {CRASHED}: it has crashed") for t in toasts), toasts
        app.open_server(CRASHED)  # from its own screen
        await pilot.pause()
        await pilot.press("c")
        await pilot.pause()
        assert not isinstance(app.screen, ChatScreen)
        assert len([t for t in toasts if t.startswith(f"cannot chat with {CRASHED}")]) == 2, toasts
        # a chat screen asked for a server that cannot answer asks which, never picks another by itself
        app.push_screen(ChatScreen(CRASHED))
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen) and app.screen.server_name is None


async def test_the_curl_command_is_shown_in_a_dialog_with_copy_as_one_option(make_app) -> None:  # type: ignore[no-untyped-def]
    from textual.widgets import TextArea

    from console.ui.screens.chat import ChatScreen
    from console.ui.screens.dialogs import TextScreen
    from tests.ui.test_pilot import select

    app = make_app()
    copied: list[str] = []
    app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, "ct129", 0)
        await pilot.press("c")
        await pilot.pause()
        await pilot.press(*"hi", "ctrl+y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, TextScreen), app.screen
        shown = app.screen.query_one(TextArea).text
        assert shown.startswith("curl ") and "/v1/chat/completions" in shown
        assert copied == []  # shown, not sent to a clipboard that may not exist
        await pilot.press("c")
        await pilot.pause()
        assert copied == [shown] and "OSC 52" in str(app.screen.query_one("#note").render())
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen)
