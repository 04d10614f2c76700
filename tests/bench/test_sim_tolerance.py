"""The load generator against a real sim server, whose batcher has a documented token-rate formula.

Tolerance: measured output tok/s within ±15% of `Engine.total_tok_s(C)` at every level; ITL p50
within ±25% of one decode iteration `(C + H) / P`; exactly output_len tokens per request (ignore_eos).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from console.sglang.bench import BenchSpec, run_sweep
from console.sim.engine import Engine
from tests.bench.simserver import sim_server

TOLERANCE = 0.15
RATE = 8000.0
OUTPUT_LEN = 128


def expected(c: int, half: float) -> tuple[float, float]:
    """(total tok/s, iteration seconds) from the sim's own formula."""
    e = Engine(peak_per_gpu=RATE, tp=1, half=half, max_running=128, max_tokens=10**6, prefix="", hybrid=False,
               mamba_slots=1)
    return e.total_tok_s(c), e.iteration_time(c)


async def test_measured_throughput_matches_sim_formula(tmp_path: Path) -> None:
    with sim_server(tmp_path, RATE) as srv:
        r = await run_sweep(BenchSpec(srv.url, concurrency=(1, 16, 32), input_len=16, output_len=OUTPUT_LEN))
    assert r.fixed_output_len
    for lv in r.levels:
        tok_s, it_s = expected(lv.concurrency, srv.half_concurrency)
        assert lv.errors == 0, lv.error_examples
        assert lv.output_tokens == lv.requests * OUTPUT_LEN
        assert lv.output_throughput_tok_s == pytest.approx(tok_s, rel=TOLERANCE), lv
        assert lv.itl_p50_s == pytest.approx(it_s, rel=0.25), lv
        assert lv.ttft_p50_s is not None and lv.ttft_p50_s < 20 * it_s
