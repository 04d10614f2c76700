"""Hosts the console does not know stay out: unknown and changed keys are refused with the fingerprint at the
fleet level (no command runs), `dflash-console trust` is the only way in, and no code path turns checking off."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path

from console.fleet.journal import read_journal
from tests.faults import results
from tests.faults.simfleet import REPO, build_sim_fleet, controller, wait_for
from tests.fixtures.sshhosts import SshTestHost

DISABLING = [
    r"known_hosts\s*=\s*None",
    r"StrictHostKeyChecking\s*=?\s*no",
    r"UserKnownHostsFile\s*=?\s*/dev/null",
    r"known_hosts\s*:\s*None\s*=",
    r"\"known_hosts\"\s*:\s*None",
    r"accept_unknown|AcceptAnyHostKey",
    r"validate_host_public_key\s*=\s*lambda",
]


def fingerprint(h: SshTestHost) -> str:
    out = subprocess.run(["ssh-keygen", "-lf", f"{h.host_key}.pub"], capture_output=True, text=True, check=True)
    return out.stdout.split()[1]


def _cli(hosts: Path, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", "--hosts", str(hosts), *argv],
        cwd=REPO,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _commands_for(journal: Path, host: str, after: float = 0.0) -> list[str]:
    """Commands that completed on `host` (exit status 0) after wall time `after`."""
    return [
        r.get("command", "")
        for r in read_journal(journal)
        if r.get("kind") == "command" and r.get("host") == host and r.get("exit_status") == 0 and r.get("t", 0) > after
    ]


async def test_unknown_then_trusted_then_changed_key(ssh_host_factory, sim_root: Path, tmp_path: Path) -> None:
    t0 = time.monotonic()
    sf = build_sim_fleet(ssh_host_factory, sim_root, ["keyed"])
    h = sf.hosts["keyed"]
    h.ssh.known_hosts.write_text("")  # nobody has trusted it yet
    hosts = sf.toml()
    journal = tmp_path / "journal.jsonl"
    checks: dict[str, bool] = {}
    fp = fingerprint(h.ssh)
    async with controller(sf.fleet(), journal) as ctl:
        hs = ctl.state.hosts["keyed"]
        await wait_for(lambda: hs.conn == "down", 10, "unknown key refused")
        await asyncio.sleep(1.0)
        checks["unknown key: refused, fingerprint shown"] = hs.conn != "up" and fp in (hs.last_error or "")
        checks["unknown key: no command ran"] = not _commands_for(journal, "keyed")
    declined = _cli(hosts, "trust", "keyed", stdin="n\n")
    checks["trust declined: nothing written"] = declined.returncode == 1 and fp in declined.stdout
    async with controller(sf.fleet(), journal) as ctl:
        await asyncio.sleep(1.0)
        checks["still refused after declining"] = ctl.state.hosts["keyed"].conn != "up"
    trusted = _cli(hosts, "trust", "keyed", "--yes")
    checks["trust --yes: trusted"] = trusted.returncode == 0 and fp in trusted.stdout
    async with controller(sf.fleet(), journal) as ctl:
        hs = ctl.state.hosts["keyed"]
        await wait_for(lambda: hs.conn == "up", 10, "connect after trust")
        await wait_for(lambda: _commands_for(journal, "keyed"), 10, "commands on the trusted host")
        checks["after trust: up, commands run"] = True
        await asyncio.to_thread(h.ssh.rotate_host_key)  # drops the link; the new key is not trusted
        rotated = time.time() + 0.5
        new_fp = fingerprint(h.ssh)
        await wait_for(lambda: "CHANGED" in (hs.last_error or ""), 15, "changed key refused")
        await asyncio.sleep(1.0)
        checks["changed key: refused, new fingerprint shown"] = hs.conn != "up" and new_fp in (hs.last_error or "")
        checks["changed key: nothing ran on the impostor"] = not _commands_for(journal, "keyed", rotated)
    for i, (what, ok) in enumerate(checks.items()):
        results.record("hostile", f"ssh: {what}", 0, ok, time.monotonic() - t0 if i == 0 else 0.0)
    assert all(checks.values()), {k: v for k, v in checks.items() if not v}


def test_no_code_path_disables_host_key_checking() -> None:
    hits = []
    for base in ("console", "scripts", "benchmarks", ".ci"):
        for p in (REPO / base).rglob("*"):
            if p.is_file() and p.suffix in ("", ".py", ".sh", ".toml", ".cfg", ".txt") and "__pycache__" not in p.parts:
                text = p.read_text(errors="replace")
                hits += [f"{p.relative_to(REPO)}: {m.group(0)}" for pat in DISABLING for m in re.finditer(pat, text)]
    results.record("hostile", "ssh: no code path disables host-key checking (grep)", 0, not hits, 0.0, "; ".join(hits))
    assert not hits, hits


def test_the_grep_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The patterns above do match the ways of disabling checks (so the grep can fail)."""
    samples = [
        "asyncssh.connect(h, known_hosts=None)",
        "known_hosts = None",
        "-o StrictHostKeyChecking=no",
        "UserKnownHostsFile=/dev/null",
        '{"known_hosts": None}',
    ]
    for s in samples:
        assert any(re.search(p, s) for p in DISABLING), s
