"""The default command: open the TUI on hosts.toml, or on a temporary sim fleet with --demo."""

from __future__ import annotations

import argparse
import sys


def run_tui(args: argparse.Namespace) -> int:
    try:
        from console.ui.app import run_app  # arrives with the screens
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("console.ui"):
            raise
        print("dflash-console: the TUI is not built yet (console/ui is missing); "
              "use the subcommands: dflash-console --help", file=sys.stderr)
        return 1
    return run_app(args)
