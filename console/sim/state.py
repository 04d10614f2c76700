"""The sim host's GPU state file: which live process holds how much VRAM and load on which GPU.

`HOST_DIR/state/gpus.json`, guarded by `flock` on `state/gpus.lock`. A process entry counts only
while its pid is alive with the same start time (so dead or recycled pids stop counting).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _paths(host_dir: str | Path) -> tuple[Path, Path]:
    d = Path(host_dir) / "state"
    return d / "gpus.json", d / "gpus.lock"


def proc_start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks); None if gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    if rest[0] in ("Z", "X"):
        return None
    return int(rest[19])


def alive(entry: dict[str, Any]) -> bool:
    st = proc_start_ticks(int(entry["pid"]))
    return st is not None and st == entry.get("start")


@contextlib.contextmanager
def locked(host_dir: str | Path) -> Iterator[dict[str, Any]]:
    """Read-modify-write the state under the lock; dead processes are dropped on the way."""
    data_p, lock_p = _paths(host_dir)
    data_p.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_p, "a+") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        try:
            data = json.loads(data_p.read_text()) if data_p.exists() else {}
        except ValueError:
            data = {}
        procs = {k: v for k, v in data.get("procs", {}).items() if alive(v)}
        data["procs"] = procs
        yield data
        tmp = data_p.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, data_p)


def snapshot(host_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Live process entries, keyed by pid string (shared lock, no write)."""
    data_p, lock_p = _paths(host_dir)
    if not data_p.exists():
        return {}
    with open(lock_p, "a+") as lk:
        fcntl.flock(lk, fcntl.LOCK_SH)
        try:
            data = json.loads(data_p.read_text())
        except (OSError, ValueError):
            return {}
    return {k: v for k, v in data.get("procs", {}).items() if alive(v)}


def register(host_dir: str | Path, pid: int | None = None, **fields: Any) -> None:
    """Create or update this process's entry (`gpus` {idx: MiB}, `util` {idx: %}, `name`, `port`, ...)."""
    pid = pid or os.getpid()
    with locked(host_dir) as data:
        e = data["procs"].setdefault(
            str(pid), {"pid": pid, "start": proc_start_ticks(pid), "since": time.time(), "gpus": {}, "util": {}}
        )
        for k, v in fields.items():
            if k in ("gpus", "util") and v is not None:
                e[k] = {str(g): x for g, x in v.items()}
            elif v is not None:
                e[k] = v


def unregister(host_dir: str | Path, pid: int | None = None) -> None:
    with locked(host_dir) as data:
        data["procs"].pop(str(pid or os.getpid()), None)


def gpu_totals(host_dir: str | Path, n_gpus: int) -> list[tuple[int, float, list[dict[str, Any]]]]:
    """Per GPU: (used MiB by processes, utilisation %, [process entries holding memory on it])."""
    out: list[tuple[int, float, list[dict[str, Any]]]] = [(0, 0.0, []) for _ in range(n_gpus)]
    for e in snapshot(host_dir).values():
        for g, mib in e.get("gpus", {}).items():
            i = int(g)
            if 0 <= i < n_gpus and mib > 0:
                used, util, ps = out[i]
                out[i] = (used + int(mib), util, [*ps, e])
        for g, u in e.get("util", {}).items():
            i = int(g)
            if 0 <= i < n_gpus:
                used, util, ps = out[i]
                out[i] = (used, min(100.0, util + float(u)), ps)
    return out
