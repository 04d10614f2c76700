"""The built wheel, installed into a venv outside the checkout, holds what the console reads at run time (themes,
the sim's code), so an installed console starts anywhere and drives the sim fleet; scripts/ci-wheel does the same
with `uv tool install` and the demo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from console.sim.hostdir import code_path

ROOT = Path(__file__).resolve().parents[2]
UV = ROOT / ".ci" / ".uv" / "bin" / "uv"

PROBE = r"""
import json, subprocess, sys
from pathlib import Path
import console
from console.sim.hostdir import CODE_PATH, build_host
from console.sim.spec import CT129_SPEC
from console.ui.themes import DEFAULT_THEME, load_themes
loaded = load_themes()
host = build_host(Path(sys.argv[1]) / "h", CT129_SPEC)
smi = subprocess.run([str(host / "bin" / "nvidia-smi"), "-L"], capture_output=True, text=True)
py = subprocess.run([str(host / "venv" / "bin" / "python"), "-c", "import console, sglang; print(console.__file__)"],
                    capture_output=True, text=True)
print(json.dumps({
    "console": console.__file__,
    "code_path": CODE_PATH,
    "themes": sorted(t.name for t in loaded.themes),
    "problems": loaded.problems,
    "default": DEFAULT_THEME,
    "smi": [smi.returncode, smi.stdout, smi.stderr],
    "sim_python": [py.returncode, py.stdout.strip(), py.stderr],
}))
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel uv builds from this tree installed in it, offline and without its dependencies:
    those come from this venv's site-packages through a .pth line (which adds no editable install of the checkout)."""
    assert UV.exists(), f"{UV} missing: run `bash scripts/bootstrap` (it installs the project's uv)"
    work = tmp_path_factory.mktemp("wheel")
    env = {**os.environ, "UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    subprocess.run([UV, "build", "--wheel", "-q", "-o", work / "dist", ROOT], env=env, check=True, timeout=120)
    (wheel,) = (work / "dist").glob("dflash_console-*.whl")
    v = work / "venv"
    subprocess.run([UV, "venv", "-q", "--python", sys.executable, v], env=env, check=True, timeout=120)
    subprocess.run(
        [UV, "pip", "install", "-q", "--no-deps", "--python", v / "bin" / "python", wheel],
        env=env,
        check=True,
        timeout=120,
    )
    (site,) = (v / "lib").glob("python3.*/site-packages")
    (site / "dfc_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return v


def _env(tmp_path: Path) -> dict[str, str]:
    """No path into the checkout: no PYTHONPATH, and config and state in the test's folder."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return env | {"DFLASH_CONFIG_DIR": str(tmp_path / "cfg"), "XDG_STATE_HOME": str(tmp_path / "state")}


def test_the_installed_wheel_has_its_themes_and_runs_the_stand_ins(venv: Path, tmp_path: Path) -> None:
    p = subprocess.run(
        [venv / "bin" / "python", "-c", PROBE, tmp_path],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert Path(r["console"]).is_relative_to(venv), r["console"]
    assert r["code_path"] == []  # installed: the console's interpreter finds the package itself
    assert r["problems"] == []
    assert {"dflash-dark", "dflash-light", "dflash-amber"} <= set(r["themes"]), r["themes"]
    assert r["default"] in r["themes"]
    rc, out, err = r["smi"]
    assert rc == 0 and out.startswith("GPU 0: NVIDIA RTX A6000"), (out, err)
    rc, out, err = r["sim_python"]
    assert rc == 0 and Path(out).is_relative_to(venv), (out, err)


def test_the_installed_console_launches_and_stops_a_sim_server(venv: Path, tmp_path: Path) -> None:
    """The sim's server and its TP ranks (which start as bare interpreters under their own titles) run from the
    installed package alone."""
    env = _env(tmp_path)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [venv / "bin" / "dflash-console", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
        )

    fleet = tmp_path / "fleet"
    up = cli("sim", "up", "--dir", str(fleet), "--hosts", "ct129", "--time-scale", "0.1")
    assert up.returncode == 0, up.stderr
    hosts = ["--hosts", str(fleet / "hosts.toml")]
    try:
        launch = cli(*hosts, "launch", "qwen36-mtp", "--wait")
        log = "".join(p.read_text() for p in (fleet / "ct129" / "logs").glob("qwen36-mtp_*.log"))
        assert launch.returncode == 0, f"{launch.stdout}{launch.stderr}\n--- server log:\n{log[-3000:]}"
        status = cli(*hosts, "status", "--json")
        assert status.returncode == 0, status.stderr
        (server,) = json.loads(status.stdout)["servers"]
        assert server["name"] == "qwen36-mtp@ct129:gpu0-1" and server["alive"], server
        assert server["phase"] in ("ready", "serving"), server
        stop = cli(*hosts, "stop", server["name"])
        assert stop.returncode == 0 and "GPUs released" in stop.stdout, f"{stop.stdout}{stop.stderr}"
    finally:
        down = cli("sim", "down", "--dir", str(fleet))
    assert down.returncode == 0, down.stderr


def test_the_stand_ins_get_no_pythonpath_where_the_package_is_installed(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    assert code_path(site, [str(tmp_path / "other"), str(site)]) == []
    assert code_path(ROOT, [str(site)]) == [str(ROOT)]
