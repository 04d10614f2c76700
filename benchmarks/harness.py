"""Sim GPU hosts behind real sshd for the console benchmarks (built on the test fixtures' SshTestHost).

`ssh_sim_fleet(n, spec)` yields a `SimFleet` (tests/faults/simfleet.py) whose hosts are served by real
OpenSSH sshd in their own network and PID namespaces; the environment is isolated from the user's
~/.ssh and console state. Also: launch helpers, a log-line writer process, and /proc readers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from console.sim.spec import BLACKWELL8_SPEC, SimHostSpec

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def isolated_env(tmp: Path) -> Iterator[None]:
    """No ~/.ssh/config, agent or real console state for the duration (as the tests' isolate_env)."""
    empty = tmp / "ssh_config"
    empty.write_text("")
    new = {
        "DFLASH_SSH_CONFIG": str(empty),
        "DFLASH_CONFIG_DIR": str(tmp / "config"),
        "DFLASH_STATE_DIR": str(tmp / "state"),
    }
    old = {k: os.environ.get(k) for k in [*new, "SSH_AUTH_SOCK"]}
    os.environ.update(new)
    os.environ.pop("SSH_AUTH_SOCK", None)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def ssh_sim_fleet(n_hosts: int, spec: SimHostSpec = BLACKWELL8_SPEC, prefix: str = "bh") -> Iterator[object]:
    """n sim hosts (host dirs under /tmp) each behind its own sshd; torn down (namespaces, processes) after."""
    from tests.faults.simfleet import build_sim_fleet
    from tests.fixtures.sshhosts import SshTestHost, TestHostNet

    root = Path(tempfile.mkdtemp(prefix="dfc-bench-", dir="/tmp"))
    root.chmod(0o755)
    made: list[SshTestHost] = []
    net = TestHostNet()

    def factory(name: str, d: Path) -> SshTestHost:
        h = SshTestHost(net, name, d)
        made.append(h)
        return h

    try:
        with isolated_env(root):
            yield build_sim_fleet(factory, root / "hosts", [f"{prefix}{i}" for i in range(n_hosts)], spec)
    finally:
        for h in made:
            with contextlib.suppress(Exception):
                h.teardown()
        with contextlib.suppress(Exception):
            net.teardown()
        subprocess.run(["rm", "-rf", str(root)], check=False)


def presets_toml(fleet: object, per_host: int, base_port: int = 30100, model: str = "Qwen3-0.6B") -> str:
    """One TP=1 preset per host with `per_host` replicas (GPUs 0..per_host-1)."""
    out = []
    for h in fleet.hosts.values():  # type: ignore[attr-defined]
        out.append(
            f'[presets.gen-{h.name}]\nhost = "{h.name}"\ngpus = {list(range(per_host))}\ntp = 1\n'
            f"model = {json.dumps(h.model(model))}\nport = {base_port}\n"
            'args = ["--mem-fraction-static", "0.5"]\nready_timeout = 60\n'
        )
    return "\n".join(out)


async def launch_all(ctl: object, timeout: float = 90.0) -> list[str]:
    """Launch every preset (hosts in parallel, waiting for ready); the server names."""
    outs = await asyncio.wait_for(
        asyncio.gather(
            *(
                ctl.launch(p, wait=True)  # type: ignore[attr-defined]
                for p in ctl.fleet.presets
            )
        ),
        timeout,
    )  # type: ignore[attr-defined]
    names: list[str] = []
    for o in outs:
        if not o.ok:
            raise RuntimeError(f"launch failed: {o.message}")
        names += o.servers
    return names


WRITER = r"""
import sys, time, os
rate = float(sys.argv[1]); seconds = float(sys.argv[2]); paths = sys.argv[3:]
fs = [open(p, "a", buffering=1) for p in paths]
period = 1.0 / rate if rate > 0 else 1.0
def line(ts, k):
    # SGLang's own serving lines (docs/sglang.md §2, sample 08), values moving so the panes change
    r = 24 + k % 9
    m = k % 4
    if m == 0:
        return (f"[{ts}] Decode batch, #running-req: {r}, #token: {9000 + 37 * (k % 211)}, token usage: "
                f"0.{10 + k % 80:02d}, cuda graph: True, gen throughput (token/s): {1500 + (k * 7919) % 900}.{k % 100:02d}, "
                f"#queue-req: {k % 3}\n")
    if m == 2:
        return (f"[{ts}] Prefill batch, #new-seq: 1, #new-token: {120 + k % 400}, #cached-token: {k % 64}, token usage: "
                f"0.{10 + k % 80:02d}, #running-req: {r}, #queue-req: 0, cuda graph: True, input throughput (token/s): "
                f"{500 + (k * 104729) % 4000}.{k % 100:02d}\n")
    return f'[{ts}] INFO:     127.0.0.1:{40000 + k % 20000} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
start = time.monotonic(); n = 0
while time.monotonic() - start < seconds:
    due = start + n * period
    now = time.monotonic()
    if due > now:
        time.sleep(due - now)
    # a batch per tick keeps the writer cheap at high rates
    batch = max(1, int((time.monotonic() - start) / period) - n + 1) if rate > 200 else 1
    ts = time.strftime("%Y-%m-%d %H:%M:%S")
    for j, f in enumerate(fs):
        f.write("".join(line(ts, n + i + 13 * j) for i in range(batch)))
    n += batch
print(n, flush=True)
"""


def start_writer(paths: list[str], lines_per_s: float, seconds: float, cpu: int | None = None) -> subprocess.Popen:
    """A separate process appending `lines_per_s` lines per second to every file (its CPU is not the console's).

    The lines are SGLang's serving mix (Decode batch, Prefill batch, uvicorn access lines, as in the real sample
    08) with moving figures, so panes, sparklines and parsers do the work a real server's log makes them do."""
    argv = [sys.executable, "-c", WRITER, str(lines_per_s), str(seconds), *paths]
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu % (os.cpu_count() or 1)), *argv]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (seconds)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MiB."""
    vals = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            k, v = line.split(":", 1)
            vals[k] = int(v.split()[0]) / 1024
    return vals.get("VmRSS", 0.0), vals.get("VmHWM", 0.0)


def server_log_paths(ctl: object, names: list[str]) -> list[str]:
    paths = []
    for n in names:
        p = ctl.state.servers[n].meta.log_path  # type: ignore[attr-defined]
        if not p:
            raise RuntimeError(f"{n} has no log path")
        paths.append(p)
    return paths


async def wait_until(pred: object, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():  # type: ignore[operator]
        if time.monotonic() > end:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


_GUARD = re.compile(rb"%begin \d+ \d+ 1$")
_GUARD_END = re.compile(rb"%(end|error) \d+ \d+ 1$")
"""The lines around a control-mode reply to a command this client sent (flags 1; a pane line that merely starts
with `%end` is not one). The attach's own reply has flags 0 and can come after the first commands' replies on a
busy machine: taken for one, it shifted every later reply by one (a capture read as an empty screen)."""


def _attach(sock: str, session: str, flags: str) -> subprocess.Popen[bytes] | None:
    """A tmux control client (`tmux -C attach`) with these client flags; None where tmux cannot be started."""
    try:
        return subprocess.Popen(
            ["tmux", "-L", sock, "-C", "attach", "-t", session, "-f", flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None


def _end_client(proc: subprocess.Popen[bytes]) -> None:
    """A tmux control client ends when its stdin closes (killed if it does not within 2 s)."""
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class ControlClient:
    """One tmux control-mode client (`tmux -C attach`) that runs commands and returns their output, without a
    process per command. It does not size the window (`ignore-size`) nor receive the pane's output (`no-output`;
    `OutputWatch` does, on a thread of its own)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self._buf = b""

    @classmethod
    def open(cls, sock: str, session: str) -> ControlClient | None:
        proc = _attach(sock, session, "ignore-size,no-output")
        if proc is None:
            return None
        client = cls(proc)
        try:
            mark = f"dfc-sync-{os.getpid()}"
            client._send(f"display -p {mark}")
            while mark not in client._block():  # sure the client is attached and in step
                pass
        except (OSError, EOFError, TimeoutError):
            client.close()
            return None
        return client

    def command(self, cmd: str) -> str:
        self._send(cmd)
        return self._block()

    def _send(self, cmd: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd.encode() + b"\n")
        self.proc.stdin.flush()

    def _line(self, timeout: float = 10.0) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + timeout
        while b"\n" not in self._buf:
            if not select.select([fd], [], [], max(0.0, end - time.monotonic()))[0]:
                raise TimeoutError("tmux control client: no reply")
            data = os.read(fd, 1 << 16)
            if not data:
                raise EOFError("tmux control client closed")
            self._buf += data
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def _block(self) -> str:
        """The next reply: the lines between `%begin` and `%end` (notifications outside them are skipped)."""
        while not _GUARD.match(self._line()):
            pass
        out: list[bytes] = []
        while not _GUARD_END.match(line := self._line()):
            out.append(line)
        return "\n".join(x.decode("utf-8", "replace") for x in out) + "\n"

    def close(self) -> None:
        _end_client(self.proc)


