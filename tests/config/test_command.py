"""Preset -> replicas -> shell command: naming, ports, log paths, and quoting that survives a real shell."""

from __future__ import annotations

import subprocess
from pathlib import Path

from console.config import parse_fleet
from console.masking import mask
from console.sglang.command import gpu_label, plan_launch, replica_name

FLEET = """
[hosts.b]
address = "10.0.0.2"
python = "/venv/bin/python3"
log_dir = "/logs"
env = { LD_LIBRARY_PATH = "/usr/local/cuda/lib64" }

[presets.gen]
host = "b"
gpus = [0, 1, 2, 3]
tp = 1
model = "/models/Qwen3.6-27B"
port = 30000
args = ["--context-length", "8192"]

[presets.tp2]
host = "b"
gpus = [2, 3]
model = "/m"
log = "{log_dir}/sglang_gpu{gpus}.log"
"""


def test_replicas_expand_per_gpu() -> None:
    fleet = parse_fleet(FLEET)
    plans = plan_launch(fleet, "gen", "20261201-120000")
    assert [p.replica.name for p in plans] == [f"gen@b:gpu{i}" for i in range(4)]
    assert [p.replica.port for p in plans] == [30000, 30001, 30002, 30003]
    assert plans[2].env["CUDA_VISIBLE_DEVICES"] == "2"
    assert plans[2].env["LD_LIBRARY_PATH"] == "/usr/local/cuda/lib64"
    assert plans[2].argv[:3] == ["/venv/bin/python3", "-m", "sglang.launch_server"]
    assert "--tp-size" in plans[2].argv and plans[2].argv[plans[2].argv.index("--tp-size") + 1] == "1"
    assert plans[0].log_path == "/logs/gen_gpu0_20261201-120000.log"


def test_tp_group_and_stamp_inserted() -> None:
    fleet = parse_fleet(FLEET)
    (plan,) = plan_launch(fleet, "tp2", "S1")
    assert plan.replica.name == "tp2@b:gpu2-3"
    assert plan.replica.tp == 2
    assert plan.log_path == "/logs/sglang_gpu2-3.S1.log"  # a relaunch never reuses the old file


def test_labels() -> None:
    assert gpu_label([0, 1, 2]) == "0-2"
    assert gpu_label([0, 2]) == "0_2"
    assert replica_name("p", "h", (5,)) == "p@h:gpu5"


def test_hostile_values_reach_argv_literally(tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    evil = f"/m/$(touch {canary})/`touch {canary}`;touch {canary} && echo 'q\"uote'\nnew *"
    fleet = parse_fleet(
        FLEET.replace('model = "/m"', "model = " + _toml_str(evil)).replace(
            '"/venv/bin/python3"', _toml_str(str(tmp_path / "py"))
        )
    )
    (plan,) = plan_launch(fleet, "tp2", "S")
    # A stand-in python that records its argv, one per line, NUL-separated.
    py = tmp_path / "py"
    out = tmp_path / "argv"
    py.write_text(f'#!/bin/sh\nfor a in "$@"; do printf \'%s\\0\' "$a"; done > {out}\n')
    py.chmod(0o755)
    cmd = plan.command.replace(" /logs", f" {tmp_path}/logs")
    subprocess.run(["/bin/sh", "-c", cmd], check=True, timeout=10)
    for _ in range(100):
        if out.exists() and out.stat().st_size:
            break
        import time

        time.sleep(0.05)
    args = out.read_bytes().split(b"\0")
    assert evil.encode() in args
    assert not canary.exists()


def _toml_str(s: str) -> str:
    import json

    return json.dumps(s)


def test_printed_command_names_the_api_key_env_key_it_leaves_out() -> None:
    """The comment ending the printed command names what travels in 0600 files; a preset whose key comes from
    `api_key_env` got `--api-key` too but the comment left it out (or was missing altogether)."""
    fleet = parse_fleet(
        FLEET + '\n[presets.keyed]\nhost = "b"\ngpus = [0]\nmodel = "/m"\napi_key_env = "MY_KEY"\n'
        '[presets.both]\nhost = "b"\ngpus = [1]\nmodel = "/m"\napi_key_env = "MY_KEY"\n'
        'args = ["--api-key", "sk-in-args-123456"]\nenv = { HF_TOKEN = "hf_abcdefgh" }\n'
    )
    (keyed,) = plan_launch(fleet, "keyed", "S")
    assert keyed.command.endswith("& echo $!  # secrets passed in 0600 files, never on argv: $MY_KEY as --api-key")
    assert mask(keyed.command) == keyed.command  # shown as is: it names the variable, not the key
    (both,) = plan_launch(fleet, "both", "S")
    assert both.command.endswith("never on argv: --api-key, HF_TOKEN") and "sk-in-args" not in both.command
    (plain,) = plan_launch(fleet, "tp2", "S")
    assert plain.command.endswith("& echo $!")
