"""Startup records of the log parser: weights, KV pool, CUDA graphs, both tqdm bars, per rank (a LogParser mixin).

Kept apart from the dispatch so each file stays readable; it only touches the parser's state
through the attributes declared below.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable

from console.sglang import logfacts as lf
from console.sglang.logstate import Facts, LogEvent, Progress, RankState
from console.sglang.logtext import Header, split_ranks
from console.sglang.phase import Phase

_SHARDS = re.compile(r"([A-Za-z][\w -]*?): +\d+% Completed \| (\d+)/(\d+)")
_CAPTURE = re.compile(r"Capturing batches \(bs=(\d+)(?: avail_mem=([\d.]+) GB)?\):[^|]*\|[^|]*\| *(\d+)/(\d+)")
_NUM_TOKENS = re.compile(r"(Capturing|Compiling) num tokens \(num_tokens=(\d+)[^)]*\):[^|]*\|[^|]*\| *(\d+)/(\d+)")
_BARE_BAR = re.compile(r" *\d+%\|[^|]*\| *(\d+)/(\d+) \[")


class StartupLines:
    """Handlers for the cold-start records; `_rank_phase` / `_update_phase` / `_event` come from LogParser."""

    ranks: dict[str, RankState]
    facts: Facts
    shards: Progress | None
    draft_shards: Progress | None
    graphs: Progress | None
    graph_bs: int | None
    events: deque[LogEvent]
    ts: float | None
    _bar_rank: str

    _rank_phase: Callable[[RankState, Phase], None]
    _update_phase: Callable[[], None]
    _event: Callable[[str, str], None]

    def _rank(self, hdr: Header) -> RankState:
        if not hdr.ranks and self.facts.tp_size is None:
            self.facts.tp_size = 1
        return self._rank_by_label(hdr.ranks or "TP0")

    def _rank_by_label(self, label: str) -> RankState:
        r = self.ranks.get(label)
        if r is None:
            r = self.ranks[label] = RankState(label)
            if split_ranks(label).get("TP") == 0 and self._bar_rank not in self.ranks:
                self._bar_rank = label
        return r

    def _startup(self, hdr: Header, msg: str) -> bool:
        """Handle a startup record; False when `msg` is not one."""
        if msg.startswith("Load weight "):
            self._load_weight(self._rank(hdr), msg)
        elif msg.startswith("KV Cache ") or (" KV Cache " in msg[:40] and ("allocated" in msg or "VA upper" in msg)):
            r = self._rank(hdr)
            tokens = lf.kv_allocated(msg, self.facts) if not r.draft else None
            if tokens is not None:
                r.kv_tokens = tokens
            self._rank_phase(r, Phase.KV_CACHE)
        elif msg.startswith("Memory pool end"):
            r = self._rank(hdr)
            r.avail_gib = lf.gib(lf._AVAIL, msg)
            self._rank_phase(r, Phase.KV_CACHE)
        elif msg.startswith(("Mamba Cache is allocated", "Use sliding window memory pool", "SWAKVPool")):
            r = self._rank(hdr)
            if msg.startswith("Mamba"):
                self.facts.mamba_cache = self.facts.mamba_cache or msg.strip()
            else:
                self.facts.swa_tokens = self.facts.swa_tokens or msg.strip()
            self._rank_phase(r, Phase.KV_CACHE)
        elif msg.startswith("Capture "):
            self._capture(self._rank(hdr), msg)
        elif msg.startswith("max_total_num_tokens="):
            r = self._rank(hdr)
            lf.scheduler_limits(msg, self.facts)
            r.ready = True
            self._update_phase()
        elif msg.startswith("Init torch distributed"):
            self._rank(hdr)
            self._update_phase()
        elif msg.startswith("server_args="):
            lf.server_args(msg, self.facts)
        elif msg.startswith("Using KV cache dtype:"):
            self.facts.kv_cache_dtype = msg.split(":", 1)[1].strip().removeprefix("torch.")
        else:
            return False
        return True

    def _load_weight(self, r: RankState, msg: str) -> None:
        f = self.facts
        if msg.startswith("Load weight begin"):
            if r.phase.order >= Phase.KV_CACHE.order and not r.draft:
                r.draft = True
                self._event("draft", f"{r.label}: loading the draft model")
            elif not r.draft and f.avail_gib_before_load is None:
                f.avail_gib_before_load = lf.gib(lf._AVAIL, msg)
            self._rank_phase(r, Phase.LOADING_WEIGHTS)
        elif msg.startswith("Load weight end"):
            cls, dtype, quant, w, avail = lf.load_weight_end(msg)
            if r.draft:
                f.draft_model_class = f.draft_model_class or cls
                f.draft_weight_gib = f.draft_weight_gib if f.draft_weight_gib is not None else w
            else:
                f.model_class = f.model_class or cls
                f.dtype = f.dtype or dtype
                f.quant = f.quant or quant
                r.weight_gib = w
                if f.weight_gib is None:
                    f.weight_gib = w
            r.avail_gib = avail
            self._rank_phase(r, Phase.KV_CACHE)

    def _capture(self, r: RankState, msg: str) -> None:
        head = msg[:60]
        if msg.startswith("Capture cuda graph bs"):
            bs = lf.capture_bs(msg)
            if bs:
                if not r.draft:
                    self.facts.capture_bs = bs
                self.graphs = Progress(0, len(bs), "draft" if r.draft else "decode")
        elif " begin" in head:
            if "draft" in head and not r.draft:
                r.draft = True
            r.avail_gib = lf.gib(lf._AVAIL, msg)
            self._rank_phase(r, Phase.CUDA_GRAPH)
        elif " end" in head:
            r.graphs_done = True
            r.avail_gib = lf.gib(lf._AVAIL, msg)
            if not r.draft and self.facts.graph_mem_gib is None and "piecewise" not in head and "prefill" not in head:
                self.facts.graph_mem_gib = lf.gib(lf._MEM_USAGE, msg)
            if self.graphs is not None and self.graphs.total:
                self.graphs = Progress(self.graphs.total, self.graphs.total, self.graphs.label)
            self._rank_phase(r, Phase.CUDA_GRAPH)

    def _bar(self, s: str) -> None:
        """A tqdm bar (no prefix; printed by rank 0): weight shards, decode-graph capture, piecewise capture."""
        if "% Completed" in s:
            m = _SHARDS.search(s)
            if m is None:
                return
            r = self._rank_by_label(self._bar_rank)
            p = Progress(int(m.group(2)), int(m.group(3)), m.group(1).strip())
            if r.phase.order >= Phase.KV_CACHE.order and not r.draft:
                r.draft = True
                self._event("draft", "loading the draft model")
            if r.draft:
                self.draft_shards = p
            else:
                self.shards = p
            self._rank_phase(r, Phase.LOADING_WEIGHTS)
            return
        m = _CAPTURE.search(s)
        if m is not None:
            r = self._rank_by_label(self._bar_rank)
            self.graph_bs = int(m.group(1))
            self.graphs = Progress(int(m.group(3)), int(m.group(4)), "draft" if r.draft else "decode")
            self._rank_phase(r, Phase.CUDA_GRAPH)
            return
        m = _NUM_TOKENS.search(s)
        if m is not None:
            self.graphs = Progress(int(m.group(3)), int(m.group(4)), "piecewise")
            self._rank_phase(self._rank_by_label(self._bar_rank), Phase.CUDA_GRAPH)
            return
        m = _BARE_BAR.match(s)
        r0 = self.ranks.get(self._bar_rank)
        if m is not None and r0 is not None and r0.phase is Phase.CUDA_GRAPH:
            r = r0
            self.graphs = Progress(int(m.group(1)), int(m.group(2)), "draft" if r.draft else "decode")
