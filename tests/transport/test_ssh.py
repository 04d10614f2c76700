"""SshTransport against a real OpenSSH sshd: commands, streams, forwards, channels, ssh_config, orphans."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import httpx
import pytest

from console.transport import CommandResult, TransportError, make_transport
from console.transport.ssh import SshTransport
from tests.fixtures.sshhosts import SshTestHost


async def _connected(host: SshTestHost, **kw) -> SshTransport:
    t = SshTransport(host.name, host.host_config(), **kw)
    await t.connect()
    return t


async def test_run_returns_results_and_records_every_command(ssh_host: SshTestHost) -> None:
    seen: list[CommandResult] = []
    t = await _connected(ssh_host, on_command=seen.append)
    try:
        ok = await t.run("echo hi; echo err >&2")
        bad = await t.run("exit 7")
        fed = await t.run("cat", input="from stdin")
        path = await t.run("echo $PATH; hostname")
    finally:
        await t.close()
    assert (ok.exit_status, ok.stdout, ok.stderr, ok.ok) == (0, "hi\n", "err\n", True)
    assert (bad.exit_status, bad.ok) == (7, False)
    assert fed.stdout == "from stdin"
    assert path.stdout.splitlines()[0] == f"{ssh_host.hostdir}/bin:/usr/local/bin:/usr/bin:/bin"
    if ssh_host.netns:
        assert path.stdout.splitlines()[1] == ssh_host.name
    assert [r.command for r in seen] == ["echo hi; echo err >&2", "exit 7", "cat", "echo $PATH; hostname"]
    assert all(r.host == "shared" for r in seen)
    assert not t.connected


async def test_make_transport_picks_ssh(ssh_host: SshTestHost) -> None:
    assert isinstance(make_transport("x", ssh_host.host_config()), SshTransport)


async def test_timeout_raises_naming_host_and_command(ssh_host: SshTestHost) -> None:
    seen: list[CommandResult] = []
    t = await _connected(ssh_host, on_command=seen.append)
    try:
        with pytest.raises(TransportError) as ei:
            await t.run("sleep 5", timeout=0.3)
        assert ei.value.host == "shared" and ei.value.command == "sleep 5"
        assert "sleep 5" in str(ei.value) and "timed out" in str(ei.value)
        assert seen[-1].exit_status is None and t.open_channels == 0
        assert (await t.run("echo still")).stdout == "still\n"
    finally:
        await t.close()


async def test_not_connected_raises() -> None:
    from console.config import Host

    t = SshTransport("nowhere", Host(address="127.0.0.1"))
    with pytest.raises(TransportError, match="not connected"):
        await t.run("true")


async def test_stream_chunks_and_close_ends_remote_tail(ssh_host: SshTestHost) -> None:
    log = ssh_host.home / "stream.log"
    log.write_text("")
    t = await _connected(ssh_host)
    try:
        s = await t.stream(f"exec tail -n0 -F {log}")
        assert t.open_channels == 1
        await asyncio.sleep(0.2)
        with log.open("a") as f:
            f.write("line one\n")
        chunks = s.chunks()
        got = await asyncio.wait_for(anext(chunks), 5)
        assert got == b"line one\n"
        assert "tail -n0 -F" in ssh_host.ps()
        await s.close()
        assert t.open_channels == 0
        deadline = time.monotonic() + 3
        while "tail -n0 -F" in ssh_host.ps() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert "tail -n0 -F" not in ssh_host.ps()
    finally:
        await t.close()


async def test_stream_ends_with_the_process(ssh_host: SshTestHost) -> None:
    t = await _connected(ssh_host)
    try:
        s = await t.stream("printf 'a\\nb\\n'; echo oops >&2; exit 3")
        data = b"".join([c async for c in s.chunks()])
        assert data == b"a\nb\n"
        assert s.exit_status == 3
        assert t.open_channels == 0
    finally:
        await t.close()


async def test_channel_count_tracks_concurrent_runs(ssh_host: SshTestHost) -> None:
    t = await _connected(ssh_host)
    try:
        runs = [asyncio.create_task(t.run("sleep 1")) for _ in range(8)]
        await asyncio.sleep(0.15)
        assert t.open_channels == 8
        assert all(r.ok for r in await asyncio.gather(*runs))
        assert t.open_channels == 0
    finally:
        await t.close()


async def test_forward_local_reaches_a_server_on_the_host(ssh_host: SshTestHost) -> None:
    (ssh_host.home / "www").mkdir(exist_ok=True)
    (ssh_host.home / "www" / "health").write_text("ok from host")
    port = 18000 + ssh_host.index
    srv = ssh_host.spawn(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "-d", str(ssh_host.home / "www"), str(port)]
    )
    t = await _connected(ssh_host)
    try:
        ssh_host.wait_port(port)
        local = await t.forward_local("127.0.0.1", port)
        assert await t.forward_local("127.0.0.1", port) == local  # cached per (host, port)
        async with httpx.AsyncClient(trust_env=False) as c:
            r = await c.get(f"http://127.0.0.1:{local}/health")
        assert r.text == "ok from host"
    finally:
        await t.close()
        ssh_host.kill_spawned(srv)


async def test_keepalive_settings_default_and_reach_asyncssh(ssh_host: SshTestHost) -> None:
    t = SshTransport("k", ssh_host.host_config())
    assert (t.connect_timeout, t.keepalive_interval, t.keepalive_count_max) == (10, 15, 3)
    kw = t.connect_kwargs()
    assert (kw["connect_timeout"], kw["keepalive_interval"], kw["keepalive_count_max"]) == (10, 15, 3)
    await t.connect()
    try:
        opts = t._conn._options  # type: ignore[union-attr]
        assert (opts.keepalive_interval, opts.keepalive_count_max) == (15, 3)
    finally:
        await t.close()


async def test_ssh_config_alias_is_honoured(
    ssh_host: SshTestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "alias_config"
    cfg.write_text(
        f"Host gpubox\n  HostName {ssh_host.address}\n  Port {ssh_host.port}\n  User {ssh_host.user}\n"
        f"  IdentityFile {ssh_host.client_key}\n  UserKnownHostsFile {ssh_host.known_hosts}\n"
    )
    monkeypatch.setenv("DFLASH_SSH_CONFIG", str(cfg))
    from console.config import Host

    host = Host(address="gpubox", known_hosts=str(ssh_host.known_hosts))
    t = SshTransport("aliased", host)
    await t.connect()
    try:
        assert (await t.run("id -un")).stdout.strip() == ssh_host.user
    finally:
        await t.close()


async def test_aes_gcm_is_negotiated_unless_ssh_config_names_ciphers(
    ssh_host: SshTestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AES-GCM costs a fifth of chacha20-poly1305's CPU a packet in asyncssh; a `Ciphers` line still decides."""
    t = await _connected(ssh_host)
    try:
        assert t._conn.get_extra_info("recv_cipher") == "aes128-gcm@openssh.com"  # type: ignore[union-attr]
    finally:
        await t.close()
    cfg = tmp_path / "ciphers_config"
    cfg.write_text(f"Host {ssh_host.address}\n  Ciphers chacha20-poly1305@openssh.com\n")
    monkeypatch.setenv("DFLASH_SSH_CONFIG", str(cfg))
    t = await _connected(ssh_host)
    try:
        assert t._conn.get_extra_info("recv_cipher") == "chacha20-poly1305@openssh.com"  # type: ignore[union-attr]
        assert (await t.run("echo ok")).stdout == "ok\n"
    finally:
        await t.close()


