"""The remote monitor agent, run as a real process on this machine (it is plain Python; /proc is real)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from console.fleet.agent import agent_procs_command, agent_tail_command, tail_pace_line
from console.fleet.logtail import Chunk, FrameReader
from tests.patience import patient


class Reader:
    """Collects an agent's stdout in a thread, each os-level read kept separately."""

    def __init__(self, command: str, stdin: int | None = subprocess.DEVNULL) -> None:
        self.proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=stdin, stdout=subprocess.PIPE)
        self.reads: list[bytes] = []
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        assert self.proc.stdout is not None
        while data := self.proc.stdout.read1(1 << 20):  # type: ignore[attr-defined]
            self.reads.append(data)

    def data(self) -> bytes:
        return b"".join(self.reads)

    def wait_for(self, pred: object, timeout: float = 10.0) -> None:
        end = time.monotonic() + patient(timeout)
        while not pred():  # type: ignore[operator]
            assert time.monotonic() < end, f"agent output so far: {self.data()[-2000:]!r}"
            time.sleep(0.01)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self._t.join(5)


def _chunks(data: bytes) -> list[Chunk]:
    return [c for c in FrameReader().feed(data) if isinstance(c, Chunk)]


def test_tail_delivers_every_byte_once_with_offsets_and_batches_a_stream(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_bytes(b"old line\n")
    b.write_bytes(b"")
    r = Reader(agent_tail_command(sys.executable, [(str(a), 9), (str(b), 0)], gap_s=0.2))
    try:
        with a.open("ab", buffering=0) as fa, b.open("ab", buffering=0) as fb:
            for i in range(300):  # a burst: far more lines than the agent has writes in its gap
                fa.write(b"a %d\n" % i)
                fb.write(b"b %d\n" % i)
        want_a = b"".join(b"a %d\n" % i for i in range(300))
        want_b = b"".join(b"b %d\n" % i for i in range(300))

        def done() -> bool:
            got = _chunks(r.data())
            return sum(len(c.data) for c in got if c.index == 0) == len(want_a) and sum(
                len(c.data) for c in got if c.index == 1
            ) == len(want_b)

        r.wait_for(done)
        chunks = _chunks(r.data())
        for idx, want, start in ((0, want_a, 9), (1, want_b, 0)):
            mine = [c for c in chunks if c.index == idx]
            assert b"".join(c.data for c in mine) == want  # nothing lost, nothing twice, old bytes skipped
            offs = [c.offset for c in mine]
            assert offs[0] == start and all(x.offset + len(x.data) == y.offset for x, y in itertools.pairwise(mine))
        assert len(chunks) < 40, "a burst of 600 lines should come in a handful of frames"
    finally:
        r.stop()


def test_tail_takes_a_new_pace_on_stdin(tmp_path: Path) -> None:
    """Started batching by an hour: a line after the first send waits; `gap 0` on stdin sends it at once (a log
    view opened), and the agent keeps that pace (HostLink.watch_log)."""
    a = tmp_path / "a.log"
    a.write_bytes(b"")
    r = Reader(agent_tail_command(sys.executable, [(str(a), 0)], gap_s=3600), stdin=subprocess.PIPE)
    assert r.proc.stdin is not None
    try:
        with a.open("ab", buffering=0) as fa:
            fa.write(b"first\n")  # after a quiet spell: out within the 10 ms poll, whatever the gap
            r.wait_for(lambda: b"first\n" in r.data())
            fa.write(b"second\n")
            time.sleep(0.5)
            assert b"second" not in r.data(), "the hour's gap holds it back"
            r.proc.stdin.write(tail_pace_line(0))
            r.proc.stdin.flush()
            r.wait_for(lambda: b"second\n" in r.data())
            fa.write(b"third\n")
            r.wait_for(lambda: b"third\n" in r.data())
        assert b"".join(c.data for c in _chunks(r.data())) == b"first\nsecond\nthird\n"
    finally:
        r.stop()


def test_tail_keeps_its_pace_when_stdin_closes_or_says_nonsense(tmp_path: Path) -> None:
    a = tmp_path / "a.log"
    a.write_bytes(b"")
    r = Reader(agent_tail_command(sys.executable, [(str(a), 0)], gap_s=0), stdin=subprocess.PIPE)
    assert r.proc.stdin is not None
    try:
        r.proc.stdin.write(b"gap fast\nhello\n" + b"x" * 10_000 + b"\n")
        r.proc.stdin.close()  # EOF: no more pace changes, the tail goes on
        with a.open("ab", buffering=0) as fa:
            for i in range(3):
                fa.write(b"line %d\n" % i)
                r.wait_for(lambda i=i: b"line %d\n" % i in r.data())  # type: ignore[misc]
        assert r.proc.poll() is None
    finally:
        r.stop()


def test_tail_reports_truncation_and_a_missing_file(tmp_path: Path) -> None:
    a = tmp_path / "a.log"
    a.write_bytes(b"x" * 100)
    r = Reader(agent_tail_command(sys.executable, [(str(a), 100), (str(tmp_path / "nope.log"), 0)]))
    try:
        r.wait_for(lambda: b"==> 1 G\n" in r.data())
        a.write_bytes(b"new\n")
        r.wait_for(lambda: b"==> 0 T 4\n" in r.data())
        r.wait_for(lambda: any(c.data == b"new\n" and c.offset == 0 for c in _chunks(r.data())))
    finally:
        r.stop()


def test_compute_apps_fast_while_a_server_starts_then_slow_once_it_holds_vram_and_readings_agree(
    tmp_path: Path,
) -> None:
    """A server process appears: apps are polled quickly while it has no VRAM yet (SGLang imports for seconds
    before it takes any), however often the readings agree; once it holds some, three equal readings end that."""
    marker = f"dfc-agent-test-{time.monotonic_ns()}"
    reading = tmp_path / "apps.txt"  # what the stand-in compute-apps query prints
    reading.write_text("no compute apps\n")
    apps = tmp_path / "apps.sh"
    apps.write_text(f"#!/bin/sh\ncat {reading}\n")
    apps.chmod(0o755)
    cmd = agent_procs_command(
        sys.executable,
        interval_s=0.02,
        apps_every_s=3600,
        fast_every_s=0.05,
        apps_command=str(apps),
        pattern=marker.replace("-test-", "[-]test-"),
    )
    # (the bracket keeps the agent's own command line, which carries the pattern, from matching it: as SGLANG_RE)
    r = Reader(cmd)
    server = None
    try:
        r.wait_for(lambda: r.data().count(b"==> apps\n") >= 1 and r.data().count(b"==> end\n") >= 5)
        assert r.data().count(b"==> apps\n") == 1  # at start, then the slow pace (an hour here)
        # in a session of its own, as the console launches servers (setsid): in pytest's session the agent would
        # also count this test's own short-lived children (the apps query it runs), which come and go
        server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker], start_new_session=True)
        r.wait_for(lambda: str(server.pid).encode() in r.data())
        r.wait_for(lambda: r.data().count(b"==> apps\n") >= 8)  # 7 equal readings without its VRAM: still fast
        (tmp_path / "apps.new").write_text(f"999, GPU-x, other, 10 MiB\n{server.pid}, GPU-y, python3, 40000 MiB\n")
        os.replace(tmp_path / "apps.new", reading)  # at once: the query never reads half a file
        r.wait_for(lambda: r.data().count(b"40000 MiB") >= 3)
        seen = r.data().count(b"==> apps\n")
        ends = r.data().count(b"==> end\n")
        r.wait_for(lambda: r.data().count(b"==> end\n") >= ends + 30)  # 30 more rounds, ~0.6 s
        assert r.data().count(b"==> apps\n") == seen  # fast readings with its VRAM agreed: slow again
        assert r.data().count(b"40000 MiB") == 3
    finally:
        if server is not None:
            server.kill()
            server.wait()
        r.stop()


