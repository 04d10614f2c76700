"""LocalTransport keeps the SSH transport's semantics with subprocesses on this machine."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import httpx
import pytest

from console.config import Host
from console.transport import CommandResult, TransportError, make_transport
from console.transport.local import LocalTransport
from tests.patience import patient


async def _local(**kw) -> LocalTransport:
    t = LocalTransport("box", Host(transport="local"), **kw)
    await t.connect()
    return t


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


async def test_make_transport_picks_local() -> None:
    assert isinstance(make_transport("box", Host(transport="local")), LocalTransport)


async def test_run_results_and_journal() -> None:
    seen: list[CommandResult] = []
    t = await _local(on_command=seen.append)
    ok = await t.run("echo hi; echo err >&2")
    bad = await t.run("exit 4")
    fed = await t.run("cat", input="piped")
    killed = await t.run("kill -9 $$")
    assert (ok.exit_status, ok.stdout, ok.stderr) == (0, "hi\n", "err\n")
    assert bad.exit_status == 4 and not bad.ok
    assert fed.stdout == "piped"
    assert killed.exit_status is None  # a signal, as SSH reports exit-signal
    assert [r.command for r in seen] == ["echo hi; echo err >&2", "exit 4", "cat", "kill -9 $$"]
    await t.close()
    assert not t.connected
    with pytest.raises(TransportError, match="not connected"):
        await t.run("true")


async def test_timeout_raises_and_kills_the_command(tmp_path: Path) -> None:
    seen: list[CommandResult] = []
    t = await _local(on_command=seen.append)
    pidfile = tmp_path / "pid"
    with pytest.raises(TransportError) as ei:
        await t.run(f"sleep 30 & echo $! > {pidfile}; wait", timeout=0.3)
    assert ei.value.host == "box" and "timed out" in str(ei.value) and "sleep 30" in str(ei.value)
    assert seen[-1].exit_status is None
    pid, end = int(pidfile.read_text()), time.monotonic() + patient(2)
    while _alive(pid) and time.monotonic() < end:  # signalled: it dies when next scheduled
        await asyncio.sleep(0.02)
    assert not _alive(pid)


async def test_timeout_kills_a_member_that_ignores_sigterm(tmp_path: Path) -> None:
    """A guard, not a regression test: asyncio's `proc.wait()` also waits for the pipes, which the member holds, so
    the old code reached its SIGKILL too; the group is now SIGKILLed after the leader whatever wait() does."""
    t = await _local()
    pidfile = tmp_path / "pid"
    with pytest.raises(TransportError):
        await t.run(f"sh -c 'trap \"\" TERM; echo $$ > {pidfile}; while :; do sleep 0.1; done' & wait", timeout=0.5)
    pid, end = int(pidfile.read_text()), time.monotonic() + patient(2)
    while _alive(pid) and time.monotonic() < end:
        await asyncio.sleep(0.02)
    assert not _alive(pid)


async def test_stream_close_ends_the_process_group(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("")
    t = await _local()
    s = await t.stream(f"tail -n0 -F {log} & echo $! > {tmp_path}/pid; wait")
    assert t.open_channels == 1
    await asyncio.sleep(0.2)
    with log.open("a") as f:
        f.write("hello\n")
    assert await asyncio.wait_for(anext(s.chunks()), 5) == b"hello\n"
    pid = int((tmp_path / "pid").read_text())
    await s.close()
    deadline = time.monotonic() + 2
    while _alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not _alive(pid) and t.open_channels == 0


async def test_stream_ends_with_the_process() -> None:
    t = await _local()
    s = await t.stream("printf 'a\\nb\\n'; echo noise >&2; exit 3")
    assert b"".join([c async for c in s.chunks()]) == b"a\nb\n"
    await asyncio.sleep(0.05)
    assert s.exit_status == 3


async def test_detached_children_survive_a_closed_stream(tmp_path: Path) -> None:
    t = await _local()
    s = await t.stream(f"setsid nohup sleep 30 > /dev/null 2>&1 < /dev/null & echo $! > {tmp_path}/pid; sleep 30")
    await asyncio.sleep(0.2)
    await s.close()
    pid = int((tmp_path / "pid").read_text())
    try:
        assert _alive(pid)  # launches outlive the console, as over SSH
    finally:
        os.kill(pid, 9)


async def test_forward_loopback_is_the_port_itself() -> None:
    t = await _local()
    assert await t.forward_local("127.0.0.1", 30000) == 30000
    assert await t.forward_local("localhost", 30001) == 30001


async def test_forward_elsewhere_relays(ssh_test_net) -> None:
    if ssh_test_net.mode != "netns":
        pytest.skip("needs a non-loopback local address (the test bridge)")
    addr = ssh_test_net.gateway

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.readuntil(b"\r\n\r\n")
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nrelay")
        await w.drain()
        w.close()

    srv = await asyncio.start_server(handle, addr, 0)
    port = srv.sockets[0].getsockname()[1]
    t = await _local()
    try:
        local = await t.forward_local(addr, port)
        assert local != port and await t.forward_local(addr, port) == local
        async with httpx.AsyncClient(trust_env=False) as c:
            assert (await c.get(f"http://127.0.0.1:{local}/")).text == "relay"
    finally:
        await t.close()
        srv.close()


async def test_wait_closed_returns_on_close() -> None:
    t = await _local()
    waiter = asyncio.create_task(t.wait_closed())
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await t.close()
    await asyncio.wait_for(waiter, 1)


_LEFT_OPEN = """
import asyncio, gc
from console.config import Host
from console.transport.local import LocalTransport

async def main():
    t = LocalTransport("box", Host(transport="local"))
    await t.connect()
    idle = await t.stream("sleep 30")                      # its reader task was cancelled: never closed
    busy = await t.stream("head -c 5000000 /dev/zero; sleep 30")   # output left unread
    async for _ in busy.chunks():
        break
    try:
        await t.run("sleep 30", timeout=0.2)
    except Exception:
        pass
    await t.close()

asyncio.run(main())
gc.collect()
print("done")
"""


def test_no_subprocess_transport_outlives_the_loop(tmp_path: Path) -> None:
    """Python >= 3.12 prints `Exception ignored in BaseSubprocessTransport.__del__ ... Event loop is closed`
    for a transport left to the garbage collector; every Python warns `unclosed transport` under -W."""
    import subprocess
    import sys

    script = tmp_path / "left_open.py"
    script.write_text(_LEFT_OPEN)
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert r.returncode == 0 and r.stdout.strip() == "done", r.stderr
    assert "Exception ignored" not in r.stderr and "unclosed transport" not in r.stderr, r.stderr
