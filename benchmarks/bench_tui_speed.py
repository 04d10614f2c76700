"""Issue 14's speed goals for the screen, measured as a person sees them.

In a real terminal (a private tmux server, 160×48) on the full `--demo`:
  * first frame with GPUs drawn: spawn -> a GPU pane's title (`GPU0 RTX A6000`) on screen;   target <= 1.5 s
  * server screen open: enter on the opening server's pane -> its side panel on screen, p95;   target <= 150 ms
  * quit: `q` -> the process (and tmux session) gone;                                           target <= 2 s
In process (Pilot, the snapshot scenario with a frozen clock, so nothing changes):
  * an idle server screen: widget refreshes and CPU over 5 s;                                   target 0 refreshes

`python -m benchmarks.bench_tui_speed [--opens 20] [--repeat 3] [--json]`
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import sys
import time

from benchmarks.common import ROOT, Result

FIRST_FRAME_S = 1.5
OPEN_P95_MS = 150.0
QUIT_S = 2.0
GPU_MARK = "GPU0 RTX A6000"
SIDE = "Startup timeline"
FLEET = "› fleet"


def _tmux(sock: str, *args: str) -> str:
    import subprocess

    return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True).stdout


def _alive(sock: str) -> bool:
    import subprocess

    return subprocess.run(["tmux", "-L", sock, "has-session", "-t", "b"], capture_output=True).returncode == 0


def _until(sock: str, pred, timeout: float) -> float | None:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if pred(_tmux(sock, "capture-pane", "-p", "-t", "b")):
            return time.perf_counter() - t0
        time.sleep(0.003)
    return None


def demo_run(opens: int) -> dict[str, object]:
    """One demo: first frame with GPUs, `opens` server-screen opens (enter … esc), then quit."""
    sock = f"dfctui{os.getpid()}-{time.monotonic_ns()}"
    py = shlex.quote(sys.executable)
    cmd = f"cd {shlex.quote(str(ROOT))} && TERM=xterm-256color exec {py} -m console --demo"
    t0 = time.perf_counter()
    _tmux(sock, "new-session", "-d", "-s", "b", "-x", "160", "-y", "48", cmd)
    out: dict[str, object] = {}
    try:
        out["header_s"] = _until(sock, lambda s: "dflash-console" in s, 20)
        first = _until(sock, lambda s: GPU_MARK in s, 20)
        out["gpus_drawn_s"] = round(time.perf_counter() - t0, 3) if first is not None else None
        _until(sock, lambda s: "qwen" in s, 30)  # the opening scene's server owns the focused pane (ct129 GPU0)
        time.sleep(1.0)
        times = []
        for _ in range(opens):
            _tmux(sock, "send-keys", "-t", "b", "Enter")
            t = _until(sock, lambda s: SIDE in s, 5)
            if t is None:
                break
            times.append(t * 1000)
            _tmux(sock, "send-keys", "-t", "b", "Escape")
            if _until(sock, lambda s: SIDE not in s and FLEET in s, 5) is None:
                _tmux(sock, "send-keys", "-t", "b", "Escape")  # a search or older log was open: the next esc
                _until(sock, lambda s: SIDE not in s, 5)
            time.sleep(0.2)
        out["open_ms"] = [round(x, 1) for x in times]
    finally:
        _tmux(sock, "send-keys", "-t", "b", "q")
        tq = time.perf_counter()
        while time.perf_counter() - tq < 20 and _alive(sock):
            time.sleep(0.02)
        out["quit_s"] = round(time.perf_counter() - tq, 2)
        with contextlib.suppress(Exception):
            _tmux(sock, "kill-server")
    return out


async def idle_server_screen(seconds: float = 5.0) -> dict[str, object]:
    """Refreshes of the server screen's widgets and the process's CPU while nothing changes."""
    from textual.widget import Widget

    from console.ui.app import DflashApp
    from console.ui.screens.server import ServerScreen
    from tests.ui.fakes import NOW, FakeApi, FakeBackend, scenario

    app = DflashApp(FakeApi(scenario()), clock=lambda: NOW, backend=FakeBackend())
    counts: list[str] = []
    real = Widget.refresh
    async with app.run_test(size=(160, 48)) as pilot:
        app.open_server("qwen3-8b@ct129:gpu0-1")
        await pilot.pause(1.5)
        screen = app.screen
        assert isinstance(screen, ServerScreen)

        def counting(self, *a, **kw):  # type: ignore[no-untyped-def]
            if self.screen is screen:
                counts.append(type(self).__name__)
            return real(self, *a, **kw)

        Widget.refresh = counting  # type: ignore[method-assign]
        try:
            c0, t0 = time.process_time(), time.perf_counter()
            await asyncio.sleep(seconds)
            cpu = 100 * (time.process_time() - c0) / (time.perf_counter() - t0)
        finally:
            Widget.refresh = real  # type: ignore[method-assign]
    return {"refreshes": len(counts), "seconds": seconds, "cpu_pct": round(cpu, 1), "widgets": sorted(set(counts))}


def p95(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]


def run(args: argparse.Namespace) -> list[Result]:
    runs = [demo_run(args.opens if i == 0 else 0) for i in range(args.repeat)]
    frames = sorted(r["gpus_drawn_s"] for r in runs if r["gpus_drawn_s"] is not None)  # type: ignore[misc]
    quits = sorted(r["quit_s"] for r in runs)  # type: ignore[type-var]
    opens = [x for r in runs for x in r.get("open_ms", [])]  # type: ignore[attr-defined]
    idle = asyncio.run(idle_server_screen())
    med = frames[len(frames) // 2] if frames else None
    q95 = p95(opens)
    return [
        Result(
            "14 --demo first frame with GPUs drawn",
            f"{med:.2f} s median" if med is not None else "never",
            f"<= {FIRST_FRAME_S} s",
            med is not None and med <= FIRST_FRAME_S,
            {"each run (s)": frames, "header (s)": [r["header_s"] for r in runs]},
        ),
        Result(
            "14 server screen open (enter -> side panel)",
            f"p95 {q95:.0f} ms" if q95 is not None else "never",
            f"<= {OPEN_P95_MS:.0f} ms p95",
            q95 is not None and q95 <= OPEN_P95_MS,
            {"opens (ms)": opens, "median (ms)": sorted(opens)[len(opens) // 2] if opens else None},
        ),
        Result(
            "14 demo quit (q -> process gone)",
            f"{quits[-1]:.2f} s worst",
            f"<= {QUIT_S} s",
            bool(quits) and quits[-1] <= QUIT_S,
            {"each run (s)": quits},
        ),
        Result(
            "14 idle server screen",
            f"{idle['refreshes']} refreshes in {idle['seconds']:.0f} s, {idle['cpu_pct']}% CPU",
            "0 refreshes",
            idle["refreshes"] == 0,
            idle,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opens", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    for r in run(args):
        print(r.to_json()) if args.json else r.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
