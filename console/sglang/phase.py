"""The server phases a log walks through, shared by the parser, the fleet state and the UI."""

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


_ORDER = {p: i for i, p in enumerate(Phase)}

STARTUP_PHASES: tuple[Phase, ...] = (
    Phase.LAUNCHING, Phase.LOADING_WEIGHTS, Phase.KV_CACHE, Phase.CUDA_GRAPH, Phase.WARMING, Phase.READY,
)
"""The phases of a cold start, in order (the timeline's keys)."""

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
