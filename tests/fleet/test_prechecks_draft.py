"""The launch pre-check of a speculative draft model: its path checked on the host like the model's, by the real
facts command run through /bin/sh against a sim host."""

from __future__ import annotations

import subprocess
from pathlib import Path

from console.config import load_fleet
from console.fleet.prechecks import draft_model_path, facts_command, parse_facts
from console.sim.fleet import sim_down, sim_up


def _facts(hosts: Path, preset: str, args: list[str]):
    fleet = load_fleet(hosts)
    p = fleet.presets[preset]
    host = fleet.hosts[p.host]
    cmd = facts_command(host, p.model, None, draft_model_path(args))
    out = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, timeout=30, env=dict(host.env))
    return parse_facts(out.stdout, p.host)


def test_draft_path_present_missing_and_absent(tmp_path: Path) -> None:
    hosts = sim_up(tmp_path / "f", hosts=["blackwell"], time_scale=0.02)
    try:
        args = list(load_fleet(hosts).presets["qwen36-dflash"].args)
        assert draft_model_path(args) is not None and draft_model_path(args).endswith("Qwen3.6-27B-DFlash-b16")  # type: ignore[union-attr]
        assert _facts(hosts, "qwen36-dflash", args).draft_present is True
        i = args.index("--speculative-draft-model-path")
        missing = [*args[: i + 1], str(tmp_path / "no such drafter"), *args[i + 2 :]]
        f = _facts(hosts, "qwen36-dflash", missing)
        assert f.draft_present is False and f.model_present is True
        plain = list(load_fleet(hosts).presets["qwen36-bench"].args)
        assert draft_model_path(plain) is None and _facts(hosts, "qwen36-bench", plain).draft_present is None
    finally:
        sim_down(tmp_path / "f", timeout=3)
