"""Host keys with no silent fallback (issue 19.3), over real sshd hosts: a known_hosts file named in hosts.toml
that is missing is an error (host, file); a ProxyJump bastion's key is checked like any host's even when ssh
config says `UserKnownHostsFile none`; `dflash-console trust` adds a bastion, then its target."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from console.cli import main
from console.transport import HostKeyError, TransportError
from console.transport.jump import Hop, parse_jump
from console.transport.ssh import SshTransport
from console.transport.trust import console_known_hosts
from tests.fixtures.sshhosts import SshTestHost
from tests.patience import settles


def _key(h: SshTestHost) -> str:
    return " ".join(Path(f"{h.host_key}.pub").read_text().split()[:2])


def _echo(t: SshTransport) -> str:
    async def go() -> str:
        await t.connect()
        try:
            return (await t.run("echo $FAKEHOST")).stdout
        finally:
            await t.close()

    return asyncio.run(go())


def test_missing_named_known_hosts_is_an_error_not_a_fallback(
    ssh_host: SshTestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The host's key sits in ~/.ssh/known_hosts and in the console's trust file; the file hosts.toml names
    does not exist: the connection is refused, naming host and file, instead of trusting those others."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "known_hosts").write_text(f"{ssh_host.pattern} {_key(ssh_host)}\n")
    monkeypatch.setenv("HOME", str(home))
    console_known_hosts().parent.mkdir(parents=True, exist_ok=True)
    console_known_hosts().write_text(f"{ssh_host.pattern} {_key(ssh_host)}\n")
    missing = tmp_path / "typo_known_hosts"
    with pytest.raises(TransportError) as ei:
        _echo(SshTransport("gpu", ssh_host.host_config(known_hosts=str(missing))))
    e = ei.value
    assert not isinstance(e, HostKeyError) and e.host == "gpu" and str(missing) in str(e)
    assert "does not exist" in str(e) and "hosts.toml" in str(e)
    toml = tmp_path / "hosts.toml"
    toml.write_text(ssh_host.hosts_toml_section("gpu").replace(str(ssh_host.known_hosts), str(missing)))
    assert main(["--hosts", str(toml), "trust", "gpu", "--yes"]) == 3
    assert str(missing) in capsys.readouterr().err
    assert _echo(SshTransport("gpu", ssh_host.host_config())) == f"{ssh_host.name}\n"  # the named file works


def test_missing_file_in_a_list_is_an_error_too(ssh_host: SshTestHost, tmp_path: Path) -> None:
    missing = str(tmp_path / "gone")
    with pytest.raises(TransportError, match=r"gone \(named in hosts\.toml\) does not exist"):
        _echo(SshTransport("gpu", ssh_host.host_config(known_hosts=[str(ssh_host.known_hosts), missing])))


def _jump_config(tmp_path: Path, bastion: SshTestHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """ssh config for the bastion: its port and key, and `UserKnownHostsFile none` (which asyncssh reads
    as: check nothing)."""
    cfg = tmp_path / "jump_config"
    cfg.write_text(
        f"Host {bastion.address}\n  Port {bastion.port}\n  User {bastion.user}\n"
        f"  IdentityFile {bastion.client_key}\n  UserKnownHostsFile none\n"
    )
    monkeypatch.setenv("DFLASH_SSH_CONFIG", str(cfg))


def test_unknown_bastion_is_refused_even_with_known_hosts_none(
    ssh_host_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bastion, target = ssh_host_factory("bastion"), ssh_host_factory("inner")
    _jump_config(tmp_path, bastion, monkeypatch)
    t = SshTransport("inner", target.host_config(proxy_jump=bastion.address))
    with pytest.raises(HostKeyError) as ei:
        _echo(t)
    e = ei.value
    assert "bastion" in str(e) and bastion.address in str(e) and "dflash-console trust inner" in str(e)
    assert e.key_line == f"{bastion.pattern} {_key(bastion)}" and not e.changed
    assert not target.session_pids()  # nothing reached the target through an unchecked bastion


def test_bastion_named_only_in_ssh_config_is_checked(
    ssh_host_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ProxyJump from ssh config (not hosts.toml) goes through the same check."""
    bastion, target = ssh_host_factory("bastion"), ssh_host_factory("inner")
    _jump_config(tmp_path, bastion, monkeypatch)
    cfg = Path(os.environ["DFLASH_SSH_CONFIG"])
    cfg.write_text(cfg.read_text() + f"Host {target.address}\n  ProxyJump {bastion.address}\n")
    with pytest.raises(HostKeyError, match="bastion"):
        _echo(SshTransport("inner", target.host_config()))


def test_changed_bastion_key_is_refused(ssh_host_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bastion, target = ssh_host_factory("bastion"), ssh_host_factory("inner")
    _jump_config(tmp_path, bastion, monkeypatch)
    kh = tmp_path / "kh"
    kh.write_text(f"{bastion.pattern} {_key(bastion)}\n{target.pattern} {_key(target)}\n")
    t = SshTransport("inner", target.host_config(proxy_jump=bastion.address, known_hosts=str(kh)))
    assert _echo(t) == "inner\n"
    # the chain closes with the link (the bastion's sshd ends its session a moment after the client closes)
    assert settles(lambda: bastion.session_pids() == []), bastion.session_pids()
    bastion.rotate_host_key()
    with pytest.raises(HostKeyError) as ei:
        _echo(t)
    assert ei.value.changed and "HOST KEY CHANGED" in str(ei.value) and "bastion" in str(ei.value)


def test_trust_adds_the_bastion_then_the_target(
    ssh_host_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    bastion, target = ssh_host_factory("bastion"), ssh_host_factory("inner")
    _jump_config(tmp_path, bastion, monkeypatch)
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    toml = tmp_path / "hosts.toml"
    toml.write_text(
        target.hosts_toml_section("inner").replace(str(target.known_hosts), str(empty))
        + f'proxy_jump = "{bastion.address}"\n'
    )
    assert main(["--hosts", str(toml), "trust", "inner", "--yes"]) == 0
    out = capsys.readouterr().out
    assert out.index("bastion") < out.index("host inner")
    assert console_known_hosts().read_text().splitlines() == [
        f"{bastion.pattern} {_key(bastion)}",
        f"{target.pattern} {_key(target)}",
    ]
    t = SshTransport("inner", target.host_config(proxy_jump=bastion.address, known_hosts=str(empty)))
    assert _echo(t) == "inner\n"
    assert main(["--hosts", str(toml), "trust", "inner", "--yes"]) == 0
    assert "already trusted" in capsys.readouterr().out


def test_trust_declining_the_bastion_adds_nothing(
    ssh_host_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    import io

    bastion, target = ssh_host_factory("bastion"), ssh_host_factory("inner")
    _jump_config(tmp_path, bastion, monkeypatch)
    toml = tmp_path / "hosts.toml"
    toml.write_text(target.hosts_toml_section("inner") + f'proxy_jump = "{bastion.address}"\n')
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert main(["--hosts", str(toml), "trust", "inner"]) == 1
    assert "bastion" in capsys.readouterr().out and not console_known_hosts().exists()


def test_parse_jump() -> None:
    assert parse_jump("none") == [] and parse_jump(None) == []
    assert parse_jump("me@b1:2222,b2") == [Hop("b1", 2222, "me"), Hop("b2")]
    assert parse_jump("ssh://u@[fe80::1]:22") == [Hop("fe80::1", 22, "u")]
    assert parse_jump("fe80::1") == [Hop("fe80::1")]
    with pytest.raises(ValueError, match="port"):
        parse_jump("b:http")
