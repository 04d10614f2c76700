"""Issue 13.1/13.2 against a sim host behind real sshd: a missed process sample ends nothing, a server called
ended that is alive is un-ended, and a crash is told from the whole log (the pane's diagnosis), never early."""

from __future__ import annotations

import dataclasses
from typing import Any

from console.fleet.controller import FleetController
from console.fleet.events import Notice, ServerGone
from console.fleet.monitor import ProcFrame
from console.sim.control import inject
from tests.fleet.conftest import journal_lines, make_fleet, preset_toml
from tests.fleet.test_lifecycle import wait_for


def _hide_session(ctl, host: str, sid: int, frames: int):  # type: ignore[no-untyped-def]
    """Fault at the monitor's seam: the next `frames` process samples holding session `sid` leave it out
    (as a /proc scan racing an exec does). Returns (times dropped, frames seen after the drops)."""
    link = ctl.links[host]
    real = link.on_frame
    dropped: list[float] = []
    after: list[float] = []

    def sample(lk, frame: ProcFrame, at: float) -> None:  # type: ignore[no-untyped-def]
        if len(dropped) < frames and any(p.sid == sid for p in frame.procs):
            frame = dataclasses.replace(frame, procs=[p for p in frame.procs if p.sid != sid])
            dropped.append(at)
        elif len(dropped) >= frames:
            after.append(at)
        real(lk, frame, at)

    link.on_frame = sample
    return dropped, after


async def _serving(sim_ssh, controller_factory, host: str) -> tuple[Any, FleetController, str, list[Notice]]:  # type: ignore[no-untyped-def]
    """A sim host, a controller over it with one ready server, and the notices it gives from now on."""
    h = sim_ssh(host)
    ctl = controller_factory(make_fleet(h.section() + preset_toml("small", h, [0], 30000)))
    notices: list[Notice] = []
    ctl.subscribe(lambda evs, changes: notices.extend(changes.notices))
    await ctl.start()
    out = await ctl.launch("small", wait=True)
    assert out.ok, out.message
    return h, ctl, out.servers[0], notices


async def test_one_missed_sample_does_not_end_a_live_server(sim_ssh, controller_factory) -> None:  # type: ignore[no-untyped-def]
    _, ctl, name, notices = await _serving(sim_ssh, controller_factory, "missed")
    sid = ctl.state.servers[name].meta.sid
    assert sid is not None
    dropped, after = _hide_session(ctl, "missed", sid, frames=1)
    await wait_for(lambda: dropped, 10)
    await wait_for(lambda: len(after) >= 3, 10)  # three more samples, and the recheck long done
    s = ctl.state.servers[name]
    assert s.alive and s.phase in ("ready", "serving"), (s.alive, s.phase)
    assert not [n.message for n in notices if "crashed" in n.message]
    assert not [j for j in journal_lines() if j.get("action") == "gone" and j.get("server") == name]
    out = await ctl.stop_server(name)  # a real end is still seen (two looks, /health down)
    assert out.ok, out.message
    assert ctl.state.servers[name].phase == "stopped"


async def test_server_called_ended_but_alive_is_running_again(sim_ssh, controller_factory) -> None:  # type: ignore[no-untyped-def]
    h, ctl, name, notices = await _serving(sim_ssh, controller_factory, "revived")
    lines_before = ctl.state.servers[name].log.line_count
    ctl.emit([ServerGone(name, 0.0)])  # a false end (what one missed sample used to cause)
    assert ctl.state.servers[name].phase == "crashed"
    await wait_for(lambda: ctl.state.servers[name].alive, 10)
    await wait_for(lambda: ctl.state.servers[name].phase in ("ready", "serving"), 10)
    s = ctl.state.servers[name]
    assert s.ended_at is None and s.log.diagnosis is None
    await wait_for(lambda: ctl.state.servers[name].log.line_count >= lines_before, 10)  # the log re-read
    assert any("is running" in n.message and n.server == name for n in notices), [n.message for n in notices]
    assert [j for j in journal_lines() if j.get("action") == "alive-again" and j.get("server") == name]
    inject(h.dir, 30000, "crash", kind="oom")  # and a real crash after that is told again
    await wait_for(lambda: not ctl.state.servers[name].alive, 10)
    assert [n for n in notices if n.server == name and "crashed" in n.message]


async def test_crash_notice_is_the_panes_diagnosis_after_the_whole_log(sim_ssh, controller_factory) -> None:  # type: ignore[no-untyped-def]
    """The tail lags (here: stopped) behind the process's exit: the notice must still come from the full log."""
    h = sim_ssh("lagging")
    ctl = controller_factory(make_fleet(h.section() + preset_toml("small", h, [0], 30000)))
    notices: list[Notice] = []
    ctl.subscribe(lambda evs, changes: notices.extend(changes.notices))
    await ctl.start()
    out = await ctl.launch("small", wait=True)
    assert out.ok, out.message
    name = out.servers[0]
    ctl.links["lagging"].untail(name)  # the traceback will reach the console only by the end-of-log read
    inject(h.dir, 30000, "crash", kind="oom")
    await wait_for(lambda: not ctl.state.servers[name].alive, 15)
    s = ctl.state.servers[name]
    d = s.log.diagnosis
    assert d is not None and "out of memory" in d.summary.lower(), d
    told = [n.message for n in notices if n.server == name and n.level == "error"]
    assert told == [f"{name} crashed: {d.summary}"], told
    assert "exit status None" not in f"{d.summary} {d.error_line}"


