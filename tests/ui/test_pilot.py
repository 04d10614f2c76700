"""Pilot tests over the fake fleet: each user journey asserts on FleetApi calls, state and ActionDone messages."""

from __future__ import annotations

import time

from textual.message import Message

from console.fleet.events import LogData, Notice, ServerGone
from console.ui.app import SYNC_MIN_S
from console.ui.help_keys import binding_rows
from console.ui.messages import ActionDone
from console.ui.screens.chat import ChatScreen, Turn
from console.ui.screens.dialogs import ConfirmScreen
from console.ui.screens.fleet import FleetScreen
from console.ui.screens.launch import LaunchScreen
from console.ui.screens.server import ServerScreen
from console.ui.widgets.gpu_pane import GpuPane
from console.ui.widgets.help_sheet import HelpSheet, open_sheet
from console.ui.widgets.log_view import LogView
from tests.patience import patient
from tests.ui.fakes import NOW, FakeApi, FakeBackend, scenario
from tests.ui.waits import server_log, until

SERVING = "qwen3-8b@ct129:gpu0-1"
CRASHED = "glm-air@blackwell:gpu1"


async def select(pilot, host: str, gpu: int) -> None:  # type: ignore[no-untyped-def]
    for p in pilot.app.screen.query(GpuPane):
        if p.host == host and p.gpu == gpu:
            p.focus()
    await pilot.pause()


def done(msgs: list[Message], action: str) -> list[ActionDone]:
    return [m for m in msgs if isinstance(m, ActionDone) and m.action == action]


async def test_launch_preview_confirm_then_ready(make_app) -> None:  # type: ignore[no-untyped-def]
    api = FakeApi(scenario(crashed=False))
    msgs: list[Message] = []
    app = make_app(api)
    async with app.run_test(size=(120, 40), message_hook=msgs.append) as pilot:
        await pilot.pause()
        await select(pilot, "blackwell", 3)
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, LaunchScreen)
        opts = app.screen.query_one("OptionList")
        assert opts.get_option_at_index(0).id == "small"  # the preset that fits GPU 3 comes first
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        body = str(app.screen.query_one("#preview-body").render())
        assert "sglang.launch_server" in body and "/models/Qwen2.5-0.5B" in body
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert ("launch", ("small", None)) in api.calls
        assert done(msgs, "launch")[0].ok
        name = "small@blackwell:gpu3"
        assert app.state.servers[name].phase == "launching"
        notices: list[str] = []
        app.notify = lambda message, **kw: notices.append(message)  # type: ignore[method-assign]
        api.make_ready(name)
        await pilot.pause()
        assert app.state.servers[name].phase == "ready"
        assert any("is ready" in n for n in notices)
        pane = next(p for p in app.screen.query(GpuPane) if p.host == "blackwell" and p.gpu == 3)
        await until(pilot, lambda: pane.has_class("-ready"), "the pane green", SYNC_MIN_S + 2)  # repaints coalesced
        assert pane.has_class("-ready")


async def test_launch_blocked_is_refused(make_app) -> None:  # type: ignore[no-untyped-def]
    api = FakeApi()
    app = make_app(api)
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, "blackwell", 0)
        await pilot.press("l")
        await pilot.pause()
        await pilot.press("enter")  # qwen36-gen: its GPU is held -> blocked
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen.preview is not None and app.screen.preview.blocked
        await pilot.press("y")
        await pilot.pause()
        assert not [c for c in api.calls if c[0] == "launch"]


async def test_crash_shows_cause_then_relaunch(make_app) -> None:  # type: ignore[no-untyped-def]
    api = FakeApi()
    msgs: list[Message] = []
    app = make_app(api)
    async with app.run_test(size=(120, 40), message_hook=msgs.append) as pilot:
        await select(pilot, "blackwell", 1)
        pane = app.screen.focused
        assert isinstance(pane, GpuPane) and pane.has_class("-crashed")
        assert "libavutil.so.58" in str(pane.render())
        await pilot.press("enter")
        await until(
            pilot,
            lambda: (
                isinstance(app.screen, ServerScreen)
                and app.screen.query_one(LogView).lines
                and not app.screen.query_one(LogView).follow
            ),
            "the server screen at the traceback",
        )
        assert isinstance(app.screen, ServerScreen)
        # the diagnosis is drawn with the screen's page, a frame after its log on a busy machine
        await until(
            pilot,
            lambda: "install FFmpeg 6" in str(app.screen.query_one("#diag").render()),
            "the diagnosis and its fix on the server screen",
        )
        view = app.screen.query_one(LogView)
        assert view.follow is False  # opened at the traceback
        assert "Traceback" in view.lines[view.rows[int(view.scroll_y)]] or int(view.scroll_y) == 0
        await pilot.press("r")  # crashed: no confirm needed
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert ("restart", CRASHED) in api.calls
        assert done(msgs, "relaunch")[0].ok
        s = app.state.servers[CRASHED]
        assert s.alive and s.meta.pid == 8000


async def test_relaunch_running_asks_first(make_app) -> None:  # type: ignore[no-untyped-def]
    api = FakeApi()
    app = make_app(api)
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, "ct129", 0)
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause()
        assert not [c for c in api.calls if c[0] == "restart"]
        await pilot.press("r", "y")
        await app.workers.wait_for_complete()
        assert ("restart", SERVING) in api.calls


