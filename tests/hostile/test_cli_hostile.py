"""Host text the README promises never reaches a terminal raw, on the CLI paths over sshd: every C1 control
(U+0080-U+009F as UTF-8), raw 8-bit CSI/OSC bytes (not UTF-8), and an unterminated OSC that must not hide the
log lines after it, through `logs`, `status`, `diagnose` and the `launch --wait` error of a server that crashes
while loading. (test_remote_output.py carries the escape-and-secrets payload through the same paths.)"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from console.remote_text import sanitize
from console.sim.control import inject
from tests.faults import results
from tests.faults.simfleet import REPO, build_sim_fleet, preset_toml
from tests.hostile.test_output_paths import BAD_CHAR, cli
from tests.patience import patient

C1 = [chr(c) for c in range(0x80, 0xA0)]
RAW_8BIT = b"RAW \x9b2J\x9b10;5H \x9d52;c;ZXZpbA==\x07 \x9d8;;http://evil.example/\x9c \x9d0;title\x9c \x85\x8d\x90q\x9c RAWEND"
"""8-bit CSI, OSC 52/8/0 with BEL and 8-bit ST, NEL, RI and DCS as single bytes: invalid UTF-8 on the wire."""


def hostile_log_lines() -> list[bytes]:
    """Log lines whose markers must each reach the output: an OSC opened and never closed (a BEL comes three
    lines later), every C1 control at the end of its own line, the raw 8-bit line."""
    ts = b"[2026-12-01 14:00:01] "
    lines = [
        ts + b"OPEN \x1b]0;never closed",
        *(ts + f"KEPT-{i}".encode() for i in range(1, 4)),
        ts + b"CLOSE \x07 AFTER-BEL",
        ts + RAW_8BIT,
    ]
    lines += [ts + f"C1-{ord(c):02X} K{ord(c):02X} {c}".encode() for c in C1]
    return lines


MARKERS = ["OPEN", "KEPT-1", "KEPT-2", "KEPT-3", "CLOSE", "AFTER-BEL", "RAW", "RAWEND", *(f"K{ord(c):02X}" for c in C1)]


def _problems(where: str, text: str, must: list[str]) -> list[str]:
    bad = [
        f"{where}: control {m.group()!r} at {m.start()}: {text[max(0, m.start() - 30) : m.start() + 10]!r}"
        for m in list(BAD_CHAR.finditer(text))[:2]
    ]
    lost = [m for m in must if m not in text]
    return bad + ([f"{where}: lost {', '.join(lost[:8])}{' …' if len(lost) > 8 else ''}"] if lost else [])


def test_an_unterminated_sequence_never_hides_the_lines_after_it() -> None:
    """Regression: an OSC, DCS, SOS, PM or APC string ran across newlines to the next BEL or ST, so one log
    line opening `ESC ]` hid every line up to a later BEL from `logs` (SafeStream sanitises many lines at once)."""
    for opener in ("\x1b]0;", "\x9d0;", "\x1bP", "\x90", "\x98", "\x9e", "\x9f", "\x1b_"):
        out = sanitize(f"a {opener}x\nKEPT\nb \x07 c\x9c d\n")
        assert "KEPT" in out and " c" in out and " d" in out and not BAD_CHAR.search(out), (opener, out)


class _Follow:
    """A real `dflash-console logs -f NAME` process; a thread collects what it prints."""

    def __init__(self, hosts: Path, name: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "console", "--hosts", str(hosts), "logs", name, "-f", "-n", "0"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._chunks: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while chunk := self.proc.stdout.read1(65536):
            self._chunks.append(chunk)

    def text(self) -> str:
        return b"".join(self._chunks).decode("utf-8", "replace")

    def wait_for(self, marker: str, timeout: float) -> None:
        """Until `marker` was printed (a missing one is a failed check later, not an error here)."""
        deadline = time.monotonic() + timeout
        while marker not in self.text() and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.1)


def _log_of(h_dir: Path, preset: str) -> Path | None:
    return next(iter(sorted((h_dir / "logs").glob(f"{preset}_*.log"))), None)


def test_c1_and_8bit_host_text_on_the_cli_over_sshd(ssh_host_factory, sim_root: Path) -> None:
    t0 = time.monotonic()
    sf = build_sim_fleet(ssh_host_factory, sim_root, ["c1h"])
    h = sf.hosts["c1h"]
    port = 30770
    hosts = sf.toml(preset_toml("hot", h, port=port))
    name = "hot@c1h:gpu0"
    inject(h.dir, port, "slow", factor=20)  # a loading phase long enough to write into (read at its first step)
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", "--hosts", str(hosts), "launch", "hot", "--wait"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + patient(30)
        while not ((log := _log_of(h.dir, "hot")) and b"server_args=" in log.read_bytes()):
            assert time.monotonic() < deadline and proc.poll() is None, "the server never logged its args"
            time.sleep(0.1)
        follow = _Follow(hosts, name)  # `logs -f` writes what the tail brings: many lines in one chunk
        follow.wait_for("server_args=", patient(20))  # (so the hostile lines come through the tail)
        (pid, *_) = h.pgrep("sglang[.]launch_server")
        sid = h.ssh.exec(f"ps -o sid= -p {pid}").stdout.strip()
        # the server's session (it and its ranks) stopped first: each writes at its own offset (`> LOG`)
        h.ssh.exec(f"pkill -STOP -s {sid}")
        cause = b"RuntimeError: CAUSE-START " + "".join(C1).encode() + b" " + RAW_8BIT + b" CAUSE-END"
        with open(log, "ab") as f:
            f.write(b"".join(ln + b"\n" for ln in hostile_log_lines()))
            f.write(
                b"[2026-12-01 14:00:02] Scheduler hit an exception: Traceback (most recent call last):\n"
                b'  File "/opt/sglang/srt/managers/scheduler.py", line 1, in event_loop\n' + cause + b"\n"
            )
        h.ssh.exec(f"pkill -KILL -s {sid}")
        raw_out, _ = proc.communicate(timeout=patient(60))
        follow.wait_for("CAUSE-END", patient(20))
    finally:
        for p in (proc, *([follow.proc] if "follow" in locals() else [])):
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=10)
    outs: dict[str, tuple[str, list[str]]] = {}
    launch_out = raw_out.decode("utf-8", "replace")
    outs["`launch --wait` error (crashed while loading)"] = (launch_out, ["CAUSE-START"])
    outs["`logs -f` (lines as they come)"] = (follow.text(), [*MARKERS, "CAUSE-START", "CAUSE-END"])
    rc, out, err = cli("--hosts", str(hosts), "logs", name, "-n", "0")
    outs["`logs` (all lines)"] = (out + err, [*MARKERS, "CAUSE-START", "CAUSE-END"])
    rc, out, err = cli("--hosts", str(hosts), "status", "--wait", "8")
    outs["`status` (crash cause)"] = (out + err, ["CAUSE-START"])
    rc, out, err = cli("--hosts", str(hosts), "status", "--json", "--wait", "8")
    outs["`status --json`"] = (out + err, ["CAUSE-START"])
    try:
        json.loads(out)
    except ValueError:
        outs["`status --json`"][1].append("<not JSON>")
    rc, out, err = cli("diagnose", str(log))
    outs["`diagnose` of the log"] = (out + err, ["CAUSE-START"])
    failed: dict[str, list[str]] = {}
    for where, (text, must) in outs.items():
        probs = _problems(where, text, must)
        if where.startswith("`launch") and proc.returncode == 0:
            probs.append(f"{where}: exit 0 for a crashed launch")
        results.record(
            "hostile", f"C1 and 8-bit host text: {where}", 0, not probs, time.monotonic() - t0, "; ".join(probs)
        )
        if probs:
            failed[where] = probs
    assert not failed, (failed, f"launch --wait exited {proc.returncode}: {launch_out[-800:]!r}")


@pytest.mark.parametrize("c", C1, ids=[f"U+{ord(c):04X}" for c in C1])
def test_each_c1_control_is_stripped_and_keeps_the_text(c: str) -> None:
    out = sanitize(f"a {c}\nb\tc {c}")
    assert out.startswith("a ") and "\nb\tc " in out and not BAD_CHAR.search(out), repr(out)
