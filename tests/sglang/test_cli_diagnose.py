"""`dflash-console diagnose` through the real CLI main(): every sample, --json schema, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.cli import main
from console.sglang.phase import phase_words

from .samples import all_samples
from .test_samples import EXPECTED

KEYS = {
    "file",
    "phase",
    "shards",
    "crashed",
    "cause",
    "summary",
    "hint",
    "error_line",
    "gen_throughput",
    "tp_size",
    "timeline",
}


@pytest.mark.parametrize("path", all_samples(), ids=lambda p: p.name[:2])
def test_every_sample_human_and_json(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    phase, cause = EXPECTED[path.name[:2]]
    rc = main(["diagnose", str(path)])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    assert rc == (1 if cause else 0)
    assert f": {phase_words(phase)}" in out.out  # text says the TUI's words; JSON keeps the machine name
    assert not any(f" {p}" in out.out for p in ("loading_weights", "kv_cache", "cuda_graph", "cuda graphs"))
    if cause:
        assert f"cause: {cause}" in out.out and "hint: " in out.out
    rc = main(["diagnose", "--json", str(path)])
    obj = json.loads(capsys.readouterr().out)
    assert KEYS <= set(obj) and obj["phase"] == phase and obj["cause"] == cause and obj["crashed"] == bool(cause)
    assert obj["shards"] is None or set(obj["shards"]) == {"done", "total"}


def test_several_files_give_an_array(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(p) for p in all_samples()]
    assert main(["diagnose", "--json", *paths]) == 1
    arr = json.loads(capsys.readouterr().out)
    assert isinstance(arr, list) and len(arr) == len(paths)
    assert main(["diagnose", "--json", paths[0], paths[1]]) == 0


def test_unreadable_file_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.log"
    assert main(["diagnose", str(missing), str(all_samples()[0])]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "Traceback" not in err
    assert main(["diagnose", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_binary_garbage_does_not_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "junk.log"
    f.write_bytes(bytes(range(256)) * 50 + b"\x1b[31m" + b"x" * 2_000_000)
    assert main(["diagnose", "--json", str(f)]) == 1
    obj = json.loads(capsys.readouterr().out)
    assert obj["phase"] is None and obj["sglang_log"] is False and not obj["crashed"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello\nworld\n",
        "pod-1:235:235 [1] NCCL INFO Channel 13/0 : 1[1] -> 2[2] via P2P/IPC\n",
        "==========\n== CUDA ==\n==========\n\nCUDA Version 12.4.1\n",
    ],
)
def test_a_file_with_no_sglang_line_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    """Issue 18 item 5: never "launching" for a file that is not an SGLang log; exit 1."""
    f = tmp_path / "other.log"
    f.write_text(text)
    assert main(["diagnose", str(f)]) == 1
    out = capsys.readouterr().out
    assert "no SGLang log line" in out and "launching" not in out
    assert main(["diagnose", "--json", str(f)]) == 1
    obj = json.loads(capsys.readouterr().out)
    assert obj["phase"] is None and obj["sglang_log"] is False and obj["cause"] is None
    assert main(["diagnose", str(f), str(all_samples()[0])]) == 1  # one foreign file makes the run fail
    capsys.readouterr()


def test_process_facts_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from .synth import startup

    f = tmp_path / "loading.log"
    f.write_text(startup(2, until="loading_weights"))
    assert main(["diagnose", str(f)]) == 0
    capsys.readouterr()
    assert main(["diagnose", "--json", "--exit-status", "137", "--signal", "KILL", str(f)]) == 1
    assert json.loads(capsys.readouterr().out)["cause"] == "killed_oom_killer"
    assert main(["diagnose", "--signal", "9", "--stopped", str(f)]) == 0


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import io
    import sys

    data = (all_samples()[11]).read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["diagnose", "-"]) == 1
    assert "mamba_radix_cache_incompatible" in capsys.readouterr().out
