"""Benchmark 6: the load generator's ceiling, streamed tokens/s on one core against zero-delay servers.

The generator is pinned to core 0 and the server to core 1. Against the zero-delay sim
(DFLASH_SIM_TOKEN_RATE=inf) the sim itself may be the slower side, so the headline is tokens per
second of the generator's own CPU time; against the raw fake peer the generator is saturated.
Target: >= 20k tok/s, so it is never the bottleneck of an 8-GPU node.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Result, fake_server_proc, pin, sim_server
from console.sglang.bench import BenchSpec, LoadGenerator

TARGET = 20_000.0


async def measure(url: str, concurrency: int, output_len: int, requests: int) -> dict[str, float]:
    """One closed-loop level; wall tok/s, generator CPU %, and tokens per generator CPU-second."""
    spec = BenchSpec(url, concurrency=(concurrency,), input_len=32, output_len=output_len, num_prompts=requests)
    async with LoadGenerator(spec) as g:
        await g.warmup()
        cpu0, t0 = time.process_time(), time.perf_counter()
        lv = await g.run_level(concurrency)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    return {"wall_tok_s": round(lv.output_tokens / wall), "client_cpu_pct": round(100 * cpu / wall, 1),
            "tok_per_cpu_s": round(lv.output_tokens / cpu) if cpu > 0 else 0.0, "tokens": lv.output_tokens,
            "errors": lv.errors, "itl_p50_ms": round((lv.itl_p50_s or 0) * 1000, 3)}


def run(args: argparse.Namespace) -> Result:
    pin(0)
    detail: dict[str, object] = {}
    with fake_server_proc(cpu=1) as url:
        detail["raw fake peer"] = asyncio.run(measure(url, args.concurrency, args.output_len, args.requests))
    note = ""
    try:
        with tempfile.TemporaryDirectory(prefix="bench6-") as d, sim_server(Path(d), "inf", cpu=1) as sim:
            detail["zero-delay sim"] = asyncio.run(measure(sim.url, args.concurrency, args.output_len, args.requests))
    except (RuntimeError, OSError) as e:
        note = f"sim endpoint unavailable: {e}"
    sim_fig = detail.get("zero-delay sim")
    head = sim_fig if isinstance(sim_fig, dict) else detail["raw fake peer"]
    assert isinstance(head, dict)
    ceiling = float(head["tok_per_cpu_s"])
    src = "zero-delay sim" if isinstance(sim_fig, dict) else "raw fake peer"
    if isinstance(sim_fig, dict) and sim_fig["client_cpu_pct"] < 90:
        note = (f"the sim served {sim_fig['wall_tok_s']:,} tok/s with the generator at {sim_fig['client_cpu_pct']}% "
                "of its core: the server side is the limit there; the headline is tokens per generator CPU-second")
    return Result("6 load-generator ceiling", f"{ceiling:,.0f} tok/s per core ({src})", ">= 20,000 tok/s",
                  ceiling >= TARGET and not head["errors"], detail, note)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=512)
    ap.add_argument("--requests", type=int, default=320)
    ap.add_argument("--json", action="store_true", help="print the Result as one JSON line")
    args = ap.parse_args(argv)
    r = run(args)
    print(r.to_json()) if args.json else r.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
