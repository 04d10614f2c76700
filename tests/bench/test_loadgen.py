"""The load generator against the raw fake SSE peer: token counts, fixed lengths, fallbacks, errors, history."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.fakesse import FakeOptions, FakeSSEServer
from console.sglang.bench import (
    BenchSpec,
    LoadGenerator,
    append_record,
    load_records,
    make_prompts,
    make_record,
    run_sweep,
)


@pytest.fixture
def fake() -> Iterator[FakeSSEServer]:
    srv = FakeSSEServer().start()
    yield srv
    srv.stop()


async def test_counts_usage_tokens_and_runs_every_level(fake: FakeSSEServer) -> None:
    seen: list[tuple[int, int, int]] = []
    spec = BenchSpec(fake.url, concurrency=(1, 4), input_len=8, output_len=12, num_prompts=2)
    r = await run_sweep(spec, progress=lambda c, d, n: seen.append((c, d, n)))
    assert r.model == "fake" and r.fixed_output_len
    assert "api_key" not in r.server_info and r.server_info["tp_size"] == 1
    assert [lv.concurrency for lv in r.levels] == [1, 4]
    assert [lv.requests for lv in r.levels] == [2, 2]  # num_prompts is requests per level, exactly
    for lv in r.levels:
        assert lv.errors == 0 and lv.output_tokens == lv.requests * 12
        assert lv.ttft_p50_s is not None and lv.itl_p50_s is not None
    assert seen[0] == (1, 0, 2) and seen[-1] == (4, 2, 2)
    assert fake.requests == 1 + 4


async def test_falls_back_to_counting_chunks_without_usage() -> None:
    srv = FakeSSEServer(FakeOptions(send_usage=False)).start()
    try:
        async with LoadGenerator(BenchSpec(srv.url, output_len=7, warmup=False)) as g:
            await g.discover_model()
            lv = await g.run_level(2, 4)
    finally:
        srv.stop()
    assert lv.requests == 4 and lv.output_tokens == 28  # 4 requests asked, 4 sent


async def test_ignore_eos_rejected_turns_it_off() -> None:
    srv = FakeSSEServer(FakeOptions(accept_ignore_eos=False, eos_after=3)).start()
    try:
        r = await run_sweep(BenchSpec(srv.url, concurrency=(2,), output_len=10))
    finally:
        srv.stop()
    assert not r.fixed_output_len
    assert r.levels[0].errors == 0 and r.levels[0].output_tokens == 10 * 3


async def test_unreachable_server_counts_errors() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with LoadGenerator(BenchSpec(f"http://127.0.0.1:{port}", warmup=False, model="m")) as g:
        lv = await g.run_level(1, 5)
    assert lv.errors == 5 and lv.output_throughput_tok_s == 0.0
    assert lv.error_examples and "ConnectError" in lv.error_examples[0]


async def test_http_error_status_is_an_error(fake: FakeSSEServer) -> None:
    async with LoadGenerator(BenchSpec(fake.url + "/nope", warmup=False, model="m")) as g:
        s = await g.request(g.body("hi"))
    assert not s.ok and s.error.startswith("HTTP 404")


def test_prompts_distinct_and_sized() -> None:
    ps = make_prompts(50, 100)
    assert len(set(ps)) == 50
    assert all(95 <= len(p.split()) <= 101 for p in ps)
    assert make_prompts(3, 10, seed=1) == make_prompts(3, 10, seed=1)


async def test_history_roundtrip(tmp_path: Path, fake: FakeSSEServer) -> None:
    spec = BenchSpec(fake.url, concurrency=(1,), output_len=4)
    r = await run_sweep(spec)
    rec = make_record(
        server="p@h:gpu0",
        preset="p",
        url=fake.url,
        engine="console",
        levels=r.levels,
        spec=spec,
        server_args=["--tp-size", "1"],
        gpu_model="NVIDIA H200",
        server_info=r.server_info,
    )
    path = tmp_path / "state" / "bench.jsonl"
    append_record(rec, path)
    path.open("a").write("{torn\n")
    append_record(rec, path)
    got = load_records(path)
    assert len(got) == 2 and got[0]["gpu_model"] == "NVIDIA H200"
    assert got[0]["levels"][0]["concurrency"] == 1 and got[0]["server_args"] == ["--tp-size", "1"]
    assert load_records(tmp_path / "missing.jsonl") == []


async def test_decode_batch_peer_streams_one_token_per_step() -> None:
    """The benchmarks' decode-batch fake (one token per running request per step, each its own write)."""
    srv = FakeSSEServer(FakeOptions(step_s=0.005)).start()
    try:
        async with LoadGenerator(BenchSpec(srv.url, output_len=6, warmup=False)) as g:
            await g.discover_model()
            lv = await g.run_level(4, 8)
    finally:
        srv.stop()
    assert lv.errors == 0 and lv.output_tokens == 8 * 6 and srv.tokens_sent == 8 * 6
    # one token per request per step: each of the 4 slots ran two requests of 6 tokens in turn, so at least 12 steps,
    # and steps are paced from the batcher's start (a late step is caught up, never skipped): the level took at
    # least 12 steps' time. The client-side gaps are figures (a starved client reads several tokens at once).
    assert srv.steps >= 12 and lv.duration_s >= 12 * 0.005
    assert lv.itl_p50_s is not None  # measured (a starved client can read a step's tokens at one instant: 0.0)
