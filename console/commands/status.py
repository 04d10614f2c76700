"""`dflash-console status [--json] [--watch]`: hosts, GPUs and servers with phase, tok/s and data age.

`--json` prints the stable `dflash-console/status/1` document (console.fleet.report.status_doc). A plain
`status` asks each host once (one remote command after the connect, hosts in parallel: console.fleet.oneshot),
its routers included; `--watch` runs the controller (a stream of pictures, the TUI's own streams).
Exit 0, or 3 when a host is unreachable (its row still shows why).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the fleet layer (asyncssh, httpx) is imported when the command runs, not for `--help`
    from collections.abc import Callable

    from console.config import Fleet
    from console.fleet.controller import FleetController
    from console.fleet.state import FleetState
    from console.router.manager import RouterManager
    from console.router.state import RouterView


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="hosts, GPUs and servers: phase, tok/s, memory, age of the data")
    p.add_argument(
        "--json", action="store_true", help="print the stable JSON document (schema dflash-console/status/1)"
    )
    p.add_argument("--watch", action="store_true", help="refresh every 2 s until Ctrl-C")
    p.add_argument("--wait", type=float, default=6.0, metavar="S", help="seconds to wait for hosts (default 6)")
    p.set_defaults(func=run)


GPU_NAME_WIDTH = 32
"""Room for a GPU's name on its line; a longer one is cut at a word (`RTX PRO 6000 Blackwell SE`)."""


def _fmt(v: object, unit: str = "") -> str:
    return "-" if v is None else f"{v}{unit}"


def cut_at_word(text: str, width: int) -> str:
    """`text` in at most `width` characters, cut at a space with `…` (mid-word only for a single long word)."""
    if len(text) <= width:
        return text
    head = text[: width - 1]
    at = head.rfind(" ")
    return (head[:at] if at > 0 else head).rstrip() + "…"


def figure(v: float | None, age_s: float | None, idle: bool = False) -> str:
    """`366.5`, or `366.5 (42 s ago)` when its line is older than the TUI's stale limit; `0.0` once decode-idle
    (the zero is now, not the old line)."""
    from console.fleet.state import STALE_S

    if v is None:
        return "-"
    if idle or age_s is None or age_s <= STALE_S:
        return f"{v:.1f}"
    return f"{v:.1f} ({age_s:.0f} s ago)"


def render(doc: dict[str, Any]) -> str:
    """The text picture of a status document: the TUI's words and units (JSON keeps the machine names)."""
    from console.sglang.phase import phase_words
    from console.ui.format import gib, mem_pair, short_gpu_name

    out = []
    for h in doc["hosts"]:
        age = f"data {h['age_s']:.1f} s old" if h["age_s"] is not None else "no data yet"
        line = f"{h['name']}  {h['state']}  ({age}{', STALE' if h['stale'] and h['age_s'] is not None else ''})"
        if h["error"]:
            line += f"  error: {h['error']}"
        if h["telemetry_error"]:
            line += f"  telemetry: {h['telemetry_error']}"
        out.append(line)
        for g in h["gpus"]:
            mem = mem_pair(g["memory_used_mib"], g["memory_total_mib"])
            name = cut_at_word(short_gpu_name(g["name"]), GPU_NAME_WIDTH)
            out.append(
                f"  GPU {g['index']}  {name:{GPU_NAME_WIDTH}}  {mem:>15}  {_fmt(g['utilization_pct'], '%'):>4}  "
                f"{g['server'] or '-'}"
            )
    if doc["servers"]:
        out.append("")
        out.append(f"{'SERVER':44} {'PHASE':16} {'TOK/S':>16} {'PORT':>6} {'MEM GiB':>8}  CAUSE")
        for s in doc["servers"]:
            tp = figure(s["gen_throughput"], s.get("gen_throughput_age_s"), s.get("decode_idle", False))
            name = s["name"] + ("" if s["managed"] else " (external)")
            mem = "-" if s["memory_mib"] is None else gib(s["memory_mib"])
            out.append(
                f"{name:44} {phase_words(s['phase']):16} {tp:>16} {_fmt(s['port']):>6} {mem:>8}  {s['summary'] or ''}"
            )
            out.extend(_spec_rows(s))
    if doc.get("routers"):
        out.append("")
        out.append(f"{'ROUTER':24} {'WHERE':28} {'POLICY':14} {'PHASE':10} {'WORKERS':>8}  ERROR")
        for r in doc["routers"]:
            where = f"{r['host']}:{r['port']}"
            hw = "-" if r["healthy_workers"] is None else f"{r['healthy_workers']}/{len(r['workers'])}"
            out.append(f"{r['name']:24} {where:28} {r['policy']:14} {r['phase']:10} {hw:>8}  {r['error'] or ''}")
    from console.fleet.journal import mask

    return mask("\n".join(out))


def _spec_rows(s: dict[str, Any]) -> list[str]:
    """`  spec DFLASH block 16 · accept 3.12 rate 0.27 (4 s ago) · draft PATH` and one `  ! ...` per alarm."""
    sp = s.get("spec")
    if not sp:
        return []
    shape = (
        f"block {sp['block_size'] or 'auto'}"
        if sp["algorithm"] == "DFLASH"
        else f"draft {sp['draft_tokens'] or 'auto'}"
    )
    if sp["accept_len"] is None:
        acc = "accept ?"
    else:
        rate = f" rate {sp['accept_rate']:.2f}" if sp["accept_rate"] is not None else ""
        age = sp["accept_len_age_s"]
        acc = f"accept {sp['accept_len']:.2f}{rate}" + (f" ({age:.0f} s ago)" if age is not None else "")
    draft = f" · draft {sp['draft_model']}" if sp["draft_model"] else ""
    rows = [f"  spec {sp['algorithm']} {shape} · {acc}{draft}"]
    rows += [f"  ! {w['text']}" for w in s.get("warnings") or []]
    return rows