async def test_relaunch_refused_for_another_process_shows_it_and_offers_force(make_app) -> None:  # type: ignore[no-untyped-def]
    """`r` on a server whose GPU another process fills: the refusal names the owner in a dialog that offers force."""
    api = FakeApi()
    api.restart_refusal = (
        "restart refused: GPU 0 is used by pid 698 `python3 hog.py` (58.6 GiB; ...) (qwen3-8b was not stopped)"
    )
    app = make_app(api)
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, "ct129", 0)
        await pilot.press("r", "y")
        await until(
            pilot, lambda: isinstance(app.screen, ConfirmScreen) and ("restart", SERVING) in api.calls, "force dialog"
        )
        text = " ".join(str(w.render()) for w in app.screen.query("Static"))
        assert "pid 698 `python3 hog.py`" in text and "Force it?" in text, text
        await pilot.press("n")
        await pilot.pause()
        assert ("restart-force", SERVING) not in api.calls
        await pilot.press("r", "y")
        await until(
            pilot,
            lambda: "Force it?" in " ".join(str(w.render()) for w in app.screen.query("Static")),
            "the force dialog again",
        )
        await pilot.press("y")
        await app.workers.wait_for_complete()
        assert ("restart-force", SERVING) in api.calls


async def test_stop_confirm(make_app) -> None:  # type: ignore[no-untyped-def]
    api = FakeApi()
    msgs: list[Message] = []
    app = make_app(api)
    async with app.run_test(size=(120, 40), message_hook=msgs.append) as pilot:
        await select(pilot, "ct129", 1)
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert ("stop", SERVING) in api.calls
        assert app.state.servers[SERVING].phase == "stopped"
        assert done(msgs, "stop")[0].ok
        pane = app.screen.focused
        assert isinstance(pane, GpuPane) and pane.has_class("-stopped")


async def test_probe_reports(make_app) -> None:  # type: ignore[no-untyped-def]
    msgs: list[Message] = []
    app = make_app()
    async with app.run_test(size=(120, 40), message_hook=msgs.append) as pilot:
        await select(pilot, "ct129", 0)
        await pilot.press("p")
        await app.workers.wait_for_complete()
        await pilot.pause()
        d = done(msgs, "probe")
        assert d and d[0].ok and "TTFT" in d[0].message
        assert app.last_probe is not None and app.last_probe.ok


async def test_streamed_chat(make_app, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DFC_TEST_KEY", "sk-secret-123")
    backend = FakeBackend(delay=0.001)
    app = make_app(backend=backend)
    copied: list[str] = []
    app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, "ct129", 0)
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen)
        assert app.screen.server_name == SERVING
        await pilot.press(*"capital?", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        turn = app.screen.query_one(Turn)
        assert turn.answer.startswith("Paris") and "[/b] [bold" in turn.answer
        assert turn.reasoning == "The user asks about [France]."
        stats = str(turn.query_one("#stats").render())
        assert "TTFT 142 ms" in stats and "24 tokens" in stats and "87.5 tok/s" in stats and "stop" in stats
        url, req, key = backend.requests[0]
        assert url.startswith("http://127.0.0.1:") and key is None  # this preset names no key env
        assert req.messages[-1] == {"role": "user", "content": "capital?"} and req.thinking
        assert req.body()["chat_template_kwargs"] == {"enable_thinking": True}
        assert app.screen.messages[-1]["role"] == "assistant"
        app.screen.query_one("#thinking").value = False
        await pilot.press(*"again", "enter")
        await app.workers.wait_for_complete()
        second = backend.requests[1][1]
        assert not second.thinking and second.body()["chat_template_kwargs"] == {"enable_thinking": False}
        assert [m["role"] for m in second.messages] == ["user", "assistant", "user"]
        assert len(app.screen.query(Turn)) == 2 and not app.screen.query(Turn)[1].reasoning
        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen)


