"""Keys first: the hold a key's arrival opens on the log readers, closed by the key's frame or by its cap, and a
tail reader that waits on it."""

from __future__ import annotations

import asyncio

import pytest

from console.keys_first import FRAME_AFTER_S, HOLD_MAX_S, SETTLE_S, KeysFirst
from tests.fleet.conftest import make_fleet


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_no_key_no_hold() -> None:
    kf = KeysFirst(Clock())
    kf.frame_drawn()
    assert not kf.holding()


def test_a_key_holds_until_a_frame_drawn_after_the_app_took_it() -> None:
    clock = Clock()
    kf = KeysFirst(clock)
    kf.key_arrived()
    assert kf.holding()
    clock.t += 0.002
    kf.frame_drawn()  # a frame that was under way when the key came: it shows the screen before the key
    assert kf.holding()
    kf.key_taken()
    clock.t += FRAME_AFTER_S / 2
    kf.frame_drawn()  # too soon after the app took it: the key's widgets and bindings may not have run yet
    assert kf.holding()
    clock.t += FRAME_AFTER_S
    kf.frame_drawn()
    assert not kf.holding()
    kf.frame_drawn()
    assert not kf.holding()  # closed for that key: later frames do not reopen it


def test_a_frame_soon_after_the_app_took_the_key_counts_once_it_settled() -> None:
    """The key's own frame came within FRAME_AFTER_S (a quiet machine): no later frame may come, and the hold
    closes SETTLE_S after the app took the key, not at the cap."""
    clock = Clock()
    kf = KeysFirst(clock)
    kf.key_arrived()
    kf.key_taken()
    clock.t += FRAME_AFTER_S / 2
    kf.frame_drawn()
    assert kf.holding()
    clock.t += SETTLE_S
    assert not kf.holding()
    assert SETTLE_S < HOLD_MAX_S


def test_a_key_that_draws_nothing_holds_at_most_the_cap() -> None:
    clock = Clock()
    kf = KeysFirst(clock)
    kf.key_arrived()
    kf.key_taken()
    clock.t += HOLD_MAX_S * 0.9
    assert kf.holding()
    clock.t += HOLD_MAX_S * 0.1 + 0.001
    assert not kf.holding()
    clock.t += 1
    assert not kf.holding()


def test_each_new_key_opens_a_hold_of_its_own() -> None:
    clock = Clock()
    kf = KeysFirst(clock)
    for _ in range(3):
        clock.t += 1
        kf.key_arrived()
        assert kf.holding()
        clock.t += 0.001
        kf.key_taken()
        clock.t += FRAME_AFTER_S
        kf.frame_drawn()
        assert not kf.holding()


async def _reader_with(kf: KeysFirst, monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Task[None], list[str]]:
    """A HostLink tail reader over two buffered chunks, waiting on `kf`; the LogData it emits, in order."""
    from console.fleet import hostlink
    from console.fleet.events import LogData
    from console.fleet.hostlink import HostLink, TailSpec

    monkeypatch.setattr(hostlink, "KEYS_FIRST", kf)
    fleet = make_fleet('[hosts.h]\naddress = "127.0.0.1"\n')
    got: list[str] = []
    link = HostLink(
        "h",
        fleet.hosts["h"],
        transport=None,  # type: ignore[arg-type]
        emit=lambda events: got.extend("data" for e in events if isinstance(e, LogData)),
    )
    spec = TailSpec("s", "/log", 0)
    link._tails["s"] = spec
    body = b"[2026-12-01 14:10:00 TP0] Decode batch. #running-req: 1, gen throughput (token/s): 99.0\n" * 20

    class Buffered:
        async def chunks(self):  # type: ignore[no-untyped-def]
            for i in range(2):
                yield b"==> 0 %d %d\n" % (i * len(body), len(body)) + body

    return asyncio.create_task(link._consume_tail(Buffered(), [spec], [0.0, 0.0])), got  # type: ignore[arg-type]


async def test_a_tail_reader_waits_while_a_key_is_on_its_way(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    kf = KeysFirst(clock)
    kf.key_arrived()
    task, got = await _reader_with(kf, monkeypatch)
    for _ in range(20):  # many turns of the loop: the reader parses nothing while the key is held
        await asyncio.sleep(0.002)
    assert got == [] and not task.done()
    kf.key_taken()
    clock.t += FRAME_AFTER_S
    kf.frame_drawn()  # the key's frame
    await asyncio.wait_for(task, 5)
    assert got == ["data", "data"]


async def test_a_tail_reader_goes_on_after_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    kf = KeysFirst(clock)
    kf.key_arrived()
    task, got = await _reader_with(kf, monkeypatch)
    await asyncio.sleep(0.01)
    assert got == []
    clock.t += HOLD_MAX_S + 0.001  # no frame ever came (a key that changed nothing)
    await asyncio.wait_for(task, 5)
    assert got == ["data", "data"]


async def test_with_no_key_the_reader_never_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    task, got = await _reader_with(KeysFirst(Clock()), monkeypatch)
    await asyncio.wait_for(task, 5)
    assert got == ["data", "data"]
