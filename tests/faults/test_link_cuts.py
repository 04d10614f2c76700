"""SSH link cut mid-tail (session killed, sshd restarted, link dropped): host shown down, back within 10 s, no log line lost or doubled."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from console.fleet import actions
from console.fleet.events import Event, HostDown, HostUp, Notice
from console.fleet.state import FleetState
from tests.faults import results
from tests.faults.simfleet import SimHost, build_sim_fleet, controller, preset_toml, trials, wait_for

KINDS = ("kill-session", "sshd-restart", "link-down")
RECONNECT_LIMIT_S = 10.0
SEQ_RE = re.compile(r"^seq (\d{6}) ")
SEQ_WRITER = """import os, sys, time
n = 0
while True:
    os.write(1, b"seq %06d pad=%s\\n" % (n, b"x" * (n % 97)))
    n += 1
    time.sleep(0.01)
"""


def seq_python(h: SimHost) -> Path:
    """A stand-in `python` for the preset: `-m sglang.launch_server ...` becomes a numbered-line writer
    (~100 lines/s), so every byte the console shows can be checked against the file."""
    import sys

    script = h.dir / "seqwriter.py"
    script.write_text(SEQ_WRITER)
    wrapper = h.dir / "venv" / "bin" / "seqpython"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S {script} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


@dataclass
class Watch:
    """HostDown / HostUp times per host, straight from the controller's event stream."""

    downs: dict[str, list[float]] = field(default_factory=dict)
    ups: dict[str, list[float]] = field(default_factory=dict)

    def __call__(self, events: list[Event], notices: list[Notice]) -> None:
        for ev in events:
            if isinstance(ev, HostDown):
                self.downs.setdefault(ev.host, []).append(time.monotonic())
            elif isinstance(ev, HostUp):
                self.ups.setdefault(ev.host, []).append(time.monotonic())


def seqs(state: FleetState, server: str) -> list[int]:
    s = state.servers[server]
    return [int(m.group(1)) for ln in s.log.lines if (m := SEQ_RE.match(ln))]


def file_seqs(h: SimHost, path: str) -> list[int]:
    return [int(m.group(1)) for ln in Path(path).read_text(errors="replace").splitlines() if (m := SEQ_RE.match(ln))]


async def _cut(h: SimHost, kind: str) -> None:
    if kind == "kill-session":
        assert h.ssh.kill_sessions() >= 1
    elif kind == "sshd-restart":
        await asyncio.to_thread(h.ssh.stop_sshd)
    else:
        h.ssh.link_down()


async def _restore(h: SimHost, kind: str) -> None:
    if kind == "sshd-restart":
        await asyncio.to_thread(h.ssh.start_sshd)
    elif kind == "link-down":
        h.ssh.link_up()


async def _host_trials(ctl, watch: Watch, h: SimHost, server: str, kind: str, n: int) -> list[str]:
    """n cuts of one kind on one host; returns failure descriptions (empty: all passed)."""
    fails: list[str] = []
    for i in range(n):
        t0 = time.monotonic()
        ok, detail, figs = True, "", {}
        try:
            ok, detail = await _one_cut(ctl, watch, h, server, kind, figs)
        except Exception as e:  # a broken trial is a failed trial, recorded like the others
            ok, detail = False, f"{type(e).__name__}: {e}"
        results.record("faults", f"link cut: {kind}", i, ok, time.monotonic() - t0, detail, **figs)
        if not ok:
            fails.append(f"{kind} #{i}: {detail}")
    return fails


