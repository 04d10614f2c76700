"""Benchmark 8b: `status --json` over real sshd against `ssh host nvidia-smi`, for several hosts at once.

N sim hosts, each behind its own OpenSSH sshd (benchmarks.harness.ssh_sim_fleet), one TP=1 server
launched on each, so status has GPUs to join, servers to re-attach and /health to ask through the
SSH tunnel. The baseline is what a shell script would do: `ssh host nvidia-smi --query-gpu=...` to
every host in parallel (fresh connections, like status's). Interleaved rounds, so a busy machine
loads both alike. `--tree DIR` also times another checkout's `status --json` in the same rounds (e.g.
`git worktree add /tmp/old HEAD~1`), for a before/after. Target: status within baseline + 1.0 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.bench_console_cpu import launch
from benchmarks.common import ROOT, Result, bench_parser, report
from benchmarks.harness import ssh_sim_fleet

EXTRA_S = 1.0
QUERY = "nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu --format=csv,noheader,nounits"


def ssh_argv(host: object) -> list[str]:
    s = host.ssh  # type: ignore[attr-defined]
    return [
        "ssh",
        "-F",
        "/dev/null",
        "-i",
        str(s.client_key),
        "-o",
        f"UserKnownHostsFile={s.known_hosts}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-p",
        str(s.port),
        f"{s.user}@{s.address}",
        QUERY,
    ]


def timed_parallel(argvs: list[list[str]], cwd: Path = ROOT) -> float:
    """Wall seconds until every command finished (all started at once); a failure is an error."""
    t0 = time.perf_counter()
    ps = [
        subprocess.Popen(
            a, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd, env=dict(os.environ, PYTHONPATH=str(cwd))
        )
        for a in argvs
    ]
    errs = [p.communicate(timeout=120)[1] for p in ps]
    dt = time.perf_counter() - t0
    bad = [(p.returncode, e.decode()[-300:]) for p, e in zip(ps, errs, strict=True) if p.returncode not in (0,)]
    if bad:
        raise RuntimeError(f"exited {bad[0][0]}: {bad[0][1]}")
    return dt


def run(args: argparse.Namespace) -> Result:
    with ssh_sim_fleet(args.hosts) as fleet:
        toml, names, _paths = asyncio.run(launch(fleet, 1))
        hosts = list(fleet.hosts.values())  # type: ignore[attr-defined]
        base = [ssh_argv(h) for h in hosts]
        status = [[sys.executable, "-m", "console", "--hosts", str(toml), "status", "--json"]]
        tree = Path(args.tree).resolve() if args.tree else None
        timed_parallel(base), timed_parallel(status)  # warm: page cache, bytecode, sshd's first fork
        if tree is not None:
            timed_parallel(status, tree)
        tb, ts, tt = [], [], []
        for _ in range(args.repeat):
            tb.append(timed_parallel(base))
            ts.append(timed_parallel(status))
            if tree is not None:
                tt.append(timed_parallel(status, tree))
        out = subprocess.run(status[0], capture_output=True, text=True, cwd=ROOT, timeout=120).stdout
    mb, ms = statistics.median(tb), statistics.median(ts)
    import json

    doc = json.loads(out)
    seen = {
        "hosts up": sum(h["state"] == "up" for h in doc["hosts"]),
        "GPUs": sum(len(h["gpus"]) for h in doc["hosts"]),
        "servers with /health ok": sum(s["health"] == "ok" for s in doc["servers"]),
    }
    detail: dict[str, object] = {
        "hosts": args.hosts,
        "servers": len(names),
        f"ssh host nvidia-smi x{args.hosts} in parallel median (s)": round(mb, 3),
        "status --json median (s)": round(ms, 3),
        "max (s)": {"ssh": round(max(tb), 3), "status": round(max(ts), 3)},
        "the last status saw": seen,
    }
    if tt:
        detail[f"status --json of {args.tree} median (s)"] = round(statistics.median(tt), 3)
        detail["max (s)"]["tree"] = round(max(tt), 3)  # type: ignore[index]
    ok = ms - mb <= EXTRA_S and seen["hosts up"] == args.hosts and seen["servers with /health ok"] == len(names)
    return Result(
        "8b status --json over sshd",
        f"{ms:.2f} s for {args.hosts} hosts vs {mb:.2f} s for ssh+nvidia-smi (+{ms - mb:.2f} s)",
        f"<= baseline +{EXTRA_S:.1f} s, every host and server seen",
        ok,
        detail,
        f"{args.repeat} interleaved rounds",
    )


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tree", metavar="DIR", help="another checkout whose status --json to time in the same rounds")
    return report(run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
