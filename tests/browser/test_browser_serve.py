"""`dflash-console serve --demo` opened in a real Chromium: the GPU panes render, keys reach the app, the
read-only console offers and opens no launch, a wrong token gets no console, and SIGTERM ends every session.

Screenshots (fleet, help) are saved under the artifacts dir printed at the start of the run.
"""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.browser.mirror import TerminalMirror
from tests.patience import patient
from tests.serve.served import Served, alive, serve

TOKEN = "browser-test-token-0123456789abcdef"
VIEWPORT = {"width": 1400, "height": 900}
FLEET = ("ct129", "blackwell", "GPU0 RTX A6000", "GPU1 RTX A6000", "GPU3 RTX PRO 6000", "READ-ONLY")


@pytest.fixture(scope="module")
def served():
    with serve("--demo", env={"DFLASH_SERVE_TOKEN": TOKEN}) as s:
        yield s


def open_page(browser, base: str):
    """A fresh browser context (no cookie) whose requests may go to `base` (the served console) only."""
    ctx = browser.new_context(viewport=VIEWPORT)
    elsewhere: list[str] = []
    own = urlsplit(base).netloc

    def route(r) -> None:
        if urlsplit(r.request.url).netloc == own:
            r.continue_()
        else:
            elsewhere.append(r.request.url)
            r.abort()

    ctx.route("**/*", route)
    page = ctx.new_page()
    return ctx, page, TerminalMirror(page), elsewhere


def wait_until(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + patient(timeout)
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out: {what}")
        time.sleep(0.1)


def test_the_demo_renders_in_chromium_and_keys_reach_it(browser, served: Served, artifacts: Path) -> None:
    ctx, page, mirror, elsewhere = open_page(browser, served.base)
    try:
        resp = page.goto(served.url)
        assert resp is not None and resp.ok
        assert "token" not in page.url  # moved into the cookie by the redirect
        screen = mirror.wait_for(*FLEET, timeout=20)
        assert "demo (simulated fleet)" in screen
        page.screenshot(path=str(artifacts / "fleet.png"))

        (session,) = served.children()
        env = Path(f"/proc/{session}/environ").read_bytes()
        assert b"DFLASH_SERVE_TOKEN" not in env and TOKEN.encode() not in env  # the console never holds it
        assert b"TEXTUAL_DRIVER=console.serve.web_driver:PromptEscapeWebDriver" in env  # prompt Escape

        footer = screen.rstrip().splitlines()[-1]
        assert "Probe" in footer and not {"Launch", "Relaunch", "Stop"} & set(footer.split())  # read-only

        page.locator(".xterm-helper-textarea").focus()
        page.keyboard.press("l")  # refused: no launch dialog (keys are handled in order, so `?` comes after it)
        page.keyboard.press("?")
        help_screen = mirror.wait_for("keymap id", "command palette")
        assert "GPU0 RTX A6000" in help_screen  # the help is a sheet over the bottom rows: the fleet is above it
        keys = help_screen.split("ctrl+p: command palette")[0]
        ids = re.compile(r" {2}(\w+) {2,}\S")  # the keymap id column (padded), not a description's word
        assert "probe" in ids.findall(keys) and not {"launch", "relaunch", "stop"} & set(ids.findall(keys))
        page.screenshot(path=str(artifacts / "help.png"))
        page.keyboard.press("Escape")
        mirror.wait_gone("keymap id")
        after = mirror.wait_for(*FLEET)
        assert "Launch on" not in after and "Launch" not in after.splitlines()[-1]
        assert elsewhere == []  # the page asked no third party (fonts, scripts) for anything
    finally:
        ctx.close()
    # closing the tab ends its console
    wait_until(lambda: not alive({session}), 10, f"session console {session} to quit after the tab closed")


def test_a_wrong_token_gets_no_console(browser, served: Served) -> None:
    ctx, page, mirror, _ = open_page(browser, served.base)
    try:
        wrong = page.goto(served.base + "/?token=" + "x" * len(TOKEN))
        assert wrong is not None and wrong.status == 403
        assert "wrong token" in page.content()
        none = page.goto(served.base + "/")
        assert none is not None and none.status == 401
        assert "needs its token" in page.content()
        page.wait_for_timeout(300)
        assert mirror.sockets == [] and mirror.bytes_in == 0
        assert served.children() == set()
    finally:
        ctx.close()


def test_sigterm_ends_every_session(browser, artifacts: Path) -> None:
    with serve("--demo") as s:
        ctx, page, mirror, _ = open_page(browser, s.base)
        try:
            page.goto(s.url)
            mirror.wait_for(*FLEET, timeout=20)
            below = s.descendants()
            assert s.children() and s.children() <= below
            s.proc.send_signal(signal.SIGTERM)
            assert s.proc.wait(patient(10)) == 0
            wait_until(lambda: not alive(below), 10, f"every process under serve to end: {alive(below)}")
            page.wait_for_selector("body.-closed", timeout=patient(5) * 1000)  # the page says "Session ended."
        finally:
            ctx.close()


def test_a_hosts_file_with_actions_allowed(browser, tmp_path: Path) -> None:
    """Without --demo the sessions open the given hosts.toml (here a sim fleet); --allow-actions lets `l` open
    the launch dialog (Escape leaves it; nothing is launched)."""
    from console.sim.fleet import sim_down, sim_up

    hosts = sim_up(tmp_path / "fleet", hosts=["ct129"], time_scale=0.1)
    try:
        with serve("--hosts", str(hosts), "--allow-actions", env={"DFLASH_STATE_DIR": str(tmp_path / "state")}) as s:
            assert "actions ALLOWED" in "\n".join(s.banner)
            ctx, page, mirror, _ = open_page(browser, s.base)
            try:
                page.goto(s.url)
                screen = mirror.wait_for("ct129", "GPU0 RTX A6000", "GPU1 RTX A6000", timeout=20)
                assert "READ-ONLY" not in screen and "demo" not in screen and "blackwell" not in screen
                assert "Launch" in screen.rstrip().splitlines()[-1].split()
                page.locator(".xterm-helper-textarea").focus()
                page.keyboard.press("l")
                mirror.wait_for("Launch on ct129")
                page.keyboard.press("Escape")
                mirror.wait_gone("Launch on ct129")
            finally:
                ctx.close()
    finally:
        sim_down(tmp_path / "fleet", timeout=3)


@pytest.mark.parametrize(
    ("width", "query", "size"), [(412, "", "9"), (800, "", "12"), (1400, "", "16"), (412, "&fontsize=14", "14")]
)
def test_font_size_fits_a_narrow_screen(browser, served: Served, width: int, query: str, size: str) -> None:
    """`delay=1` is textual-serve's "press Start" page: the font is chosen, no session is started."""
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = ctx.new_page()
        page.goto(served.url + "&delay=1" + query)
        assert page.locator("#terminal").get_attribute("data-font-size") == size
    finally:
        ctx.close()
