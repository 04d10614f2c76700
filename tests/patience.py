"""How long a test waits for something that will happen: generous, because a wait costs nothing when it does.

Every polling helper multiplies its timeout by PATIENCE (DFC_TEST_PATIENCE, default 3), so on a busy machine a wait
stretches instead of failing. Deadlines that are part of a contract are not waits: they are checked against a
baseline measured in the same run (process samples counted, `tests.fixtures.slowdown`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

PATIENCE = float(os.environ.get("DFC_TEST_PATIENCE", "3"))


def patient(timeout: float) -> float:
    """The timeout a wait really uses."""
    return timeout * PATIENCE


def settles(cond: Callable[[], bool], timeout: float = 5.0, every: float = 0.02) -> bool:
    """Whether `cond()` holds within `patient(timeout)`: for what the far side does after we act (an sshd
    session exiting once its client closed), which no reply tells us about."""
    end = time.monotonic() + patient(timeout)
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(every)
    return True
