"""Untrusted text (host names, log lines, model output, errors) never acts as markup or escape codes."""

from __future__ import annotations

import pytest
from rich.cells import cell_len

from console.fleet.events import GpuSample, HostDown, HostUp, ServerMeta, ServerSeen
from console.fleet.state import FleetState
from console.gpu.readings import GpuReading
from console.ui.format import clean
from console.ui.screens.server import ServerScreen
from console.ui.widgets.gpu_pane import GpuPane
from tests.ui.fakes import NOW, FakeApi, FakeBackend, ScriptedLog, demo_fleet
from tests.ui.waits import server_log, until

HOSTILE = [
    "[/foo]",
    "[bold",
    "[0]",
    "[/",
    "[red]red?[/red]",
    "\x1b[31mred\x1b[0m",
    "nul\x00byte",
    "$(rm -rf ~)",
    "tab\there",
    "\r\rcr",
    "[link=http://x]x[/link]",
    "宽字符的日志行 wide " * 9,
    "x" * 1_000_000,
]


def hostile_state() -> FleetState:
    st = FleetState()
    for i, text in enumerate(HOSTILE[:-1]):
        host = f"h{i}{text[:20]}"
        st.apply(HostUp(host, NOW))
        st.apply(GpuSample(host, NOW, (GpuReading(0, name=f"GPU {text}", memory_used_mib=1, memory_total_mib=2),)))
        m = ServerMeta(name=f"s{i}{text[:30]}", host=host, gpus=(0,), port=30000 + i, preset=text[:30], command=text)
        st.apply(ServerSeen(m, NOW))
        st.servers[m.name].log = ScriptedLog("crashed", HOSTILE)
    st.apply(HostDown("h0[/foo]", NOW, error="[bold unterminated \x1b[2J"))
    return st


async def test_fleet_and_server_screens_survive_hostile_text() -> None:
    from console.ui.app import DflashApp

    st = hostile_state()
    api = FakeApi(st, fleet=demo_fleet())
    app = DflashApp(api, clock=lambda: NOW, backend=FakeBackend(answer=" ".join(HOSTILE[:-1])))
    async with app.run_test(size=(100, 40)) as pilot:
        await until(pilot, lambda: len(app.screen.query(GpuPane)) == len(HOSTILE) - 1, "a pane per hostile host")
        panes = list(app.screen.query(GpuPane))
        assert len(panes) == len(HOSTILE) - 1
        for p in panes:
            rendered = p.render()
            assert "[/foo]" in rendered.plain or "[bold" in rendered.plain or p.host in st.hosts
        name = next(iter(st.servers))
        app.open_server(name)
        view = await server_log(pilot)
        assert isinstance(app.screen, ServerScreen)
        for y in range(view.size.height):
            strip = view.render_line(y)
            text = "".join(seg.text for seg in strip)
            assert "\x1b" not in text and "\x00" not in text
            # every row exactly fills the view, wide characters included (a row says how wide it is; a wrong
            # cell length shifts or tears what the frame puts right of it)
            assert strip.cell_length == view.size.width == sum(cell_len(seg.text) for seg in strip), y
        await pilot.press("slash", *"[bold", "enter")
        await pilot.pause()
        assert view.matches
        await pilot.press("escape", "c")
        await pilot.pause()
        await pilot.press(*"[/x]", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()


@pytest.mark.parametrize("text", HOSTILE)
def test_clean_strips_escapes_and_controls(text: str) -> None:
    out = clean(text)
    assert "\x1b" not in out and "\x00" not in out and "\r" not in out


async def test_megabyte_line_renders_cropped() -> None:
    from console.ui.app import DflashApp

    api = FakeApi()
    name = "qwen3-8b@ct129:gpu0-1"
    api.state.servers[name].log = ScriptedLog("serving", ["a" * 1_000_000 + "[bold", "[/foo] after"])
    app = DflashApp(api, clock=lambda: NOW, backend=FakeBackend())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_server(name)
        view = await server_log(pilot)
        assert view.virtual_size.width < 5000
        strip = view.render_line(view.rows.index(0) - int(view.scroll_y)) if view.scroll_y == 0 else view.render_line(0)
        assert strip.cell_length == view.size.width
