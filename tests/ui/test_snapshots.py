"""SVG snapshots of the main screens, rendered from a fixed FleetState with a frozen clock (see fakes.scenario)."""

from __future__ import annotations

import pytest

from console.ui.app import DflashApp
from console.ui.widgets.gpu_pane import GpuPane
from tests.patience import patient
from tests.ui.fakes import NOW, FakeApi, FakeBackend, scenario


def app_for(**kw: object) -> DflashApp:
    state = scenario(**{k: kw.pop(k) for k in ("crashed", "stale_host", "eight") if k in kw})  # type: ignore[arg-type]
    return DflashApp(FakeApi(state), clock=lambda: NOW, backend=FakeBackend(), **kw)  # type: ignore[arg-type]


def focus(host: str, gpu: int):  # type: ignore[no-untyped-def]
    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause()
        for p in pilot.app.screen.query(GpuPane):
            if p.host == host and p.gpu == gpu:
                p.focus()
        await pilot.pause()

    return run


async def settle_log(pilot, done) -> None:  # type: ignore[no-untyped-def]
    """Waits (bounded) until the log view has its lines and has scrolled where it should, so load can't race it."""
    from console.ui.widgets.log_view import LogView

    for _ in range(int(100 * patient(1))):
        await pilot.pause(0.05)
        views = pilot.app.screen.query(LogView)
        if views and views.first().rows and done(views.first()):
            break
    await pilot.pause(0.1)


SIZES = [(80, 24), (120, 36), (160, 48), (200, 60)]


@pytest.mark.parametrize("theme", ["dflash-dark", "dflash-light"])
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_fleet(snap_compare, size: tuple[int, int], theme: str) -> None:  # type: ignore[no-untyped-def]
    """The fleet at the four sizes of issue 14, both themes, the crashed pane selected (its selection must show)."""
    assert snap_compare(app_for(theme=theme), terminal_size=size, run_before=focus("blackwell", 1))


def test_fleet_eight_gpus(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(eight=True), terminal_size=(160, 48))


def test_crashed_pane_selected(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(), terminal_size=(120, 36), run_before=focus("blackwell", 1))


def test_stale_host(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(stale_host="ct129"), terminal_size=(120, 36))


def test_server_screen_serving(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await focus("ct129", 0)(pilot)
        await pilot.press("enter")
        await settle_log(pilot, lambda v: v.max_scroll_y > 0 and v.scroll_y == v.max_scroll_y)

    assert snap_compare(app_for(), terminal_size=(140, 40), run_before=run)


def test_server_screen_crashed_narrow(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await focus("blackwell", 1)(pilot)
        await pilot.press("enter")
        await settle_log(pilot, lambda v: v.cursor_row is not None)

    assert snap_compare(app_for(), terminal_size=(80, 24), run_before=run)


def test_launch_preview(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await focus("blackwell", 0)(pilot)
        await pilot.press("l")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(app_for(), terminal_size=(120, 36), run_before=run)


def test_chat_answer(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await focus("ct129", 0)(pilot)
        await pilot.press("c")
        await pilot.pause()
        await pilot.press(*"What is the capital of France?", "enter")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        pilot.app.screen.query_one("#reasoning-box").collapsed = False
        await pilot.pause()

    assert snap_compare(app_for(), terminal_size=(120, 36), run_before=run)


def test_help(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await focus("ct129", 0)(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(app_for(), terminal_size=(120, 40), run_before=run)


def test_read_only(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(read_only=True), terminal_size=(120, 36), run_before=focus("ct129", 0))


# -- 80×24, every screen (the smallest size the console promises; tests/ui/test_narrow.py checks the rules) -----
NARROW = (80, 24)


def press(*keys: str, host: str = "ct129", gpu: int = 0, wait: bool = False):  # type: ignore[no-untyped-def]
    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await focus(host, gpu)(pilot)
        for k in keys:
            await pilot.press(k)
            await pilot.pause()
        if wait:
            await pilot.app.workers.wait_for_complete()
        await pilot.pause(0.2)

    return run


def test_narrow_server_screen_serving(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await focus("ct129", 0)(pilot)
        await pilot.press("enter")
        await settle_log(pilot, lambda v: v.max_scroll_y > 0 and v.scroll_y == v.max_scroll_y)

    assert snap_compare(app_for(), terminal_size=NARROW, run_before=run)


def test_narrow_fleet_filter(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """A filter that hides 5 of 6 GPUs says so on the top bar."""
    assert snap_compare(app_for(), terminal_size=NARROW, run_before=press("slash", *"glm", "enter"))


def test_narrow_fleet_probe(snap_compare, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A probe's result on the top bar, cut to the room the counts leave."""
    import time

    monkeypatch.setenv("TZ", "UTC")  # the result says when it came, in local time
    time.tzset()

    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await press("p", wait=True)(pilot)
        pilot.app.screen.sync()  # the top bar takes it at the next sync, not the toast's
        pilot.app.clear_notifications()  # the toast goes after 4 s: a snapshot taken later must not differ
        await pilot.pause(0.2)

    try:
        assert snap_compare(app_for(), terminal_size=NARROW, run_before=run)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_narrow_read_only(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(read_only=True), terminal_size=NARROW, run_before=focus("ct129", 0))


def test_narrow_chat_answer(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await focus("ct129", 0)(pilot)
        await pilot.press("c")
        await pilot.pause()
        await pilot.press(*"What is the capital of France?", "enter")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(app_for(), terminal_size=NARROW, run_before=run)


def test_narrow_launch_picker(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(), terminal_size=NARROW, run_before=press("l", host="blackwell", gpu=3))


def test_narrow_launch_preview(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(), terminal_size=NARROW, run_before=press("l", "enter", host="blackwell", wait=True))


def test_narrow_bench_dialog(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(), terminal_size=NARROW, run_before=press("b"))


def test_narrow_stop_confirmation(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(), terminal_size=NARROW, run_before=press("s"))


def test_narrow_help(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(), terminal_size=NARROW, run_before=press("question_mark"))


def test_narrow_server_help(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def run(pilot) -> None:  # type: ignore[no-untyped-def]
        await focus("ct129", 0)(pilot)
        await pilot.press("enter")
        await settle_log(pilot, lambda v: v.max_scroll_y > 0 and v.scroll_y == v.max_scroll_y)
        await pilot.press("question_mark")
        await pilot.pause(0.2)

    assert snap_compare(app_for(), terminal_size=NARROW, run_before=run)


def test_narrow_command_palette(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """The palette over the fleet, its commands for the selected server listed."""
    assert snap_compare(app_for(), terminal_size=NARROW, run_before=press("ctrl+p", *"server"))


def test_narrow_theme_picker(snap_compare) -> None:  # type: ignore[no-untyped-def]
    """`t` (and the palette's theme command) over the fleet."""
    assert snap_compare(app_for(), terminal_size=NARROW, run_before=press("t"))
