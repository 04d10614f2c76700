"""Shared helpers for the console's own performance benchmarks: results, percentiles, CPU pinning, sim servers.

Every benchmark script exposes `run(args) -> Result` and a `main()` that prints it, so
`benchmarks/run_all.py` can run them in sequence and print one summary table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from console.sglang.benchstats import percentile

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Result:
    """One benchmark's outcome: the headline figure, its target, pass/fail, and the side-by-side detail."""

    name: str
    figure: str
    target: str
    ok: bool | None
    """None when the benchmark could not run (a component missing); see `note`."""
    detail: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def print(self) -> None:
        mark = {True: "PASS", False: "MISS", None: "SKIP"}[self.ok]
        print(f"[{mark}] {self.name}: {self.figure}  (target {self.target})")
        for k, v in self.detail.items():
            print(f"    {k}: {v}")
        if self.note:
            print(f"    note: {self.note}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)


def pcts(values: list[float], scale: float = 1000.0, qs: tuple[int, ...] = (50, 95)) -> dict[str, float | None]:
    """{'p50': .., 'p95': ..} in ms by default (scale 1000), rounded for printing."""
    out: dict[str, float | None] = {}
    for q in qs:
        p = percentile(values, q)
        out[f"p{q}"] = None if p is None else round(p * scale, 3)
    return out


def pin(cpu: int | None) -> None:
    """Pin this process to one CPU (best effort), so 'per core' figures mean one core."""
    if cpu is None:
        return
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {cpu % (os.cpu_count() or 1)})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout_s: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    """Poll url until it answers 200 (or raise, with the process' exit when it died)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2, trust_env=False).status_code == 200:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer 200 within {timeout_s} s")


@dataclass
class SimProc:
    url: str
    proc: subprocess.Popen
    log: Path


@contextlib.contextmanager
def sim_server(
    root: Path,
    token_rate: str = "inf",
    cpu: int | None = None,
    preset: str = "qwen36-bench",
    extra_env: dict[str, str] | None = None,
) -> Iterator[SimProc]:
    """One sim SGLang server (blackwell host, `preset`) on a free port; DFLASH_SIM_TOKEN_RATE=inf is zero-delay."""
    from console.config import load_fleet
    from console.sglang.command import plan_launch
    from console.sim.fleet import sim_down, sim_up

    toml = sim_up(root, hosts=("blackwell",), time_scale=0.01)
    plan = plan_launch(load_fleet(toml), preset, "perf")[0]
    port = free_port()
    argv = list(plan.argv)
    argv[argv.index("--port") + 1] = str(port)
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu % (os.cpu_count() or 1)), *argv]
    env = dict(os.environ) | plan.env | {"DFLASH_SIM_TOKEN_RATE": token_rate} | (extra_env or {})
    log = root / f"server-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health", 60, proc)
        yield SimProc(url, proc, log)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
        sim_down(root)


@contextlib.contextmanager
def fake_server_proc(cpu: int | None = None, options: str = "") -> Iterator[str]:
    """The raw fake SSE peer (benchmarks/fakesse.py) in its own process; `options` are FakeOptions kwargs."""
    port = free_port()
    code = (
        "import asyncio,sys; from benchmarks.fakesse import FakeSSEServer, FakeOptions; "
        f"asyncio.run(FakeSSEServer(FakeOptions({options}), port={port}).serve())"
    )
    argv = [sys.executable, "-c", code]
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu % (os.cpu_count() or 1)), *argv]
    proc = subprocess.Popen(argv, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health", 20, proc)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def bench_parser(doc: str | None) -> argparse.ArgumentParser:
    """A benchmark's argument parser: its docstring's first line, and `--json` (run_all reads that line)."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    ap.add_argument("--json", action="store_true", help="print the Result as one JSON line")
    return ap


def report(run: Callable[[argparse.Namespace], Result], args: argparse.Namespace) -> int:
    """Run the benchmark and print its Result (one JSON line with --json); exit status 0."""
    r = run(args)
    print(r.to_json()) if args.json else r.print()
    return 0


def print_table(results: list[Result]) -> None:
    """The run_all summary: one row per benchmark."""
    rows = [("#", "benchmark", "figure", "target", "result")]
    for r in results:
        rows.append(
            (
                r.name.split(" ", 1)[0],
                r.name.split(" ", 1)[-1],
                r.figure,
                r.target,
                {True: "PASS", False: "MISS", None: "SKIP"}[r.ok],
            )
        )
    widths = [max(len(str(row[i])) for row in rows) for i in range(5)]
    for i, row in enumerate(rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
