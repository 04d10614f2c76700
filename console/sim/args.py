"""SGLang's CLI (docs/sglang.md §5.2) and `prepare_server_args` validation (§5.3) with the real error texts.

`prepare_server_args(argv)` parses like argparse does for `sglang serve` (exit 2 on bad flags or
choices) and resolves defaults in `ServerArgs.__post_init__`, raising SGLang's own ValueError /
AssertionError / OSError. GPU memory comes from the sim host named by `DFLASH_SIM_HOST_DIR`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REASONING_PARSERS = [
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
]
TOOL_CALL_PARSERS = [
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
]
SPEC_ALGOS = ["DFLASH", "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]
ATTN_BACKENDS = [
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
]
MAMBA_STRATEGIES = ["auto", "no_buffer", "extra_buffer"]
EAGLE_FAMILY = ("EAGLE", "EAGLE3")


def sglang_version() -> str:
    host = os.environ.get("DFLASH_SIM_HOST_DIR")
    if host:
        try:
            return str(json.loads((Path(host) / "spec.json").read_text()).get("sglang_version", "0.5.11"))
        except (OSError, ValueError):
            pass
    return "0.5.11"


@dataclass
class ServerArgs:
    """The resolved arguments; the repr is SGLang's `server_args=ServerArgs(...)` log line."""

    model_path: str
    tokenizer_path: str | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    tp_size: int = 1
    dp_size: int = 1
    pp_size: int = 1
    mem_fraction_static: float | None = None
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int = 16384
    context_length: int | None = None
    served_model_name: str | None = None
    trust_remote_code: bool = False
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    load_format: str = "auto"
    model_loader_extra_config: str = "{}"
    page_size: int = 1
    attention_backend: str | None = None
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    mamba_scheduler_strategy: str = "auto"
    mamba_radix_cache_strategy: str = "auto"
    disable_radix_cache: bool = False
    speculative_algorithm: str | None = None
    speculative_draft_model_path: str | None = None
    speculative_num_steps: int | None = None
    speculative_eagle_topk: int | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_dflash_block_size: int | None = None
    speculative_draft_attention_backend: str | None = None
    speculative_draft_window_size: int | None = None
    enable_dp_attention: bool = False
    enable_metrics: bool = False
    api_key: str | None = None
    admin_api_key: str | None = None
    log_level: str = "info"
    log_level_http: str | None = None
    cuda_graph_max_bs: int | None = None
    cuda_graph_bs: list[int] | None = None
    disable_cuda_graph: bool = False
    disable_piecewise_cuda_graph: bool = False
    disable_overlap_schedule: bool = False
    enable_torch_compile: bool = False
    decode_log_interval: int = 40
    skip_server_warmup: bool = False
    stream_response_default_include_usage: bool = False
    enable_cache_report: bool = False
    random_seed: int | None = None
    watchdog_timeout: float = 300
    device: str | None = None
    base_gpu_id: int = 0
    nccl_port: int | None = None
    chat_template: str | None = None
    enable_mixed_chunk: bool = False
    uvicorn_access_log_exclude_prefixes: list[str] = field(default_factory=list)
    mamba_track_interval: int = 256
    notes: list[str] = field(default_factory=list, repr=False)
    """Warnings logged while resolving (printed before server_args=...)."""
    model_config: dict[str, Any] = field(default_factory=dict, repr=False)
    gpu_mem_mib: int | None = field(default=None, repr=False)
    resolved: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if sglang_version().startswith("0.5.11"):
            _resolve(self)  # 0.5.23 resolves later, in resolve_once() (docs/sglang.md §5.4)

    def resolve_once(self) -> None:
        """0.5.23's deferred validation (run_server calls it); a no-op for 0.5.11, which resolved in __post_init__."""
        if not sglang_version().startswith("0.5.11") and not self.resolved:
            _resolve(self)

    def check_server_args(self) -> None:
        assert self.served_model_name is None or ":" not in self.served_model_name, (
            "served_model_name cannot contain a colon (:)"
        )


def _add(p: argparse.ArgumentParser, *names: str, **kw: Any) -> None:
    p.add_argument(*names, **kw)


