"""The console with a candidate UI fix applied at run time, to measure it side by side (`--entry THIS`).

Two changes, both for the UI owner to make for real in console/ui: (1) screens refresh their
bindings only when the set of active bindings changed (FleetScreen.sync and ServerScreen.sync call
refresh_bindings() every time, and Textual's Footer then recomposes and restyles every key);
(2) FleetChanged marks the app dirty and a 10 Hz timer syncs the screens, instead of a full sync of
every screen per controller batch. Usage:
    python -m benchmarks.bench_console_cpu --entry benchmarks/candidate_ui_coalesce.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.ui.app import DflashApp
from console.ui.screens.fleet import FleetScreen
from console.ui.screens.server import ServerScreen

SYNC_EVERY_S = 0.1


def _refresh_only_on_change(cls: type) -> None:
    orig = cls.refresh_bindings

    def refresh_bindings(self: Any) -> None:
        try:
            sig = tuple((k, ab.enabled, ab.binding.action) for k, ab in self.active_bindings.items())
        except Exception:  # the binding map is not ready (screen mounting): refresh as before
            sig = None
        if sig is not None and sig == getattr(self, "_candidate_sig", None):
            return
        self._candidate_sig = sig
        orig(self)

    cls.refresh_bindings = refresh_bindings


def _coalesce_fleet_changed() -> None:
    orig_mount = DflashApp.on_mount

    def on_fleet_changed(self: Any, _msg: object) -> None:
        self._candidate_dirty = True

    def on_mount(self: Any) -> None:
        orig_mount(self)

        def flush() -> None:
            if getattr(self, "_candidate_dirty", False):
                self._candidate_dirty = False
                self._sync_screens()

        self.set_interval(SYNC_EVERY_S, flush)

    DflashApp.on_fleet_changed = on_fleet_changed
    DflashApp.on_mount = on_mount


def main() -> int:
    _refresh_only_on_change(FleetScreen)
    _refresh_only_on_change(ServerScreen)
    _coalesce_fleet_changed()
    from console.cli import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
