"""Channel budget: 8 servers on an 8-GPU host stay within 8 channels; steady state spawns nothing."""

from __future__ import annotations

import asyncio

from tests.fleet.conftest import journal_lines, make_fleet, preset_toml
from tests.fleet.test_lifecycle import wait_for


async def test_eight_servers_within_eight_channels(sim_ssh, controller_factory):
    h = sim_ssh("eight", spec="blackwell8")
    ctl = controller_factory(make_fleet(h.section() + preset_toml("gen8", h, list(range(8)), 30100, tp=1)))
    await ctl.start()
    assert await ctl.wait_hosts(10)
    link = ctl.links["eight"]
    peak = 0
    http_peak = 0
    stop = asyncio.Event()

    async def sample() -> None:
        nonlocal peak, http_peak
        while not stop.is_set():
            peak = max(peak, link.open_channels)
            http_peak = max(http_peak, ctl.http_in_flight)
            await asyncio.sleep(0.02)

    sampler = asyncio.create_task(sample())
    try:
        out = await ctl.launch("gen8", wait=True)
        assert out.ok, out.message
        assert len(out.servers) == 8
        await wait_for(lambda: all(ctl.state.servers[n].log.line_count > 0 for n in out.servers), 10)
        # steady state: count exec requests (commands + stream opens) over a window
        commands0 = sum(1 for r in journal_lines() if r["kind"] == "command")
        streams0 = link.streams_opened
        await asyncio.sleep(4)
        commands = sum(1 for r in journal_lines() if r["kind"] == "command") - commands0
        streams = link.streams_opened - streams0
    finally:
        stop.set()
        await sampler
    print(f"channels peak {peak} + http {http_peak}; steady-state commands {commands}, streams {streams} in 4 s")
    assert peak + http_peak <= 8, (peak, http_peak)
    assert commands == 0 and streams == 0, (commands, streams)
    for n in out.servers:
        assert ctl.state.servers[n].phase in ("ready", "serving")
        assert ctl.state.servers[n].memory_mib > 0
