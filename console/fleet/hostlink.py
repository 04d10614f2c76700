"""HostLink: one supervised connection per host and its three long-lived streams, as typed events.

Streams: `nvidia-smi -lms` (telemetry), the process loop (ps + compute apps, also the link's
watchdog) and the multiplexed log tail. Commands share a small semaphore, so a host never holds
more than 3 + MAX_COMMANDS session channels (plus one short-lived HTTP forward channel at a
time from the health poller), whatever the number of GPUs and servers. On any link loss every
stream is restarted after a jittered exponential backoff capped at BACKOFF_CAP_S.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shlex
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from console.config import Host
from console.fleet import liveness
from console.fleet.agent import TAIL_GAP_LIVE_S, TAIL_GAP_S, agent_procs_command, agent_tail_command, tail_pace_line
from console.fleet.events import (
    Event,
    GpuSample,
    HostConnecting,
    HostDown,
    HostUp,
    LogData,
    LogError,
    TelemetryError,
)
from console.fleet.logtail import Chunk, FrameReader, Missing, Truncated, tail_command
from console.fleet.monitor import ProcFrame, ProcFrameParser, proc_loop_command
from console.gpu import nvsmi
from console.keys_first import KEYS_FIRST
from console.linecap import LineCap
from console.transport.base import CommandHook, CommandResult, HostKeyError, RemoteStream, Transport, TransportError

MAX_COMMANDS = 3
BACKOFF_CAP_S = 8.0
WATCHDOG_S = 6.0
"""No process-loop frame for this long means the link is dead (a silent drop needs no keepalive wait)."""
PROC_MAX_LINE = 1024 * 1024
"""A process-loop line is one process (an SGLang command line is a few KiB); longer is cut, so a host
printing without newlines cannot grow the console's memory."""

Emit = Callable[[list[Event]], object]


@dataclass
class TailSpec:
    server: str
    path: str
    offset: int = 0


def backoff_delay(attempt: int, cap: float = BACKOFF_CAP_S) -> float:
    """0.5, 1, 2, 4, 8, 8 ... seconds, ±25 % jitter (never above cap * 1.25 = 10 s)."""
    base = min(cap, 0.5 * 2.0 ** max(0, attempt - 1))
    return base * random.uniform(0.75, 1.25)


async def _pump(stream: RemoteStream, q: asyncio.Queue[bytes | None]) -> None:
    try:
        async for data in stream.chunks():
            q.put_nowait(data)
    except (TransportError, OSError):
        pass
    finally:
        q.put_nowait(None)


