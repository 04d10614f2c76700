"""`--help`, `diagnose` and `check` start without asyncssh, httpx or Textual (0.3-1.5 s of imports on a busy core)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.samples import SAMPLES

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("asyncssh", "httpx", "textual")

PROBE = """
import contextlib, io, json, sys
from console.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        rc = main(sys.argv[1:])
    except SystemExit as e:
        rc = e.code
print(json.dumps({"rc": rc, "out": out.getvalue(), "loaded": sorted(m for m in HEAVY if m in sys.modules)}))
""".replace("HEAVY", repr(HEAVY))


def _run(argv: list[str], cwd: Path) -> dict:
    """The CLI in a fresh interpreter; which heavy packages were imported by the time it returned."""
    p = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd)},
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]) | {"err": p.stderr}


HOSTS = """
[hosts.gpu1]
address = "10.0.0.5"

[presets.small]
host = "gpu1"
gpus = [0]
model = "/models/Qwen3-0.6B"
args = ["--mem-fraction-static", "0.8"]
"""


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["status", "--help"], ["diagnose", "LOG"], ["check"]],
    ids=["help", "status-help", "diagnose", "check"],
)
def test_light_commands_never_import_the_network_or_ui_stack(tmp_path: Path, argv: list[str]) -> None:
    (tmp_path / "hosts.toml").write_text(HOSTS)
    log = next(iter(sorted((SAMPLES / "sglang-logs").glob("*.log"))))
    argv = [str(log) if a == "LOG" else a for a in argv]
    r = _run(argv, tmp_path)
    assert r["loaded"] == [], f"{argv} imported {r['loaded']}"
    # the commands really ran: help lists every command, diagnose named a phase, check printed the plan
    if argv[0] == "--help":
        assert all(c in r["out"] for c in ("status", "launch", "diagnose", "check", "bench", "sim"))
    elif argv[0] == "diagnose":
        assert f"{log}: " in r["out"] and r["rc"] in (0, 1)
    elif argv[0] == "check":
        assert "small@gpu1:gpu0" in r["out"] and "--model-path /models/Qwen3-0.6B" in r["out"], r["out"]


def test_a_config_error_is_still_reported_without_a_traceback(tmp_path: Path) -> None:
    """cli.py no longer imports ConfigError up front; a bad hosts.toml must still exit 2 with FILE:LINE:COL."""
    (tmp_path / "hosts.toml").write_text(HOSTS.replace("gpus = [0]", "gpus = [0]\nprot = 1"))
    r = _run(["check"], tmp_path)
    assert r["rc"] == 2
    assert "hosts.toml:" in r["err"] and "prot" in r["err"] and "Traceback" not in r["err"], r["err"]
