"""Launch -> phases -> ready -> probe -> stop (GPUs freed), against a sim host behind real sshd."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.fleet.conftest import make_fleet, preset_toml


async def wait_for(pred, timeout: float = 20.0, step: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        await asyncio.sleep(step)
    raise AssertionError("condition not met in time")


async def test_launch_ready_probe_stop(sim_ssh, controller_factory):
    h = sim_ssh("gpuhost")
    fleet = make_fleet(h.section() + preset_toml("small", h, [0], 30000))
    ctl = controller_factory(fleet)
    await ctl.start()
    assert await ctl.wait_hosts(10)
    await wait_for(lambda: ctl.state.hosts["gpuhost"].gpus)
    out = await ctl.launch("small", wait=True)
    assert out.ok, out.message
    name = out.servers[0]
    s = ctl.state.servers[name]
    assert s.phase in ("ready", "serving") and s.health == "ok"
    url = await ctl.server_url(name)
    async with httpx.AsyncClient(trust_env=False) as c:
        r = await c.get(url + "/model_info")
        assert r.status_code == 200
    await wait_for(lambda: ctl.state.servers[name].memory_mib > 0)
    out = await ctl.stop_server(name)
    assert out.ok, out.message
    s = ctl.state.servers[name]
    assert not s.alive and s.phase == "stopped"
