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
import os, random, re, select, sys, time, shlex, subprocess
out = sys.stdout.buffer
def w(b):
    out.write(b); out.flush()
def proc_row(name):
    """(pid, ppid, sid, args) of one process from /proc, None if it is gone or a zombie."""
    try:
        with open("/proc/" + name + "/stat", "rb") as f:
            st = f.read().decode("utf-8", "replace")
        with open("/proc/" + name + "/cmdline", "rb") as f:
            cl = f.read()
    except OSError:
        return None
    r = st.rfind(")")
    fields = st[r + 2:].split()
    if len(fields) < 4 or fields[0] in ("Z", "X"):
        return None  # a zombie (an unreaped dead rank) is no running server
    args = cl.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    if not args:
        args = "[" + st[st.find("(") + 1:r] + "]"
    return (int(name), int(fields[1]), int(fields[3]), args.replace("\n", " "))
def proc_rows():
    """(pid, ppid, sid, args) of every live process: /proc where there is one, else ps."""
    rows = []
    if os.path.isdir("/proc/self"):
        for name in os.listdir("/proc"):
            if name.isdigit():
                row = proc_row(name)
                if row is not None:
                    rows.append(row)
    else:
        p = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,sid=,args="], capture_output=True, text=True,
                           errors="replace")
        for ln in p.stdout.splitlines():
            parts = ln.split(None, 3)
            if len(parts) >= 3 and all(x.isdigit() for x in parts[:3]):
                rows.append((int(parts[0]), int(parts[1]), int(parts[2]), parts[3] if len(parts) > 3 else ""))
    return rows
def server_sessions(rows, rx):
    """The session ids of the processes whose command line matches rx (a server and its ranks share one)."""
    return {sid for pid, ppid, sid, args in rows if rx.search(args)}
def server_rows(rows, rx):
    """The rows of every process in a server session."""
    keep = server_sessions(rows, rx)
    return [r for r in rows if r[2] in keep]
def twin_of_parent(rows, row):
    """A process with the command line of its parent: mostly a fork that has not run exec yet (`nohup python -m
    sglang...` is a copy of the shell for a moment), so what it will run is still unknown."""
    parent = rows.get(row[1])
    return parent is not None and parent[3] == row[3]
def app_pids(text):
    """The pids in a compute-apps reading (`pid, uuid, name, MiB` lines)."""
    out = set()
    for line in text.decode("utf-8", "replace").splitlines():
        head = line.split(",", 1)[0].strip()
        if head.isdigit():
            out.add(int(head))
    return out
def every_session_on_gpu(rows, text):
    """Whether each server session in rows has a process in the compute-apps reading text."""
    pids = app_pids(text)
    return {r[2] for r in rows} <= {r[2] for r in rows if r[0] in pids}
