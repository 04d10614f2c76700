"""The built wheel, installed outside the checkout, holds what the console reads at run time (themes, the sim's
stand-ins' code), so `uv tool install` gives a console that starts anywhere; scripts/ci-wheel runs the whole CLI so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.sim.hostdir import code_path

ROOT = Path(__file__).resolve().parents[2]
UV = ROOT / ".ci" / ".uv" / "bin" / "uv"

PROBE = r"""
import json, subprocess, sys
from pathlib import Path
import console
from console.sim.spec import CT129_SPEC
from console.sim.hostdir import build_host
from console.ui.themes import DEFAULT_THEME, load_themes
loaded = load_themes()
host = build_host(Path(sys.argv[1]) / "h", CT129_SPEC)
smi = subprocess.run([str(host / "bin" / "nvidia-smi"), "-L"], capture_output=True, text=True)
py = subprocess.run([str(host / "venv" / "bin" / "python"), "-c", "import console, sglang; print(console.__file__)"],
                    capture_output=True, text=True)
print(json.dumps({
    "console": console.__file__,
    "themes": sorted(t.name for t in loaded.themes),
    "problems": loaded.problems,
    "default": DEFAULT_THEME,
    "smi": [smi.returncode, smi.stdout, smi.stderr],
    "sim_python": [py.returncode, py.stdout.strip(), py.stderr],
}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel uv builds from this tree, installed (without its dependencies, offline) into a bare folder."""
    assert UV.exists(), f"{UV} missing: run `bash scripts/bootstrap` (it installs the project's uv)"
    work = tmp_path_factory.mktemp("wheel")
    env = {**os.environ, "UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never"}
    subprocess.run([UV, "build", "--wheel", "-q", "-o", work / "dist", ROOT], env=env, check=True, timeout=120)
    (wheel,) = (work / "dist").glob("dflash_console-*.whl")
    target = work / "site"
    subprocess.run(
        [UV, "pip", "install", "-q", "--no-deps", "--python", sys.executable, "--target", target, wheel],
        env=env,
        check=True,
        timeout=120,
    )
    return target


def test_the_installed_wheel_has_its_themes_and_runs_the_sim(installed: Path, tmp_path: Path) -> None:
    # run from elsewhere with only the installed copy ahead on the path (the dependencies come from this venv)
    env = {**os.environ, "PYTHONPATH": str(installed), "DFLASH_CONFIG_DIR": str(tmp_path / "cfg")}
    p = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert Path(r["console"]).is_relative_to(installed), r["console"]
    assert r["problems"] == []
    assert {"dflash-dark", "dflash-light", "dflash-amber"} <= set(r["themes"]), r["themes"]
    assert r["default"] in r["themes"]
    rc, out, err = r["smi"]
    assert rc == 0 and out.startswith("GPU 0: NVIDIA RTX A6000"), (out, err)
    rc, out, err = r["sim_python"]
    assert rc == 0 and Path(out).is_relative_to(installed), (out, err)


def test_the_stand_ins_get_no_pythonpath_where_the_package_is_installed(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    assert code_path(site, [str(tmp_path / "other"), str(site)]) == []
    assert code_path(ROOT, [str(site)]) == [str(ROOT)]
