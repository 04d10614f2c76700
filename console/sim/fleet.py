"""Build and tear down a sim fleet: one host dir per spec plus a `hosts.toml` (transport "local").

API:
  sim_up(dir, hosts=("ct129", "blackwell"), time_scale=None) -> Path   # D/hosts.toml; idempotent
  sim_down(dir) -> int                                                  # processes stopped
  build_host(host_dir, spec) -> Path                                    # console.sim.hostdir (for sshd fronts)
  CT129_SPEC, BLACKWELL_SPEC, BLACKWELL8_SPEC                           # console.sim.spec
Presets mirror the repo's hosts.toml with sim paths; local hosts share this machine's ports, so
ct129 serves on 30000 and blackwell on 31000..31003.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from console.sim import state
from console.sim.hostdir import build_host
from console.sim.spec import BLACKWELL8_SPEC, BLACKWELL_SPEC, CT129_SPEC, PRESET_SPECS, SimHostSpec

__all__ = ["BLACKWELL8_SPEC", "BLACKWELL_SPEC", "CT129_SPEC", "build_host", "hosts_toml", "sim_down", "sim_up"]

_ARGS_GEN = [
    "--reasoning-parser",
    "qwen3",
    "--tool-call-parser",
    "qwen3_coder",
    "--mem-fraction-static",
    "0.80",
    "--max-running-requests",
    "128",
    "--context-length",
    "8192",
    "--trust-remote-code",
    "--mamba-scheduler-strategy",
    "extra_buffer",
]
_ARGS_MTP = [
    "--speculative-algorithm",
    "NEXTN",
    "--speculative-num-steps",
    "1",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "2",
    "--mamba-scheduler-strategy",
    "extra_buffer",
    "--reasoning-parser",
    "qwen3",
]


_ARGS_DFLASH = [
    "--speculative-algorithm",
    "DFLASH",
    "--speculative-dflash-block-size",
    "16",
    "--speculative-draft-attention-backend",
    "flashinfer",
    "--mamba-scheduler-strategy",
    "extra_buffer",
    "--reasoning-parser",
    "qwen3",
    "--enable-metrics",
]


def _q(s: str) -> str:
    return json.dumps(s)


def _arr(xs: list[str]) -> str:
    return "[" + ", ".join(_q(x) for x in xs) + "]"


def hosts_toml(dirs: dict[str, Path], specs: dict[str, SimHostSpec], ports: dict[str, int] | None = None) -> str:
    """The sim fleet's hosts.toml; `ports` moves a preset's or router's base port (by name) off its default."""
    at = ports or {}
    out = ["# Sim fleet written by `dflash-console sim up` (transport local; see console/sim/fleet.py).", ""]
    for name, d in dirs.items():
        s = specs[name]
        out += [
            f"[hosts.{name}]",
            'transport = "local"',
            f"python = {_q(str(d / 'venv/bin/python3'))}",
            f"run_dir = {_q(str(d / 'run'))}",
            f"log_dir = {_q(str(d / 'logs'))}",
            f"env = {{ PATH = {_q(str(d / 'bin') + ':/usr/local/bin:/usr/bin:/bin')} }}",
            f"description = {_q(f'sim: {len(s.gpus)}x {s.gpus[0].name}, SGLang {s.sglang_version}')}",
            "",
        ]
    if "ct129" in dirs:
        d = dirs["ct129"]
        out += [
            "[presets.qwen36-mtp]",
            'description = "Qwen3.6-27B, TP=2, MTP speculative decoding (NEXTN)"',
            'host = "ct129"',
            "gpus = [0, 1]",
            "tp = 2",
            f"model = {_q(str(d / 'models/Qwen3.6-27B'))}",
            f"port = {at.get('qwen36-mtp', 30000)}",
            'env = { SGLANG_ENABLE_SPEC_V2 = "1" }',
            f"args = {_arr(_ARGS_MTP)}",
            "",
        ]
    for bw in ("blackwell", "blackwell8"):
        if bw not in dirs:
            continue
        d, n = dirs[bw], len(specs[bw].gpus)
        base = 31000 if bw == "blackwell" else 32000
        sfx = "" if bw == "blackwell" else "-8"
        gen = at.get(f"qwen36-gen{sfx}", base)
        out += [
            f"[presets.qwen36-gen{sfx}]",
            f'description = "Qwen3.6-27B generation fleet: one TP=1 server per GPU on ports {gen}..{gen + n - 1}"',
            f'host = "{bw}"',
            f"gpus = {list(range(n))}",
            "tp = 1",
            f"model = {_q(str(d / 'models/Qwen3.6-27B'))}",
            f"port = {gen}",
            'bind = "0.0.0.0"',
            f"args = {_arr(_ARGS_GEN)}",
            "",
            f"[presets.qwen36-bench{sfx}]",
            f'description = "Qwen3.6-27B on {bw} GPU 0 only, for concurrency sweeps"',
            f'host = "{bw}"',
            "gpus = [0]",
            f"model = {_q(str(d / 'models/Qwen3.6-27B'))}",
            f"port = {at.get(f'qwen36-bench{sfx}', base)}",
            'bind = "0.0.0.0"',
            f"args = {_arr(_ARGS_GEN)}",
            "",
            f"[presets.qwen36-dflash{sfx}]",
            f'description = "Qwen3.6-27B with the DFlash drafter (block 16) on {bw} GPU 1, against the MTP baseline"',
            f'host = "{bw}"',
            "gpus = [1]",
            f"model = {_q(str(d / 'models/Qwen3.6-27B'))}",
            f"port = {at.get(f'qwen36-dflash{sfx}', base + 1)}",
            'env = { SGLANG_ENABLE_SPEC_V2 = "1" }',
            f"args = {_arr([*_ARGS_DFLASH[:2], '--speculative-draft-model-path', str(d / 'models/Qwen3.6-27B-DFlash-b16'), *_ARGS_DFLASH[2:]])}",
            "",
            f"[routers.gen{sfx}]",
            f'description = "SGLang router over the Qwen3.6-27B replicas on {bw} (qwen36-gen{sfx}, qwen36-bench{sfx})"',
            f'host = "{bw}"',
            f'presets = ["qwen36-gen{sfx}", "qwen36-bench{sfx}"]',
            f"port = {at.get(f'gen{sfx}', base + 80)}",
            'policy = "round_robin"',
            "",
        ]
    return "\n".join(out)


