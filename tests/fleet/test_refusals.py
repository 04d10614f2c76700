"""Launch refusals name the owner; hostile preset values reach SGLang literally; re-attach after a console kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import httpx

from tests.fleet.conftest import journal_lines, make_fleet, preset_toml
from tests.fleet.test_lifecycle import wait_for


async def test_busy_gpu_and_port_refused_with_owner(sim_ssh, controller_factory):
    h = sim_ssh("busy")
    text = (
        h.section()
        + preset_toml("first", h, [0], 30000)
        + preset_toml("samegpu", h, [0], 30005)
        + preset_toml("sameport", h, [2], 30000)
    )
    ctl = controller_factory(make_fleet(text))
    await ctl.start()
    out = await ctl.launch("first", wait=True)
    assert out.ok, out.message
    pid = ctl.state.servers[out.servers[0]].meta.pid
    again = await ctl.launch("first")
    assert not again.ok and "already running" in again.message
    gpu = await ctl.launch("samegpu")
    assert not gpu.ok
    assert "GPU 0 is used by" in gpu.message and f"pid {pid}" in gpu.message and "first" in gpu.message, gpu.message
    port = await ctl.launch("sameport")
    assert not port.ok and "port 30000" in port.message and f"pid {pid}" in port.message, port.message
    assert "sglang.launch_server" in port.message and "(preset first)" in port.message
    assert [s.name for s in ctl.state.servers.values() if s.alive] == [out.servers[0]]


async def test_external_server_shown_read_only_and_sigkill_after_drain(sim_ssh, controller_factory, monkeypatch):
    from console.fleet import actions

    h = sim_ssh("mixed")
    text = h.section() + preset_toml("mine", h, [1], 30000) + preset_toml("onthird", h, [3], 30041)
    ctl = controller_factory(make_fleet(text))
    await ctl.start()
    # started by hand over SSH (no meta.json): the console must treat it as someone else's
    r = await ctl.links["mixed"].run(
        f"CUDA_VISIBLE_DEVICES=3 setsid nohup {h.dir}/venv/bin/python3 -m sglang.launch_server --model-path "
        f"{h.model()} --port 30040 --mem-fraction-static 0.5 > {h.dir}/ext.log 2>&1 < /dev/null & echo $!"
    )
    ext_pid = int(r.stdout)
    try:
        await wait_for(lambda: "external@mixed:30040" in ctl.state.servers, 10)
        await wait_for(lambda: ctl.state.servers["external@mixed:30040"].meta.gpus == (3,), 15)
        e = ctl.state.servers["external@mixed:30040"]
        assert not e.meta.managed and e.alive
        assert ctl.state.live_owner("mixed", 3) is e
        refused = await ctl.stop_server(e.name)
        assert not refused.ok and "external" in refused.message and "adopt" in refused.message
        busy = await ctl.launch("onthird")
        assert not busy.ok and "GPU 3 is used by external@mixed:30040 (pid" in busy.message, busy.message
        out = await ctl.launch("mine", wait=True)
        assert out.ok, out.message
        monkeypatch.setattr(actions, "STOP_DRAIN_S", 0.0)  # no drain allowed: the SIGKILL path
        stopped = await ctl.stop_server(out.servers[0])
        assert stopped.ok, stopped.message
        assert any(r.get("action") == "kill" for r in journal_lines())
        assert ctl.state.servers["external@mixed:30040"].alive
    finally:
        await ctl.links["mixed"].run(f"kill -KILL -- -{ext_pid}")


async def test_hostile_values_reach_sglang_literally(sim_ssh, controller_factory):
    h = sim_ssh("hostile")
    mark = f"/tmp/pwned-{uuid.uuid4().hex[:8]}"
    base = os.path.basename(mark)
    weird = h.dir / "models" / f'we\'ird $(touch {base}) `touch {base}` ; "x"'
    os.rename(h.model(), weird)  # a copy would write the sparse weights out
    served = f"name$(touch {mark})`touch {mark}`;'\"q"
    text = h.section() + preset_toml(
        "evil",
        h,
        [1],
        30010,
        model=str(weird),
        args=["--served-model-name", served],
        env={"EVIL": f"$(touch {mark});`x`"},
    )
    ctl = controller_factory(make_fleet(text))
    await ctl.start()
    out = await ctl.launch("evil", wait=True)
    assert out.ok, out.message
    url = await ctl.server_url(out.servers[0])
    async with httpx.AsyncClient(trust_env=False) as c:
        models = (await c.get(url + "/v1/models")).json()
        info = (await c.get(url + "/model_info")).json()
    assert models["data"][0]["id"] == served
    assert info["model_path"] == str(weird)
    assert not os.path.exists(mark)
    assert not list(h.ssh.home.glob("pwned-*")) and not list(Path("/tmp").glob(f"{base}*"))
    assert h.ssh.exec(f"test -e {mark}").returncode != 0
    assert (await ctl.stop_server(out.servers[0])).ok


CHILD = textwrap.dedent("""
    import asyncio, sys
    from console.config import parse_fleet
    from console.fleet.controller import FleetController

    async def main():
        ctl = FleetController(parse_fleet(open(sys.argv[1]).read(), "h.toml"))
        await ctl.start()
        out = await ctl.launch("small")
        print("LAUNCHED", out.ok, out.message, flush=True)
        await asyncio.sleep(60)

    asyncio.run(main())
""")


async def test_console_killed_during_startup_reattaches(sim_ssh, controller_factory, tmp_path: Path):
    h = sim_ssh("survivor")
    text = h.section() + preset_toml("small", h, [3], 30020)
    (tmp_path / "h.toml").write_text("[console]\npoll_ms = 500\n" + text)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path / "h.toml")],
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(Path(__file__).resolve().parents[2]),
        env=os.environ.copy(),
    )
    try:
        line = child.stdout.readline()
        assert line.startswith("LAUNCHED True"), line
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(5)
    ctl = controller_factory(make_fleet(text))
    await ctl.start()
    await wait_for(lambda: ctl.state.servers, 10)
    (name,) = ctl.state.servers
    s = ctl.state.servers[name]
    assert s.meta.managed and s.alive and s.meta.preset == "small"
    again = await ctl.launch("small")
    assert not again.ok and "already running" in again.message
    ready = await ctl.wait_ready(name, 30)
    assert ready.ok, ready.message
    launches = [ln for ln in h.ssh.ps().splitlines() if "sglang.launch_server" in ln and "--port 30020" in ln]
    assert len({ln.split()[2] for ln in launches}) == 1  # one session: no second launch
    assert (await ctl.stop_server(name)).ok
