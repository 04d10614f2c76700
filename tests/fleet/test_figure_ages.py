"""Figures carry their age, and a server SGLang stopped printing Decode lines for is decoding nothing: the state's
rule (ServerState.decode_idle), `status --json`'s ages, the CLI's `366.5 (42 s ago)`, the TUI's panes, and the
agent's host clock that dates a log read all at once."""

from __future__ import annotations

import calendar
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.commands.status import figure, render
from console.config import parse_fleet
from console.fleet.events import HostUp, LogData, ServerMeta, ServerSeen
from console.fleet.oneshot import oneshot_command, oneshot_events, parse_oneshot
from console.fleet.report import status_doc
from console.fleet.state import DECODE_IDLE_S, STALE_S, FleetState
from console.ui.views import server_page, server_view
from tests.fleet.test_oneshot import _fake_server, _free_port, apply, fake_procs, meta  # noqa: F401

T0 = 1_780_000_000.0
"""The log's stamps, on their own scale (local time read as UTC): here the host's clock is UTC."""


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


def decode(t: float, tok_s: float = 366.5, running: int = 4) -> bytes:
    return (
        f"[{stamp(t)}] Decode batch, #running-req: {running}, #token: 900, token usage: 0.05, cuda graph: True, "
        f"gen throughput (token/s): {tok_s}, #queue-req: 0\n"
    ).encode()


def ready_state() -> FleetState:
    st = FleetState(["h"])
    st.apply(HostUp("h", T0))
    st.apply(ServerSeen(ServerMeta(name="p@h:gpu0", host="h", gpus=(0,), port=30000, log_path="/l"), T0))
    return st


def fed(at: float, data: bytes, clock: float | None = None) -> FleetState:
    st = ready_state()
    st.apply(LogData("p@h:gpu0", at, "/l", 0, data, clock))
    return st


def test_a_live_figure_is_current_then_aged_then_zero_once_nothing_decodes() -> None:
    st = fed(T0, decode(T0))
    s = st.servers["p@h:gpu0"]
    assert s.throughput_age(T0 + 2) == 2 and s.live_throughput(T0 + 2) == 366.5 and s.live_running(T0 + 2) == 4
    assert s.live_throughput(T0 + DECODE_IDLE_S + 1) == 0.0 and s.live_running(T0 + DECODE_IDLE_S + 1) == 0
    # a log not being read (host down) says nothing about now: the old figure stays, with its age
    assert s.live_throughput(T0 + 42, watching=False) == 366.5


def test_a_backlog_read_at_once_is_dated_by_the_hosts_clock_not_by_when_it_came() -> None:
    st = fed(T0 + 42, decode(T0), clock=T0 + 42)
    s = st.servers["p@h:gpu0"]
    assert s.throughput_age(T0 + 42) == 42 and s.decode_idle(T0 + 42)
    # no host clock: the newest line's own stamp is the floor (a later access line dates the decode line older)
    later = decode(T0) + f'[{stamp(T0 + 30)}] INFO:     127.0.0.1:5 - "GET /health HTTP/1.1" 200 OK\n'.encode()
    assert fed(T0 + 30, later).servers["p@h:gpu0"].throughput_age(T0 + 30) == 30


def test_status_json_gives_every_figure_its_age_and_zero_when_decode_idle() -> None:
    st = fed(T0, decode(T0))
    (s,) = status_doc(st, now=T0 + 7)["servers"]
    assert s["gen_throughput"] == 366.5 and s["gen_throughput_age_s"] == 7 and s["running_age_s"] == 7
    assert s["decode_idle"] is False and "health_age_s" in s and "memory_mib_age_s" in s
    (s,) = status_doc(st, now=T0 + 42)["servers"]
    assert s["gen_throughput"] == 0.0 and s["running"] == 0 and s["decode_idle"] is True
    assert s["gen_throughput_age_s"] == 42


def test_the_cli_prints_an_old_figure_with_its_age() -> None:
    assert figure(366.5, 1.0) == "366.5"
    assert figure(366.5, 42.0) == "366.5 (42 s ago)"
    assert figure(0.0, 42.0, idle=True) == "0.0"
    st = fed(T0, decode(T0))
    st.hosts["h"].conn = "down"  # the log is not read: the figure is old, not zero
    assert "366.5 (42 s ago)" in render(status_doc(st, now=T0 + 42))
    st.hosts["h"].conn = "up"
    assert "366.5" not in render(status_doc(st, now=T0 + 42))