async def test_detached_children_outlive_the_session_and_are_reaped(ssh_host: SshTestHost) -> None:
    t = await _connected(ssh_host)
    r = await t.run("setsid nohup sleep 60 > /dev/null 2>&1 < /dev/null & echo $!")
    pid = int(r.stdout)
    await t.close()
    await asyncio.sleep(0.2)
    t = await _connected(ssh_host)
    try:
        st = await t.run(f"ps -o stat=,args= -p {pid}")
        assert "sleep 60" in st.stdout and not st.stdout.startswith("Z")
        ppid = int((await t.run(f"ps -o ppid= -p {pid}")).stdout)
        assert ppid == (1 if ssh_host.netns else ssh_host.init_pid)  # adopted by the host's init
        await t.run(f"kill {pid}")
        deadline = time.monotonic() + 2
        while (await t.run(f"ps -o stat= -p {pid}")).stdout.strip() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert (await t.run(f"ps -o stat= -p {pid}")).stdout.strip() == ""  # gone, not a zombie
    finally:
        await t.close()


def test_ps_on_a_test_host_shows_only_its_processes(ssh_host: SshTestHost) -> None:
    if not ssh_host.netns:
        pytest.skip("PID namespaces need root")
    out = ssh_host.ps()
    assert "pytest" not in out and "hostinit.py" in out.splitlines()[1]


async def test_proxy_jump_goes_through_the_bastion(
    ssh_host_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bastion, target = ssh_host_factory("bastion"), ssh_host_factory("inner")
    cfg = tmp_path / "jump_config"
    cfg.write_text(
        f"Host {bastion.address}\n  Port {bastion.port}\n  IdentityFile {bastion.client_key}\n"
        f"  UserKnownHostsFile {bastion.known_hosts}\n"
    )
    monkeypatch.setenv("DFLASH_SSH_CONFIG", str(cfg))
    t = SshTransport("inner", target.host_config(proxy_jump=f"{bastion.user}@{bastion.address}"))
    await t.connect()
    try:
        assert (await t.run("echo $FAKEHOST")).stdout == "inner\n"
        assert bastion.session_pids()  # the link really runs through the bastion's sshd
    finally:
        await t.close()


async def test_agent_is_used_when_ssh_auth_sock_is_set(
    ssh_host: SshTestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if sock.exists():
                break
            await asyncio.sleep(0.01)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        subprocess.run(["ssh-add", "-q", str(ssh_host.client_key)], check=True, capture_output=True)
        monkeypatch.setenv("HOME", str(tmp_path))  # no default ~/.ssh keys to fall back on
        t = SshTransport("agent", ssh_host.host_config(identity=None))
        await t.connect()
        try:
            assert (await t.run("echo via agent")).ok
        finally:
            await t.close()
    finally:
        agent.kill()
        agent.wait()


async def test_channel_count_survives_a_reconnect(ssh_host: SshTestHost) -> None:
    t = await _connected(ssh_host)
    try:
        s = await t.stream("exec sleep 30")
        assert t.open_channels == 1
        await t.connect()  # a new link: the old stream's channel is gone with the old connection
        assert t.open_channels == 0
        await s.close()
        assert t.open_channels == 0
    finally:
        await t.close()


async def test_hosts_toml_section_loads_and_connects(ssh_host: SshTestHost, tmp_path: Path) -> None:
    from console.config import load_fleet

    toml = tmp_path / "hosts.toml"
    toml.write_text(ssh_host.hosts_toml_section("gpu1") + 'description = "from the fixture"\n')
    fleet = load_fleet(toml)
    t = make_transport("gpu1", fleet.hosts["gpu1"])
    await t.connect()
    try:
        assert (await t.run("echo $FAKEHOST")).stdout == f"{ssh_host.name}\n"
    finally:
        await t.close()
