"""A spawn-free remote agent for the process loop and the log tails, run by the host's own Python.

The POSIX-sh loops in monitor.py/logtail.py fork `ps`, `awk`, `wc`, `tail`, `head` and `sleep`
several times a second (over a thousand process spawns a minute per host, and up to 250 ms of tail
latency). This agent does the same jobs inside one long-lived interpreter — the SGLang venv's
`python`, which every GPU host has — reading `/proc` and the log files directly and polling every
10 ms, and prints exactly the same frames, so the same parsers read both. Standard library only;
started with `-I -S` so no site-packages (and no SGLang) is imported. Where the interpreter cannot
start, the host link falls back to the sh loops.
"""

from __future__ import annotations

import shlex

from console.fleet.logtail import MAX_FRAME
from console.fleet.monitor import SGLANG_RE
from console.gpu import nvsmi
from console.sglang.command import shell_path

AGENT_SOURCE = r'''
import os, re, sys, time, shlex, subprocess
out = sys.stdout.buffer
def w(b):
    out.write(b); out.flush()
def procs_mode(interval, apps_every, apps_cmd, pattern, fast_every):
    rx = re.compile(pattern)
    have_proc = os.path.isdir("/proc/self")
    last_apps = 0.0; last_sids = None; backoff_until = 0.0; fast_until = 0.0; last_text = None; same = 0
    while True:
        rows = []
        if have_proc:
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    with open("/proc/" + name + "/stat", "rb") as f:
                        st = f.read().decode("utf-8", "replace")
                    with open("/proc/" + name + "/cmdline", "rb") as f:
                        cl = f.read()
                except OSError:
                    continue
                r = st.rfind(")")
                fields = st[r + 2:].split()
                if len(fields) < 4 or fields[0] in ("Z", "X"):
                    continue  # a zombie (an unreaped dead rank) is no running server
                args = cl.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
                if not args:
                    args = "[" + st[st.find("(") + 1:r] + "]"
                rows.append((int(name), int(fields[1]), int(fields[3]), args.replace("\n", " ")))
        else:
            p = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,sid=,args="], capture_output=True, text=True)
            for ln in p.stdout.splitlines():
                parts = ln.split(None, 3)
                if len(parts) >= 3 and all(x.isdigit() for x in parts[:3]):
                    rows.append((int(parts[0]), int(parts[1]), int(parts[2]), parts[3] if len(parts) > 3 else ""))
        keep = {sid for pid, ppid, sid, args in rows if rx.search(args)}
        mine = [r for r in rows if r[2] in keep]
        body = "".join("%d %d %d %s\n" % r for r in mine)
        pids = frozenset(r[0] for r in mine)
        now = time.time()
        w(("==> ps %.6f\n" % now).encode() + body.encode("utf-8", "replace"))
        if last_sids is not None and pids != last_sids:
            fast_until = now + 60; same = 0  # a server or its ranks came or went: keep its VRAM fresh while it loads
        last_sids = pids
        every = fast_every if now < fast_until else apps_every
        if now >= backoff_until and now - last_apps >= every:
            last_apps = now
            try:
                p = subprocess.run(shlex.split(apps_cmd), capture_output=True, timeout=3)
                text, rc = (p.stdout + p.stderr)[:1048576], p.returncode  # one frame, never more than 1 MiB
            except subprocess.TimeoutExpired:
                text, rc = b"", 124
            except OSError as e:
                text, rc = str(e).encode(), 127
            w(b"==> apps\n" + text + (b"" if text.endswith(b"\n") or not text else b"\n") + b"==> rc %d\n" % rc)
            if rc != 0:
                backoff_until = now + 60
            if now < fast_until:  # three equal readings in a row: loading is over, back to the slow pace
                same = same + 1 if text == last_text else 0
                if same >= 2:
                    fast_until = 0.0
            last_text = text
        w(b"==> end\n")
        time.sleep(interval)
def tail_mode(pairs, max_frame, gap):
    files = [[p, int(o), False] for p, o in pairs]
    idle = 0.0; last_send = 0.0
    while True:
        wait = last_send + gap - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # lines are streaming: let a few more gather, one write for all of them
        frames = []
        for i, f in enumerate(files):
            path, off, gone = f
            try:
                size = os.stat(path).st_size
                fh = open(path, "rb")
            except OSError:
                if not gone:
                    frames.append(b"==> %d G\n" % i); f[2] = True
                continue
            with fh:
                f[2] = False
                if size < off:
                    frames.append(b"==> %d T %d\n" % (i, size)); off = 0
                if size > off:
                    fh.seek(off)
                    data = fh.read(min(size - off, max_frame))
                    if data:
                        frames.append(b"==> %d %d %d\n" % (i, off, len(data)) + data)
                        off += len(data)
            f[1] = off
        if frames:
            w(b"".join(frames)); last_send = time.monotonic(); idle = 0.0
            continue
        time.sleep(0.01)
        idle += 0.01
        if idle >= 1.0:
            w(b"==> hb\n"); idle = 0.0
try:
    mode = sys.argv[1]
    if mode == "procs":
        procs_mode(float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5],
                   float(sys.argv[6]) if len(sys.argv) > 6 else 3.0)
    else:
        a = sys.argv[4:]
        tail_mode(list(zip(a[0::2], a[1::2])), int(sys.argv[2]), float(sys.argv[3]))
except (BrokenPipeError, KeyboardInterrupt):
    pass
'''
"""Runs under any Python 3 (the hosts' venvs); exits when its channel closes (the next write fails)."""


def _python(python: str) -> str:
    return shell_path(python) if python.startswith("~") else shlex.quote(python)


def agent_procs_command(python: str, interval_s: float = 1.0, apps_every_s: float = 60.0,
                        fast_every_s: float = 3.0, apps_command: str | None = None, pattern: str = SGLANG_RE) -> str:
    """The process loop: SGLang sessions every second; compute apps (per-process VRAM) every 3 s after a
    server process came or went, until three readings agree or a minute passes, else once a minute
    (1 spawn a minute in steady state; the GPUs' own memory figures stream every second regardless)."""
    return (f"exec {_python(python)} -I -S -u -c {shlex.quote(AGENT_SOURCE)} procs {interval_s:g} "
            f"{apps_every_s:g} {shlex.quote(apps_command or nvsmi.query_apps_command())} {shlex.quote(pattern)} "
            f"{fast_every_s:g}")


TAIL_GAP_S = 0.05
"""While lines keep coming, the tail writes at most this often (one SSH packet for every file's news).

A line after a quiet spell goes out within the 10 ms poll; a stream of them (16 servers × 50 lines/s)
arrives in ~20 batches a second per host instead of one packet per line, which was most of the
console's CPU in benchmarks/bench_console_cpu.py."""


def agent_tail_command(python: str, files: list[tuple[str, int]], max_frame: int = MAX_FRAME,
                       gap_s: float = TAIL_GAP_S) -> str:
    """The multiplexed tail of every server log, from the byte offsets already read."""
    words = " ".join(f"{shell_path(p)} {int(o)}" for p, o in files)
    return (f"exec {_python(python)} -I -S -u -c {shlex.quote(AGENT_SOURCE)} tail {max_frame} {gap_s:g} "
            f"{words}")