def build_parser(version: str | None = None) -> argparse.ArgumentParser:
    v = version or sglang_version()
    p = argparse.ArgumentParser(prog="sglang serve")
    _add(p, "--model-path", "--model", dest="model_path", required=True)
    _add(p, "--tokenizer-path", dest="tokenizer_path")
    _add(p, "--host", default="127.0.0.1")
    _add(p, "--port", type=int, default=30000)
    _add(p, "--tensor-parallel-size", "--tp-size", dest="tp_size", type=int, default=1)
    _add(p, "--data-parallel-size", "--dp-size", dest="dp_size", type=int, default=1)
    _add(p, "--pipeline-parallel-size", "--pp-size", dest="pp_size", type=int, default=1)
    _add(p, "--mem-fraction-static", type=float)
    _add(p, "--max-running-requests", type=int)
    _add(p, "--max-total-tokens", type=int)
    _add(p, "--chunked-prefill-size", type=int)
    _add(p, "--max-prefill-tokens", type=int, default=16384)
    _add(p, "--context-length", type=_human_int)
    _add(p, "--served-model-name")
    _add(p, "--trust-remote-code", action="store_true")
    _add(p, "--dtype", default="auto", choices=["auto", "half", "float16", "bfloat16", "float", "float32"])
    _add(
        p, "--kv-cache-dtype", default="auto", choices=["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1"]
    )
    _add(p, "--quantization")
    _add(p, "--load-format", default="auto")
    _add(p, "--model-loader-extra-config", default="{}")
    _add(p, "--page-size", type=int, default=1)
    _add(p, "--attention-backend", choices=ATTN_BACKENDS)
    _add(p, "--prefill-attention-backend", choices=ATTN_BACKENDS)
    _add(p, "--decode-attention-backend", choices=ATTN_BACKENDS)
    _add(p, "--reasoning-parser", choices=REASONING_PARSERS)
    _add(p, "--tool-call-parser", choices=TOOL_CALL_PARSERS)
    if v.startswith("0.5.11"):
        _add(p, "--mamba-scheduler-strategy", choices=MAMBA_STRATEGIES, default="auto")
    else:
        _add(p, "--mamba-radix-cache-strategy", choices=[*MAMBA_STRATEGIES, "extra_buffer_lazy"], default="auto")
    _add(p, "--disable-radix-cache", action="store_true")
    if v.startswith("0.5.11"):
        _add(p, "--speculative-algorithm", choices=SPEC_ALGOS)
    else:
        _add(p, "--speculative-algorithm")
    _add(p, "--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path")
    _add(p, "--speculative-num-steps", type=int)
    _add(p, "--speculative-eagle-topk", type=int)
    _add(p, "--speculative-num-draft-tokens", type=int)
    _add(p, "--speculative-dflash-block-size", type=int)
    _add(p, "--speculative-draft-attention-backend")
    _add(
        p,
        "--speculative-draft-window-size",
        "--speculative-dflash-draft-window-size",
        dest="speculative_draft_window_size",
        type=int,
    )
    _add(p, "--enable-dp-attention", action="store_true")
    _add(p, "--enable-metrics", action="store_true")
    _add(p, "--api-key")
    _add(p, "--admin-api-key")
    _add(p, "--log-level", default="info")
    _add(p, "--log-level-http")
    _add(p, "--cuda-graph-max-bs", type=int)
    _add(p, "--cuda-graph-bs", type=int, nargs="+")
    _add(p, "--disable-cuda-graph", action="store_true")
    _add(p, "--disable-piecewise-cuda-graph", action="store_true")
    _add(p, "--disable-overlap-schedule", action="store_true")
    _add(p, "--enable-torch-compile", action="store_true")
    _add(p, "--decode-log-interval", type=int, default=40)
    _add(p, "--skip-server-warmup", action="store_true")
    _add(p, "--stream-response-default-include-usage", action="store_true")
    _add(p, "--enable-cache-report", action="store_true")
    _add(p, "--random-seed", type=int)
    _add(p, "--watchdog-timeout", type=float, default=300)
    _add(p, "--device")
    _add(p, "--base-gpu-id", type=int, default=0)
    _add(p, "--nccl-port", type=int)
    _add(p, "--chat-template")
    _add(p, "--enable-mixed-chunk", action="store_true")
    _add(p, "--uvicorn-access-log-exclude-prefixes", nargs="*", default=[])
    _add(p, "--mamba-track-interval", type=int, default=256)
    return p


