"""The real sample logs (tests/samples/sglang-logs), for the SGLang-knowledge tests."""

from __future__ import annotations

from pathlib import Path

from tests.samples import SGLANG_LOGS as SAMPLES


def sample(prefix: str) -> bytes:
    (path,) = SAMPLES.glob(f"{prefix}*.log")
    return path.read_bytes()


def all_samples() -> list[Path]:
    paths = sorted(SAMPLES.glob("*.log"))
    if not paths:  # parametrised over nothing, every sample test would pass without running
        raise FileNotFoundError(f"no sample logs in {SAMPLES}")
    return paths