async def _one_cut(ctl, watch: Watch, h: SimHost, server: str, kind: str, figs: dict[str, float]) -> tuple[bool, str]:
    host = ctl.state.hosts[h.name]
    ok, detail = True, ""
    before = len(seqs(ctl.state, server))
    await wait_for(lambda b=before: len(seqs(ctl.state, server)) > b + 5, 10, f"{h.name}: lines flowing")
    downs0, ups0 = len(watch.downs.get(h.name, [])), len(watch.ups.get(h.name, []))
    cut_at = time.monotonic()
    await _cut(h, kind)
    try:
        await wait_for(lambda d=downs0: len(watch.downs.get(h.name, [])) > d, 15, f"{h.name} shown down after {kind}")
        down_at = watch.downs[h.name][downs0]
        figs["detect_s"] = down_at - cut_at
        shown = host.conn == "down" or len(watch.ups.get(h.name, [])) > ups0
        since_ok = host.since is not None and host.since <= time.time()
        if not (shown and since_ok):
            ok, detail = False, f"host state {host.conn!r} since {host.since!r} after HostDown"
        if kind != "kill-session":
            await asyncio.sleep(0.5)  # stay down a moment: reconnect attempts fail meanwhile
    except AssertionError as e:
        ok, detail = False, f"{e} (sessions now {h.ssh.session_pids()})"
    finally:
        restore_at = time.monotonic()
        await _restore(h, kind)
    try:
        await wait_for(
            lambda: host.conn == "up" and watch.ups.get(h.name, [0])[-1] > restore_at,
            RECONNECT_LIMIT_S,
            f"{h.name} back after {kind}",
        )
        figs["reconnect_s"] = watch.ups[h.name][-1] - restore_at
    except AssertionError as e:
        ok, detail = False, str(e)
    # the tail resumes: lines written during the cut arrive, none twice
    try:
        mark = len(file_seqs(h, ctl.state.servers[server].meta.log_path or ""))
        await wait_for(lambda m=mark: len(seqs(ctl.state, server)) >= m, 10, f"{h.name}: tail caught up")
        got = seqs(ctl.state, server)
        if got != list(range(len(got))):
            dup = len(got) - len(set(got))
            ok, detail = False, f"log lines out of sequence: {dup} duplicated, first bad near {_first_bad(got)}"
    except AssertionError as e:
        srv = ctl.state.servers[server]
        ok, detail = (
            False,
            (
                f"{e}: {len(seqs(ctl.state, server))} lines shown of {mark} written, offset "
                f"{srv.log_offset} of {Path(srv.meta.log_path or '').stat().st_size}, "
                f"tail at {ctl.links[h.name].tail_offset(server)}, log error {srv.log_error!r}"
            ),
        )
    return ok, detail


def _first_bad(xs: list[int]) -> int:
    return next((i for i, x in enumerate(xs) if x != i), -1)


def _plan(total: int) -> list[tuple[str, int]]:
    """(kind, trials) per host: a third each, the slow silent-drop third over two hosts side by side."""
    base, extra = divmod(total, len(KINDS))
    n = {k: base + (1 if i < extra else 0) for i, k in enumerate(KINDS)}
    slow = n["link-down"]
    plan = [
        ("kill-session", n["kill-session"]),
        ("sshd-restart", n["sshd-restart"]),
        ("link-down", slow - slow // 2),
        ("link-down", slow // 2),
    ]
    return [(k, c) for k, c in plan if c > 0]


async def test_link_cuts_mid_tail_lose_no_line(ssh_host_factory, sim_root: Path) -> None:
    """20 cuts (split over the three kinds, one host per kind, run side by side): each host goes down,
    comes back within 10 s of the link returning, and its log holds every numbered line exactly once."""
    plan = _plan(trials(20))
    names = [f"cut{i}" for i in range(len(plan))]
    sf = build_sim_fleet(ssh_host_factory, sim_root, names)
    presets = ""
    for i, n in enumerate(names):
        h = sf.hosts[n]
        presets += preset_toml(f"seq{i}", h, port=30100 + i, extra=f'python = "{seq_python(h)}"\n')
    fleet = sf.fleet(presets)
    watch = Watch()
    async with controller(fleet) as ctl:
        ctl.subscribe(watch)
        assert await ctl.wait_hosts(15)
        servers = {}
        for i, n in enumerate(names):
            out = await actions.launch(ctl, f"seq{i}")
            assert out.ok, out.message
            servers[n] = out.servers[0]
        fails = await asyncio.gather(
            *(
                _host_trials(ctl, watch, sf.hosts[n], servers[n], kind, count)
                for n, (kind, count) in zip(names, plan, strict=True)
            )
        )
        # final check: the whole file, byte for byte as lines, once each
        for n in names:
            s = ctl.state.servers[servers[n]]
            assert s.log.gaps == 0, f"{n}: the tail skipped bytes ({s.log.gaps} gaps)"
    flat = [f for fs in fails for f in fs]
    assert not flat, "\n".join(flat)


async def test_down_host_header_says_since_when() -> None:
    """Regression (was a strict xfail): the header said `down: ERROR` but never since when."""
    from console.fleet.events import HostDown, HostUp
    from console.ui.app import DflashApp
    from console.ui.widgets.host_band import HostHeader
    from tests.ui.fakes import NOW, FakeApi, demo_fleet

    st = FleetState(["ct129", "blackwell"])
    st.apply(HostUp("ct129", NOW - 300))
    st.apply(HostDown("ct129", NOW - 42, "connection lost", 0.5))
    app = DflashApp(FakeApi(st, fleet=demo_fleet()), clock=lambda: NOW)
    async with app.run_test(size=(140, 30)) as pilot:
        await pilot.pause(0.1)
        text = next(str(h.render()) for h in app.screen.query(HostHeader) if h.host == "ct129")
        assert "down" in text
        assert "42 s" in text or "since" in text, text
