"""Issue 13: the screen never says what is not true (header counts, ended servers, launch targets)."""

from __future__ import annotations

from textual.widgets import Static

from console.fleet.events import ServerGone
from console.ui.widgets.host_band import HostHeader
from tests.ui.fakes import NOW, FakeApi, scenario
from tests.ui.waits import until

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
        await until(
            pilot,
            lambda: (
                "2 crashed" in text_of(app.screen.query_one("#topbar", Static))
                and any("crashed" in text_of(h) for h in app.screen.query(HostHeader) if h.host == "ct129")
            ),
            "the end counted",
        )
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
        assert "run 3 · queue 0 · KV 42%" in live, live
        api.emit(ServerGone(SERVING, NOW - 120))
        await until(pilot, lambda: "crashed" in pane_text(app, "ct129", 0), "the pane ended")
        ended = pane_text(app, "ct129", 0)
        assert "crashed 2 min ago" in ended and "run 3 · queue 0" not in ended and "tok/s" not in ended, ended
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
        await until(pilot, lambda: "stopped" in pane_text(app, "ct129", 0), "the pane stopped")
        text = pane_text(app, "ct129", 0)
        assert "■ stopped 4 s ago" in text, text
        assert "last: 267 tok/s · run 3 · queue 0 · KV 42%" in text, text
        assert "run 3 · queue 0" not in text.replace("last: 267 tok/s · run 3 · queue 0", ""), text  # only as last


def fleet_with_gen4():  # type: ignore[no-untyped-def]
    from console.config import Preset
    from tests.ui.fakes import demo_fleet

    fleet = demo_fleet()
    presets = dict(fleet.presets)
    presets["gen4"] = Preset(host="blackwell", gpus=[0, 1, 2, 3], tp=1, model="/models/Qwen3.6-35B-A3B", port=31000)
    presets["pair"] = Preset(host="blackwell", gpus=[0, 1], tp=2, model="/models/Qwen3-8B", port=32000)
    return fleet.model_copy(update={"presets": presets})


async def test_marked_gpus_are_the_launch_target(make_app) -> None:  # type: ignore[no-untyped-def]
    """13.4: marking GPUs 1 and 3 and launching a 4-replica preset previews and launches replicas on 1 and 3,
    not the preset's own 0-3, and the dialog says so."""
    from console.ui.screens.launch import LaunchScreen
    from tests.ui.test_pilot import select

    api = FakeApi(scenario(crashed=False), fleet=fleet_with_gen4())
    app = make_app(api)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        for gpu in (1, 3):
            await select(pilot, "blackwell", gpu)
            await pilot.press("space")
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, LaunchScreen)
        assert text_of(app.screen.query_one(".dialog-title", Static)) == "Launch on blackwell: marked GPUs 1,3"
        opts = app.screen.query_one("OptionList")
        ids = [opts.get_option_at_index(i).id for i in range(opts.option_count)]
        assert ids[0] == "gen4" and "pair" in ids, ids  # a TP2 pair fits two marked GPUs too
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        body = str(app.screen.query_one("#preview-body").render())
        assert "gen4@blackwell:gpu1" in body and "gen4@blackwell:gpu3" in body, body
        assert "gpu0" not in body and "gpu2" not in body, body
        assert "on the marked GPUs 1,3 instead of the preset's 0-3: 2 replicas of TP1" in body, body
        note = text_of(app.screen.query_one("#note", Static))
        assert note == "ready to launch: gen4", note
        await pilot.press("y")
        await pilot.pause()
        assert ("launch", ("gen4", [1, 3])) in api.calls, api.calls


async def test_marked_gpus_that_cannot_hold_the_preset_say_why_at_the_top(make_app) -> None:  # type: ignore[no-untyped-def]
    from tests.ui.test_pilot import select

    fleet = fleet_with_gen4()
    fleet = fleet.model_copy(update={"presets": {k: v for k, v in fleet.presets.items() if k in ("pair", "qwen3-8b")}})
    api = FakeApi(scenario(crashed=False), fleet=fleet)
    app = make_app(api)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        await select(pilot, "blackwell", 3)
        await pilot.press("space")
        await pilot.press("l")
        await pilot.pause()
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        note = text_of(app.screen.query_one("#note", Static))
        assert note.startswith("blocked: pair runs TP2: the 1 marked GPU 3 cannot be split into groups of 2"), note
        await pilot.press("y")
        await pilot.pause()
        assert not [c for c in api.calls if c[0] in ("launch", "preview")], api.calls


async def test_blocked_launch_puts_the_reason_at_the_top(make_app) -> None:  # type: ignore[no-untyped-def]
    from tests.ui.test_pilot import select

    api = FakeApi()
    app = make_app(api)
    async with app.run_test(size=(140, 44)) as pilot:
        await select(pilot, "blackwell", 0)
        await pilot.press("l")
        await pilot.pause()
        await pilot.press("enter")  # qwen36-gen: its GPU is held
        await app.workers.wait_for_complete()
        await pilot.pause()
        note = text_of(app.screen.query_one("#note", Static))
        assert note == "blocked: GPU held by qwen36-gen@blackwell:gpu0", note
        body = str(app.screen.query_one("#preview-body").render())
        assert "blocked" not in body.splitlines()[-1], body  # not a 'blocked' under a screen of commands


def test_fleet_events_before_the_first_screen_do_not_end_the_app(make_app) -> None:  # type: ignore[no-untyped-def]
    """A host's first events can be handled before the first screen is pushed (or after the last is popped at
    exit): `self.screen` raised ScreenStackError there and ended the app (two CI tests on a busy machine)."""
    from console.ui.messages import FleetChanged

    app = make_app()
    assert not app.screen_stack
    app._urgent = True
    app.on_fleet_changed(FleetChanged())  # raised ScreenStackError before
