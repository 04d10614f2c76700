"""A crashed pane's keys promise a traceback only when the log has one (a vanished process has none)."""

from __future__ import annotations

from textual.widgets import Static

from console.fleet.events import ServerGone
from tests.ui.fakes import NOW, FakeApi, scenario
from tests.ui.waits import until

SERVING = "qwen3-8b@ct129:gpu0-1"
CRASHED = "glm-air@blackwell:gpu1"


def _pane(app, host: str, gpu: int) -> str:  # type: ignore[no-untyped-def]
    from console.ui.widgets.gpu_pane import GpuPane

    return str(next(p for p in app.screen.query(GpuPane) if p.host == host and p.gpu == gpu).render())


async def test_a_vanished_process_is_not_offered_a_traceback(make_app) -> None:  # type: ignore[no-untyped-def]
    """The pane said 'enter: log at traceback' and the server screen 'x: jump to traceback' for a process that
    ended with no error in its log (x then said 'no traceback in this log')."""
    from console.ui.screens.server import ServerScreen

    api = FakeApi(scenario())
    app = make_app(api)
    async with app.run_test(size=(160, 44)) as pilot:
        await pilot.pause()
        assert "enter: log at traceback" in _pane(app, "blackwell", 1)  # glm-air's log ends in a traceback
        api.emit(ServerGone(SERVING, NOW - 120))
        await until(pilot, lambda: "crashed" in _pane(app, "ct129", 0), "the pane ended")
        text = _pane(app, "ct129", 0)
        assert "crashed 2 min ago" in text and "enter: its log · r: relaunch" in text, text
        assert "traceback" not in text, text
        app.open_server(SERVING)
        await pilot.pause()
        assert isinstance(app.screen, ServerScreen)
        diag = str(app.screen.query_one("#diag", Static).render())
        assert "r: relaunch (this log is kept)" in diag and "traceback" not in diag, diag
        app.pop_screen()
        await pilot.pause()
        app.open_server(CRASHED)
        await pilot.pause()
        diag = str(app.screen.query_one("#diag", Static).render())
        assert "x: jump to traceback" in diag, diag


def test_the_log_model_knows_what_there_is_to_jump_to() -> None:
    """The real LogModel: a traceback, an abort with no traceback, and a process that ended without a word."""
    from console.fleet.logmodel import LogModel
    from tests.fleet.test_oom_gpu_index import _oom_log

    tb = LogModel()
    tb.feed(_oom_log(0).encode())
    assert tb.crash_in_log == "traceback"
    abort = LogModel()
    abort.feed(
        b"[2026-12-02 03:16:10] Load weight begin.\nterminate called after throwing an instance of "
        b"'c10::Error'\n  what():  CUDA error: an illegal memory access was encountered\n"
    )
    abort.finish(None, "SIGABRT")
    assert abort.diagnosis is not None and abort.crash_in_log == "error", abort.diagnosis
    gone = LogModel()
    gone.feed(b"[2026-12-02 03:16:10] Load weight begin.\n")
    gone.finish(None, None)
    assert gone.diagnosis is not None and gone.crash_in_log is None, gone.diagnosis