async def test_chat_curl_hides_key_and_history(make_app, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DFC_TEST_KEY", "sk-secret-123")
    api = FakeApi()
    api.make_ready("qwen36-gen@blackwell:gpu0")
    backend = FakeBackend()
    app = make_app(api, backend=backend)
    copied: list[str] = []
    app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_chat("qwen36-gen@blackwell:gpu0")
        await pilot.pause()
        await pilot.press(*"hello", "enter")
        await app.workers.wait_for_complete()
        assert backend.requests[0][2] == "sk-secret-123"  # sent to the server
        await pilot.press("ctrl+y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("c")  # the dialog's copy
        await pilot.pause()
        assert copied and "$DFC_TEST_KEY" in copied[0] and "sk-secret-123" not in copied[0]
        assert "/v1/chat/completions" in copied[0] and "enable_thinking" in copied[0]
        await pilot.press("escape")
        await pilot.pause()
        assert "sk-secret-123" not in app.screen.query_one(Turn).answer
        await pilot.press("up")
        assert app.screen.query_one("#prompt").value == "hello"


async def test_read_only_hides_and_refuses(make_app) -> None:  # type: ignore[no-untyped-def]
    api = FakeApi()
    app = make_app(api, read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, "ct129", 0)
        keys = {b.binding.id for b in app.screen.active_bindings.values()}
        assert {"launch", "relaunch", "stop"}.isdisjoint(keys) and "probe" in keys
        await pilot.press("l", "r", "s")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        app.request_stop(SERVING)
        app.request_relaunch(SERVING)
        await app.workers.wait_for_complete()
        assert not [c for c in api.calls if c[0] in ("launch", "stop", "restart")]
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "server: probe" in titles and "server: stop" not in titles and "server: relaunch" not in titles


async def test_keymap_remaps_and_help_lists_ids(make_app) -> None:  # type: ignore[no-untyped-def]
    api = FakeApi()
    api.fleet = api.fleet.model_copy(update={"keymap": {"launch": "ctrl+n"}})
    app = make_app(api)
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, "blackwell", 3)
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert isinstance(app.screen, LaunchScreen)
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        sheet = open_sheet(app.screen)
        assert sheet is not None
        rows = {ident: keys for keys, _desc, ident, _on in sheet.rows}
        for ident in ("launch", "relaunch", "stop", "probe", "chat", "details", "quit", "theme", "help"):
            assert ident in rows
        assert "ctrl+n" in rows["launch"].lower() or "^n" in rows["launch"]


async def test_palette_commands_follow_selection(make_app) -> None:  # type: ignore[no-untyped-def]
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, "ct129", 0)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for t in ("server: relaunch", "server: stop", "server: probe", "server: chat", "host: reconnect"):
            assert t in titles
        assert "sim: crash server" not in titles  # demo only
        await select(pilot, "blackwell", 3)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "server: stop" not in titles and "host: launch" in titles


async def test_palette_help_opens_the_sheet(make_app) -> None:  # type: ignore[no-untyped-def]
    """`view: help` from the command palette (ctrl+p, which passes even an open sheet) shows the help sheet on the
    screen below the palette, once the palette is gone."""
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, "ct129", 0)
        fleet = app.screen
        await pilot.press("ctrl+p")
        await until(pilot, lambda: app.screen is not fleet, "the palette")
        await pilot.press(*"view: help")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is fleet and open_sheet(fleet) is not None, "help from the palette")


async def test_log_search_filter_follow_save(make_app, tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_server(SERVING)
        view = await server_log(pilot)
        screen = app.screen
        await until(pilot, lambda: view.follow and view.scroll_y == view.max_scroll_y > 0, "the log at its tail")
        assert view.follow and view.scroll_y == view.max_scroll_y
        await pilot.press("slash", *"decode", "enter")
        await pilot.pause()
        assert len(view.matches) == 30 and not view.follow
        first = view.current
        await pilot.press("n")
        assert view.current == first + 1
        await pilot.press("N", "N")
        assert view.current == (first - 1) % 30
        await pilot.press("f")
        await pilot.pause()
        assert [view.lines[i] for i in view.rows] == [view.lines[6]]  # only the WARNING line
        await pilot.press("f", "G")
        await pilot.pause()
        assert view.follow
        screen.export_dir = tmp_path
        await pilot.press("w")
        saved = screen.saved_path.read_text()
        assert saved.count("\n") == len(view.lines) and "[/max]" in saved
        copied: list[str] = []
        app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
        await pilot.press("y")
        assert copied and copied[0].splitlines()[-1].startswith("[2026-12-01 14:03:29")


async def test_server_screen_asks_for_live_log_news_only_while_on_top(make_app) -> None:  # type: ignore[no-untyped-def]
    """The host batches its tail for a quarter second unless a log view is on screen (FleetApi.watch_log): the
    server screen watches while it is on top (help open too: the sheet covers only its bottom rows), not after
    Escape, and again when reopened."""
    api = FakeApi()
    app = make_app(api)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_server(SERVING)
        await server_log(pilot)
        await until(pilot, lambda: api.watched[SERVING] == 1, lambda: f"watched {dict(api.watched)}")
        await pilot.press("question_mark")
        await until(pilot, lambda: open_sheet(app.screen) is not None, "help open")
        await pilot.pause(0.1)
        assert isinstance(app.screen, ServerScreen) and api.watched[SERVING] == 1, dict(api.watched)
        await pilot.press("escape")
        await until(pilot, lambda: open_sheet(app.screen) is None, "help closed")
        assert isinstance(app.screen, ServerScreen) and api.watched[SERVING] == 1, dict(api.watched)
        await pilot.press("escape")
        await until(
            pilot,
            lambda: isinstance(app.screen, FleetScreen) and api.watched[SERVING] == 0,
            lambda: f"fleet, watched {dict(api.watched)}",
        )
        app.open_server(SERVING)  # the kept screen resumes
        await server_log(pilot)
        await until(pilot, lambda: api.watched[SERVING] == 1, lambda: f"reopened, watched {dict(api.watched)}")
    assert api.watched[SERVING] == 0  # the app's exit unmounted it


async def test_log_follows_under_help_a_reopen_pulls_first(make_app) -> None:  # type: ignore[no-untyped-def]
    """With help open the log above the sheet keeps following (lines that come are pulled and drawn, no Escape
    needed); a reopen from the fleet after longer pulls before its first frame, so that a stale view is never
    drawn."""
    api = FakeApi()
    app = make_app(api)
    frames: list[tuple[str, str]] = []
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_server(SERVING)
        view = await server_log(pilot)
        screen = app.screen
        log = api.state.servers[SERVING].log
        shown = app._display

        def display(on: object, renderable: object) -> None:
            frames.append((type(on).__name__, view.lines[-1] if view.lines else ""))
            shown(on, renderable)  # type: ignore[arg-type]

        app._display = display  # type: ignore[method-assign]
        await pilot.press("question_mark")
        await until(pilot, lambda: open_sheet(app.screen) is not None, "help open")
        log.add("[2026-12-01 14:10:00] came while help was up")
        await until(
            pilot,
            lambda: any(f[1].endswith("came while help was up") for f in frames),
            lambda: f"the new line drawn with help open: {frames[-3:]}",
        )
        assert open_sheet(app.screen) is not None
        await pilot.press("escape")
        await until(pilot, lambda: open_sheet(app.screen) is None, "help closed")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen), "the fleet")
        log.add("[2026-12-01 14:10:01] came while on the fleet")
        screen._suspended_at -= 60  # type: ignore[attr-defined]  # a minute on the fleet
        frames.clear()
        app.open_server(SERVING)
        await until(pilot, lambda: any(f[0] == "ServerScreen" for f in frames), "the reopened screen drawn")
        first = next(f for f in frames if f[0] == "ServerScreen")
        assert first[1].endswith("came while on the fleet"), frames


