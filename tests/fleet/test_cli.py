"""The CLI end to end against a sim host behind sshd: launch, status --json, probe, logs, stop, journal, exit codes."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fleet.conftest import preset_toml

ROOT = Path(__file__).resolve().parents[2]


def cli(hosts: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`dflash-console --hosts H ARGS` in-process (each call its own asyncio.run, as from a shell)."""
    from console.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["--hosts", str(hosts), *args])
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return subprocess.CompletedProcess(["dflash-console", *args], rc, out.getvalue(), err.getvalue())


def test_cli_is_a_real_program(tmp_path: Path):
    r = subprocess.run(
        [sys.executable, "-m", "console", "--hosts", str(tmp_path / "none.toml"), "status"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert r.returncode == 2 and "none.toml" in r.stderr


def test_cli_launch_status_probe_logs_stop_journal(sim_ssh, tmp_path: Path):
    h = sim_ssh("clihost")
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(
        "[console]\npoll_ms = 500\n"
        + h.section()
        + preset_toml("small", h, [2], 30030, args=["--api-key", "sk-cli-secret-1"], api_key_env="DFC_TEST_KEY")
        + preset_toml("clash", h, [2], 30031)
    )
    r = cli(hosts, "launch", "small", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "setsid nohup" in r.stdout and "sk-cli-secret-1" not in r.stdout
    r = cli(hosts, "launch", "small", "--wait")
    assert r.returncode == 0, r.stdout + r.stderr
    name = "small@clihost:gpu2"
    assert f"{name} is ready" in r.stdout
    r = cli(hosts, "launch", "clash")
    assert r.returncode == 1 and f"GPU 2 is used by {name} (pid" in r.stderr and "preset small)" in r.stderr, r.stderr
    r = cli(hosts, "status", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "dflash-console/status/1"
    (host,) = doc["hosts"]
    assert host["name"] == "clihost" and host["state"] == "up" and host["age_s"] is not None
    g2 = next(g for g in host["gpus"] if g["index"] == 2)
    assert g2["server"] == name and g2["memory_used_mib"] > 0 and g2["memory_total_mib"] > 0
    (srv,) = doc["servers"]
    assert (srv["name"], srv["preset"], srv["host"], srv["gpus"], srv["port"]) == (name, "small", "clihost", [2], 30030)
    assert srv["phase"] in ("ready", "serving") and "gen_throughput" in srv and srv["cause"] is None
    r = cli(hosts, "status")  # text: the TUI's units and words
    assert r.returncode == 0, r.stderr
    gpu2 = next(ln for ln in r.stdout.splitlines() if ln.startswith("  GPU 2 "))
    assert "RTX PRO 6000 Blackwell SE " in gpu2 and "GiB" in gpu2 and "MiB" not in r.stdout, r.stdout
    assert f"/{g2['memory_total_mib'] / 1024:.1f} GiB" in gpu2, gpu2
    r = cli(hosts, "probe", name, "--prompt", "hi", env={"DFC_TEST_KEY": "sk-cli-secret-1"})
    assert r.returncode == 0 and "health   ready" in r.stdout and "TTFT" in r.stdout, r.stdout + r.stderr
    assert "answer   " in r.stdout and "sk-cli-secret-1" not in r.stdout
    r = cli(hosts, "logs", name, "-n", "5")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 5, r.stderr
    r = cli(hosts, "stop", name)
    assert r.returncode == 0 and "GPUs released" in r.stdout, r.stdout + r.stderr
    r = cli(hosts, "journal", "-n", "0")
    assert r.returncode == 0 and "setsid nohup" in r.stdout and "kill -TERM" in r.stdout
    assert "sk-cli-secret-1" not in r.stdout
    journal = (Path(os.environ["DFLASH_STATE_DIR"]) / "journal.jsonl").read_text()
    assert "sk-cli-secret-1" not in journal


def test_cli_unreachable_host_exit_3(ssh_host_factory, tmp_path: Path):
    bad = ssh_host_factory("gone", kind="refusing")
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(bad.hosts_toml_section("gone") + '[presets.p]\nhost = "gone"\ngpus = [0]\nmodel = "/m"\n')
    r = cli(hosts, "launch", "p")
    assert r.returncode == 3 and "gone" in r.stderr, r.stderr
    r = cli(hosts, "launch", "nope")
    assert r.returncode == 2


LOCAL_FLEET = """[hosts.box]
transport = "local"
[presets.one]
host = "box"
gpus = [0]
model = "/models/m"
port = 31999
"""


def test_global_options_before_or_after_the_command(tmp_path: Path):
    from console.cli import build_parser, main

    hosts = tmp_path / "fleet.toml"
    hosts.write_text(LOCAL_FLEET)
    after = build_parser().parse_args(["status", "--hosts", "a.toml", "--read-only"])
    assert (after.hosts, after.read_only) == ("a.toml", True)
    before = build_parser().parse_args(["--hosts", "b.toml", "--read-only", "--theme", "u", "status"])
    assert (before.hosts, before.read_only, before.theme) == ("b.toml", True, "u")
    assert build_parser().parse_args(["serve", "--theme", "t"]).theme == "t"
    assert build_parser().parse_args(["sim", "up", "--dir", "d", "--hosts", "ct129"]).sim_hosts == "ct129"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["check", "--hosts", str(hosts)])
    assert rc == 0 and out.getvalue().startswith(f"{hosts}: 1 hosts, 1 presets"), out.getvalue()


def test_closed_stdout_is_no_traceback_for_any_command(tmp_path: Path):
    """`check | head -2`: the reader is gone before the command writes (its pipe end closed at once)."""
    from tests.samples import SAMPLES

    hosts = tmp_path / "fleet.toml"
    hosts.write_text(LOCAL_FLEET)
    log = next((SAMPLES / "sglang-logs").rglob("*.log"))
    env = {**os.environ, "DFLASH_STATE_DIR": str(tmp_path / "state")}
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "journal.jsonl").write_text('{"t": 1, "kind": "event", "action": "launch"}\n' * 50)
    for args in (["check"], ["journal"], ["diagnose", str(log)], ["check", "--help"]):
        p = subprocess.Popen(
            [sys.executable, "-m", "console", *args, "--hosts", str(hosts)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert p.stdout is not None
        p.stdout.close()
        _, err = p.communicate(timeout=60)
        assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err, (args, err)
        assert p.returncode == (0 if "--help" in args else 141), (args, p.returncode, err)
