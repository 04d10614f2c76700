"""`dflash-console journal [-n N] [--json]`: the local command log (every remote command and lifecycle step).

Read from `user_state_dir()/journal.jsonl` (DFLASH_STATE_DIR overrides); secrets are masked when written.
"""

from __future__ import annotations

import argparse
import json

from console.fleet.journal import format_record, journal_path, read_journal


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("journal", help="show the command log: remote commands, exit status, duration, lifecycle")
    p.add_argument("-n", "--lines", type=int, default=50, metavar="N", help="last N records (default 50; 0 = all)")
    p.add_argument("--json", action="store_true", help="raw JSONL records")
    p.add_argument("--host", help="only this host")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    recs = list(read_journal())
    if args.host:
        recs = [r for r in recs if r.get("host") == args.host or (r.get("server") or "").split("@")[-1].startswith(args.host)]
    if args.lines > 0:
        recs = recs[-args.lines:]
    if not recs:
        print(f"(journal empty: {journal_path()})")
    for r in recs:
        print(json.dumps(r, ensure_ascii=False) if args.json else format_record(r))
    return 0
