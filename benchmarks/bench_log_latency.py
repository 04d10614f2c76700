"""Benchmark 1: a log line appended on a host → visible in the server's log pane, over real sshd.

Side by side on the same link, for the same appended lines: a raw asyncssh `tail -n0 -F` in its own
process (the floor), the console's FleetState (controller listener), and the ServerScreen's LogView
(the lines its timer has pulled, i.e. what the next frame draws), in a headless DflashApp.
Target: pane p95 within 50 ms of the raw tail's p95.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import subprocess
import sys
import time
from collections.abc import Sequence

from benchmarks.common import Result, bench_parser, pcts, report
from benchmarks.harness import launch_all, presets_toml, ssh_sim_fleet
from console.sglang.benchstats import percentile

TARGET_MS = 50.0
MARK = "BENCHMARK-MARK"
RAW_TAIL = r"""
import asyncio, sys, time, asyncssh
async def main(addr, port, user, key, kh, path):
    async with asyncssh.connect(addr, port=int(port), username=user, client_keys=[key], known_hosts=kh) as c:
        p = await c.create_process("exec tail -n0 -F " + path)
        await asyncio.sleep(0.3)
        print("READY", flush=True)
        async for line in p.stdout:
            now = time.monotonic()
            if "MARK_WORD " in line:
                print(line.split("MARK_WORD ")[1].split()[0], now, flush=True)
asyncio.run(main(*sys.argv[1:]))
""".replace("MARK_WORD", MARK)


def _scan(seen: dict[int, float], lines: Sequence[str], start: int) -> int:
    """Record the first-seen time of every marker line from index `start`; the new index (lines may be a deque)."""
    now = time.monotonic()
    for ln in itertools.islice(lines, start, None):
        i = ln.find(MARK + " ")
        if i >= 0:
            with contextlib.suppress(ValueError):
                seen.setdefault(int(ln[i + len(MARK) + 1 :].split()[0]), now)
    return len(lines)


async def measure(args: argparse.Namespace) -> dict[str, dict[int, float]]:
    from console.config import load_fleet
    from console.fleet.controller import FleetController
    from console.ui.app import DflashApp
    from console.ui.screens.server import ServerScreen
    from console.ui.widgets.log_view import LogView

    with ssh_sim_fleet(1) as fleet:
        host = next(iter(fleet.hosts.values()))
        f = load_fleet(fleet.toml(presets_toml(fleet, 1)))
        ctl = FleetController(f)
        app = DflashApp(ctl, fleet=f)
        written: dict[int, float] = {}
        state_seen: dict[int, float] = {}
        pane_seen: dict[int, float] = {}
        raw_seen: dict[int, float] = {}
        async with app.run_test(size=(160, 48)) as pilot:
            await ctl.start()
            if not await ctl.wait_hosts(20):
                raise RuntimeError("host did not come up")
            name = (await launch_all(ctl))[0]
            srv = ctl.state.servers[name]
            path = srv.meta.log_path
            idx = {"state": len(srv.log.lines)}
            ctl.subscribe(lambda ev, no: idx.__setitem__("state", _scan(state_seen, srv.log.lines, idx["state"])))
            app.push_screen(ServerScreen(name))
            await pilot.pause(0.3)
            view = app.screen.query_one(LogView)
            orig = view.pull
            idx["pane"] = len(view.lines)

            def pull(force: bool = False) -> bool:
                changed = orig(force)
                if changed:
                    idx["pane"] = _scan(pane_seen, view.lines, min(idx["pane"], len(view.lines)))
                return changed

            view.pull = pull  # type: ignore[method-assign]
            s = host.ssh
            raw = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    RAW_TAIL,
                    s.address,
                    str(s.port),
                    s.user,
                    str(s.client_key),
                    str(s.known_hosts),
                    path,
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert raw.stdout is not None
            ready = await asyncio.to_thread(raw.stdout.readline)
            if ready.strip() != "READY":
                raise RuntimeError(f"raw tail failed: {ready!r}")
            reader = asyncio.create_task(asyncio.to_thread(_read_raw, raw, raw_seen))
            with open(path, "a", buffering=1) as log:
                for i in range(args.lines):
                    ts = time.strftime("%Y-%m-%d %H:%M:%S")
                    written[i] = time.monotonic()
                    log.write(f"[{ts}] {MARK} {i} appended by bench_log_latency\n")
                    await asyncio.sleep(args.interval)
            await pilot.pause(1.0)
            raw.terminate()
            await reader
            await ctl.close()
    return {"written": written, "raw": raw_seen, "state": state_seen, "pane": pane_seen}


def _read_raw(proc: subprocess.Popen, seen: dict[int, float]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        parts = line.split()
        if len(parts) == 2:
            seen.setdefault(int(parts[0]), float(parts[1]))


def run(args: argparse.Namespace) -> Result:
    r = asyncio.run(measure(args))
    w = r["written"]
    lat = {k: [r[k][i] - w[i] for i in w if i in r[k]] for k in ("raw", "state", "pane")}
    detail: dict[str, object] = {f"{k} ms": pcts(v, qs=(50, 95)) | {"lines": len(v)} for k, v in lat.items()}
    p95 = {k: (percentile(v, 95) or float("nan")) * 1000 for k, v in lat.items()}
    delta = p95["pane"] - p95["raw"]
    detail["state p95 - raw p95 (ms)"] = round(p95["state"] - p95["raw"], 1)
    missing = len(w) - len(lat["pane"])
    ok = delta <= TARGET_MS and missing == 0
    return Result(
        "1 log line -> log pane (real sshd)",
        f"pane p95 {p95['pane']:.1f} ms vs raw tail {p95['raw']:.1f} ms (+{delta:.1f} ms)",
        "p95 within +50 ms of raw",
        ok,
        detail,
        f"{missing} lines never reached the pane" if missing else "",
    )


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__)
    ap.add_argument("--lines", type=int, default=60)
    ap.add_argument("--interval", type=float, default=0.05, help="seconds between appended lines")
    return report(run, ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
