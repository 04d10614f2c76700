"""`dflash-console stop NAME`: SIGTERM to the server's session, SIGKILL after the drain timeout, GPUs confirmed free.

Exit 0 stopped and GPUs free, 1 failed or refused (external servers are read-only), 2 unknown
name, 3 host unreachable.
"""

from __future__ import annotations

import argparse
import sys

from console.config import load_fleet
from console.fleet.controller import FleetController
from console.fleet.journal import mask
from console.fleet.report import EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail, host_of, run_async, session


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stop", help="stop a server (SIGTERM, then SIGKILL) and confirm its GPUs are free")
    p.add_argument("name", metavar="NAME", help="server name, e.g. PRESET@HOST:gpu0 (see `status`)")
    p.set_defaults(func=lambda a: run(a, "stop"))


def run(args: argparse.Namespace, verb: str) -> int:
    fleet = load_fleet(args.hosts)
    host = host_of(args.name, fleet)
    if host is None:
        return fail(f"cannot tell the host of '{args.name}'; expected PRESET@HOST:gpuN (see `status`)", EXIT_USAGE)

    async def body(ctl: FleetController) -> int:
        name = resolve(ctl, args.name)
        if name is None:
            known = ", ".join(s for s in ctl.state.servers if ctl.state.servers[s].meta.host == host) or "none"
            return fail(f"no server '{args.name}' on {host} (known there: {known})", EXIT_USAGE)
        out = await (ctl.stop_server(name) if verb == "stop" else ctl.restart(name))
        if out.ok and verb == "restart" and getattr(args, "wait", False):
            out = await ctl.wait_ready(name)
        print(mask(out.message), file=sys.stdout if out.ok else sys.stderr)
        return EXIT_OK if out.ok else EXIT_FAILED

    return run_async(session(args, [host], body, fleet=fleet))


def resolve(ctl: FleetController, name: str) -> str | None:
    """An exact server name, or the only server of a preset."""
    if name in ctl.state.servers:
        return name
    of_preset = [s.name for s in ctl.state.servers.values() if s.meta.preset == name]
    return of_preset[0] if len(of_preset) == 1 else None
