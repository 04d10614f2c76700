"""`dflash-console router up|down|restart|status|sync|bench|logs NAME`: SGLang's router in front of a preset's replicas.

`up` starts `python -m sglang_router.launch_router` on the router's host over the replicas that serve
now; `sync` adds/removes workers at the router so it lists exactly the serving replicas (the TUI does
this continuously); `status` shows its phase, workers and requests/s. Exit 0 ok, 1 failed, 2 unknown
router, 3 host unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from console.fleet.api import ActionOutcome
    from console.fleet.controller import FleetController
    from console.router.manager import RouterManager

VERBS = ("up", "down", "restart", "status", "sync", "bench", "logs")
ALIASES = {"start": "up", "stop": "down", "show": "status"}
"""Other words for a verb, accepted as it (the words of the help before the verbs were named)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "router", help="an SGLang router over a preset's replicas: up, down, restart, status, sync, bench or logs"
    )
    p.add_argument(
        "verb",
        choices=(*VERBS, *ALIASES),
        metavar="VERB",
        help="up (start): start it over the serving replicas · down (stop) · restart · status (show): phase, "
        "workers, req/s · sync: workers = serving replicas · bench: one replica vs the router · logs: its log",
    )
    p.add_argument("name", metavar="NAME", nargs="?", help="a [routers.NAME] of hosts.toml (status: all when omitted)")
    p.add_argument("--wait", type=float, default=60.0, metavar="S", help="up: seconds to wait for /health (60)")
    p.add_argument(
        "--concurrency",
        default="1,8,32",
        metavar="LIST",
        help="bench: levels, run against one replica and then through the router (1,8,32)",
    )
    p.add_argument("--input-len", type=int, default=256, metavar="N", help="bench: prompt words per request (256)")
    p.add_argument("--output-len", type=int, default=128, metavar="N", help="bench: tokens per answer (128)")
    p.add_argument(
        "--num-prompts", type=int, default=None, metavar="N", help="bench: requests per level (default 5 x C)"
    )
    p.add_argument(
        "-n", "--lines", type=int, default=40, metavar="N", help="logs: the last N lines of the router's log (40)"
    )
    p.set_defaults(func=run)


async def wait_replica_health(ctl: FleetController, mgr: RouterManager, name: str, timeout: float = 8.0) -> None:
    """Until every live replica of the router's presets has a /health answer (so `up` starts with all of them)."""
    spec = ctl.fleet.routers[name]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        todo = [s for s in ctl.state.servers.values() if s.meta.preset in spec.presets and s.alive and s.health is None]
        if not todo:
            return
        await asyncio.sleep(0.2)


def print_view(mgr: RouterManager, name: str) -> None:
    from console.fleet.journal import mask
    from console.ui.format import clean

    v = mgr.views[name]
    spec = mgr.fleet.routers[name]
    head = f"router {name} on {spec.host}:{spec.port} ({spec.policy}): {v.phase}"
    if v.pid and v.phase in ("running", "starting"):
        head += f", pid {v.pid}"
    if v.started_at and v.phase in ("running", "starting"):
        head += f", up {int(time.time() - v.started_at)} s"
    print(mask(head))
    if v.error:
        print(mask(f"  {clean(v.error, 300)}"))
    if v.phase != "running":
        return
    rps = "-" if v.rps is None else f"{v.rps:.1f}"
    ended = mgr.ended_workers(name)
    healthy = sum(w.healthy and w.url not in ended for w in v.workers)
    print(f"  workers {healthy}/{len(v.workers)} healthy · {rps} req/s")
    for w in v.workers:
        who = mgr.replica_of(name, w.url)
        gone = ended.get(w.url)
        wr = v.worker_rps.get(w.url)
        if gone:  # the router lists (and may call healthy) a replica that has ended: say what is true
            state = mgr.ctl.state.servers[gone].phase.label
            print(
                mask(
                    f"  {clean(w.url, 80)}  {clean(gone, 60)}  {state.upper()} (still listed by the router; "
                    f"`router sync {name}` removes it)"
                )
            )
            continue
        print(
            mask(
                f"  {clean(w.url, 80)}  {clean(who or '(not a known replica)', 60)}  "
                f"{'healthy' if w.healthy else 'UNHEALTHY'}"
                f"  {mgr.worker_load(name, w)}  {'-' if wr is None else f'{wr:.1f}'} req/s"
            )
        )
    listed = {w.url for w in v.workers}
    for s in mgr.ctl.state.servers.values():
        if s.meta.preset in spec.presets and s.meta.host == spec.host and s.meta.port is not None:
            from console.router.command import worker_url

            if worker_url(s.meta.bind, s.meta.port) not in listed and (s.alive or s.phase == "crashed"):
                print(mask(f"  not at the router: {clean(s.name, 60)} ({s.phase.label})"))


