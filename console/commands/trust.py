"""`dflash-console trust HOST`: show a host's SSH key fingerprint and, once confirmed, trust it."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # asyncssh is imported when the command runs, not for `--help`
    from console.transport.trust import HostKeyInfo

EXIT_TRUSTED, EXIT_DECLINED, EXIT_UNREACHABLE = 0, 1, 3


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("trust", help="fetch a host's SSH key, show its SHA256 fingerprint, and trust it")
    p.add_argument("host", metavar="HOST", help="a [hosts.NAME] table in hosts.toml")
    p.add_argument("--yes", action="store_true", help="trust without asking (for scripts)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.config import load_fleet
    from console.transport.base import TransportError
    from console.transport.ssh import SshTransport
    from console.transport.trust import add_trusted

    fleet = load_fleet(args.hosts)
    if args.host not in fleet.hosts:
        from console.commands.names import unknown

        print(f"error: {unknown('host', args.host, list(fleet.hosts))}", file=sys.stderr)
        return 2
    host = fleet.hosts[args.host]
    if host.transport == "local":
        print(f"{args.host}: local host, no SSH key to trust")
        return EXIT_TRUSTED
    added: set[str] = set()
    while True:  # a ProxyJump bastion's key comes first; once trusted, the next hop's, then the host's
        try:
            info = asyncio.run(SshTransport(args.host, host).fetch_host_key())
        except TransportError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_UNREACHABLE
        if info.key_line in added:  # trusted a moment ago yet still unknown: never loop on it
            print(f"error: {info.host_name}: the key just trusted is still not accepted", file=sys.stderr)
            return EXIT_DECLINED
        _show(info)
        if info.known:
            print("already trusted")
            return EXIT_TRUSTED
        if not args.yes and not _confirm(info):
            print("not trusted")
            return EXIT_DECLINED
        path = add_trusted(info.key_line)
        added.add(info.key_line)
        print(f"trusted: added to {path}")
        if info.bastion_for is None:
            return EXIT_TRUSTED


def _show(info: HostKeyInfo) -> None:
    print(f"host {info.host_name} ({info.pattern})")
    print(f"key  {info.key_type} {info.fingerprint}")
    if info.changed:
        print(
            "WARNING: this key differs from the one trusted before for this host. If nobody reinstalled "
            "the host, someone may be intercepting the connection."
        )


def _confirm(info: HostKeyInfo) -> bool:
    from console.transport.trust import console_known_hosts

    prompt = f"Trust this key for {info.host_name} (written to {console_known_hosts()})? [y/N] "
    print(prompt, end="", flush=True)
    try:
        answer = sys.stdin.readline()
    except (OSError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("y", "yes")
