"""Local transport: the same contract as SSH, run on this machine with asyncio subprocesses (`/bin/sh -c`)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import signal
import time
from collections.abc import AsyncIterator

from console.config import Host
from console.transport.base import CommandHook, CommandResult, TransportError

SHELL = "/bin/sh"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _kill_group(proc: asyncio.subprocess.Process, grace: float = 1.0) -> None:
    """End a process started with start_new_session=True and everything in its process group."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), grace)
            break
        except TimeoutError:
            continue
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the leader is gone: a member that ignored SIGTERM must not outlive it


def _close_transport(proc: asyncio.subprocess.Process) -> None:
    """Close the subprocess transport now: left to `__del__` after the loop ends, Python >= 3.12 prints
    `Exception ignored in BaseSubprocessTransport.__del__ ... Event loop is closed`."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


def _status(returncode: int | None) -> int | None:
    """Exit code, or None when a signal ended the process (as SSH reports exit-signal)."""
    return None if returncode is None or returncode < 0 else returncode


class LocalStream:
    """A local process; close() kills its process group (the `tail -F` and anything it started)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc

    async def chunks(self) -> AsyncIterator[bytes]:
        assert self._proc.stdout is not None
        while True:
            data = await self._proc.stdout.read(65536)
            if not data:
                return
            yield data

    def send(self, data: bytes) -> bool:
        pipe = self._proc.stdin
        if pipe is None or pipe.is_closing() or self._proc.returncode is not None:
            return False
        try:
            pipe.write(data)  # a few bytes now and then: the pipe's buffer takes them, no drain needed
        except (OSError, RuntimeError):
            return False
        return True

    async def close(self) -> None:
        if self._proc.returncode is None:
            await _kill_group(self._proc)
        _close_transport(self._proc)

    @property
    def exit_status(self) -> int | None:
        return _status(self._proc.returncode)

    @property
    def running(self) -> bool:
        return self._proc.returncode is None


class _Relay:
    """A 127.0.0.1 listener relaying to a non-loopback host:port (what a forward means locally)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.close()
            return

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    w.close()

        await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


class LocalTransport:
    """This machine as a host: `transport = "local"` in hosts.toml (the demo fleet, single-box use)."""

    def __init__(self, host_name: str, host: Host, *, on_command: CommandHook | None = None) -> None:
        self.host = host_name
        self.config = host
        self.on_command = on_command
        self._closed = asyncio.Event()
        self._connected = False
        self._relays: dict[tuple[str, int], tuple[_Relay, int]] = {}
        self._streams: set[LocalStream] = set()
        self._runs = 0

    async def connect(self) -> None:
        self._closed = asyncio.Event()
        self._connected = True

    async def close(self) -> None:
        self._connected = False
        streams, self._streams = self._streams, set()
        # a stream whose reader was cancelled never got its own close()
        await asyncio.gather(*(s.close() for s in streams), return_exceptions=True)
        for relay, _ in self._relays.values():
            relay.close()
        self._relays = {}
        self._closed.set()

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def open_channels(self) -> int:
        """Commands and streams running now (the same count SshTransport keeps against MaxSessions)."""
        self._streams = {s for s in self._streams if s.running}
        return self._runs + len(self._streams)

    async def wait_closed(self) -> None:
        if self._connected:
            await self._closed.wait()

    def _require(self, command: str | None) -> None:
        if not self._connected:
            raise TransportError(self.host, "not connected", command)

    async def run(self, command: str, *, timeout: float | None = 30.0, input: str | None = None) -> CommandResult:
        self._require(command)
        start = time.monotonic()
        self._runs += 1
        try:
            proc = await asyncio.create_subprocess_exec(
                SHELL,
                "-c",
                command,
                start_new_session=True,
                stdin=asyncio.subprocess.DEVNULL if input is None else asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            try:
                out, err = await asyncio.wait_for(proc.communicate(None if input is None else input.encode()), timeout)
            except TimeoutError:
                await _kill_group(proc)
                _close_transport(proc)
                if self.on_command is not None:
                    self.on_command(
                        CommandResult(
                            self.host, command, None, "", f"timed out after {timeout:g}s", time.monotonic() - start
                        )
                    )
                raise TransportError(self.host, f"timed out after {timeout:g}s", command) from None
            except asyncio.CancelledError:
                await _kill_group(proc)
                _close_transport(proc)
                raise
        except OSError as e:
            raise TransportError(self.host, f"cannot start {SHELL}: {e.strerror}", command) from None
        finally:
            self._runs -= 1
        result = CommandResult(
            self.host,
            command,
            _status(proc.returncode),
            out.decode("utf-8", errors="replace"),
            err.decode("utf-8", errors="replace"),
            time.monotonic() - start,
        )
        if self.on_command is not None:
            self.on_command(result)
        return result

    async def stream(self, command: str, *, stdin: bool = False) -> LocalStream:
        self._require(command)
        proc = await asyncio.create_subprocess_exec(
            SHELL,
            "-c",
            command,
            start_new_session=True,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        s = LocalStream(proc)
        self._streams.add(s)
        return s

    async def forward_local(self, remote_host: str, remote_port: int) -> int:
        self._require(None)
        if _is_loopback(remote_host):
            return remote_port
        key = (remote_host, remote_port)
        if key not in self._relays:
            relay = _Relay(remote_host, remote_port)
            self._relays[key] = (relay, await relay.start())
        return self._relays[key][1]
