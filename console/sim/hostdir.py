"""Build one self-contained sim host directory (absolute paths only) from a SimHostSpec.

Layout of HOST_DIR (every path absolute, so it works over SSH with a minimal PATH):
  spec.json                    the SimHostSpec (faults and time_scale may be edited live)
  bin/nvidia-smi               `#!/bin/sh` -> `exec PY -m console.sim.nvsmi --host-dir HOST_DIR "$@"`
  venv/bin/python, python3     `#!/bin/sh` -> puts the sim `sglang` package first on PYTHONPATH, execs PY
  venv/lib/python3.11/site-packages/sglang/   launch_server, bench_serving, srt.server_args (sim)
  models/NAME/                 config.json + sparse model-0000N-of-0000M.safetensors of the real size
  state/ control/ logs/ run/   GPU state file, sim control files, default log and run dirs
`PY` is the console's own interpreter (`sys.executable`), which can import `console`: from the site-packages of
an installed wheel, or from a checkout, whose root the wrappers put on PYTHONPATH (CODE_PATH).
"""

from __future__ import annotations

import json
import shlex
import site
import sys
from pathlib import Path

import console
from console.sim.spec import ModelSpec, SimHostSpec

SITE = "venv/lib/python3.11/site-packages"


def code_path(package_parent: Path, site_dirs: list[str]) -> list[str]:
    """What the stand-ins need on PYTHONPATH to import `console` with the console's interpreter: nothing where the
    package lies in one of that interpreter's site-packages (an installed wheel: putting site-packages on PYTHONPATH
    would set it ahead of the standard library), else the folder that holds it (a checkout's root)."""
    installed = {Path(d).resolve() for d in site_dirs}
    return [] if package_parent.resolve() in installed else [str(package_parent)]


PACKAGE_PARENT = Path(console.__file__).resolve().parent.parent
"""The folder that holds the `console` package: a checkout's root, or the site-packages a wheel went into."""

CODE_PATH = code_path(PACKAGE_PARENT, site.getsitepackages())
"""PYTHONPATH entries the stand-ins get so the console's interpreter runs the same `console` as the console itself."""

_PKG: dict[str, str] = {
    "__init__.py": '"""SGLang (simulated by dflash-console)."""\n\n__version__ = "{version}"\n',
    "version.py": '__version__ = "{version}"\n',
    "launch_server.py": '"""Launch the (simulated) SGLang server."""\n\nif __name__ == "__main__":\n'
    "    from console.sim.server import main\n\n    main(__file__)\n",
    "bench_serving.py": '"""Benchmark online serving (simulated SGLang\'s bench_serving)."""\n\n'
    'if __name__ == "__main__":\n    from console.sim.bench import main\n\n    main()\n',
    "srt/__init__.py": "",
    "srt/server_args.py": '"""The server arguments (simulated SGLang)."""\n\n'
    "from console.sim.args import ServerArgs, prepare_server_args  # noqa: F401\n",
}


def _sh_wrapper(lines: list[str]) -> str:
    return "#!/bin/sh\n" + "\n".join(lines) + "\n"


def _pythonpath(first: list[str]) -> list[str]:
    """`PYTHONPATH=...; export PYTHONPATH` with these entries ahead of CODE_PATH and any inherited PYTHONPATH;
    no line at all when there is nothing to add (an empty PYTHONPATH entry would put the working directory first)."""
    entries = [*first, *CODE_PATH]
    if not entries:
        return []
    joined = ":".join(shlex.quote(e) for e in entries)
    return [f"PYTHONPATH={joined}${{PYTHONPATH:+:$PYTHONPATH}}; export PYTHONPATH"]


def python_wrapper(host_dir: Path) -> str:
    return _sh_wrapper(
        [
            f"DFLASH_SIM_HOST_DIR={shlex.quote(str(host_dir))}; export DFLASH_SIM_HOST_DIR",
            'DFLASH_SIM_PYTHON="$0"; export DFLASH_SIM_PYTHON',
            *_pythonpath([str(host_dir / SITE)]),
            f'exec {shlex.quote(sys.executable)} "$@"',
        ]
    )


def nvsmi_wrapper(host_dir: Path) -> str:
    return _sh_wrapper(
        [
            *_pythonpath([]),
            f'exec {shlex.quote(sys.executable)} -m console.sim.nvsmi --host-dir {shlex.quote(str(host_dir))} "$@"',
        ]
    )


def _write(path: Path, text: str, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    if mode is not None:
        path.chmod(mode)


def write_model(models_dir: Path, m: ModelSpec) -> Path:
    """config.json, tokenizer stubs and sparse shards whose apparent sizes add up to the weight size."""
    d = models_dir / m.name
    d.mkdir(parents=True, exist_ok=True)
    _write(d / "config.json", json.dumps(m.config_json(), indent=2) + "\n")
    _write(d / "generation_config.json", json.dumps({"temperature": 0.6, "top_p": 0.95, "top_k": 20}) + "\n")
    _write(d / "tokenizer_config.json", json.dumps({"model_max_length": m.max_position_embeddings}) + "\n")
    per, extra = divmod(m.weight_bytes, m.shards)
    weight_map: dict[str, str] = {}
    for i in range(m.shards):
        f = d / f"model-{i + 1:05d}-of-{m.shards:05d}.safetensors"
        with open(f, "ab") as fh:
            fh.truncate(per + (extra if i == m.shards - 1 else 0))
        weight_map[f"model.layers.{i}.weight"] = f.name
    _write(
        d / "model.safetensors.index.json",
        json.dumps({"metadata": {"total_size": m.weight_bytes}, "weight_map": weight_map}, indent=1) + "\n",
    )
    return d


def build_host(host_dir: str | Path, spec: SimHostSpec) -> Path:
    """Create or refresh a sim host directory (idempotent; live state is kept). Returns its absolute path."""
    h = Path(host_dir).resolve()
    for sub in ("state", "control", "logs", "run", "bin", "venv/bin"):
        (h / sub).mkdir(parents=True, exist_ok=True)
    _write(h / "spec.json", json.dumps(spec.to_dict(), indent=2) + "\n")
    smi = h / "bin" / "nvidia-smi"
    if "nvidia-smi-missing" in spec.faults:
        smi.unlink(missing_ok=True)
    else:
        _write(smi, nvsmi_wrapper(h), 0o755)
    for name in ("python", "python3", "python3.11"):
        _write(h / "venv" / "bin" / name, python_wrapper(h), 0o755)
    _write(
        h / "venv" / "pyvenv.cfg",
        f"home = {Path(sys.executable).parent}\nversion = 3.11\ninclude-system-site-packages = false\n",
    )
    for rel, text in _PKG.items():
        _write(h / SITE / "sglang" / rel, text.replace("{version}", spec.sglang_version))
    for m in spec.models:
        write_model(h / "models", m)
    return h


def set_faults(host_dir: str | Path, faults: list[str]) -> None:
    """Change a host's faults in place (the stand-ins read spec.json on every call)."""
    from console.sim.spec import load_spec

    spec = load_spec(host_dir)
    build_host(host_dir, spec.with_(faults=list(faults)))
