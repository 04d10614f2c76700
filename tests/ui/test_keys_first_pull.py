"""The log view's pull waits while a key is on its way to the screen (console/keys_first.py): the key's frame does
not carry a whole new view of a flooding log; the lines come a few milliseconds later."""

from __future__ import annotations

import time

from console.keys_first import FRAME_AFTER_S, KEYS_FIRST
from tests.ui.fakes import NOW, FakeApi, FakeBackend, ScriptedLog
from tests.ui.waits import server_log, until


async def test_a_pull_during_a_key_comes_after_its_frame() -> None:
    from console.ui.app import DflashApp

    api = FakeApi()
    name = "qwen3-8b@ct129:gpu0-1"
    log = ScriptedLog("serving", [f"line {i}" for i in range(50)])
    api.state.servers[name].log = log
    app = DflashApp(api, clock=lambda: NOW, backend=FakeBackend())
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_server(name)
        view = await server_log(pilot)
        screen = app.screen
        log.lines.append("NEW while a key is held")
        log.line_count += 1
        KEYS_FIRST.key_arrived()
        try:
            screen._pull()  # type: ignore[attr-defined]
            assert screen._pull_deferred  # type: ignore[attr-defined]
            assert "NEW while a key is held" not in view.lines
        finally:
            KEYS_FIRST.key_taken()  # the key's frame: the hold closes
            time.sleep(FRAME_AFTER_S)
            KEYS_FIRST.frame_drawn()
        await until(pilot, lambda: "NEW while a key is held" in view.lines, "the deferred pull")
        assert not screen._pull_deferred  # type: ignore[attr-defined]
