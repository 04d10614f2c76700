"""Link faults against real sshd: dropped sessions, sshd restarts, dead links, black holes, refused ports."""

from __future__ import annotations

import asyncio
import time

import pytest

from console.transport import TransportError
from console.transport.ssh import SshTransport
from tests.patience import patient


async def _connected(host, **kw) -> SshTransport:
    t = SshTransport(host.name, host.host_config(), **kw)
    await t.connect()
    return t


async def test_killed_session_drops_the_link_and_reconnect_works(ssh_host_factory) -> None:
    host = ssh_host_factory("flaky")
    t = await _connected(host)
    try:
        pending = asyncio.create_task(t.run("sleep 10"))
        stream = await t.stream("exec tail -n0 -F /dev/null")
        await asyncio.sleep(0.2)
        assert host.kill_sessions() >= 1
        await asyncio.wait_for(t.wait_closed(), 5)
        assert not t.connected
        with pytest.raises(TransportError) as ei:
            await asyncio.wait_for(pending, 5)
        assert ei.value.command == "sleep 10" and ei.value.host == "flaky"
        assert [c async for c in stream.chunks()] == []
        await t.connect()
        assert (await t.run("echo back")).stdout == "back\n"
    finally:
        await t.close()


async def test_sshd_restart_keeps_the_key_and_other_processes(ssh_host_factory) -> None:
    host = ssh_host_factory("restart")
    t = await _connected(host)
    pid = int((await t.run("setsid nohup sleep 60 > /dev/null 2>&1 < /dev/null & echo $!")).stdout)
    host.stop_sshd()
    await asyncio.wait_for(t.wait_closed(), 5)
    with pytest.raises(TransportError, match="cannot connect"):
        await t.connect()
    host.start_sshd()
    await t.connect()  # same host key: no HostKeyError
    try:
        assert "sleep 60" in (await t.run(f"ps -o args= -p {pid}")).stdout  # survived the sshd restart
    finally:
        await t.close()


async def test_dead_link_is_noticed_by_keepalive(ssh_host_factory) -> None:
    host = ssh_host_factory("cable")
    t = await _connected(host, keepalive_interval=0.3, keepalive_count_max=2)
    try:
        host.link_down()
        start = time.monotonic()
        await asyncio.wait_for(t.wait_closed(), patient(5))
        assert time.monotonic() - start < patient(4)  # without keepalives: TCP's own timeout, many minutes
        assert not t.connected
        host.link_up()
        await t.connect()
        assert (await t.run("echo up")).ok
    finally:
        host.link_up()
        await t.close()


async def test_blackhole_connect_times_out(ssh_host_factory) -> None:
    hole = ssh_host_factory("hole", kind="blackhole")
    t = SshTransport("hole", hole.host_config(), connect_timeout=0.5)
    start = time.monotonic()
    with pytest.raises(TransportError, match="timed out") as ei:
        await t.connect()
    assert time.monotonic() - start < patient(4) and ei.value.host == "hole"  # the OS's own: about 2 min


async def test_refusing_port_fails_fast(ssh_host_factory) -> None:
    gone = ssh_host_factory("gone", kind="refusing")
    start = time.monotonic()
    with pytest.raises(TransportError, match="cannot connect"):
        await SshTransport("gone", gone.host_config()).connect()
    assert time.monotonic() - start < patient(3)


async def test_wrong_user_is_an_authentication_error(ssh_host) -> None:
    t = SshTransport("auth", ssh_host.host_config(user="dfc-no-such-user"))
    with pytest.raises(TransportError, match="authentication failed"):
        await t.connect()


async def test_stopping_only_the_listener_keeps_open_sessions(ssh_host_factory) -> None:
    host = ssh_host_factory("listener")
    t = await _connected(host)
    try:
        host.stop_sshd(sessions=False)
        assert (await t.run("echo alive")).stdout == "alive\n"  # like restarting a real sshd
        with pytest.raises(TransportError):
            await SshTransport("other", host.host_config(), connect_timeout=2).connect()
        host.start_sshd()
        other = SshTransport("other", host.host_config())
        await other.connect()
        await other.close()
    finally:
        await t.close()
