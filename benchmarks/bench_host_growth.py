"""Benchmark 9: the console's CPU per additional watched host, and key press -> frame with 64 hosts.

Idle hosts: 8 sim GPUs each, no servers, so the console's only work per host is its telemetry
(`nvidia-smi -lms` every poll_ms; 1 s, the console's default), its process loop and its (empty)
log tail. The real `dflash-console` runs in a tmux terminal, 200x60 by default (a user's size:
the panes that do not fit are off screen, which is part of what a host costs a real user).

Growth (the figure): sim hosts behind real OpenSSH sshd (`ssh_sim_fleet`: own network and PID
namespaces), one fleet of the largest count; the console is started once per count in `--counts`
(default 4 and 16) on a hosts.toml naming that many of them, left to settle
(`TmuxConsole.settle`: until its CPU stops falling), then its own CPU (utime + stime) is read over
`--seconds`. The figure is the least-squares slope of that CPU against the host count, % of one
core per host. sshd stops at 16-20: the test network has 20 addresses a run
(tests/fixtures/testnet.py), and 64 namespaced sshd hosts (with their agents) are too heavy for
this 2-core machine.

64 hosts responsive: 64 sim hosts on the `local` transport (the same remote commands as local
subprocesses, no SSH, so the per-host SSH cost is missing), beside 4 local hosts as the baseline
(`--local-counts`, default 4,64; their slope is reported too). The hosts' stand-ins (nvidia-smi
loop, agents: the console's child processes, reported) run on this machine and compete with the
console for its two cores, so this is the harder case for latency. After the settle and a CPU
window (`--local-seconds`), keys as in bench 4: right/left (focus moves), `?` (help opens),
escape (it closes); latency is send-keys -> the first `capture-pane` showing the change (tmux's
capture, ~2-5 ms, included). The same presses run at the smallest and largest sshd counts.
Under load the latency is mostly waiting for a core, so each run also reports the console's CPU
per key (the presses' CPU less the idle rate over their wall time), which load barely moves, and
the hosts the console declared down on any captured screen (a starved link looks dead to its
6 s watchdog: reconnects are bursts of CPU).
Targets: growth <= 0.3 % of a core per host; with 64 hosts key -> frame p95 <= 50 ms (bench 4's).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.bench_keypress import presses
from benchmarks.common import Result, bench_parser, pcts, report
from benchmarks.harness import (
    TmuxConsole,
    contention,
    cpu_by_command,
    cpu_seconds,
    isolated_env,
    machine_busy,
    rss_mib,
    ssh_sim_fleet,
)
from console.sglang.benchstats import percentile
from console.sim.spec import BLACKWELL8_SPEC

TARGET_PCT_PER_HOST = 0.3
TARGET_MS = 50.0
MAX_SSHD_HOSTS = 20
PANE_TITLE = re.compile(r"GPU\d+ ")
DOWN = re.compile(r"host (\S+) is down|✖ (\S+)\s+down")
"""A host the console declared down: its toast, or its band's mark."""


