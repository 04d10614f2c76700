"""The launch path across consoles: two consoles onto one GPU in the same tick start one server; a console
killed between the fork and meta.json leaves no server; a full run_dir refuses the launch or fails it loudly.
Sim hosts behind real sshd; the consoles are real FleetControllers (and a real `dflash-console` process)."""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.fleet import actions, discovery, hostlock
from console.sglang import launchscript
from console.sglang.command import plan_launch
from tests.faults import results
from tests.faults.simfleet import REPO, SimHost, build_sim_fleet, controller, preset_toml, trials, wait_for


def _server_sessions(h: SimHost) -> set[int]:
    """Session ids of SGLang launches on the host (gate or server: either one is a launch that went through)."""
    r = h.ssh.exec("ps -eo sid=,args= | awk '/-m sglang[.]launch_server/ && !/awk/ && !/meta[.]json[.]tmp/ {print $1}'")
    return {int(x) for x in r.stdout.split()}


def _kill_sessions(h: SimHost, sids: set[int]) -> None:
    for sid in sids:
        h.ssh.exec(f"kill -KILL -- -{sid} 2>/dev/null || kill -KILL -{sid} 2>/dev/null || kill -KILL {sid}; true")


async def test_two_consoles_one_gpu_same_tick(ssh_host_factory, sim_root: Path) -> None:
    """Regression (issue 19.1): the lock was an in-process asyncio.Lock, so two consoles both passed the pre-checks
    and started two servers on GPU 0. Now the host's flock serialises them: one starts, the other is refused."""
    sf = build_sim_fleet(ssh_host_factory, sim_root, ["race"])
    h = sf.hosts["race"]
    fleet = sf.fleet(preset_toml("a", h, port=30810) + preset_toml("b", h, port=30811))
    n = trials(20)
    doubles = 0
    refusal_s: list[float] = []
    async with controller(fleet) as c1, controller(fleet) as c2:
        assert await c1.wait_hosts(15) and await c2.wait_hosts(15)
        for i in range(n):
            t0 = time.monotonic()
            # one tick: both launches start in the same event-loop iteration, each over its own SSH connection
            # (alternating which preset each console asks for: same GPU, other port and name half the time)
            second = "a" if i % 2 == 0 else "b"
            outs = await asyncio.gather(actions.launch(c1, "a"), actions.launch(c2, second))
            took = time.monotonic() - t0
            sids = _server_sessions(h)
            ok = [o for o in outs if o.ok]
            double = len(ok) > 1 or len(sids) > 1
            doubles += double
            refused = [o for o in outs if not o.ok]
            if len(ok) == 1 and refused:
                refusal_s.append(took)
            says = refused[0].message if refused else ""
            results.record(
                "faults",
                "two consoles launch onto one GPU in one tick",
                i,
                len(ok) == 1 and len(sids) == 1 and ("GPU 0" in says or "already running" in says),
                took,
                f"ok={len(ok)} sessions={len(sids)} refusal={says[:200]!r}",
                refusal_s=took,
            )
            _kill_sessions(h, sids)
            await wait_for(
                lambda: not any(s.alive for c in (c1, c2) for s in c.state.servers_on("race")),
                15,
                f"both consoles to see trial {i}'s server gone (sessions {sids}, still shown: "
                f"{[s.name for c in (c1, c2) for s in c.state.servers_on('race') if s.alive]})",
            )
    assert doubles == 0, f"{doubles} of {n} trials started two servers"
    assert len(refusal_s) == n
    print(
        f"two consoles: {n} trials, 0 doubles; refusal after median {statistics.median(refusal_s):.2f} s, "
        f"worst {max(refusal_s):.2f} s"
    )


def _cli(hosts: Path, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "console", "--hosts", str(hosts), *argv],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


async def test_console_killed_before_meta_json_leaves_no_server(ssh_host_factory, sim_root: Path) -> None:
    """Regression (issue 19.1): the server was started first and meta.json written by a later command, so a
    console killed in between left a server nobody owned. A FIFO at meta.json.tmp freezes the launch right
    after the fork; the console and the launching shell are SIGKILLed there: the gate never starts SGLang."""
    t0 = time.monotonic()
    sf = build_sim_fleet(ssh_host_factory, sim_root, ["kmeta"])
    h = sf.hosts["kmeta"]
    hosts = sf.toml(preset_toml("k", h, port=30820))
    fleet = sf.fleet(preset_toml("k", h, port=30820))
    (plan,) = plan_launch(fleet, "k", "x")
    d = discovery.meta_dir(fleet.hosts["kmeta"], plan.replica.name)
    assert h.ssh.exec(f"mkdir -p '{d}' && mkfifo '{d}/meta.json.tmp'").returncode == 0
    proc = _cli(hosts, "launch", "k")
    try:
        gate = await wait_for(
            lambda: _pids(h, launchscript.GATE_NAME, without="meta.json.tmp"), 20, "the gated server process"
        )
        frozen = time.monotonic()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
    for pid in _pids(h, "meta.json.tmp"):  # the launching shell, blocked on the FIFO
        h.ssh.exec(f"kill -KILL {pid} 2>/dev/null; true")
    await wait_for(lambda: not any(h.alive(p) for p in gate), launchscript.GATE_TRIES * 0.1 + 10, "the gate to give up")
    gave_up = time.monotonic() - frozen
    log = next(iter(sorted((h.dir / "logs").glob("k_*.log"))), None)
    text = log.read_text() if log else ""
    started = "server_args=" in text or "Load weight" in text
    h.ssh.exec(f"rm -f '{d}/meta.json.tmp'")
    async with controller(fleet) as ctl:
        assert await ctl.wait_hosts(15) and await ctl.wait_discovered("kmeta", 15)
        await asyncio.sleep(1.5)  # a process sample or two: an unowned server would show as external
        live = [s.name for s in ctl.state.servers_on("kmeta") if s.alive]
        again = await actions.launch(ctl, "k")  # the dead console's lock went with its channel
    ok = not started and not live and again.ok and "not started" in text
    results.record(
        "faults",
        "console SIGKILLed between fork and meta.json: no server, lock free again",
        0,
        ok,
        time.monotonic() - t0,
        f"started={started} live={live} relaunch={again.message[:120]!r} log={text[-200:]!r}",
        gate_gave_up_s=gave_up,
    )
    assert not started, text
    assert "not started" in text, text
    assert not live, live
    assert again.ok, again.message


