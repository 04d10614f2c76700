"""A sim TP rank (SGLang's `sglang::scheduler_TPn` child): holds its GPU memory and prints its own lines.

Started by console.sim.server with stdin = JSON commands, stdout = acks, stderr = the server log.
Dies with its parent (PR_SET_PDEATHSIG), like SGLang's spawned schedulers.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time

from console.sim import logs, state


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        libc.prctl(15, b"sglang::schedul")  # PR_SET_NAME (comm keeps 15 chars, as setproctitle's)
    except OSError:
        pass


def main(argv: list[str]) -> int:
    host_dir, rank, tp, gpu, name = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    parent = os.getppid()
    _die_with_parent()
    if os.getppid() != parent:
        return 1
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the main process drains; PDEATHSIG ends us
    prefix = logs.rank_prefix(tp, rank)
    state.register(host_dir, name=name, gpus={gpu: 0}, role=f"scheduler_TP{rank}", parent=parent)
    for raw in sys.stdin:
        cmd = json.loads(raw)
        op = cmd["op"]
        if op == "log":
            for m in cmd["msgs"]:
                logs.line(m, prefix)
        elif op == "mem":
            state.register(host_dir, gpus={gpu: int(cmd["gib"] * 1024)})
        elif op == "fail":
            logs.line("Scheduler hit an exception: " + cmd["text"], prefix)
            os.kill(parent, signal.SIGQUIT)
            time.sleep(30)
            return 1
        elif op == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        sys.stdout.write("ok\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