async def test_launch_wait_tells_the_cause_from_the_whole_log(sim_ssh, controller_factory) -> None:  # type: ignore[no-untyped-def]
    """CLI `launch --wait`: the crash it reports is the one the pane shows once the process ended."""
    h = sim_ssh("earlyoom")
    ctl = controller_factory(make_fleet(h.section() + preset_toml("small", h, [0], 30000)))
    await ctl.start()
    assert await ctl.wait_hosts(10)
    inject(h.dir, 30000, "crash", kind="oom", phase="capture")
    out = await ctl.launch("small", wait=True)
    s = ctl.state.servers[out.servers[0]]
    assert not out.ok and not s.alive, (out, s.alive)
    d = s.log.diagnosis
    assert d is not None and out.message == f"{s.name} crashed: {d.summary}", (out.message, d)
    assert "exit status None" not in out.message


def test_silence_excuses_the_consoles_own_stall_not_the_hosts() -> None:
    """The watchdog called 28 of 64 hosts dead when the console itself was starved (load 35): their frames sat
    unread while its ticks came late. Silence counts the console's lateness out; a host silent while the console
    ticks on time is still dead after the limit."""
    from console.fleet.liveness import Silence

    # the host is silent, the console ticks on time: dead once the silence passes 6 s
    s, last = Silence(6.0), 100.0
    verdicts = [s.tick(100.0 + t, 100.0 + t, last) for t in range(1, 9)]
    assert verdicts[:6] == [None] * 6 and verdicts[6] is not None and verdicts[6] > 6.0
    # the console is starved for 8 s (one tick 8 s late): the host's frames were there, only unread
    s = Silence(6.0)
    assert s.tick(109.0, 101.0, last) is None  # 9 s since the last frame read, 7.8 s of it the console's own stall
    assert s.tick(109.2, 109.2, 109.1) is None  # the buffered frame is read: the stall is forgotten with it
    assert s.stalled_s == 0.0
    # starved for 3 s within a real 9 s silence: 9 - 2.8 excused = 6.2 s, over the limit
    s = Silence(6.0)
    assert s.tick(104.0, 101.0, last) is None
    assert [s.tick(104.0 + t, 104.0 + t, last) for t in range(1, 6)][-1] is not None


def test_before_its_first_frame_a_host_has_longer_to_answer() -> None:
    """A connection's first frame waits on an interpreter starting on the host (over 6 s on a loaded host):
    FIRST_FRAME_S for it, the plain limit once a frame came."""
    from console.fleet.liveness import FIRST_FRAME_S, Silence

    s, up = Silence(6.0), 100.0
    assert all(s.tick(up + t, up + t, up, first=True) is None for t in range(1, int(FIRST_FRAME_S) + 1))
    assert s.tick(up + FIRST_FRAME_S + 1, up + FIRST_FRAME_S + 1, up, first=True) is not None
    s = Silence(6.0)
    assert s.tick(up + 7, up + 7, up) is not None  # a frame came at `up`: 7 s of silence is too long


async def test_a_host_whose_agent_starts_slowly_is_not_called_down(tmp_path, controller_factory) -> None:  # type: ignore[no-untyped-def]
    """The host's Python takes 9 s to start (as under a loading model, or 64 stand-in hosts starting on two
    cores): the host stays up, its first process sample arrives, and its link is not reconnected (before, it was
    called down after 6 s and reconnected, starting the slow interpreter again)."""
    import asyncio
    import sys
    import time

    from console.config import parse_fleet
    from console.fleet.events import HostDown, ProcessSample

    py = tmp_path / "slowpython"
    py.write_text(f'#!/bin/sh\nsleep 9\nexec {sys.executable} "$@"\n')
    py.chmod(0o755)
    fleet = parse_fleet(f'[hosts.box]\ntransport = "local"\npython = "{py}"\nrun_dir = "{tmp_path}/run"\n', "t.toml")
    ctl = controller_factory(fleet)
    events: list[Any] = []
    ctl.subscribe(lambda evs, changes: events.extend(evs))
    await ctl.start()
    t0 = time.monotonic()
    while not any(isinstance(e, ProcessSample) for e in events) and time.monotonic() - t0 < 40:
        await asyncio.sleep(0.2)
    assert any(isinstance(e, ProcessSample) and e.host == "box" for e in events), "no process sample in 40 s"
    assert time.monotonic() - t0 >= 8.5  # it did wait for the slow interpreter (the sh loops were not used)
    assert not [e for e in events if isinstance(e, HostDown)], [e for e in events if isinstance(e, HostDown)]
    assert ctl.links["box"].connects == 1 and ctl.state.hosts["box"].conn == "up"
