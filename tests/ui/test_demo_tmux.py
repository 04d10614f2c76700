"""End to end: `dflash-console --demo` in a private tmux server; keys in, capture-pane out, sim cleaned up on quit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.slowdown import SlowdownMeter
from tests.patience import patient, settles

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


def capture(tmux: list[str]) -> str:
    return subprocess.run([*tmux, "capture-pane", "-p", "-t", "demo"], capture_output=True, text=True).stdout


def wait_for(tmux: list[str], needle: str, timeout: float) -> str:
    end = time.monotonic() + patient(timeout)
    screen = ""
    while time.monotonic() < end:
        screen = capture(tmux)
        if needle in screen:
            return screen
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not on screen after {timeout} s:\n{screen}")


def wait_gone(tmux: list[str], needle: str, timeout: float) -> None:
    end = time.monotonic() + patient(timeout)
    while needle in capture(tmux):
        if time.monotonic() > end:
            raise AssertionError(f"{needle!r} still on screen after {timeout} s")
        time.sleep(0.05)


def focus_corners(screen: str) -> list[tuple[int, int]]:
    """(row, column) of every double-bordered (selected) pane's top-left corner on the screen."""
    return [(r, c) for r, line in enumerate(screen.splitlines()) for c, ch in enumerate(line) if ch == "╔"]


def leftover_processes(marker: str) -> list[int]:
    """Pids whose command line mentions the test's temp dir (sim servers started by the demo)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker.encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def test_demo_in_tmux(tmp_path: Path) -> None:
    tmux = ["tmux", "-L", f"dfc-test-{os.getpid()}"]
    inherited = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}  # they override tmux's size
    env = {
        **inherited,
        "TMPDIR": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "DFC_DEMO_TIME_SCALE": "0.1",
        "TERM": "xterm-256color",
    }
    cmd = f"cd {ROOT} && exec {sys.executable} -m console --demo"
    try:
        with SlowdownMeter() as meter:  # the first frame's limit: 10 s times the machine's slowdown meanwhile
            t0 = time.monotonic()
            subprocess.run(
                [*tmux, "new-session", "-d", "-s", "demo", "-x", "120", "-y", "36", cmd], env=env, check=True
            )
            # tmux holds a lone ESC for 500 ms by default; an Enter inside that window would arrive as M-Enter.
            subprocess.run([*tmux, "set-option", "-g", "escape-time", "0"], check=True)
            wait_for(tmux, "ct129", 20)  # the first frame (below 30 rows the layout gives the top bar to the panes)
            first_frame = time.monotonic() - t0
        slow = meter.result
        print(f"first frame after {first_frame:.2f} s, slowdown p90 {slow.p90:.2f}")  # ~1.2 s on an idle 2-core box
        assert first_frame < 10.0 * slow.p90, f"first frame after {first_frame:.2f} s (slowdown p90 {slow.p90:.2f})"
        wait_for(tmux, "blackwell", 30)
        wait_for(tmux, "serving", 60)
        screen = wait_for(tmux, "GPU0", 30)  # "serving" can be blackwell's (or a router's) before ct129's GPUs
        assert "ct129" in screen
        # arrows: the selection's double border moves and the pane it left is redrawn single (a focus move
        # repaints only the panes it touches, not the whole screen)
        assert settles(lambda: len(focus_corners(capture(tmux))) == 1, 5), capture(tmux)
        start = focus_corners(capture(tmux))
        subprocess.run([*tmux, "send-keys", "-t", "demo", "Right"], check=True)
        assert settles(lambda: len(now := focus_corners(capture(tmux))) == 1 and now != start, 5), capture(tmux)
        subprocess.run([*tmux, "send-keys", "-t", "demo", "Left"], check=True)
        assert settles(lambda: focus_corners(capture(tmux)) == start, 5), capture(tmux)
        subprocess.run([*tmux, "send-keys", "-t", "demo", "?"], check=True)
        wait_for(tmux, "keymap id", 5)
        subprocess.run([*tmux, "send-keys", "-t", "demo", "Escape"], check=True)
        wait_gone(tmux, "keymap id", 5)
        subprocess.run([*tmux, "send-keys", "-t", "demo", "Enter"], check=True)
        wait_for(tmux, "Startup timeline", 5)
        subprocess.run([*tmux, "send-keys", "-t", "demo", "i"], check=True)  # the facts panel hides, then shows
        wait_gone(tmux, "Startup timeline", 5)
        subprocess.run([*tmux, "send-keys", "-t", "demo", "i"], check=True)
        wait_for(tmux, "Startup timeline", 5)
        subprocess.run([*tmux, "send-keys", "-t", "demo", "Escape"], check=True)
        wait_gone(tmux, "Startup timeline", 5)
        subprocess.run([*tmux, "send-keys", "-t", "demo", "q"], check=True)
        end = time.monotonic() + patient(15)
        while time.monotonic() < end:
            if subprocess.run([*tmux, "has-session", "-t", "demo"], capture_output=True).returncode != 0:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the console did not quit on q")
        assert not list(tmp_path.glob("dfc-demo-*")), "the demo's sim dir was not cleaned up"
        settles(lambda: not leftover_processes(str(tmp_path)), 5)  # SIGKILLed sims take a moment to exit when busy
        assert not leftover_processes(str(tmp_path)), "sim processes outlived the console"
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
