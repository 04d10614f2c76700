"""The host's launch lock with real holder processes (local transport): a second taker waits, then is refused
naming the holder; a holder whose channel closes (its console gone) frees the lock at once."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from console.config import Host
from console.fleet import hostlock
from console.transport.local import LocalTransport


def _host(tmp_path: Path) -> Host:
    return Host(transport="local", run_dir=str(tmp_path / "run"), python=sys.executable)


async def test_second_taker_waits_then_is_refused_naming_the_holder(tmp_path: Path) -> None:
    h = _host(tmp_path)
    a, b = LocalTransport("h", h), LocalTransport("h", h)
    await a.connect()
    await b.connect()
    try:
        async with hostlock.hold(a.stream, "h", h) as held:
            assert Path(held.path).read_text().split() == [held.token, str(held.pid)]
            with pytest.raises(hostlock.LockBusy, match=f"holds .*launch.lock .*pid {held.pid}"):
                async with hostlock.hold(b.stream, "h", h, wait_s=0.5):
                    pass
        t0 = time.monotonic()
        async with hostlock.hold(b.stream, "h", h, wait_s=5) as again:  # released when A's body ended
            assert again.token != held.token
        assert time.monotonic() - t0 < 5
    finally:
        await a.close()
        await b.close()


async def test_a_dropped_channel_frees_the_lock_for_a_waiting_taker(tmp_path: Path) -> None:
    h = _host(tmp_path)
    a, b = LocalTransport("h", h), LocalTransport("h", h)
    await a.connect()
    await b.connect()
    try:
        cm = hostlock.hold(a.stream, "h", h)
        await cm.__aenter__()
        await a.close()  # the console's link goes away without releasing anything
        async with hostlock.hold(b.stream, "h", h, wait_s=10) as held:  # the holder died with its channel
            assert Path(held.path).read_text().split()[0] == held.token
    finally:
        await b.close()


async def test_unwritable_run_dir_is_a_refusal_naming_run_dir(tmp_path: Path) -> None:
    (tmp_path / "run").write_text("a file where run_dir should be")
    h = _host(tmp_path)
    t = LocalTransport("h", h)
    await t.connect()
    try:
        with pytest.raises(hostlock.LockBusy, match="in run_dir"):
            async with hostlock.hold(t.stream, "h", h):
                pass
    finally:
        await t.close()