def _human_int(s: str) -> int:
    mult = {"k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2}
    return int(float(s[:-1]) * mult[s[-1]]) if s and s[-1] in mult else int(s)


def _gpu_mem_mib() -> int | None:
    """memory.total of the first visible GPU of the sim host (SGLang asks nvidia-smi the same)."""
    host = os.environ.get("DFLASH_SIM_HOST_DIR")
    if not host:
        return None
    try:
        gpus = json.loads((Path(host) / "spec.json").read_text())["gpus"]
    except (OSError, ValueError, KeyError):
        return None
    visible = visible_gpus(len(gpus))
    return gpus[visible[0]]["memory_mib"] if visible else None


def visible_gpus(n: int) -> list[int]:
    """Physical GPU indices per CUDA_VISIBLE_DEVICES (all when unset, invalid entries end the list as CUDA does)."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return list(range(n))
    out = []
    for tok in cvd.split(","):
        tok = tok.strip()
        if not tok.isdigit() or int(tok) >= n:
            break
        out.append(int(tok))
    return out


def load_model_config(path: str) -> dict[str, Any]:
    p = Path(path).expanduser()
    cfg = p / "config.json"
    if not p.is_dir():
        raise OSError(
            f"Incorrect path_or_model_id: '{path}'. Please provide either the path to a local folder or "
            "the repo_id of a model on the Hub."
        )
    if not cfg.is_file():
        raise OSError(
            f"{path} does not appear to have a file named config.json. Checkout "
            f"'https://huggingface.co/{path}/tree/None' for available files."
        )
    config: dict[str, Any] = json.loads(cfg.read_text())
    return config


def is_hybrid(cfg: dict[str, Any]) -> bool:
    return "linear_attention" in (cfg.get("layer_types") or cfg.get("text_config", {}).get("layer_types") or [])


def _resolve(a: ServerArgs) -> None:
    """ServerArgs.__post_init__: defaults and validation, in SGLang's order."""
    a.resolved = True
    if a.model_path.lower() in ("dummy", "none"):
        return
    a.tokenizer_path = a.tokenizer_path or a.model_path
    a.served_model_name = a.served_model_name or a.model_path
    a.gpu_mem_mib = _gpu_mem_mib()
    if a.gpu_mem_mib is None and a.device is None:
        raise RuntimeError("No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) is available.")
    gpu_gib = (a.gpu_mem_mib or 0) / 1024
    if a.chunked_prefill_size is None:
        a.chunked_prefill_size = 2048 if gpu_gib < 35 else 4096 if gpu_gib < 60 else 8192 if gpu_gib < 90 else 16384
    if a.cuda_graph_max_bs is None:
        small = a.tp_size < 4
        a.cuda_graph_max_bs = (
            8
            if gpu_gib < 20
            else (24 if small else 80)
            if gpu_gib < 35
            else (32 if small else 160)
            if gpu_gib < 60
            else (256 if small else 512)
            if gpu_gib < 160
            else 512
        )
    if a.attention_backend is None:
        a.attention_backend = "flashinfer"
        a.notes.append(f"Attention backend not specified. Use {a.attention_backend} backend by default.")
    a.model_config = load_model_config(a.model_path)
    if a.context_length is None:
        a.context_length = int(a.model_config.get("max_position_embeddings", 4096))
    if a.speculative_algorithm is not None:
        _handle_speculative(a)
    if is_hybrid(a.model_config):
        _handle_mamba(a)
    if a.mem_fraction_static is None:
        a.mem_fraction_static = default_mem_fraction(a)


def default_mem_fraction(a: ServerArgs) -> float:
    """`round((gpu_mem - reserved_mem)/gpu_mem, 3)` with SGLang's reserved_mem formula (docs/sglang.md §5.2)."""
    if not a.gpu_mem_mib:
        return 0.88
    reserved = (
        512
        + max(a.chunked_prefill_size or 2048, 2048) * 1.5
        + (a.cuda_graph_max_bs or 160) * 2
        + a.tp_size * a.pp_size / 8 * 1024
    )
    if a.gpu_mem_mib > 60 * 1024:
        reserved = max(reserved, 10240)
    if a.speculative_algorithm in EAGLE_FAMILY:
        reserved += 4096
    elif a.speculative_algorithm == "STANDALONE":
        reserved += 6144
    return round((a.gpu_mem_mib - reserved) / a.gpu_mem_mib, 3)


def _handle_dflash(a: ServerArgs) -> None:
    """SGLang's `_handle_dflash` (arg_groups/speculative_hook.py), its checks and their exact messages."""
    if a.enable_dp_attention:
        raise ValueError("Currently DFLASH speculative decoding does not support dp attention.")
    if a.pp_size != 1:
        raise ValueError("Currently DFLASH speculative decoding only supports pp_size == 1.")
    if a.speculative_draft_model_path is None:
        raise ValueError("DFLASH speculative decoding requires setting --speculative-draft-model-path.")
    for name in ("speculative_num_steps", "speculative_eagle_topk"):
        v = getattr(a, name)
        if v is not None and int(v) != 1:
            a.notes.append(f"DFLASH only supports {name} == 1; overriding {name}={v} to 1.")
        setattr(a, name, 1)
    b = a.speculative_dflash_block_size
    if b is not None:
        if b <= 0:
            raise ValueError(f"DFLASH requires --speculative-dflash-block-size to be positive, got {b}.")
        if a.speculative_num_draft_tokens is not None and a.speculative_num_draft_tokens != b:
            raise ValueError(
                "Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but they differ. "
                f"For DFLASH they must match. speculative_num_draft_tokens={a.speculative_num_draft_tokens}, "
                f"speculative_dflash_block_size={b}."
            )
        a.speculative_num_draft_tokens = b
    if a.speculative_num_draft_tokens is None:
        block = None
        try:
            block = load_model_config(a.speculative_draft_model_path).get("block_size")
        except OSError as e:  # SGLang warns and goes on; the draft load fails later, at the draft weights
            a.notes.append(
                "Failed to infer DFLASH block_size from draft model config; defaulting speculative_num_draft_tokens "
                f"to 16. Error: {e}"
            )
        if isinstance(block, int) and block > 0:
            a.speculative_num_draft_tokens = block
        else:
            a.speculative_num_draft_tokens = 16
            a.notes.append("speculative_num_draft_tokens is not set; defaulting to 16 for DFLASH.")
    w = a.speculative_draft_window_size
    if w is not None and w < a.speculative_num_draft_tokens:
        raise ValueError(
            "--speculative-draft-window-size must be >= --speculative-num-draft-tokens (block_size). "
            f"window_size={w}, block_size={a.speculative_num_draft_tokens}."
        )
    if a.max_running_requests is None:
        a.max_running_requests = 48
        a.notes.append(
            "Max running requests is reset to 48 for speculative decoding. You can override this by "
            "explicitly setting --max-running-requests."
        )
    a.disable_overlap_schedule = True
    a.notes.append(
        "Overlap scheduler is disabled when using DFLASH speculative decoding (spec v2 is not supported yet)."
    )


def _handle_speculative(a: ServerArgs) -> None:
    if a.speculative_algorithm == "NEXTN":
        a.speculative_algorithm = "EAGLE"
    if a.speculative_algorithm == "DFLASH":
        _handle_dflash(a)
        return
    if a.speculative_algorithm in ("EAGLE", "EAGLE3", "STANDALONE"):
        if a.max_running_requests is None:
            a.max_running_requests = 48
            a.notes.append(
                "Max running requests is reset to 48 for speculative decoding. You can override this by "
                "explicitly setting --max-running-requests."
            )
        if a.speculative_eagle_topk is not None and a.speculative_eagle_topk > 1:
            a.disable_overlap_schedule = True
            a.notes.append(
                "Spec v1 is used for eagle/eagle3/standalone speculative decoding because spec v2 currently "
                "only supports topk = 1."
            )
        elif os.environ.get("SGLANG_ENABLE_SPEC_V2", "1").lower() in ("0", "false"):
            a.disable_overlap_schedule = True
            a.notes.append(
                "Spec v1 is used for eagle/eagle3/standalone speculative decoding because SGLANG_ENABLE_SPEC_V2=False."
            )
        else:
            a.notes.append("Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding.")
        if a.enable_mixed_chunk:
            a.enable_mixed_chunk = False
        if a.speculative_draft_model_path is None:
            a.speculative_draft_model_path = a.model_path
        if a.speculative_num_steps is None:
            assert a.speculative_eagle_topk is None and a.speculative_num_draft_tokens is None
            arch = (a.model_config.get("architectures") or [""])[0]
            a.speculative_num_steps, a.speculative_eagle_topk, a.speculative_num_draft_tokens = (
                (5, 4, 8) if arch == "LlamaForCausalLM" else (3, 1, 4)
            )
        if a.attention_backend == "trtllm_mha" and a.speculative_eagle_topk > 1:  # type: ignore[operator]
            raise ValueError("trtllm_mha backend only supports topk = 1 for speculative decoding.")
        if a.speculative_eagle_topk == 1 and a.speculative_num_draft_tokens != a.speculative_num_steps + 1:
            a.notes.append(
                "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
            )
            a.speculative_num_draft_tokens = a.speculative_num_steps + 1
        if a.speculative_eagle_topk > 1 and a.page_size > 1 and a.attention_backend not in ("flashinfer", "fa3"):  # type: ignore[operator]
            raise ValueError(
                "speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect results "
                "for paged attention backends. This combination is only supported for the 'flashinfer' "
                "backend."
            )


def _handle_mamba(a: ServerArgs) -> None:
    strategy = a.mamba_scheduler_strategy if sglang_version().startswith("0.5.11") else a.mamba_radix_cache_strategy
    if strategy == "auto":
        strategy = "no_buffer"
    if strategy == "extra_buffer" and a.disable_radix_cache:
        raise ValueError(
            "--mamba-scheduler-strategy extra_buffer requires radix cache; do not set --disable-radix-cache."
        )
    if a.speculative_algorithm is not None and strategy == "no_buffer" and not a.disable_radix_cache:
        arch = (a.model_config.get("architectures") or ["?"])[0]
        raise ValueError(
            f"Speculative decoding for {arch} is not compatible with radix cache when using "
            "--mamba-scheduler-strategy no_buffer.To use radix cache with speculative decoding, please "
            "use --mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1."
        )
    if strategy == "extra_buffer" and a.speculative_num_draft_tokens:
        assert a.mamba_track_interval >= a.speculative_num_draft_tokens, (
            f"mamba_track_interval {a.mamba_track_interval} must be >= speculative_num_draft_tokens"
        )
    a.mamba_scheduler_strategy = strategy


def parse(argv: list[str], version: str | None = None) -> argparse.Namespace:
    return build_parser(version).parse_args(argv)


def merge_config(argv: list[str], parser: argparse.ArgumentParser | None = None) -> list[str]:
    """SGLang's `--config FILE.yaml` (ConfigArgumentMerger): the file's keys become `--key value` words put
    before the command line's (so the command line wins), in memory; the process argv keeps only the path.
    The sim reads the YAML subset the console writes, a JSON object (a YAML flow mapping)."""
    idx = [i for i, a in enumerate(argv) if a == "--config"]
    if not idx:
        return argv
    if len(idx) > 1:
        raise ValueError("Multiple config files specified! Only one allowed.")
    i = idx[0]
    if i == len(argv) - 1:
        raise ValueError("No config file specified after --config flag!")
    path = Path(argv[i + 1])
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ValueError(f"Config file must be YAML format, got: {path.suffix}")
    if not path.exists():
        raise ValueError(f"Config file not found: {argv[i + 1]}")
    text = path.read_text()
    data = json.loads(text) if text.strip() else {}
    if not isinstance(data, dict):
        raise ValueError("Config file must contain a dictionary at root level")
    store_true = {a.dest for a in (parser or build_parser())._actions if isinstance(a, argparse._StoreTrueAction)}
    words: list[str] = []
    for key, value in data.items():
        if isinstance(value, bool):
            if key.replace("-", "_") in store_true:
                words += [f"--{key}"] if value else []
            else:
                words += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            words += [f"--{key}", *(str(v) for v in value)] if value else []
        else:
            words += [f"--{key}", str(value)]
    return words + argv[:i] + argv[i + 2 :]


def prepare_server_args(argv: list[str]) -> ServerArgs:
    """argparse (exit 2) + ServerArgs.__post_init__ (SGLang's ValueError/AssertionError texts)."""
    ns = parse(merge_config(list(argv)))
    known = {f.name for f in dataclasses.fields(ServerArgs) if f.repr}
    return ServerArgs(**{k: v for k, v in vars(ns).items() if k in known})
