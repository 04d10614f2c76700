"""A dead SGLang rank left unreaped (a container whose init does not reap) is not a live server: its zombie keeps
the name `sglang::scheduler`, which the process loop and discovery took for a running session. Real processes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from console.fleet.agent import agent_procs_command
from console.fleet.monitor import parse_ps
from tests.fleet.test_agent import Reader
from tests.patience import patient

# a session leader that is not SGLang, whose child renames itself as SGLang's scheduler does; 'die': the child exits
# and is never waited for (a zombie, as under a pid 1 that does not reap), else it runs as `sglang::scheduler`
PARENT = """
import os, sys, time
pid = os.fork()
if pid == 0:
    with open('/proc/self/comm', 'w') as f:
        f.write('sglang:' + ':schedul')  # (split: this command line itself must not match)
    if sys.argv[1] == 'die':
        os._exit(0)
    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', 'sglang:' + ':scheduler'])
print(pid, flush=True)
time.sleep(60)
"""


def _session(mode: str) -> tuple[subprocess.Popen[str], int]:
    p = subprocess.Popen(
        [sys.executable, "-c", PARENT, mode], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert p.stdout is not None
    child = int(p.stdout.readline())
    if mode == "die":
        end = time.monotonic() + patient(10)
        while Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < end
            time.sleep(0.01)
    return p, child


def test_a_zombie_rank_is_no_process_but_a_live_one_is() -> None:
    zombie_parent, zombie = _session("die")
    live_parent, live = _session("live")
    r = Reader(agent_procs_command(sys.executable, interval_s=0.05, apps_every_s=3600, apps_command="true"))
    try:
        r.wait_for(lambda: f"\n{live} ".encode() in r.data() and r.data().count(b"==> end\n") >= 3)
        ends = r.data().count(b"==> end\n")
        r.wait_for(lambda: r.data().count(b"==> end\n") >= ends + 3)
        assert f"\n{zombie} ".encode() not in r.data(), r.data()[-2000:]
        ps = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,sid=,args="], capture_output=True, text=True).stdout
        pids = {p.pid for p in parse_ps(ps)}
        assert live in pids and zombie not in pids
    finally:
        r.stop()
        for p in (zombie_parent, live_parent):
            p.kill()
            p.wait()
        subprocess.run(["kill", "-9", str(live)], capture_output=True)
