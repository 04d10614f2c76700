"""Transports: run commands and streams on a host over SSH (asyncssh) or locally (asyncio subprocess)."""

from __future__ import annotations

from console.config import Host
from console.transport.base import CommandHook, CommandResult, HostKeyError, RemoteStream, Transport, TransportError

__all__ = [
    "CommandHook",
    "CommandResult",
    "HostKeyError",
    "RemoteStream",
    "Transport",
    "TransportError",
    "make_transport",
]


def make_transport(host_name: str, host: Host, on_command: CommandHook | None = None) -> Transport:
    """The transport `host.transport` names: `ssh` (asyncssh) or `local` (subprocesses here)."""
    if host.transport == "local":
        from console.transport.local import LocalTransport

        return LocalTransport(host_name, host, on_command=on_command)
    from console.transport.ssh import SshTransport

    return SshTransport(host_name, host, on_command=on_command)
