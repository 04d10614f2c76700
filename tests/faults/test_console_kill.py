"""The console SIGKILLed during a server's startup and while it serves: the server lives on, a new console
re-attaches with the right phase and refuses a second launch onto those GPUs."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from console.config import load_fleet
from console.fleet import actions
from console.fleet.logmodel import LogModel
from console.fleet.state import FleetState
from tests.faults import results
from tests.faults.simfleet import REPO, SimHost, build_sim_fleet, controller, preset_toml, trials, wait_for

STARTUP_PHASES = ("launching", "loading_weights", "kv_cache", "cuda_graph", "warming")
SERVING_PHASES = ("ready", "serving")
SLOW_SCALE = "0.25"
"""Startup trials run the sim at this time scale, so the startup lasts long enough to kill the console in it."""


def _console(argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *argv],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _kill(p: subprocess.Popen[str]) -> str:
    os.killpg(p.pid, signal.SIGKILL)
    out, _ = p.communicate(timeout=10)
    return out


def _sglang_mains(h: SimHost) -> list[int]:
    r = h.ssh.exec("ps -eo pid=,args= | awk '/-m sglang[.]launch_server/ && !/awk/ {print $1}'")
    return [int(x) for x in r.stdout.split()]


def _log_phase(log_dir: Path, old: set[Path]) -> str:
    """The phase an independent parse of this trial's log file gives (what the console must show)."""
    logs = sorted(set(log_dir.glob("*.log")) - old, key=lambda p: p.stat().st_mtime)
    m = LogModel()
    if logs:
        m.feed(logs[-1].read_bytes())
    return m.phase if logs else "none"


async def _trial(h: SimHost, hosts_toml: Path, preset: str, when: str, i: int) -> None:
    t0 = time.monotonic()
    figs: dict[str, float] = {}
    ok, detail = True, ""
    log_dir = h.dir / "logs"
    old = set(log_dir.glob("*.log"))
    try:
        if when == "startup":
            proc = _console(["-m", "console", "--hosts", str(hosts_toml), "launch", preset, "--wait"])
            # kill once the server is on the host and past its first startup lines
            await wait_for(lambda: _log_phase(log_dir, old) in STARTUP_PHASES[1:], 20, "server in startup")
        else:
            proc = _console(["-m", "tests.faults.console_driver", str(hosts_toml), preset])
            line = await asyncio.to_thread(_read_until, proc, "READY")
            assert line.startswith("READY"), f"driver said {line!r}"
        pids = _sglang_mains(h)
        assert len(pids) == 1, f"expected one server process, found {pids}"
        _kill(proc)
        killed_at = time.monotonic()
        await asyncio.sleep(0.3)
        assert h.alive(pids[0]), "the server died with the console"
        figs["console_s"] = killed_at - t0
        async with controller(load_fleet(hosts_toml)) as ctl:
            await wait_for(lambda: _attached(ctl.state, h.name), 15, "re-attach from meta.json")
            figs["reattach_s"] = time.monotonic() - killed_at
            s = _attached(ctl.state, h.name)
            want = STARTUP_PHASES if when == "startup" else SERVING_PHASES
            if when == "serving":
                await wait_for(lambda: s.health == "ok", 10, "health ok after re-attach")
            truth = _log_phase(log_dir, old)
            if s.phase not in want or (
                truth in want
                and s.phase != truth
                and when == "startup"
                and STARTUP_PHASES.index(s.phase) > STARTUP_PHASES.index(truth)
            ):
                raise AssertionError(f"re-attached console shows {s.phase!r}; the log says {truth!r}")
            figs["phase_ok"] = 1.0
            again = await actions.launch(ctl, preset)
            assert not again.ok, f"second launch was not refused: {again.message}"
            assert "already running" in again.message or "is used by" in again.message, again.message
            other = await actions.launch(ctl, f"{preset}-other")
            assert not other.ok and "GPU 0" in other.message, f"another preset onto the busy GPU: {other.message}"
            if i < 2:  # and through the real CLI, as a person would try it
                cli = await asyncio.to_thread(
                    subprocess.run,
                    [sys.executable, "-m", "console", "--hosts", str(hosts_toml), "launch", preset],
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                assert cli.returncode == 1 and "already running" in cli.stderr + cli.stdout, (
                    cli.returncode,
                    cli.stderr[-300:],
                )
            assert _sglang_mains(h) == pids, f"server processes now {_sglang_mains(h)}, were {pids}"
            figs["refuse_s"] = time.monotonic() - killed_at - figs["reattach_s"]
            t_stop = time.monotonic()
            stop = await actions.stop(ctl, s.name)
            figs["stop_s"] = time.monotonic() - t_stop
            assert stop.ok, f"cleanup stop failed: {stop.message}"
    except Exception as e:
        ok, detail = False, f"{type(e).__name__}: {e}"
        for pid in _sglang_mains(h):
            h.ssh.exec(f"kill -KILL -- -{pid} {pid} 2>/dev/null")
    results.record("faults", f"console SIGKILLed during {when}", i, ok, time.monotonic() - t0, detail, **figs)
    assert ok, f"{when} #{i}: {detail}"


def _attached(state: FleetState, host: str):
    live = [s for s in state.servers_on(host) if s.alive and s.meta.managed]
    return live[0] if live else None


def _read_until(proc: subprocess.Popen[str], word: str, timeout: float = 30) -> str:
    assert proc.stdout is not None
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            return f"(exited {proc.poll()})"
        if line.startswith((word, "FAILED", "REFUSED", "UNREACHABLE")):
            return line.strip()
    return "(timeout)"


async def _series(h: SimHost, hosts_toml: Path, preset: str, when: str, idx: list[int]) -> list[str]:
    fails = []
    for i in idx:
        try:
            await asyncio.wait_for(_trial(h, hosts_toml, preset, when, i), 150)  # a hang fails, never stalls CI
        except AssertionError as e:
            fails.append(str(e))
        except TimeoutError:
            fails.append(f"{when} trial {i} hung for 150 s")
    return fails


async def test_console_sigkill_during_startup_and_serving(ssh_host_factory, sim_root: Path) -> None:
    """10 kills in startup and 10 while serving (two hosts per case, side by side)."""
    n = trials(10)
    names = ["ks0", "ks1", "kv0", "kv1"]
    sf = build_sim_fleet(ssh_host_factory, sim_root, names)
    presets = ""
    for j, name in enumerate(names):
        env = f'{{ DFLASH_SIM_TIME_SCALE = "{SLOW_SCALE}" }}' if name.startswith("ks") else "{}"
        presets += preset_toml(f"p{j}", sf.hosts[name], port=30200 + j, env=env)
        presets += preset_toml(f"p{j}-other", sf.hosts[name], port=30250 + j)  # same GPU, another preset
    hosts_toml = sf.toml(presets)
    split = [list(range(0, n, 2)), list(range(1, n, 2))]
    fails = await asyncio.gather(
        _series(sf.hosts["ks0"], hosts_toml, "p0", "startup", split[0]),
        _series(sf.hosts["ks1"], hosts_toml, "p1", "startup", split[1]),
        _series(sf.hosts["kv0"], hosts_toml, "p2", "serving", split[0]),
        _series(sf.hosts["kv1"], hosts_toml, "p3", "serving", split[1]),
    )
    flat = [f for fs in fails for f in fs]
    assert not flat, "\n".join(flat)
