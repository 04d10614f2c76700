"""End to end over sshd: a server's log carries every escape sequence and the secrets; the CLI's `logs`,
`status` (human and `--json`, a crash cause quoting the log) and `journal` print none of them raw."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.faults.simfleet import build_sim_fleet, preset_toml
from tests.hostile.test_output_paths import API_KEY, HF_TOKEN, check_path, cli, payload


def _append(log: Path, *lines: str) -> None:
    with open(log, "a", encoding="utf-8") as f:
        f.write("".join(ln + "\n" for ln in lines))


def test_cli_logs_status_journal_over_sshd(ssh_host_factory, sim_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t0 = time.monotonic()
    monkeypatch.setenv("DFC_RT_KEY", API_KEY)
    sf = build_sim_fleet(ssh_host_factory, sim_root, ["rt"])
    h = sf.hosts["rt"]
    hosts = sf.toml(
        preset_toml(
            "keyed",
            h,
            port=30710,
            args=f'["--api-key", "{API_KEY}"]',
            env=f'{{ HF_TOKEN = "{HF_TOKEN}" }}',
            extra='api_key_env = "DFC_RT_KEY"\n',
        )
    )
    name = "keyed@rt:gpu0"
    outs: dict[str, tuple[str, str]] = {}
    rc, out, err = cli("--hosts", str(hosts), "launch", "keyed", "--wait")
    assert rc == 0, out + err
    meta = json.loads(h.ssh.exec(f"cat {h.dir}/run/servers/*/meta.json").stdout)
    log = Path(meta["log_path"])
    assert API_KEY in log.read_text(), "the sim must echo the key (else the secrets are not checked)"
    _append(log, "[2026-12-01 14:00:01] " + payload("TAILED"))
    rc, out, err = cli("--hosts", str(hosts), "logs", name, "-n", "0")
    assert rc == 0, err
    outs["CLI logs (over sshd)"] = (out + err, "TAILED")
    _append(
        log,
        "[2026-12-01 14:00:02] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/opt/sglang/srt/managers/scheduler.py", line 1, in event_loop',
        "RuntimeError: " + payload("CAUSED"),
    )
    h.crash(30710, kind="sigkill")
    deadline = time.monotonic() + 30
    while True:
        rc, out, err = cli("--hosts", str(hosts), "status", "--wait", "8")
        if "crashed" in out or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    outs["CLI status (crash cause from the log)"] = (out + err, "CAUSED")
    rc, out, err = cli("--hosts", str(hosts), "status", "--json", "--wait", "8")
    outs["CLI status --json"] = (out + err, "CAUSED")
    json.loads(out)  # still a document after sanitising and masking
    rc, out, err = cli("journal", "-n", "0", "--kind", "all")
    outs["CLI journal (after the launch)"] = (out + err, "setsid")
    failed = {}
    for where, (text, tag) in outs.items():
        probs = check_path(
            where,
            text,
            tag,
            t0,
            escapes=where != "CLI journal (after the launch)",
            whole=where == "CLI logs (over sshd)",
        )  # a crash cause is one cut line
        if probs:
            failed[where] = probs
    assert not failed, failed
