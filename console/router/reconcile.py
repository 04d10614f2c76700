"""Which workers to add to and remove from a router so it lists exactly the ready replicas (pure).

Only URLs that belong to the router's presets are touched: a worker someone added by hand stays.
A URL added a moment ago is not added again while the router's job queue registers it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from console.router.answers import RouterWorker

ADD_PENDING_S = 15.0
"""How long an add the router accepted (202) counts as on its way before it is sent again."""


@dataclass(frozen=True)
class Changes:
    add: tuple[str, ...] = ()
    remove: tuple[RouterWorker, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.add or self.remove)


def plan_changes(
    ready: Iterable[str],
    owned: Iterable[str],
    listed: list[RouterWorker],
    pending: dict[str, float] | None = None,
    now: float = 0.0,
    unsure: Iterable[str] = (),
) -> Changes:
    """`ready`: URLs of the replicas that serve now; `owned`: every URL of the router's presets (ready or not);
    `listed`: the router's workers; `pending`: URL -> when an add was accepted; `unsure`: URLs of live replicas
    whose /health has not answered yet (a console that just opened): neither added nor removed."""
    ready_set, owned_set, unsure_set = set(ready), set(owned) | set(ready), set(unsure) - set(ready)
    seen: set[str] = set()
    remove = []
    for w in listed:
        if w.url in unsure_set and w.url not in seen:
            seen.add(w.url)
            continue
        if w.url in owned_set and (w.url not in ready_set or w.url in seen):
            remove.append(w)  # a replica that crashed, stopped or is starting again; or a duplicate entry
        seen.add(w.url)
    pending = pending or {}
    add = [u for u in sorted(ready_set) if u not in seen and now - pending.get(u, -1e18) > ADD_PENDING_S]
    return Changes(tuple(add), tuple(remove))
