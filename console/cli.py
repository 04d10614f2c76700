"""Entry point `dflash-console`: the TUI by default, and subcommands for scripts.

Each subcommand lives in `console/commands/NAME.py` with `register(subparsers)`. Exit codes:
0 ok, 1 the operation failed (or warnings with --strict), 2 bad config or usage, 3 remote failure.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from console import __version__
from console.config import ConfigError

COMMANDS = ("status", "launch", "stop", "restart", "probe", "logs", "trust", "journal",
            "diagnose", "check", "bench", "sim")


def build_parser(with_commands: bool = True) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="dflash-console",
        description="A terminal console for SGLang GPU fleets. Without a command it opens the TUI.",
    )
    ap.add_argument("--version", action="version", version=f"dflash-console {__version__}")
    ap.add_argument("--hosts", metavar="PATH", help="hosts.toml to use (default: ./hosts.toml, then the user config dir)")
    ap.add_argument("--demo", action="store_true", help="open on a temporary simulated fleet (no real hosts)")
    ap.add_argument("--read-only", action="store_true", help="hide and refuse every mutating action")
    ap.add_argument("--theme", metavar="NAME", help="UI theme (themes/ or the user themes folder)")
    if not with_commands:  # the TUI: no need to import every subcommand (asyncssh alone is 0.4 s)
        ap.set_defaults(command=None)
        return ap
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"console.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"console.commands.{name}":
                raise
            continue
        mod.register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    tui_only = not any(w in COMMANDS or w in ("-h", "--help") for w in words)
    ap = build_parser(with_commands=not tui_only)
    args = ap.parse_args(argv)
    try:
        if args.command is None:
            from console.commands.tui import run_tui

            return run_tui(args)
        return int(args.func(args) or 0)
    except ConfigError as e:
        for issue in e.issues:
            print(issue, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
