"""Stop and restart on a GPU that another process shares: a sim server beside the sim's VRAM hog (another user's job),
over real sshd and, for the CLI, the local transport."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from console.fleet import actions
from console.sim.control import hold_vram
from console.sim.fleet import build_host
from console.sim.spec import PRESET_SPECS
from tests.fleet.conftest import SimSsh, make_fleet, preset_toml
from tests.fleet.test_cli_local import ROOT, _free_port
from tests.fleet.test_lifecycle import wait_for

SMALL_MIB = 2000
"""A notebook's worth: within the 47.8 GiB a --mem-fraction-static 0.5 preset leaves on the sim's 95.6 GiB GPU."""
BIG_MIB = 60000
"""More than that headroom: the relaunch would not fit."""


async def _hog(ctl, h: SimSsh, gpu: int, mib: int) -> int:
    """A process of the host's own (its own session, not the console's) holding `mib` MiB on `gpu`; its pid."""
    r = await ctl.links[h.name].run(
        f"setsid nohup {h.dir}/venv/bin/python3 -m console.sim.hog {h.dir} {gpu} {mib} python3 "
        f"> /dev/null 2>&1 < /dev/null & echo $!"
    )
    pid = int(r.stdout)
    await wait_for(lambda: any(p.pid == pid for p in ctl.state.hosts[h.name].gpus[gpu].processes), 15)
    return pid


async def _started(h: SimSsh, controller_factory):
    ctl = controller_factory(make_fleet(h.section() + preset_toml("small", h, [0], 30000)))
    await ctl.start()
    out = await ctl.launch("small", wait=True)
    assert out.ok, out.message
    return ctl, out.servers[0]


async def test_stop_beside_a_foreign_process_is_confirmed_and_names_it(sim_ssh, controller_factory, monkeypatch):
    """The stop waited for the GPU to hold no compute app at all: the hog's made it report 'not released'."""
    monkeypatch.setattr(actions, "GPU_RELEASE_WAIT_S", 3.0)
    h = sim_ssh("sharestop")
    ctl, name = await _started(h, controller_factory)
    hog = await _hog(ctl, h, 0, SMALL_MIB)
    try:
        out = await ctl.stop_server(name)
        assert out.ok, out.message
        assert "GPU 0 still holds" in out.message and f"python3 pid {hog}" in out.message, out.message
        assert not ctl.state.servers[name].alive
    finally:
        await ctl.links[h.name].run(f"kill -KILL {hog}")


async def test_restart_beside_a_small_foreign_process_relaunches_and_names_it(sim_ssh, controller_factory, monkeypatch):
    monkeypatch.setattr(actions, "GPU_RELEASE_WAIT_S", 3.0)
    h = sim_ssh("sharerestart")
    ctl, name = await _started(h, controller_factory)
    hog = await _hog(ctl, h, 0, SMALL_MIB)
    try:
        out = await ctl.restart(name)
        assert out.ok, out.message
        assert f"pid {hog}" in out.message and "shared with" in out.message, out.message
        assert (await ctl.wait_ready(name, 60)).ok
        assert (await ctl.stop_server(name)).ok
    finally:
        await ctl.links[h.name].run(f"kill -KILL {hog}")


async def test_restart_refused_before_the_stop_when_another_process_takes_the_vram(sim_ssh, controller_factory):
    """The restart stopped first and found out after: the server was gone and its relaunch refused."""
    h = sim_ssh("sharefull")
    ctl, name = await _started(h, controller_factory)
    launch_id = ctl.state.servers[name].meta.launch_id
    hog = await _hog(ctl, h, 0, BIG_MIB)
    try:
        out = await ctl.restart(name)
        assert not out.ok and out.forcible, out.message
        assert f"pid {hog}" in out.message and "was not stopped" in out.message and "--force" in out.message
        assert out.message.count(f"pid {hog}") == 1, out.message
        s = ctl.state.servers[name]
        assert s.alive and s.meta.launch_id == launch_id
        forced = await ctl.restart(name, force=True)
        assert forced.ok, forced.message
        assert "(forced)" in forced.message and f"pid {hog}" in forced.message, forced.message
        assert ctl.state.servers[name].meta.launch_id != launch_id
    finally:
        await ctl.links[h.name].run(f"kill -KILL {hog}")


async def test_a_busy_gpu_refusal_names_each_owner_once(sim_ssh, controller_factory):
    """A console server on the GPU was one reason from its meta (`used by NAME (pid P, preset X)`) and one from its
    compute app (`used by pid P `...` (preset X)`)."""
    h = sim_ssh("shareonce")
    text = h.section() + preset_toml("first", h, [0], 30000) + preset_toml("samegpu", h, [0], 30005)
    ctl = controller_factory(make_fleet(text))
    await ctl.start()
    out = await ctl.launch("first", wait=True)
    assert out.ok, out.message
    pid = ctl.state.servers[out.servers[0]].meta.pid
    await wait_for(lambda: ctl.state.servers[out.servers[0]].memory_mib > 0)
    gpu = await ctl.launch("samegpu")
    assert not gpu.ok and not gpu.forcible
    assert gpu.message.count("GPU 0 is used by") == 1 and gpu.message.count(f"pid {pid}") == 1, gpu.message
    assert f"{out.servers[0]} (pid {pid}, preset first)" in gpu.message, gpu.message


def test_cli_restart_refused_then_forced_on_a_local_host(sim_root: Path, tmp_path: Path):
    d = sim_root / "sim-lbox"
    build_host(d, PRESET_SPECS["blackwell"].with_(name="lbox"))
    port = _free_port()
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(
        f'[console]\npoll_ms = 500\n[hosts.lbox]\ntransport = "local"\npython = "{d}/venv/bin/python3"\n'
        f'run_dir = "{d}/run"\nlog_dir = "{d}/logs"\nenv = {{ PATH = "{d}/bin:/usr/local/bin:/usr/bin:/bin" }}\n'
        f'[presets.gen]\nhost = "lbox"\ngpus = [1]\nmodel = "{d}/models/Qwen3-0.6B"\nport = {port}\n'
        'args = ["--mem-fraction-static", "0.5"]\nready_timeout = 60\n'
    )
    name = "gen@lbox:gpu1"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "console", *args, "--hosts", str(hosts)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=dict(os.environ),
        )

    r = run("launch", "gen", "--wait")
    assert r.returncode == 0, r.stderr
    hog = hold_vram(d, 1, BIG_MIB)
    try:
        r = run("restart", name)
        assert r.returncode == 1 and f"pid {hog.pid}" in r.stderr and "--force" in r.stderr, (r.stdout, r.stderr)
        r = run("restart", name, "--force")
        assert r.returncode == 0 and "(forced)" in r.stdout, (r.stdout, r.stderr)
    finally:
        hog.kill()
        hog.wait()
        run("stop", name)