async def test_log_under_help_repaints_only_the_rows_in_view(make_app) -> None:  # type: ignore[no-untyped-def]
    """With the sheet open, a pull repaints the log rows above it only (the sheet, the footer and the rows under it
    are not drawn again for every pull of a flood); closing the sheet shows the rows it covered as they are now."""
    from textual.geometry import Region

    from console.ui.widgets.help_sheet import rows_uncovered

    api = FakeApi()
    app = make_app(api)
    async with app.run_test(size=(200, 60)) as pilot:  # wide: the keys in two columns, a sheet of 23 rows
        app.open_server(SERVING)
        view = await server_log(pilot)
        assert rows_uncovered(view) is None
        await pilot.press("question_mark")
        await until(pilot, lambda: open_sheet(app.screen) is not None, "help open")
        sheet = open_sheet(app.screen)
        assert sheet is not None
        shown = rows_uncovered(view)
        assert shown == sheet.region.y - view.content_region.y and 0 < shown < view.size.height
        dirty: list[tuple[Region, ...]] = []
        set_dirty = view._set_dirty

        def spy(*regions: Region) -> None:
            dirty.append(regions)
            set_dirty(*regions)

        view._set_dirty = spy  # type: ignore[method-assign]
        log = api.state.servers[SERVING].log
        log.add("[2026-12-01 14:10:00] came while help was up")
        await until(pilot, lambda: view.lines[-1].endswith("came while help was up") and dirty, "pulled")
        assert all(regions and all(r.bottom <= shown for r in regions) for regions in dirty), dirty
        top = view.content_region.y
        above = [strip.text for strip in app.screen._compositor.render_strips()][top : top + shown]
        assert sum("[2026-12-01" in row for row in above) >= shown - 1, above  # the rows in view are drawn
        view._set_dirty = set_dirty  # type: ignore[method-assign]
        await pilot.press("escape")
        await until(pilot, lambda: open_sheet(app.screen) is None, "help closed")
        await pilot.pause(0.1)
        rows = [strip.text for strip in app.screen._compositor.render_strips()]
        bottom = view.content_region.bottom - 1 - view.scrollbar_size_horizontal
        assert any("came while help was up" in rows[y] for y in range(shown, bottom + 1)), rows[shown : bottom + 1]


async def test_a_pull_during_teardown_is_a_no_op(make_app) -> None:  # type: ignore[no-untyped-def]
    """A FleetChanged that comes while the server screen's children are being removed (the app's exit) asks for a
    pull that finds no log view: nothing happens, where NoMatches ended the app with a traceback."""
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_server(SERVING)
        view = await server_log(pilot)
        screen = app.screen
        await view.remove()
        screen._last_pull = 0.0  # type: ignore[attr-defined]  # due now
        screen.pull_soon()  # type: ignore[attr-defined]
        await pilot.pause()
        assert app.is_running and app.return_code is None


async def test_log_firehose_batches(make_app) -> None:  # type: ignore[no-untyped-def]
    """20k lines arrive between two ticks: one pull, no worker per line, view stays at the tail."""
    from tests.ui.fakes import ScriptedLog

    api = FakeApi()
    app = make_app(api)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_server(SERVING)
        view = await server_log(pilot)
        log: ScriptedLog = api.state.servers[SERVING].log  # type: ignore[assignment]
        before = len(app.workers)
        log.add(*(f"[2026-12-01 14:10:00 TP0] Decode batch. line {i}" for i in range(20_000)))
        await until(
            pilot,
            lambda: len(view.rows) == len(log.lines) and view.scroll_y == view.max_scroll_y > 19_000,
            lambda: f"{len(view.rows)} of {len(log.lines)} rows, at {view.scroll_y} of {view.max_scroll_y}",
        )
        assert len(view.rows) == len(log.lines) and view.follow
        assert view.scroll_y == view.max_scroll_y
        assert len(app.workers) <= before + 1


