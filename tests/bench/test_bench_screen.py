"""BenchScreen in a Pilot run against the fake SSE peer: bars fill, table shows, run saved, compare on rerun."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import ProgressBar, Static

from benchmarks.fakesse import FakeOptions, FakeSSEServer
from console.config import parse_fleet
from console.fleet.events import ServerMeta
from console.fleet.state import FleetState, GpuState, ServerState
from console.gpu.readings import GpuReading
from console.sglang.bench import load_records
from console.ui.bench_screen import BenchForm, BenchScreen, install, parse_form
from tests.patience import patient
from tests.ui.waits import until

TOML = """
[hosts.h]
transport = "local"
[presets.p]
host = "h"
gpus = [0]
model = "/m"
args = ["--mem-fraction-static", "0.8"]
"""


class FakeApi:
    """The slice of FleetApi a BenchScreen uses."""

    def __init__(self, url: str) -> None:
        self.fleet = parse_fleet(TOML)
        self.state = FleetState(["h"])
        self.state.hosts["h"].gpus[0] = GpuState(GpuReading(0, name="NVIDIA H200"))
        meta = ServerMeta(
            "p@h:gpu0",
            "h",
            (0,),
            30000,
            preset="p",
            argv=("py", "-m", "sglang.launch_server", "--model-path", "/m", "--tp-size", "1"),
        )
        self.state.servers[meta.name] = ServerState(meta)
        self.url = url

    async def server_url(self, name: str) -> str:
        return self.url

    def api_key_env(self, name: str) -> str | None:
        return None


class Host(App[None]):
    def __init__(self, api: FakeApi) -> None:
        super().__init__()
        self.api = api
        self.bench_runner = None


@pytest.fixture
def fake() -> Iterator[FakeSSEServer]:
    srv = FakeSSEServer().start()
    yield srv
    srv.stop()


async def _sweep(app: Host, pilot, name: str = "p@h:gpu0") -> BenchScreen:
    app.bench_runner(app, name)
    await pilot.pause()
    if isinstance(app.screen, BenchForm):  # `b` asks first: take the defaults
        await pilot.press("enter")
        await pilot.pause()
    screen = app.screen
    assert isinstance(screen, BenchScreen)
    await ended(pilot, screen)
    return screen


async def ended(pilot, screen: BenchScreen, timeout: float = 10) -> None:  # type: ignore[no-untyped-def]
    """Waits for the sweep to have run to its end (results or an error on the screen)."""
    await until(
        pilot,
        lambda: screen.is_mounted and not screen.running and (screen.levels or screen.error),
        lambda: f"the sweep's end; status {screen.query_one('#bench-status', Static).render()}",
        timeout,
    )


def thread_end(screen: BenchScreen) -> threading.Event:
    """Set when the screen's sweep thread (the load generator's own loop) has returned."""
    done = threading.Event()
    run = screen._run_in_thread

    def watched(*a, **kw):  # type: ignore[no-untyped-def]
        try:
            return run(*a, **kw)
        finally:
            done.set()

    screen._run_in_thread = watched  # type: ignore[method-assign]
    return done


async def waited(event: threading.Event, timeout: float) -> bool:
    """`event.wait(patient(timeout))` without blocking the event loop."""
    return await asyncio.to_thread(event.wait, patient(timeout))


async def test_sweep_fills_bars_saves_and_compares(
    fake: FakeSSEServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DFLASH_STATE_DIR", str(tmp_path))
    app = Host(FakeApi(fake.url))
    install(app)
    async with app.run_test(size=(120, 30)) as pilot:
        app.bench_runner = lambda a, n: a.push_screen(
            BenchScreen(a.api, n, concurrency=(1, 4), input_len=8, output_len=5)
        )
        screen = await _sweep(app, pilot)
        assert screen.error is None
        assert [lv.concurrency for lv in screen.levels] == [1, 4]
        bar = screen.query_one("#bench-c4", ProgressBar)
        assert bar.progress == bar.total == 20
        assert "done: 25 requests" in str(screen.query_one("#bench-status", Static).render())
        await pilot.press("r")
        await until(pilot, lambda: not screen.running and screen.comparison, "the second sweep's comparison", 10)
        assert screen.comparison and "at C=1" in screen.comparison[0]
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, BenchScreen)
    recs = load_records(tmp_path / "bench.jsonl")
    assert len(recs) == 2
    assert recs[0]["preset"] == "p" and recs[0]["gpu_model"] == "1x NVIDIA H200"
    assert recs[0]["server_args"] == ["--model-path", "/m", "--tp-size", "1"]


async def test_unknown_server_shows_error(fake: FakeSSEServer) -> None:
    app = Host(FakeApi(fake.url))
    install(app)
    async with app.run_test() as pilot:
        screen = await _sweep(app, pilot, "nope")
        assert screen.error and "not running" in screen.error
        assert "bench failed" in str(screen.query_one("#bench-status", Static).render())


async def test_closing_mid_sweep_stops_the_generator_thread() -> None:
    srv = FakeSSEServer(FakeOptions(tokens_per_s=50)).start()
    try:
        app = Host(FakeApi(srv.url))
        async with app.run_test() as pilot:
            screen = BenchScreen(app.api, "p@h:gpu0", concurrency=(4,), output_len=200, save=False)
            gone = thread_end(screen)
            app.push_screen(screen)
            # mid-sweep: its first request (4 s at 50 tok/s) in flight; the whole sweep would take 24 s
            await until(pilot, lambda: screen.running and srv.requests >= 1, "the sweep under way", 5)
            assert app.screen is screen and screen.running
            await pilot.press("escape")
            assert await waited(gone, 5), "the generator thread still runs after the screen closed"
            seen = srv.requests
            await asyncio.sleep(0.5)
            assert srv.requests == seen  # no new requests once closed
            assert not isinstance(app.screen, BenchScreen) and screen._stop.is_set()
    finally:
        srv.stop()


async def test_app_exit_mid_sweep_stops_the_thread_and_drops_its_late_callbacks() -> None:
    srv = FakeSSEServer(FakeOptions(tokens_per_s=50)).start()
    try:
        app = Host(FakeApi(srv.url))
        async with app.run_test() as pilot:
            screen = BenchScreen(app.api, "p@h:gpu0", concurrency=(4, 8), output_len=200, save=False)
            gone = thread_end(screen)
            app.push_screen(screen)
            await until(pilot, lambda: screen.running and srv.requests >= 1, "the sweep under way", 5)
            assert screen.running
        assert screen._stop.is_set()
        assert await waited(gone, 5), "the generator thread still runs after the app exited"
        seen = srv.requests
        await asyncio.sleep(0.5)
        assert srv.requests == seen  # the generator thread ended with the app
        screen._progress(8, 3, 40)  # what the thread may still post after the screen is gone: no NoMatches
    finally:
        srv.stop()


async def test_b_asks_for_the_sweep_before_starting(
    fake: FakeSSEServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DFLASH_STATE_DIR", str(tmp_path))
    app = Host(FakeApi(fake.url))
    install(app)
    async with app.run_test(size=(120, 30)) as pilot:
        app.bench_runner(app, "p@h:gpu0")
        await until(pilot, lambda: isinstance(app.screen, BenchForm) and app.screen.values(), "the bench form")
        form = app.screen
        assert isinstance(form, BenchForm) and fake.requests == 0  # nothing sent before the user answers
        assert form.values() == {
            "concurrency": "1,32,64,128",
            "input_len": "1024",
            "output_len": "256",
            "num_prompts": "",
        }
        for key, text in (("concurrency", "1,0"), ("input_len", "8"), ("output_len", "5"), ("num_prompts", "3")):
            form.query_one(f"#bench-form-{key}").value = text
        form.query_one("#bench-form-concurrency").focus()
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is form and "levels:" in str(form.query_one("#bench-form-error", Static).render())
        form.query_one("#bench-form-concurrency").value = "1,2"
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, BenchScreen)
        assert (screen.spec.concurrency, screen.spec.input_len, screen.spec.output_len, screen.spec.num_prompts) == (
            (1, 2),
            8,
            5,
            3,
        )
        await ended(pilot, screen)
        assert [lv.requests for lv in screen.levels] == [3, 3]
        await pilot.press("escape")
        await pilot.pause()
        app.bench_runner(app, "p@h:gpu0")
        await until(pilot, lambda: isinstance(app.screen, BenchForm) and app.screen.values(), "the bench form again")
        assert isinstance(app.screen, BenchForm)
        assert app.screen.values() == {
            "concurrency": "1,2",
            "input_len": "8",
            "output_len": "5",
            "num_prompts": "3",
        }  # the last sweep's answers
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, (BenchForm, BenchScreen))


def test_parse_form_names_the_bad_field() -> None:
    assert parse_form({"concurrency": "1,4", "input_len": "16", "output_len": "8", "num_prompts": ""}) == {
        "concurrency": (1, 4),
        "input_len": 16,
        "output_len": 8,
        "num_prompts": None,
    }
    with pytest.raises(ValueError, match="output tokens"):
        parse_form({"concurrency": "1", "input_len": "16", "output_len": "x", "num_prompts": ""})
