"""Benchmark 8: CLI start-up, `--help` and `status --json` on a local sim host, against bare-process baselines.

Baselines, run interleaved with the console in the same rounds so a busy machine loads both alike:
`python -c pass` (the interpreter alone) for `--help`, and the sim host's `nvidia-smi` stand-in
followed by `python -c pass` (what `ssh host nvidia-smi` costs without the SSH) for `status --json`.
`--tree DIR` also times another checkout (e.g. `git worktree add /tmp/old HEAD~3`) in the same rounds,
for a before/after. The sim fleet has a router, which `status` reads through the controller; `status --json,
no routers` is the same host without it (one remote command, console.fleet.oneshot). The import profile (`python -X importtime`) names what `--help` loads.
Targets: `--help` within +300 ms of the interpreter; `status --json` within +1.0 s of the baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, Result, bench_parser, report

HELP_EXTRA_S = 0.3
STATUS_EXTRA_S = 1.0
HEAVY = ("asyncssh", "httpx", "textual", "pydantic")
QUERY = "--query-gpu=index,name,memory.used,memory.total,utilization.gpu --format=csv,noheader,nounits"


def timed(argv: list[str], cwd: Path) -> float:
    """Wall seconds of one run; a failing command is an error, not a fast figure."""
    t0 = time.perf_counter()
    p = subprocess.run(
        argv,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(cwd)),
    )
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:6])} exited {p.returncode}: {p.stderr.decode()[-300:]}")
    return dt


def import_profile(argv: list[str], cwd: Path) -> dict[str, object]:
    """Top-level import time (sum of the outermost modules' cumulative µs) and which heavy packages load."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(cwd)),
    )
    total_us, loaded = 0, set()
    for ln in p.stderr.splitlines():
        if not ln.startswith("import time:") or "|" not in ln:
            continue
        parts = ln.split("|")
        name = parts[2].rstrip()
        if not parts[1].strip().isdigit():
            continue  # the header line
        if not name.startswith("  "):  # an outermost import
            total_us += int(parts[1])
        if name.strip() in HEAVY:
            loaded.add(name.strip())
    return {"imports (ms)": round(total_us / 1000), "heavy loaded": sorted(loaded) or "none"}


def run(args: argparse.Namespace) -> Result:
    from console.sim.fleet import sim_down, sim_up

    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench8-") as d:
        toml = sim_up(d, hosts=("blackwell",))
        text = Path(toml).read_text()
        plain = Path(d) / "no-routers.toml"
        plain.write_text(text[: text.index("[routers.")] if "[routers." in text else text)
        smi = Path(d) / "blackwell" / "bin" / "nvidia-smi"
        try:
            cmds: dict[str, tuple[list[str], Path]] = {
                "python -c pass": ([py, "-c", "pass"], ROOT),
                "nvidia-smi stand-in + python -c pass": (
                    ["sh", "-c", f"{smi} {QUERY} >/dev/null && {py} -c pass"],
                    ROOT,
                ),
                "--help": ([py, "-m", "console", "--help"], ROOT),
                "status --json": ([py, "-m", "console", "--hosts", str(toml), "status", "--json"], ROOT),
                "status --json, no routers": ([py, "-m", "console", "--hosts", str(plain), "status", "--json"], ROOT),
            }
            if args.tree:
                tree = Path(args.tree).resolve()
                cmds["--help (tree)"] = ([py, "-m", "console", "--help"], tree)
                cmds["status --json (tree)"] = ([py, "-m", "console", "--hosts", str(toml), "status", "--json"], tree)
                cmds["status --json, no routers (tree)"] = (
                    [py, "-m", "console", "--hosts", str(plain), "status", "--json"],
                    tree,
                )
            for argv, cwd in cmds.values():  # warm: bytecode written, page cache filled, for each side alike
                timed(argv, cwd)
            times: dict[str, list[float]] = {k: [] for k in cmds}
            for _ in range(args.repeat):
                for k, (argv, cwd) in cmds.items():
                    times[k].append(timed(argv, cwd))
        finally:
            sim_down(d)
    med = {k: statistics.median(v) for k, v in times.items()}
    detail: dict[str, object] = {f"{k} median (s)": round(v, 3) for k, v in med.items()}
    detail |= {f"{k} max (s)": round(max(v), 3) for k, v in times.items()}
    detail["--help import profile"] = import_profile(["-m", "console", "--help"], ROOT)
    if args.tree:
        detail["--help import profile (tree)"] = import_profile(["-m", "console", "--help"], Path(args.tree))
    help_extra = med["--help"] - med["python -c pass"]
    status_extra = med["status --json"] - med["nvidia-smi stand-in + python -c pass"]
    figure = (
        f"--help {med['--help']:.2f} s (+{help_extra * 1000:.0f} ms over python), status --json "
        f"{med['status --json']:.2f} s (+{status_extra:.2f} s over nvidia-smi+python, "
        f"{med['status --json'] / med['nvidia-smi stand-in + python -c pass']:.1f}x; "
        f"{med['status --json, no routers']:.2f} s without the router)"
    )
    ok = help_extra <= HELP_EXTRA_S and status_extra <= STATUS_EXTRA_S
    return Result(
        "8 CLI start-up",
        figure,
        f"--help <= python +{HELP_EXTRA_S * 1000:.0f} ms, status --json <= baseline +{STATUS_EXTRA_S:.1f} s",
        ok,
        detail,
        f"{args.repeat} interleaved rounds",
    )


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__)
    ap.add_argument("--repeat", type=int, default=10, help="interleaved rounds (default 10)")
    ap.add_argument("--tree", metavar="DIR", help="another checkout to time side by side (before/after)")
    return report(run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
