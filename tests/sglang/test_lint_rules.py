"""Preset lint rules on Fleets built from hosts.toml text."""

from __future__ import annotations

from typing import Any

import pytest

from console.config import parse_fleet
from console.sglang import flags
from console.sglang.lint import RULES, Finding, lint_preset

QWEN36_CFG = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "text_config": {
        "model_type": "qwen3_5_text",
        "layer_types": ["linear_attention", "full_attention"],
        "max_position_embeddings": 262144,
    },
}
LLAMA_CFG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "max_position_embeddings": 131072}


def lint(
    args: list[str],
    *,
    model: str = "/m/Llama-3.1-8B",
    env: dict[str, str] | None = None,
    cfg: dict[str, Any] | None = None,
) -> list[Finding]:
    arg_s = ", ".join(f'"{a}"' for a in args)
    env_s = ", ".join(f'{k} = "{v}"' for k, v in (env or {}).items())
    toml = f"""
[hosts.h]
address = "10.0.0.1"

[presets.p]
host = "h"
gpus = [0]
model = "{model}"
args = [{arg_s}]
env = {{ {env_s} }}
"""
    return [f for f in lint_preset(parse_fleet(toml), "p", cfg) if f.rule in RULES and f.rule != "bind-loopback-direct"]


def rules(fs: list[Finding]) -> dict[str, str]:
    return {f.rule: f.severity for f in fs}


def test_rules_registered_with_ids() -> None:
    lint([])
    for rid in (
        "hybrid-spec-extra-buffer",
        "spec-steps-missing",
        "spec-draft-tokens-adjusted",
        "dflash-cuda-graph",
        "unknown-flag",
        "invalid-choice",
        "mem-fraction-range",
        "context-length-exceeds-model",
        "spec-v2-env",
    ):
        assert rid in RULES


def test_clean_preset_has_no_findings() -> None:
    assert lint(["--mem-fraction-static", "0.85", "--reasoning-parser", "qwen3", "--enable-metrics"]) == []


def test_hybrid_spec_needs_extra_buffer_from_config() -> None:
    spec = [
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
    ]
    fs = lint(spec, model="/m/some-model", cfg=QWEN36_CFG)
    assert rules(fs)["hybrid-spec-extra-buffer"] == "error"
    assert "extra_buffer" in next(f.fix for f in fs if f.rule == "hybrid-spec-extra-buffer")
    ok = lint(
        [*spec, "--mamba-scheduler-strategy", "extra_buffer"],
        model="/m/x",
        cfg=QWEN36_CFG,
        env={"SGLANG_ENABLE_SPEC_V2": "1"},
    )
    assert ok == []
    assert lint([*spec, "--disable-radix-cache"], model="/m/x", cfg=QWEN36_CFG) == []
    assert "hybrid-spec-extra-buffer" not in rules(lint(spec, model="/m/Qwen3.6-27B", cfg=LLAMA_CFG))


def test_hybrid_by_name_when_no_config_is_a_warning() -> None:
    fs = lint(["--speculative-algorithm", "EAGLE"], model="/root/models/Qwen3.6-27B")
    assert rules(fs)["hybrid-spec-extra-buffer"] == "warning"
    assert "hybrid-spec-extra-buffer" in rules(
        lint(["--speculative-algorithm", "EAGLE"], model="Qwen/Qwen3-Next-80B-A3B")
    )
    assert "hybrid-spec-extra-buffer" not in rules(lint(["--speculative-algorithm", "EAGLE"], model="/m/Qwen3-8B"))


