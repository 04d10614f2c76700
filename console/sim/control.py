"""Sim-only control channel: tests crash a running sim server at any phase, slow it, or change its token rate.

`inject(host_dir, port_or_pid, action, **kw)` writes `HOST_DIR/control/<port_or_pid>.json`; the
server polls it (startup steps and every 0.1 s while serving) and deletes it when applied.
Actions: "crash" (kind = one of CRASH_KINDS), "rate" (tok_s = peak tokens/s per GPU, "inf" for
zero delay), "slow" (factor multiplies every delay), "accept" (p = the drafter's per-token acceptance, 0.02 a
collapsed drafter; absent: the algorithm's own again). `phase="weights"` (init, weights, kv, capture,
draft, serving) holds a command until the server reaches that phase.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

CRASH_KINDS = ("cuda-assert", "nccl", "oom", "sigkill", "rank-sigkill")
ACTIONS = ("crash", "rate", "slow", "accept")


def inject(host_dir: str | Path, port_or_pid: int, action: str, **kw: Any) -> Path:
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; expected one of {', '.join(ACTIONS)}")
    if action == "crash" and kw.get("kind", "sigkill") not in CRASH_KINDS:
        raise ValueError(f"unknown crash kind {kw.get('kind')!r}; expected one of {', '.join(CRASH_KINDS)}")
    d = Path(host_dir) / "control"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{port_or_pid}.json"
    tmp = d / f".{port_or_pid}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"action": action, "t": time.time(), **kw}))
    os.replace(tmp, p)
    return p


def take(host_dir: str | Path, keys: list[int]) -> list[dict[str, Any]]:
    """Commands addressed to any of `keys` (port, pid), removed once read."""
    out = []
    for k in keys:
        p = Path(host_dir) / "control" / f"{k}.json"
        try:
            cmd = json.loads(p.read_text())
            p.unlink()
        except (OSError, ValueError):
            continue
        out.append(cmd)
    return out


def hold_vram(host_dir: str | Path, gpu: int, mib: int, name: str = "python3") -> subprocess.Popen[str]:
    """Start a foreign process that holds `mib` MiB on sim GPU `gpu` until it is killed."""
    import subprocess
    import sys

    p = subprocess.Popen(
        [sys.executable, "-m", "console.sim.hog", str(host_dir), str(gpu), str(mib), name],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    p.stdout.readline()
    return p
