"""Refresh a screen's bindings only when their enabled state changed.

`Screen.refresh_bindings()` makes the Footer recompose and restyle every key; called on every
state sync it was 40 % of the console's CPU under a log flood (benchmarks/bench_console_cpu.py).
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from textual.screen import Screen

_signatures: WeakKeyDictionary[Screen[Any], tuple[object, ...]] = WeakKeyDictionary()
"""Each screen's bindings (key, enabled, action) as last refreshed."""


def refresh_bindings_if_changed(screen: Screen[Any]) -> None:
    try:
        sig = tuple((key, ab.enabled, ab.binding.action) for key, ab in screen.active_bindings.items())
    except Exception:  # not mounted yet: refresh as usual
        screen.refresh_bindings()
        return
    if sig != _signatures.get(screen):
        _signatures[screen] = sig
        screen.refresh_bindings()