def test_spec_steps_missing_and_draft_tokens_adjusted() -> None:
    assert (
        rules(lint(["--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "1"]))["spec-steps-missing"]
        == "error"
    )
    fs = lint(
        [
            "--speculative-algorithm",
            "EAGLE",
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            "8",
        ]
    )
    f = next(x for x in fs if x.rule == "spec-draft-tokens-adjusted")
    assert f.severity == "warning" and "4" in f.fix
    assert (
        lint(
            [
                "--speculative-algorithm",
                "EAGLE",
                "--speculative-num-steps",
                "5",
                "--speculative-eagle-topk",
                "4",
                "--speculative-num-draft-tokens",
                "8",
            ]
        )
        == []
    )


def test_dflash_without_cuda_graph() -> None:
    assert (
        rules(
            lint(
                ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/m/d", "--disable-cuda-graph"]
            )
        )["dflash-cuda-graph"]
        == "warning"
    )


def test_unknown_flag_suggests_nearest() -> None:
    fs = lint(["--mem-fraction-statc", "0.8", "--chunked-pre", "4096"])
    msgs = [f.message for f in fs if f.rule == "unknown-flag"]
    assert any("did you mean --mem-fraction-static" in m for m in msgs)
    assert any("abbreviation of --chunked-prefill-size" in m for m in msgs)


@pytest.mark.parametrize(
    ("flag", "bad", "near"),
    [
        ("--reasoning-parser", "qwen-3", "qwen3"),
        ("--tool-call-parser", "qwen3-coder", "qwen3_coder"),
        ("--mamba-scheduler-strategy", "extra-buffer", "extra_buffer"),
        ("--speculative-algorithm", "eagle", "EAGLE"),
    ],
)
def test_invalid_choices(flag: str, bad: str, near: str) -> None:
    fs = [f for f in lint([flag, bad]) if f.rule == "invalid-choice"]
    assert len(fs) == 1 and fs[0].severity == "error" and near in fs[0].fix
    assert not [f for f in lint([flag, near]) if f.rule == "invalid-choice"]


@pytest.mark.parametrize("v", ["0", "1", "1.2", "-0.1", "abc"])
def test_mem_fraction_out_of_range(v: str) -> None:
    assert rules(lint(["--mem-fraction-static", v]))["mem-fraction-range"] == "error"


def test_context_length_vs_model_config() -> None:
    assert rules(lint(["--context-length", "200000"], cfg=LLAMA_CFG))["context-length-exceeds-model"] == "error"
    assert (
        rules(
            lint(["--context-length", "200000"], cfg=LLAMA_CFG, env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"})
        )["context-length-exceeds-model"]
        == "warning"
    )
    assert lint(["--context-length", "131072"], cfg=LLAMA_CFG) == []
    assert lint(["--context-length", "300000"], cfg=None) == []
    assert (
        rules(lint(["--context-length", "300000"], cfg=QWEN36_CFG, model="/m/x"))["context-length-exceeds-model"]
        == "error"
    )


def test_spec_v2_env() -> None:
    base = [
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
    ]
    assert rules(lint(base, model="/m/Qwen3.6-27B"))["spec-v2-env"] == "warning"
    assert rules(lint(base, model="/m/Qwen3.6-27B", env={"SGLANG_ENABLE_SPEC_V2": "0"}))["spec-v2-env"] == "error"
    assert "spec-v2-env" not in rules(lint(base, model="/m/Qwen3.6-27B", env={"SGLANG_ENABLE_SPEC_V2": "1"}))
    assert "spec-v2-env" not in rules(lint(base, model="/m/Llama-3.1-8B"))


def test_qwen36_mtp_example_preset_is_clean() -> None:
    fleet = parse_fleet("""
[hosts.ct129]
address = "10.1.230.172"

[presets.qwen36-mtp]
host = "ct129"
gpus = [0, 1]
tp = 2
model = "/root/models/Qwen3.6-27B"
env = { SGLANG_ENABLE_SPEC_V2 = "1" }
args = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "2", "--mamba-scheduler-strategy", "extra_buffer", "--reasoning-parser", "qwen3"]
""")
    assert [f for f in lint_preset(fleet, "qwen36-mtp", QWEN36_CFG) if f.rule != "bind-loopback-direct"] == []


def test_flag_table() -> None:
    assert flags.lookup("--tp") is None and flags.lookup("--tensor-parallel-size").name == "--tp-size"  # type: ignore[union-attr]
    assert flags.lookup("--speculative-algorithm").choices == flags.SPEC_ALGORITHMS  # type: ignore[union-attr]
    assert flags.nearest("--cuda-graph-maxbs") == "--cuda-graph-max-bs"


DFLASH = ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/d"]


@pytest.mark.parametrize(
    ("args", "rule", "severity"),
    [
        (["--speculative-algorithm", "DFLASH"], "dflash-draft-path", "error"),
        (
            [*DFLASH, "--speculative-dflash-block-size", "16", "--speculative-num-draft-tokens", "8"],
            "dflash-block-size",
            "error",
        ),
        ([*DFLASH, "--speculative-dflash-block-size", "0"], "dflash-block-size", "error"),
        (
            [*DFLASH, "--speculative-dflash-block-size", "16", "--speculative-draft-window-size", "8"],
            "dflash-window",
            "error",
        ),
        (
            [*DFLASH, "--speculative-num-draft-tokens", "16", "--speculative-dflash-draft-window-size", "4"],
            "dflash-window",
            "error",
        ),
        ([*DFLASH, "--enable-dp-attention"], "dflash-parallelism", "error"),
        ([*DFLASH, "--pp-size", "2"], "dflash-parallelism", "error"),
        ([*DFLASH, "--speculative-draft-attention-backend", "triton"], "dflash-draft-backend", "warning"),
    ],
)
def test_dflash_rules_as_sglang_enforces_them(args: list[str], rule: str, severity: str) -> None:
    """SGLang main's `_handle_dflash` (arg_groups/speculative_hook.py) and DFlashWorker's backend fallback."""
    assert rules(lint(args)).get(rule) == severity


def test_a_good_dflash_preset_is_clean_and_its_flags_are_known() -> None:
    good = [*DFLASH, "--speculative-dflash-block-size", "16", "--speculative-draft-window-size", "2048"]
    good += ["--speculative-draft-attention-backend", "fa3"]
    found = rules(lint(good))
    assert not {r for r in found if r.startswith("dflash")} and "unknown-flag" not in found
    same = [*DFLASH, "--speculative-dflash-block-size", "8", "--speculative-num-draft-tokens", "8"]
    assert "dflash-block-size" not in rules(lint(same))