class Watched(TmuxConsole):
    """TmuxConsole noting every host it sees declared down on any screen the benchmark captures."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.down: set[str] = set()

    def screen(self) -> str:
        text = super().screen()
        if "down" in text:
            self.down.update(a or b for a, b in DOWN.findall(text))
        return text


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys on xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def descendants(root: int) -> dict[int, tuple[int, float]]:
    """Every live descendant of root: pid -> (start time in ticks, CPU seconds so far)."""
    kids: dict[int, list[tuple[int, int, float]]] = {}
    tck = os.sysconf("SC_CLK_TCK")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            f = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(f[1]), []).append((int(d), int(f[19]), (int(f[11]) + int(f[12])) / tck))
    out: dict[int, tuple[int, float]] = {}
    todo = [root]
    while todo:
        for pid, start, cpu in kids.get(todo.pop(), []):
            out[pid] = (start, cpu)
            todo.append(pid)
    return out


def kill_leftovers(seen: dict[int, tuple[int, float]]) -> int:
    """SIGKILL those of `seen` still alive (same pid and start time): a console's remote commands on the
    local transport run in their own sessions, so a console killed by tmux could leave them behind."""
    n = 0
    for pid, (start, _) in seen.items():
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]) == start:
                os.kill(pid, signal.SIGKILL)
                n += 1
    return n


def windows(con: Watched, seconds: float, step: float = 5.0) -> tuple[float, list[float]]:
    """The console's CPU over `seconds` (% of a core) and the same in `step`-second pieces (to show the noise);
    the screen is captured once a second meanwhile (hosts declared down)."""
    parts: list[float] = []
    c0, t0 = cpu_seconds(con.pid), time.monotonic()
    end = t0 + seconds
    while (now := time.monotonic()) < end - 0.01:
        c, t = cpu_seconds(con.pid), now
        stop = min(now + step, end)
        while (left := stop - time.monotonic()) > 0:
            time.sleep(min(1.0, left))
            con.screen()
        parts.append(round(100.0 * (cpu_seconds(con.pid) - c) / (time.monotonic() - t), 1))
    return 100.0 * (cpu_seconds(con.pid) - c0) / (time.monotonic() - t0), parts


def profile_path(base: str | None, label: str) -> str | None:
    """`X.pyisession` -> `X.LABEL.pyisession` (one profile per console run)."""
    if not base:
        return None
    p = Path(base)
    return str(p.with_name(f"{p.stem}.{label}{p.suffix}"))


def watch(toml: Path, hosts: int, args: argparse.Namespace, label: str, seconds: float, keys: int) -> dict[str, Any]:
    """One console run on `toml` (hosts idle): settle, a CPU window, then `keys` rounds of presses."""
    con = Watched(toml, size=(args.cols, args.rows), profile=profile_path(args.profile, label), entry=args.entry)
    seen: dict[int, tuple[int, float]] = {}
    con.start()
    try:
        up = con.wait_text(f"{hosts * 8} GPUs", 30 + hosts)  # every host's first GPU sample is in
        settle = con.settle(max_s=args.settle, window_s=3)
        before = (cpu_by_command(), machine_busy())
        kids0 = descendants(con.pid)
        load = os.getloadavg()[0]
        cpu, parts = windows(con, seconds)
        kids1 = descendants(con.pid)
        box = contention(before, seconds)
        kids_cpu = sum(c - kids0.get(p, (0, 0.0))[1] for p, (_, c) in kids1.items())
        shown = len(PANE_TITLE.findall(con.screen()))
        out: dict[str, Any] = {
            "hosts": hosts,
            "all GPUs seen (s)": round(up, 1),
            "settle windows (%)": settle,
            "console CPU (% of a core)": round(cpu, 2),
            "5 s pieces (%)": parts,
            "console's child processes (% of a core)": round(100.0 * kids_cpu / seconds, 1),
            "GPU panes on screen": shown,
            "load average (1 min) at window start": round(load, 2),
            "machine": box,
        }
        if keys:
            c0, t0 = cpu_seconds(con.pid), time.monotonic()
            got, lost = presses(con, keys)
            busy, wall = cpu_seconds(con.pid) - c0, time.monotonic() - t0
            n = sum(len(v) for v in got.values()) + lost
            # the CPU a key costs, load-independent: the presses' CPU less the idle rate over their wall time
            out["console CPU per key (ms, idle rate subtracted)"] = round(
                1000 * (busy - wall * cpu / 100) / max(n, 1), 1
            )
            every = [x for v in got.values() for x in v]
            out["keys ms"] = {"all": pcts(every), **{k: pcts(v) for k, v in got.items()}}
            out["key p95 ms"] = round((percentile(every, 95) or float("inf")) * 1000, 1)
            out["presses lost (no frame within 5 s)"] = lost
        rss, hwm = rss_mib(con.pid)
        out["console RSS / peak (MiB)"] = (round(rss), round(hwm))
        out["hosts seen down (from start)"] = sorted(con.down, key=lambda h: (len(h), h))
        return out
    finally:
        if con.pid:
            seen = descendants(con.pid)  # the local hosts' commands, to end if the console leaves them
        con.stop()
        kill_leftovers(seen)


def sshd_toml(fleet: Any, k: int, poll_ms: int) -> Path:
    """hosts.toml naming the first k hosts of the sshd fleet."""
    parts = [f"[console]\npoll_ms = {poll_ms}\n"]
    parts += [h.section() for h in list(fleet.hosts.values())[:k]]
    p = fleet.root / f"hosts-{k}.toml"
    p.write_text("\n".join(parts))
    return p


def kill_mentioning(root: Path) -> int:
    """SIGKILL every process whose command line names a path under root (the local hosts' stand-ins)."""
    needle = f"{root}/".encode()
    n = 0
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in Path(f"/proc/{d}/cmdline").read_bytes():
                os.kill(int(d), signal.SIGKILL)
                n += 1
    return n


@contextlib.contextmanager
def local_fleet(n: int, poll_ms: int) -> Iterator[Path]:
    """n idle 8-GPU sim hosts on the local transport; the hosts.toml. Their processes and dirs go after."""
    from console.sim.fleet import sim_down, sim_up

    root = Path(tempfile.mkdtemp(prefix="dfc-bench-local-", dir="/tmp"))
    try:
        with isolated_env(root):
            names = [f"lh{i}" for i in range(n)]
            toml = sim_up(root / "sim", hosts=names, specs={h: BLACKWELL8_SPEC.with_(name=h) for h in names})
            toml.write_text(f"[console]\npoll_ms = {poll_ms}\n\n" + toml.read_text())
            yield toml
    finally:
        with contextlib.suppress(Exception):
            sim_down(root / "sim")
        kill_mentioning(root)
        subprocess.run(["rm", "-rf", str(root)], check=False)


def counts_arg(text: str, lo: int, hi: int, what: str) -> list[int]:
    try:
        out = sorted({int(c) for c in text.split(",") if c.strip()})
    except ValueError:
        out = []
    if not out or out[0] < lo or out[-1] > hi:
        raise SystemExit(f"{what}: host counts in {lo}..{hi}, comma-separated")
    return out


def run(args: argparse.Namespace) -> Result:
    counts = counts_arg(args.counts, 1, MAX_SSHD_HOSTS, "--counts") if args.counts else []
    local = counts_arg(args.local_counts, 1, 512, "--local-counts") if args.local_counts else []
    if len(counts) < 2 and len(local) < 2:
        raise SystemExit("two or more host counts are needed in --counts (or --local-counts) for the slope")
    t0 = time.monotonic()
    ssh: list[dict[str, Any]] = []
    built = 0.0
    if counts:
        with ssh_sim_fleet(counts[-1]) as fleet:
            built = time.monotonic() - t0
            for k in counts:
                keys = args.presses if k in (counts[0], counts[-1]) else 0
                ssh.append(watch(sshd_toml(fleet, k, args.poll_ms), k, args, f"sshd{k}", args.seconds, keys))
    loc: list[dict[str, Any]] = []
    for k in local:
        with local_fleet(k, args.poll_ms) as toml:
            loc.append(watch(toml, k, args, f"local{k}", args.local_seconds, args.presses))

    def cpu_by_count(runs: list[dict[str, Any]]) -> dict[int, float]:
        return {r["hosts"]: r["console CPU (% of a core)"] for r in runs}

    def fit(runs: list[dict[str, Any]]) -> float | None:
        if len(runs) < 2:
            return None
        return slope([float(r["hosts"]) for r in runs], [r["console CPU (% of a core)"] for r in runs])

    def by_count(runs: list[dict[str, Any]], key: str) -> dict[int, Any]:
        return {r["hosts"]: r[key] for r in runs if key in r}

    detail: dict[str, Any] = {"poll_ms": args.poll_ms, "terminal": f"{args.cols}x{args.rows}"}
    for kind, runs in (("sshd", ssh), ("local transport", loc)):
        if not runs:
            continue
        detail[f"console CPU by host count, {kind} (% of a core)"] = cpu_by_count(runs)
        if (g := fit(runs)) is not None:
            detail[f"slope, {kind} (% of a core per host)"] = round(g, 3)
        detail[f"key p95 by host count, {kind} (ms)"] = by_count(runs, "key p95 ms")
        detail[f"console CPU per key by host count, {kind} (ms)"] = by_count(
            runs, "console CPU per key (ms, idle rate subtracted)"
        )
        detail[f"hosts seen down by host count, {kind}"] = {
            r["hosts"]: len(r["hosts seen down (from start)"]) for r in runs
        }
    if ssh:
        detail["sshd fleet built (s)"] = round(built, 1)
    detail |= {f"sshd, {r['hosts']} hosts": r for r in ssh} | {f"local, {r['hosts']} hosts": r for r in loc}
    growth_runs, growth_kind = (ssh, "sshd") if len(ssh) > 1 else (loc, "local transport")
    per_host = fit(growth_runs) or 0.0
    big = loc[-1] if loc else ssh[-1]
    big_p95 = big.get("key p95 ms", float("inf"))
    lost = sum(r.get("presses lost (no frame within 5 s)", 0) for r in [*ssh, *loc])
    ok = per_host <= TARGET_PCT_PER_HOST and big_p95 <= TARGET_MS and not lost
    fig = (
        f"{per_host:+.2f}% of a core per host ({growth_runs[0]['hosts']}->{growth_runs[-1]['hosts']} hosts, "
        f"{growth_kind}); {big['hosts']} {'local' if loc else 'sshd'} hosts: key p95 "
        + (f"{big_p95:.0f} ms" if big_p95 != float("inf") else "none (no key answered)")
    )
    if n_down := len(big["hosts seen down (from start)"]):
        fig += f", {n_down} hosts seen down"
    return Result(
        f"9 console CPU per idle host; {big['hosts']} hosts responsive",
        fig,
        f"<= {TARGET_PCT_PER_HOST}% of a core per host; key p95 <= {TARGET_MS:.0f} ms",
        ok,
        detail,
        f"{lost} presses lost (no frame within 5 s)" if lost else "",
    )


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__)
    ap.add_argument(
        "--counts",
        default="4,16",
        help=f"sshd host counts for the slope (comma-separated, <= "
        f"{MAX_SSHD_HOSTS}; '': none, the local counts' slope is the figure)",
    )
    ap.add_argument("--seconds", type=float, default=20.0, help="CPU window at each sshd count")
    ap.add_argument("--settle", type=float, default=20.0, help="most seconds to wait for start-up CPU to settle")
    ap.add_argument(
        "--local-counts",
        default="4,64",
        help="local-transport host counts, keys pressed at each; the "
        "last is the responsiveness figure ('': none, the largest sshd count's keys decide)",
    )
    ap.add_argument("--local-seconds", type=float, default=12.0, help="CPU window at each local count")
    ap.add_argument("--presses", type=int, default=12, help="rounds of 4 keys (right, left, ?, escape)")
    ap.add_argument("--poll-ms", type=int, default=1000, help="telemetry interval (the console's default: 1000)")
    ap.add_argument("--cols", type=int, default=200)
    ap.add_argument("--rows", type=int, default=60)
    ap.add_argument(
        "--profile",
        metavar="PATH",
        help="run each console under pyinstrument (.pyisession: session); "
        "writes PATH with the run's label before the suffix, e.g. X.sshd16.pyisession",
    )
    ap.add_argument("--entry", metavar="SCRIPT", help="run this script instead of `-m console` (try a fix)")
    return report(run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
