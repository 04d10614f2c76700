"""Sim fidelity: the load generator's measured tok/s and ITL against the sim batcher's documented rate formula.

A figure, not a test: on an idle machine the sim tracks `Engine.total_tok_s(C)` within a few per cent; on a starved
one it falls behind (it cannot produce tokens faster than it gets CPU). The suite checks the generator against the
server's own counters instead (tests/bench/test_sim_tolerance.py), which holds at any load. Target: measured/formula
within ±15 % at every level, ITL p50 within ±25 % of one decode iteration.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from benchmarks.common import Result, bench_parser, report, sim_server
from console.sglang.bench import BenchSpec, LoadGenerator
from console.sim.engine import Engine
from console.sim.spec import BLACKWELL_SPEC

RATE = 8000.0


def formula(c: int) -> tuple[float, float]:
    """(total tok/s, one decode iteration in s) from the sim's own formula at concurrency c."""
    e = Engine(
        peak_per_gpu=RATE,
        tp=1,
        half=BLACKWELL_SPEC.half_concurrency,
        max_running=128,
        max_tokens=10**6,
        prefix="",
        hybrid=False,
        mamba_slots=1,
    )
    return e.total_tok_s(c), e.iteration_time(c)


async def measure(url: str, levels: tuple[int, ...], output_len: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    async with LoadGenerator(BenchSpec(url, concurrency=levels, input_len=16, output_len=output_len)) as g:
        await g.warmup()
        for c in levels:
            lv = await g.run_level(c)
            tok_s, it_s = formula(c)
            out[f"C={c}"] = {
                "measured_tok_s": round(lv.output_throughput_tok_s, 1),
                "formula_tok_s": round(tok_s, 1),
                "ratio": round(lv.output_throughput_tok_s / tok_s, 3),
                "itl_ratio": round((lv.itl_p50_s or 0) / it_s, 3),
                "errors": lv.errors,
            }
    return out


def run(args: argparse.Namespace) -> Result:
    levels = tuple(int(x) for x in args.concurrency.split(","))
    with tempfile.TemporaryDirectory(prefix="bench-simtol-") as d, sim_server(Path(d), str(RATE)) as sim:
        detail = asyncio.run(measure(sim.url, levels, args.output_len))
    ratios = [v["ratio"] for v in detail.values()]
    itls = [v["itl_ratio"] for v in detail.values()]
    ok = (
        all(0.85 <= r <= 1.15 for r in ratios)
        and all(0.75 <= r <= 1.25 for r in itls)
        and not any(v["errors"] for v in detail.values())
    )
    fig = "measured/formula tok/s " + ", ".join(f"{r:.2f}" for r in ratios) + f" at C={args.concurrency}"
    return Result("sim fidelity (rate formula)", fig, "within ±15 % (ITL ±25 %)", ok, detail)


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__)
    ap.add_argument("--concurrency", default="1,16,32")
    ap.add_argument("--output-len", type=int, default=128)
    return report(run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
