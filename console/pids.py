"""Is a process alive, by pid: the one check the demo's port claims and the test network's stale-run cleanup share."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True while `pid` names a process (one we may not signal counts: it exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
