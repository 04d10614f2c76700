"""The server phases a log walks through: the one spelling of them for the parser, the fleet state, the CLI and the UI.

A `Phase` is a StrEnum, so it compares equal to its value (`Phase.READY == "ready"`), formats as it
(`f"{phase}"`, JSON), and a dict keyed by it is looked up by either. Ask a phase what it is
(`starting`, `up`, `terminal`) instead of listing phase names in a tuple.
"""

from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    """Where an SGLang server is in its life, in startup order (crashed/stopped are terminal)."""

    LAUNCHING = "launching"
    LOADING_WEIGHTS = "loading_weights"
    KV_CACHE = "kv_cache"
    CUDA_GRAPH = "cuda_graph"
    WARMING = "warming"
    READY = "ready"
    SERVING = "serving"
    CRASHED = "crashed"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value

    @property
    def order(self) -> int:
        """Startup order; terminal phases sort after serving."""
        return _ORDER[self]

    @property
    def terminal(self) -> bool:
        return self in (Phase.CRASHED, Phase.STOPPED)

    @property
    def startup(self) -> bool:
        """Still coming up (before the HTTP server answers)."""
        return self.order <= Phase.CUDA_GRAPH.order

    @property
    def starting(self) -> bool:
        """Launched and not yet ready: launching through warming (what a pane shows progress for)."""
        return self.order <= Phase.WARMING.order

    @property
    def up(self) -> bool:
        """Ready or serving: the server takes requests."""
        return self in (Phase.READY, Phase.SERVING)

    @property
    def label(self) -> str:
        """The phase in words, for people (`loading weights`, `KV cache`)."""
        return LABELS[self]


_ORDER = {p: i for i, p in enumerate(Phase)}

STARTUP_PHASES: tuple[Phase, ...] = (
    Phase.LAUNCHING,
    Phase.LOADING_WEIGHTS,
    Phase.KV_CACHE,
    Phase.CUDA_GRAPH,
    Phase.WARMING,
    Phase.READY,
)
"""The phases of a cold start, in order, ready included (the timeline's keys)."""

STARTING_PHASES: tuple[Phase, ...] = tuple(p for p in Phase if p.starting)
"""Launching through warming: the phases a launched server shows progress in before it is ready."""

ACTIVE_PHASES: tuple[Phase, ...] = tuple(p for p in Phase if not p.terminal)
"""Every phase of a live server."""

LABELS: dict[Phase, str] = {
    Phase.LAUNCHING: "launching",
    Phase.LOADING_WEIGHTS: "loading weights",
    Phase.KV_CACHE: "KV cache",
    Phase.CUDA_GRAPH: "CUDA graphs",
    Phase.WARMING: "warming up",
    Phase.READY: "ready",
    Phase.SERVING: "serving",
    Phase.CRASHED: "crashed",
    Phase.STOPPED: "stopped",
}
"""Words for people."""


def phase_words(value: str) -> str:
    """A phase's machine name (`cuda_graph`, as JSON has it) in the words every screen uses (`CUDA graphs`);
    `draft_` names the draft model's phase; anything else is returned as is."""
    draft = value.startswith("draft_")
    words = LABELS.get(value.removeprefix("draft_"), value.removeprefix("draft_"))  # type: ignore[call-overload]
    return f"draft {words}" if draft else words
