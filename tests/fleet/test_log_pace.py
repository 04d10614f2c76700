"""The host's log tail batches news unless a log view reads it live (FleetApi.watch_log), over real sshd.

The batching gap is set to an hour here, so 'held back' and 'sent' differ by far more than any machine's delay.
"""

from __future__ import annotations

import asyncio

import pytest

import console.fleet.hostlink as hostlink
from tests.fleet.conftest import launch_small, make_fleet
from tests.fleet.test_lifecycle import wait_for


def has(ctl, name: str, mark: str) -> bool:  # type: ignore[no-untyped-def]
    return any(mark in ln for ln in ctl.state.servers[name].log.lines)


async def test_a_watched_log_comes_at_once_and_an_unwatched_one_waits_its_batch(
    sim_ssh, controller_factory, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    h = sim_ssh("paced")
    ctl, name, log = await launch_small(h, controller_factory)
    link = ctl.links["paced"]

    def append(mark: str) -> None:
        h.ssh.spawn(["/bin/sh", "-c", f'echo "{mark}" >> "$0"', log], as_user=True).wait(10)

    monkeypatch.setattr(hostlink, "TAIL_GAP_S", 3600.0)
    ctl.watch_log(name, True)
    ctl.watch_log(name, False)  # the running agent is told the unwatched pace: an hour now
    assert link.tail_gap == 3600.0
    append("MARK-first")  # the first line after the pace change may go out at once (a quiet spell)
    await asyncio.sleep(0.5)
    append("MARK-held")
    await asyncio.sleep(1.0)
    assert not has(ctl, name, "MARK-held"), "unwatched: held for the batch"

    ctl.watch_log(name, True)  # a log view opens: what was held comes now, and so does what follows
    await wait_for(lambda: has(ctl, name, "MARK-held"), 10)
    append("MARK-live")
    await wait_for(lambda: has(ctl, name, "MARK-live"), 10)

    connects = link.connects  # a tail reopened after a reconnect starts at the watched pace
    assert h.ssh.kill_sessions() >= 1
    await wait_for(lambda: link.connects > connects and link._tail_stream is not None, 15)
    append("MARK-after-reconnect-1")
    await wait_for(lambda: has(ctl, name, "MARK-after-reconnect-1"), 15)
    append("MARK-after-reconnect-2")
    await wait_for(lambda: has(ctl, name, "MARK-after-reconnect-2"), 10)

    ctl.watch_log(name, False)
    assert link.tail_gap == 3600.0
    await asyncio.sleep(0.3)
    append("MARK-held-again")
    await asyncio.sleep(1.0)
    assert not has(ctl, name, "MARK-held-again")
    assert [has(ctl, name, m) for m in ("MARK-first", "MARK-live")] == [True, True]


async def test_a_burst_of_buffered_tail_reads_lets_the_loop_run_between_them() -> None:
    """A batch from a flooding host arrives as several 64 KB reads already buffered; a key press (here: any other
    task) runs between them, not after all of them."""
    from console.fleet.events import LogData
    from console.fleet.hostlink import HostLink, TailSpec

    fleet = make_fleet('[hosts.h]\naddress = "127.0.0.1"\n')
    order: list[str] = []

    def emit(events: list) -> None:  # type: ignore[type-arg]
        order.extend("data" for e in events if isinstance(e, LogData))

    link = HostLink("h", fleet.hosts["h"], transport=None, emit=emit)  # type: ignore[arg-type]
    spec = TailSpec("s", "/log", 0)
    link._tails["s"] = spec
    line = b"[2026-12-01 14:10:00 TP0] Decode batch. #running-req: 1, gen throughput (token/s): 99.0\n"
    body = line * (65_000 // len(line))

    class Buffered:
        async def chunks(self):  # type: ignore[no-untyped-def]
            for i in range(4):
                yield b"==> 0 %d %d\n" % (i * len(body), len(body)) + body  # no await: all of it is buffered

    async def other() -> None:
        await asyncio.sleep(0)
        order.append("key")

    task = asyncio.create_task(other())
    await link._consume_tail(Buffered(), [spec], [0.0, 0.0])  # type: ignore[arg-type]
    await task
    assert order.count("data") == 4 and order.index("key") < 3, order
