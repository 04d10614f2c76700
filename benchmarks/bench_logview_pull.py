"""LogView.pull() cost on a full, rotating 20k-line buffer of real SGLang lines (30 new lines a pull, ~1000 lines/s).

Headless Textual app, the server screen's LogView alone; each pull's wall and CPU time is measured
around the call, plain, with a search active, and filtered. Baseline in the same run: the same pulls
on a 5,000-line buffer (a quarter; filtered, still more rows than the view); an incremental pull costs the same whatever the buffer holds (target: the
20k-line pull within 1.5x of it). `--tree DIR` times another checkout's LogView in a child process
in the same run (before/after).
Usage: python -m benchmarks.bench_logview_pull [--pulls N] [--tree DIR] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
SAMPLES = ROOT / "tests" / "samples" / "sglang-logs"
CAP = 20_000


def real_lines() -> list[str]:
    keep = [
        ln
        for p in sorted(SAMPLES.glob("*.log"))
        for ln in p.read_text(errors="replace").splitlines()
        if "Decode batch" in ln or "Prefill batch" in ln or "HTTP/1.1" in ln or "WARNING" in ln
    ]
    return keep or ["[2025-06-01 10:00:00] Decode batch. #running-req: 3, gen throughput (token/s): 90.1"]


async def measure(pulls: int, per_pull: int, cap: int = CAP) -> dict[str, dict[str, float]]:
    """{mode: {wall_ms_p50, wall_ms_p95, cpu_ms_mean}} of LogView.pull() (the console in sys.path)."""
    from textual.app import App, ComposeResult

    from console.sglang.benchstats import percentile
    from console.ui.widgets.log_view import LogView

    src = real_lines()
    buf: deque[str] = deque(maxlen=cap)
    state = {"count": 0, "i": 0}

    def add(n: int) -> None:
        for _ in range(n):
            buf.append(src[state["i"] % len(src)])
            state["i"] += 1
        state["count"] += n

    add(cap + 1000)

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield LogView(lambda: (buf, state["count"]))

    out: dict[str, dict[str, float]] = {}
    app = One()
    async with app.run_test(size=(200, 50)) as pilot:
        view = app.query_one(LogView)
        view.pull(force=True)
        await pilot.pause()
        for mode in ("plain", "search", "filtered"):
            if mode == "search":
                view.search("batch")
            if mode == "filtered":
                view.filtered = True
            await pilot.pause()
            walls, cpus = [], []
            for _ in range(pulls):
                add(per_pull)
                c0, t0 = time.thread_time(), time.perf_counter()
                view.pull()
                walls.append(time.perf_counter() - t0)
                cpus.append(time.thread_time() - c0)
                await pilot.pause()  # the frame it asked for, as between real pulls
            out[mode] = {
                "wall_ms_p50": round(1000 * (percentile(walls, 50) or 0), 3),
                "wall_ms_p95": round(1000 * (percentile(walls, 95) or 0), 3),
                "cpu_ms_mean": round(1000 * sum(cpus) / len(cpus), 3),
            }
    return out


def run(args: argparse.Namespace) -> object:
    from benchmarks.common import Result

    detail: dict[str, object] = {
        "console": asyncio.run(measure(args.pulls, args.per_pull)),
        "baseline: 5k-line buffer": asyncio.run(measure(args.pulls, args.per_pull, 5000)),
    }
    if args.tree:
        tree = Path(args.tree).resolve()
        p = subprocess.run(
            [sys.executable, str(HERE), "--inner", "--pulls", str(args.pulls), "--per-pull", str(args.per_pull)],
            cwd=tree,
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{ROOT}"),
        )
        if p.returncode:
            detail["tree"] = f"failed: {p.stderr.strip().splitlines()[-1:]}"
        else:
            detail["tree"] = json.loads(p.stdout.strip().splitlines()[-1])
    cur = detail["console"]
    assert isinstance(cur, dict)
    small = detail["baseline: 5k-line buffer"]
    assert isinstance(small, dict)
    modes = ("plain", "search", "filtered")
    ratio = max(cur[m]["cpu_ms_mean"] / max(small[m]["cpu_ms_mean"], 1e-6) for m in modes)
    worst = max(cur[m]["cpu_ms_mean"] for m in modes)
    fig = f"{worst:.3f} ms CPU a pull (worst mode), {ratio:.2f}x the same pull on a 5k-line buffer"
    if isinstance(detail.get("tree"), dict):
        old = max(detail["tree"][m]["cpu_ms_mean"] for m in ("plain", "search", "filtered"))  # type: ignore[index]
        fig += f"; tree {old:.3f} ms ({old / worst:.0f}x)"
    return Result(
        "- LogView pull",
        fig,
        "20k-line pull <= 1.5x the 5k-line pull",
        ratio <= 1.5,
        detail,
        f"{args.pulls} pulls of {args.per_pull} lines each mode, 20k-line buffer, 200x50",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pulls", type=int, default=100)
    ap.add_argument("--per-pull", type=int, default=30)
    ap.add_argument("--tree", metavar="DIR", help="another checkout to time side by side (before/after)")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="print the Result as one JSON line")
    a = ap.parse_args(argv)
    if a.inner:
        print(json.dumps(asyncio.run(measure(a.pulls, a.per_pull))))
        return 0
    r = run(a)
    print(r.to_json()) if a.json else r.print()  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    sys.exit(main())