async def test_log_pulls_slow_down_only_while_the_log_floods(make_app) -> None:  # type: ignore[no-untyped-def]
    """A flood (more than half a view a pull) is pulled at most 10 times a second; a line now and then, or a steady
    line every 50 ms, is pulled at once (bench 1's load)."""
    from console.ui.screens.server import PULL_FLOOD_S, PULL_MIN_S
    from tests.ui.fakes import ScriptedLog

    api = FakeApi()
    app = make_app(api)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_server(SERVING)
        view = await server_log(pilot)
        screen = app.screen
        assert isinstance(screen, ServerScreen) and screen.pull_spacing == PULL_MIN_S
        log: ScriptedLog = api.state.servers[SERVING].log  # type: ignore[assignment]
        log.add(*(f"[2026-12-01 14:10:00 TP0] Decode batch. line {i}" for i in range(500)))
        await until(pilot, lambda: view.lines[-1].endswith("line 499"), "the burst pulled")
        assert view.pulled > view.size.height // 2 and screen.pull_spacing == PULL_FLOOD_S
        log.add("[2026-12-01 14:10:01 TP0] Decode batch. one more")
        await until(pilot, lambda: view.lines[-1].endswith("one more"), "the single line pulled")
        assert view.pulled == 1 and screen.pull_spacing == PULL_MIN_S


async def test_notices_toast_and_bell(make_app) -> None:  # type: ignore[no-untyped-def]
    api = FakeApi()
    app = make_app(api, bell=True)
    toasts: list[tuple[str, str]] = []
    bells: list[int] = []
    async with app.run_test(size=(120, 40)) as pilot:
        app.notify = lambda message, severity="information", **kw: toasts.append((message, severity))  # type: ignore
        app.bell = lambda: bells.append(1)  # type: ignore[method-assign]
        api.emit(ServerGone(SERVING, NOW, exit_status=-9))
        api.emit(Notice(NOW, "error", "host blackwell is down: [bold]boom[/", host="blackwell"))
        await pilot.pause()
        assert any("crashed" in m and s == "error" for m, s in toasts)
        assert ("host blackwell is down: [bold]boom[/", "error") in toasts
        assert len(bells) == 2


async def test_log_bytes_reach_view(make_app) -> None:  # type: ignore[no-untyped-def]
    """Through the real reducer: LogData -> LogModel -> view, with a hostile line."""
    from console.fleet.logmodel import LogModel

    api = FakeApi()
    s = api.state.servers[SERVING]
    s.log = LogModel()
    app = make_app(api)
    async with app.run_test(size=(100, 30)) as pilot:
        app.open_server(SERVING)
        view = await server_log(pilot)
        api.emit(LogData(SERVING, NOW, s.meta.log_path or "", 0, b"hello [/foo] [bold\nsecond \x1b[31mred\x1b[0m\n"))
        await until(pilot, lambda: len(view.lines) >= 2, "two lines in the view")
        assert view.lines[-2:] and "hello [/foo] [bold" in view.lines[-2]


async def test_activity_panel_and_external_notices(make_app) -> None:  # type: ignore[no-untyped-def]
    from console.ui.widgets.activity import ActivityLog

    api = FakeApi()
    app = make_app(api)
    toasts: list[str] = []
    async with app.run_test(size=(120, 44)) as pilot:
        app.notify = lambda message, **kw: toasts.append(message)  # type: ignore[method-assign]
        api.emit(ServerGone("external@blackwell:30010", NOW, exit_status=1))
        api.emit(Notice(NOW, "info", "host ct129 is back [/x]", host="ct129"))
        panel = app.screen.query_one(ActivityLog)
        await until(
            pilot,
            lambda: (
                panel.display
                and "external@blackwell:30010 crashed" in str(panel.render())
                and "host ct129 is back" in str(panel.render())
            ),
            "both notices in the activity panel",
            SYNC_MIN_S + 2,
        )
        assert panel.display
        text = str(panel.render())
        assert "external@blackwell:30010 crashed" in text and "host ct129 is back [/x]" in text
        assert toasts == ["host ct129 is back [/x]"]  # the external server's end is not a toast


async def test_search_escape_closes_box_not_screen(make_app) -> None:  # type: ignore[no-untyped-def]
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_server(SERVING)
        await server_log(pilot)
        await pilot.press("slash", *"uvicorn")
        await pilot.pause()
        view = app.screen.query_one(LogView)
        assert len(view.matches) == 1
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ServerScreen)
        assert not app.screen.query_one("#search").has_class("-show") and view.has_focus
        assert "“uvicorn” 1/1 match" in str(app.screen.query_one("#logbar").render())  # kept on screen
        await pilot.press("escape")  # the innermost thing left is the search itself: cleared, screen stays
        await pilot.pause()
        assert isinstance(app.screen, ServerScreen) and view.query_text == "" and not view.matches
        assert "uvicorn" not in str(app.screen.query_one("#logbar").render())
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)


