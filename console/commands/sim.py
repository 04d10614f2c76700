"""`dflash-console sim up|down|crash`: build, stop and poke the simulated GPU fleet.

`sim up` puts each preset and router on ports free on this machine when the fleet is first written (the
sim hosts share the local port space with everything else here), keeps them when it is run again, and
prints the commands to run next.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.config import Fleet


CRASH_KINDS = ("cuda-assert", "nccl", "oom", "sigkill", "rank-sigkill")
"""console.sim.control's kinds (the sim is imported when a sim command runs, not for `--help`)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sim", help="the simulated GPU fleet (demo and tests)")
    s = p.add_subparsers(dest="sim_command", metavar="ACTION", required=True)
    up = s.add_parser("up", help="build a sim fleet in DIR and write DIR/hosts.toml (idempotent)")
    up.add_argument("--dir", required=True, help="the fleet's folder (created; hosts.toml is written in it)")
    up.add_argument(
        "--hosts", dest="sim_hosts", default="ct129,blackwell", help="comma-separated: ct129,blackwell,blackwell8"
    )
    up.add_argument("--time-scale", type=float, default=None, help="startup speed: 1.0 realistic, 0.1 fast")
    up.set_defaults(func=_up)
    down = s.add_parser("down", help="stop every sim process of the fleet in DIR")
    down.add_argument("--dir", required=True, help="the fleet's folder, as given to `sim up`")
    down.set_defaults(func=_down)
    cr = s.add_parser("crash", help="crash a running sim server")
    cr.add_argument("--dir", required=True, help="the fleet's folder, as given to `sim up`")
    cr.add_argument("--host", required=True, help="the sim host the server runs on, e.g. blackwell")
    cr.add_argument("--port", type=int, required=True, help="the server's HTTP port (see `status`)")
    cr.add_argument("--kind", default="sigkill", choices=CRASH_KINDS, help=f"how it dies: {', '.join(CRASH_KINDS)}")
    cr.set_defaults(func=_crash)


def _up(args: argparse.Namespace) -> int:
    from console.sim.fleet import sim_up

    hosts = [h for h in args.sim_hosts.split(",") if h]
    try:
        ports = chosen_ports(Path(args.dir), hosts)
        path = sim_up(args.dir, hosts=hosts, time_scale=args.time_scale, ports=ports)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(path)
    for line in next_commands(path):
        print(line, file=sys.stderr)
    return 0


def chosen_ports(root: Path, hosts: list[str]) -> dict[str, int]:
    """Each preset's and router's base port: the ones an earlier `sim up` wrote in this folder (its servers may
    hold them now), else the defaults moved past any port taken on this machine (as the demo does)."""
    from console.config import ConfigError, load_fleet, parse_fleet
    from console.sim.fleet import hosts_toml
    from console.sim.spec import PRESET_SPECS
    from console.ui.demo import with_free_ports

    unknown = [h for h in hosts if h not in PRESET_SPECS]
    if unknown:
        from console.commands.names import unknown as unknown_name

        raise ValueError(unknown_name("sim host", unknown[0], list(PRESET_SPECS)))
    written = root / "hosts.toml"
    if written.exists():
        try:
            return _base_ports(load_fleet(written))
        except ConfigError:
            pass  # not a fleet this command wrote: pick afresh
    text = hosts_toml({h: root.resolve() / h for h in hosts}, {h: PRESET_SPECS[h] for h in hosts})
    return _base_ports(with_free_ports(parse_fleet(text, str(written))))


def _base_ports(fleet: Fleet) -> dict[str, int]:
    out = {n: (p.port[0] if isinstance(p.port, list) else p.port) for n, p in fleet.presets.items()}
    return out | {n: r.port for n, r in fleet.routers.items()}


def next_commands(path: Path) -> list[str]:
    """What to run next with the fleet just written (on stderr: stdout stays the one path scripts read)."""
    from console.config import load_fleet

    h = shlex.quote(str(path))
    first = next(iter(load_fleet(path).presets), None)
    out = [f"next:  dflash-console --hosts {h}"]
    if first:
        out.append(f"       dflash-console --hosts {h} launch {first} --wait")
    return [*out, f"stop:  dflash-console sim down --dir {shlex.quote(str(path.parent))}"]


def _down(args: argparse.Namespace) -> int:
    from console.sim.fleet import sim_down

    print(f"stopped {sim_down(args.dir)} sim processes")
    return 0


def _crash(args: argparse.Namespace) -> int:
    from console.commands.names import unknown
    from console.sim.control import inject
    from console.sim.fleet import host_dirs

    host_dir = Path(args.dir) / args.host
    if not (host_dir / "spec.json").exists():
        print(f"error: {unknown('sim host', args.host, [d.name for d in host_dirs(args.dir)])}", file=sys.stderr)
        return 2
    try:
        inject(host_dir, args.port, "crash", kind=args.kind)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
