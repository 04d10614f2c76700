"""Bounded reads from a host (issue 19.2) against a real HTTP server that misbehaves on purpose.

A /health dripping a byte every 0.25 s, a 60 MB /metrics, a chat stream that never ends, an SSE line
with no newline, JSON nested 100,000 deep: each ends within its total deadline (plus a slack taken
from a normal request in the same run), is refused by size, or is a one-line error, and parsing a
large /metrics leaves the event loop free.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from console.sglang.client import Malformed, SGLangClient, Timeout, TooLarge
from console.sglang.httpbound import METRICS_MAX_BYTES, BodyTooLarge, get_bounded
from console.sglang.metrics import parse_metrics
from tests.faults import results
from tests.faults.simfleet import REPO
from tests.hostile.badhttp import RUN_FOR_S, BadServer, metrics_text, serve

GUARD_S = RUN_FOR_S - 5
"""The test's own limit: below the server's run time, so an unbounded client fails instead of finishing late."""


@pytest.fixture
def bad() -> Iterator[BadServer]:
    with serve() as s:
        yield s


async def _baseline(url: str) -> float:
    """Seconds for one normal /health round trip on this machine now (the slack every deadline gets)."""
    async with SGLangClient(url) as c:
        times = sorted([(await c.health()).latency_s for _ in range(5)])
    return times[2]


def _slack(base: float) -> float:
    """Room for a loaded 2-core machine; an unbounded read takes RUN_FOR_S (30 s), far beyond it."""
    return 1.5 + 100 * base


async def _lag_while(aw) -> tuple[object, float]:
    """Run aw and measure the event loop's worst lag meanwhile (a 5 ms ticker)."""
    worst = 0.0
    done = False

    async def tick() -> None:
        nonlocal worst
        while not done:
            t = time.perf_counter()
            await asyncio.sleep(0.005)
            worst = max(worst, time.perf_counter() - t - 0.005)

    ticker = asyncio.create_task(tick())
    try:
        out = await aw
    except Exception as e:  # the caller asserts on it
        out = e
    done = True
    await ticker
    return out, worst


async def test_dripping_health_ends_at_its_total_deadline(bad: BadServer) -> None:
    base = await _baseline(bad.url)
    bad.mode = "drip"
    deadline = 1.0
    async with SGLangClient(bad.url) as c:
        t0 = time.monotonic()
        h = await asyncio.wait_for(c.health(deadline), GUARD_S)
        took = time.monotonic() - t0
    ok = h.state == "down" and "within 1 s" in h.message and took <= deadline + _slack(base)
    results.record(
        "hostile",
        "http: /health dripping a byte every 0.25 s ends at its total deadline",
        0,
        ok,
        took,
        h.message,
        deadline_s=deadline,
        took_s=took,
        baseline_s=base,
    )
    assert ok, (h, took)


async def test_dripping_health_in_the_controllers_read(bad: BadServer) -> None:
    """The health loop's own read (get_bounded, as FleetController uses it) is bounded the same way."""
    base = await _baseline(bad.url)
    bad.mode = "drip"
    async with httpx.AsyncClient(timeout=httpx.Timeout(4.0, connect=3.0), trust_env=False) as http:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(get_bounded(http, bad.url + "/health", deadline_s=1.0, max_bytes=65536), GUARD_S)
        assert time.monotonic() - t0 <= 1.0 + _slack(base)


async def test_huge_metrics_is_refused_and_the_loop_stays_free(bad: BadServer) -> None:
    base = await _baseline(bad.url)
    bad.mode = "huge"
    async with SGLangClient(bad.url) as c:
        t0 = time.monotonic()
        err, lag = await _lag_while(asyncio.wait_for(c.metrics(), GUARD_S))
        took = time.monotonic() - t0
    ok = isinstance(err, TooLarge) and "8 MiB" in str(err) and "\n" not in str(err)
    results.record(
        "hostile",
        "http: 60 MB /metrics refused at the 8 MiB cap",
        0,
        ok,
        took,
        str(err),
        took_s=took,
        loop_lag_s=lag,
        baseline_s=base,
    )
    assert ok, err


async def test_large_metrics_under_the_cap_parse_off_the_event_loop(bad: BadServer) -> None:
    body = metrics_text(45_000)  # about 4 MB: under the cap, seconds of parsing on a slow core
    assert len(body) < METRICS_MAX_BYTES
    t0 = time.perf_counter()
    parse_metrics(body.decode())
    on_loop = time.perf_counter() - t0  # what the loop would stall for if parsed on it (the baseline)
    bad.mode, bad.metrics_body = "metrics", body
    async with SGLangClient(bad.url) as c:
        m, lag = await _lag_while(c.metrics())
    ok = not isinstance(m, Exception) and m.num_running_reqs is not None and lag < on_loop / 3
    results.record(
        "hostile",
        "http: 4 MB /metrics parsed off the event loop",
        0,
        ok,
        on_loop,
        repr(m)[:200],
        parse_s=on_loop,
        loop_lag_s=lag,
    )
    assert ok, (m, lag, on_loop)


