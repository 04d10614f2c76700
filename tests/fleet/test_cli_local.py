"""Every CLI command as a real process on a local-transport sim host: exit codes, and stderr free of
`Exception ignored` / tracebacks (CI runs this file on Python 3.11, 3.12 and 3.13)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from console.sim.fleet import build_host, sim_down
from console.sim.spec import PRESET_SPECS

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_every_command_on_a_local_host(sim_root: Path, tmp_path: Path):
    d = sim_root / "sim-box"
    build_host(d, PRESET_SPECS["blackwell"].with_(name="box"))
    port = _free_port()
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(
        f'[console]\npoll_ms = 500\n[hosts.box]\ntransport = "local"\npython = "{d}/venv/bin/python3"\n'
        f'run_dir = "{d}/run"\nlog_dir = "{d}/logs"\nenv = {{ PATH = "{d}/bin:/usr/local/bin:/usr/bin:/bin" }}\n'
        f'[presets.gen]\nhost = "box"\ngpus = [1]\nmodel = "{d}/models/Qwen3-0.6B"\nport = {port}\n'
        'args = ["--mem-fraction-static", "0.5"]\nready_timeout = 60\n'
    )
    env = {**os.environ, "PYTHONWARNINGS": "always::ResourceWarning"}
    name = "gen@box:gpu1"

    def run(*args: str, rc: int = 0) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            [sys.executable, "-m", "console", *args, "--hosts", str(hosts)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=env,
        )
        assert r.returncode == rc, (args, r.returncode, r.stdout, r.stderr)
        for bad in ("Exception ignored", "Traceback", "unclosed transport", "Event loop is closed"):
            assert bad not in r.stderr, (args, r.stderr)
        return r

    def phases(out: str) -> set[str]:
        """The phases of the progress lines printed while --wait waited."""
        return {ln.split()[1] for ln in out.splitlines() if ln.startswith(f"{name}  ") and ln.endswith(" s)")}

    try:
        run("check")
        r = run("launch", "gen", "--wait")
        assert len(phases(r.stdout)) >= 2 and f"{name} is ready" in r.stdout, r.stdout
        doc = json.loads(run("status", "--json").stdout)
        mine = [s for s in doc["servers"] if s["managed"]]  # other sim servers on this machine are external here
        assert [s["phase"] for s in mine] in (["ready"], ["serving"]), mine
        assert len(run("logs", name, "-n", "3").stdout.splitlines()) == 3
        run("probe", name, "--max-tokens", "4")
        run(
            "bench",
            name,
            "--concurrency",
            "1",
            "--input-len",
            "8",
            "--output-len",
            "4",
            "--num-prompts",
            "2",
            "--no-save",
        )
        r = run("restart", name, "--wait")
        assert len(phases(r.stdout)) >= 2 and f"{name} is ready" in r.stdout, r.stdout
        doc = json.loads(run("status", "--json").stdout)
        mine = [s for s in doc["servers"] if s["managed"]]
        r = run("stop", "gne@box:gpu1", rc=2)
        assert f"did you mean '{name}'?" in r.stderr, r.stderr
        run("stop", name)
        assert "already stopped" in run("stop", name).stdout
        log = mine[0]["log_path"]
        run("diagnose", log)

        journal = run("journal", "-n", "0").stdout
        assert "── launch gen" in journal and "── stop gen@box:gpu1" in journal, journal
        assert "def procs_mode" not in journal and "import os" not in journal  # the agent's source is a digest
        polling = run("journal", "-n", "0", "--kind", "polling").stdout
        assert "<script " in polling and "sha256 " in polling and "── " not in polling, polling
        assert "nvidia-smi" not in journal.split("── launch gen")[0]  # status added no action records
        raw = [json.loads(x) for x in run("journal", "-n", "0", "--json", "--kind", "all").stdout.splitlines()]
        assert all(len(r.get("command", "")) < 4000 for r in raw)
        assert {r["op_name"] for r in raw if r.get("op")} >= {"launch gen", f"stop {name}"}
        r = run("journal", "--host", "bxo", rc=2)
        assert "unknown host 'bxo'; did you mean 'box'?" in r.stderr, r.stderr
    finally:
        sim_down(sim_root)  # a failed step leaves no sim server behind
