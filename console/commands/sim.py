"""`dflash-console sim up|down|crash`: build, stop and poke the simulated GPU fleet."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sim", help="the simulated GPU fleet (demo and tests)")
    s = p.add_subparsers(dest="sim_command", metavar="ACTION", required=True)
    up = s.add_parser("up", help="build a sim fleet in DIR and write DIR/hosts.toml (idempotent)")
    up.add_argument("--dir", required=True)
    up.add_argument(
        "--hosts", dest="sim_hosts", default="ct129,blackwell", help="comma-separated: ct129,blackwell,blackwell8"
    )
    up.add_argument("--time-scale", type=float, default=None, help="startup speed: 1.0 realistic, 0.1 fast")
    up.set_defaults(func=_up)
    down = s.add_parser("down", help="stop every sim process of the fleet in DIR")
    down.add_argument("--dir", required=True)
    down.set_defaults(func=_down)
    cr = s.add_parser("crash", help="crash a running sim server")
    cr.add_argument("--dir", required=True)
    cr.add_argument("--host", required=True)
    cr.add_argument("--port", type=int, required=True)
    cr.add_argument("--kind", default="sigkill", help="cuda-assert, nccl, oom, sigkill, rank-sigkill")
    cr.set_defaults(func=_crash)


def _up(args: argparse.Namespace) -> int:
    from console.sim.fleet import sim_up

    try:
        path = sim_up(args.dir, hosts=[h for h in args.sim_hosts.split(",") if h], time_scale=args.time_scale)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


def _down(args: argparse.Namespace) -> int:
    from console.sim.fleet import sim_down

    print(f"stopped {sim_down(args.dir)} sim processes")
    return 0


def _crash(args: argparse.Namespace) -> int:
    from pathlib import Path

    from console.sim.control import inject

    host_dir = Path(args.dir) / args.host
    if not (host_dir / "spec.json").exists():
        print(f"error: no sim host '{args.host}' in {args.dir}", file=sys.stderr)
        return 2
    try:
        inject(host_dir, args.port, "crash", kind=args.kind)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
