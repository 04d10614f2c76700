"""`dflash-console serve`: the console in a browser (textual-serve), on 127.0.0.1, read-only, behind a token.

Each browser session is its own console process (the same app, textual-serve's web driver), so the
browser shows exactly what the terminal does; `--allow-actions` is needed before it may launch or stop.
"""

from __future__ import annotations

import argparse
import os
import sys

DEFAULT_PORT = 8000
LOOPBACK = {"127.0.0.1": "127.0.0.1", "localhost": "localhost", "::1": "[::1]"}
"""Bind addresses only this machine reaches, and how `ssh -L` names each."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="serve the console to a browser (127.0.0.1, read-only, token in the URL)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1: reach it through `ssh -L`; anything else is plain HTTP)",
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to bind (default {DEFAULT_PORT}; 0 picks one)")
    p.add_argument("--demo", action="store_true", help="each session opens the demo on its own simulated fleet")
    p.add_argument(
        "--allow-actions",
        action="store_true",
        help="let browser sessions launch, relaunch, stop and reconnect (default: read-only)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.config import find_config, load_fleet
    from console.serve.auth import TOKEN_ENV, new_token, valid_token
    from console.serve.server import ConsoleServer
    from console.serve.session import SessionOptions, describe, session_command

    token = os.environ.pop(TOKEN_ENV, "") or new_token()  # popped: the sessions' consoles never see it
    problem = valid_token(token)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"error: --port {args.port}: expected 0-65535", file=sys.stderr)
        return 2
    read_only = bool(getattr(args, "read_only", False)) or not args.allow_actions
    hosts = None
    if not args.demo:
        path = find_config(getattr(args, "hosts", None))
        load_fleet(path)  # a bad hosts.toml is reported here (exit 2), not in every browser tab
        hosts = str(path.resolve())
    opts = SessionOptions(read_only=read_only, demo=args.demo, hosts=hosts, theme=getattr(args, "theme", None))

    def banner(url: str) -> None:
        _say(f"dflash-console serve: open {url}")
        _say(f"  {describe(opts)}")
        if args.host in LOOPBACK:
            port, there = server.bound_port, LOOPBACK[args.host]
            _say(f"  from your laptop: ssh -N -L {port}:{there}:{port} THIS_HOST, then open the URL there")
        else:
            _say(f"  warning: bound to {args.host}: plain HTTP, the token crosses the network unencrypted")
        _say("  Ctrl+C stops the server and every session")

    server = ConsoleServer(session_command(opts), token=token, host=args.host, port=args.port, banner=banner)
    try:
        server.serve()
    except OSError as e:  # the port is taken, the address is not ours
        print(f"error: cannot serve on {args.host}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return 3
    return 0


def _say(line: str) -> None:
    """The banner holds the token on purpose: it is written past the CLI's secret masking (raw_write)."""
    out = sys.stdout
    write = getattr(out, "raw_write", out.write)
    write(line + "\n")
    out.flush()
