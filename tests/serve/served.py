"""`dflash-console serve` as a real process for tests: started, its banner read, stopped, its sessions checked gone."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.patience import patient

ROOT = Path(__file__).resolve().parents[2]
URL_RE = re.compile(r"open (http://\S+/\?token=(\S+))")


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    token: str
    banner: list[str] = field(default_factory=list)
    stdout: queue.Queue[str | None] = field(default_factory=queue.Queue)
    """What it writes after the banner (drained, so a full pipe never blocks the server)."""
    stderr: queue.Queue[str | None] = field(default_factory=queue.Queue)

    @property
    def base(self) -> str:
        return self.url.split("/?", 1)[0]

    def children(self) -> set[int]:
        """Pids whose parent is the server: each browser session's console."""
        return {pid for pid, ppid in _parents().items() if ppid == self.proc.pid}

    def descendants(self) -> set[int]:
        """Every process below the server (the sessions' consoles and what they started and still parent)."""
        parents = _parents()
        out: set[int] = set()
        frontier = {self.proc.pid}
        while frontier:
            frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - out
            out |= frontier
        return out


def _parents() -> dict[int, int]:
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] not in ("Z", "X"):  # a zombie is gone, only not yet reaped
                out[int(d.name)] = int(fields[1])
    return out


def alive(pids: set[int]) -> set[int]:
    """Those of the pids still running (zombies count as gone)."""
    return set(_parents()) & pids


def read_banner(lines: queue.Queue[str | None], timeout: float) -> list[str]:
    """Lines until the banner's last one (or the process's end): read by a thread, so no pipe buffering
    hides a line that was already written."""
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        out.append(line)
        if "Ctrl+C" in line:
            break
    return out


@contextmanager
def serve(*args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> Iterator[Served]:
    """`dflash-console serve --port 0 ARGS` (after `prefix`, e.g. `ip netns exec NS`); on exit SIGTERM, and the
    exit code must be 0 within the grace."""
    full_env = {**os.environ, "DFC_DEMO_TIME_SCALE": "0.1", **(env or {})}
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-m", "console", "serve", "--port", "0", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
    )
    stdout: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_drain, args=(proc.stdout, stdout), daemon=True).start()
    try:
        lines = read_banner(stdout, patient(10))
        m = next((URL_RE.search(x) for x in lines if URL_RE.search(x)), None)
        if m is None:
            proc.kill()
            proc.wait()
            raise AssertionError(f"no URL in serve's banner: {lines!r}; stderr: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        served = Served(proc, m.group(1), m.group(2), lines, stdout)
        threading.Thread(target=_drain, args=(proc.stderr, served.stderr), daemon=True).start()
        yield served
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(patient(10))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise AssertionError("serve did not exit within the grace after SIGTERM") from None


def _drain(stream: object, into: queue.Queue[str | None]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.put(line.rstrip("\n"))
    into.put(None)
