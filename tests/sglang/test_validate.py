"""Remote validation: the real validator script against a stand-in `sglang` package, locally and via check --remote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.config import parse_fleet
from console.sglang.validate import findings_from_result, validation_commands

FAKE_SERVER_ARGS = """
import argparse, logging, os
logging.basicConfig(format="[%(asctime)s] %(message)s")
def prepare_server_args(argv):
    ap = argparse.ArgumentParser(prog="sglang serve")
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--host"); ap.add_argument("--port", type=int); ap.add_argument("--tp-size", type=int)
    ap.add_argument("--speculative-algorithm", choices=["DFLASH", "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"])
    ap.add_argument("--speculative-num-steps", type=int); ap.add_argument("--speculative-eagle-topk", type=int)
    ap.add_argument("--speculative-num-draft-tokens", type=int)
    a = ap.parse_args(argv)
    if a.speculative_algorithm and a.speculative_num_steps is None:
        assert a.speculative_eagle_topk is None and a.speculative_num_draft_tokens is None
    if a.speculative_eagle_topk == 1 and a.speculative_num_draft_tokens not in (None, (a.speculative_num_steps or 0) + 1):
        logging.warning("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1")
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "7":
        raise RuntimeError("No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) is available.")
    return a
"""


@pytest.fixture(scope="module")
def fake_sglang(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fake_sglang")
    pkg = root / "sglang" / "srt"
    pkg.mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text('__version__ = "0.5.11"\n')
    (pkg / "__init__.py").write_text("")
    (pkg / "server_args.py").write_text(FAKE_SERVER_ARGS)
    return root


def fleet_toml(root: Path, args: list[str], gpus: str = "[0]") -> str:
    arg_s = ", ".join(f'"{a}"' for a in args)
    return f"""
[hosts.local]
transport = "local"
python = "{sys.executable}"
env = {{ PYTHONPATH = "{root}" }}

[presets.p]
host = "local"
gpus = {gpus}
model = "/models/it's $(here)"
args = [{arg_s}]
"""


def run_validator(root: Path, args: list[str], gpus: str = "[0]") -> tuple[int, str, str]:
    fleet = parse_fleet(fleet_toml(root, args, gpus))
    (cmd,) = validation_commands(fleet, "p")
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"]})
    return r.returncode, r.stdout, r.stderr


def test_accepted_args(fake_sglang: Path) -> None:
    rc, out, err = run_validator(fake_sglang, ["--speculative-algorithm", "EAGLE"])
    assert rc == 0 and findings_from_result("p", rc, out, err) == []


def test_argparse_error_is_sglangs_exact_text(fake_sglang: Path) -> None:
    rc, out, err = run_validator(fake_sglang, ["--speculative-algorithm", "EAGLE4"])
    assert rc == 2
    (f,) = findings_from_result("p", rc, out, err)
    assert f.severity == "error" and "argument --speculative-algorithm: invalid choice: 'EAGLE4'" in f.message


def test_bare_assertion_names_the_line(fake_sglang: Path) -> None:
    rc, out, err = run_validator(fake_sglang, ["--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "1"])
    (f,) = findings_from_result("p", rc, out, err)
    assert rc == 1 and "AssertionError (no message)" in f.message and "speculative_eagle_topk is None" in f.message
    assert "--speculative-num-steps" in f.fix


def test_adjustment_warning_and_env(fake_sglang: Path) -> None:
    rc, out, err = run_validator(
        fake_sglang,
        [
            "--speculative-algorithm",
            "EAGLE",
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            "8",
        ],
    )
    fs = findings_from_result("p", rc, out, err)
    assert rc == 0 and [f.severity for f in fs] == ["warning"] and "adjusted" in fs[0].message
    rc, out, err = run_validator(fake_sglang, [], gpus="[7]")
    (f,) = findings_from_result("p", rc, out, err)
    assert "No accelerator" in f.message and "CUDA_VISIBLE_DEVICES" in f.fix


def test_missing_python_and_missing_sglang() -> None:
    (f,) = findings_from_result("p", 127, "", "sh: 1: /nope/python: not found")
    assert "could not be run" in f.message
    out = 'DFLASH_VALIDATE_RESULT {"ok": false, "kind": "ModuleNotFoundError", "message": "No module named \'sglang\'"}'
    (g,) = findings_from_result("p", 1, out, "")
    assert "not installed" in g.message


def test_check_remote_over_local_transport(fake_sglang: Path) -> None:
    from console.commands.check_remote import run_remote

    fleet = parse_fleet(fleet_toml(fake_sglang, ["--speculative-algorithm", "EAGLE4"]))
    fs = run_remote(fleet, ["p"])
    assert len(fs) == 1 and "invalid choice" in fs[0].message
