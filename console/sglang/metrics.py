"""SGLang's Prometheus /metrics text -> the numbers the screens show (pure; prometheus_client's own parser)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from console.sglang.specdec import sane_accept_len, sane_accept_rate


@dataclass(frozen=True)
class Metrics:
    """The /metrics numbers the screens use (summed over DP ranks; usage/hit rate: highest/mean)."""

    num_running_reqs: float | None = None
    num_queue_reqs: float | None = None
    token_usage: float | None = None
    gen_throughput: float | None = None
    cache_hit_rate: float | None = None
    spec_accept_length: float | None = None
    spec_accept_rate: float | None = None
    max_total_num_tokens: float | None = None
    num_used_tokens: float | None = None
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    num_requests_total: float | None = None
    num_aborted_requests_total: float | None = None
    retracted_requests_total: float | None = None
    ttft_mean_s: float | None = None
    itl_mean_s: float | None = None
    e2e_mean_s: float | None = None
    samples: dict[str, float] = field(default_factory=dict)
    """Every sample name (labels dropped) -> sum, for anything else a screen wants."""


def parse_metrics(text: str) -> Metrics:
    """Prometheus text -> Metrics (prometheus_client's own parser)."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    maxes: dict[str, float] = {}
    rank0: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            name = s.name.removeprefix("sglang:")
            sums[name] = sums.get(name, 0.0) + s.value
            counts[name] = counts.get(name, 0) + 1
            maxes[name] = max(maxes.get(name, s.value), s.value)
            if name.startswith("spec_") and s.labels.get("tp_rank", "0") == "0" and name not in rank0:
                rank0[name] = s.value

    def get(n: str) -> float | None:
        return sums.get(n)

    def mean(n: str) -> float | None:
        return sums[n] / counts[n] if n in sums and counts[n] else None

    def hist_mean(n: str) -> float | None:
        c = sums.get(f"{n}_count")
        return sums[f"{n}_sum"] / c if c else None

    return Metrics(
        num_running_reqs=get("num_running_reqs"),
        num_queue_reqs=get("num_queue_reqs"),
        token_usage=maxes.get("token_usage"),
        gen_throughput=get("gen_throughput"),
        cache_hit_rate=mean("cache_hit_rate"),
        # every TP rank reports the same verify: rank 0's figure, as SGLang's own logs print it (ranks beyond
        # it only repeat it, and a mean over garbage ranks would be a number no rank printed)
        spec_accept_length=sane_accept_len(rank0.get("spec_accept_length")),
        spec_accept_rate=sane_accept_rate(rank0.get("spec_accept_rate")),
        max_total_num_tokens=get("max_total_num_tokens"),
        num_used_tokens=get("num_used_tokens"),
        prompt_tokens_total=get("prompt_tokens_total"),
        generation_tokens_total=get("generation_tokens_total"),
        num_requests_total=get("num_requests_total"),
        num_aborted_requests_total=get("num_aborted_requests_total"),
        retracted_requests_total=get("num_retracted_requests_total"),
        ttft_mean_s=hist_mean("time_to_first_token_seconds"),
        itl_mean_s=hist_mean("inter_token_latency_seconds"),
        e2e_mean_s=hist_mean("e2e_request_latency_seconds"),
        samples=sums,
    )
