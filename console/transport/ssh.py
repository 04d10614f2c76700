"""SSH transport (asyncssh): one connection per host, commands and streams as channels, local port forwards.

Honours ~/.ssh/config (or the files in $DFLASH_SSH_CONFIG, separated by os.pathsep), the agent, and
known_hosts: the host's files (default ~/.ssh/known_hosts) together with the console's trust file.
Host-key checking is never disabled; an unknown or changed key raises HostKeyError with the fingerprint.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncssh
from asyncssh.encryption import get_default_encryption_algs

from console.config import Host
from console.transport.base import CommandHook, CommandResult, HostKeyError, TransportError
from console.transport.jump import MAX_HOPS, Hop, parse_jump
from console.transport.trust import (
    HostKeyInfo,
    KnownHostsMissing,
    describe_host_key,
    known_hosts_files,
    load_known_hosts,
)

SSH_CONFIG_ENV = "DFLASH_SSH_CONFIG"


def ssh_config_paths() -> list[str] | tuple[()]:
    """$DFLASH_SSH_CONFIG's files, else () so asyncssh reads ~/.ssh/config as OpenSSH would."""
    env = os.environ.get(SSH_CONFIG_ENV)
    if not env:
        return ()
    return [os.path.expanduser(p) for p in env.split(os.pathsep) if p]


def _text(data: Any) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data)


class SshStream:
    """A remote process on its own channel; close() closes the channel, which ends `tail -F` (SIGPIPE)."""

    def __init__(
        self, proc: asyncssh.SSHClientProcess[bytes], release: Callable[[], None], writable: bool = False
    ) -> None:
        self._proc = proc
        self._release = release
        self._released = False
        self._writable = writable

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            while True:
                data = await self._proc.stdout.read(65536)
                if not data:
                    break
                yield data
        except (asyncssh.Error, OSError):
            return
        # OpenSSH sends EOF before exit-status: wait for the channel to close so exit_status is known.
        with contextlib.suppress(TimeoutError, asyncssh.Error, OSError):
            await asyncio.wait_for(self._proc.wait_closed(), 5)
        self._done()

    def send(self, data: bytes) -> bool:
        if not self._writable or self._released:
            return False
        try:
            self._proc.stdin.write(data)
        except (asyncssh.Error, OSError):  # BrokenPipeError after the channel closed is an OSError
            return False
        return True

    async def close(self) -> None:
        self._proc.close()
        try:
            await asyncio.wait_for(self._proc.wait_closed(), 5)
        except (TimeoutError, asyncssh.Error, OSError):
            pass
        self._done()

    def _done(self) -> None:
        if not self._released:
            self._released = True
            self._release()

    @property
    def exit_status(self) -> int | None:
        return self._proc.exit_status


