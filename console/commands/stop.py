"""`dflash-console stop NAME`: SIGTERM to the server's session, SIGKILL after the drain timeout, its processes confirmed
gone from the process table and the GPUs (what else holds them is named).

Exit 0 stopped and its processes gone (or already stopped), 1 failed or refused (external servers are
read-only), 2 unknown or ambiguous name (with the replicas, or a did-you-mean), 3 host unreachable.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from console.commands.names import known_names, unknown
from console.commands.names import resolve as resolve_name

if TYPE_CHECKING:  # the fleet layer (asyncssh, httpx) is imported when the command runs, not for `--help`
    from console.config import Fleet
    from console.fleet.controller import FleetController


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("stop", help="stop a server (SIGTERM, then SIGKILL) and confirm its processes left its GPUs")
    p.add_argument("name", metavar="NAME", help="server name, e.g. PRESET@HOST:gpu0 or a preset with one server")
    p.set_defaults(func=lambda a: run(a, "stop"))


def run(args: argparse.Namespace, verb: str) -> int:
    from console.config import load_fleet
    from console.fleet.journal import mask
    from console.fleet.report import EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail, host_of, run_async, session

    fleet = load_fleet(args.hosts)
    host = host_of(args.name, fleet)
    if host is None:
        return fail(unknown_host_of(args.name, fleet), EXIT_USAGE)

    async def body(ctl: FleetController) -> int:
        r = resolve_name(ctl.state, fleet, args.name)
        if r.stopped and verb == "stop":
            print(f"{r.name or args.name} is already stopped")
            return EXIT_OK
        if r.name is None:
            return fail(r.error or f"no server '{args.name}'", EXIT_USAGE)
        name = r.name
        force = bool(getattr(args, "force", False))
        out = await (ctl.stop_server(name) if verb == "stop" else ctl.restart(name, force=force))
        if out.ok and verb == "restart" and getattr(args, "wait", False):
            from console.commands.launch import watch_progress

            print(mask(out.message), flush=True)
            async with watch_progress(ctl, [name]):
                out = await ctl.wait_ready(name)
        print(mask(out.message), file=sys.stdout if out.ok else sys.stderr)
        return EXIT_OK if out.ok else EXIT_FAILED

    return run_async(session(args, [host], body, fleet=fleet))


def unknown_host_of(name: str, fleet: Fleet) -> str:
    """Why a name names no host: the one typo message, with the closest preset or replica name."""
    return unknown("server or preset", name, known_names(fleet))


def resolve(ctl: FleetController, name: str) -> tuple[str | None, str]:
    """A running (or ended) server's exact name, else None and why (ambiguous, not running, a typo)."""
    r = resolve_name(ctl.state, ctl.fleet, name)
    if r.name is not None and not r.stopped:
        return r.name, ""
    if r.name is not None and r.name in ctl.state.servers:
        return r.name, ""
    return None, r.error or f"{name} is not running"
