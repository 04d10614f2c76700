"""SGLang's launch flags (0.5.11 `server_args.py`, docs/sglang.md §5.2 plus the common rest) with types and choices.

One table for the lint rules and the preset editor. It is not exhaustive: a flag missing here is
reported as a warning ("not in the console's table"), never as an SGLang error.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Literal

Kind = Literal["str", "int", "float", "bool", "list", "json"]

REASONING_PARSERS = (
    "deepseek-r1",
    "deepseek-v3",
    "glm45",
    "hunyuan",
    "gpt-oss",
    "kimi",
    "kimi_k2",
    "mimo",
    "qwen3",
    "qwen3-thinking",
    "minimax",
    "minimax-append-think",
    "step3",
    "step3p5",
    "mistral",
    "nemotron_3",
    "interns1",
    "gemma4",
)
TOOL_CALL_PARSERS = (
    "deepseekv3",
    "deepseekv31",
    "deepseekv32",
    "glm",
    "glm45",
    "glm47",
    "gpt-oss",
    "kimi_k2",
    "lfm2",
    "llama3",
    "mimo",
    "mistral",
    "pythonic",
    "qwen",
    "qwen25",
    "qwen3_coder",
    "step3",
    "step3p5",
    "minimax-m2",
    "trinity",
    "interns1",
    "hermes",
    "hunyuan",
    "gigachat3",
    "gemma4",
)
MAMBA_STRATEGIES = ("auto", "no_buffer", "extra_buffer")
SPEC_ALGORITHMS = ("DFLASH", "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
ATTENTION_BACKENDS = (
    "triton",
    "torch_native",
    "flex_attention",
    "nsa",
    "cutlass_mla",
    "fa3",
    "fa4",
    "flashinfer",
    "flashmla",
    "trtllm_mla",
    "trtllm_mha",
    "dual_chunk_flash_attn",
    "aiter",
    "wave",
    "intel_amx",
    "ascend",
    "intel_xpu",
)
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


@dataclass(frozen=True)
class Flag:
    name: str
    kind: Kind = "str"
    choices: tuple[str, ...] | None = None
    aliases: tuple[str, ...] = ()
    help: str = ""


def _f(name: str, kind: Kind = "str", choices: tuple[str, ...] | None = None, *aliases: str, help: str = "") -> Flag:
    return Flag(name, kind, choices, tuple(aliases), help)


_TABLE: tuple[Flag, ...] = (
    # docs/sglang.md §5.2
    _f("--model-path", "str", None, "--model", help="local dir or HF repo id"),
    _f("--tp-size", "int", None, "--tensor-parallel-size"),
    _f("--dp-size", "int", None, "--data-parallel-size"),
    _f("--port", "int"),
    _f("--host"),
    _f("--mem-fraction-static", "float", help="fraction of GPU memory for weights + KV cache, in (0, 1)"),
    _f("--max-running-requests", "int"),
    _f("--context-length", "int"),
    _f("--reasoning-parser", "str", REASONING_PARSERS),
    _f("--tool-call-parser", "str", TOOL_CALL_PARSERS),
    _f(
        "--mamba-scheduler-strategy",
        "str",
        MAMBA_STRATEGIES,
        help="0.5.11; renamed --mamba-radix-cache-strategy in 0.5.23",
    ),
    _f("--speculative-algorithm", "str", SPEC_ALGORITHMS),
    _f("--speculative-draft-model-path", "str", None, "--speculative-draft-model"),
    _f("--speculative-num-steps", "int"),
    _f("--speculative-eagle-topk", "int"),
    _f("--speculative-num-draft-tokens", "int"),
    _f("--speculative-dflash-block-size", "int", help="DFLASH: the verify block; sets --speculative-num-draft-tokens"),
    _f("--speculative-draft-attention-backend", "str"),
    _f("--speculative-draft-window-size", "int", None, "--speculative-dflash-draft-window-size"),
    _f("--enable-metrics", "bool"),
    _f("--api-key"),
    _f("--admin-api-key"),
    _f("--log-level", "str", LOG_LEVELS),
    _f("--log-level-http", "str", LOG_LEVELS),
    _f("--trust-remote-code", "bool"),
    _f("--attention-backend", "str", ATTENTION_BACKENDS),
    _f("--prefill-attention-backend", "str", ATTENTION_BACKENDS),
    _f("--decode-attention-backend", "str", ATTENTION_BACKENDS),
    _f("--cuda-graph-max-bs", "int"),
    _f("--cuda-graph-bs", "list"),
    _f("--disable-cuda-graph", "bool"),
    _f("--disable-piecewise-cuda-graph", "bool"),
    _f("--decode-log-interval", "int"),
    _f("--served-model-name"),
    _f("--skip-server-warmup", "bool"),
    _f("--chunked-prefill-size", "int"),
    # the rest of the commonly used 0.5.11 flags
    _f("--tokenizer-path"),
    _f("--tokenizer-mode", "str", ("auto", "slow")),
    _f("--skip-tokenizer-init", "bool"),
    _f("--load-format"),
    _f("--model-loader-extra-config", "json"),
    _f("--revision"),
    _f("--download-dir"),
    _f("--dtype", "str", ("auto", "half", "float16", "bfloat16", "float", "float32")),
    _f("--kv-cache-dtype", "str", ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1")),
    _f("--quantization"),
    _f("--quantization-param-path"),
    _f("--modelopt-quant"),
    _f("--device"),
    _f("--base-gpu-id", "int"),
    _f("--gpu-id-step", "int"),
    _f("--pp-size", "int", None, "--pipeline-parallel-size"),
    _f("--ep-size", "int", None, "--expert-parallel-size"),
    _f("--max-micro-batch-size", "int"),
    _f("--nnodes", "int"),
    _f("--node-rank", "int"),
    _f("--dist-init-addr"),
    _f("--nccl-port", "int"),
    _f("--dist-timeout", "int"),
    _f("--max-total-tokens", "int"),
    _f("--max-prefill-tokens", "int"),
    _f("--page-size", "int"),
    _f("--schedule-policy"),
    _f("--schedule-conservativeness", "float"),
    _f("--stream-interval", "int"),
    _f("--random-seed", "int"),
    _f("--watchdog-timeout", "float"),
    _f("--cpu-offload-gb", "int"),
    _f("--disable-radix-cache", "bool"),
    _f("--enable-torch-compile", "bool"),
    _f("--torch-compile-max-bs", "int"),
    _f("--disable-overlap-schedule", "bool"),
    _f("--enable-mixed-chunk", "bool"),
    _f("--enable-dp-attention", "bool"),
    _f("--enable-dp-lm-head", "bool"),
    _f("--disable-custom-all-reduce", "bool"),
    _f("--enable-nccl-nvls", "bool"),
    _f("--enable-p2p-check", "bool"),
    _f("--moe-runner-backend"),
    _f("--moe-a2a-backend"),
    _f("--deepep-mode"),
    _f("--ep-num-redundant-experts", "int"),
    _f("--enable-eplb", "bool"),
    _f("--disable-shared-experts-fusion", "bool"),
    _f("--enable-two-batch-overlap", "bool"),
    _f("--disable-chunked-prefix-cache", "bool"),
    _f("--enable-hierarchical-cache", "bool"),
    _f("--hicache-ratio", "float"),
    _f("--hicache-size", "int"),
    _f("--hicache-storage-backend"),
    _f("--enable-memory-saver", "bool"),
    _f("--delete-ckpt-after-loading", "bool"),
    _f("--chat-template"),
    _f("--completion-template"),
    _f("--is-embedding", "bool"),
    _f("--json-model-override-args", "json"),
    _f("--preferred-sampling-params", "json"),
    _f("--enable-multimodal", "bool"),
    _f("--mm-attention-backend"),
    _f("--disable-fast-image-processor", "bool"),
    _f("--sampling-backend", "str", ("flashinfer", "pytorch")),
    _f("--grammar-backend"),
    _f("--enable-lora", "bool"),
    _f("--lora-paths", "list"),
    _f("--max-loras-per-batch", "int"),
    _f("--lora-backend"),
    _f("--max-lora-rank", "int"),
    _f("--lora-target-modules", "list"),
    _f("--speculative-token-map"),
    _f("--speculative-accept-threshold-single", "float"),
    _f("--speculative-accept-threshold-acc", "float"),
    _f("--speculative-attention-mode"),
    _f("--speculative-draft-model-revision"),
    _f("--speculative-draft-load-format"),
    _f("--speculative-moe-runner-backend"),
    _f("--speculative-ngram-min-match-window-size", "int"),
    _f("--speculative-ngram-max-match-window-size", "int"),
    _f("--mamba-ssm-dtype"),
    _f("--mamba-full-memory-ratio", "float"),
    _f("--mamba-track-interval", "int"),
    _f("--max-mamba-cache-size", "int"),
    _f("--swa-full-tokens-ratio", "float"),
    _f("--disable-hybrid-swa-memory", "bool"),
    _f("--enable-metrics-for-all-schedulers", "bool"),
    _f("--bucket-time-to-first-token", "list"),
    _f("--bucket-inter-token-latency", "list"),
    _f("--bucket-e2e-request-latency", "list"),
    _f("--collect-tokens-histogram", "bool"),
    _f("--extra-metric-labels", "json"),
    _f("--enable-cache-report", "bool"),
    _f("--enable-priority-scheduling", "bool"),
    _f("--uvicorn-access-log-exclude-prefixes", "list"),
    _f("--log-requests", "bool"),
    _f("--log-requests-level", "int"),
    _f("--crash-dump-folder"),
    _f("--show-time-cost", "bool"),
    _f("--enable-request-time-stats-logging", "bool"),
    _f("--warmups"),
    _f("--stream-response-default-include-usage", "bool"),
    _f("--incremental-streaming-output", "bool"),
    _f("--stream-output", "bool"),
    _f("--allow-auto-truncate", "bool"),
    _f("--file-storage-path"),
    _f("--disaggregation-mode", "str", ("null", "prefill", "decode")),
    _f("--disaggregation-transfer-backend"),
    _f("--disaggregation-bootstrap-port", "int"),
    _f("--disaggregation-ib-device"),
    _f("--enable-return-hidden-states", "bool"),
    _f("--enable-custom-logit-processor", "bool"),
    _f("--triton-attention-num-kv-splits", "int"),
    _f("--num-continuous-decode-steps", "int"),
    _f("--enable-nan-detection", "bool"),
    _f("--numa-node", "list"),
    _f("--model-impl"),
    _f("--load-balance-method"),
    _f("--torchao-config"),
    _f("--enable-fp32-lm-head", "bool"),
    _f("--enable-mfu-metrics", "bool"),
    _f("--sleep-on-idle", "bool"),
    _f("--tool-server"),
    _f("--model-type", "str", ("auto", "llm", "diffusion")),
    _f(
        "--mamba-radix-cache-strategy",
        "str",
        ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"),
        help="0.5.23 name of --mamba-scheduler-strategy",
    ),
    _f("--weight-loader-prefetch-checkpoints", "bool", help="0.5.23"),
)

FLAGS: dict[str, Flag] = {}
for _flag in _TABLE:
    FLAGS[_flag.name] = _flag
    for _a in _flag.aliases:
        FLAGS[_a] = _flag


def lookup(name: str) -> Flag | None:
    """The flag for `--name` (an alias resolves to its flag)."""
    return FLAGS.get(name.split("=", 1)[0])


def abbreviation_of(name: str) -> str | None:
    """argparse `allow_abbrev`: a unique prefix of one known flag is accepted by SGLang (e.g. `--tp`)."""
    hits = {f.name for k, f in FLAGS.items() if k.startswith(name)}
    return hits.pop() if len(hits) == 1 else None


def nearest(name: str) -> str | None:
    """The closest known flag name, for "did you mean"."""
    got = difflib.get_close_matches(name, list(FLAGS), n=1, cutoff=0.6)
    return got[0] if got else None


def nearest_choice(value: str, choices: tuple[str, ...]) -> str | None:
    low = {c.lower(): c for c in choices}
    if value.lower() in low:
        return low[value.lower()]
    got = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.5)
    return got[0] if got else None