def test_app_pids_and_every_session_on_gpu() -> None:
    from console.fleet.agent import AGENT_SOURCE

    defs: dict = {}  # the agent's functions, without its entry point (which reads sys.argv)
    exec(AGENT_SOURCE.split("\ntry:\n    mode = ")[0], defs)
    app_pids, every_session_on_gpu = defs["app_pids"], defs["every_session_on_gpu"]
    text = b"4242, GPU-a, python3, 100\n[N/A], GPU-b, x, 1\n 77 , GPU-c, y, 2\nNo running processes found\n"
    assert app_pids(text) == {4242, 77}
    rows = [(10, 1, 10, "launcher"), (4242, 10, 10, "rank 0"), (20, 1, 20, "other server")]
    assert not every_session_on_gpu(rows, text)  # session 20 holds nothing yet
    assert every_session_on_gpu(rows[:2], text)
    assert every_session_on_gpu([], b"")


def test_agent_source_is_one_shell_word() -> None:
    """No single quote in the source: shlex.quote keeps it one '...' word, which the journal shows as a digest
    (journalview.compact); an apostrophe in a docstring split it and put 5 kB of source in every record."""
    from console.fleet.agent import AGENT_SOURCE

    assert "'" not in AGENT_SOURCE


# a process in a session of its own that becomes a server without a new pid: after `go` appears it execs python
# with the marker in its command line (given in two words, so its own command line before that does not match)
EXECS = """
import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", sys.argv[2] + "-" + sys.argv[3]])
"""
# a session leader that does not match; after `go` appears it starts a child that does, in its session
SPAWNS = """
import os, subprocess, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", sys.argv[2] + "-" + sys.argv[3]])
time.sleep(60)
"""

