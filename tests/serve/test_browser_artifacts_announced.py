"""The browser tests' screenshots folder is announced where the person running the tests sees it (README:
`browser screenshots: …`). It was written with `terminalreporter.write_line` from inside the `artifacts` session
fixture (tests/browser/conftest.py), which runs under pytest's fd capture of the first test that asks for it: the
line was swallowed, in `-q` and in verbose runs alike. Here a pytest subprocess runs one test that asks for it,
in one process and on an xdist worker. (Kept out of tests/browser: those are the browser tests the README counts.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_screenshots_folder_is_printed(tmp_path: Path) -> None:
    probe = tmp_path / "probe" / "test_probe.py"
    probe.parent.mkdir()
    probe.write_text("def test_it(artifacts):\n    assert artifacts.is_dir()\n")
    out_dir = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["DFC_TEST_ARTIFACTS"] = str(out_dir)
    for extra in ([], ["-p", "xdist", "-n", "1"]):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "tests.browser.conftest",
                "--rootdir",
                str(probe.parent),
                *extra,
                str(probe),
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        out = r.stdout + r.stderr
        assert r.returncode == 0, out
        assert f"browser screenshots: {out_dir / 'browser'}" in out, (extra, out)
