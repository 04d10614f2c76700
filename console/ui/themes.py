"""Loads Textual themes from TOML files (built into the package, or the user's themes folder): colours live in data."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any

from textual.theme import Theme

from console.config import MAX_DEPTH, user_config_dir
from console.tomlpos import too_deep

BUILTIN_DIR: Traversable = files("console") / "themes"
"""The built-in themes: package data, so they are found wherever the package is installed (a checkout, a wheel)."""
DEFAULT_THEME = "dflash-dark"

SEMANTIC_DEFAULTS: dict[str, str] = {
    "phase-ready": "#5FD787",
    "phase-serving": "#87FFAF",
    "phase-starting": "#FFD75F",
    "phase-crashed": "#FF5F5F",
    "phase-stopped": "#808080",
    "gpu-hot": "#FF5F5F",
    "gpu-warm": "#FFAF5F",
    "host-down": "#FF5F5F",
    "stale": "#6C6C6C",
    "external": "#AF87FF",
    "vram-bar": "#5FAFD7",
    "util-bar": "#D787D7",
    "pane-free": "#5A606B",
}
"""Semantic colours every theme may override in its [variables] table; also the CSS defaults."""

_FIELDS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)


@dataclass
class ThemeLoad:
    """Result of scanning theme folders: the themes that parsed and one line per file that did not."""

    themes: list[Theme] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def theme_from_toml(text: str, fallback_name: str) -> Theme:
    """Builds a Theme from a TOML document; raises ValueError with a readable reason.

    Nesting is bounded before tomllib sees the text: tomllib recurses and dies near 300 levels.
    """
    if (deep := too_deep(text, MAX_DEPTH)) is not None:
        raise ValueError(f"{deep[0]}:{deep[1]}: arrays/inline tables nested more than {MAX_DEPTH} deep")
    try:
        data = tomllib.loads(text)
    except RecursionError:  # the depth scan should make this unreachable; never a traceback all the same
        raise ValueError("values nested too deep to parse") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(str(e)) from e
    if "primary" not in data:
        raise ValueError("missing required key 'primary'")
    unknown = set(data) - {*_FIELDS, "name", "dark", "variables"}
    if unknown:
        raise ValueError(f"unknown keys: {', '.join(sorted(unknown))}")
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ValueError("[variables] must map names to colour strings")
    kwargs: dict[str, Any] = {k: str(data[k]) for k in _FIELDS if k in data}  # Theme's fields are colour strings
    return Theme(
        name=str(data.get("name", fallback_name)),
        dark=bool(data.get("dark", True)),
        variables={**SEMANTIC_DEFAULTS, **variables},
        **kwargs,
    )


def theme_dirs() -> list[Traversable]:
    """Built-in themes first, so a user file with the same name overrides one."""
    return [BUILTIN_DIR, user_config_dir() / "themes"]


def load_themes(dirs: Sequence[Traversable] | None = None) -> ThemeLoad:
    """Reads every *.toml theme in the folders (paths or package resources), collecting failures instead of raising."""
    out = ThemeLoad()
    for d in dirs if dirs is not None else theme_dirs():
        if not d.is_dir():
            continue
        for entry in sorted((e for e in d.iterdir() if e.name.endswith(".toml")), key=lambda e: e.name):
            try:
                out.themes.append(theme_from_toml(entry.read_text(encoding="utf-8"), entry.name.removesuffix(".toml")))
            except (OSError, ValueError) as e:
                out.problems.append(f"{entry}: {e}")
    return out
