"""Refresh a screen's bindings only when their enabled state changed.

`Screen.refresh_bindings()` makes the Footer recompose and restyle every key; called on every
state sync it was 40 % of the console's CPU under a log flood (benchmarks/bench_console_cpu.py).
"""

from __future__ import annotations

from textual.screen import Screen


def refresh_bindings_if_changed(screen: Screen) -> None:
    try:
        sig = tuple((key, ab.enabled, ab.binding.action) for key, ab in screen.active_bindings.items())
    except Exception:  # not mounted yet: refresh as usual
        screen.refresh_bindings()
        return
    if sig != getattr(screen, "_dfc_binding_sig", None):
        screen._dfc_binding_sig = sig  # type: ignore[attr-defined]
        screen.refresh_bindings()
