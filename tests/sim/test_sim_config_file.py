"""The sim's `--config FILE.yaml` merges like SGLang's ConfigArgumentMerger: file keys first, the command line wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.sim.args import merge_config


def test_config_keys_go_first_and_the_command_line_wins(tmp_path: Path) -> None:
    cfg = tmp_path / "secrets.yaml"
    cfg.write_text('{"api-key": "k1", "enable-metrics": true, "port": 31000}\n')
    out = merge_config(["--model-path", "/m", "--config", str(cfg), "--port", "30000"])
    assert out == ["--api-key", "k1", "--enable-metrics", "--port", "31000", "--model-path", "/m", "--port", "30000"]
    assert merge_config(["--model-path", "/m"]) == ["--model-path", "/m"]


@pytest.mark.parametrize(
    ("name", "text", "error"),
    [
        ("c.json", "{}", "Config file must be YAML format, got: .json"),
        ("missing.yaml", None, "Config file not found"),
        ("list.yaml", "[1, 2]", "Config file must contain a dictionary at root level"),
    ],
)
def test_config_errors_are_sglangs(tmp_path: Path, name: str, text: str | None, error: str) -> None:
    p = tmp_path / name
    if text is not None:
        p.write_text(text)
    with pytest.raises(ValueError, match=error):
        merge_config(["--config", str(p)])
