"""What the server itself saw during a bench level (its /metrics before and after), to check a client's figures.

A bench's numbers must agree with the server's own counters and latency histograms for the same requests. That
check holds on an idle machine and on a machine whose cores are taken by other work: when the server is slowed, its
own clock sees the same slowness. (How close the sim comes to its documented rate formula is a figure, measured by
`benchmarks/bench_sim_tolerance.py`, not a test.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from console.sglang.metrics import parse_metrics


@dataclass(frozen=True)
class Scrape:
    """The server's cumulative counters at one moment."""

    generation_tokens: float
    e2e_sum: float
    e2e_count: float
    ttft_sum: float
    ttft_count: float


def scrape(url: str) -> Scrape:
    """One /metrics read (the sim serves it without an API key, as SGLang does)."""
    m = parse_metrics(httpx.get(f"{url.rstrip('/')}/metrics", timeout=30, trust_env=False).text).samples
    return Scrape(
        m.get("generation_tokens_total", 0.0),
        m.get("e2e_request_latency_seconds_sum", 0.0),
        m.get("e2e_request_latency_seconds_count", 0.0),
        m.get("time_to_first_token_seconds_sum", 0.0),
        m.get("time_to_first_token_seconds_count", 0.0),
    )


@dataclass(frozen=True)
class Truth:
    """The server's view of the requests between two scrapes."""

    requests: int
    generation_tokens: int
    e2e_mean_s: float
    ttft_mean_s: float

    @classmethod
    def between(cls, a: Scrape, b: Scrape) -> Truth:
        n = b.e2e_count - a.e2e_count
        nt = b.ttft_count - a.ttft_count
        return cls(
            int(n),
            int(b.generation_tokens - a.generation_tokens),
            (b.e2e_sum - a.e2e_sum) / n if n else 0.0,
            (b.ttft_sum - a.ttft_sum) / nt if nt else 0.0,
        )

    def check_level(self, lv: dict, output_len: int, warmup: int = 0, strays: int = 0) -> list[str]:
        """Where a bench level (its `--json` object, plus `output_tokens` when known) disagrees with the server.

        - requests and tokens: exactly the server's counts, plus `warmup` requests of at most output_len tokens
          sent before the level inside the same scrape window, plus at most `strays` one-token requests (a
          console's own /health checks, which generate one token on SGLang, may land in the window);
        - e2e p50 never below the server's own mean e2e: a client cannot finish before the server did;
        - C requests really in flight, by Little's law: a closed loop of C workers over equal-length requests
          completes C / e2e requests a second (serialised workers would give 1/C);
        - 0 < TTFT p50 ≤ e2e p50.
        How close client latencies come to the server's is a figure of the machine's load (a starved client reads
        its streams late: e2e 2.2 s against the server's 0.78 s at C=32 with four CPU hogs on two cores), measured
        by `benchmarks/bench_sim_tolerance.py`; the ITL arithmetic is unit-tested in `test_benchstats`.
        """
        c, out = int(lv["concurrency"]), []
        n, want = lv["requests"], lv["requests"] * output_len
        extra = self.requests - n - warmup
        if not 0 <= extra <= strays:
            out.append(
                f"C={c}: {n} requests (+{warmup} warm-up, ≤ {strays} one-token health checks), "
                f"the server finished {self.requests}"
            )
        elif not want + warmup <= self.generation_tokens <= want + warmup * output_len + extra:
            out.append(
                f"C={c}: the server generated {self.generation_tokens} tokens; {n} requests of {output_len} "
                f"(+{warmup} warm-up, +{extra} one-token) make {want + warmup}..{want + warmup * output_len + extra}"
            )
        if "output_tokens" in lv and lv["output_tokens"] != want:
            out.append(f"C={c}: counted {lv['output_tokens']} tokens for {n} requests of {output_len}")
        e2e, ttft = lv["e2e_p50_s"], lv["ttft_p50_s"]
        if e2e is None or e2e < self.e2e_mean_s * 0.85:
            out.append(f"C={c}: e2e p50 {e2e} below the server's own mean {self.e2e_mean_s:.3f} s")
        elif (little := lv["request_throughput_rps"] * e2e / min(c, lv["requests"])) < 0.6 or little > 1.15:
            out.append(
                f"C={c}: rps {lv['request_throughput_rps']:.3f} × e2e p50 {e2e:.3f} s = {little:.2f} × C "
                "(want ≈ 1: C requests in flight)"
            )
        if ttft is None or not 0 < ttft <= e2e:
            out.append(f"C={c}: TTFT p50 {ttft} outside (0, e2e p50 {e2e}]")
        return out


def settle(url: str, timeout: float = 60.0) -> Scrape:
    """The counters once the server has gone quiet (its own start-up warm-up request may land late on a busy
    machine and must not be counted in the first level)."""
    end = time.monotonic() + timeout
    last = scrape(url)
    while time.monotonic() < end:
        time.sleep(0.3)
        now = scrape(url)
        if now == last:
            return now
        last = now
    raise AssertionError(f"{url}: /metrics counters still moving after {timeout:g} s with no client")
