"""`dflash-console restart NAME [--wait]`: stop if running, relaunch the same preset on the same GPUs.

The crashed or stopped run's log is kept (a new log file per launch). Exit codes as `stop`.
"""

from __future__ import annotations

import argparse

from console.commands.stop import run


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("restart", help="relaunch a server's preset on its GPUs (the old log is kept)")
    p.add_argument("name", metavar="NAME", help="server name, e.g. PRESET@HOST:gpu0, or a preset with one server")
    p.add_argument("--wait", action="store_true", help="wait until /health answers 200")
    p.set_defaults(func=lambda a: run(a, "restart"))