def sim_up(
    dir: str | os.PathLike[str],
    hosts: list[str] | tuple[str, ...] = ("ct129", "blackwell"),
    time_scale: float | None = None,
    specs: dict[str, SimHostSpec] | None = None,
    ports: dict[str, int] | None = None,
) -> Path:
    """Build (or refresh) the host dirs under `dir` and write `dir/hosts.toml` (`ports`: as hosts_toml's)."""
    root = Path(dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    chosen: dict[str, SimHostSpec] = {}
    for h in hosts:
        spec = (specs or {}).get(h) or PRESET_SPECS.get(h)
        if spec is None:
            raise ValueError(f"unknown sim host '{h}'; known: {', '.join(PRESET_SPECS)}")
        if time_scale is not None:
            spec = spec.with_(time_scale=time_scale)
        chosen[h] = spec
    dirs = {h: build_host(root / h, s) for h, s in chosen.items()}
    path = root / "hosts.toml"
    path.write_text(hosts_toml(dirs, chosen, ports))
    return path


def host_dirs(dir: str | os.PathLike[str]) -> list[Path]:
    return sorted(p.parent for p in Path(dir).glob("*/spec.json"))


def _pids_mentioning(root: Path) -> list[int]:
    """Processes whose command line names a path inside the sim dir: servers still starting hold no
    VRAM yet, so the state files alone miss them (and a server main process holds none itself)."""
    marker = str(root).encode() + b"/"
    me = os.getpid()
    out = []
    for d in Path("/proc").iterdir() if Path("/proc/self").exists() else ():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            cl = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if marker in cl and (b"sglang" in cl or b"console.sim" in cl):  # sim servers, ranks, hogs; not a console
            out.append(int(d.name))
    return out


def _router_groups(dir: str | os.PathLike[str]) -> list[int]:
    """SGLang routers started on the sim hosts (run/routers/NAME/pid): their argv names no sim path, so the
    scan above misses them; each is a session leader, signalled as its group (negative pid)."""
    out = []
    for f in Path(dir).glob("*/run/routers/*/pid"):
        try:
            out.append(-int(f.read_text().strip()))
        except (OSError, ValueError):
            continue
    return out


def sim_down(dir: str | os.PathLike[str], timeout: float = 5.0) -> int:
    """Stop every live sim process recorded in the hosts' state files (SIGTERM, then SIGKILL)."""
    pids = sorted(
        {int(e["pid"]) for h in host_dirs(dir) for e in state.snapshot(h).values()}
        | set(_pids_mentioning(Path(dir).resolve()))
        | set(_router_groups(dir))
    )
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + timeout
        while time.monotonic() < end and any(state.proc_start_ticks(abs(p)) is not None for p in pids):
            time.sleep(0.05)
        if all(state.proc_start_ticks(abs(p)) is None for p in pids):
            break
    return len(pids)
