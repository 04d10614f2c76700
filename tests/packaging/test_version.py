"""`dflash-console --version` reports the installed package's metadata, so a wheel built at any version says so."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _version(cwd: Path, pythonpath: list[Path]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": ":".join(map(str, pythonpath))}
    return subprocess.run(
        [sys.executable, "-m", "console", "--version"], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_version_is_the_projects(tmp_path: Path) -> None:
    want = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    p = _version(tmp_path, [ROOT])
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"dflash-console {want}\n"


def test_version_comes_from_the_installed_metadata(tmp_path: Path) -> None:
    """A distribution's metadata found first on the path decides the version (as an installed wheel's does)."""
    dist = tmp_path / "site" / "dflash_console-9.8.7.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dflash-console\nVersion: 9.8.7\n")
    p = _version(tmp_path, [tmp_path / "site", ROOT])
    assert p.returncode == 0, p.stderr
    assert p.stdout == "dflash-console 9.8.7\n"


def test_the_version_is_not_looked_up_by_other_commands(tmp_path: Path) -> None:
    """importlib.metadata costs tens of ms to import and scan: only `--version` (and a launch's record) pay it."""
    probe = (
        "import contextlib, io, sys\n"
        "from console.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('importlib.metadata' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "False\n"
