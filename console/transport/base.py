"""The transport contract shared by SSH and local hosts: commands, long-lived streams, port forwards.

Callers pass ready-made shell command strings (built with shlex); a transport never re-quotes them.
Every `run` is recorded through the optional `on_command` hook (the command journal).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol


class TransportError(Exception):
    """A remote failure, naming the host and (when there is one) the command."""

    def __init__(self, host: str, message: str, command: str | None = None) -> None:
        self.host = host
        self.command = command
        self.message = message
        where = f"{host}: " + (f"`{command}`: " if command else "")
        super().__init__(where + message)


class HostKeyError(TransportError):
    """Unknown or changed host key; carries the SHA256 fingerprint to show the user."""

    def __init__(self, host: str, message: str, fingerprint: str, key_line: str = "", changed: bool = False) -> None:
        self.fingerprint = fingerprint
        self.key_line = key_line
        self.changed = changed
        super().__init__(host, message)


@dataclass(frozen=True)
class CommandResult:
    host: str
    command: str
    exit_status: int | None
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


CommandHook = Callable[[CommandResult], None]


class RemoteStream(Protocol):
    """A long-lived remote process (telemetry loop, log tail). Closing it ends the remote side."""

    def chunks(self) -> AsyncIterator[bytes]:
        """Raw stdout bytes as they arrive; ends when the process or the link ends."""
        ...

    def send(self, data: bytes) -> bool:
        """Write to the process's stdin (a stream opened with `stdin=True`); False when it can no longer take
        input (the process or the link ended, or it was opened without stdin)."""
        ...

    async def close(self) -> None: ...

    @property
    def exit_status(self) -> int | None: ...


class Transport(Protocol):
    """One host's link. `connect` may raise TransportError / HostKeyError."""

    host: str

    async def connect(self) -> None: ...

    async def close(self) -> None: ...

    @property
    def connected(self) -> bool: ...

    async def run(self, command: str, *, timeout: float | None = 30.0, input: str | None = None) -> CommandResult: ...

    async def stream(self, command: str, *, stdin: bool = False) -> RemoteStream:
        """Start a long-lived command. Its stdin is /dev/null unless `stdin`: then `send` writes to it (the log
        tail agent takes its pace that way); a command that never reads it must not get one."""
        ...

    async def forward_local(self, remote_host: str, remote_port: int) -> int:
        """Open (or reuse) a local port forwarded to remote_host:remote_port; return the local port."""
        ...

    async def wait_closed(self) -> None:
        """Return when the link drops (used by the supervisor to reconnect)."""
        ...
