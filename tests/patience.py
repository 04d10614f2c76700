"""How long a test waits for something that will happen: generous, because a wait costs nothing when it does.

Every polling helper multiplies its timeout by PATIENCE (DFC_TEST_PATIENCE, default 3), so on a busy machine a wait
stretches instead of failing. Deadlines that are part of a contract are not waits: they are checked against a
baseline measured in the same run (process samples counted, `tests.fixtures.slowdown`).
"""

from __future__ import annotations

import os

PATIENCE = float(os.environ.get("DFC_TEST_PATIENCE", "3"))


def patient(timeout: float) -> float:
    """The timeout a wait really uses."""
    return timeout * PATIENCE
