"""The router band on the fleet screen, driven by keys (Pilot) over a real controller, real sim replicas and the
real sglang-router: `l` starts the router over the serving replicas, the band shows them healthy, `b` benches
through it while a replica is SIGKILLed (the sweep runs to its end, failures <= C), `s` + `y` stops it. Also the
band's text for each phase (pure); DFLASH_WRITE_DOCS=1 refreshes docs/router_band.svg (looked at as PNG)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from console.router.api import RouterWorker
from console.router.state import RouterView
from console.ui.widgets.router_band import RouterBand, band_parts
from tests.patience import patient
from tests.router.scenario import PRESET, ROUTER, open_rig, wait_until

REPO = Path(__file__).resolve().parents[2]


def _text(parts: list[tuple[str, str]]) -> str:
    return "".join(t for t, _ in parts)


def test_band_parts_per_phase():
    v = RouterView("lb", "bw", 31080, "round_robin", phase="stopped")
    head, body = band_parts(v, [("u", None, True, "", None)] * 3, [], 0.0)
    assert _text(head) == "○ router lb :31080 round_robin  stopped"
    assert _text(body) == "l: start it over the 3 replicas that answer now"
    assert "serving" not in _text(band_parts(v, [], [], 0.0)[1])
    w = (RouterWorker("1", "http://127.0.0.1:31000", True, 2), RouterWorker("2", "http://127.0.0.1:31001", False, 0))
    run = RouterView(
        "lb",
        "bw",
        31080,
        "round_robin",
        phase="running",
        workers=w,
        rps=12.34,
        started_at=100.0,
        last_change="removed http://127.0.0.1:31002",
    )
    head, body = band_parts(
        run,
        [
            ("http://127.0.0.1:31000", "gen@bw:gpu0", True, "load 2", 6.0),
            ("http://127.0.0.1:31001", "gen@bw:gpu1", False, "run 0", None),
        ],
        [("gen@bw:gpu2", "crashed")],
        160.0,
    )
    assert "running · 1/2 workers healthy · 12.3 req/s · up 60 s" in _text(head)
    assert _text(body).startswith("✓ gpu0 load 2 6.0/s   ✖ gpu1 run 0   · gpu2 not routed (crashed)")
    assert _text(body).endswith("removed http://127.0.0.1:31002")
    crashed = RouterView(
        "lb", "bw", 31080, "round_robin", phase="crashed", error="[bold]port\x1b[2J 31080 taken", log_path="/l"
    )
    head, _ = band_parts(crashed, [], [], 0.0)
    assert "✖ router lb" in _text(head) and "\x1b" not in _text(head) and "[bold]port" in _text(head)


@pytest.mark.skipif(importlib.util.find_spec("sglang_router") is None, reason="sglang-router is a dev dependency")
async def test_l_on_the_band_starts_the_router_s_stops_it(monkeypatch: pytest.MonkeyPatch):
    from console.ui.app import DflashApp

    root = Path(tempfile.mkdtemp(prefix="dfc-router-band-", dir="/tmp"))
    monkeypatch.setenv("DFLASH_STATE_DIR", str(root / "state"))
    rig = await open_rig(root, replicas=2)
    app = None
    try:
        assert (await rig.ctl.launch(PRESET, wait=True)).ok
        await wait_until(lambda: len(rig.mgr.ready_urls(ROUTER)) == 2, patient(20), "2 serving replicas")
        app = DflashApp(rig.ctl, fleet=rig.ctl.fleet, start_api=False)
        async with app.run_test(size=(160, 48)) as pilot:
            band = await wait_until(lambda: next(iter(app.screen.query(RouterBand)), None), patient(10), "the band")

            def shown() -> str:
                return band.text

            try:
                await wait_until(
                    lambda: "l: start it over the 2 replicas that answer now" in shown(),
                    patient(10),
                    "the stopped band",
                )
            except AssertionError as e:
                raise AssertionError(
                    f"{e}; the band shows {shown()!r}, display={band.display}, "
                    f"manager={getattr(app, 'router_manager', None)}"
                ) from None
            band.focus()
            await pilot.pause()
            await pilot.press("l")
            await wait_until(lambda: "running · 2/2 workers healthy" in shown(), patient(60), "router running")
            assert "✓ gpu0" in shown() and "✓ gpu1" in shown()
            from console.ui.widgets.router_band import router_commands

            titles = [c.title for c in router_commands(app)]
            assert titles == ["router: down lb", "router: restart lb", "router: chat lb"], titles
            await pilot.pause()
            app.save_screenshot(filename="router_band.svg", path=str(root))
            # `b` on the band: a sweep through the router; one replica SIGKILLed mid-sweep; the sweep runs to its end
            from textual.widgets import Input

            from console.sim.control import inject
            from console.ui.bench_screen import BenchForm, BenchScreen

            band.focus()
            await pilot.press("b")
            form = await wait_until(
                lambda: app.screen if isinstance(app.screen, BenchForm) else None, patient(10), "the bench form"
            )
            for key, value in (("concurrency", "8"), ("input_len", "16"), ("output_len", "48"), ("num_prompts", "64")):
                form.query_one(f"#bench-form-{key}", Input).value = value
            form.query_one("#bench-form-concurrency", Input).focus()
            await pilot.press("enter")
            bench = await wait_until(
                lambda: app.screen if isinstance(app.screen, BenchScreen) else None, patient(10), "the bench screen"
            )
            assert bench.server == "router:lb"
            victim = sorted(n for n, s in rig.ctl.state.servers.items() if s.meta.preset == PRESET)[1]
            vport = rig.port_of(victim)

            def done() -> int:
                m = re.search(r"C=8: (\d+)/64", str(bench.query_one("#bench-status").render()))
                return int(m.group(1)) if m else 0

            await wait_until(lambda: done() >= 8, patient(60), "8 requests done")
            killed_after = done()
            inject(rig.host_dir, vport, "crash", kind="sigkill")
            await wait_until(lambda: not bench.running and bench.levels, patient(120), "the sweep's end")
            lv = bench.levels[0]
            assert lv.requests == 64 and lv.errors <= 8, (lv.requests, lv.errors, lv.error_examples)
            print(f"bench through the router, replica killed after {killed_after} of 64: {lv.errors} failed")
            await pilot.press("escape")
            await wait_until(
                lambda: len(app.router_manager.views[ROUTER].workers) == 1,
                patient(20),
                "the crashed replica removed at the router",
            )
            band.focus()
            await pilot.pause()
            await pilot.press("s")
            await pilot.pause()
            await pilot.press("y")
            await wait_until(lambda: app.router_manager.views[ROUTER].phase == "stopped", patient(30), "stopped")
        if os.environ.get("DFLASH_WRITE_DOCS") == "1":  # refresh the README's screenshot on request only
            (REPO / "docs" / "router_band.svg").write_text((root / "router_band.svg").read_text())
    finally:
        if app is not None and getattr(app, "router_manager", None) is not None:
            await app.router_manager.aclose()
        await rig.close()
        shutil.rmtree(root, ignore_errors=True)


async def test_a_focused_band_looks_focused_in_every_theme(monkeypatch: pytest.MonkeyPatch):
    """The band's only focus cue is its background. It was `$boost`, which Textual leaves transparent when a theme
    sets `panel` (all three built-in themes do): focused and unfocused looked the same, truecolor and 256-colour
    alike, so on the demo fleet nothing showed that ↑ had reached the band but the footer's keys."""
    from rich.color import ColorSystem

    from console.ui.app import DflashApp

    root = Path(tempfile.mkdtemp(prefix="dfc-router-focus-", dir="/tmp"))
    monkeypatch.setenv("DFLASH_STATE_DIR", str(root / "state"))
    rig = await open_rig(root, replicas=1)
    try:
        app = DflashApp(rig.ctl, fleet=rig.ctl.fleet, start_api=False)
        async with app.run_test(size=(160, 48)) as pilot:
            band = await wait_until(lambda: next(iter(app.screen.query(RouterBand)), None), patient(10), "the band")
            for theme in ("dflash-dark", "dflash-light", "dflash-amber"):
                app.theme = theme
                app.screen.set_focus(None)
                await pilot.pause()
                assert not band.has_focus
                off = band.rich_style.bgcolor
                band.focus()
                await pilot.pause()
                on = band.rich_style.bgcolor
                assert band.has_focus and on is not None and off is not None
                assert on.get_truecolor() != off.get_truecolor(), (theme, on, off)
                assert on.downgrade(ColorSystem.EIGHT_BIT) != off.downgrade(ColorSystem.EIGHT_BIT), (theme, on, off)
    finally:
        await rig.close()
        shutil.rmtree(root, ignore_errors=True)


def test_a_removed_worker_leaves_the_count_the_band_shows_beside_its_removal():
    urls = [f"http://127.0.0.1:3100{i}" for i in range(4)]
    v = RouterView(
        "lb",
        "bw",
        31080,
        "round_robin",
        phase="running",
        workers=tuple(RouterWorker(str(i), u, True, 0) for i, u in enumerate(urls)),
    )
    after = v.after_change(f"removed {urls[0]}", {urls[0]})
    rows = [(w.url, None, w.healthy, "load 0", None) for w in after.workers]
    head, body = band_parts(after, rows, [], 0.0)
    assert "3/3 workers healthy" in _text(head) and _text(body).endswith(f"removed {urls[0]}")
    assert after.last_change == f"removed {urls[0]}" and urls[0] not in {w.url for w in after.workers}
    assert v.after_change(f"could not remove {urls[1]}: 500", set()).workers == v.workers