async def _cancel_all(tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Cancel and reap; re-cancel stragglers (3.11's wait_for can swallow a cancellation)."""
    pending = {t for t in tasks if not t.done()}
    while pending:
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.5)
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            t.result()


YIELD_AFTER_BYTES = 16_384
"""A tail read this large (about a hundred log lines to parse) is followed by a turn of the event loop."""


class HostLink:
    """Supervises one host: connect, stream, watch, reconnect; emits HostUp/Down, samples, log data."""

    def __init__(
        self,
        name: str,
        host: Host,
        transport: Transport,
        emit: Emit,
        *,
        poll_ms: int = 1000,
        on_up: Callable[[HostLink], Awaitable[None]] | None = None,
        on_frame: Callable[[HostLink, ProcFrame, float], None] | None = None,
        max_commands: int = MAX_COMMANDS,
        watchdog_s: float = WATCHDOG_S,
        on_command: CommandHook | None = None,
    ) -> None:
        self.name = name
        self.host = host
        self.transport = transport
        self.emit = emit
        self.poll_ms = poll_ms
        self.on_up = on_up
        self.on_frame = on_frame
        self.watchdog_s = watchdog_s
        self.on_command = on_command
        """Journal hook for streams (the transport journals `run`s itself): recorded when one ends."""
        self._opened: dict[int, tuple[str, float]] = {}
        self.up = asyncio.Event()
        self.last_error: str | None = None
        self.connects = 0
        self.streams_opened = 0
        self._sem = asyncio.Semaphore(max_commands)
        self._tails: dict[str, TailSpec] = {}
        self._tail_changed = asyncio.Event()
        self._watched: Counter[str] = Counter()
        """Servers whose log a person reads as it comes (`watch_log`), with how many views read each."""
        self._tail_stream: RemoteStream | None = None
        """The running tail agent, which takes its pace on stdin."""
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._dead = asyncio.Event()
        self._closers: set[asyncio.Task[None]] = set()
        self._last_frame = 0.0
        self._closing = False
        self.use_agent = True
        """Run the process loop and tails in the host's Python (spawn-free); False after it failed to start."""
        path = host.env.get("PATH")
        self._prefix = f"PATH={shlex.quote(path)}; export PATH; " if path else ""
        """A host env PATH (sim hosts, odd installs) also applies to the console's own commands."""

    # -- public -------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"hostlink:{self.name}")

    async def close(self) -> None:
        """The connection first: every channel ends with it, so no stream's close waits for its remote process to
        notice (the agent only does at its next poll: ~0.5 s of a one-shot `status` over SSH went there)."""
        self._closing = True
        self._wake.set()
        with contextlib.suppress(Exception):
            await self.transport.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=5)  # bounded: never hang a close on a stuck stream
        with contextlib.suppress(Exception):
            await self.transport.close()  # a connect that was in flight at the first close has finished by now

    async def reconnect(self) -> None:
        """Drop the link now (or cut a backoff short) and connect again."""
        self._wake.set()
        await self._link_dead("reconnect requested")

    async def wait_up(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.up.wait(), timeout)
        return self.up.is_set()

    async def run(
        self, command: str, *, timeout: float | None = 30.0, input: str | None = None, wait_up: float = 10.0
    ) -> CommandResult:
        """Run a command on the host (at most MAX_COMMANDS at once); TransportError names host and command."""
        if not await self.wait_up(wait_up):
            raise TransportError(self.name, f"host unreachable ({self.last_error or 'not connected'})", command)
        async with self._sem:
            return await self.transport.run(self._prefix + command, timeout=timeout, input=input)

    async def forward(self, remote_host: str, port: int) -> int:
        if not await self.wait_up(10):
            raise TransportError(self.name, f"host unreachable ({self.last_error or 'not connected'})")
        return await self.transport.forward_local(remote_host, port)

    def tail(self, server: str, path: str, offset: int = 0) -> None:
        """Follow `path` for `server` from `offset` (a new path replaces the server's old one)."""
        cur = self._tails.get(server)
        if cur is not None and cur.path == path:
            return
        self._tails[server] = TailSpec(server, path, offset)
        self._tail_changed.set()

    def untail(self, server: str) -> None:
        if self._tails.pop(server, None) is not None:
            self._tail_changed.set()

    def watch_log(self, server: str, on: bool) -> None:
        """A log view of `server` opened (on) or closed: while any of this host's logs is read live, its tail
        sends news every TAIL_GAP_LIVE_S instead of batching for TAIL_GAP_S; the running agent is told at once."""
        before = self.tail_gap
        self._watched[server] += 1 if on else -1
        if self._watched[server] <= 0:
            del self._watched[server]
        if self.tail_gap != before and self._tail_stream is not None:
            self._tail_stream.send(tail_pace_line(self.tail_gap))

    @property
    def tail_gap(self) -> float:
        """The tail's batching gap now: short while someone reads one of this host's logs live."""
        return TAIL_GAP_LIVE_S if self._watched else TAIL_GAP_S

    def tail_offset(self, server: str) -> int | None:
        t = self._tails.get(server)
        return None if t is None else t.offset

    @property
    def open_channels(self) -> int:
        return int(getattr(self.transport, "open_channels", 0))

    # -- supervisor ---------------------------------------------------------------------------
    async def _supervise(self) -> None:
        attempt = 0
        while not self._closing:
            attempt += 1
            self.emit([HostConnecting(self.name, time.time(), attempt)])
            try:
                await self.transport.connect()
            except HostKeyError as e:
                await self._down(str(e), backoff_delay(max(attempt, 5)))
                continue
            except TransportError as e:
                await self._down(str(e), backoff_delay(attempt))
                continue
            except Exception as e:  # a bug or an unexpected library error must not kill the supervisor
                await self._down(f"{type(e).__name__}: {e}", backoff_delay(attempt))
                continue
            attempt = 0
            self.connects += 1
            self.last_error = None
            self.up.set()
            self.emit([HostUp(self.name, time.time())])
            self._last_frame = time.monotonic()
            tasks = [
                asyncio.create_task(c) for c in (self._telemetry(), self._procs(), self._tail_loop(), self._watchdog())
            ]
            if self.on_up is not None:
                tasks.append(asyncio.create_task(self._guard(self.on_up(self))))
            self._dead.clear()
            waits = [asyncio.create_task(self.transport.wait_closed()), asyncio.create_task(self._dead.wait())]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                await _cancel_all(waits)
                self.up.clear()
                await _cancel_all(tasks)
            if self._closing:
                return
            await self._down(self.last_error or "connection lost", backoff_delay(1))

    async def _watchdog(self) -> None:
        """The process loop answers every second; silence (even while a channel opens) means a dead link, unless it
        was this console that was starved (`liveness.Silence`): then frames already received are read first."""
        silence = liveness.Silence(self.watchdog_s)
        up_at = self._last_frame  # set when the link came up: until it moves, no frame has come yet
        while True:
            due = time.monotonic() + 1
            await asyncio.sleep(1)
            if silence.tick(time.monotonic(), due, self._last_frame, first=self._last_frame == up_at) is None:
                continue
            await asyncio.sleep(0.2)  # a frame that came in with the late tick is read before the verdict
            now = time.monotonic()
            if silence.tick(now, now, self._last_frame, first=self._last_frame == up_at) is not None:
                await self._link_dead(f"no answer from {self.name} for {now - self._last_frame:.0f} s")
                return

    async def _guard(self, coro: Awaitable[None]) -> None:
        with contextlib.suppress(TransportError):
            await coro

    async def _down(self, error: str, delay: float) -> None:
        self.up.clear()
        self.last_error = error
        self.emit([HostDown(self.name, time.time(), error, round(delay, 2))])
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)

    async def _link_dead(self, why: str) -> None:
        """Give up on this connection now; closing it (slow on a silent link) happens in the background."""
        self.last_error = why
        self._dead.set()
        t = asyncio.create_task(self._close_quietly())
        self._closers.add(t)
        t.add_done_callback(self._closers.discard)

    async def _close_quietly(self) -> None:
        with contextlib.suppress(Exception):
            await self.transport.close()

    async def _open(self, command: str) -> tuple[RemoteStream, asyncio.Queue[bytes | None], asyncio.Task[None]]:
        stream = await self._open_stream(command)
        q: asyncio.Queue[bytes | None] = asyncio.Queue()
        return stream, q, asyncio.create_task(_pump(stream, q))

    async def _open_stream(self, command: str, stdin: bool = False) -> RemoteStream:
        stream = await self.transport.stream(self._prefix + command, stdin=stdin)
        self.streams_opened += 1
        self._opened[id(stream)] = (self._prefix + command, time.monotonic())
        return stream

    async def _shut(self, stream: RemoteStream, pump: asyncio.Task[None]) -> None:
        pump.cancel()
        with contextlib.suppress(Exception):
            await stream.close()  # bounded inside the transport
        command, t0 = self._opened.pop(id(stream), ("?", time.monotonic()))
        if self.on_command is not None:
            with contextlib.suppress(Exception):
                self.on_command(
                    CommandResult(self.name, command, stream.exit_status, "", "stream ended", time.monotonic() - t0)
                )

    # -- telemetry ----------------------------------------------------------------------------
    async def _telemetry(self) -> None:
        interval = self.poll_ms / 1000
        retry = 5.0
        while self.transport.connected:
            try:
                # one sample first: the -lms stream's first tick is known complete only when the second
                # begins (or a 0.6 s quiet gap passes); the -lms stream's first line completes the one-shot's
                stream, q, pump = await self._open(
                    f"{nvsmi.query_gpu_command()} 2>/dev/null; exec {nvsmi.query_gpu_command(self.poll_ms)} 2>&1"
                )
            except TransportError:
                await asyncio.sleep(2)
                continue
            buf = nvsmi.GpuLineBuffer()
            text_seen: list[str] = []
            last = time.monotonic()
            samples_seen = 0
            hung = False
            try:
                while True:
                    try:
                        data = await asyncio.wait_for(q.get(), max(0.2, interval * 0.6))
                    except TimeoutError:
                        tick = buf.flush()
                        if tick:
                            samples_seen += 1
                            last = time.monotonic()
                            self.emit([GpuSample(self.name, time.time(), tuple(tick))])
                        elif time.monotonic() - last > 3 * interval + 1:
                            self.emit(
                                [
                                    TelemetryError(
                                        self.name,
                                        time.time(),
                                        f"nvidia-smi hung: no sample for {time.monotonic() - last:.0f} s",
                                    )
                                ]
                            )
                            hung = True
                            break
                        continue
                    if data is None:
                        break
                    samples, bad = buf.feed(data.decode("utf-8", "replace"))
                    for tick in samples:
                        samples_seen += 1
                        last = time.monotonic()
                        self.emit([GpuSample(self.name, time.time(), tuple(tick))])
                    if bad:
                        text_seen = (text_seen + bad)[-50:]  # enough to name the error; a garbage flood stays bounded
                        err = nvsmi.error_text("\n".join(bad))
                        self.emit(
                            [
                                TelemetryError(
                                    self.name, time.time(), err or f"nvidia-smi printed garbage: {bad[0][:120]!r}"
                                )
                            ]
                        )
            finally:
                await self._shut(stream, pump)
            if self._closing:
                return  # the stream ended because the link is closing: no error to tell, and no sleep (a cancel
                # swallowed by 3.11's wait_for in _shut would leave it asleep until _cancel_all's next round, 0.5 s)
            if samples_seen:
                retry = 5.0
            elif not hung:
                err = nvsmi.error_text("\n".join(text_seen))
                if err:
                    msg = f"nvidia-smi exited without a sample: {err}"
                elif text_seen:  # output, but none of it a sample: say so, not just that it exited
                    msg = f"nvidia-smi printed garbage, no sample could be read: {text_seen[-1][:120]!r}"
                else:
                    msg = "nvidia-smi exited without a sample"
                self.emit([TelemetryError(self.name, time.time(), msg)])
            await asyncio.sleep(retry)
            retry = min(60.0, retry * 2)

    # -- process loop (also the watchdog) -------------------------------------------------------
    async def _procs(self) -> None:
        while self.transport.connected:
            agent = self.use_agent
            cmd = agent_procs_command(self.host.python) if agent else proc_loop_command()
            try:
                stream, q, pump = await self._open(cmd)
            except TransportError as e:
                await self._link_dead(str(e))
                return
            parser = ProcFrameParser()
            cap: LineCap[bytes] = LineCap(PROC_MAX_LINE)  # the parser buffers a line until its newline
            got, t0 = False, time.monotonic()
            try:
                while True:
                    limit = liveness.frame_limit(self.watchdog_s, not got)
                    try:
                        data = await asyncio.wait_for(q.get(), limit)
                    except TimeoutError:
                        await self._link_dead(f"no answer from {self.name} for {limit:g} s")
                        return
                    if data is None:
                        if agent and not got:
                            self._agent_failed(t0)
                        break
                    got = True
                    self._last_frame = time.monotonic()
                    for frame in parser.feed(cap.feed(data), time.time()):
                        if self.on_frame is not None:
                            self.on_frame(self, frame, time.time())
            finally:
                await self._shut(stream, pump)
            if self._closing:
                return  # as in _telemetry
            await asyncio.sleep(1)

    def _agent_failed(self, started: float) -> None:
        """The host's Python could not run the agent (no such interpreter?): use the sh loops."""
        if self.use_agent and self.transport.connected and time.monotonic() - started < 5:
            self.use_agent = False
            self.last_error = f"{self.host.python} could not run the monitor agent; using sh loops"

    # -- log tails ----------------------------------------------------------------------------
    async def _tail_loop(self) -> None:
        while self.transport.connected:
            self._tail_changed.clear()
            specs = list(self._tails.values())
            if not specs:
                await self._tail_changed.wait()
                continue
            files = [(t.path, t.offset) for t in specs]
            agent, gap = self.use_agent, self.tail_gap
            try:
                stream = await self._open_stream(
                    agent_tail_command(self.host.python, files, gap_s=gap) if agent else tail_command(files),
                    stdin=agent,
                )
            except TransportError as e:
                for t in specs:
                    self.emit([LogError(t.server, time.time(), str(e))])
                await asyncio.sleep(2)
                continue
            self._tail_stream = stream if agent else None
            if agent and gap != self.tail_gap:  # a view opened or closed while the stream was starting
                stream.send(tail_pace_line(self.tail_gap))
            t0 = time.monotonic()
            seen = [t0, 0.0]  # last chunk (monotonic), chunks so far
            reading = asyncio.create_task(self._consume_tail(stream, specs, seen))
            changed = asyncio.create_task(self._tail_changed.wait())
            try:
                while True:
                    done, _ = await asyncio.wait(
                        {reading, changed}, timeout=self.watchdog_s, return_when=asyncio.FIRST_COMPLETED
                    )
                    if changed in done:
                        break
                    if reading in done:  # the stream ended (or the link went)
                        if agent and not seen[1]:
                            self._agent_failed(t0)
                        await asyncio.sleep(1)
                        break
                    limit = liveness.frame_limit(self.watchdog_s, not seen[1])
                    if time.monotonic() - seen[0] >= limit:
                        break  # no heartbeat: the loop or the link is stuck; restart the tail
            finally:
                changed.cancel()
                self._tail_stream = None
                await self._shut(stream, reading)

    async def _consume_tail(self, stream: RemoteStream, specs: list[TailSpec], seen: list[float]) -> None:
        """Chunks straight into the state, in this task: no queue hop and no task per chunk (a flood sends
        hundreds a second). After a large read the loop gets a turn: a batch of a flooding host arrives as
        several reads that are already buffered, and parsing them back to back (~5 ms each) held a key press
        or a frame for all of them."""
        reader = FrameReader()
        with contextlib.suppress(TransportError, OSError):  # the link went: the tail loop reopens
            async for data in stream.chunks():
                seen[0] = time.monotonic()
                seen[1] += 1
                if KEYS_FIRST.holding():  # a key is on its way to the screen: its turns first (console/keys_first.py)
                    await KEYS_FIRST.step_aside()
                self._on_tail(specs, reader.feed(data))
                if len(data) >= YIELD_AFTER_BYTES:
                    await asyncio.sleep(0)

    def _on_tail(self, specs: list[TailSpec], items: list[Chunk | Truncated | Missing | str]) -> None:
        events: list[Event] = []
        now = time.time()
        for it in items:
            if isinstance(it, str) or it.index >= len(specs):
                continue
            spec = specs[it.index]
            if self._tails.get(spec.server) is not spec:
                continue  # the server moved on to a new log file
            if isinstance(it, Missing):
                events.append(
                    LogError(
                        spec.server,
                        now,
                        f"log file {spec.path} is missing on {self.name} "
                        "(deleted or unreadable); the server may still be running",
                    )
                )
                continue
            if isinstance(it, Truncated):
                spec.offset = 0
                events.append(LogError(spec.server, now, f"{spec.path} was truncated to {it.size} bytes"))
                continue
            end = it.offset + len(it.data)
            if end <= spec.offset:
                continue
            spec.offset = end
            events.append(LogData(spec.server, now, spec.path, it.offset, it.data))
        if events:
            self.emit(events)
