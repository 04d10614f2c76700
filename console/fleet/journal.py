"""The command log: every remote command and lifecycle step, appended to a local JSONL file, secrets masked.

Lives in `user_state_dir()/journal.jsonl` (DFLASH_STATE_DIR overrides). Values of `--api-key`-style
flags and of env vars whose name holds KEY/TOKEN/SECRET never reach it (or any output): `console.masking.mask`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from console.config import user_state_dir
from console.fleet.events import (
    Event,
    HostDown,
    HostUp,
    LogData,
    ServerAction,
    ServerAlive,
    ServerGone,
    ServerSeen,
)
from console.fleet.journalview import command_name, compact, current_op, one_line

# the masking lives in console.masking (one function for every output path); re-exported (`x as x`) for old importers
from console.masking import MASK as MASK
from console.masking import is_secret_name as is_secret_name
from console.masking import mask as mask
from console.masking import mask_argv as mask_argv
from console.masking import mask_env as mask_env
from console.masking import remember_secrets as remember_secrets
from console.remote_text import for_terminal
from console.transport.base import CommandResult


def journal_path() -> Path:
    return user_state_dir() / "journal.jsonl"


class Journal:
    """Append-only JSONL; one line per record, flushed at once (a crash loses nothing written)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or journal_path()
        self._lock = threading.Lock()

    def write(self, kind: str, **fields: Any) -> None:
        rec: dict[str, Any] = {"t": round(time.time(), 3), "kind": kind, **current_op()}
        for k, v in fields.items():
            rec[k] = for_terminal(v) if isinstance(v, str) else v  # masked, and no host controls in the file
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
        self.write(
            "command",
            host=r.host,
            name=command_name(r.command),
            command=compact(mask(r.command)),
            exit_status=r.exit_status,
            duration_s=round(r.duration_s, 3),
            **({"error": err} if err else {}),
        )

    def stream(self, r: CommandResult) -> None:
        """HostLink hook: a long-lived remote process (telemetry, process loop, log tail) ended."""
        self.write(
            "stream",
            host=r.host,
            name=command_name(r.command),
            command=compact(mask(r.command)),
            exit_status=r.exit_status,
            duration_s=round(r.duration_s, 3),
        )

    def event(
        self,
        action: str,
        *,
        server: str | None = None,
        host: str | None = None,
        ok: bool = True,
        message: str = "",
        **extra: Any,
    ) -> None:
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
        return mask(
            f"{t}  {rec.get('host')}  exit {st if st is not None else '-'}  {rec.get('duration_s', 0):.2f}s  "
            f"{one_line(str(rec.get('command') or ''))}" + (f"  [{rec['error']}]" if rec.get("error") else "")
        )
    ok = "ok" if rec.get("ok", True) else "FAILED"
    who = rec.get("server") or rec.get("host") or ""
    return mask(f"{t}  {who}  {rec.get('action')} {ok}" + (f": {rec['message']}" if rec.get("message") else ""))


def journal_event(j: Journal, ev: Event, seen_ids: set[str]) -> None:
    """The lifecycle record an applied event makes, if any (a launch is recorded `seen` once per `seen_ids`)."""
    if isinstance(ev, LogData):
        return  # most events by far (a log flood sends hundreds of batches a second); never a record
    if isinstance(ev, ServerAction):
        j.event(ev.action, server=ev.server, ok=ev.ok, message=ev.message)
    elif isinstance(ev, ServerGone):
        j.event(
            "found-ended" if ev.found_ended else "gone",
            server=ev.server,
            ok=True,
            exit_status=ev.exit_status,
            signal=ev.signal,
        )
    elif isinstance(ev, ServerAlive):
        j.event("alive-again", server=ev.server, ok=True, message="called ended, but its session is running")
    elif isinstance(ev, ServerSeen) and ev.meta.launch_id not in seen_ids:
        seen_ids.add(ev.meta.launch_id)
        j.event(
            "seen",
            server=ev.meta.name,
            host=ev.meta.host,
            ok=True,
            managed=ev.meta.managed,
            alive=ev.alive,
            pid=ev.meta.pid,
            log_path=ev.meta.log_path,
        )
    elif isinstance(ev, HostUp):
        j.event("host-up", host=ev.host)
    elif isinstance(ev, HostDown):
        j.event("host-down", host=ev.host, ok=False, message=ev.error)