async def test_off_screen_pane_waits_then_catches_up_when_scrolled_into_view(make_app) -> None:  # type: ignore[no-untyped-def]
    """64-pane fleets: a pane below the fold is not rebuilt on every sync, yet shows fresh figures once seen."""
    from console.fleet.events import GpuSample
    from console.ui.visibility import visible_widgets
    from tests.ui.fakes import PRO6000, gpu

    api = FakeApi(scenario(crashed=False, eight=True))
    app = make_app(api)
    app._tick = lambda: None  # no 1 s full sync: only the scroll may bring the pane up to date
    async with app.run_test(size=(100, 24)) as pilot:

        def the_last() -> GpuPane | None:
            return next((p for p in app.screen.query(GpuPane) if (p.host, p.gpu) == ("blackwell", 7)), None)

        # the start-up is over: the fleet laid out, the panes on screen drawn, the last one sized and left behind
        await until(
            pilot,
            lambda: (
                app.screen.layout_now is not None
                and (p := the_last()) is not None
                and p.size.height > 0
                and p.behind
                and app.screen.focused is not None
                and app.screen.focused.render().plain
            ),
            "the fleet laid out, the last pane off screen",
            SYNC_MIN_S + 2,
        )
        last = the_last()
        assert last is not None and last not in visible_widgets(last)
        drawn = last.view
        synced: list[bool] = []
        orig = last.sync

        def spy(visible=None):  # type: ignore[no-untyped-def]
            out = orig(visible)
            synced.append(last.behind)
            return out

        last.sync = spy  # type: ignore[method-assign]
        b = tuple(gpu(i, PRO6000, 556, 97_887, 77 if i == 7 else 0, 30, 21.0, 600) for i in range(8))
        api.emit(GpuSample("blackwell", NOW, b))
        await until(pilot, lambda: synced, "a sync of the last pane after the sample", SYNC_MIN_S + 2)
        assert last.behind and last.view == drawn  # nothing built for a pane nobody sees
        last.focus()
        last.scroll_visible(animate=False)
        end = time.monotonic() + patient(2)  # the scroll lands at the next layout: later on a busy machine
        while time.monotonic() < end and (last not in visible_widgets(last) or last.behind):
            await pilot.pause(0.05)
        assert last in visible_widgets(last)
        assert not last.behind
        assert " 77%  30°C" in last.render().plain


async def test_telemetry_for_one_host_repaints_only_that_hosts_band(make_app) -> None:  # type: ignore[no-untyped-def]
    from console.fleet.events import GpuSample
    from tests.ui.fakes import A6000, gpu

    api = FakeApi(scenario(crashed=False))
    app = make_app(api)
    async with app.run_test(size=(160, 50)) as pilot:
        # the start-up syncs are over: the fleet has its layout and no host is left dirty (else the sync below
        # would rightly sync them all)
        await until(
            pilot,
            lambda: (
                app.screen.layout_now is not None
                and app._dirty_hosts == set()
                and len(app.screen.query(GpuPane)) == 6
                and all(p.render().plain for p in app.screen.query(GpuPane))
            ),
            "the fleet laid out and synced",
            SYNC_MIN_S + 2,
        )
        panes = {(p.host, p.gpu): p for p in app.screen.query(GpuPane)}
        synced: list[tuple[str, int]] = []
        for key, p in panes.items():
            orig = p.sync

            def spy(visible=None, _orig=orig, _key=key):  # type: ignore[no-untyped-def]
                synced.append(_key)
                return _orig(visible)

            p.sync = spy  # type: ignore[method-assign]
        a = (gpu(0, A6000, 44_210, 49_140, 12, 71, 231.4, 300), gpu(1, A6000, 44_198, 49_140, 13, 68, 224.9, 300))
        api.emit(GpuSample("ct129", NOW, a))
        app._sync_screens()  # the coalesced sync that event triggers (the 1 s tick would sync everything)
        assert synced and {h for h, _ in synced} == {"ct129"}
        assert " 12%  71°C" in panes[("ct129", 0)].render().plain


async def test_the_ticks_full_sync_shares_the_repaint_budget_with_event_syncs(make_app) -> None:  # type: ignore[no-untyped-def]
    """The 1 s tick used to repaint on top of the coalesced event repaints (a third frame a second under a log
    flood); right after a sync it waits until SYNC_MIN_S has passed, then syncs every host once."""
    app = make_app(FakeApi(scenario()))
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: app.screen.query(GpuPane), "the panes", 5)
        calls: list[set[str] | None] = []
        orig = app._sync_screens

        def counting() -> None:
            calls.append(app._dirty_hosts)
            orig()

        app._sync_screens = counting  # type: ignore[method-assign]
        app._last_sync = time.monotonic()
        app._tick()
        assert calls == [] and app._sync_pending  # not now: within the budget of the last sync
        await until(pilot, lambda: calls, "the tick's deferred sync", SYNC_MIN_S + 2)
        assert calls[0] is None  # and it is a full one (every host: ages move everywhere)


