"""`dflash-console logs NAME [-f] [-n N] [--previous]`: a server's current (or previous) log from its host.

`-f` keeps following through the host link's multiplexed tail (it resumes after reconnects).
Exit 0, 2 unknown name, 3 host unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from console.commands.stop import resolve, unknown_host_of

if TYPE_CHECKING:  # the fleet layer (asyncssh, httpx) is imported when the command runs, not for `--help`
    from console.fleet.changes import Changes
    from console.fleet.controller import FleetController
    from console.fleet.events import Event


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("logs", help="print a server's log (last N lines), optionally following it")
    p.add_argument("name", metavar="NAME", help="server name, e.g. PRESET@HOST:gpu0, or a preset with one server")
    p.add_argument("-n", "--lines", type=int, default=50, metavar="N", help="last N lines (default 50; 0 = all)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    p.add_argument("--previous", action="store_true", help="the log of the run before the current one")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.config import load_fleet
    from console.fleet.events import LogData
    from console.fleet.report import EXIT_OK, EXIT_USAGE, fail, host_of, run_async, session
    from console.transport.base import TransportError

    fleet = load_fleet(args.hosts)
    host = host_of(args.name, fleet)
    if host is None:
        return fail(unknown_host_of(args.name, fleet), EXIT_USAGE)

    async def body(ctl: FleetController) -> int:
        name, why = resolve(ctl, args.name)
        if name is None:
            return fail(why, EXIT_USAGE)
        s = ctl.state.servers[name]
        path = s.meta.log_path
        if args.previous:
            hist = await _previous_log(ctl, host, name)
            if hist is None:
                return fail(f"{name} has no previous log", EXIT_USAGE)
            path = hist
        if not path:
            return fail(f"{name} has no log file (external server)", EXIT_USAGE)
        try:
            data = await ctl.read_file(host, path, 64_000_000)
        except TransportError as e:
            return fail(str(e), 1)
        text = data.decode("utf-8", "replace")
        lines = text.splitlines()
        for ln in lines[-args.lines :] if args.lines > 0 else lines:
            print(ln)
        if not args.follow or args.previous:
            return EXIT_OK
        seen = len(data)
        q: asyncio.Queue[bytes] = asyncio.Queue()

        def on_events(events: list[Event], _notices: Changes) -> None:
            nonlocal seen
            for ev in events:
                if isinstance(ev, LogData) and ev.server == name and ev.path == path:
                    end = ev.offset + len(ev.data)
                    if end > seen:
                        q.put_nowait(ev.data[max(0, seen - ev.offset) :])
                        seen = end

        ctl.subscribe(on_events)
        ctl.watch_log(name, True)  # a person reads it as it comes: the host sends lines at once, not in batches
        while True:
            sys.stdout.write((await q.get()).decode("utf-8", "replace"))
            sys.stdout.flush()

    return run_async(session(args, [host], body, fleet=fleet))


async def _previous_log(ctl: FleetController, host: str, name: str) -> str | None:
    """The log path of the launch before the current one, from the host's history.jsonl."""
    from console import hostjson
    from console.fleet import discovery
    from console.sglang.command import shell_path

    d = discovery.meta_dir(ctl.fleet.hosts[host], name)
    r = await ctl.links[host].run(f"tail -n 50 {shell_path(d)}/history.jsonl 2>/dev/null", timeout=15)
    paths = []
    for ln in r.stdout.splitlines():
        try:
            rec = hostjson.loads(ln, f"history.jsonl on {host}")
        except hostjson.HostJsonError:
            continue
        p = rec.get("log_path") if isinstance(rec, dict) else None
        if p and p not in paths:
            paths.append(p)
    return paths[-2] if len(paths) >= 2 else None