class SshTransport:
    """One host's SSH link. Reconnect by calling connect() again after wait_closed() returns."""

    def __init__(
        self,
        host_name: str,
        host: Host,
        *,
        on_command: CommandHook | None = None,
        connect_timeout: float = 10,
        keepalive_interval: float = 15,
        keepalive_count_max: int = 3,
    ) -> None:
        self.host = host_name
        self.config = host
        self.on_command = on_command
        self.connect_timeout = connect_timeout
        self.keepalive_interval = keepalive_interval
        self.keepalive_count_max = keepalive_count_max
        self._conn: asyncssh.SSHClientConnection | None = None
        self._forwards: dict[tuple[str, int], asyncssh.SSHListener] = {}
        self._channels = 0
        self._generation = 0  # bumps on every connect, so channels of a dead link never skew the count

    # -- connection ----------------------------------------------------------------------------

    def connect_kwargs(self) -> dict[str, Any]:
        """asyncssh options for the target: hosts.toml fields override ~/.ssh/config; known_hosts always checked.

        No `tunnel` here: connect() opens the jump hosts itself, checking each one's key (asyncssh's own
        ProxyJump handling checks a bastion against ssh config alone, so `UserKnownHostsFile none`
        there would let any bastion in)."""
        h = self.config
        kw: dict[str, Any] = {
            "config": ssh_config_paths(),
            "connect_timeout": self.connect_timeout,
            "keepalive_interval": self.keepalive_interval,
            "keepalive_count_max": self.keepalive_count_max,
            "known_hosts": _trust_set(self._files()),
        }
        if h.port is not None:
            kw["port"] = h.port
        if h.user is not None:
            kw["username"] = h.user
        if h.identity is not None:
            kw["client_keys"] = [os.path.expanduser(p) for p in h.identities()]
        return kw

    def _files(self, extra: list[str] | tuple[()] = ()) -> list[str]:
        """Trusted-key files for this host (and its bastions); a file hosts.toml names but lacks is an error."""
        try:
            return known_hosts_files(self.config, extra)
        except KnownHostsMissing as e:
            raise TransportError(self.host, str(e)) from None

    async def _options(
        self, host: str, port: int | None = None, user: str | None = None, known_hosts: Any = b""
    ) -> asyncssh.SSHClientConnectionOptions:
        """ssh config applied to one host name (HostName, Port, User, ProxyJump, UserKnownHostsFile)."""
        try:
            options: asyncssh.SSHClientConnectionOptions = await asyncssh.SSHClientConnectionOptions.construct(
                host=host,
                port=port if port is not None else (),
                username=user if user is not None else (),
                config=ssh_config_paths(),
                known_hosts=known_hosts,
                connect_timeout=self.connect_timeout,
            )
        except (OSError, asyncssh.Error, ValueError) as e:
            raise TransportError(self.host, f"cannot read the ssh config for {host}: {_describe(e)}") from None
        return options

    async def jump_hops(self) -> list[Hop]:
        """The ProxyJump chain to this host, first hop first: hosts.toml's proxy_jump, else ssh config's;
        a hop's own ProxyJump from ssh config goes before it, as OpenSSH does."""
        spec = self.config.proxy_jump
        if spec is None:
            spec = _jump_of(await self._options(self.config.address, self.config.port, self.config.user))
        hops: list[Hop] = []
        while spec:
            try:
                new = parse_jump(spec)
            except ValueError as e:
                raise TransportError(self.host, str(e)) from None
            hops = new + hops
            if len(hops) > MAX_HOPS:
                raise TransportError(self.host, f"ProxyJump chain longer than {MAX_HOPS} hops (a loop in ssh config?)")
            spec = _jump_of(await self._options(new[0].host, new[0].port, new[0].user)) if new else None
        return hops

    async def _hop_files(self, hop: Hop) -> tuple[list[str], asyncssh.SSHClientConnectionOptions]:
        """A bastion is checked like any host (this host's known_hosts and the trust file), plus files ssh
        config names for it; `UserKnownHostsFile none` there adds none and turns nothing off."""
        opts = await self._options(hop.host, hop.port, hop.user, known_hosts=())
        named = opts.known_hosts if isinstance(opts.known_hosts, list) else []
        return self._files([os.path.expanduser(f) for f in named if isinstance(f, str)]), opts

    def _bastion_name(self, hop: Hop) -> str:
        return f"bastion {hop.spec} (ProxyJump of {self.host})"

    async def _connect_hop(self, hop: Hop, via: asyncssh.SSHClientConnection | None) -> asyncssh.SSHClientConnection:
        files, opts = await self._hop_files(hop)
        try:
            conn = await asyncssh.connect(
                hop.host,
                hop.port if hop.port is not None else (),
                username=hop.user if hop.user is not None else (),
                tunnel=via,
                config=ssh_config_paths(),
                known_hosts=_trust_set(files),
                connect_timeout=self.connect_timeout,
                keepalive_interval=self.keepalive_interval,
                keepalive_count_max=self.keepalive_count_max,
                **_cipher_order(opts),
            )
        except asyncssh.HostKeyNotVerifiable as e:
            raise await self._host_key_error(e, hop, via) from None
        except asyncssh.PermissionDenied as e:
            raise TransportError(
                self.host, f"authentication failed on {self._bastion_name(hop)} ({e.reason})"
            ) from None
        except TimeoutError:
            raise TransportError(
                self.host, f"connect to {self._bastion_name(hop)} timed out after {self.connect_timeout:g}s"
            ) from None
        except (OSError, asyncssh.Error) as e:
            raise TransportError(self.host, f"cannot connect to {self._bastion_name(hop)}: {_describe(e)}") from None
        if via is not None:
            conn.set_tunnel(via)  # closing the last hop closes the chain
        return conn

    async def _open_chain(self, hops: list[Hop]) -> asyncssh.SSHClientConnection | None:
        """Connect every jump host in order, each through the one before; None without hops."""
        via: asyncssh.SSHClientConnection | None = None
        try:
            for hop in hops:
                via = await self._connect_hop(hop, via)
        except BaseException:
            if via is not None:
                via.close()
            raise
        return via

    async def connect(self) -> None:
        await self.close()
        kw = self.connect_kwargs()
        kw |= _cipher_order(await self._options(self.config.address, self.config.port, self.config.user))
        via = await self._open_chain(await self.jump_hops())
        try:
            conn = await self._connect_target(via, kw)
        except BaseException:
            if via is not None:
                via.close()
            raise
        if via is not None:
            conn.set_tunnel(via)  # closed with the connection
        self._conn = conn
        self._forwards = {}
        self._channels = 0
        self._generation += 1

    async def _connect_target(
        self, via: asyncssh.SSHClientConnection | None, kw: dict[str, Any]
    ) -> asyncssh.SSHClientConnection:
        try:
            return await asyncssh.connect(self.config.address, tunnel=via, **kw)
        except asyncssh.HostKeyNotVerifiable as e:
            raise await self._host_key_error(e) from None
        except asyncssh.PermissionDenied as e:
            raise TransportError(
                self.host,
                f"authentication failed ({e.reason}); check user and identity "
                "in hosts.toml, ~/.ssh/config or the agent",
            ) from None
        except TimeoutError:
            raise TransportError(
                self.host, f"connect to {self.config.address} timed out after {self.connect_timeout:g}s"
            ) from None
        except (OSError, asyncssh.Error) as e:
            raise TransportError(self.host, f"cannot connect to {self.config.address}: {_describe(e)}") from None

    async def fetch_host_key(self) -> HostKeyInfo:
        """The first key on the way that is not trusted yet (a bastion's before its target's), fetched
        WITHOUT trusting it; when every one is trusted, the target's (known=True)."""
        hops = await self.jump_hops()
        via: asyncssh.SSHClientConnection | None = None
        try:
            for hop in hops:
                files, opts = await self._hop_files(hop)
                info = await self._fetch(opts, via, files, self._bastion_name(hop))
                if not info.known:
                    return info
                via = await self._connect_hop(hop, via)
            opts = await self._options(self.config.address, self.config.port, self.config.user)
            return await self._fetch(opts, via, self._files(), self.host)
        finally:
            if via is not None:
                via.close()

    async def _fetch(
        self,
        opts: asyncssh.SSHClientConnectionOptions,
        via: asyncssh.SSHClientConnection | None,
        files: list[str],
        label: str,
    ) -> HostKeyInfo:
        try:
            key = await asyncssh.get_server_host_key(
                opts.host, opts.port, tunnel=via, config=ssh_config_paths(), options=opts
            )
        except TimeoutError:
            raise TransportError(self.host, f"fetching the host key of {label} timed out") from None
        except (OSError, asyncssh.Error) as e:
            raise TransportError(self.host, f"cannot fetch the host key of {label}: {_describe(e)}") from None
        if key is None:
            raise TransportError(self.host, f"{label} presented no host key")
        name = opts.host_key_alias or opts.host
        peer = await _resolve(opts.host, opts.port) if via is None else opts.host
        return describe_host_key(
            label, key, name, opts.port, peer, files, bastion_for=None if label == self.host else self.host
        )

    async def _host_key_error(
        self,
        err: asyncssh.HostKeyNotVerifiable,
        hop: Hop | None = None,
        via: asyncssh.SSHClientConnection | None = None,
    ) -> TransportError:
        try:
            if hop is None:
                info, files_list = await self.fetch_host_key(), self._files()
            else:
                files_list, opts = await self._hop_files(hop)
                info = await self._fetch(opts, via, files_list, self._bastion_name(hop))
        except TransportError as e:
            return TransportError(self.host, f"host key not verifiable ({err.reason}); and {e.message}")
        files = ", ".join(files_list) or "no known_hosts file"
        who = f"{info.pattern}, {info.host_name}" if info.bastion_for else info.pattern
        if info.changed:
            msg = (
                f"HOST KEY CHANGED for {who}: it now presents {info.key_type} {info.fingerprint}, "
                f"which does not match {files}. This could be a man-in-the-middle attack. If the host was "
                f"reinstalled, check the fingerprint out of band and run `dflash-console trust {self.host}`"
            )
        else:
            msg = (
                f"unknown host key for {who}: {info.key_type} {info.fingerprint}. If this is the "
                f"right machine, run `dflash-console trust {self.host}`"
            )
        return HostKeyError(self.host, msg, info.fingerprint, key_line=info.key_line, changed=info.changed)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        self._forwards = {}
        if conn is not None:
            conn.close()
            try:
                await asyncio.wait_for(conn.wait_closed(), 5)
            except (TimeoutError, asyncssh.Error, OSError):
                pass

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    @property
    def open_channels(self) -> int:
        """Session channels open now (runs + streams); OpenSSH allows 10 per connection."""
        return self._channels

    async def wait_closed(self) -> None:
        if self._conn is not None:
            await self._conn.wait_closed()

    def _require(self, command: str | None = None) -> asyncssh.SSHClientConnection:
        if not self.connected:
            raise TransportError(self.host, "not connected", command)
        assert self._conn is not None
        return self._conn

    # -- channels ------------------------------------------------------------------------------

    async def run(self, command: str, *, timeout: float | None = 30.0, input: str | None = None) -> CommandResult:
        conn = self._require(command)
        start = time.monotonic()
        proc: asyncssh.SSHClientProcess[bytes] | None = None
        release = self._take_channel()
        try:
            proc = await conn.create_process(command, input=None if input is None else input.encode(), encoding=None)
            done = await asyncio.wait_for(proc.wait(check=False), timeout)
        except TimeoutError:
            self._record(command, start, f"timed out after {timeout:g}s")
            raise TransportError(self.host, f"timed out after {timeout:g}s", command) from None
        except (OSError, asyncssh.Error) as e:
            self._record(command, start, f"link lost: {_describe(e)}")
            raise TransportError(self.host, f"link lost: {_describe(e)}", command) from None
        finally:
            release()
            if proc is not None:
                proc.close()
        if done.exit_status is None and done.exit_signal is None:
            self._record(command, start, "link lost before the command finished")
            raise TransportError(self.host, "link lost before the command finished", command)
        result = CommandResult(
            self.host,
            command,
            done.exit_status if done.exit_signal is None else None,
            _text(done.stdout),
            _text(done.stderr),
            time.monotonic() - start,
        )
        if self.on_command is not None:
            self.on_command(result)
        return result

    def _record(self, command: str, start: float, error: str) -> None:
        if self.on_command is not None:
            self.on_command(CommandResult(self.host, command, None, "", error, time.monotonic() - start))

    async def stream(self, command: str, *, stdin: bool = False) -> SshStream:
        conn = self._require(command)
        release = self._take_channel()
        try:
            proc = await conn.create_process(
                command, encoding=None, stdin=asyncssh.PIPE if stdin else asyncssh.DEVNULL, stderr=asyncssh.DEVNULL
            )
        except (OSError, asyncssh.Error) as e:
            release()
            raise TransportError(self.host, f"cannot open a channel: {_describe(e)}", command) from None
        return SshStream(proc, release, writable=stdin)

    def _take_channel(self) -> Callable[[], None]:
        """Count one session channel; the returned callable gives it back (once, and only to its own link)."""
        self._channels += 1
        generation, done = self._generation, False

        def release() -> None:
            nonlocal done
            if not done and generation == self._generation:
                self._channels -= 1
            done = True

        return release

    async def forward_local(self, remote_host: str, remote_port: int) -> int:
        conn = self._require()
        key = (remote_host, remote_port)
        listener = self._forwards.get(key)
        if listener is None:
            try:
                listener = await conn.forward_local_port("127.0.0.1", 0, remote_host, remote_port)
            except (OSError, asyncssh.Error) as e:
                raise TransportError(
                    self.host, f"cannot forward to {remote_host}:{remote_port}: {_describe(e)}"
                ) from None
            self._forwards[key] = listener
        return listener.get_port()


