"""Lines that say a process died, whatever prefix they came with: SGLang's crash records, C++/CPython aborts, NCCL's watchdog."""

from __future__ import annotations

import re

CRASH = "crash"
"""The server (or one of its schedulers) is gone."""
OWN_BLOCK = "own_block"
"""A crash, and the line heads its own traceback ("Scheduler hit an exception: Traceback ...")."""
ABORT = "abort"
"""A process abort: a crash, and the lines after it (`what():`, thread dumps) are its evidence."""
FRAGMENT = "fragment"
"""C++ exception frames follow (`Exception raised from ...`): part of an open traceback's message, else a process abort."""

LIB_ASSERT = re.compile(r"Assertion failed: (?P<file>[^\s,]+\.(?:cuh|cu|hpp|h)):(?P<line>\d+), condition: (?P<cond>.*)")
"""A device-side assert printed by a library's own macro (DeepGEMM, CUTLASS), not CUDA's `Assertion `...` failed.`:
the kernel traps, the CUDA context is lost and the process cannot go on."""
_RANK_DEAD = re.compile(r"Rank \d+ scheduler is dead")
_CRASH_STARTS = ("Received sigquit", "SIGQUIT received", "Exit code:")
_ABORT_STARTS = (
    "Fatal Python error",
    "terminate called after throwing",
    "terminate called without an active exception",
)


def classify(msg: str, *, in_block: bool = False) -> str | None:
    """What `msg` (a record's message or a bare line, prefix removed) says about the process; None: nothing.

    `in_block`: the line continues an open traceback, where an error text (an illegal memory access) is
    the exception's own message, not a separate sign of death.
    """
    c = msg[:1]
    if c == "R" or c == "S" or c == "E":
        if msg.startswith(_CRASH_STARTS) or (c == "R" and _RANK_DEAD.match(msg)):
            return CRASH
        if c == "S" and msg.startswith("Subprocess") and "crashed with exit code" in msg:
            return CRASH
        if c == "E":
            if msg.startswith("Exception raised from "):
                return FRAGMENT
            if (
                msg.startswith("Exception in ")
                and len(msg) < 80
                and msg.rstrip().endswith(":")
                and not msg.startswith("Exception in thread")
            ):
                return OWN_BLOCK  # 0.1-0.3: "Exception in run_tp_server:", "Exception in ControllerSingle:"
    elif c == "F" or c == "t":
        if msg.startswith(_ABORT_STARTS):
            return ABORT
    elif c == "I" and msg.startswith("Initialization failed."):
        return OWN_BLOCK
    elif c == "A" and msg.startswith("Assertion failed: ") and not in_block and LIB_ASSERT.match(msg):
        return CRASH
    if "hit an exception" in msg[:80]:
        return OWN_BLOCK
    if in_block:
        return None
    if "Watchdog caught collective operation timeout" in msg or "an illegal memory access was encountered" in msg:
        return CRASH
    return None
