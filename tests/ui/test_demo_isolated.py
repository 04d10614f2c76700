"""Issue 13.9: two `dflash-console --demo` started together in tmux both serve on their own ports, write nothing
to the user's state dir, and each cleans up its sim and temp dir on SIGHUP (terminal closed) and SIGTERM."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.patience import patient, settles
from tests.ui.test_demo_tmux import ROOT, leftover_processes

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


def _pane_pid(tmux: list[str], session: str) -> int:
    out = subprocess.run(
        [*tmux, "display-message", "-p", "-t", session, "#{pane_pid}"], capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip())


def _gone(pid: int, timeout: float) -> bool:
    end = time.monotonic() + patient(timeout)
    while time.monotonic() < end:
        if not Path(f"/proc/{pid}").exists():
            return True
        try:  # a zombie (tmux has not reaped it yet) has ended too
            if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
                return True
        except (OSError, IndexError):
            return True
        time.sleep(0.05)
    return False


def test_two_demos_at_once_then_sighup_and_sigterm(tmp_path: Path) -> None:
    tmux = ["tmux", "-L", f"dfc-iso-{os.getpid()}"]
    user_state = tmp_path / "user-state"
    env = {k: v for k, v in os.environ.items() if k != "DFLASH_STATE_DIR"}
    env |= {
        "TMPDIR": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "XDG_STATE_HOME": str(user_state),
        "DFC_DEMO_TIME_SCALE": "0.1",
        "TERM": "xterm-256color",
    }
    cmd = f"cd {ROOT} && exec {sys.executable} -m console --demo"
    try:
        for s in ("a", "b"):  # started together: both pick ports before either server listens
            subprocess.run([*tmux, "new-session", "-d", "-s", s, "-x", "120", "-y", "36", cmd], env=env, check=True)
        pids = {s: _pane_pid(tmux, s) for s in ("a", "b")}
        screens = {s: _wait_session(tmux, s, "serving", 90) for s in ("a", "b")}
        assert all("crashed" not in v for v in screens.values()), screens
        claims = json.loads((tmp_path / f"dflash-console-demo-ports-{os.getuid()}.json").read_text())
        mine = {int(k.split(":")[0]): v for k, v in claims.items()}
        assert set(mine) == set(pids.values()), (mine, pids)
        ports = [set(mine[pids[s]]["ports"]) for s in ("a", "b")]
        assert ports[0] and ports[1] and not ports[0] & ports[1], ports
        roots = {s: Path(mine[pids[s]]["root"]) for s in ("a", "b")}
        for s in ("a", "b"):
            assert (roots[s] / "state" / "journal.jsonl").exists(), f"demo {s} keeps its own journal"
        assert not user_state.exists() or not any(user_state.rglob("*.jsonl")), list(user_state.rglob("*"))

        os.kill(pids["a"], signal.SIGHUP)  # the terminal of demo a is closed
        assert _gone(pids["a"], 15), "demo a outlived SIGHUP"
        assert not roots["a"].exists(), "demo a's temp dir was left behind"
        settles(lambda: not leftover_processes(str(roots["a"])), 5)  # SIGKILLed sims take a moment to exit when busy
        assert not leftover_processes(str(roots["a"])), "demo a's sim processes outlived it"
        assert "serving" in _wait_session(tmux, "b", "serving", 5), "demo b was disturbed"
        assert roots["b"].exists()

        os.kill(pids["b"], signal.SIGTERM)
        assert _gone(pids["b"], 15), "demo b outlived SIGTERM"
        assert not roots["b"].exists(), "demo b's temp dir was left behind"
        settles(lambda: not leftover_processes(str(roots["b"])), 5)
        assert not leftover_processes(str(roots["b"])), "demo b's sim processes outlived it"
        left = json.loads((tmp_path / f"dflash-console-demo-ports-{os.getuid()}.json").read_text())
        assert not left, left
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def _wait_session(tmux: list[str], session: str, needle: str, timeout: float) -> str:
    end = time.monotonic() + patient(timeout)
    screen = ""
    while time.monotonic() < end:
        screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout
        if needle in screen:
            return screen
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} not on demo {session}'s screen after {timeout} s:\n{screen}")


def test_a_hard_exit_after_sigterm_removes_what_was_written_since_the_cleanup(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """SIGTERM cleans up, then the app unwinds; its shutdown journals into the demo's state dir (the journal makes
    the directory again). When the unwinding hangs past the grace, the hard exit removes the tree before it ends."""
    from console.commands import tui
    from console.ui.demo import DemoFleet

    root = tmp_path / "dfc-demo-x"
    (root / "state").mkdir(parents=True)
    (root / "state" / "journal.jsonl").write_text("{}\n")
    demo = DemoFleet.__new__(DemoFleet)
    demo.root = root
    exits: list[int] = []

    def fake_exit(code: int) -> None:
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(tui.os, "_exit", fake_exit)
    with pytest.raises(SystemExit):
        tui._hard_exit(demo, 143)
    assert exits == [143] and not root.exists()
