"""Issue 13: the screen never says what is not true (header counts, ended servers, launch targets)."""

from __future__ import annotations

from textual.widgets import Static

from console.fleet.events import ServerGone
from console.ui.widgets.host_band import HostHeader
from tests.ui.fakes import NOW, FakeApi, scenario

SERVING = "qwen3-8b@ct129:gpu0-1"
CRASHED = "glm-air@blackwell:gpu1"


def text_of(widget: Static) -> str:
    return str(widget.render())


async def test_header_counts_say_what_they_count(make_app) -> None:  # type: ignore[no-untyped-def]
    """13.5: a crashed server is counted as crashed, never as one of 'N servers' (or left out of it)."""
    api = FakeApi(scenario())
    app = make_app(api)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        top = text_of(app.screen.query_one("#topbar", Static))
        assert "2 hosts · 6 GPUs · 2 serving · 1 starting · 1 crashed" in top, top
        assert "servers" not in top
        heads = {h.host: text_of(h) for h in app.screen.query(HostHeader)}
        assert "1 serving · 1 starting · 1 crashed" in heads["blackwell"], heads
        assert "1 serving" in heads["ct129"] and "crashed" not in heads["ct129"], heads
        api.emit(ServerGone(SERVING, NOW, exit_status=0))  # the only ct129 server ends: still shown, so counted
        await pilot.pause(0.6)
        heads = {h.host: text_of(h) for h in app.screen.query(HostHeader)}
        assert "· 1 crashed" in heads["ct129"] and " server" not in heads["ct129"], heads
        top = text_of(app.screen.query_one("#topbar", Static))
        assert "1 serving · 1 starting · 2 crashed" in top, top


def pane_text(app, host: str, gpu: int) -> str:  # type: ignore[no-untyped-def]
    from console.ui.widgets.gpu_pane import GpuPane

    pane = next(p for p in app.screen.query(GpuPane) if p.host == host and p.gpu == gpu)
    return str(pane.render())


async def test_after_the_end_only_the_end_is_shown(make_app) -> None:  # type: ignore[no-untyped-def]
    """13.3: a serving server (health ok, run 3 · queue 0 · KV 42%) crashes: the pane and the server screen say
    when it ended and show the last figures marked as last; no live health, run, queue or KV any more."""
    from console.ui.screens.server import ServerScreen

    api = FakeApi(scenario())
    app = make_app(api)
    async with app.run_test(size=(160, 44)) as pilot:
        await pilot.pause()
        live = pane_text(app, "ct129", 0)
        assert "run 3  queue 0  KV 42%" in live, live
        api.emit(ServerGone(SERVING, NOW - 120))
        await pilot.pause(0.6)
        ended = pane_text(app, "ct129", 0)
        assert "crashed 2 min ago" in ended and "run 3  queue 0" not in ended and "tok/s" not in ended, ended
        app.open_server(SERVING)
        await pilot.pause()
        assert isinstance(app.screen, ServerScreen)
        head = text_of(app.screen.query_one("#head", Static))
        assert "health" not in head and "VRAM" not in head, head
        assert "ended 2 min ago" in head and "ran 3 min" in head, head
        assert "last: 267 tok/s · run 3 · queue 0 · KV 42%" in head, head


async def test_stopped_pane_shows_last_figures_as_last(make_app) -> None:  # type: ignore[no-untyped-def]
    from console.fleet.events import ServerAction

    api = FakeApi(scenario())
    app = make_app(api)
    async with app.run_test(size=(160, 44)) as pilot:
        await pilot.pause()
        api.emit(ServerAction(SERVING, NOW - 5, "stop", True, "SIGTERM"), ServerGone(SERVING, NOW - 4))
        await pilot.pause(0.6)
        text = pane_text(app, "ct129", 0)
        assert "■ stopped 4 s ago" in text, text
        assert "last: 267 tok/s · run 3 · queue 0 · KV 42%" in text, text
        assert "run 3  queue 0" not in text, text
