"""Benchmark: `dflash-console serve --demo` in Debian's chromium (Playwright) — start, first panes, key latency.

Figures: spawn → the URL printed (serve's start), page open → first byte on the page's websocket, → the GPU
panes on the browser's screen (its websocket bytes replayed into pyte, as tests/browser/ reads it), and `?`
→ the websocket frame that puts the help on that screen, Escape → the frame that takes it off (p50/p95 over
--presses). A frame's time is when Playwright handed it to Python (polled every 2 ms; the screen is rebuilt
only after the frames are logged, so pyte's cost does not delay their stamps); xterm.js's own paint (a
canvas frame) is not included. The same presses go, interleaved, to a second server whose sessions use
Textual's own WebDriver (DFC_SERVE_DRIVER), the floor for console/serve/web_driver.py's Escape. Also the
session console's RSS. Read-only demos: no sim server is launched.
Targets: panes <= 3 s after the page opens, key p95 <= 150 ms.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from benchmarks.common import Result, pcts

TARGET_PANES_S = 3.0
TARGET_KEY_MS = 150.0
FLEET = ("GPU0 RTX A6000", "GPU3 RTX PRO 6000", "READ-ONLY")


def _rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _key_to_frame(page, mirror, frames: list[tuple[float, bytes]], key: str, shown, timeout_s: float = 10) -> float:
    """Seconds from the key press to the first frame after which `shown(screen text)` holds."""
    mirror.stream.feed(b"".join(p for _, p in frames))  # catch the screen up
    frames.clear()
    t = time.perf_counter()
    page.keyboard.press(key)
    while time.perf_counter() - t < timeout_s:
        page.wait_for_timeout(2)
        while frames:
            at, payload = frames.pop(0)
            mirror.stream.feed(payload)
            if shown(mirror.text()):
                return at - t
    raise RuntimeError(f"{key}: the screen never changed as expected")


TEXTUAL_DRIVER = "textual.drivers.web_driver:WebDriver"


def _open(pw_browser, served, mirror_cls) -> tuple[object, object, float, float]:
    page = pw_browser.new_page(viewport={"width": 1400, "height": 900})
    mirror = mirror_cls(page)
    t1 = time.perf_counter()
    page.goto(served.url)
    page.wait_for_selector("body.-first-byte")
    first_byte_s = time.perf_counter() - t1
    mirror.wait_for(*FLEET, timeout=20, poll_ms=5)
    panes_s = time.perf_counter() - t1
    page.locator(".xterm-helper-textarea").focus()
    return page, mirror, first_byte_s, panes_s


def _stamped(mirror) -> list[tuple[float, bytes]]:
    """From here the caller feeds the mirror's screen, after each frame is stamped."""
    frames: list[tuple[float, bytes]] = []
    mirror.paused = True
    mirror.sockets[0].on(
        "framereceived", lambda p: frames.append((time.perf_counter(), p)) if isinstance(p, bytes) else None
    )
    return frames


def run(args: argparse.Namespace) -> Result:
    from tests.browser.conftest import chromium_path

    path = chromium_path()
    name = "serve in chromium: first panes, key -> frame"
    target = f"panes <= {TARGET_PANES_S} s, key p95 <= {TARGET_KEY_MS:.0f} ms"
    if path is None:
        return Result(name, "-", target, None, note="Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    from tests.browser.mirror import TerminalMirror
    from tests.serve.served import serve

    t0 = time.perf_counter()
    with (
        serve("--demo") as ours,
        serve("--demo", env={"DFC_SERVE_DRIVER": TEXTUAL_DRIVER}) as theirs,
        sync_playwright() as pw,
    ):
        banner_s = time.perf_counter() - t0  # both started one after the other
        browser = pw.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            page, mirror, first_byte_s, panes_s = _open(browser, ours, TerminalMirror)
            page_t, mirror_t, _, _ = _open(browser, theirs, TerminalMirror)
            frames, frames_t = _stamped(mirror), _stamped(mirror_t)
            keys: dict[str, list[float]] = {
                "?": [],
                "escape": [],
                "escape (Textual's WebDriver)": [],
                "? (Textual's WebDriver)": [],
            }
            for _ in range(args.presses):  # interleaved, so both drivers see the same machine
                for pg, mi, fr, tag in (
                    (page, mirror, frames, ""),
                    (page_t, mirror_t, frames_t, " (Textual's WebDriver)"),
                ):
                    pg.wait_for_timeout(300)  # between presses, as a person types
                    keys["?" + tag].append(_key_to_frame(pg, mi, fr, "?", lambda text: "keymap id" in text))
                    pg.wait_for_timeout(300)
                    keys["escape" + tag].append(
                        _key_to_frame(pg, mi, fr, "Escape", lambda text: "keymap id" not in text)
                    )
            rss = _rss_mib(min(ours.children()))
        finally:
            browser.close()
    p = {k: pcts(v) for k, v in keys.items()}
    worst = max(p["?"]["p95"] or 0, p["escape"]["p95"] or 0)
    ok = panes_s <= TARGET_PANES_S and worst <= TARGET_KEY_MS
    return Result(
        name,
        f"panes {panes_s:.2f} s, ? p95 {p['?']['p95']} ms, esc p95 {p['escape']['p95']} ms",
        target,
        ok,
        {
            "two serve starts (spawn -> URL printed)": f"{banner_s:.2f} s",
            "page open -> first byte": f"{first_byte_s:.2f} s",
            "page open -> GPU panes on screen": f"{panes_s:.2f} s",
            **{f"{k} -> frame (ms)": v for k, v in p.items()},
            "presses": args.presses,
            "session console RSS": f"{rss} MiB",
            "load average": os.getloadavg()[0],
            "cpus": os.cpu_count(),
        },
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presses", type=int, default=20)
    r = run(ap.parse_args())
    r.print()
    return 0 if r.ok is not False else 1


if __name__ == "__main__":
    sys.exit(main())
