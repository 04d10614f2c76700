"""Where the palette's Screenshot is saved: a folder that exists (the XDG download folder, ~/Downloads, else the
console's state folder), never a missing ~/Downloads (Textual's default, which failed with no folder named)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import platformdirs

from console.config import APP_NAME, user_state_dir

XDG_USER_DIR_TIMEOUT_S = 2.0


def choose_dir(
    env: Mapping[str, str], home: Path, xdg_answer: str | None, state_dir: Path, is_dir: Callable[[Path], bool]
) -> Path:
    """The first of `$XDG_DOWNLOAD_DIR`, `xdg-user-dir DOWNLOAD`'s answer (which is $HOME when none is set: that
    is no download folder), ~/Downloads that is a folder; else `state_dir`/screenshots (made when saving)."""
    for raw in (env.get("XDG_DOWNLOAD_DIR"), xdg_answer):
        if raw and raw.strip():
            path = Path(os.path.expanduser(raw.strip()))
            if path != home and is_dir(path):
                return path
    if is_dir(home / "Downloads"):
        return home / "Downloads"
    return state_dir / "screenshots"


def xdg_download_dir() -> str | None:
    """`xdg-user-dir DOWNLOAD`'s answer, None where it is not installed or fails."""
    exe = shutil.which("xdg-user-dir")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "DOWNLOAD"], capture_output=True, text=True, timeout=XDG_USER_DIR_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def screenshot_dir(demo: bool = False) -> Path:
    """The folder a screenshot goes to now, made if it is the state folder's. The demo's state folder is a temp
    folder removed when it ends: a demo's screenshot falls back to the user's own state folder instead."""
    env = os.environ
    home = Path.home()
    given = env.get("XDG_DOWNLOAD_DIR")
    answer = None if given and Path(os.path.expanduser(given)).is_dir() else xdg_download_dir()
    state = Path(platformdirs.user_state_dir(APP_NAME)) if demo else user_state_dir()
    path = choose_dir(env, home, answer, state, Path.is_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path