async def first_look(ctl: FleetController, wait_s: float) -> None:
    """Every host's first complete picture, as soon as it is there: a GPU sample, a process sample taken after
    re-attach (it joins GPUs to servers and finds external ones), then one /health round for all live servers
    at once. Hosts are connected in parallel by the session; nothing here sleeps a fixed time."""
    from console.fleet.events import ProcessSample

    sampled: set[str] = set()
    ctl.subscribe(lambda events, _notices: sampled.update(e.host for e in events if isinstance(e, ProcessSample)))
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and not all(
        h.conn != "up" or ((h.gpus or h.telemetry_error) and h.name in sampled) for h in ctl.state.hosts.values()
    ):
        await asyncio.sleep(0.02)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(ctl.check_all_health(), 6.0)  # each request has its own 5 s deadline


def run(args: argparse.Namespace) -> int:
    from console.config import load_fleet
    from console.fleet.report import run_async

    fleet = load_fleet(args.hosts)
    if args.watch:  # a stream of pictures: the controller's streams, as the TUI sees them
        return run_with_controller(args, fleet)
    return run_async(run_once(args, fleet))


async def run_once(args: argparse.Namespace, fleet: Fleet) -> int:
    """Plain `status` / `status --json`: every host at once, one remote command each (console.fleet.oneshot), its
    routers included; a host whose Python cannot run the agent gets the controller's first look instead."""
    from console.fleet.oneshot import look_once
    from console.fleet.report import EXIT_OK, EXIT_UNREACHABLE, router_doc, status_doc
    from console.remote_text import for_json
    from console.router import look

    t0 = time.monotonic()
    found = await look_once(fleet, args.wait, routers=functools.partial(look.router_config, fleet))
    state, routers = found.state, look.routers_of(fleet, found)
    if found.fallback:
        await _first_look_of(fleet, found.fallback, state, max(1.0, args.wait - (time.monotonic() - t0)), routers)
    doc = status_doc(state)
    if fleet.routers:
        doc["routers"] = [
            router_doc(
                routers[n],
                functools.partial(look.replica_of, fleet, state.servers, n),
                look.ended_workers(fleet, state.servers, routers[n]),
            )
            for n in fleet.routers
        ]
    if args.json:
        print(json.dumps(for_json(doc), indent=2), flush=True)
    else:
        print(render(doc), flush=True)
    return EXIT_UNREACHABLE if any(h["state"] != "up" for h in doc["hosts"]) else EXIT_OK


async def _first_look_of(
    fleet: Fleet, hosts: list[str], state: FleetState, wait_s: float, routers: dict[str, RouterView]
) -> None:
    """The controller path for `hosts` (today: no Python there to run the agent), its picture moved into `state`
    and its routers' views into `routers`."""
    from console.fleet.controller import FleetController
    from console.fleet.report import _wait_host

    ctl = FleetController(fleet)
    await ctl.start(hosts)
    try:
        await asyncio.gather(*(_wait_host(ctl, h, wait_s) for h in hosts))
        await first_look(ctl, wait_s)
        mine = [n for n, s in fleet.routers.items() if s.host in hosts and ctl.state.hosts[s.host].conn == "up"]
        if mine:
            from console.router.manager import RouterManager

            mgr = RouterManager(ctl)
            try:
                routers.update(zip(mine, await asyncio.gather(*(mgr.refresh(n) for n in mine)), strict=True))
            finally:
                await mgr.aclose()
    finally:
        await ctl.close()
    for h in hosts:
        state.hosts[h] = ctl.state.hosts[h]
    state.servers.update({n: s for n, s in ctl.state.servers.items() if s.meta.host in hosts})


def run_with_controller(args: argparse.Namespace, fleet: Fleet) -> int:
    from console.fleet.report import EXIT_OK, EXIT_UNREACHABLE, run_async, session, status_doc
    from console.remote_text import for_json

    async def body(ctl: FleetController) -> int:
        from console.fleet.report import router_doc

        await first_look(ctl, args.wait)
        mgr = None
        if ctl.fleet.routers:
            from console.router.manager import RouterManager

            mgr = RouterManager(ctl)
        try:
            return await loop(ctl, mgr, router_doc)
        finally:
            if mgr is not None:
                await mgr.aclose()

    async def loop(ctl: FleetController, mgr: RouterManager | None, router_doc: Callable[..., dict[str, Any]]) -> int:
        while True:
            doc = status_doc(ctl.state)
            if mgr is not None:  # each router's process, /health, /workers and metrics, all at once
                live = [n for n in mgr.fleet.routers if ctl.state.hosts[mgr.fleet.routers[n].host].conn == "up"]
                await asyncio.gather(*(mgr.refresh(n) for n in live))
                doc["routers"] = [
                    router_doc(mgr.views[n], lambda url, n=n: mgr.replica_of(n, url), mgr.ended_workers(n))
                    for n in mgr.fleet.routers
                ]
            if args.json:
                print(json.dumps(for_json(doc), indent=None if args.watch else 2), flush=True)
            else:
                if args.watch:
                    getattr(sys.stdout, "raw_write", sys.stdout.write)("\x1b[2J\x1b[H")  # ours, not remote text
                print(render(doc), flush=True)
            if not args.watch:
                return EXIT_UNREACHABLE if any(h["state"] != "up" for h in doc["hosts"]) else EXIT_OK
            await asyncio.sleep(2)

    return run_async(session(args, None, body, wait_s=args.wait, fleet=fleet))