async def test_endless_chat_stream_stops_at_its_deadline(bad: BadServer) -> None:
    base = await _baseline(bad.url)
    bad.mode = "endless"
    async with SGLangClient(bad.url) as c:
        t0 = time.monotonic()
        got = 0
        with pytest.raises(Timeout, match="did not finish within 1 s"):

            async def consume() -> None:
                nonlocal got
                async for _ in c.chat_stream([{"role": "user", "content": "hi"}], timeout=1.0):
                    got += 1

            await asyncio.wait_for(consume(), GUARD_S)
        took = time.monotonic() - t0
    ok = got > 0 and took <= 1.0 + _slack(base)
    results.record(
        "hostile",
        "http: endless SSE chat stream stops at its total deadline",
        0,
        ok,
        took,
        f"{got} deltas",
        took_s=took,
        baseline_s=base,
    )
    assert ok, (got, took)


async def test_probe_of_an_endless_stream_reports_its_deadline(bad: BadServer) -> None:
    base = await _baseline(bad.url)
    bad.mode = "endless"
    async with SGLangClient(bad.url) as c:
        t0 = time.monotonic()
        r = await asyncio.wait_for(c.probe(deadline_s=1.5), GUARD_S)
        took = time.monotonic() - t0
    ok = not r.ok and r.error is not None and "1.5 s" in r.error and took <= 1.5 + _slack(base)
    results.record(
        "hostile", "http: probe of an endless stream ends at its deadline", 0, ok, took, r.error or "", took_s=took
    )
    assert ok, (r, took)


async def test_sse_line_without_newline_is_capped(bad: BadServer) -> None:
    bad.mode = "noline"
    async with SGLangClient(bad.url) as c:
        t0 = time.monotonic()
        with pytest.raises(TooLarge, match="SSE line larger than 1 MiB"):
            _ = [e async for e in c.chat_stream([{"role": "user", "content": "hi"}], timeout=GUARD_S)]
        took = time.monotonic() - t0
    results.record("hostile", "http: SSE line with no newline refused at 1 MiB", 0, True, took, took_s=took)


async def test_too_deep_json_is_a_one_line_error(bad: BadServer) -> None:
    bad.mode = "deep"
    async with SGLangClient(bad.url) as c:
        with pytest.raises(Malformed, match="nested deeper than 64 levels") as info:
            await c.model_info()
        with pytest.raises(Malformed, match="bad SSE event: JSON nested deeper") as ev:
            _ = [e async for e in c.chat_stream([{"role": "user", "content": "hi"}])]
        r = await c.probe()
    assert "\n" not in str(info.value) and "/model_info" in str(info.value) and "\n" not in str(ev.value)
    assert not r.ok and r.error and "nested deeper" in r.error


def test_cli_probe_of_too_deep_json_exits_1_without_traceback(bad: BadServer) -> None:
    bad.mode = "deep"
    p = subprocess.run(
        [sys.executable, "-m", "console", "probe", bad.url], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    ok = p.returncode == 1 and "Traceback" not in p.stderr + p.stdout and "nested deeper" in p.stdout + p.stderr
    results.record(
        "hostile",
        "http: `probe` of JSON nested 100,000 deep: exit 1, no traceback",
        0,
        ok,
        0.0,
        (p.stdout + p.stderr)[-300:],
    )
    assert ok, (p.returncode, p.stdout, p.stderr)


async def test_get_bounded_refuses_by_declared_length_without_reading(bad: BadServer) -> None:
    """A content-length over the cap is refused before any of the body is read."""
    bad.mode = "declared"  # declares 1,000,000 bytes, then drips: reading would take days
    async with httpx.AsyncClient(trust_env=False) as http:
        t0 = time.monotonic()
        with pytest.raises(BodyTooLarge):
            await asyncio.wait_for(get_bounded(http, bad.url + "/x", deadline_s=GUARD_S, max_bytes=1000), GUARD_S)
        assert time.monotonic() - t0 < GUARD_S / 2


async def test_bench_request_with_a_too_deep_event_fails_that_request_only(bad: BadServer) -> None:
    from console.sglang.bench import BenchSpec, LoadGenerator

    bad.mode = "deep"
    async with LoadGenerator(BenchSpec(bad.url, concurrency=(1,), model="m", warmup=False)) as g:
        s = await g.request(b'{"model": "m", "messages": [], "stream": true}')
    assert not s.ok and s.error is not None and "RecursionError" in s.error


async def test_bench_model_discovery_and_server_info_survive_too_deep_json(bad: BadServer) -> None:
    from console.sglang.bench import BenchSpec, LoadGenerator

    bad.mode = "deep"
    async with LoadGenerator(BenchSpec(bad.url, concurrency=(1,), warmup=False)) as g:
        assert await g.discover_model() == "default" and await g.server_info() == {}