class OutputWatch:
    """A read-only tmux control client that receives the pane's output notices (`%output`), drained by a thread
    of its own, so that a latency wait can sleep until the console prints instead of looking in a loop.

    Drained all the time, so what tmux sends it never piles up, whoever looks or not. A first version read the
    notices on the command client, only between looks; in the one run where bench 2 then looked at nothing for
    a minute the console was found not drawing (0 of 64 panes, 1.7 % CPU). That was not reproduced in three
    runs after, so it is not proven to be the cause, but a client tmux must buffer for is not left lying."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.printed = 0
        """`%output` notices read so far."""
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    @classmethod
    def open(cls, sock: str, session: str) -> OutputWatch | None:
        proc = _attach(sock, session, "ignore-size,read-only")
        return None if proc is None else cls(proc)

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        tail = b""
        while data := os.read(fd, 1 << 16):
            lines = (tail + data).split(b"\n")
            tail = lines.pop()[:16]  # a line's start is all that is looked at
            n = sum(1 for ln in lines if ln.startswith((b"%output ", b"%extended-output ")))
            if n:
                with self._cond:
                    self.printed += n
                    self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> bool:
        """Sleep until more than `seen` notices have come, or `timeout` seconds pass; True if they came."""
        with self._cond:
            return self._cond.wait_for(lambda: self.printed > seen, timeout)

    def close(self) -> None:
        _end_client(self.proc)
        self._thread.join(2)


def _tmux_word(word: str) -> str:
    """One argument as tmux's command parser reads it (single quotes: nothing inside them is special)."""
    if re.fullmatch(r"[A-Za-z0-9_-]+", word):
        return word
    if "'" not in word:
        return "'" + word + "'"
    return '"' + re.sub(r'([\\"$])', r"\\\1", word) + '"'  # in double quotes \, " and $ are escaped


