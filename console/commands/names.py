"""Names on the command line, one rule for every command: exact, a preset's only server, ambiguous, or a typo (pure).

A name is a server (`PRESET@HOST:gpuN`, `external@HOST:PORT`) or a preset. A preset names its server when it
has exactly one (running, or planned when none runs); a preset with several running servers is ambiguous and
the error lists them. A name that is nothing known is `unknown KIND 'x'; did you mean 'y'? (known: a, b)`.
"""

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


KNOWN_SHOWN = 16
"""At most this many names follow `known:`; the rest are counted (a fleet may have hundreds of replicas)."""


def did_you_mean(word: str, candidates: list[str]) -> str:
    """`; did you mean 'x'?` for the closest candidate, else `` (cutoff 0.6, as difflib suggests)."""
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def known_list(candidates: list[str], limit: int = KNOWN_SHOWN) -> str:
    """`(known: a, b)`, `(known: a, b, … 12 more)`, `(known: none)`."""
    names = list(dict.fromkeys(candidates))
    more = f", … {len(names) - limit} more" if len(names) > limit else ""
    return f"(known: {', '.join(names[:limit]) or 'none'}{more})"


def unknown(kind: str, word: str, candidates: list[str]) -> str:
    """The one typo message: `unknown preset 'x'; did you mean 'y'? (known: a, b)`."""
    return f"unknown {kind} '{word}'{did_you_mean(word, candidates)} {known_list(candidates)}"


def known_names(fleet: Fleet, state: FleetState | None = None) -> list[str]:
    """Every name a user may type: presets, their planned replicas, and servers seen now."""
    from console.sglang.command import all_replicas

    names = list(fleet.presets) + [r.name for r in all_replicas(fleet)]
    if state is not None:
        names += [n for n in state.servers if n not in names]
    return names


def resolve(state: FleetState, fleet: Fleet, name: str) -> Resolved:
    """An exact server name, or the only server of a preset (running, else planned); several running: ambiguous."""
    from console.sglang.command import all_replicas, expand_replicas

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
        planned = expand_replicas(name, fleet.presets[name])
        if len(planned) == 1:
            return Resolved(planned[0].name, stopped=True)
        return Resolved(
            error=f"preset {name} has no server running (its replicas: {', '.join(r.name for r in planned)})",
            stopped=True,
        )
    return Resolved(error=unknown("server or preset", name, known_names(fleet, state)))