def _pids(h: SimHost, needle: str, *, without: str | None = None) -> list[int]:
    out = []
    for ln in h.ssh.exec("ps -eo pid=,args=").stdout.splitlines():
        pid, _, args = ln.strip().partition(" ")
        if needle in args and (without is None or without not in args) and "ps -eo" not in args:
            out.append(int(pid))
    return out


def _mount_tiny_run_dir(h: SimHost, leave_pages: int) -> str:
    """A 256 KiB tmpfs over run_dir (the host's mount namespace only), filled to `leave_pages` free 4 KiB pages."""
    if not h.ssh.netns:
        pytest.skip("a full run_dir needs root and per-host mount namespaces (loopback mode)")
    d = h.dir / "run"
    d.mkdir(exist_ok=True)
    pads = " ".join(f"{d}/pad{i}" for i in range(leave_pages))
    r = h.ssh.exec(
        f"mount -t tmpfs -o size=256k,mode=0777 dfcrun {d} && "
        f"for p in {pads} ''; do [ -n \"$p\" ] && dd if=/dev/zero of=$p bs=4k count=1 2>/dev/null; done; "
        f"dd if=/dev/zero of={d}/fill bs=4k 2>/dev/null; rm -f {pads}; df -Pk {d} | tail -1",
        as_user=False,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


async def test_full_run_dir_refuses_the_launch(ssh_host_factory, sim_root: Path) -> None:
    """Regression (issue 17.5): a full run_dir let the server start, meta.json was not written and the launch
    said ready. The pre-checks now look at run_dir's free space like the log dir's."""
    t0 = time.monotonic()
    sf = build_sim_fleet(ssh_host_factory, sim_root, ["runfull"])
    h = sf.hosts["runfull"]
    df = _mount_tiny_run_dir(h, 0)
    async with controller(sf.fleet(preset_toml("r", h, port=30830))) as ctl:
        assert await ctl.wait_hosts(15)
        out = await actions.launch(ctl, "r", wait=True)
        sessions = _server_sessions(h)
    said = out.message.lower()
    ok = not out.ok and "no space" in said and "run_dir" in said and not sessions
    results.record(
        "faults",
        "run_dir disk full at launch: refused, names run_dir, no server",
        0,
        ok,
        time.monotonic() - t0,
        f"{out.message[:200]!r} sessions={sessions} df={df.strip()!r}",
    )
    assert not out.ok and "no space" in said and "run_dir" in said, out.message
    assert not sessions


async def test_run_dir_full_after_the_checks_fails_loudly(ssh_host_factory, sim_root: Path) -> None:
    """A run_dir that fills between the pre-checks and meta.json (one page left: the secrets file fits, meta.json
    does not): the launch fails naming meta.json and the full disk, and SGLang never started."""
    t0 = time.monotonic()
    sf = build_sim_fleet(ssh_host_factory, sim_root, ["runfull2"])
    h = sf.hosts["runfull2"]
    fleet = sf.fleet(preset_toml("r", h, port=30840))
    async with controller(fleet) as ctl:
        assert await ctl.wait_hosts(15)
        hold = hostlock.hold(ctl.links["runfull2"].transport.stream, "runfull2", fleet.hosts["runfull2"])
        async with hold as lock:  # the lock first (its file must exist), then the disk fills
            df = _mount_tiny_run_dir_keep_lock(h, lock)
            (plan,) = plan_launch(fleet, "r", actions.new_stamp())
            ok_start, msg = await actions._start(ctl, plan, lock)
        await asyncio.sleep(1.5)
        sessions = _server_sessions(h)
        live = [s.name for s in ctl.state.servers_on("runfull2") if s.alive]
    log = Path(plan.log_path)
    text = log.read_text() if log.exists() else ""
    ok = (
        not ok_start
        and "meta.json" in msg
        and "disk full" in msg
        and not sessions
        and not live
        and "server_args=" not in text
    )
    results.record(
        "faults",
        "run_dir full between pre-checks and meta.json: fails loudly, no server",
        0,
        ok,
        time.monotonic() - t0,
        f"{msg[:200]!r} sessions={sessions} df={df.strip()!r}",
    )
    assert not ok_start and "meta.json" in msg and "disk full" in msg, msg
    assert not sessions and not live
    assert "server_args=" not in text, text


def _mount_tiny_run_dir_keep_lock(h: SimHost, lock: hostlock.HeldLock) -> str:
    """_mount_tiny_run_dir(2) then the lock file copied onto the tmpfs (one page left) (the holder's flock stays on the
    old inode below; the launch script only reads the file's token)."""
    saved = h.ssh.exec(f"cat '{lock.path}'").stdout
    df = _mount_tiny_run_dir(h, 2)
    r = h.ssh.exec(
        f"mkdir -p '{Path(lock.path).parent}' && printf '%s\\n' '{saved.strip()}' > '{lock.path}' && "
        f"df -Pk '{h.dir}/run' | tail -1"
    )
    assert r.returncode == 0, r.stderr
    return df + r.stdout
