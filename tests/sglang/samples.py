"""The real sample logs from /work/shared/samples, for the SGLang-knowledge tests."""

from __future__ import annotations

from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "samples" / "sglang-logs"
if not SAMPLES.is_dir():
    SAMPLES = Path("/work/shared/samples/sglang-logs")


def sample(prefix: str) -> bytes:
    (path,) = SAMPLES.glob(f"{prefix}*.log")
    return path.read_bytes()


def all_samples() -> list[Path]:
    return sorted(SAMPLES.glob("*.log"))
