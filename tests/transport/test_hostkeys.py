"""Host keys: unknown and changed keys are refused with the fingerprint; `trust` records them; no check is off."""

from __future__ import annotations

import asyncio
import io
import re
import subprocess
from pathlib import Path

import pytest

from console.cli import main
from console.transport import HostKeyError, TransportError
from console.transport.ssh import SshTransport
from console.transport.trust import console_known_hosts, host_pattern
from tests.fixtures.sshhosts import SshTestHost

REPO = Path(__file__).resolve().parents[2]


def _fingerprint(host: SshTestHost) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", f"{host.host_key}.pub"], capture_output=True, text=True, check=True
    ).stdout
    return out.split()[1]


def _untrusted(host: SshTestHost, tmp_path: Path) -> Path:
    """A hosts.toml for `host` whose own known_hosts file is empty: only `trust` can make it connect."""
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    toml = tmp_path / "hosts.toml"
    toml.write_text(host.hosts_toml_section("gpu").replace(str(host.known_hosts), str(empty)))
    return toml


def _connect(host: SshTestHost, **overrides: object) -> str:
    async def go() -> str:
        t = SshTransport("gpu", host.host_config(**overrides))
        await t.connect()
        try:
            return (await t.run("echo in")).stdout
        finally:
            await t.close()

    return asyncio.run(go())


def test_unknown_key_is_refused_with_its_fingerprint(ssh_host: SshTestHost, tmp_path: Path) -> None:
    _untrusted(ssh_host, tmp_path)
    with pytest.raises(HostKeyError) as ei:
        _connect(ssh_host, known_hosts=str(tmp_path / "empty_known_hosts"))
    e = ei.value
    assert e.fingerprint == _fingerprint(ssh_host) and e.fingerprint.startswith("SHA256:")
    assert e.fingerprint in str(e) and "dflash-console trust gpu" in str(e) and "unknown host key" in str(e)
    assert not e.changed and e.key_line.startswith(ssh_host.pattern + " ssh-ed25519 ")


def test_changed_key_is_refused(ssh_host_factory, tmp_path: Path) -> None:
    host = ssh_host_factory("rotating")
    assert _connect(host) == "in\n"
    old = _fingerprint(host)
    host.rotate_host_key()
    with pytest.raises(HostKeyError) as ei:
        _connect(host)
    assert ei.value.changed and "HOST KEY CHANGED" in str(ei.value)
    assert ei.value.fingerprint == _fingerprint(host) != old


def test_trust_yes_then_connect_works(ssh_host: SshTestHost, tmp_path: Path, capsys) -> None:
    toml = _untrusted(ssh_host, tmp_path)
    assert main(["--hosts", str(toml), "trust", "gpu", "--yes"]) == 0
    out = capsys.readouterr().out
    assert _fingerprint(ssh_host) in out and "ssh-ed25519" in out
    line = console_known_hosts().read_text()
    assert line.startswith(ssh_host.pattern + " ssh-ed25519 ")
    assert _connect(ssh_host, known_hosts=str(tmp_path / "empty_known_hosts")) == "in\n"
    assert main(["--hosts", str(toml), "trust", "gpu", "--yes"]) == 0
    assert "already trusted" in capsys.readouterr().out
    assert console_known_hosts().read_text() == line  # not appended twice


@pytest.mark.parametrize(("answer", "rc"), [("n\n", 1), ("\n", 1), ("y\n", 0)])
def test_trust_asks_first(ssh_host: SshTestHost, tmp_path: Path, monkeypatch, capsys, answer: str, rc: int) -> None:
    toml = _untrusted(ssh_host, tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO(answer))
    assert main(["--hosts", str(toml), "trust", "gpu"]) == rc
    assert "[y/N]" in capsys.readouterr().out
    assert console_known_hosts().exists() == (rc == 0)


def test_trust_after_rotation_warns_and_replaces(ssh_host_factory, tmp_path: Path, capsys) -> None:
    host = ssh_host_factory("reinstalled")
    toml = _untrusted(host, tmp_path)
    assert main(["--hosts", str(toml), "trust", "gpu", "--yes"]) == 0
    host.rotate_host_key()
    assert main(["--hosts", str(toml), "trust", "gpu", "--yes"]) == 0
    assert "WARNING" in capsys.readouterr().out
    lines = console_known_hosts().read_text().splitlines()
    assert len(lines) == 1 and " ".join(Path(f"{host.host_key}.pub").read_text().split()[:2]) in lines[0]
    assert _connect(host, known_hosts=str(tmp_path / "empty_known_hosts")) == "in\n"


def test_trust_unreachable_exits_3(ssh_host_factory, tmp_path: Path, capsys) -> None:
    gone = ssh_host_factory("gone", kind="refusing")
    toml = tmp_path / "hosts.toml"
    toml.write_text(gone.hosts_toml_section("gone"))
    assert main(["--hosts", str(toml), "trust", "gone", "--yes"]) == 3
    assert "gone" in capsys.readouterr().err


def test_trust_unknown_host_name_is_a_usage_error(ssh_host: SshTestHost, tmp_path: Path) -> None:
    assert main(["--hosts", str(_untrusted(ssh_host, tmp_path)), "trust", "nope"]) == 2


def test_known_hosts_pattern_uses_brackets_off_port_22() -> None:
    assert host_pattern("10.0.0.5", 22) == "10.0.0.5"
    assert host_pattern("10.0.0.5", 2222) == "[10.0.0.5]:2222"


def test_host_key_checking_is_never_disabled_in_the_code_base() -> None:
    offenders = [
        f"{p}:{i}"
        for p in (REPO / "console").rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"known_hosts\s*=\s*None", line)
    ]
    assert offenders == []


async def test_refusing_host_is_a_transport_error_not_a_key_error(ssh_host_factory) -> None:
    gone = ssh_host_factory("gone", kind="refusing")
    t = SshTransport("gone", gone.host_config(), connect_timeout=2)
    with pytest.raises(TransportError) as ei:
        await t.connect()
    assert not isinstance(ei.value, HostKeyError) and ei.value.host == "gone"
