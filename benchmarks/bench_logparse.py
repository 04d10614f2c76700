"""Log parser throughput on the real samples, concatenated and repeated: prints lines/s (target >= 200k on one core).

Usage: .venv/bin/python benchmarks/bench_logparse.py [--lines N] [--chunk BYTES] [--profile]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from console.sglang.logparse import LogParser

SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "samples" / "sglang-logs"


def corpus(min_lines: int) -> tuple[bytes, int]:
    one = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in sorted(SAMPLES.glob("*.log")))
    lines_one = one.count(b"\n") + one.count(b"\r")
    reps = max(1, -(-min_lines // lines_one))
    return one * reps, lines_one * reps


def serving_corpus(min_lines: int) -> tuple[bytes, int]:
    """Only the runtime batch/access lines (what a long-running server's log is mostly made of)."""
    keep = [
        ln
        for p in sorted(SAMPLES.glob("*.log"))
        for ln in p.read_bytes().splitlines()
        if b"Decode batch" in ln or b"Prefill batch" in ln or b"HTTP/1.1" in ln
    ]
    one = b"\n".join(keep) + b"\n"
    reps = max(1, -(-min_lines // len(keep)))
    return one * reps, len(keep) * reps


def run(data: bytes, chunk: int) -> tuple[float, float, int]:
    """-> (CPU seconds of this thread, wall seconds, lines). CPU time is the figure: other load does not skew it."""
    p = LogParser()
    c0, t0 = time.thread_time(), time.perf_counter()
    for i in range(0, len(data), chunk):
        p.feed(data[i : i + chunk])
    p.close()
    p.snapshot()
    return time.thread_time() - c0, time.perf_counter() - t0, p.lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=400_000)
    ap.add_argument("--chunk", type=int, default=65536)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    for name, (data, _) in (("all samples", corpus(a.lines)), ("serving lines", serving_corpus(a.lines))):
        cpu, wall, lines = min(run(data, a.chunk) for _ in range(a.repeat))
        print(
            f"{name:14s} {lines:>9,d} lines {len(data) / 1e6:6.1f} MB  cpu {cpu:6.3f} s (wall {wall:6.3f} s)  "
            f"{lines / cpu:>10,.0f} lines/s  {len(data) / cpu / 1e6:6.1f} MB/s  (one core, CPU time)"
        )
    if a.profile:
        import cProfile
        import pstats

        data, _ = corpus(a.lines)
        cProfile.runctx("run(data, a.chunk)", globals(), {"data": data, "a": a, "run": run}, "/tmp/bench_logparse.prof")
        pstats.Stats("/tmp/bench_logparse.prof").sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
