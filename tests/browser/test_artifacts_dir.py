"""The screenshots' folder is announced where the person running the tests sees it (README: `browser screenshots: …`).

It was written with `terminalreporter.write_line` from inside the session fixture, which runs under pytest's fd
capture of the first test that asks for it: the line was swallowed, in `-q` and in verbose runs alike."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_artifacts_folder_exists(artifacts: Path) -> None:
    assert artifacts.is_dir()


def test_the_artifacts_folder_is_printed(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["DFC_TEST_ARTIFACTS"] = str(tmp_path)
    for extra in ([], ["-p", "xdist", "-n", "1"]):
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra,
                            f"{Path(__file__).relative_to(REPO)}::test_the_artifacts_folder_exists"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        out = r.stdout + r.stderr
        assert r.returncode == 0, out
        assert f"browser screenshots: {tmp_path / 'browser'}" in out, (extra, out)
