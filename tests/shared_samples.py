"""Where the read-only shared samples are: `../shared` beside the checkout (CI lays it there), else /work/shared."""

from __future__ import annotations

from pathlib import Path

_BESIDE = Path(__file__).resolve().parents[2] / "shared" / "samples"
SAMPLES = _BESIDE if _BESIDE.is_dir() else Path("/work/shared/samples")