# a session leader that forks and holds the fork before its exec (the moment every new process has): the agents
# read the fork while it is a copy of its parent, then it execs into a matching command line under the same pid
FORKS = """
import os, sys, time
if os.fork() == 0:
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.01)
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", sys.argv[2] + "-" + sys.argv[3]])
time.sleep(60)
"""


def _ends(r: Reader) -> int:
    return r.data().count(b"==> end\n")


def _last_rows(r: Reader) -> bytes:
    """The process rows of the last complete round."""
    data = r.data()
    cut = data.rfind(b"==> end\n")
    start = data.rfind(b"==> ps ", 0, cut)
    return data[start:cut]


def test_process_loop_rereads_only_what_can_have_changed(tmp_path: Path) -> None:
    """Between full reads (here an hour apart) the loop reads new processes and servers' sessions only: a server
    with a new pid and the session it joins show at once; a process that execs into a server without a new pid is
    not read again until the next full read (here: never), which the second agent, with full reads every 0.3 s,
    shows within a second. Before: every process's stat and command line every round."""
    marker = f"dfc-scan-test-{time.monotonic_ns()}"
    pattern = marker.replace("-test-", "[-]test-")  # the agent's own command line carries the pattern
    go = tmp_path / "go"
    procs: list[subprocess.Popen[bytes]] = []
    slow = Reader(
        agent_procs_command(
            sys.executable, interval_s=0.02, apps_every_s=3600, apps_command="true", pattern=pattern, full_every_s=3600
        )
    )
    quick = Reader(
        agent_procs_command(
            sys.executable, interval_s=0.02, apps_every_s=3600, apps_command="true", pattern=pattern, full_every_s=0.3
        )
    )
    try:
        halves = marker.split("-test-")
        halves[1] = "test-" + halves[1]
        execs = subprocess.Popen([sys.executable, "-c", EXECS, str(go), *halves], start_new_session=True)
        leader = subprocess.Popen([sys.executable, "-c", SPAWNS, str(go), *halves], start_new_session=True)
        procs += [execs, leader]
        for r in (slow, quick):  # both have read them (not matching: not reported)
            n = _ends(r)
            r.wait_for(lambda r=r, n=n: _ends(r) >= n + 5)
            assert marker.encode() not in r.data()
        go.write_text("")
        for r in (slow, quick):  # the leader's new child matches: it and its leader, read again, show at once
            r.wait_for(lambda r=r: f"\n{leader.pid} ".encode() in _last_rows(r) and marker.encode() in _last_rows(r))
        quick.wait_for(lambda: f"\n{execs.pid} ".encode() in _last_rows(quick), timeout=3)
        n = _ends(slow)
        slow.wait_for(lambda: _ends(slow) >= n + 50)  # 50 rounds, ~1 s, after the other agent saw it
        assert f"\n{execs.pid} ".encode() not in slow.data()  # not read again between full reads
    finally:
        slow.stop()
        quick.stop()
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(["pkill", "-9", "-f", marker], capture_output=True)


def test_process_loop_reads_a_fork_again_until_it_execs(tmp_path: Path) -> None:
    """A new process is a copy of its parent until it execs. Read in that moment, it was kept as not matching
    until the next full read (here: never), so a launch could stay unseen; CI hit it once with the leader's child
    above. The fork is read each round while it is a copy, so its exec shows at once."""
    marker = f"dfc-fork-test-{time.monotonic_ns()}"
    pattern = marker.replace("-test-", "[-]test-")
    go = tmp_path / "go"
    slow = Reader(
        agent_procs_command(
            sys.executable, interval_s=0.02, apps_every_s=3600, apps_command="true", pattern=pattern, full_every_s=3600
        )
    )
    halves = marker.split("-test-")
    halves[1] = "test-" + halves[1]
    leader = subprocess.Popen([sys.executable, "-c", FORKS, str(go), *halves], start_new_session=True)
    try:
        n = _ends(slow)
        slow.wait_for(lambda: _ends(slow) >= n + 5)
        forks = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _ppid(p) == leader.pid]
        assert len(forks) == 1  # held before its exec, read by the agent as a copy of the leader
        go.write_text("")
        slow.wait_for(
            lambda: f"\n{forks[0].name} ".encode() in _last_rows(slow) and marker.encode() in _last_rows(slow)
        )
    finally:
        slow.stop()
        leader.kill()
        leader.wait()
        subprocess.run(["pkill", "-9", "-f", marker], capture_output=True)


def _ppid(proc: Path) -> int:
    try:
        stat = (proc / "stat").read_text()
    except OSError:
        return -1
    return int(stat[stat.rfind(")") + 2 :].split()[1])
