"""Real SGLang logs and nvidia-smi captures kept in the repo, so a clone alone runs every test (sources: README.md)."""

from __future__ import annotations

from pathlib import Path

SAMPLES = Path(__file__).resolve().parent
SGLANG_LOGS = SAMPLES / "sglang-logs"
NVIDIA_SMI = SAMPLES / "nvidia-smi"
