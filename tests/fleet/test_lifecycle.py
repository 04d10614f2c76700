"""Launch -> phases -> ready -> probe -> stop (GPUs freed), against a sim host behind real sshd."""

from __future__ import annotations

import asyncio
import time

from console.sglang.client import SGLangClient
from tests.fleet.conftest import make_fleet, preset_toml
from tests.patience import patient


async def wait_for(pred, timeout: float = 20.0, step: float = 0.1):
    end = time.monotonic() + patient(timeout)
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        await asyncio.sleep(step)
    raise AssertionError("condition not met in time")


async def test_launch_ready_probe_stop(sim_ssh, controller_factory):
    h = sim_ssh("gpuhost")
    fleet = make_fleet(
        h.section() + preset_toml("small", h, [0], 30000, args=["--mem-fraction-static", "0.5", "--enable-metrics"])
    )
    ctl = controller_factory(fleet)
    phases: list[str] = []

    def track(_events, _notices) -> None:
        for s in ctl.state.servers.values():
            if not phases or phases[-1] != s.phase:
                phases.append(s.phase)

    ctl.subscribe(track)
    await ctl.start()
    assert await ctl.wait_hosts(10)
    await wait_for(lambda: ctl.state.hosts["gpuhost"].gpus)
    out = await ctl.launch("small", wait=True)
    assert out.ok, out.message
    name = out.servers[0]
    s = ctl.state.servers[name]
    assert s.phase in ("ready", "serving") and s.health == "ok"
    assert phases[0] == "launching" and "ready" in phases, phases
    seen = list(s.log.timeline)  # every phase the log went through, even within one tail chunk
    assert [p for p in seen if p in ("loading_weights", "kv_cache", "cuda_graph")] == [
        "loading_weights",
        "kv_cache",
        "cuda_graph",
    ], s.log.timeline
    url = await ctl.server_url(name)
    async with SGLangClient(url) as c:
        probe = await c.probe("hi", max_tokens=8)
    assert probe.ok and probe.text and probe.stats and probe.stats.ttft_s is not None, probe
    await wait_for(lambda: ctl.state.servers[name].memory_mib > 0)
    await wait_for(lambda: ctl.state.servers[name].metrics.get("generation_tokens_total", 0) > 0, 8)
    gpu0 = ctl.state.hosts["gpuhost"].gpus[0]
    assert gpu0.processes and gpu0.processes[0].server == name
    out = await ctl.stop_server(name)
    assert out.ok, out.message
    assert "GPUs released" in out.message
    s = ctl.state.servers[name]
    assert not s.alive and s.phase == "stopped"
    await ctl.close()  # every remote loop ends with its channel (no signals needed)
    await wait_for(
        lambda: (
            not [
                ln
                for ln in h.ssh.ps().splitlines()
                if "dflash-tail" in ln or "-lms" in ln or "query-compute-apps" in ln
            ]
        ),
        5,
    )


async def test_crash_cause_restart_keeps_old_log(sim_ssh, controller_factory):
    from console.sim.control import inject

    h = sim_ssh("crashy")
    fleet = make_fleet(h.section() + preset_toml("small", h, [1], 30001))
    ctl = controller_factory(fleet)
    notices = []
    ctl.subscribe(lambda evs, changes: notices.extend(changes.notices))
    await ctl.start()
    out = await ctl.launch("small", wait=True)
    assert out.ok, out.message
    name = out.servers[0]
    old = ctl.state.servers[name]
    old_log = old.meta.log_path
    inject(h.dir, 30001, "crash", kind="oom")
    await wait_for(lambda: not ctl.state.servers[name].alive, 10)
    s = ctl.state.servers[name]
    assert s.phase == "crashed"
    assert any("crashed" in n.message for n in notices)
    assert s.log.diagnosis is not None, list(s.log.lines)[-5:]
    out = await ctl.restart(name)
    assert out.ok, out.message
    s2 = ctl.state.servers[name]
    assert s2.meta.log_path != old_log and old_log in s2.previous_logs
    assert h.ssh.exec(f"test -s '{old_log}'").returncode == 0  # the crashed log is still on the host
    crashed = await ctl.read_file("crashy", old_log)
    assert b"Traceback" in crashed or b"Error" in crashed
    ok = await ctl.wait_ready(name, 30)
    assert ok.ok, ok.message
    await wait_for(lambda: ctl.state.servers[name].log.line_count > 0, 5)  # the new log is followed
    assert (await ctl.stop_server(name)).ok


async def test_restart_of_a_replanned_replica_keeps_its_port(sim_ssh, controller_factory):
    """A replica launched on GPU 1 alone is re-planned onto the preset's first free port (30000, not its plan's
    30001). Restarting it after a crash relaunched it on the plan's 30001, the port of its sibling replica (the
    demo's 'r' was refused: port in use by the gpu2 replica; here the port is free and it moved silently)."""
    from console.sim.control import inject

    h = sim_ssh("replan")
    fleet = make_fleet(h.section() + preset_toml("pair", h, [0, 1], 30000, tp=1))
    ctl = controller_factory(fleet)
    await ctl.start()
    assert await ctl.wait_hosts(10)
    await wait_for(lambda: ctl.state.hosts["replan"].gpus)
    out = await ctl.launch("pair", [1], wait=True)
    assert out.ok, out.message
    name = out.servers[0]
    assert name.endswith(":gpu1") and ctl.state.servers[name].meta.port == 30000
    inject(h.dir, 30000, "crash", kind="oom")
    await wait_for(lambda: not ctl.state.servers[name].alive, 10)
    out = await ctl.restart(name)
    assert out.ok, out.message
    s = ctl.state.servers[name]
    assert s.alive and s.meta.port == 30000 and list(s.meta.gpus) == [1]
    assert (await ctl.wait_ready(name, 30)).ok
    assert (await ctl.stop_server(name)).ok


async def test_a_launch_given_its_previews_stamp_writes_the_log_the_preview_named(sim_ssh, controller_factory):
    """The launch preview shows "the exact command": launched with the preview's stamp, the server's log file is
    the one in the previewed command (a launch re-plans under the host lock, and a fresh stamp named another)."""
    h = sim_ssh("gpuhost")
    fleet = make_fleet(h.section() + preset_toml("small", h, [0], 30000, args=["--mem-fraction-static", "0.5"]))
    ctl = controller_factory(fleet)
    await ctl.start()
    assert await ctl.wait_hosts(10)
    await wait_for(lambda: ctl.state.hosts["gpuhost"].gpus)
    pv = await ctl.preview("small")
    (plan,) = pv.plans
    await asyncio.sleep(0.01)  # a later stamp, were one made
    out = await ctl.launch("small", stamp=pv.stamp)
    assert out.ok, out.message
    assert ctl.state.servers[out.servers[0]].meta.log_path == plan.log_path
    assert plan.log_path.rsplit("/", 1)[1] in plan.command
    await ctl.stop_server(out.servers[0])
    await ctl.close()
