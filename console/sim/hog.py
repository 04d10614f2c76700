"""A foreign process holding VRAM on a sim GPU (another user's job), for memory-pressure tests.

`python -m console.sim.hog HOST_DIR GPU MIB [NAME]` registers the memory and sleeps until killed;
`console.sim.control.hold_vram` starts one and returns the Popen.
"""

from __future__ import annotations

import signal
import sys
import time

from console.sim import state


def main(argv: list[str]) -> int:
    host_dir, gpu, mib = argv[0], int(argv[1]), int(argv[2])
    name = argv[3] if len(argv) > 3 else "python3"
    state.register(host_dir, name=name, gpus={gpu: mib}, role="hog")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
