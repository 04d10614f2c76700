"""Host-key trust: which known_hosts files apply to a host, and the console-owned file `trust` appends to."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from console.config import Host, user_config_dir

OPENSSH_KNOWN_HOSTS = "~/.ssh/known_hosts"


def console_known_hosts() -> Path:
    """The console's own trust file, written by `dflash-console trust` and always consulted."""
    return user_config_dir() / "known_hosts"


class KnownHostsMissing(Exception):
    """A known_hosts file named in hosts.toml is missing or unreadable: an error, never a fallback."""

    def __init__(self, path: str, why: str) -> None:
        self.path = path
        super().__init__(f"known_hosts file {path} (named in hosts.toml) {why}")


def known_hosts_files(host: Host, extra: Iterable[str] = ()) -> list[str]:
    """The host's known_hosts files (default OpenSSH's), `extra` and the console's trust file.

    A file hosts.toml names must exist (KnownHostsMissing otherwise: falling back to
    ~/.ssh/known_hosts would trust keys the operator meant to exclude); the default, the extras and
    the console's own file are used when present."""
    named = host.known_hosts_files()
    for f in named:
        p = os.path.expanduser(f)
        if not os.path.exists(p):
            raise KnownHostsMissing(f, "does not exist")
        if not os.path.isfile(p) or not os.access(p, os.R_OK):
            raise KnownHostsMissing(f, "is not a readable file")
    files = named or [OPENSSH_KNOWN_HOSTS]
    out: list[str] = []
    for f in [*files, *extra, str(console_known_hosts())]:
        p = os.path.expanduser(f)
        if p not in out and os.path.isfile(p) and os.access(p, os.R_OK):
            out.append(p)
    return out


def load_known_hosts(files: list[str]) -> asyncssh.SSHKnownHosts:
    """Parse the files into one trust set (an empty set trusts nothing; checking is never off)."""
    data = b"".join(Path(f).read_bytes().rstrip(b"\n") + b"\n" for f in files)
    return asyncssh.import_known_hosts(data.decode("utf-8", errors="replace"))


def host_pattern(address: str, port: int) -> str:
    """The known_hosts name for address:port, as OpenSSH writes it (`[addr]:port` off port 22)."""
    return address if port == 22 else f"[{address}]:{port}"


@dataclass(frozen=True)
class HostKeyInfo:
    """A server's presented host key, and how it compares with what is trusted."""

    host_name: str
    pattern: str
    key_type: str
    fingerprint: str
    key_line: str
    known: bool
    """The presented key is already trusted."""
    changed: bool
    """Other keys are trusted for this host, but not this one."""
    bastion_for: str | None = None
    """Set for a ProxyJump hop: the host it leads to (trusting it lets `trust` go on to the next hop)."""


def describe_host_key(
    host_name: str,
    key: asyncssh.SSHKey,
    address: str,
    port: int,
    peer_addr: str,
    files: list[str],
    bastion_for: str | None = None,
) -> HostKeyInfo:
    """Compare a fetched key with the trusted ones for address (and its IP) at port."""
    pattern = host_pattern(address, port)
    public = key.export_public_key("openssh").decode().split()
    trusted = load_known_hosts(files).match(address, peer_addr, None if port == 22 else port)[0]
    known = any(t.public_data == key.public_data for t in trusted)
    return HostKeyInfo(
        host_name=host_name,
        pattern=pattern,
        key_type=key.get_algorithm(),
        fingerprint=key.get_fingerprint("sha256"),
        key_line=f"{pattern} {public[0]} {public[1]}",
        known=known,
        changed=bool(trusted) and not known,
        bastion_for=bastion_for,
    )


def add_trusted(key_line: str, path: Path | None = None) -> Path:
    """Append a known_hosts line (HostKeyInfo.key_line / HostKeyError.key_line) to the console's trust file,
    replacing that file's older lines for the same host pattern."""
    pattern = key_line.split(" ", 1)[0]
    path = path or console_known_hosts()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = path.read_text().splitlines() if path.exists() else []
    kept = [ln for ln in lines if ln.split(" ", 1)[0] != pattern or ln == key_line]
    if key_line not in kept:
        kept.append(key_line)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(ln + "\n" for ln in kept))
    os.chmod(tmp, 0o600)
    tmp.replace(path)
    return path