def _trust_set(files: list[str]) -> asyncssh.SSHKnownHosts | bytes:
    """The trusted keys of files; b"" (nothing trusted, every key unknown) when there are none."""
    return load_known_hosts(files) if files else b""


GCM_FIRST = (b"aes128-gcm@openssh.com", b"aes256-gcm@openssh.com")
"""Offered before asyncssh's first choice, chacha20-poly1305: its Python shim costs ~20 µs a packet against
~4 µs for AES-GCM (one `cryptography` call, AES-NI), and every log line and GPU sample arrives as packets
(the console's largest single CPU item under a log flood; benchmarks/bench_console_cpu.py)."""


def _cipher_order(opts: asyncssh.SSHClientConnectionOptions) -> dict[str, Any]:
    """AES-GCM first, unless ssh config's `Ciphers` chose for this host (then its list, untouched)."""
    default = get_default_encryption_algs()
    if list(opts.encryption_algs) != default:
        return {}
    return {"encryption_algs": [a.decode() for a in (*GCM_FIRST, *(x for x in default if x not in GCM_FIRST))]}


def _jump_of(opts: asyncssh.SSHClientConnectionOptions) -> str | None:
    tunnel = getattr(opts, "tunnel", None)
    return tunnel if isinstance(tunnel, str) else None


async def _resolve(host: str, port: int) -> str:
    """The IP known_hosts entries may also be written for (best effort; the name itself is enough)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=0)
    except OSError:
        return host
    return str(infos[0][4][0]) if infos else host


def _describe(e: BaseException) -> str:
    if isinstance(e, asyncssh.Error):
        return e.reason or type(e).__name__
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__
