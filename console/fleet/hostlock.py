"""The launch lock on the host itself: an flock in run_dir, held by a small process tied to our channel.

Two consoles (or two CLI `launch` runs) on one host serialise their pre-check → start → meta.json
through `{run_dir}/locks/launch.lock`. The holder is the host's Python holding `flock(LOCK_EX)`; it
writes a byte every 0.5 s, so it exits as soon as its SSH channel is gone (console killed, link
cut), and the kernel drops the lock with it: a dead console never leaves a lock to break. It also
gives up after a lease, whatever happens. The file names the holder (token and pid) for the
"busy" message and for the launch script's check that this console holds the lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shlex
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from console.config import Host
from console.sglang.command import shell_path
from console.transport.base import CommandHook, CommandResult, RemoteStream, TransportError

WAIT_S = 30.0
"""How long a launch waits for another console's launch on the same host to finish."""
LEASE_S = 180.0
"""The holder releases the lock after this long even if its channel stays open."""

HOLDER = r"""
import fcntl, os, sys, time
path, token, wait, lease = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
def fail(e):
    sys.stdout.write("error %s\n" % (e.strerror or e))
    sys.stdout.flush()
    sys.exit(74)
try:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
except OSError as e:
    fail(e)
end = time.monotonic() + wait
while True:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        break
    except BlockingIOError:
        if time.monotonic() > end:
            who = os.pread(fd, 200, 0).decode("ascii", "replace").split()
            sys.stdout.write("busy pid %s\n" % (who[1] if len(who) > 1 else "?"))
            sys.stdout.flush()
            sys.exit(75)
        time.sleep(0.05)
    except OSError as e:  # e.g. ENOLCK: a filesystem without locks is an error, never a silent pass
        fail(e)
try:
    os.ftruncate(fd, 0)
    if os.pwrite(fd, ("%s %d\n" % (token, os.getpid())).encode(), 0) <= 0:
        raise OSError(28, "No space left on device")
    os.fsync(fd)
except OSError as e:
    fail(e)
out = sys.stdout
out.write("locked %d\n" % os.getpid())
out.flush()
end = time.monotonic() + lease
while time.monotonic() < end:
    time.sleep(0.5)
    try:
        out.write(".\n")
        out.flush()
    except OSError:
        break
"""


class LockBusy(Exception):
    """Another launch holds the host's lock (or the lock could not be taken); the message says which."""


@dataclass(frozen=True)
class HeldLock:
    path: str
    token: str
    pid: int


def lock_path(host: Host) -> str:
    return f"{host.run_dir.rstrip('/')}/locks/launch.lock"


def holder_command(host: Host, python: str, token: str, wait_s: float = WAIT_S, lease_s: float = LEASE_S) -> str:
    """`exec PY -I -S -c HOLDER LOCKFILE TOKEN WAIT LEASE` (PY the host's interpreter, stdlib only)."""
    py = shell_path(python) if python.startswith("~") else shlex.quote(python)
    path = host.env.get("PATH")
    prefix = f"PATH={shlex.quote(path)}; export PATH; " if path else ""
    return (
        f"{prefix}exec {py} -I -S -c {shlex.quote(HOLDER.strip())} {shell_path(lock_path(host))} "
        f"{shlex.quote(token)} {wait_s:g} {lease_s:g}"
    )


async def _read_line(stream: RemoteStream) -> str:
    buf = b""
    async for chunk in stream.chunks():
        buf += chunk
        if b"\n" in buf:
            break
    return buf.decode(errors="replace").split("\n", 1)[0].strip()


@contextlib.asynccontextmanager
async def hold(
    open_stream: Callable[[str], Awaitable[RemoteStream]],
    host_name: str,
    host: Host,
    *,
    wait_s: float = WAIT_S,
    lease_s: float = LEASE_S,
    on_command: CommandHook | None = None,
) -> AsyncIterator[HeldLock]:
    """Hold the host's launch lock for the body; LockBusy when another launch keeps it past `wait_s`.

    `open_stream` starts a long-lived remote command (the host link's `transport.stream`); `on_command`
    journals the holder when it ends."""
    token = secrets.token_hex(8)
    path = lock_path(host)
    command = holder_command(host, host.python, token, wait_s, lease_s)
    t0 = time.monotonic()
    try:
        stream = await open_stream(command)
    except TransportError as e:
        raise LockBusy(f"cannot take the launch lock on {host_name}: {e}") from e
    try:
        try:
            line = await asyncio.wait_for(_read_line(stream), wait_s + 15)
        except (TimeoutError, TransportError) as e:
            raise LockBusy(f"cannot take the launch lock {path} on {host_name}: {e or 'no answer'}") from e
        if line.startswith("busy"):
            raise LockBusy(
                f"another launch on {host_name} holds {path} ({line[5:] or 'pid ?'}) for over {wait_s:g} s; try again"
            )
        if line.startswith("error"):
            why = line[6:] + (" (disk full?)" if "No space" in line else "")
            raise LockBusy(f"cannot take the launch lock in run_dir ({path}) on {host_name}: {why}")
        if not line.startswith("locked"):
            raise LockBusy(
                f"cannot take the launch lock {path} on {host_name}: {line or f'the lock holder ({host.python}) exited without answering'}"
            )
        pid = int(line.split()[1]) if len(line.split()) > 1 and line.split()[1].isdigit() else 0
        yield HeldLock(path, token, pid)
    finally:
        with contextlib.suppress(Exception):
            await stream.close()
        if on_command is not None:
            with contextlib.suppress(Exception):
                on_command(
                    CommandResult(
                        host_name, command, stream.exit_status, "", "launch lock released", time.monotonic() - t0
                    )
                )
