"""What the journal keeps of a command (a name, inline scripts as digests), which records are polling, grouping (pure)."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import itertools
import os
import re
import shlex
import time
from collections.abc import Iterable, Iterator
from typing import Any

SCRIPT_MIN = 200
"""A quoted argument this long, or holding a newline, is a script: the journal keeps its digest, not its text."""
POLLING_EVENTS = frozenset({"seen", "found-ended", "host-up", "host-down", "host-connecting", "subscriber-error"})
"""Lifecycle records that the console writes while it only watches (connect, re-attach)."""
KINDS = ("actions", "polling", "all")

_QUOTED = re.compile(r"'([^']*)'")
_PREFIX = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*;?\s+|export\s+[A-Za-z_][A-Za-z0-9_]*;\s*|exec\s+)+")
_op: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("journal_op", default=None)
_op_seq = itertools.count(1)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:12]


def compact(command: str) -> str:
    """The command with every inline script (a long or multi-line '...' argument) replaced by
    `<script N lines, B bytes, sha256 D>`: the agent's source is 5 kB per stream start."""

    def one(m: re.Match[str]) -> str:
        body = m.group(1)
        if "\n" not in body and len(body) < SCRIPT_MIN:
            return m.group(0)
        return f"<script {body.count(chr(10)) + 1} lines, {len(body)} bytes, sha256 {digest(body)}>"

    return _QUOTED.sub(one, command)


LINE_MAX = 4000
"""`journal` prints a command on one line, at most this long (`--json` has all of it): room for a whole
launch wrapper (about 1.8 kB), whose `setsid` line is what an audit looks for."""


def one_line(command: str) -> str:
    """A multi-line or very long command as one line: its lines joined, cut at LINE_MAX with its size and digest."""
    flat = " ⏎ ".join(ln.strip() for ln in command.splitlines() if ln.strip())
    if len(flat) <= LINE_MAX:
        return flat
    return f"{flat[:LINE_MAX]}… [{command.count(chr(10)) + 1} lines, {len(command)} bytes, sha256 {digest(command)}]"


def command_name(command: str) -> str:
    """The program a command runs, past the host's env prefix: `nvidia-smi`, `python3 -c`, `mkdir`."""
    rest = _PREFIX.sub("", command.strip())
    try:
        words = shlex.split(rest.split(";")[0].split("&&")[0].split("|")[0])
    except ValueError:
        words = rest.split()
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words = words[1:]
    if not words:
        return "sh"
    prog = os.path.basename(words[0])
    return f"{prog} -c" if "-c" in words[1:6] else prog


@contextlib.contextmanager
def operation(name: str) -> Iterator[str]:
    """Records written inside (this task and the tasks it starts) carry one op id: a command's steps."""
    outer = _op.get()
    if outer is not None:  # already inside one: its steps stay in the outer group
        yield outer[0]
        return
    op_id = f"{os.getpid():x}-{next(_op_seq)}"
    token = _op.set((op_id, name))
    try:
        yield op_id
    finally:
        _op.reset(token)


def current_op() -> dict[str, str]:
    cur = _op.get()
    return {"op": cur[0], "op_name": cur[1]} if cur else {}


def record_kind(rec: dict[str, Any]) -> str:
    """`actions` (what a user or an action did: its commands and lifecycle) or `polling` (watching)."""
    if rec.get("op"):
        return "actions"  # a step of a command or action (its commands, its lock, the server it launched)
    if rec.get("kind") in ("command", "stream"):
        return "polling"
    return "polling" if rec.get("action") in POLLING_EVENTS else "actions"


def host_of_record(rec: dict[str, Any]) -> str | None:
    if rec.get("host"):
        return str(rec["host"])
    server = str(rec.get("server") or "")
    if "@" in server:
        return server.split("@", 1)[1].split(":", 1)[0]
    return None


def select(recs: Iterable[dict[str, Any]], kind: str = "all", host: str | None = None) -> list[dict[str, Any]]:
    return [
        r for r in recs if (kind == "all" or record_kind(r) == kind) and (host is None or host_of_record(r) == host)
    ]


def grouped_lines(recs: list[dict[str, Any]], fmt: Any) -> list[str]:
    """One header per run of an operation's records (`── launch small [op 1a2b-3]`), its steps indented."""
    out: list[str] = []
    cur: str | None = None
    for r in recs:
        op = r.get("op")
        if op != cur and op is not None:
            t = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.get("t", 0)))
            out.append(f"{t}  ── {r.get('op_name') or '?'} [op {op}]")
        cur = op
        out.append(("    " if op is not None else "") + fmt(r))
    return out
