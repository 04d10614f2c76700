"""Transport tests run against real sshd test hosts, with the user's own ssh config and trust file kept out."""

from __future__ import annotations

from pathlib import Path

import pytest

# sshhosts fixtures are registered by the top-level conftest.py


@pytest.fixture(autouse=True)
def _isolated_ssh_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ~/.ssh/config, no real console trust file: each test sees only what it writes."""
    empty = tmp_path / "ssh_config"
    empty.write_text("")
    monkeypatch.setenv("DFLASH_SSH_CONFIG", str(empty))
    monkeypatch.setenv("DFLASH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