class TmuxConsole:
    """The real `dflash-console --hosts TOML` in a private tmux server (a real terminal, real rendering)."""

    def __init__(
        self,
        hosts_toml: Path,
        size: tuple[int, int] = (200, 60),
        extra: tuple[str, ...] = (),
        profile: str | None = None,
        entry: str | None = None,
    ) -> None:
        self.sock = f"dfcbench{os.getpid()}-{int(time.monotonic() * 1000) % 100000}"
        self.hosts_toml = hosts_toml
        self.size = size
        self.extra = extra
        self.profile = profile
        """Run the console under pyinstrument, writing its report here on exit (.pyisession: a session)."""
        self.entry = entry
        """A Python script to run instead of `-m console` (to try a candidate fix side by side)."""
        self.pid = 0
        self._control: ControlClient | None = None
        self._no_control = False
        self.sleep_between_looks = not os.environ.get("DFC_BENCH_SPIN_WAIT")
        """Latency waits sleep until the console prints between looks (`wait_output`), not look in a loop."""
        self._watch: OutputWatch | None = None
        self._seen = 0
        """OutputWatch's count at the last look at the screen: a wait is for a notice after it."""

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.sock, *args], capture_output=True, text=True)

    def start(self) -> TmuxConsole:
        prof = (
            (f"-m pyinstrument {'-r session ' if self.profile.endswith('.pyisession') else ''}-o {self.profile} ")
            if self.profile
            else ""
        )
        target = self.entry if self.entry else "-m console"
        cmd = " ".join(
            [
                f"cd {ROOT} && TERM=xterm-256color exec {sys.executable} {prof}{target} --hosts {self.hosts_toml}",
                *self.extra,
            ]
        )
        r = self.tmux("new-session", "-d", "-s", "c", "-x", str(self.size[0]), "-y", str(self.size[1]), cmd)
        if r.returncode:
            raise RuntimeError(f"tmux: {r.stderr.strip()}")
        self.pid = int(self.tmux("display", "-p", "-t", "c", "#{pane_pid}").stdout.strip())
        return self

    def screen(self) -> str:
        """The terminal as tmux has rendered it, asked through one control-mode client: a `tmux capture-pane`
        process per look cost 1.7 ms of CPU, and the latency benchmarks look often, so the measurer itself took
        most of a core of this 2-core machine away from the console it timed (0.07 ms a look this way)."""
        if self._watch is not None:
            self._seen = self._watch.printed
        if self._client() is not None:
            try:
                text = self._control.command("capture-pane -p -t c")
                if text.count("\n") == self.size[1]:
                    return text
                # not one line a row: either the client reads a reply behind (start over with a new one), or the
                # pane is not sized yet (a session just made): then the new client's capture says the same
                self._control.close()
                self._control = ControlClient.open(self.sock, "c")
                if self._control is not None:
                    return self._control.command("capture-pane -p -t c")
                self._no_control = True
            except (OSError, EOFError, TimeoutError):
                self._drop_client()
        return self.tmux("capture-pane", "-p", "-t", "c").stdout

    def _client(self) -> ControlClient | None:
        """The control client, opened on first use (None where it cannot be: then a process per command)."""
        if self._control is None and not self._no_control:
            self._control = ControlClient.open(self.sock, "c")
            self._no_control = self._control is None
        return self._control

    def wait_output(self, timeout: float) -> bool:
        """Sleep until the console prints after the last look at the screen, or `timeout` seconds pass (True if it
        printed). The latency waits look, then sleep here: looking in a loop kept the measurer (this process and
        the tmux server answering it) busy the whole time a key was timed, which on two cores with other work
        running took CPU from the console being timed. `DFC_BENCH_SPIN_WAIT=1` looks in a loop (to compare); so
        does a run where the watch cannot be opened."""
        if not self.sleep_between_looks:
            return False
        if self._watch is None:
            self._watch = OutputWatch.open(self.sock, "c")
            if self._watch is None:
                self.sleep_between_looks = False
                return False
        return self._watch.wait(self._seen, timeout)

    def _drop_client(self) -> None:
        if self._control is not None:
            self._control.close()
        self._control, self._no_control = None, True

    def keys(self, *keys: str) -> None:
        """Type `keys` into the console's terminal. Through the control client when there is one: a `tmux
        send-keys` process per press put its own start (2.4 ms idle here, more on two busy cores) inside every
        latency the benchmarks time, a cost no person typing pays. `DFC_BENCH_SPAWN_KEYS=1` restores it (to
        compare)."""
        if not os.environ.get("DFC_BENCH_SPAWN_KEYS") and (client := self._client()) is not None:
            try:
                client.command("send-keys -t c " + " ".join(_tmux_word(k) for k in keys))
                return
            except (OSError, EOFError, TimeoutError):
                self._drop_client()
        self.tmux("send-keys", "-t", "c", *keys)

    def wait_text(self, text: str, timeout: float) -> float:
        """Seconds until `text` is on screen (RuntimeError after timeout)."""
        t0 = time.monotonic()
        while text not in self.screen():
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"{text!r} not on screen after {timeout} s:\n{self.screen()[-1500:]}")
            time.sleep(0.02)
        return time.monotonic() - t0

    def wait_servers(self, n: int, timeout: float) -> float:
        """Seconds until the top bar counts n servers up (`16 serving`; older builds said `16 servers`)."""
        t0 = time.monotonic()
        texts = (f"{n} serving", f"{n} servers")
        while not any(t in (screen := self.screen()) for t in texts):
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"{texts[0]!r} not on screen after {timeout} s:\n{screen[-1500:]}")
            time.sleep(0.02)
        return time.monotonic() - t0

    def settle(self, max_s: float = 20.0, window_s: float = 2.0) -> list[float]:
        """Wait until the console's CPU use stops falling (start-up catch-up done); the window figures (%)."""
        seen: list[float] = []
        end = time.monotonic() + max_s
        while time.monotonic() < end:
            c0 = cpu_seconds(self.pid)
            time.sleep(window_s)
            seen.append(100.0 * (cpu_seconds(self.pid) - c0) / window_s)
            if settled(seen):
                break
        return [round(x, 1) for x in seen]

    def close_clients(self) -> None:
        """End the output watch and the command client; later commands and keys go through a process each."""
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        if self._control is not None:
            self._control.close()
            self._control = None
        self._no_control = True

    def stop(self) -> None:
        self.close_clients()
        self.keys("q")
        end = time.monotonic() + (60 if self.profile else 10)  # a profile is written on exit
        while time.monotonic() < end and self.tmux("has-session", "-t", "c").returncode == 0:
            time.sleep(0.05)
        self.tmux("kill-server")


