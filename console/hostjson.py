"""Depth-limited JSON for text that comes from a host (meta.json, config.json, /model_info, SSE events)."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64
"""Far deeper than anything SGLang or the console writes; shallow enough that no recursive walk of the
result (redaction, pydantic, printing) can hit Python's recursion limit."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


class HostJsonError(ValueError):
    """A document from a host that is not JSON, or nested too deep; the message names where it came from."""

    def __init__(self, what: str, detail: str, *, too_deep: bool = False) -> None:
        self.what = what
        self.detail = detail
        self.too_deep = too_deep
        super().__init__(f"{what}: {detail}")


def depth(text: str) -> int:
    """Deepest nesting of arrays/objects, counted without recursion (brackets inside strings do not count)."""
    if text.count("[") + text.count("{") == 0:
        return 0
    deepest = level = 0
    for b in _BRACKET.findall(_STRING.sub('""', text)):
        if b in "[{":
            level += 1
            deepest = max(deepest, level)
        else:
            level -= 1
    return deepest


def loads(text: str | bytes, what: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads that refuses documents nested deeper than max_depth (and never lets RecursionError out).

    The bracket scan runs only when the text holds more opening brackets than max_depth, so small
    documents (an SSE event) cost one str.count more than json.loads."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if text.count("[") + text.count("{") > max_depth and depth(text) > max_depth:
        raise HostJsonError(what, f"JSON nested deeper than {max_depth} levels", too_deep=True)
    try:
        return json.loads(text)
    except RecursionError:
        raise HostJsonError(what, f"JSON nested deeper than {max_depth} levels", too_deep=True) from None
    except ValueError as e:
        raise HostJsonError(what, f"not JSON ({e})") from None
