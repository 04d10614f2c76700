"""Every malformed hosts.toml in the corpus gives file:line:col: field: message, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from console.config import ConfigError, load_fleet

CORPUS = Path(__file__).parent / "corpus"
CASES = sorted(p.stem for p in CORPUS.glob("*.toml"))


@pytest.mark.parametrize("case", CASES)
def test_corpus_case_located(case: str) -> None:
    expect = (CORPUS / f"{case}.expect").read_text().strip()
    with pytest.raises(ConfigError) as ei:
        load_fleet(CORPUS / f"{case}.toml")
    text = "\n".join(str(i) for i in ei.value.issues)
    prefix, _, rest = expect.partition("\t") if "\t" in expect else (expect, "", "")
    # The expect line is a prefix of one reported issue (file path made relative).
    lines = [t.replace(str(CORPUS) + "/", "") for t in text.splitlines()]
    want = prefix + rest if not rest else prefix
    assert any(ln.startswith(want) for ln in lines), f"{lines!r} has no line starting {want!r}"
    if rest:
        assert any(rest in ln for ln in lines)


def test_directory_given_as_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as ei:
        load_fleet(tmp_path)
    assert "is a directory" in str(ei.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as ei:
        load_fleet(tmp_path / "nope.toml")
    assert "file not found" in str(ei.value)


@pytest.mark.parametrize("case", ["unknown_key", "syntax_error", "empty", "non_utf8"])
def test_cli_exit_2_no_traceback(case: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "console", "--hosts", str(CORPUS / f"{case}.toml"), "check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr + r.stdout
    assert f"{case}.toml:" in r.stderr


def test_all_problems_collected(tmp_path: Path) -> None:
    f = tmp_path / "h.toml"
    f.write_text('[hosts.a]\naddress = "x"\nprot = 1\n\n[presets.p]\nhost = "b"\ngpus = [0, 0]\nmodel = "/m"\n')
    with pytest.raises(ConfigError) as ei:
        load_fleet(f)
    fields = [i.field for i in ei.value.issues]
    assert fields == ["hosts.a.prot", "presets.p.host", "presets.p.gpus[1]"]


def test_repo_hosts_toml_is_valid() -> None:
    fleet = load_fleet(Path(__file__).parents[2] / "hosts.toml")
    assert set(fleet.hosts) == {"ct129", "blackwell"}
    assert fleet.hosts["blackwell"].port == 19248
    assert set(fleet.presets) == {"qwen36-mtp", "qwen36-gen", "qwen36-bench"}
