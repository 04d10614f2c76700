"""80×24 is a first-class size: the fleet's top bar stays (counts, filter, probe) and fits its width, a probe's
result expires and stays on its own server's log bar, every footer shows `? Help` with no key cut, and the
palette's Screenshot saves to a folder that exists and says which."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from textual.widgets import Static

from console.ui.app import DflashApp
from console.ui.probe_note import PROBE_SHOWN_S, ProbeNote, shown_probe
from console.ui.screens.fleet import FleetScreen
from console.ui.screens.server import ServerScreen
from console.ui.screenshot import choose_dir
from console.ui.topbar import fit, fleet_items
from console.ui.widgets.footer import ConsoleFooter, fit_keys
from console.ui.widgets.gpu_pane import GpuPane
from tests.ui.fakes import NOW, FakeApi, FakeBackend, scenario
from tests.ui.waits import until

SERVING = "qwen3-8b@ct129:gpu0-1"
LOADING = "qwen36-gen@blackwell:gpu0"
PROBE = f"✓ {SERVING} health 200 · model Qwen3-8B · TTFT 120 ms · 88 tok/s (14:03:05)"
COUNTS = "2 serving · 1 starting · 1 crashed"


def text(segments: list[tuple[str, str]]) -> str:
    return "".join(t for t, _ in segments)


def bar(width: int, **kw: object) -> str:
    args: dict[str, object] = dict(
        hosts="2 hosts",
        gpus="6 GPUs",
        counts=COUNTS,
        filter_note=None,
        read_only=False,
        demo=False,
        probe="",
        status="",
    )
    args.update(kw)
    return text(fit(fleet_items(**args), width))  # type: ignore[arg-type]


def test_top_bar_keeps_counts_and_filter_and_cuts_the_probe_first() -> None:
    said = "filter “glm”: 1 of 6 GPUs"
    note = (f"{said} (/ edit · esc clear)", f"{said} (esc clears)", said)
    wide = bar(260, filter_note=note, demo=True, probe=PROBE)
    assert wide.startswith("dflash-console › fleet   2 hosts · 6 GPUs · " + COUNTS) and "(/ edit · esc clear)" in wide
    assert "demo (simulated fleet)" in wide and wide.endswith(f"probe: {PROBE}")
    narrow = bar(78, filter_note=note, demo=True, probe=PROBE)
    assert len(narrow) <= 78 and COUNTS in narrow and said in narrow, narrow
    assert narrow.endswith("  demo") and "probe" not in narrow  # no room left for a useful part of it
    cut = bar(78, probe=PROBE)
    assert len(cut) == 78 and "2 hosts · 6 GPUs · " + COUNTS in cut and "probe: ✓ qwen3-8b" in cut, cut
    assert cut.endswith("…") and "dflash-console" not in cut  # the name went first, then the probe was cut
    assert bar(78, read_only=True, filter_note=note, probe=PROBE, status="connecting…").count("READ-ONLY") == 1
    assert len(bar(20, filter_note=note, read_only=True)) <= 20  # even past every form: cut at the edge


def test_a_probe_note_expires_and_names_its_server() -> None:
    note = ProbeNote(SERVING, True, "health 200", NOW)
    assert shown_probe(note, NOW + 1).startswith(f"✓ {SERVING} health 200 (")
    assert shown_probe(note, NOW + PROBE_SHOWN_S) == ""
    assert shown_probe(note, NOW + 1, SERVING) and shown_probe(note, NOW + 1, LOADING) == ""
    assert shown_probe(None, NOW) == ""


def test_footer_keys_drop_spares_first_and_help_never() -> None:
    keys = [(a, a[0], a.title()) for a in ("back", "search", "traceback", "toggle_info", "chat", "quit", "help")]
    assert fit_keys(keys, 200, True) == [a for a, _, _ in keys]
    spare = ("toggle_info", "traceback")
    assert fit_keys(keys, 63, True, spare) == [a for a, _, _ in keys]  # 63 columns, margins included
    assert fit_keys(keys, 50, True, spare) == ["back", "search", "traceback", "chat", "quit", "help"]
    assert fit_keys(keys, 40, True, spare) == ["back", "search", "chat", "quit", "help"]
    assert fit_keys(keys, 20, True, spare) == ["quit", "help"]
    assert fit_keys(keys, 3, True, spare) == ["help"]


def clocked(t: list[float]) -> DflashApp:
    return DflashApp(FakeApi(scenario()), clock=lambda: t[0], backend=FakeBackend())


def top(app: DflashApp) -> str:
    return str(app.screen.query_one("#topbar", Static).render())


def logbar(app: DflashApp) -> str:
    return str(app.screen.query_one("#logbar", Static).render())


async def select(pilot, host: str, gpu: int) -> None:  # type: ignore[no-untyped-def]
    await pilot.pause()
    for p in pilot.app.screen.query(GpuPane):
        if (p.host, p.gpu) == (host, gpu):
            p.focus()
    await pilot.pause()


async def test_at_80x24_the_top_bar_shows_counts_and_what_a_filter_hides() -> None:
    app = clocked([NOW])
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, "ct129", 0)
        topbar = app.screen.query_one("#topbar", Static)
        await until(pilot, lambda: COUNTS in top(app), lambda: f"the counts on the top bar: {top(app)!r}")
        assert topbar.display and topbar.region.height == 1 and topbar.region.y == 0
        await pilot.press("slash", *"glm", "enter")
        await until(pilot, lambda: "1 of 6 GPUs" in top(app), lambda: f"the filter on the top bar: {top(app)!r}")
        assert "filter “glm”: 1 of 6 GPUs" in top(app) and COUNTS in top(app)
        assert len(top(app)) <= 78  # its padding: nothing runs off the bar


async def test_the_probe_expires_from_the_top_bar_and_shows_on_its_own_server_only() -> None:
    t = [NOW]
    app = clocked(t)
    async with app.run_test(size=(200, 40)) as pilot:
        await select(pilot, "ct129", 0)
        await pilot.press("p")
        await app.workers.wait_for_complete()
        await until(pilot, lambda: "probe:" in top(app), lambda: f"the probe on the top bar: {top(app)!r}", 3)
        assert f"probe: ✓ {SERVING} health 200" in top(app)
        app.open_server(LOADING)  # another server's screen: not its probe
        await until(pilot, lambda: isinstance(app.screen, ServerScreen) and "following" in logbar(app), "log bar")
        assert "probe" not in logbar(app)
        app.pop_screen()
        app.open_server(SERVING)
        await until(
            pilot,
            lambda: (
                isinstance(app.screen, ServerScreen) and app.screen.server_name == SERVING and "probe:" in logbar(app)
            ),
            lambda: f"its own probe on the log bar: {logbar(app)!r}",
        )
        t[0] = NOW + PROBE_SHOWN_S + 1
        await until(pilot, lambda: "probe" not in logbar(app), lambda: f"the probe gone: {logbar(app)!r}", 3)
        app.pop_screen()
        await until(
            pilot,
            lambda: isinstance(app.screen, FleetScreen) and "probe" not in top(app),
            lambda: f"the probe gone from the top bar: {top(app)!r}",
            3,
        )
        assert COUNTS in top(app)


def footer_fits(app: DflashApp, width: int) -> list[str]:
    footer = app.screen.query_one(ConsoleFooter)
    keys = list(footer.query("FooterKey"))
    assert keys, "the footer has keys"
    assert all(k.region.right <= width and k.region.width > 0 for k in keys), [
        (str(k.render()), k.region) for k in keys
    ]
    plain = [k for k in keys if not k.has_class("-command-palette")]
    for a, b in itertools.pairwise(plain):
        assert a.region.right <= b.region.x, (a.region, b.region)  # none over another
    return [str(getattr(k, "action", "")) for k in keys]


@pytest.mark.parametrize("width", [80, 100, 112, 130])
async def test_every_footer_fits_with_help(width: int) -> None:
    app = clocked([NOW])
    async with app.run_test(size=(width, 30)) as pilot:
        await select(pilot, "blackwell", 1)
        await until(pilot, lambda: app.screen.query("FooterKey"), "the fleet's keys")
        await pilot.pause()
        assert "help" in footer_fits(app, width)
        for server in (SERVING, "glm-air@blackwell:gpu1"):
            app.open_server(server)
            await until(pilot, lambda: isinstance(app.screen, ServerScreen), "the server screen")
            await until(pilot, lambda: app.screen.query("FooterKey"), "its keys")
            await pilot.pause()
            shown = footer_fits(app, width)
            assert "help" in shown and "back" in shown and "stop" in shown, shown
            app.pop_screen()
            await pilot.pause()


async def test_the_footer_refits_when_the_terminal_narrows() -> None:
    app = clocked([NOW])
    async with app.run_test(size=(130, 30)) as pilot:
        app.open_server(SERVING)
        await until(pilot, lambda: isinstance(app.screen, ServerScreen) and app.screen.query("FooterKey"), "keys")
        await pilot.pause()
        assert "toggle_info" in footer_fits(app, 130)
        await pilot.resize_terminal(112, 30)  # the palette key still shown, the keys wide: two fewer fit
        await until(pilot, lambda: "toggle_info" not in footer_fits(app, 112), "the footer refitted")
        assert "help" in footer_fits(app, 112)
        await pilot.resize_terminal(80, 24)  # compact now, and no palette key
        await until(pilot, lambda: footer_fits(app, 80) and app.screen.query_one(ConsoleFooter).compact, "compact")
        await pilot.pause(0.3)
        assert "help" in footer_fits(app, 80)
        await pilot.resize_terminal(130, 30)  # and back: every key again
        await until(pilot, lambda: "toggle_info" in footer_fits(app, 130), "every key back")


async def test_palette_screenshot_goes_to_a_folder_that_exists(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """No ~/Downloads, no XDG download folder: Textual's default failed (`Failed to save screenshot`); the console
    saves into its state folder and says where."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)
    monkeypatch.setenv("DFLASH_STATE_DIR", str(tmp_path / "state"))
    notices: list[tuple[str, str]] = []
    app = clocked([NOW])
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, "ct129", 0)
        real = app.notify

        def notify(message: str, **kw):  # type: ignore[no-untyped-def]
            notices.append((message, kw.get("severity", "information")))
            return real(message, **kw)

        app.notify = notify  # type: ignore[method-assign]
        fleet = app.screen
        await pilot.press("ctrl+p")
        await until(pilot, lambda: app.screen is not fleet, "the palette")
        await pilot.press(*"Screenshot")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await until(
            pilot, lambda: any("screenshot" in m.lower() for m, _ in notices), lambda: f"a notice: {notices}", 5
        )
    folder = tmp_path / "state" / "screenshots"
    saved = list(folder.glob("*.svg"))
    assert saved and notices[-1] == (f"saved the screenshot to {saved[0]}", "information"), (notices, saved)
    assert not (home / "Downloads").exists()


