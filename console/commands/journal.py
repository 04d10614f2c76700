"""`dflash-console journal [-n N] [--json] [--host H] [--kind actions|polling|all]`: the local command log.

Read from `user_state_dir()/journal.jsonl` (DFLASH_STATE_DIR overrides); secrets are masked when written.
Steps of one operation (a CLI command, a TUI action) are grouped under one header. Exit 0, 2 unknown host.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from console.commands.names import unknown
from console.fleet.journalview import KINDS, grouped_lines, host_of_record, select


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("journal", help="show the command log: remote commands, exit status, duration, lifecycle")
    p.add_argument("-n", "--lines", type=int, default=50, metavar="N", help="last N records (default 50; 0 = all)")
    p.add_argument("--json", action="store_true", help="raw JSONL records")
    p.add_argument("--host", help="only this host (a host of hosts.toml or of the journal)")
    p.add_argument(
        "--kind",
        choices=KINDS,
        default="actions",
        help="actions (default: commands and lifecycle of what was done), polling (telemetry, "
        "process loop, log tails, re-attach), or all",
    )
    p.set_defaults(func=run)


def _known_hosts(args: argparse.Namespace, recs: list[dict[str, Any]]) -> list[str]:
    from console.config import ConfigError, load_fleet

    names = {h for r in recs if (h := host_of_record(r))}
    try:
        names |= set(load_fleet(args.hosts).hosts)
    except ConfigError:
        pass  # the journal is readable without a valid hosts.toml
    return sorted(names)


def run(args: argparse.Namespace) -> int:
    from console.fleet.journal import format_record, journal_path, read_journal
    from console.fleet.report import EXIT_OK, EXIT_USAGE, fail

    recs = list(read_journal())
    if args.host:
        known = _known_hosts(args, recs)
        if args.host not in known:
            return fail(unknown("host", args.host, known), EXIT_USAGE)
    recs = select(recs, args.kind, args.host)
    if args.lines > 0:
        recs = recs[-args.lines :]
    if not recs:
        print(f"(no {'' if args.kind == 'all' else args.kind + ' '}records in {journal_path()})")
    if args.json:
        for r in recs:
            print(json.dumps(r, ensure_ascii=False))
    else:
        for line in grouped_lines(recs, format_record):
            print(line)
    return EXIT_OK
