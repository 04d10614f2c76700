"""Preset values full of shell syntax reach SGLang literally over real sshd: no canary file is ever created,
and the sim server's own argv, environment and log path hold exactly the configured strings."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from console.fleet import actions
from tests.faults import results
from tests.faults.simfleet import REPO, build_sim_fleet, controller

CANARY = "dfc-canary"


def payloads(canary_dir: Path) -> list[str]:
    c = f"{canary_dir}/{CANARY}"
    return [
        f"$(touch {c}-1)",
        f"`touch {c}-2`",
        f"; touch {c}-3",
        f"&& touch {c}-4",
        f"' ; touch {c}-5 ; '",
        f'" ; touch {c}-6 ; "',
        f"\ntouch {c}-7\n",
        "*",
        "?[a-z]*",
        f"$(touch${{IFS}}{c}-8)",
        f"| touch {c}-9",
        "$HOME ${PATH} ~root",
        '\\\\; \\"',
        f">{c}-10",
        f"<(touch {c}-11)",
    ]


def _toml(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string (escapes included)


def _canaries(*dirs: Path) -> list[str]:
    found = []
    for d in dirs:
        if d.exists():
            found += [str(p) for p in (d.glob(f"{CANARY}*") if d == Path("/tmp") else d.rglob(f"{CANARY}*"))]
    return found


async def test_hostile_preset_values_reach_sglang_literally(ssh_host_factory, sim_root: Path) -> None:
    t0 = time.monotonic()
    sf = build_sim_fleet(ssh_host_factory, sim_root, ["shell"])
    h = sf.hosts["shell"]
    p = payloads(sim_root)
    bad = f"$(touch {CANARY}-d1)`touch {CANARY}-d2`;touch {CANARY}-d3&&touch {CANARY}-d4'\"\n|touch {CANARY}-d5"
    # (a directory name: everything but '/'; a canary written relative lands in the remote shell's cwd)
    model_dir = h.dir / "models" / f"Qwen3-0.6B {bad} *"
    model_dir.symlink_to(h.dir / "models" / "Qwen3-0.6B")
    arg_value = "".join(p).replace(":", ";")  # sglang refuses ':' in --served-model-name
    env_value = "".join(p)
    log_tmpl = "{log_dir}/" + bad.replace("\n", "_") + "-{stamp}.log"
    preset = (
        f'[presets."evil $(touch {sim_root}/{CANARY}-name)"]\nhost = "shell"\ngpus = [0]\n'
        f"model = {_toml(str(model_dir))}\nport = 30600\nready_timeout = 30\n"
        f'args = ["--served-model-name", {_toml(arg_value)}]\n'
        f"env = {{ DFC_HOSTILE = {_toml(env_value)} }}\nlog = {_toml(log_tmpl)}\n"
    )
    fleet = sf.fleet(preset)
    name = next(iter(fleet.presets))
    async with controller(fleet) as ctl:
        assert await ctl.wait_hosts(15)
        out = await actions.launch(ctl, name, wait=True)
        assert out.ok, out.message
        s = ctl.state.servers[out.servers[0]]
        pid = s.meta.pid
        assert pid is not None
        argv = h.cmdline(pid)
        env = h.environ(pid)
        log_path = s.meta.log_path or ""
        stop = await actions.stop(ctl, s.name)
    checks = {
        "no canary file": not _canaries(sim_root, h.ssh.home, Path("/tmp")),
        "model path literal": argv[argv.index("--model-path") + 1] == str(model_dir),
        "arg literal": argv[argv.index("--served-model-name") + 1] == arg_value,
        "env value literal": env.get("DFC_HOSTILE") == env_value,
        "log path literal": Path(log_path).exists() and "$(touch" in log_path and "`touch" in log_path,
        "server_args dump holds the model path": repr(str(model_dir)) in Path(log_path).read_text(),
        "stopped cleanly": stop.ok,
    }
    dt = time.monotonic() - t0
    for i, (what, ok) in enumerate(checks.items()):
        results.record(
            "hostile",
            f"shell: preset {what}",
            0,
            ok,
            dt if i == 0 else 0.0,
            "" if ok else f"argv {argv!r} env {env.get('DFC_HOSTILE')!r} log {log_path!r}",
        )
    assert all(checks.values()), {k: v for k, v in checks.items() if not v}


def test_hostile_gpu_list_is_a_usage_error_not_a_command(tmp_path: Path) -> None:
    """`--gpus` with shell syntax is refused as usage (exit 2) before anything runs; a string list in
    hosts.toml is a located config error."""
    canary = tmp_path / CANARY
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(
        f'[hosts.h]\ntransport = "local"\n[presets.p]\nhost = "h"\ngpus = [0]\nmodel = "/m"\n'
        f'[presets.q]\nhost = "h"\ngpus = ["0; touch {canary}"]\nmodel = "/m"\n'
    )
    r = subprocess.run(
        [sys.executable, "-m", "console", "--hosts", str(hosts), "check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    ok_cfg = r.returncode == 2 and "presets.q.gpus[0]" in r.stderr and "Traceback" not in r.stderr
    hosts.write_text('[hosts.h]\ntransport = "local"\n[presets.p]\nhost = "h"\ngpus = [0]\nmodel = "/m"\n')
    r2 = subprocess.run(
        [sys.executable, "-m", "console", "--hosts", str(hosts), "launch", "p", "--gpus", f"0$(touch {canary})"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    ok_cli = r2.returncode == 2 and "--gpus" in r2.stderr and "Traceback" not in r2.stderr
    results.record(
        "hostile",
        "shell: GPU list strings refused (config error / usage)",
        0,
        ok_cfg and ok_cli and not canary.exists(),
        0.0,
        f"{r.stderr[-200:]} | {r2.stderr[-200:]}",
    )
    assert ok_cfg, r.stderr
    assert ok_cli, r2.stderr
    assert not canary.exists()