class ProcScan:
    """The SGLang sessions of this host each second, reading /proc only where it can have changed.

    A full read of every process each second was the whole cost of this loop (about 10 ms a second with 450
    processes). Read each time: new pids, every process that matches the pattern or shares a session with one,
    and everything every `full_every` seconds. A process that is still a copy of its parent (forked, exec not
    yet run) is read again each time too. Other processes keep the row last read, which can only be stale for one
    that execs into a server without a new pid and without having matched before (a wrapper script that execs
    python), or for a reused pid: seen at the next full read."""
    def __init__(self, rx, full_every):
        self.rx = rx; self.full_every = full_every; self.rows = {}; self.hot = set(); self.full_at = float("-inf")
    def scan(self, now):
        if not os.path.isdir("/proc/self"):
            return server_rows(proc_rows(), self.rx)
        full = now - self.full_at >= self.full_every
        if full:
            self.full_at = now
        fresh, rows = set(), {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            row = self.rows.get(pid)
            if row is None or full or pid in self.hot:
                row = proc_row(name); fresh.add(pid)
            if row is not None:
                rows[pid] = row
        keep = server_sessions(rows.values(), self.rx)
        for pid in [p for p, r in rows.items() if r[2] in keep and p not in fresh]:
            row = proc_row(str(pid))  # joined a server session since its last read: read now
            if row is None:
                del rows[pid]
            else:
                rows[pid] = row
        keep = server_sessions(rows.values(), self.rx)
        self.rows = rows
        self.hot = {pid for pid, r in rows.items() if r[2] in keep or twin_of_parent(rows, r)}
        return [rows[p] for p in sorted(rows) if rows[p][2] in keep]
def procs_mode(interval, apps_every, apps_cmd, pattern, fast_every, full_every):
    scan = ProcScan(re.compile(pattern), full_every)
    phase = interval * random.random()  # once: a console starts every host at once, so rounds would line up
    last_apps = float("-inf"); last_sids = None; backoff_until = 0.0; fast_until = 0.0; last_text = None; same = 0
    while True:
        mine = scan.scan(time.monotonic())
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
            if now < fast_until:  # loading is over (back to the slow pace) when three readings in a row agree
                same = same + 1 if text == last_text else 0  # and every server session holds VRAM: a server
                if same >= 2 and every_session_on_gpu(mine, text):  # imports for seconds before it takes any
                    fast_until = 0.0
            last_text = text
        w(b"==> end\n")
        time.sleep(interval + phase)
        phase = 0.0
class Pace:
    """The batching gap of the tail, changed by `gap SECONDS` lines on stdin while it waits (stdin at EOF: fixed)."""
    def __init__(self, gap):
        self.gap = gap; self.fd = 0; self.buf = b""
    def pause(self, secs):
        if self.fd is None:
            time.sleep(secs); return
        try:
            ready = select.select([self.fd], [], [], secs)[0]
            data = os.read(self.fd, 4096) if ready else None
        except (OSError, ValueError):
            self.fd = None; time.sleep(secs); return
        if data is None:
            return
        if not data:
            self.fd = None; return
        self.buf = (self.buf + data)[-4096:]
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            words = line.split()
            if len(words) == 2 and words[0] == b"gap":
                try:
                    self.gap = min(5.0, max(0.0, float(words[1])))
                except ValueError:
                    pass
def tail_mode(pairs, max_frame, gap):
    files = [[p, int(o), False] for p, o in pairs]
    idle = 0.0; last_send = float("-inf"); pace = Pace(gap)
    while True:
        wait = last_send + pace.gap - time.monotonic()
        if wait > 0:
            pace.pause(wait)  # lines are streaming: let a few more gather, one write for all of them
            continue  # (or a new pace came in: wait by that one)
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
        pace.pause(0.01)
        idle += 0.01
        if idle >= 1.0:
            w(b"==> hb\n"); idle = 0.0
def oneshot_mode(cfg):
    """Everything `status` needs, in one exec: the GPU query and compute apps (run at once, in the background),
    the re-attach listing and the SGLang sessions, the logs of the servers it lists, /health of every server
    port asked here on the host (all ports at once, each within the deadline), and for each router on the host its
    status script output, the end of its log, and its /health, /workers and /metrics. Sections are `==> NAME {json}`
    lines each followed by exactly `n` bytes of valid UTF-8 and a newline; `==> end` closes a complete answer."""
    import glob, json, threading, urllib.error, urllib.request
    parts = []
    def sect(name, text, **head):
        b = text.encode("utf-8", "replace")
        head["n"] = len(b)
        parts.append(("==> %s %s\n" % (name, json.dumps(head))).encode() + b + b"\n")
    def start(cmd):
        try:
            return subprocess.Popen(shlex.split(cmd) if isinstance(cmd, str) else cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
        except OSError as e:
            return e
    t0 = time.monotonic()
    smi = [(k, start(cfg[k])) for k in ("gpu", "apps")]
    routers = cfg.get("routers") or []
    rprocs = [start(["/bin/sh", "-c", r["status"]]) for r in routers]
    rx = re.compile(cfg["pattern"]); main_rx = re.compile(cfg["main"])
    mine = server_rows(proc_rows(), rx)
    def num(v):
        try:
            return int(v) if v is not None and not isinstance(v, bool) else None
        except (TypeError, ValueError):
            return None
    def alive(d):
        sid, pid = num(d.get("sid")), num(d.get("pid"))
        return any(((sid is not None and r[2] == sid) or (pid is not None and r[0] == pid)) and rx.search(r[3])
                   for r in mine)
    listing, metas = [], []
    mmax = int(cfg["meta_max"])
    servers = os.path.expanduser(cfg["servers"])
    for m in sorted(glob.glob(os.path.join(glob.escape(servers), "*", "meta.json"))):
        try:
            with open(m, "rb") as f:
                text = f.read(mmax).decode("utf-8", "replace").replace("\n", "")
        except OSError:
            continue
        listing.append("==> meta\n" + text + "\n")
        try:
            h = os.path.join(os.path.dirname(m), "history.jsonl")
            with open(h, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                f.seek(max(0, size - 20 * mmax))
                tail = f.read().decode("utf-8", "replace").splitlines()[-20:]
            listing.append("==> hist\n" + "\n".join(tail) + "\n")
        except OSError:
            pass
        try:
            d = json.loads(text)
        except Exception:
            continue  # not JSON (or nested too deep): the console skips it too
        if isinstance(d, dict):
            metas.append(d)
    sect("listing", "".join(listing) + "==> ps\n" + "".join("%d %d %d %s\n" % r for r in mine))
    targets = {}
    for d in metas:
        port = num(d.get("port"))
        if port is not None and alive(d):
            bind = str(d.get("bind") or "127.0.0.1")
            targets[("127.0.0.1" if bind in ("0.0.0.0", "::", "localhost") else bind, port)] = 1
    for pid, ppid, sid, args in mine:
        if main_rx.search(args):
            try:
                words = shlex.split(args)
            except ValueError:
                words = args.split()
            port = 30000
            for i, a in enumerate(words):
                v = words[i + 1] if a == "--port" and i + 1 < len(words) else a[7:] if a.startswith("--port=") else None
                if v is not None:
                    port = int(v) if v.isdigit() else 30000
                    break
            targets[("127.0.0.1", port)] = 1
    deadline, cap = float(cfg["health_deadline"]), int(cfg["health_max"])
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    def get(url, limit):
        """(kind, what, ms, body): `http` and its status code, `big` (over the cap), `timeout`, `down`, `error`."""
        t = time.monotonic()
        body = b""
        try:
            try:
                r = opener.open(url, timeout=deadline)
            except urllib.error.HTTPError as e:
                r = e
            with r:
                code = r.getcode()
                body = r.read(limit + 1)
            res = ("big", code) if len(body) > limit else ("http", code)
        except urllib.error.URLError as e:
            why = e.reason
            res = ("timeout", 0) if "timed out" in str(why) else ("down", "ConnectError") \
                if isinstance(why, OSError) else ("error", str(why))
        except OSError as e:
            res = ("timeout", 0) if "timed out" in str(e) else ("down", "ReadError")
        except Exception as e:
            res = ("down", "RemoteProtocolError") if type(e).__name__ in ("RemoteDisconnected", "BadStatusLine") \
                else ("error", "%s: %s" % (type(e).__name__, e))
        return res + ((time.monotonic() - t) * 1000, body if res[0] == "http" else b"")
    answers = {}
    def check(addr, port):
        host = "[%s]" % addr if ":" in addr else addr
        answers[(addr, port)] = get("http://%s:%d/health" % (host, port), cap)[:3]
    rans = {}
    def ask(rname, part, url, limit):
        rans[(rname, part)] = get(url, limit)
    jobs = [(check, k) for k in targets]
    for r in routers:
        for part, base in (("health", r["base"]), ("workers", r["base"]), ("metrics", r["metrics"])):
            jobs.append((ask, (r["name"], part, base + "/" + part, int(r["health_max" if part == "health" else "max"]))))
    threads = [threading.Thread(target=fn, args=a, daemon=True) for fn, a in jobs]
    for th in threads:
        th.start()
    end = time.monotonic() + deadline
    for th in threads:
        th.join(max(0.0, end - time.monotonic()))
    for (addr, port) in targets:
        kind, what, ms = answers.get((addr, port), ("timeout", 0, deadline * 1000))
        sect("health", str(what), addr=addr, port=port, kind=kind, ms=round(ms, 1))
    for r, p in zip(routers, rprocs):
        if isinstance(p, OSError):
            out = ""
        else:
            try:
                out = p.communicate(timeout=max(0.1, end + 5 - time.monotonic()))[0].decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                p.kill(); p.wait()
                out = ""
        sect("router", out, router=r["name"], part="proc")
        meta = out.partition("\nmeta\n")[2]
        try:
            log = json.loads(meta).get("log_path") if meta and not out.startswith("none") else None
        except Exception:
            log = None
        if isinstance(log, str) and log:
            try:
                with open(os.path.expanduser(log), "rb") as f:
                    f.seek(max(0, os.fstat(f.fileno()).st_size - int(r["log"])))
                    sect("router", f.read().decode("utf-8", "replace"), router=r["name"], part="log")
            except OSError:
                pass
        for part in ("health", "workers", "metrics"):
            kind, what, ms, body = rans.get((r["name"], part), ("timeout", 0, deadline * 1000, b""))
            sect("router", body.decode("utf-8", "replace") if kind == "http" else str(what), router=r["name"],
                 part=part, kind=kind, status=what if kind == "http" else None, ms=round(ms, 1))
    now = time.time()
    sect("clock", "", local=round(now + time.localtime(now).tm_gmtoff, 3))  # the log stamps scale: local time as UTC
    for d in metas:
        path = d.get("log_path")
        if not isinstance(path, str) or not path:
            continue
        live = alive(d)
        head = int(cfg["live_head"] if live else cfg["dead_head"])
        try:
            with open(os.path.expanduser(path), "rb") as f:
                data = f.read(head)
                size = os.fstat(f.fileno()).st_size
                tail, off = b"", 0
                if live and size > len(data):
                    off = max(len(data), size - int(cfg["live_tail"]))
                    f.seek(off)
                    tail = f.read(size - off)
                    if off > len(data):  # a gap: the head ends and the tail starts on whole lines
                        cut = data.rfind(b"\n") + 1
                        data = data[:cut] if cut else data
                        nl = tail.find(b"\n") + 1
                        off, tail = off + nl, tail[nl:]
        except OSError:
            continue
        sect("log", data.decode("utf-8", "replace"), path=path, offset=0)
        if tail:
            sect("log", tail.decode("utf-8", "replace"), path=path, offset=off)
    for k, p in smi:
        if isinstance(p, OSError):
            exe = (shlex.split(cfg[k]) or ["?"])[0]
            sect(k, "%s: not found" % exe if isinstance(p, FileNotFoundError) else "%s: %s" % (exe, p), rc=127)
            continue
        try:
            text, _ = p.communicate(timeout=max(0.1, float(cfg["smi_timeout"]) - (time.monotonic() - t0)))
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill(); p.wait()
            text, rc = b"", 124
        sect(k, text[:1048576].decode("utf-8", "replace"), rc=rc, s=round(time.monotonic() - t0, 3))
    parts.append(b"==> end {}\n")
    w(b"".join(parts))
try:
    mode = sys.argv[1]
    if mode == "oneshot":
        import json
        oneshot_mode(json.loads(sys.argv[2]))
    elif mode == "procs":
        procs_mode(float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5],
                   float(sys.argv[6]) if len(sys.argv) > 6 else 3.0, float(sys.argv[7]) if len(sys.argv) > 7 else 5.0)
    else:
        a = sys.argv[4:]
        tail_mode(list(zip(a[0::2], a[1::2])), int(sys.argv[2]), float(sys.argv[3]))
except (BrokenPipeError, KeyboardInterrupt):
    pass
'''
"""Runs under any Python 3 (the hosts' venvs); exits when its channel closes (the next write fails)."""


def _python(python: str) -> str:
    return shell_path(python) if python.startswith("~") else shlex.quote(python)


def agent_procs_command(
    python: str,
    interval_s: float = 1.0,
    apps_every_s: float = 60.0,
    fast_every_s: float = 3.0,
    apps_command: str | None = None,
    pattern: str = SGLANG_RE,
    full_every_s: float = 5.0,
) -> str:
    """The process loop: SGLang sessions every second; compute apps (per-process VRAM) every 3 s after a
    server process came or went, until every server session holds VRAM and three readings agree, or a minute
    passes; else once a minute
    (1 spawn a minute in steady state; the GPUs' own memory figures stream every second regardless).
    Every process is read again every `full_every_s` (ProcScan: between, only new ones and servers')."""
    return (
        f"exec {_python(python)} -I -S -u -c {shlex.quote(AGENT_SOURCE)} procs {interval_s:g} "
        f"{apps_every_s:g} {shlex.quote(apps_command or nvsmi.query_apps_command())} {shlex.quote(pattern)} "
        f"{fast_every_s:g} {full_every_s:g}"
    )


TAIL_GAP_S = 0.25
"""While lines keep coming and nobody reads them live, the tail writes at most this often (one SSH packet for
every file's news). A line after a quiet spell still goes out within the 10 ms poll.

Every packet costs the console its SSH decrypt, a loop wake-up and a state update whatever it carries: 16 servers
× 50 lines/s came in 20 batches a second per host at 50 ms, most of the console's CPU in
benchmarks/bench_console_cpu.py. The fleet panes repaint once a second (ui/app.py SYNC_MIN_S), so 4 batches a
second show them the same lines."""

TAIL_GAP_LIVE_S = 0.025
"""The gap while a person reads one of the host's logs as it comes (a server screen on top, `logs -f`): the
console sends `gap 0.025` on the tail's stdin (`HostLink.watch_log`). At 50 ms, lines that came about every
50 ms each waited for the gap's end, up to 50 ms, and the open log view's p95 sat at its 50 ms line beside a busy
process (benchmarks/bench_log_latency.py: +44-49 ms; at 25 ms, +28-33 ms). Under a flood it still gathers
each host's lines into 40 writes a second."""


def tail_pace_line(gap_s: float) -> bytes:
    """What the running tail agent reads on stdin to batch by `gap_s` from now on."""
    return f"gap {gap_s:g}\n".encode()


def agent_tail_command(
    python: str, files: list[tuple[str, int]], max_frame: int = MAX_FRAME, gap_s: float = TAIL_GAP_S
) -> str:
    """The multiplexed tail of every server log, from the byte offsets already read; `gap_s` until a
    `tail_pace_line` on its stdin changes it."""
    words = " ".join(f"{shell_path(p)} {int(o)}" for p, o in files)
    return f"exec {_python(python)} -I -S -u -c {shlex.quote(AGENT_SOURCE)} tail {max_frame} {gap_s:g} {words}"
