"""Run every console benchmark in sequence, each in its own process with a time limit, and print a summary.

`python -m benchmarks.run_all` (about 14 minutes; `--quick` about 8). Each benchmark also runs
alone: `python -m benchmarks.bench_<name> --help`. Exit status 0 when every target is met.
`--busy N` runs N CPU-bound processes beside every benchmark: "other work running" made reproducible.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

from benchmarks.common import ROOT, Result, print_table

# (module, normal args, quick args, time limit in s) in the order the issue asks for: 6, 5, 7, 1, 3, 2, 4
BENCHMARKS: list[tuple[str, list[str], list[str], int]] = [
    ("bench_loadgen_ceiling", [], ["--requests", "128"], 120),
    ("bench_chat_ttft", [], ["--requests", "15"], 60),
    ("bench_demo_first_frame", ["--repeat", "3"], ["--repeat", "1"], 120),
    ("bench_log_latency", [], ["--lines", "30"], 90),
    ("bench_remote_cost", [], ["--seconds", "30", "--settle", "10"], 240),
    ("bench_console_cpu", ["--seconds", "60"], ["--seconds", "20"], 240),
    ("bench_keypress", [], ["--presses", "4", "--seconds", "25"], 180),
    ("bench_sim_tolerance", [], ["--concurrency", "1,16"], 120),
    ("bench_cli_startup", [], ["--repeat", "3"], 180),
    ("bench_status_ssh", [], ["--repeat", "2", "--hosts", "2"], 300),
    ("bench_logview_pull", [], ["--pulls", "30"], 120),
    (
        "bench_host_growth",
        [],
        [
            "--counts",
            "4,16",
            "--seconds",
            "12",
            "--settle",
            "15",
            "--local-counts",
            "64",
            "--local-seconds",
            "10",
            "--presses",
            "3",
        ],
        360,
    ),
]


BUSY_LOOP = "while True: pass"


@contextlib.contextmanager
def other_work(n: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """n CPU-bound processes (a bare Python loop, normal priority) for the duration: the other engineers' test suites
    this machine is shared with, as one steady, repeatable load instead of whatever ran at the time."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", BUSY_LOOP],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def run_one(module: str, args: list[str], limit: int) -> Result:
    """One benchmark in a child process (its own process group); its last stdout line is the Result JSON.

    A benchmark that runs past its limit or fails is a MISS, never a SKIP: it did not show its target met.
    SKIP stays for a benchmark that itself reports a missing component.
    """
    t0 = time.monotonic()
    load0 = os.getloadavg()[0]
    p = subprocess.Popen(
        [sys.executable, "-m", f"benchmarks.{module}", *args, "--json"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)  # its sim hosts, sshd and writers too, not just the child
        p.communicate()
        return Result(module, "timed out", "-", False, note=f"killed after {limit} s")
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        tail = (err or out).strip().splitlines()[-3:]
        return Result(module, "failed", "-", False, note=" | ".join(tail))
    d = json.loads(lines[-1])
    r = Result(**d)
    r.detail["wall (s)"] = round(time.monotonic() - t0, 1)
    r.detail["load average (1 min) before / after"] = (round(load0, 2), round(os.getloadavg()[0], 2))
    return r


def calibration(lines: int = 200_000) -> dict[str, float]:
    """This machine's log-parser rate (benchmarks/bench_logparse.py, one core, CPU time): the scale every
    figure of the run is read against (the README's figures were taken where it parsed ~310k lines/s)."""
    from benchmarks.bench_logparse import corpus, serving_corpus
    from benchmarks.bench_logparse import run as parse

    out = {}
    for name, (data, _) in (("mixed", corpus(lines)), ("serving", serving_corpus(lines))):
        cpu, _wall, n = min(parse(data, 65536) for _ in range(2))
        out[f"{name} lines/s"] = round(n / cpu)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter windows (about 8 minutes)")
    ap.add_argument("--only", nargs="*", metavar="NAME", help="run only these (e.g. bench_chat_ttft)")
    ap.add_argument("--json", metavar="PATH", help="also write every Result to this JSON file")
    ap.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="N CPU-bound processes run beside every benchmark (after the calibration)",
    )
    a = ap.parse_args(argv)
    results: list[Result] = []
    t0 = time.monotonic()
    cal = calibration()
    cal_line = (
        f"calibration: this machine parses {cal['mixed lines/s']:,} lines/s mixed, "
        f"{cal['serving lines/s']:,} serving lines/s (one core, CPU time; README figures: ~310k / ~395k)"
    )
    busy_line = (
        f"other work: {a.busy} CPU-bound process{'es' if a.busy > 1 else ''} ran beside every benchmark "
        f"(--busy {a.busy}) on this machine's {os.cpu_count()} cores"
        if a.busy
        else ""
    )
    print(cal_line, flush=True)
    if busy_line:
        print(busy_line, flush=True)
    with other_work(a.busy):
        for module, normal, quick, limit in BENCHMARKS:
            if a.only and module not in a.only:
                continue
            print(f"--- {module} ...", flush=True)
            r = run_one(module, quick if a.quick else normal, limit)
            if a.busy:
                r.detail["other work (CPU-bound processes)"] = a.busy
            r.print()
            results.append(r)
    print(f"\n=== summary ({time.monotonic() - t0:.0f} s) ===")
    print(cal_line)
    if busy_line:
        print(busy_line)
    print_table(results)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(
                {"calibration": cal, "busy": a.busy, "results": [json.loads(r.to_json()) for r in results]}, f, indent=2
            )
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