def test_screenshot_folder_order(tmp_path: Path) -> None:
    home, state = tmp_path / "home", tmp_path / "state"
    xdg = tmp_path / "dl"
    for d in (home, xdg):
        d.mkdir()

    def pick(env: dict[str, str], answer: str | None) -> Path:
        return choose_dir(env, home, answer, state, Path.is_dir)

    assert pick({}, None) == state / "screenshots"
    assert pick({}, str(home)) == state / "screenshots"  # xdg-user-dir's answer when none is set: $HOME
    assert pick({}, str(xdg)) == xdg
    assert pick({"XDG_DOWNLOAD_DIR": str(xdg)}, None) == xdg
    assert pick({"XDG_DOWNLOAD_DIR": str(tmp_path / "missing")}, None) == state / "screenshots"
    (home / "Downloads").mkdir()
    assert pick({}, None) == home / "Downloads"
    assert pick({}, str(xdg)) == xdg


def test_a_demo_screenshot_outlives_the_demo(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The demo points DFLASH_STATE_DIR at its temp tree, removed when it ends: its screenshots go to the user's own
    state folder instead."""
    from console.ui.screenshot import screenshot_dir

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("DFLASH_STATE_DIR", str(tmp_path / "dfc-demo-x" / "state"))
    assert screenshot_dir() == tmp_path / "dfc-demo-x" / "state" / "screenshots"
    kept = screenshot_dir(demo=True)
    assert kept == tmp_path / "xdg-state" / "dflash-console" / "screenshots" and kept.is_dir()


async def test_a_focused_router_bands_keys_fit_with_help() -> None:
    """A router band's keys are longer than a pane's (`l Router up s Router down …`): at 80 columns they pushed
    `? Help` off the fleet's footer."""
    from console.config import Fleet
    from console.router.spec import RouterSpec
    from console.ui.widgets.router_band import RouterBand
    from tests.ui.fakes import demo_fleet

    base = demo_fleet()
    fleet = Fleet(
        hosts=base.hosts,
        presets=base.presets,
        routers={"gen": RouterSpec(host="blackwell", presets=["qwen36-gen"], port=31080)},
    )
    app = DflashApp(FakeApi(scenario(), fleet=fleet), clock=lambda: NOW, backend=FakeBackend())
    async with app.run_test(size=(80, 24)) as pilot:
        band = await _first(pilot, lambda: next(iter(app.screen.query(RouterBand)), None), "the router band")
        band.focus()
        await until(
            pilot,
            lambda: "router_up" in [str(getattr(k, "action", "")) for k in app.screen.query("FooterKey")],
            "the band's keys in the footer",
        )
        await pilot.pause()
        shown = footer_fits(app, 80)
        assert "help" in shown and "router_up" in shown and "router_down" in shown, shown


async def _first(pilot, get, what: str):  # type: ignore[no-untyped-def]
    found: list[object] = []
    await until(pilot, lambda: found.append(get()) or found[-1] is not None, what)
    return found[-1]
