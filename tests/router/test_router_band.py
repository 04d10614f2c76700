"""The router band on the fleet screen, driven by keys (Pilot) over a real controller, real sim replicas and the
real sglang-router: `l` starts the router over the serving replicas, the band shows them healthy, `s` + `y` stops
it. Also the band's text for each phase (pure) and its screenshot (docs/router_band.svg, looked at as PNG)."""

from __future__ import annotations

import importlib.util
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
    head, body = band_parts(v, [("u", None, True, None, None)] * 3, [], 0.0)
    assert _text(head) == "○ router lb :31080 round_robin  stopped"
    assert _text(body) == "l: start it over the 3 replicas that answer now"
    assert "serving" not in _text(band_parts(v, [], [], 0.0)[1])
    w = (RouterWorker("1", "http://127.0.0.1:31000", True, 2), RouterWorker("2", "http://127.0.0.1:31001", False, 0))
    run = RouterView("lb", "bw", 31080, "round_robin", phase="running", workers=w, rps=12.34, started_at=100.0,
                     last_change="removed http://127.0.0.1:31002")
    head, body = band_parts(run, [("http://127.0.0.1:31000", "gen@bw:gpu0", True, 2, 6.0),
                                  ("http://127.0.0.1:31001", "gen@bw:gpu1", False, 0, None)],
                            [("gen@bw:gpu2", "crashed")], 160.0)
    assert "running · 1/2 workers healthy · 12.3 req/s · up 60 s" in _text(head)
    assert _text(body).startswith("✓ gpu0 load 2 6.0/s   ✖ gpu1 load 0   · gpu2 not routed (crashed)")
    assert _text(body).endswith("removed http://127.0.0.1:31002")
    crashed = RouterView("lb", "bw", 31080, "round_robin", phase="crashed", error="[bold]port\x1b[2J 31080 taken",
                         log_path="/l")
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
                await wait_until(lambda: "l: start it over the 2 replicas that answer now" in shown(), patient(10),
                                 "the stopped band")
            except AssertionError as e:
                raise AssertionError(f"{e}; the band shows {shown()!r}, display={band.display}, "
                                     f"manager={getattr(app, 'router_manager', None)}") from None
            band.focus()
            await pilot.pause()
            await pilot.press("l")
            await wait_until(lambda: "running · 2/2 workers healthy" in shown(), patient(60), "router running")
            assert "✓ gpu0" in shown() and "✓ gpu1" in shown()
            await pilot.pause()
            app.save_screenshot(filename="router_band.svg", path=str(root))
            await pilot.press("s")
            await pilot.pause()
            await pilot.press("y")
            await wait_until(lambda: app.router_manager.views[ROUTER].phase == "stopped", patient(30), "stopped")
        if (REPO / "docs").is_dir():
            (REPO / "docs" / "router_band.svg").write_text((root / "router_band.svg").read_text())
    finally:
        if app is not None and getattr(app, "router_manager", None) is not None:
            await app.router_manager.aclose()
        await rig.close()
