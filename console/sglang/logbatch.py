"""Prefill/Decode batch lines -> runtime Stats, cheaply enough for hundreds of lines a second.

Per line only counters and the throughput window are updated (find + float); the generic
`key: value` parse of the latest lines (plain, SWA and Mamba usage fields alike) runs on demand.
"""

from __future__ import annotations

from collections import deque

from console.sglang.logstate import Stats
from console.sglang.logtext import parse_pairs, to_float, to_int
from console.sglang.specdec import sane_accept_len, sane_accept_rate

_GEN = "gen throughput (token/s): "
_ACCEPT = "accept len: "
ACCEPT_POINTS = 600
"""Accept-length figures kept per server with their times: the graph's history and the collapse alarm's window."""


class BatchStats:
    def __init__(self, stats: Stats, window: int = 20) -> None:
        self.stats = stats
        self._gen: deque[float] = deque(maxlen=window)
        self._decode: str | None = None
        self._prefill: str | None = None
        self._last: str | None = None
        self.last_gen: float | None = None
        """The newest decode line's gen throughput, read as the line arrives (no materialize for it)."""
        self.accepts: deque[tuple[float | None, float]] = deque(maxlen=ACCEPT_POINTS)
        """(log time, accept len) of every decode line that printed a sane one (both SGLang formats)."""

    def decode(self, msg: str, ts: float | None) -> None:
        self.stats.decode_lines += 1
        self.stats.last_batch_ts = self.stats.last_decode_ts = ts
        self._decode = self._last = msg
        i = msg.find(_GEN)
        t = None
        if i >= 0:
            i += len(_GEN)
            j = msg.find(",", i)
            t = to_float(msg[i:] if j < 0 else msg[i:j])
            if t is not None:
                self._gen.append(t)
        self.last_gen = t
        i = msg.find(_ACCEPT)
        if i >= 0:
            i += len(_ACCEPT)
            j = msg.find(",", i)
            a = sane_accept_len(to_float(msg[i:] if j < 0 else msg[i:j]))
            if a is not None:
                self.accepts.append((ts, a))

    def prefill(self, msg: str, ts: float | None) -> None:
        st = self.stats
        st.prefill_lines += 1
        st.last_batch_ts = ts
        self._prefill = self._last = msg
        st.new_tokens += field_int(msg, "#new-token: ")
        st.cached_tokens += field_int(msg, "#cached-token: ")

    def materialize(self) -> Stats:
        """Fill Stats from the latest batch lines (a few lines' work, once per snapshot)."""
        st = self.stats
        if self._prefill is not None:
            pp = parse_pairs(self._prefill)
            t = to_float(pp.get("input throughput (token/s)"))
            if t is not None:
                st.input_throughput = t
            h = pp.get("cache hit rate")
            if h is not None:
                st.cache_hit_rate = to_float(h)
        if self._decode is not None:
            dp = parse_pairs(self._decode)
            st.extra = dp
            st.gen_throughput = to_float(dp.get("gen throughput (token/s)"))
            if self._gen:
                st.gen_throughput_avg = round(sum(self._gen) / len(self._gen), 2)
            n = dp.get("#token") or dp.get("#full token")
            if n is not None:
                st.num_tokens = to_int(n)
            if "accept len" in dp:  # a line that printed none keeps no figure: never one the server did not print
                st.accept_len = sane_accept_len(to_float(dp["accept len"]))
                st.accept_rate = sane_accept_rate(to_float(dp.get("accept rate")))
        if self._last is not None:
            self._common(parse_pairs(self._last))
        return st

    def _common(self, pairs: dict[str, str]) -> None:
        st = self.stats
        v = pairs.get("#running-req")
        if v is not None:
            st.running_reqs = to_int(v)
        v = pairs.get("#queue-req")
        if v is not None:
            st.queue_reqs = to_int(v)
        usage: dict[str, float] = {}
        for k, val in pairs.items():
            if k[-5:] == "usage":
                f = to_float(val)
                if f is not None:
                    usage[k] = f
        if usage:
            st.usage = usage
            real = [v for k, v in usage.items() if k != "pre-allocated usage"] or list(usage.values())
            st.token_usage = max(real)
        g = pairs.get("cuda graph")
        if g is not None:
            st.cuda_graph = g == "True"


def field_int(msg: str, key: str) -> int:
    """The integer after `key` up to the next comma (0 when absent or not a number)."""
    i = msg.find(key)
    if i < 0:
        return 0
    i += len(key)
    j = msg.find(",", i)
    try:
        return int(msg[i:] if j < 0 else msg[i:j])
    except ValueError:
        return 0
