"""Sim host specs: GPUs exactly as nvidia-smi names them, models, versions, speeds and faults.

Plain dataclasses (no pydantic) so the per-call stand-ins (`nvidia-smi`) start fast; a spec is
written to `HOST_DIR/spec.json` by `build_host` and read back with `SimHostSpec.from_dict`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

FAULTS = (
    "lacks-libavutil",  # the torchcodec import fails: libavutil.so.58 missing (OSError)
    "nvidia-smi-missing",  # no bin/nvidia-smi at all
    "nvidia-smi-hang",  # nvidia-smi never answers
    "nvidia-smi-garbage",  # nvidia-smi prints noise
    "nvidia-smi-driver",  # "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
)


@dataclass(frozen=True)
class GpuSpec:
    """One GPU; `name` and `memory_mib` are what nvidia-smi prints."""

    name: str
    memory_mib: int
    uuid: str
    pci_bus_id: str
    power_limit_w: float
    idle_power_w: float
    sm_clock_max: int
    sm_clock_idle: int = 210
    idle_temp_c: int = 30
    fan: bool = True
    """Whether the table shows a fan percentage (workstation cards) or N/A (passive server cards)."""
    persistence: str = "Off"
    base_used_mib: int = 0
    """VRAM in use with no process at all (display driver etc.)."""


@dataclass(frozen=True)
class ModelSpec:
    """A model folder: config.json fields and the weight size on disk."""

    name: str
    architecture: str
    model_type: str
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int
    weight_bytes: int
    shards: int
    vocab_size: int = 151936
    torch_dtype: str = "bfloat16"
    full_attention_interval: int = 0
    """>0: hybrid GDN model; every Nth layer is full attention, the rest linear attention."""
    mtp_layers: int = 0
    reasoning: bool = False
    """Thinks in <think>...</think> when chat_template_kwargs.enable_thinking is not false."""
    block_size: int = 0
    """>0: a DFlash draft model; its config.json carries `block_size` (SGLang reads it as the verify width)."""

    @property
    def hybrid(self) -> bool:
        return self.full_attention_interval > 0

    def layer_types(self) -> list[str]:
        n = self.full_attention_interval
        return [
            "full_attention" if n and (i + 1) % n == 0 else "linear_attention" for i in range(self.num_hidden_layers)
        ]

    def config_json(self) -> dict[str, Any]:
        """A config.json in the HF layout of the real model family."""
        cfg: dict[str, Any] = {
            "architectures": [self.architecture],
            "model_type": self.model_type,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "max_position_embeddings": self.max_position_embeddings,
            "vocab_size": self.vocab_size,
            "torch_dtype": self.torch_dtype,
            "rms_norm_eps": 1e-06,
            "tie_word_embeddings": False,
        }
        if self.hybrid:
            cfg.update(
                {
                    "layer_types": self.layer_types(),
                    "full_attention_interval": self.full_attention_interval,
                    "linear_conv_kernel_dim": 4,
                    "linear_key_head_dim": 128,
                    "linear_value_head_dim": 128,
                    "linear_num_key_heads": 16,
                    "linear_num_value_heads": 48,
                }
            )
        if self.mtp_layers:
            cfg["mtp_num_hidden_layers"] = self.mtp_layers
        if self.block_size:
            cfg["block_size"] = self.block_size
        return cfg


@dataclass(frozen=True)
class SimHostSpec:
    """Everything that makes a sim host look like one particular real machine."""

    name: str
    gpus: list[GpuSpec]
    models: list[ModelSpec]
    driver_version: str = "580.126.09"
    cuda_version: str = "13.0"
    sglang_version: str = "0.5.11"
    """"0.5.11" (default) or "0.5.23": changes log wording and flags as the real versions do."""
    time_scale: float = 1.0
    """Multiplies every startup delay; 1.0 is a realistic ~30 s load of a 27B model, 0.1 a few seconds."""
    token_rate_per_gpu: float = 700.0
    """Peak decode tokens/s per GPU at full batch (see console.sim.engine for the formula)."""
    half_concurrency: float = 16.0
    """Concurrency at which a server reaches half its peak throughput."""
    faults: list[str] = field(default_factory=list)
    python_name: str = "python3"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SimHostSpec:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        kw["gpus"] = [GpuSpec(**g) for g in d.get("gpus", [])]
        kw["models"] = [ModelSpec(**m) for m in d.get("models", [])]
        return cls(**kw)

    def with_(self, **kw: Any) -> SimHostSpec:
        return replace(self, **kw)

    def model(self, name: str) -> ModelSpec | None:
        return next((m for m in self.models if m.name == name), None)


def load_spec(host_dir: str | Path) -> SimHostSpec:
    return SimHostSpec.from_dict(json.loads((Path(host_dir) / "spec.json").read_text()))


def _uuid(host: str, i: int) -> str:
    import hashlib

    h = hashlib.sha1(f"{host}/{i}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


QWEN36_27B = ModelSpec(
    name="Qwen3.6-27B",
    architecture="Qwen3_5ForConditionalGeneration",
    model_type="qwen3_5",
    num_hidden_layers=64,
    hidden_size=5120,
    num_attention_heads=24,
    num_key_value_heads=4,
    head_dim=256,
    max_position_embeddings=262144,
    weight_bytes=55_630_000_000,
    shards=15,
    vocab_size=248320,
    full_attention_interval=4,
    mtp_layers=1,
    reasoning=True,
)
LLAMA31_8B = ModelSpec(
    name="Llama-3.1-8B-Instruct",
    architecture="LlamaForCausalLM",
    model_type="llama",
    num_hidden_layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=131072,
    weight_bytes=16_060_522_496,
    shards=4,
    vocab_size=128256,
)
QWEN3_06B = ModelSpec(
    name="Qwen3-0.6B",
    architecture="Qwen3ForCausalLM",
    model_type="qwen3",
    num_hidden_layers=28,
    hidden_size=1024,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=40960,
    weight_bytes=1_503_300_328,
    shards=1,
    reasoning=True,
)
QWEN36_27B_DFLASH = ModelSpec(
    name="Qwen3.6-27B-DFlash-b16",
    architecture="DFlashDraftModel",
    model_type="qwen3",
    num_hidden_layers=5,
    hidden_size=5120,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=262144,
    weight_bytes=3_460_000_000,
    shards=1,
    vocab_size=248320,
    block_size=16,
)
"""A DFlash drafter for Qwen3.6-27B (block diffusion draft, 16 tokens a block), as the team trains them."""
DEFAULT_MODELS = [QWEN36_27B, LLAMA31_8B, QWEN3_06B, QWEN36_27B_DFLASH]


def _a6000(i: int) -> GpuSpec:
    return GpuSpec(
        name="NVIDIA RTX A6000",
        memory_mib=49140,
        uuid=_uuid("ct129", i),
        pci_bus_id=f"00000000:{0x3B + 0x9D * i:02X}:00.0",
        power_limit_w=300.0,
        idle_power_w=22.0,
        sm_clock_max=1800,
        idle_temp_c=34,
        fan=True,
        persistence="Off",
    )


def _pro6000(host: str, i: int) -> GpuSpec:
    return GpuSpec(
        name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
        memory_mib=97887,
        uuid=_uuid(host, i),
        pci_bus_id=f"00000000:{0x05 + 0x20 * i:02X}:00.0",
        power_limit_w=600.0,
        idle_power_w=45.0,
        sm_clock_max=2430,
        idle_temp_c=27,
        fan=False,
        persistence="On",
    )


CT129_SPEC = SimHostSpec(
    name="ct129",
    gpus=[_a6000(i) for i in range(2)],
    models=list(DEFAULT_MODELS),
    driver_version="580.126.09",
    cuda_version="13.0",
    token_rate_per_gpu=450.0,
)
BLACKWELL_SPEC = SimHostSpec(
    name="blackwell",
    gpus=[_pro6000("blackwell", i) for i in range(4)],
    models=list(DEFAULT_MODELS),
    driver_version="580.95.05",
    cuda_version="13.0",
    token_rate_per_gpu=1100.0,
)
BLACKWELL8_SPEC = SimHostSpec(
    name="blackwell8",
    gpus=[_pro6000("blackwell8", i) for i in range(8)],
    models=list(DEFAULT_MODELS),
    driver_version="580.95.05",
    cuda_version="13.0",
    token_rate_per_gpu=1100.0,
)
PRESET_SPECS = {"ct129": CT129_SPEC, "blackwell": BLACKWELL_SPEC, "blackwell8": BLACKWELL8_SPEC}
