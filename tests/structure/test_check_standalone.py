"""scripts/check-standalone names every tracked file:line that reads or cites outside the repo, and nothing else."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check-standalone"

# Written in pieces, so this file passes the check it tests.
S, REF, MD, NOTES = "shared", "reference", ".md", "notes"
OUTSIDE = {
    "tests/reads.py": f'SAMPLES = Path(__file__).parents[2] / ".." / "{S}" / "x"\nLOGS = "../{S}/samples/a.log"\n',
    "bench/abs.py": f'ROOT = "/work/{S}/samples/sglang-logs"\n',
    "console/cites.py": f'"""Formats: {REF} §1.1, as SGLang prints them."""\n# {REF.title()} §1.2 rows in order\n',
    "docs/notes.md": f"See sglang-{REF} for flags.\nRecipes: test-infra{MD}.\n",
    "tests/fixtures/x.py": f"# from textual-asyncssh-{NOTES}\n# see design{MD}\n",
    "console/sim/nv.py": f'"""Layout follows {S}/samples/nvidia-smi/."""\n',
}
"""Each file's lines that must be reported (every line of them)."""

INSIDE = {
    "console/ok.py": '"""Formats: docs/sglang.md §1.1; libfoo.so: cannot open shared object file."""\n',
    "tests/ok.py": 'SAMPLES = Path(__file__).parent / "samples"  # tests/samples/sglang-logs\nhost = "shared"\n',
    "docs/architecture.md": "Layers are shared by the fleet and the UI; see docs/design-notes below.\n",
}


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "scripts").mkdir()
    shutil.copy(SCRIPT, root / "scripts" / "check-standalone")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "untracked.py").write_text(f'X = "/work/{S}"\n')  # not added: only tracked files count
    subprocess.run(["git", "-C", str(root), "add", "scripts", *files], check=True)
    return root


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(root / "scripts" / "check-standalone")], capture_output=True, text=True)


def test_every_outside_read_or_citation_is_named_by_file_and_line(tmp_path: Path) -> None:
    r = _run(_repo(tmp_path, {**OUTSIDE, **INSIDE}))
    want = {f"{name}:{i}" for name, text in OUTSIDE.items() for i in range(1, text.count("\n") + 1)}
    got = {":".join(line.split(":", 2)[:2]) for line in r.stdout.splitlines()}
    assert r.returncode == 1, r
    assert got == want, (got ^ want, r.stdout)
    assert f"{len(want)} line(s)" in r.stderr


def test_a_repo_that_stands_alone_passes(tmp_path: Path) -> None:
    r = _run(_repo(tmp_path, INSIDE))
    assert r.returncode == 0, r
    assert r.stdout.strip() == "check-standalone: no tracked file reads or cites anything outside the repo"


def test_outside_a_git_checkout_it_says_so(tmp_path: Path) -> None:
    r = subprocess.run(["bash", str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "not a git checkout" in r.stderr
