"""`router bench NAME`: the same sweep against one replica and through the router, side by side (pure table)."""

from __future__ import annotations

from console.sglang.benchstats import LevelResult


def scaling_table(one: list[LevelResult], via: list[LevelResult], replicas: int) -> str:
    """One row per level: out tok/s, TTFT p50 and errors for one replica and via the router, and the tok/s ratio."""
    head = (
        "C",
        "one replica tok/s",
        f"router ({replicas}) tok/s",
        "scaling",
        "TTFT p50 ms one/router",
        "errors one/router",
    )
    by = {lv.concurrency: lv for lv in via}
    rows = [head]
    for lv in one:
        rv = by.get(lv.concurrency)
        if rv is None:
            continue
        ratio = rv.output_throughput_tok_s / lv.output_throughput_tok_s if lv.output_throughput_tok_s else None
        rows.append(
            (
                str(lv.concurrency),
                f"{lv.output_throughput_tok_s:,.0f}",
                f"{rv.output_throughput_tok_s:,.0f}",
                "-" if ratio is None else f"{ratio:.2f}x",
                f"{_ms(lv.ttft_p50_s)}/{_ms(rv.ttft_p50_s)}",
                f"{lv.errors}/{rv.errors}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f}"
