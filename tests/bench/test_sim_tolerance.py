"""The load generator against a real sim server: its figures agree with what the server itself counted and timed.

Checked per level against the server's own /metrics for the same requests (`servertruth`): exact request and token
counts, C requests really in flight (Little's law on the server's clock), e2e/TTFT/ITL consistent with the server's
histograms (ITL, whose median is a figure of the machine's load, is unit-tested in test_benchstats). These hold however busy the machine is. How close the measured rate comes to the sim's documented
formula is a figure: `python -m benchmarks.bench_sim_tolerance`.
"""

from __future__ import annotations

from pathlib import Path

from console.sglang.bench import BenchSpec, LoadGenerator
from tests.bench.servertruth import Truth, scrape, settle
from tests.bench.simserver import sim_server

RATE = 8000.0
OUTPUT_LEN = 128


async def test_measured_figures_agree_with_the_servers_own_counters(tmp_path: Path) -> None:
    problems: list[str] = []
    with sim_server(tmp_path, RATE) as srv:
        spec = BenchSpec(srv.url, concurrency=(1, 16, 32), input_len=16, output_len=OUTPUT_LEN)
        async with LoadGenerator(spec) as g:
            await g.warmup()
            settle(srv.url)
            for c in spec.concurrency:
                before = scrape(srv.url)
                lv = await g.run_level(c)
                truth = Truth.between(before, scrape(srv.url))
                assert lv.errors == 0, lv.error_examples
                assert lv.output_tokens == lv.requests * OUTPUT_LEN
                problems += truth.check_level(lv.public() | {"output_tokens": lv.output_tokens}, OUTPUT_LEN)
            assert g.fixed_output_len
    assert not problems, problems