async def test_the_fleet_under_a_server_screen_waits_and_catches_up_when_shown(make_app) -> None:  # type: ignore[no-untyped-def]
    """A covered fleet screen is not synced (Textual repaints the top screen over every region a screen below
    redraws); back on top it is synced in full before its first frame."""
    from console.fleet.events import GpuSample
    from tests.ui.fakes import A6000, gpu

    api = FakeApi(scenario(crashed=False))
    app = make_app(api)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: app.screen.query(GpuPane), "the panes", 5)
        fleet = app.screen
        pane = next(p for p in fleet.query(GpuPane) if (p.host, p.gpu) == ("ct129", 0))
        await until(pilot, lambda: pane.view is not None, "the pane drawn", 5)
        app.open_server(SERVING)
        await until(pilot, lambda: isinstance(app.screen, ServerScreen), "the server screen", 5)
        api.emit(
            GpuSample(
                "ct129",
                NOW,
                (gpu(0, A6000, 44_210, 49_140, 3, 40, 99.0, 300), gpu(1, A6000, 44_198, 49_140, 3, 40, 99.0, 300)),
            )
        )
        app._sync_screens()
        assert fleet in app._behind and pane.view is not None and pane.view.util_pct == 87  # not synced under it
        app._sync_screens = lambda: None  # type: ignore[method-assign]  # from here only the resume can sync it
        await pilot.press("escape")
        await until(pilot, lambda: pane.view is not None and pane.view.util_pct == 3, "the pane caught up", 5)
        assert app.screen is fleet and fleet not in app._behind


async def test_help_is_kept_and_shows_the_keys_of_the_moment(make_app) -> None:  # type: ignore[no-untyped-def]
    """`?` again shows the same sheet (no mount, no compose), and its table follows the selection: a server's keys
    dim on a free GPU; the server screen has a sheet of its own, titled and filled with that screen's keys."""
    from textual.widgets import Static

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await select(pilot, "ct129", 0)  # a serving GPU: stop is enabled
        await pilot.press("question_mark")
        await until(pilot, lambda: open_sheet(app.screen) is not None, "help open", 5)
        first = open_sheet(app.screen)
        assert first is not None and first.border_title == "Keys: Fleet screen"
        on = {i: e for _k, _d, i, e in first.rows}
        assert on["stop"]
        table = str(first.query_one("#help-keys", Static).render())
        await pilot.press("escape")
        await until(pilot, lambda: open_sheet(app.screen) is None, "help closed", 5)
        await select(pilot, "blackwell", 3)  # a free GPU: stop is not
        rows_now = binding_rows(app.screen)
        await pilot.press("question_mark")
        await until(pilot, lambda: open_sheet(app.screen) is first, "the same sheet open again", 5)
        assert not {i: e for _k, _d, i, e in first.rows}["stop"] and first.rows == rows_now
        assert str(first.query_one("#help-keys", Static).render()) == table  # same words; the dimming is style
        assert len(app.screen.query(HelpSheet)) == 1
        await pilot.press("escape")
        await until(pilot, lambda: open_sheet(app.screen) is None, "help closed again", 5)
        app.open_server(SERVING)
        await until(pilot, lambda: isinstance(app.screen, ServerScreen), "server screen", 5)
        await pilot.press("question_mark")
        await until(pilot, lambda: open_sheet(app.screen) is not None, "help over the server screen", 5)
        sheet = open_sheet(app.screen)
        assert sheet is not None and sheet is not first and sheet.border_title == "Keys: Server screen"
        shown = str(sheet.query_one("#help-keys", Static).render())
        assert "toggle_info" not in shown and " info " in shown and " search " in shown and shown != table


async def test_the_sheet_filled_while_hidden_is_laid_out_to_its_new_table(make_app) -> None:  # type: ignore[no-untyped-def]
    """Its table is filled while it is hidden without a layout of its own (one was a whole-screen layout per `?`
    with 64 hosts); shown, it is laid out to that table: narrower, more rows, and its last line still drawn."""
    from console.ui.widgets.help_sheet import FOOT

    app = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await select(pilot, "ct129", 0)
        heights = []
        for width in (200, 120):
            await pilot.resize_terminal(width, 60)
            await pilot.pause()
            await pilot.press("question_mark")
            await until(pilot, lambda: open_sheet(app.screen) is not None, "help open", 5)
            await pilot.pause()
            sheet = open_sheet(app.screen)
            assert sheet is not None
            heights.append(sheet.outer_size.height)
            bottom = [s.text for s in app.screen._compositor.render_strips()][-2]
            assert FOOT[:30] in " ".join(s.text for s in app.screen._compositor.render_strips()[-4:]), bottom
            assert sheet.max_scroll_y == 0  # all of the table in view: its height is the new table's
            await pilot.press("escape")
            await until(pilot, lambda: open_sheet(app.screen) is None, "help closed", 5)
        assert heights[1] > heights[0]


async def test_help_sheet_takes_every_key_but_its_own(make_app) -> None:  # type: ignore[no-untyped-def]
    """While the sheet is open the keys under it do nothing (no focus move, no dialog, no quit), up/down scroll
    it, Escape closes it and the pane that had the focus has it again; `q` and `?` close it too. It covers the
    footer, which is not rebuilt for the sheet's own keys."""
    from console.ui.widgets.footer import ConsoleFooter

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:  # small: the keys overflow the sheet, which scrolls
        await select(pilot, "blackwell", 1)
        fleet = app.screen
        pane = fleet.focused
        footer = fleet.query_one(ConsoleFooter)
        before = footer._shown
        for close in ("escape", "q", "question_mark"):
            await pilot.press("question_mark")
            await until(pilot, lambda: open_sheet(fleet) is not None, "help open")
            sheet = open_sheet(fleet)
            assert sheet is not None and fleet.focused is sheet
            assert sheet.region.bottom == fleet.region.bottom  # over the footer row
            for key in ("right", "down", "l", "enter", "space", "slash", "t"):
                await pilot.press(key)
            await pilot.pause(0.05)
            assert app.screen is fleet and open_sheet(fleet) is sheet and fleet.focused is sheet
            assert sheet.scroll_y > 0  # `down` scrolled the sheet, nothing else moved
            assert footer._shown is before
            await pilot.press(close)
            await until(pilot, lambda: open_sheet(fleet) is None, f"{close} closed help")
            await until(pilot, lambda: fleet.focused is pane, "focus back on the pane")
            assert app.is_running and app.screen is fleet and footer._shown is before


