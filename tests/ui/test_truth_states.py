"""What the screen says at a transition is one thing and true: a launch runs the command its preview showed and
uses up the marks it went to; ended-but-still-exiting servers say so in one state."""

from __future__ import annotations

from textual.widgets import Static

from tests.ui.fakes import FakeApi, scenario
from tests.ui.test_truthful import fleet_with_gen4, text_of


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
