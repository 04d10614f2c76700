"""Benchmark 3: remote cost per host in steady state — process spawns per minute and channels per connection.

One sim host (8 GPUs) behind real sshd, two servers running. Spawns are counted with the host's
PID-namespace counter (the last field of /proc/loadavg, read inside the namespace; the reads' own
cost is calibrated out). Phase A: the console's FleetController watching the host. Phase B, same
host, console closed: a naive poller running `ssh host nvidia-smi` every second.
Targets: <= 2 spawns/min/host and <= 8 channels per connection.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

from benchmarks.common import Result, bench_parser, report
from benchmarks.harness import launch_all, presets_toml, ssh_sim_fleet

TARGET_SPAWNS = 2.0
TARGET_CHANNELS = 8


def last_pid(ssh: object) -> int:
    """The host's PID counter, read inside its PID namespace."""
    return int(ssh.exec("cat /proc/loadavg").stdout.split()[-1])  # type: ignore[attr-defined]


def read_cost(ssh: object) -> int:
    """PIDs one last_pid() read itself uses (it runs a shell and cat inside the namespace)."""
    a = last_pid(ssh)
    b = last_pid(ssh)
    c = last_pid(ssh)
    return max(1, round(((b - a) + (c - b)) / 2))


def spawns_per_min(ssh: object, seconds: float, cost: int) -> float:
    p0 = last_pid(ssh)
    time.sleep(seconds)
    p1 = last_pid(ssh)
    return max(0, p1 - p0 - cost) * 60.0 / seconds


async def console_phase(fleet: object, seconds: float, settle: float) -> dict[str, object]:
    from console.config import load_fleet
    from console.fleet.controller import FleetController

    host = next(iter(fleet.hosts.values()))  # type: ignore[attr-defined]
    ctl = FleetController(load_fleet(fleet.toml(presets_toml(fleet, 2))))  # type: ignore[attr-defined]
    await ctl.start()
    try:
        if not await ctl.wait_hosts(20):
            raise RuntimeError("host did not come up")
        names = await launch_all(ctl)
        await asyncio.sleep(settle)  # steady state: the servers loaded, their VRAM readings settled
        link = ctl.links[host.name]
        peak = 0
        stop = asyncio.Event()

        async def sample() -> None:
            nonlocal peak
            while not stop.is_set():
                peak = max(peak, link.open_channels)
                await asyncio.sleep(0.05)

        sampler = asyncio.create_task(sample())
        cost = await asyncio.to_thread(read_cost, host.ssh)
        streams0 = link.streams_opened
        rate = await asyncio.to_thread(spawns_per_min, host.ssh, seconds, cost)
        stop.set()
        await sampler
        return {
            "servers": len(names),
            "settle (s)": settle,
            "spawns_per_min": round(rate, 1),
            "channels_peak": peak,
            "streams_opened_in_window": link.streams_opened - streams0,
            "connections": 1,
        }
    finally:
        await ctl.close()


def naive_phase(fleet: object, seconds: float) -> dict[str, object]:
    """`ssh host nvidia-smi` once a second (a fresh connection each time), as a simple poller would."""
    host = next(iter(fleet.hosts.values()))  # type: ignore[attr-defined]
    s = host.ssh
    argv = [
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
        "nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader",
    ]
    cost = read_cost(s)
    p0 = last_pid(s)
    t0 = time.monotonic()
    runs = fails = 0
    while time.monotonic() - t0 < seconds:
        tick = time.monotonic()
        r = subprocess.run(argv, capture_output=True, timeout=10)
        runs += 1
        fails += r.returncode != 0
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    elapsed = time.monotonic() - t0
    p1 = last_pid(s)
    return {
        "spawns_per_min": round(max(0, p1 - p0 - cost) * 60.0 / elapsed, 1),
        "channels_per_connection": 1,
        "connections_per_min": round(runs * 60.0 / elapsed, 1),
        "failed_polls": fails,
    }


def breakdown(fleet: object, seconds: float, log_paths: list[str]) -> dict[str, float]:
    """Spawns/min of each remote loop the console runs, each alone on the host (attribution for the owners)."""
    from console.fleet.logtail import tail_command
    from console.fleet.monitor import proc_loop_command

    host = next(iter(fleet.hosts.values()))  # type: ignore[attr-defined]
    s = host.ssh
    loops = {
        "log tail loop (logtail.TAIL_SCRIPT, 2 files)": tail_command([(p, 0) for p in log_paths]),
        "process loop (monitor.proc_loop_command)": proc_loop_command(),
    }
    out: dict[str, float] = {}
    cost = read_cost(s)
    for label, cmd in loops.items():
        proc = s.spawn(["/bin/sh", "-c", cmd], as_user=True, stdout=subprocess.DEVNULL)
        time.sleep(1.0)
        out[label] = round(spawns_per_min(s, seconds, cost), 1)
        s.kill_spawned(proc)
    return out


def run(args: argparse.Namespace) -> Result:
    with ssh_sim_fleet(1) as fleet:
        con = asyncio.run(console_phase(fleet, args.seconds, args.settle))
        naive = naive_phase(fleet, args.seconds)
        logs = sorted(str(p) for p in (next(iter(fleet.hosts.values())).dir / "logs").glob("*.log"))[:2]
        parts = breakdown(fleet, min(args.seconds, 6.0), logs) if logs else {}
    spm = float(con["spawns_per_min"])  # type: ignore[arg-type]
    ch = int(con["channels_peak"])  # type: ignore[call-overload]
    detail = {
        "console": con,
        "sh fallback loops alone, without the agent (spawns/min)": parts,
        "naive ssh+nvidia-smi poller": naive,
        "ratio console/naive spawns": round(spm / max(float(naive["spawns_per_min"]), 1e-9), 4),
    }
    ok = spm <= TARGET_SPAWNS and ch <= TARGET_CHANNELS
    return Result(
        "3 remote cost per host",
        f"{spm:,.0f} spawns/min/host, {ch} channels (1 connection)",
        "<= 2 spawns/min/host, <= 8 channels",
        ok,
        detail,
        ""
        if spm <= TARGET_SPAWNS
        else "spawns come from the remote shell loops: see the report (logtail.TAIL_SCRIPT, monitor.proc_loop_command)",
    )


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__)
    ap.add_argument(
        "--seconds",
        type=float,
        default=60.0,
        help="steady-state window per phase (a minute: the slow loops run once a minute)",
    )
    ap.add_argument("--settle", type=float, default=20.0, help="seconds after the launches before the window opens")
    return report(run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
