"""Kept log lines are capped per server by bytes and fleet-wide by one budget: 128 servers stay under 300 MB."""

from __future__ import annotations

import gc
import tracemalloc

from console.fleet.logmodel import FLEET_BYTES, LogBudget, LogModel, line_cost
from tests.samples import SAMPLES

MB = 1_000_000


def _chunk() -> bytes:
    """Real SGLang lines: the long server_args lines and decode/prefill batch lines of the samples."""
    keep = [
        ln
        for p in sorted((SAMPLES / "sglang-logs").glob("*.log"))
        for ln in p.read_bytes().splitlines()
        if b"server_args" in ln or b"Decode batch" in ln or b"Prefill batch" in ln
    ]
    return b"\n".join(keep) + b"\n"


def _held(m: LogModel) -> int:
    return sum(map(line_cost, m.lines))


def test_one_server_is_capped_by_bytes_and_keeps_the_newest_lines() -> None:
    b = LogBudget(limit=1 << 40, per_server=256 * 1024)
    m = LogModel(budget=b)
    data = _chunk() * 40
    m.feed(data)
    fed = data.count(b"\n")
    assert m.line_count == fed and len(m.lines) < fed  # before: all kept (under 20k lines, any size)
    assert m.nbytes == _held(m) <= 256 * 1024 and b.total == m.nbytes
    assert m.lines[-1] == data.splitlines()[-1].decode()


def test_the_line_cap_still_holds_and_the_accounting_follows_it() -> None:
    b = LogBudget()
    m = LogModel(max_lines=100, budget=b)
    m.feed(b"".join(b"line %d\n" % i for i in range(1000)))
    assert list(m.lines) == [f"line {i}" for i in range(900, 1000)] and m.nbytes == _held(m) == b.total


def test_a_fleet_stays_within_the_budget_and_128_servers_within_300_mb() -> None:
    limit = 8 * 1024 * 1024
    b = LogBudget(limit=limit, per_server=8 * 1024 * 1024)
    data = _chunk() * 8  # ~160 KB a server, 20 MB in all: over twice the budget
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        models = []
        for _ in range(128):
            m = LogModel(budget=b)
            m.feed(data)
            models.append(m)
            assert b.total <= limit
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert b.total == sum(m.nbytes for m in models) == sum(map(_held, models))
    assert all(m.nbytes <= b.share() for m in models)
    assert all(m.lines[-1] == data.splitlines()[-1].decode() for m in models)
    # what a server costs beyond its kept lines (parser, stats, timeline), measured; with the default budget
    # a fleet of 128 stays within 300 MB
    overhead = max(0, grown - b.total) / 128
    assert b.total <= grown, "the accounting must not claim more than was allocated"
    assert FLEET_BYTES + 128 * overhead <= 300 * MB, (FLEET_BYTES, overhead)
    del models, m
    gc.collect()
    assert b.total == 0  # replaced or dropped logs leave the budget


def test_a_new_server_shrinks_everyones_share() -> None:
    b = LogBudget(limit=2 * 1024 * 1024, per_server=2 * 1024 * 1024)
    first = LogModel(budget=b)
    first.feed(_chunk() * 100)
    assert first.nbytes > 1024 * 1024  # alone, it may use the whole budget
    second = LogModel(budget=b)
    second.feed(_chunk() * 100)
    assert b.total <= b.limit and first.nbytes <= b.share() and second.nbytes <= b.share()