async def bench(ctl: FleetController, mgr: RouterManager, name: str, args: argparse.Namespace) -> int:
    """The same sweep against the first serving replica, then through the router: the scaling table."""
    from console.fleet.report import EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail
    from console.router.scaling import scaling_table
    from console.sglang.bench import BenchSpec, LoadGenerator
    from console.sglang.benchstats import parse_concurrency

    try:
        levels = tuple(parse_concurrency(args.concurrency))
    except ValueError as e:
        return fail(f"--concurrency: {e}", EXIT_USAGE)
    v = await mgr.refresh(name)
    if v.phase != "running":
        return fail(f"router {name} is {v.phase}; start it first (router up {name})", EXIT_FAILED)
    replicas = [mgr.replica_of(name, w.url) for w in v.workers if w.healthy]
    one = sorted(r for r in replicas if r)
    if not one:
        return fail(f"router {name} has no healthy worker that is a known replica", EXIT_FAILED)
    results = []
    for who, url in ((one[0], await ctl.server_url(one[0])), (f"router:{name}", await mgr.url(name))):
        print(f"bench {who} ...", file=sys.stderr, flush=True)
        spec = BenchSpec(
            url=url,
            concurrency=levels,
            input_len=args.input_len,
            output_len=args.output_len,
            num_prompts=args.num_prompts,
        )
        async with LoadGenerator(spec) as g:
            results.append((await g.sweep()).levels)
    print(
        f"bench {one[0]} (one replica) vs router {name} over {len(replicas)} healthy workers "
        f"({mgr.fleet.routers[name].policy}); input {args.input_len}, output {args.output_len} tokens"
    )
    print(scaling_table(results[0], results[1], len(replicas)))
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    from console.commands.names import unknown
    from console.config import load_fleet
    from console.fleet.journal import mask
    from console.fleet.report import EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail, run_async, session

    args.verb = ALIASES.get(args.verb, args.verb)
    fleet = load_fleet(args.hosts)
    name = (args.name or "").removeprefix("router:")
    if not name and args.verb != "status":
        return fail(
            f"router {args.verb} needs a NAME ({', '.join(fleet.routers) or 'no [routers.NAME] in hosts.toml'})",
            EXIT_USAGE,
        )
    if name and name not in fleet.routers:
        return fail(unknown("router", name, list(fleet.routers)), EXIT_USAGE)
    names = [name] if name else list(fleet.routers)
    if not names:
        print("no [routers.NAME] in hosts.toml")
        return EXIT_OK
    hosts = sorted({fleet.routers[n].host for n in names})

    async def body(ctl: FleetController) -> int:
        from console.router.manager import RouterManager

        mgr = RouterManager(ctl)
        try:
            for n in names:
                await wait_replica_health(ctl, mgr, n)
            if args.verb == "status":
                for n in names:
                    await mgr.refresh(n)
                await asyncio.sleep(1.0)  # a second metrics read: requests/s
                for n in names:
                    await mgr.refresh(n)
                    print_view(mgr, n)
                return EXIT_OK
            if args.verb == "logs":
                from console.remote_text import for_terminal

                v = await mgr.refresh(name)
                if not v.log_path:
                    return fail(f"router {name} has no log on {v.host} (never started here)", EXIT_FAILED)
                from console.router.command import log_tail_script

                r = await ctl.links[v.host].run(log_tail_script(v.log_path, 256 * 1024), timeout=20)
                lines = for_terminal(r.stdout).splitlines()[-max(1, args.lines) :]
                print(mask(f"==> {v.log_path} ({v.phase})"))
                for ln in lines:
                    print(mask(ln))
                return EXIT_OK
            if args.verb == "sync":
                v = await mgr.refresh(name)
                if v.phase != "running":
                    return fail(f"router {name} is {v.phase}{': ' + v.error if v.error else ''}", EXIT_FAILED)
                ch = await mgr.sync(name)
                print(
                    mask(
                        mgr.views[name].last_change
                        if ch
                        else f"router {name}: workers already match the {len(mgr.ready_urls(name))} serving replicas"
                    )
                )
                return EXIT_OK
            if args.verb == "bench":
                return await bench(ctl, mgr, name, args)
            verb: Callable[[], Awaitable[ActionOutcome]] = {
                "up": lambda: mgr.up(name, wait_s=args.wait),
                "down": lambda: mgr.down(name),
                "restart": lambda: mgr.restart(name),
            }[args.verb]
            out = await verb()
            if out.ok:
                print(mask(out.message))
                return EXIT_OK
            return fail(out.message, EXIT_FAILED)
        finally:
            await mgr.aclose()

    return run_async(session(args, hosts, body, fleet=fleet))
