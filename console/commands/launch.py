"""`dflash-console launch PRESET [--gpus 0,1] [--wait] [--dry-run]`: pre-check, then start detached.

Prints the exact remote command of each replica. Exit 0 launched (ready with --wait), 1 refused or
failed (the reason names the owner of a busy GPU or port), 2 bad preset/usage, 3 host unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from console.sglang.phase import Phase

if TYPE_CHECKING:  # the fleet layer (asyncssh, httpx) is imported when the command runs, not for `--help`
    from console.fleet.controller import FleetController


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("launch", help="pre-check and launch a preset (detached; survives the console)")
    p.add_argument("preset", metavar="PRESET", help="a [presets.NAME] of hosts.toml (see `check`)")
    p.add_argument("--gpus", metavar="LIST", help="GPU indices overriding the preset's, e.g. 0,1")
    p.add_argument("--wait", action="store_true", help="wait until /health answers 200 (preset ready_timeout)")
    p.add_argument("--dry-run", action="store_true", help="show the commands and pre-checks; launch nothing")
    p.set_defaults(func=run)


def parse_gpus(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        gpus = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--gpus expects indices like 0,1; got {text!r}") from None
    if not gpus or any(g < 0 for g in gpus):
        raise ValueError(f"--gpus expects indices like 0,1; got {text!r}")
    return gpus


PROGRESS_EVERY_S = 10.0
"""With no change, the current phase is repeated this often, so a long load never looks hung."""
PROGRESS_MIN_S = 2.0
"""A new phase prints at once; progress within a phase (shards, graphs) at most this often."""


def progress_line(
    name: str, phase: Phase, shards: tuple[int, int] | None, graphs: tuple[int, int] | None, elapsed_s: float
) -> str:
    """`small@h:gpu2  loading weights  7/15 shards  (12 s)`: one phase-progress line of `launch --wait`."""
    detail = ""
    if phase is Phase.LOADING_WEIGHTS and shards:
        detail = f"  {shards[0]}/{shards[1]} shards"
    elif phase is Phase.CUDA_GRAPH and graphs:
        detail = f"  bs {graphs[0]}/{graphs[1]}"
    return f"{name}  {phase.label}{detail}  ({elapsed_s:.0f} s)"


async def _progress(ctl: FleetController, names: list[str]) -> None:
    """Print a line whenever a server's phase or progress changes (and every PROGRESS_EVERY_S without one)."""
    start = time.monotonic()
    last: dict[str, tuple[str, tuple[Phase, object, object], float]] = {}
    while True:
        now = time.monotonic()
        for n in names:
            s = ctl.state.servers.get(n)
            if s is None:
                continue
            key = (s.phase, s.log.shards, s.log.graphs)
            prev = last.get(n)
            if (
                prev is None
                or prev[1][0] != key[0]
                or (prev[1] != key and now - prev[2] >= PROGRESS_MIN_S)
                or now - prev[2] >= PROGRESS_EVERY_S
            ):
                line = progress_line(n, s.phase, s.log.shards, s.log.graphs, now - start)
                print(line, flush=True)
                last[n] = (line, key, now)
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def watch_progress(ctl: FleetController, names: list[str]) -> AsyncIterator[None]:
    """Phase-progress lines for `names` while the block waits (launch --wait, restart --wait)."""
    task = asyncio.create_task(_progress(ctl, names))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def run(args: argparse.Namespace) -> int:
    from console.config import load_fleet
    from console.fleet.api import ActionOutcome
    from console.fleet.journal import mask
    from console.fleet.report import EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail, run_async, session

    fleet = load_fleet(args.hosts)
    if args.preset not in fleet.presets:
        from console.commands.names import unknown

        return fail(unknown("preset", args.preset, list(fleet.presets)), EXIT_USAGE)
    try:
        gpus = parse_gpus(args.gpus)
        if gpus is not None:
            from console.sglang.command import expand_replicas

            expand_replicas(args.preset, fleet.presets[args.preset], gpus)
    except ValueError as e:
        return fail(str(e), EXIT_USAGE)
    host = fleet.presets[args.preset].host

    async def body(ctl: FleetController) -> int:
        pv = await ctl.preview(args.preset, gpus)
        for plan in pv.plans:
            print(f"{plan.replica.name}  port {plan.replica.port}  GPUs {','.join(map(str, plan.replica.gpus))}")
            print(f"  {mask(plan.command)}")
        for f in pv.findings:
            print(f"  {f}")
        for c in pv.checks:
            print(mask(f"  [{'ok' if c.ok else 'FAIL' if c.blocking else 'warn'}] {c.name}: {c.message}"))
        if args.dry_run:
            return EXIT_FAILED if pv.blocked else EXIT_OK
        out = await ctl.launch(args.preset, gpus, stamp=pv.stamp)  # the commands printed above, log names and all
        if out.ok and args.wait:
            print(mask(out.message), flush=True)
            async with watch_progress(ctl, out.servers):
                results = await asyncio.gather(*(ctl.wait_ready(n) for n in out.servers))
            out = ActionOutcome(all(r.ok for r in results), "; ".join(r.message for r in results), out.servers)
        print(mask(out.message), file=sys.stdout if out.ok else sys.stderr)
        return EXIT_OK if out.ok else EXIT_FAILED

    return run_async(session(args, [host], body, fleet=fleet))
