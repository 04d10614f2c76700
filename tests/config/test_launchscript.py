"""The launch script run by a real /bin/sh: secrets only on stdin and in 0600 files, the server only after meta.json."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path

from console.config import parse_fleet
from console.sglang import launchscript
from console.sglang.command import plan_launch
from console.sglang.validate import validation_command

KEY, ADMIN, HF, PW = "sk-unit-Key4Qz8", "sk-unit-Admin7Lp", "hf_unitTok9Rw", "pw-unit-3Mx"


def _plan(tmp_path: Path):  # type: ignore[no-untyped-def]
    py = tmp_path / "py"
    record = tmp_path / "argv"
    # a stand-in python recording its argv and environment, NUL-separated
    py.write_text(
        f'#!/bin/sh\nfor a in "$@"; do printf \'%s\\0\' "$a"; done > {record}.tmp\n'
        f"env > {tmp_path}/env\nmv {record}.tmp {record}\n"
    )
    py.chmod(0o755)
    fleet = parse_fleet(
        f'[hosts.h]\ntransport = "local"\nrun_dir = "{tmp_path}/run"\nlog_dir = "{tmp_path}/logs"\n'
        f'[presets.p]\nhost = "h"\ngpus = [0]\nmodel = "/m"\npython = "{py}"\n'
        f'args = ["--api-key", "{KEY}", "--admin-api-key={ADMIN}", "--enable-metrics"]\n'
        f'env = {{ HF_TOKEN = "{HF}", DB_PASSWORD = "{PW}", PLAIN = "visible" }}\n'
    )
    (plan,) = plan_launch(fleet, "p", "S")
    return plan, record


def test_secrets_leave_every_command_text(tmp_path: Path) -> None:
    plan, _ = _plan(tmp_path)
    texts = {
        "printed": plan.command,
        "validator": validation_command(plan),
        "script": launchscript.launch_script(plan, f"{tmp_path}/run/servers/p", f"{tmp_path}/lock", "tok", "id"),
    }
    for where, text in texts.items():
        assert not [s for s in (KEY, ADMIN, HF, PW) if s in text], where
    assert "PLAIN=visible" in plan.command and "--enable-metrics" in plan.command
    assert "--api-key, --admin-api-key, HF_TOKEN, DB_PASSWORD" in plan.command  # says what it left out
    data = launchscript.launch_input('"name": "p"}', plan.secret_args, plan.secret_env)
    assert all(s in data for s in (KEY, ADMIN, HF, PW)) and data.endswith(launchscript.END_MARK + "\n")


def _run(plan, d: Path, lock: Path, stdin: str, launch_id: str = "L1") -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    script = launchscript.launch_script(plan, str(d), str(lock), "tok", launch_id, gate_tries=30)
    return subprocess.run(["/bin/sh", "-c", script], input=stdin, capture_output=True, text=True, timeout=20)


def _body(launch_id: str = "L1") -> str:
    return launchscript.meta_body(json.dumps({"name": "p", "pid": None, "sid": None, "launch_id": launch_id}))


def test_gate_starts_the_server_after_meta_json_with_secrets_from_files(tmp_path: Path) -> None:
    plan, record = _plan(tmp_path)
    d, lock = tmp_path / "run/servers/p", tmp_path / "lock"
    lock.write_text("tok 1\n")
    r = _run(plan, d, lock, launchscript.launch_input(_body(), plan.secret_args, plan.secret_env))
    assert r.returncode == 0, r.stderr
    pid = int(r.stdout.split()[0])
    meta = json.loads((d / "meta.json").read_text())
    assert (meta["pid"], meta["sid"], meta["launch_id"]) == (pid, pid, "L1")
    for _ in range(200):
        if record.exists():
            break
        time.sleep(0.05)
    argv = record.read_bytes().split(b"\0")[:-1]
    env = dict(ln.split("=", 1) for ln in (tmp_path / "env").read_text().splitlines() if "=" in ln)
    assert argv[-2:] == [b"--config", str(d / "secrets.yaml").encode()]
    assert not [s for s in (KEY, ADMIN, HF, PW) if s.encode() in b" ".join(argv)]
    assert json.loads((d / "secrets.yaml").read_text()) == {"api-key": KEY, "admin-api-key": ADMIN}
    assert (env["HF_TOKEN"], env["DB_PASSWORD"], env["PLAIN"]) == (HF, PW, "visible")
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700 and stat.S_IMODE(os.stat(d / "secrets.yaml").st_mode) == 0o600
    assert not list(d.glob(launchscript.SECRET_ENV_FILE + "*"))  # sourced, then removed


def test_truncated_input_or_foreign_lock_starts_nothing(tmp_path: Path) -> None:
    plan, record = _plan(tmp_path)
    d, lock = tmp_path / "run/servers/p", tmp_path / "lock"
    lock.write_text("tok 1\n")
    full = launchscript.launch_input(_body(), plan.secret_args, plan.secret_env)
    cut = _run(plan, d, lock, full[: len(full) - 8])
    assert cut.returncode == 65 and "truncated" in cut.stderr
    lock.write_text("other 2\n")
    foreign = _run(plan, d, lock, full)
    assert foreign.returncode == 75 and "lock" in foreign.stderr
    assert not (d / "meta.json").exists() and not record.exists()
    assert not list(d.glob(launchscript.SECRET_ENV_FILE + "*"))


def test_gate_refuses_a_meta_json_of_another_launch(tmp_path: Path) -> None:
    """The gate alone (as if the launching shell died after the fork): no matching meta.json, no server."""
    plan, record = _plan(tmp_path)
    d = tmp_path / "run/servers/p"
    d.mkdir(parents=True)
    (d / "meta.json").write_text('{"pid": 1, "sid": 1, "launch_id": "someone-else"}\n')
    gate = ["sh", "-c", launchscript.GATE, launchscript.GATE_NAME, str(d), "L9", "5", plan.python, "-m", "x"]
    (d / f"{launchscript.SECRET_ENV_FILE}.L9").write_text("export HF_TOKEN=x\n")
    r = subprocess.run(gate, capture_output=True, text=True, timeout=20)
    assert r.returncode == 97 and "was not started" in r.stderr
    assert not record.exists()
    assert not list(d.glob(launchscript.SECRET_ENV_FILE + "*"))  # its secrets file does not linger
