"""SGLang CLI stand-in: argparse and validation errors and defaults, with SGLang's texts (docs/sglang.md §5, §6.4)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from console.sim.args import prepare_server_args
from console.sim.hostdir import build_host
from console.sim.spec import CT129_SPEC

from .conftest import SAMPLES


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = build_host(tmp_path / "ct129", CT129_SPEC)
    monkeypatch.setenv("DFLASH_SIM_HOST_DIR", str(h))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("SGLANG_ENABLE_SPEC_V2", raising=False)
    return h


def _qwen(h: Path) -> str:
    return str(h / "models/Qwen3.6-27B")


def test_unknown_flag_and_invalid_choice_exit_2(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        prepare_server_args(["--model-path", _qwen(host), "--bogus-flag"])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert err.startswith("usage: sglang serve [-h] --model-path MODEL_PATH")
    assert err.rstrip().endswith("sglang serve: error: unrecognized arguments: --bogus-flag")
    with pytest.raises(SystemExit):
        prepare_server_args(["--model-path", _qwen(host), "--speculative-algorithm", "X"])
    err = capsys.readouterr().err
    assert re.search(
        r"^sglang serve: error: argument --speculative-algorithm: invalid choice: 'X' \(choose from "
        r"'DFLASH', 'EAGLE', 'EAGLE3', 'NEXTN', 'STANDALONE', 'NGRAM'\)$",
        err,
        re.M,
    )


def test_hybrid_spec_without_extra_buffer_is_the_real_valueerror(host: Path) -> None:
    real = (SAMPLES / "sglang-logs/12-crash-spec-args-valueerror-qwen35-moe-mamba-no-buffer.log").read_text().strip()
    with pytest.raises(ValueError) as e:
        prepare_server_args(["--model-path", _qwen(host), "--tp-size", "2", "--speculative-algorithm", "NEXTN"])
    assert f"ValueError: {e.value}" == real.replace(
        "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration"
    )


def test_topk_without_num_steps_is_a_bare_assertion(host: Path) -> None:
    with pytest.raises(AssertionError) as e:
        prepare_server_args(
            [
                "--model-path",
                _qwen(host),
                "--speculative-algorithm",
                "EAGLE",
                "--speculative-eagle-topk",
                "1",
                "--mamba-scheduler-strategy",
                "extra_buffer",
            ]
        )
    assert str(e.value) == ""


def test_defaults_follow_sglang_formulas(host: Path) -> None:
    a = prepare_server_args(
        [
            "--model-path",
            _qwen(host),
            "--tp-size",
            "2",
            "--speculative-algorithm",
            "NEXTN",
            "--speculative-num-steps",
            "1",
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            "3",
            "--mamba-scheduler-strategy",
            "extra_buffer",
        ]
    )
    assert a.speculative_algorithm == "EAGLE" and a.max_running_requests == 48
    assert a.speculative_num_draft_tokens == 2  # adjusted to steps + 1 when topk == 1
    assert (
        "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
        in a.notes
    )
    # 48 GiB A6000: chunked 4096, cuda-graph-max-bs 32, reserved = 512 + 6144 + 64 + 256 + 4096 (EAGLE) MiB
    assert a.chunked_prefill_size == 4096 and a.cuda_graph_max_bs == 32
    assert a.mem_fraction_static == round((49140 - 11072) / 49140, 3)
    assert a.context_length == 262144
    assert repr(a).startswith(f"ServerArgs(model_path='{_qwen(host)}', tokenizer_path='{_qwen(host)}'")


def test_missing_model_path_and_no_gpu(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(OSError, match=r"Incorrect path_or_model_id: '/nope/model'"):
        prepare_server_args(["--model-path", "/nope/model"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(RuntimeError, match=r"^No accelerator \(CUDA, XPU, HPU, NPU, MUSA, MPS\) is available\.$"):
        prepare_server_args(["--model-path", _qwen(host)])


def test_sim_python_runs_sglang_validation_snippet(host: Path) -> None:
    """The check --remote style probe: `PYTHON -c "...prepare_server_args(sys.argv[1:])" ARGS` on the host."""
    code = "import sys; from sglang.srt.server_args import prepare_server_args; print(prepare_server_args(sys.argv[1:]).tp_size)"
    py = str(host / "venv/bin/python3")
    ok = subprocess.run(
        [py, "-c", code, "--model-path", _qwen(host), "--tp-size", "2"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=30,
    )
    assert ok.returncode == 0 and ok.stdout == "2\n", ok.stderr
    bad = subprocess.run(
        [py, "-c", code, "--model-path", _qwen(host), "--speculative-algorithm", "EAGLE"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=30,
    )
    assert bad.returncode == 1
    assert (
        bad.stderr.rstrip()
        .splitlines()[-1]
        .startswith("ValueError: Speculative decoding for Qwen3_5ForConditionalGeneration is not compatible")
    )
    ver = subprocess.run(
        [py, "-c", "import sglang; print(sglang.__version__)"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=30,
    )
    assert ver.stdout == "0.5.11\n"
