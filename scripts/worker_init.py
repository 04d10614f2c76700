"""pid 1 of an isolated test worker (see scripts/isolated-worker): bring up loopback, give the worker a private
TMPDIR, run it, reap every orphan meanwhile (a pid 1 that does not leaves zombies, which `ps` shows), and end
whatever it left behind when it exits.

argv: PYTHON ARGS...  (the worker command execnet asked for: `python -u -c <bootstrap>`)
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile


def main(argv: list[str]) -> int:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    tmp = tempfile.mkdtemp(prefix="dfc-worker-")
    os.chmod(tmp, 0o755)  # the sshd test hosts' login user must traverse it (the fixtures grant o+x upward)
    os.environ.update(TMPDIR=tmp, TMUX_TMPDIR=tmp, DFC_ISOLATED_WORKER="1")
    for name in ("COLUMNS", "LINES"):  # xdist's spawn hands workers 80x24, which a TUI under tmux takes as its size
        os.environ.pop(name, None)
    pid = os.fork()
    if pid == 0:
        os.execv(argv[0], argv)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # pid 1 ignores what it does not handle
        signal.signal(sig, lambda s, _f: os.kill(pid, s))
    code = 1
    while True:
        try:
            done, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if done == pid:
            code = os.waitstatus_to_exitcode(status)
            break
    try:
        os.kill(-1, signal.SIGKILL)  # everything else in this namespace
    except ProcessLookupError:
        pass
    shutil.rmtree(tmp, ignore_errors=True)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
