"""Per-launch speculative-decoding figures, kept in the state dir: what one launch of a preset gave (accept length
mean/p10/p90, tok/s) so the server screen can say "this launch vs the last ones" and the collapse alarm knows a
preset's usual figure. `launch_record` is pure; `SpecHistory` is the file (JSONL, appended, one line a launch)."""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path

from console.config import user_state_dir
from console.fleet.events import SpecLaunchRecord
from console.fleet.state import ServerState
from console.masking import mask_argv
from console.sglang.specdec import percentile, sane_accept_len, spec_config

KEPT_LINES = 5000
"""Launch records read back at most (the newest): years of launches for a team, a bounded read."""
MIN_FIGURES = 3
"""A launch with fewer accept figures says nothing about its drafter: not recorded."""


def history_path() -> Path:
    return user_state_dir() / "spec_history.jsonl"


def launch_record(s: ServerState) -> SpecLaunchRecord | None:
    """The figures of one ended (or ending) launch with speculative decoding; None for any other."""
    cfg = spec_config(s.meta.argv)
    vals = [v for _, v in s.log.accepts]
    if cfg is None or len(vals) < MIN_FIGURES or not s.meta.preset:
        return None
    tps = list(s.throughput_history)
    return SpecLaunchRecord(
        preset=s.meta.preset,
        server=s.name,
        launch_id=s.meta.launch_id or f"{s.name}@{s.meta.started_at}",
        algorithm=cfg.algorithm,
        shape=cfg.shape(),
        draft_model=cfg.draft_model or "",
        args=tuple(mask_argv(list(s.meta.argv))),
        started_at=s.meta.started_at,
        ended_at=s.ended_at,
        figures=len(vals),
        accept_mean=round(sum(vals) / len(vals), 3),
        accept_p10=percentile(vals, 10) or 0.0,
        accept_p90=percentile(vals, 90) or 0.0,
        tok_s_mean=round(sum(tps) / len(tps), 1) if tps else None,
    )


def cumulative_accept(body: bytes) -> float | None:
    """`internal_states[0].avg_spec_accept_length` of a /server_info body (rank 0, as the logs print), or None."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # garbage, or brackets nested past the parser's stack
        return None
    states = doc.get("internal_states") if isinstance(doc, dict) else None
    first = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    v = first.get("avg_spec_accept_length")
    return sane_accept_len(float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class SpecHistory:
    """The JSONL file of launch records; a bad line is skipped, never fatal (the file is the user's)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or history_path()

    def load(self) -> list[SpecLaunchRecord]:
        try:
            with self.path.open("r", encoding="utf-8", errors="replace") as f:
                lines = deque(f, maxlen=KEPT_LINES)
        except OSError:
            return []
        out = []
        for ln in lines:
            try:
                d = json.loads(ln)
                out.append(SpecLaunchRecord.from_dict(d))
            except (ValueError, TypeError, KeyError):
                continue
        return out

    def append(self, rec: SpecLaunchRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec.to_dict(), ensure_ascii=False) + "\n")
