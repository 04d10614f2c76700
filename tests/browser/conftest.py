"""Debian's chromium, driven by Playwright (never `playwright install`): skipped only where it is absent."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM_CANDIDATES = ("/usr/lib/chromium/chromium", "chromium")
"""Debian's real binary first (/usr/bin/chromium is a shell wrapper around it), then whatever PATH has."""


def chromium_path() -> str | None:
    for c in CHROMIUM_CANDIDATES:
        found = c if os.path.isabs(c) and os.access(c, os.X_OK) else shutil.which(c)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Module-scoped, not session-scoped: while Playwright's sync API is open it holds an event loop running in
    this thread, and every async test that ran after it in the same process (worker) failed with "Runner.run()
    cannot be called from a running event loop"."""
    path = chromium_path()
    if path is None:
        pytest.skip(
            "Debian's chromium is not installed (apt-get install chromium; `scripts/bootstrap --test` "
            "installs it as root)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def artifacts(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Screenshots go here: $DFC_TEST_ARTIFACTS/browser when set (CI keeps it), else pytest's tmp dir; printed."""
    root = os.environ.get("DFC_TEST_ARTIFACTS")
    path = Path(root) / "browser" if root else tmp_path_factory.mktemp("browser-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    announce(request.config, f"browser screenshots: {path}")
    return path


def announce(config: pytest.Config, line: str) -> None:
    """One line on the terminal of whoever runs the tests, from inside a test's setup. A plain
    `terminalreporter.write_line` there went into pytest's fd capture of that test and was never shown. An xdist
    worker has no terminal of its own: there the line goes to its stderr, which the worker's controller shows."""
    import contextlib
    import sys

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")
    with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
        if reporter is None or getattr(config, "workerinput", None) is not None:
            print(line, file=sys.stderr, flush=True)
        else:
            reporter.ensure_newline()
            reporter.write_line(line)
