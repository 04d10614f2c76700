"""The command log: every remote command and lifecycle step, appended to a local JSONL file, secrets masked.

Lives in `user_state_dir()/journal.jsonl` (DFLASH_STATE_DIR overrides). Values of `--api-key`-style
flags and of env vars whose name holds KEY/TOKEN/SECRET never reach it (or any output): `mask()`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from console.config import user_state_dir
from console.transport.base import CommandResult

MASK = "***"
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
_SECRET_FLAG = r"--[A-Za-z0-9-]*(?:api-key|token|secret|password)"
# `--api-key VALUE`, `--api-key=VALUE`, with the value bare, '...' or "..." quoted
_FLAG_RE = re.compile(rf"({_SECRET_FLAG})(=|\s+)('[^']*'|\"(?:[^\"\\]|\\.)*\"|[^\s'\"]+)", re.IGNORECASE)
# `'--api-key=a b'` as shlex.quote writes a value holding spaces
_QFLAG_RE = re.compile(rf"'({_SECRET_FLAG})=[^']*'", re.IGNORECASE)
# NAME=VALUE env words (bare or inside one pair of single quotes) whose NAME looks secret
_ENV_RE = re.compile(r"(?<![\w-])('?)([A-Za-z_][A-Za-z0-9_]*)=('[^']*'|\"(?:[^\"\\]|\\.)*\"|[^\s'\"]*)")
_QENV_RE = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)=[^']*'")

_known: set[str] = set()
_lock = threading.Lock()


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def remember_secrets(argv: list[str] | tuple[str, ...], env: dict[str, str] | None = None) -> None:
    """Note secret values from an argv/env so they are masked wherever they appear later."""
    vals: list[str] = []
    for i, a in enumerate(argv):
        flag, eq, val = a.partition("=")
        if re.fullmatch(_SECRET_FLAG, flag, re.IGNORECASE):
            if eq:
                vals.append(val)
            elif i + 1 < len(argv):
                vals.append(argv[i + 1])
    for k, v in (env or {}).items():
        if is_secret_name(k):
            vals.append(v)
    with _lock:
        _known.update(v for v in vals if len(v) >= 4)


def mask(text: str) -> str:
    """Mask secret flag values, secret env assignments and any remembered secret value."""
    if not text:
        return text
    out = _QFLAG_RE.sub(lambda m: f"'{m.group(1)}={MASK}'", text)
    out = _FLAG_RE.sub(lambda m: m.group(1) + m.group(2) + MASK, out)
    out = _QENV_RE.sub(lambda m: f"'{m.group(1)}={MASK}'" if is_secret_name(m.group(1)) else m.group(0), out)
    out = _ENV_RE.sub(
        lambda m: f"{m.group(1)}{m.group(2)}={MASK}" if is_secret_name(m.group(2)) and m.group(3) != MASK
        else m.group(0), out)
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for v in known:
        out = out.replace(v, MASK)
    return out


def mask_argv(argv: list[str] | tuple[str, ...]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for a in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        flag, eq, _ = a.partition("=")
        if re.fullmatch(_SECRET_FLAG, flag, re.IGNORECASE):
            out.append(f"{flag}={MASK}" if eq else a)
            hide_next = not eq
        else:
            out.append(mask(a))
    return out


def mask_env(env: dict[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret_name(k) else mask(v)) for k, v in env.items()}


def journal_path() -> Path:
    return user_state_dir() / "journal.jsonl"


class Journal:
    """Append-only JSONL; one line per record, flushed at once (a crash loses nothing written)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or journal_path()
        self._lock = threading.Lock()

    def write(self, kind: str, **fields: Any) -> None:
        rec: dict[str, Any] = {"t": round(time.time(), 3), "kind": kind}
        for k, v in fields.items():
            rec[k] = mask(v) if isinstance(v, str) else v
        line = json.dumps(rec, ensure_ascii=False, default=str)
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(line + "\n")
            except OSError:
                pass  # the journal must never take the console down

    def command(self, r: CommandResult) -> None:
        """Transport `on_command` hook."""
        err = r.stderr.strip()[-300:] if r.exit_status != 0 else ""
        self.write("command", host=r.host, command=r.command, exit_status=r.exit_status,
                   duration_s=round(r.duration_s, 3), **({"error": err} if err else {}))

    def stream(self, r: CommandResult) -> None:
        """HostLink hook: a long-lived remote process (telemetry, process loop, log tail) ended."""
        self.write("stream", host=r.host, command=r.command, exit_status=r.exit_status,
                   duration_s=round(r.duration_s, 3))

    def event(self, action: str, *, server: str | None = None, host: str | None = None, ok: bool = True,
              message: str = "", **extra: Any) -> None:
        self.write("event", action=action, server=server, host=host, ok=ok, message=message, **extra)


def read_journal(path: Path | None = None, tail: int | None = None) -> Iterator[dict[str, Any]]:
    p = path or journal_path()
    try:
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return
    if tail is not None:
        lines = lines[-tail:]
    for ln in lines:
        try:
            yield json.loads(ln)
        except ValueError:
            continue


def format_record(rec: dict[str, Any]) -> str:
    t = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec.get("t", 0)))
    if rec.get("kind") in ("command", "stream"):
        st = rec.get("exit_status")
        return mask(f"{t}  {rec.get('host')}  exit {st if st is not None else '-'}  {rec.get('duration_s', 0):.2f}s  "
                    f"{rec.get('command')}" + (f"  [{rec['error']}]" if rec.get("error") else ""))
    ok = "ok" if rec.get("ok", True) else "FAILED"
    who = rec.get("server") or rec.get("host") or ""
    return mask(f"{t}  {who}  {rec.get('action')} {ok}" + (f": {rec['message']}" if rec.get("message") else ""))
