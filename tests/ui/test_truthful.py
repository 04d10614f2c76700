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
