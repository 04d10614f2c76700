"""The sim server's VRAM arithmetic: weights, KV/Mamba pools, CUDA graphs, as SGLang sizes them.

All sizes in GiB ("GB" in SGLang's logs is GiB). KV pool: `rest = avail_after_weights -
total * (1 - mem_fraction_static)`; rest <= 0 is SGLang's "Not enough memory" (docs/sglang.md §6.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from console.sim.args import ServerArgs, is_hybrid

GIB = 1 << 30
CONTEXT_GIB = 0.48
"""CUDA context + allocator warm-up per rank, taken at `Init torch distributed`."""
NCCL_GIB = 0.13
CAPTURE_FAILED_MSG = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
    "3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)


def capture_bs(a: ServerArgs) -> list[int]:
    """Decode CUDA-graph batch sizes (server_args.py:1497), capped at --cuda-graph-max-bs."""
    if a.cuda_graph_bs:
        return sorted(a.cuda_graph_bs)
    top = a.cuda_graph_max_bs or 160
    if a.speculative_algorithm:
        bs = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8), *range(272, top + 1, 16)]
    else:
        bs = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, top + 1, 32)]
    return [b for b in bs if b <= top]


def piecewise_tokens(a: ServerArgs) -> list[int]:
    top = a.chunked_prefill_size or 4096
    return [t for t in (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192) if t <= top]


def piecewise_enabled(a: ServerArgs) -> bool:
    arch = (a.model_config.get("architectures") or [""])[0]
    return not (
        a.disable_piecewise_cuda_graph
        or a.disable_cuda_graph
        or a.speculative_algorithm
        or a.pp_size > 1
        or arch.endswith("ConditionalGeneration")
    )


@dataclass(frozen=True)
class Pools:
    """What the KV phase allocates on one rank."""

    kv_tokens: int
    k_gib: float
    mamba_slots: int
    conv_gib: float
    ssm_gib: float

    @property
    def total_gib(self) -> float:
        return 2 * self.k_gib + self.conv_gib + self.ssm_gib


def weights_gib(weight_bytes: int, tp: int) -> float:
    return weight_bytes / tp / GIB


def draft_weights_gib(cfg: dict[str, Any], weight_bytes: int, tp: int) -> float:
    layers = max(1, int(cfg.get("num_hidden_layers", 32)))
    return weight_bytes * max(1, int(cfg.get("mtp_num_hidden_layers", 1))) / layers * 1.5 / tp / GIB


def kv_cell_bytes(cfg: dict[str, Any], tp: int) -> int:
    """Bytes of K+V per token per rank over the full-attention layers (bf16)."""
    layers = cfg.get("layer_types") or ["full_attention"] * int(cfg.get("num_hidden_layers", 32))
    full = sum(1 for t in layers if t == "full_attention")
    kv_heads = max(1, int(cfg.get("num_key_value_heads", 8)) // tp)
    head_dim = int(cfg.get("head_dim") or cfg.get("hidden_size", 4096) // cfg.get("num_attention_heads", 32))
    return full * kv_heads * head_dim * 2 * 2


def mamba_slot_gib(cfg: dict[str, Any], tp: int) -> tuple[float, float]:
    """(conv_state, ssm_state) GiB per Mamba slot per rank: linear layers x per-layer recurrent state."""
    linear = sum(1 for t in cfg.get("layer_types", []) if t == "linear_attention")
    vh = max(1, int(cfg.get("linear_num_value_heads", 32)) // tp)
    kh = max(1, int(cfg.get("linear_num_key_heads", 16)) // tp)
    kd, vd, k = (
        int(cfg.get("linear_key_head_dim", 128)),
        int(cfg.get("linear_value_head_dim", 128)),
        int(cfg.get("linear_conv_kernel_dim", 4)),
    )
    ssm = linear * vh * kd * vd * 4 / GIB
    conv = linear * (2 * kh * kd + vh * vd) * (k - 1) * 2 / GIB
    return conv, ssm


def plan_pools(a: ServerArgs, rest_gib: float, tp: int) -> Pools:
    cfg = a.model_config
    conv = ssm = 0.0
    slots = 0
    if is_hybrid(cfg):
        c1, s1 = mamba_slot_gib(cfg, tp)
        want = (a.max_running_requests or 128) * (2 if a.mamba_scheduler_strategy == "extra_buffer" else 1) + 1
        slots = max(1, min(want, int(rest_gib * 0.4 / (c1 + s1))))
        conv, ssm = slots * c1, slots * s1
    kv_gib = rest_gib - conv - ssm
    tokens = int(kv_gib * GIB // kv_cell_bytes(cfg, tp))
    if a.max_total_tokens:
        tokens = min(tokens, a.max_total_tokens)
    k_gib = tokens * kv_cell_bytes(cfg, tp) / 2 / GIB
    return Pools(tokens, k_gib, slots, conv, ssm)


def graph_gib(a: ServerArgs) -> float:
    hidden = int(a.model_config.get("hidden_size", 4096))
    return 0.06 + 0.0035 * max(capture_bs(a) or [1]) * hidden / 4096


def auto_max_running(tokens: int, context_len: int) -> int:
    return max(1, min(max(min(int(tokens / max(1, context_len) * 512), 4096), 2048), tokens // 2))


def torch_oom(want_gib: float, dev: int, total_gib: float, free_gib: float, used_gib: float) -> str:
    """PyTorch's own CUDA OOM text."""
    alloc = max(0.0, used_gib - CONTEXT_GIB)
    return (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {_size(want_gib)}. GPU {dev} has a total "
        f"capacity of {total_gib:.2f} GiB of which {_size(free_gib)} is free. Including non-PyTorch memory, this "
        f"process has {used_gib:.2f} GiB memory in use. Of the allocated memory {alloc:.2f} GiB is allocated by "
        f"PyTorch, and {math.floor(alloc * 3) % 97 + 2:.2f} MiB is reserved by PyTorch but unallocated. If reserved "
        "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
        "fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def _size(gib: float) -> str:
    return f"{gib:.2f} GiB" if gib >= 1 else f"{gib * 1024:.2f} MiB"
