"""Per-trial outcomes of the fault and hostile-input suites, written to JSON for the README's reliability table."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

DEFAULT_OUT = Path(__file__).with_name(".results") / "reliability.json"
_lock = threading.Lock()
SEED = int(os.environ.get("DFLASH_RELIABILITY_SEED") or 19)
"""One seed for every generated trial (hypothesis `@seed`), so two runs try the same cases and their trial
counts compare; $DFLASH_RELIABILITY_SEED picks another set."""


@dataclass
class Trial:
    suite: str
    case: str
    trial: int
    ok: bool
    seconds: float
    detail: str = ""
    figures: dict[str, float] = field(default_factory=dict)


_RECORDS: list[Trial] = []


def out_path() -> Path:
    return Path(os.environ.get("DFLASH_RELIABILITY_OUT") or DEFAULT_OUT)


def record(suite: str, case: str, trial: int, ok: bool, seconds: float, detail: str = "", **figures: float) -> Trial:
    t = Trial(suite, case, trial, ok, round(seconds, 3), detail[:500], {k: round(v, 3) for k, v in figures.items()})
    with _lock:
        _RECORDS.append(t)
    return t


def count() -> int:
    """Records so far (a test that fails having recorded none is recorded by the suites' hook)."""
    with _lock:
        return len(_RECORDS)


def write() -> Path | None:
    """Write every record of this run (merged with records from this run's other suites)."""
    with _lock:
        recs = [asdict(r) for r in _RECORDS]
    if not recs:
        return None
    p = out_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "pid": os.getpid(),
        "trials_scale": os.environ.get("DFLASH_FAULT_TRIALS", ""),
        "seed": SEED,
        "records": recs,
    }
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, p)
    return p