def settled(windows: list[float]) -> bool:
    """The last CPU window (%) is no longer falling: at most 2 points or 10 % below the one before. A window
    20 % lower counted as settled before, and a 47 -> 40 % start-up tail became bench 9's 64-host figure."""
    return len(windows) >= 2 and windows[-1] >= windows[-2] - max(2.0, 0.1 * windows[-2])


def cpu_by_command() -> dict[str, float]:
    """CPU seconds used so far by every live process, summed by command name (for contention reports)."""
    out: dict[str, float] = {}
    tck = os.sysconf("SC_CLK_TCK")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            raw = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        f = raw.rsplit(")", 1)[1].split()
        out[comm] = out.get(comm, 0.0) + (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / tck
    return out


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine from /proc/stat."""
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = f[3] + f[4]
    return float(sum(f) - idle), float(sum(f))


def contention(before: tuple[dict[str, float], tuple[float, float]], seconds: float, top: int = 6) -> dict[str, object]:
    """Machine CPU use since `before` (cpu_by_command(), machine_busy()) and the biggest consumers (% of a core).

    Short-lived processes are counted through their parents' cumulative child time (cutime/cstime).
    """
    b_cmd, (b_busy, b_tot) = before
    now_cmd = cpu_by_command()
    busy, tot = machine_busy()
    ncpu = os.cpu_count() or 1
    used = {k: v - b_cmd.get(k, 0.0) for k, v in now_cmd.items()}
    best = sorted(used.items(), key=lambda kv: -kv[1])[:top]
    return {
        "machine busy (% of all cores)": round(100 * (busy - b_busy) / max(tot - b_tot, 1), 1),
        "cores": ncpu,
        "top consumers (% of a core)": {k: round(100 * v / seconds, 1) for k, v in best if v > 0},
    }