def test_the_tui_shows_zero_once_decode_idle_and_the_age_of_an_old_figure() -> None:
    s = fed(T0, decode(T0)).servers["p@h:gpu0"]
    assert server_view(s, T0 + 1).tok_s == "366 tok/s"
    assert server_view(s, T0 + STALE_S + 2).tok_s == "366 tok/s (7 s ago)"
    v = server_view(s, T0 + 42)
    assert v.tok_s == "0 tok/s" and v.load.startswith("run 0 ")
    assert server_view(s, T0 + 42, watching=False).tok_s == "366 tok/s (42 s ago)"
    state = "".join(t for t, _ in server_page(s, T0 + 42).state)
    assert " 0 tok/s" in state and "run 0 " in state


def test_the_agent_reports_the_hosts_clock_on_the_log_stamps_scale(
    tmp_path: Path,
    fake_procs: list,  # noqa: F811
) -> None:
    """Real agent, real /proc and a log whose last decode line is 42 s old in this machine's local time."""
    port = _free_port()
    p = _fake_server(port, fake_procs)
    run = tmp_path / "run"
    (run / "servers" / "s").mkdir(parents=True)
    log = tmp_path / "s.log"
    local_now = calendar.timegm(time.localtime())
    log.write_bytes(decode(local_now - 42))
    (run / "servers" / "s" / "meta.json").write_text(meta("s@box:gpu0", p.pid, p.pid, port, str(log), host="box"))
    fleet = parse_fleet(
        f'[hosts.box]\ntransport = "local"\npython = "{sys.executable}"\nrun_dir = "{run}"\n'
        'env = { PATH = "/nonexistent:/usr/bin:/bin" }\n',
        "t.toml",
    )
    r = subprocess.run(["/bin/sh", "-c", oneshot_command(fleet.hosts["box"])], capture_output=True, timeout=60)
    shot = parse_oneshot(r.stdout)
    assert shot.complete and shot.clock is not None and abs(shot.clock - local_now) < 30
    now = time.time()
    doc = status_doc(apply(oneshot_events("box", shot, now), "box"), now=now)
    s = next(s for s in doc["servers"] if s["name"] == "s@box:gpu0")
    assert s["gen_throughput_age_s"] == pytest.approx(42, abs=5) and s["decode_idle"] and s["gen_throughput"] == 0.0


def test_status_over_sshd_says_zero_once_the_sim_stops_decoding(sim_ssh, tmp_path: Path) -> None:
    """End to end: a probe makes the sim print Decode lines, then nothing runs; `status --json`
    first gives the figure with a small age, then, once no Decode line came for DECODE_IDLE_S, 0.0 and its age."""
    from tests.fleet.conftest import preset_toml
    from tests.fleet.test_cli import cli

    h = sim_ssh("agehost")
    hosts = tmp_path / "hosts.toml"
    hosts.write_text("[console]\npoll_ms = 500\n" + h.section() + preset_toml("small", h, [1], 30040))
    assert cli(hosts, "launch", "small", "--wait").returncode == 0
    name = "small@agehost:gpu1"
    r = cli(hosts, "probe", name, "--prompt", "tell me a long story", "--max-tokens", "256")
    assert r.returncode == 0, r.stdout + r.stderr

    def doc() -> dict:
        r = cli(hosts, "status", "--json")
        assert r.returncode == 0, r.stderr
        return next(s for s in json.loads(r.stdout)["servers"] if s["name"] == name)

    s = doc()
    assert s["gen_throughput_age_s"] is not None and s["health_age_s"] is not None, s
    deadline = time.monotonic() + 60
    while not s["decode_idle"] and time.monotonic() < deadline:
        time.sleep(1)
        s = doc()
    assert s["decode_idle"] and s["gen_throughput"] == 0.0 and s["running"] == 0, s
    assert s["gen_throughput_age_s"] >= DECODE_IDLE_S  # rounded to 0.1 s: idle from the limit on
    assert cli(hosts, "stop", name).returncode == 0