async def test_a_click_elsewhere_closes_help(make_app) -> None:  # type: ignore[no-untyped-def]
    """A click on a pane above the sheet focuses it, and that pane's keys work again: the sheet goes."""
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await select(pilot, "ct129", 0)
        fleet = app.screen
        await pilot.press("question_mark")
        await until(pilot, lambda: open_sheet(fleet) is not None, "help open")
        other = next(p for p in fleet.query(GpuPane) if (p.host, p.gpu) == ("ct129", 1))
        await pilot.click(other)
        await until(pilot, lambda: open_sheet(fleet) is None and fleet.focused is other, "closed by the click")


async def test_closing_help_redraws_only_what_it_covered(make_app) -> None:  # type: ignore[no-untyped-def]
    """Opening and closing the sheet draw the sheet's rows and the pane whose focus style changed, not the whole
    screen (a help screen's Escape redrew all of the fleet: 38 KB and 22-37 ms of a busy machine's CPU at
    200x60; a sheet mounted last renumbered every widget of the screen, and each counted as changed)."""
    from textual.geometry import Region

    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await select(pilot, "blackwell", 1)
        fleet = app.screen
        pane = fleet.focused
        assert pane is not None
        await pilot.press("question_mark")  # the first `?` mounts the sheet: a layout of the whole screen, once
        await until(pilot, lambda: open_sheet(fleet) is not None, "help mounted")
        sheet = open_sheet(fleet)
        assert sheet is not None
        await pilot.press("escape")
        await pilot.pause(0.3)
        app._sync_screens = lambda: None  # type: ignore[method-assign]  # no pane updates meanwhile
        compositor = fleet._compositor
        render_update = compositor.render_update
        dirty: list[Region] = []

        def spy(*args: object, **kw: object) -> object:
            dirty.extend(compositor._dirty_regions)
            return render_update(*args, **kw)  # type: ignore[arg-type]

        compositor.render_update = spy  # type: ignore[method-assign]
        await pilot.press("question_mark")
        await until(pilot, lambda: open_sheet(fleet) is not None, "help open")
        sheet_region = sheet.region
        await pilot.press("escape")
        await until(pilot, lambda: open_sheet(fleet) is None and fleet.focused is pane, "help closed")
        await pilot.pause(0.1)
        assert dirty
        outside = [r for r in dirty if not (sheet_region.contains_region(r) or pane.region.contains_region(r))]
        assert not outside, (outside, sheet_region, pane.region)


async def test_arrows_move_to_the_nearest_pane_that_way(make_app) -> None:  # type: ignore[no-untyped-def]
    """The arrows' targets come from the bands the fleet keeps (not a DOM query per key), in screen order, every
    shown pane of every host; each arrow lands on the nearest one that way."""
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        await until(pilot, lambda: len(fleet._targets()) == len(list(fleet.query(GpuPane))) > 4, "every pane")
        assert fleet._targets() == [p for p in fleet.query("GpuPane, RouterBand") if p.display]
        first = fleet._targets()[0]
        first.focus()
        await pilot.pause()
        for key, moved in (
            ("right", lambda a, b: b.region.x > a.region.x and b.region.y == a.region.y),
            ("left", lambda a, b: b.region.x < a.region.x and b.region.y == a.region.y),
            ("down", lambda a, b: b.region.y > a.region.y),
            ("up", lambda a, b: b.region.y < a.region.y),
        ):
            before = fleet.focused
            await pilot.press(key)
            await pilot.pause()
            after = fleet.focused
            assert isinstance(after, GpuPane) and after is not before and moved(before, after), key
            ways = [p for p in fleet._targets() if p is not before and moved(before, p)]
            cx, cy = before.region.center
            wx, wy = (1, 4) if key in ("right", "left") else (4, 1)

            def dist(p: GpuPane, wx: int = wx, wy: int = wy, cx: int = cx, cy: int = cy) -> int:
                px, py = p.region.center
                return wx * abs(px - cx) + wy * abs(py - cy)

            assert dist(after) == min(map(dist, ways)), key


async def test_keys_typed_right_after_quit_open_nothing(make_app) -> None:  # type: ignore[no-untyped-def]
    """`q` and the keys after it in the same read from the terminal (`qc`): those still run their actions, and a
    chat pushed while the app quits mounted without its children and crashed the exit (`NoMatches`, status 1)."""
    from textual import events

    app = make_app(FakeApi(scenario()))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.open_server(SERVING)
        await until(pilot, lambda: isinstance(app.screen, ServerScreen), "server screen", 5)
        await pilot.pause()
        for ch in "qc":  # posted together, as one read of typed keys arrives
            app.post_message(events.Key(ch, ch))
        await until(pilot, lambda: not app.is_running, "the app quits", 5)
    assert app.return_code == 0 and not app._exit_renderables  # no traceback printed on the way out
