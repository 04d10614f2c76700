"""ProxyJump specs as hops the SSH transport connects itself, so every bastion's host key is checked."""

from __future__ import annotations

from dataclasses import dataclass

MAX_HOPS = 8
"""A chain longer than this (or a loop of ProxyJump entries in ssh config) is refused."""


@dataclass(frozen=True)
class Hop:
    """One jump host as written (`user@host:port`); unset parts come from ssh config, as OpenSSH does."""

    host: str
    port: int | None = None
    user: str | None = None

    @property
    def spec(self) -> str:
        return (f"{self.user}@" if self.user else "") + self.host + (f":{self.port}" if self.port else "")


def parse_jump(spec: str | None) -> list[Hop]:
    """`[user@]host[:port][,...]` (also `ssh://` URIs and `[v6]:port`) -> hops, first first; `none` -> [].

    ValueError names the bad part."""
    if spec is None or not spec.strip() or spec.strip().lower() == "none":
        return []
    hops = []
    for part in spec.split(","):
        p = part.strip().removeprefix("ssh://").rstrip("/")
        user, _, hostport = p.rpartition("@")
        host, port = hostport, None
        if hostport.startswith("["):
            host, _, rest = hostport[1:].partition("]")
            if rest.startswith(":"):
                port = _port(rest[1:], part)
        elif hostport.count(":") == 1:
            host, port_s = hostport.split(":")
            port = _port(port_s, part)
        if not host:
            raise ValueError(f"bad ProxyJump entry {part!r}: no host")
        hops.append(Hop(host, port, user or None))
    return hops


def _port(text: str, part: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"bad ProxyJump entry {part!r}: port {text!r}")
    return int(text)
