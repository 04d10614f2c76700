"""Server names on the command line: exact, a preset's only replica, ambiguous, stopped, or a typo (pure)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pydantic's config and the state are needed when a name is resolved, not for `--help`
    from console.config import Fleet
    from console.fleet.state import FleetState


@dataclass(frozen=True)
class Resolved:
    """`name` when it names one known server; else `error` (exit 2) or `stopped` (nothing to stop)."""

    name: str | None = None
    error: str | None = None
    stopped: bool = False


def did_you_mean(word: str, candidates: list[str]) -> str:
    """`; did you mean 'x'?` for the closest candidate, else `` (cutoff 0.6, as difflib suggests)."""
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def known_names(fleet: Fleet, state: FleetState | None = None) -> list[str]:
    """Every name a user may type: presets, their planned replicas, and servers seen now."""
    from console.sglang.command import all_replicas

    names = list(fleet.presets) + [r.name for r in all_replicas(fleet)]
    if state is not None:
        names += [n for n in state.servers if n not in names]
    return names


def resolve(state: FleetState, fleet: Fleet, name: str) -> Resolved:
    """An exact server name, or the only server of a preset; a preset with several is ambiguous."""
    from console.sglang.command import all_replicas

    s = state.servers.get(name)
    if s is not None:
        return Resolved(name, stopped=s.phase == "stopped")
    of_preset = sorted(n for n, sv in state.servers.items() if sv.meta.preset == name)
    if len(of_preset) == 1:
        return Resolved(of_preset[0])
    if of_preset:
        return Resolved(
            error=f"'{name}' is ambiguous: preset {name} has {len(of_preset)} servers: "
            f"{', '.join(of_preset)}; name one of them"
        )
    if name in {r.name for r in all_replicas(fleet)}:
        return Resolved(name, stopped=True)
    if name in fleet.presets:
        return Resolved(error=f"preset {name} has no server running (see `status`)", stopped=True)
    return Resolved(error=f"no server '{name}'{did_you_mean(name, known_names(fleet, state))} (see `status`)")
