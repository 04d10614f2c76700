"""SGLang-specific preset lint rules: the launch mistakes that cost a 10-minute cold start to discover.

Each rule cites the SGLang behaviour it predicts (docs/sglang.md §5.2-5.3); registered into console.sglang.lint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from console.sglang import flags
from console.sglang.lint import Finding, LintContext, Severity, rule

_HYBRID_NAME = re.compile(r"qwen3[._-]?[56]|qwen3[._-]?next", re.IGNORECASE)
_HYBRID_TYPES = {
    "qwen3_next",
    "qwen3_5",
    "qwen3_5_moe",
    "qwen3_6",
    "qwen3_6_moe",
    "nemotron_h",
    "falcon_h1",
    "jamba",
    "granitemoehybrid",
    "lfm2",
    "bailing_moe_linear",
    "kimi_linear",
}
_TRUE = {"1", "true", "yes", "on"}


def _env(ctx: LintContext) -> dict[str, str]:
    return {**ctx.host.env, **ctx.preset.env}


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def hybrid_from_config(cfg: dict[str, Any]) -> bool:
    """A hybrid linear-attention / Mamba (GDN) model, judged from config.json (and its text_config)."""
    for c in (cfg, cfg.get("text_config") or {}):
        if not isinstance(c, dict):
            continue
        if str(c.get("model_type", "")).lower() in _HYBRID_TYPES:
            return True
        layer_types = c.get("layer_types") or c.get("layers_block_type") or []
        if isinstance(layer_types, list) and any(
            str(t).lower() in ("linear_attention", "mamba", "mamba2") for t in layer_types
        ):
            return True
        if "full_attention_interval" in c or "linear_num_value_heads" in c:
            return True
        archs = c.get("architectures") or []
        if any(re.match(r"(Qwen3Next|Qwen3_5|Qwen3_6|NemotronH|FalconH1|Jamba)", str(a)) for a in archs):
            return True
    return False


def is_hybrid(ctx: LintContext) -> tuple[bool, bool]:
    """-> (hybrid, sure): the config decides; without one the model name is a guess."""
    if ctx.model_config is not None:
        return hybrid_from_config(ctx.model_config), True
    return bool(_HYBRID_NAME.search(ctx.preset.model)), False


def _spec(ctx: LintContext) -> str | None:
    algo = ctx.flag("--speculative-algorithm")
    return algo.upper() if algo else None


@rule(
    "hybrid-spec-extra-buffer",
    "error",
    "hybrid GDN/Mamba model + speculative decoding needs --mamba-scheduler-strategy extra_buffer",
)
def _hybrid_spec(ctx: LintContext) -> Iterable[Finding]:
    if not _spec(ctx) or ctx.has("--disable-radix-cache"):
        return
    strategy = ctx.flag("--mamba-scheduler-strategy") or ctx.flag("--mamba-radix-cache-strategy") or "auto"
    if strategy.startswith("extra_buffer"):
        return
    hybrid, sure = is_hybrid(ctx)
    if not hybrid:
        return
    why = (
        "its config.json says it is a hybrid (linear-attention/Mamba) model"
        if sure
        else f"the model name {ctx.preset.model!r} looks like a hybrid Qwen3.5/3.6/Next model (config.json not readable)"
    )
    yield Finding(
        "hybrid-spec-extra-buffer",
        "error" if sure else "warning",
        ctx.name,
        f'{why}: with --speculative-algorithm and the radix cache, SGLang stops with "Speculative decoding for ... '
        f'is not compatible with radix cache when using --mamba-scheduler-strategy no_buffer" (strategy is {strategy!r})',
        fix="add --mamba-scheduler-strategy extra_buffer (and SGLANG_ENABLE_SPEC_V2=1), or --disable-radix-cache",
        field="args",
    )


@rule(
    "spec-steps-missing",
    "error",
    "--speculative-eagle-topk / --speculative-num-draft-tokens need --speculative-num-steps",
)
def _spec_steps(ctx: LintContext) -> Iterable[Finding]:
    if ctx.has("--speculative-num-steps"):
        return
    given = [f for f in ("--speculative-eagle-topk", "--speculative-num-draft-tokens") if ctx.has(f)]
    if given:
        yield Finding(
            "spec-steps-missing",
            "error",
            ctx.name,
            f"{' and '.join(given)} without --speculative-num-steps: SGLang 0.5.11 fails with a bare AssertionError "
            "(all three or none)",
            fix="add --speculative-num-steps N (or drop the other two to let SGLang choose)",
            field="args",
        )


@rule("spec-draft-tokens-adjusted", "warning", "with topk 1, --speculative-num-draft-tokens is forced to steps + 1")
def _spec_draft_tokens(ctx: LintContext) -> Iterable[Finding]:
    steps, topk, draft = (
        _int(ctx.flag(f))
        for f in ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
    )
    if steps is not None and topk == 1 and draft is not None and draft != steps + 1:
        yield Finding(
            "spec-draft-tokens-adjusted",
            "warning",
            ctx.name,
            f"--speculative-num-draft-tokens {draft} with topk 1 and {steps} steps: SGLang silently overrides it "
            f"to {steps + 1}",
            fix=f"set --speculative-num-draft-tokens {steps + 1}",
            field="args",
        )


@rule("dflash-cuda-graph", "warning", "DFLASH speculative decoding with --disable-cuda-graph")
def _dflash_graph(ctx: LintContext) -> Iterable[Finding]:
    if _spec(ctx) == "DFLASH" and ctx.has("--disable-cuda-graph"):
        yield Finding(
            "dflash-cuda-graph",
            "warning",
            ctx.name,
            "DFLASH drafts many tokens per step and is built around CUDA graphs: without them it is slower than "
            "no speculation",
            fix="drop --disable-cuda-graph (lower --cuda-graph-max-bs if graphs do not fit)",
            field="args",
        )


def _dflash_finding(ctx: LintContext, rid: str, severity: Severity, msg: str, fix: str) -> Finding:
    return Finding(rid, severity, ctx.name, msg, fix=fix, field="args")


@rule("dflash-draft-path", "error", "DFLASH needs --speculative-draft-model-path (SGLang main, speculative_hook.py)")
def _dflash_path(ctx: LintContext) -> Iterable[Finding]:
    if (
        _spec(ctx) == "DFLASH"
        and not ctx.flag("--speculative-draft-model-path")
        and not ctx.flag("--speculative-draft-model")
    ):
        yield _dflash_finding(
            ctx,
            "dflash-draft-path",
            "error",
            'DFLASH without a drafter: SGLang stops with "DFLASH speculative decoding requires setting '
            '--speculative-draft-model-path."',
            "add --speculative-draft-model-path PATH (the DFlash draft model's folder)",
        )


@rule(
    "dflash-block-size", "error", "DFLASH block size and --speculative-num-draft-tokens disagree, or are not positive"
)
def _dflash_block(ctx: LintContext) -> Iterable[Finding]:
    if _spec(ctx) != "DFLASH":
        return
    block = _int(ctx.flag("--speculative-dflash-block-size"))
    draft = _int(ctx.flag("--speculative-num-draft-tokens"))
    if block is not None and block <= 0:
        yield _dflash_finding(
            ctx, "dflash-block-size", "error", f"--speculative-dflash-block-size {block}: must be positive", "use 16"
        )
    elif block is not None and draft is not None and block != draft:
        yield _dflash_finding(
            ctx,
            "dflash-block-size",
            "error",
            f"--speculative-dflash-block-size {block} and --speculative-num-draft-tokens {draft}: for DFLASH they are "
            "one setting (the block) and SGLang stops when they differ",
            "give only --speculative-dflash-block-size",
        )


@rule("dflash-window", "error", "DFLASH draft window smaller than the block")
def _dflash_window(ctx: LintContext) -> Iterable[Finding]:
    if _spec(ctx) != "DFLASH":
        return
    window = _int(ctx.flag("--speculative-draft-window-size") or ctx.flag("--speculative-dflash-draft-window-size"))
    block = _int(ctx.flag("--speculative-dflash-block-size") or ctx.flag("--speculative-num-draft-tokens"))
    if window is not None and block is not None and window < block:
        yield _dflash_finding(
            ctx,
            "dflash-window",
            "error",
            f"--speculative-draft-window-size {window} is under the block size {block}: SGLang stops "
            '("--speculative-draft-window-size must be >= --speculative-num-draft-tokens (block_size)")',
            f"use a window of at least {block}",
        )


@rule("dflash-parallelism", "error", "DFLASH with DP attention or pipeline parallelism")
def _dflash_parallel(ctx: LintContext) -> Iterable[Finding]:
    if _spec(ctx) != "DFLASH":
        return
    if ctx.has("--enable-dp-attention"):
        yield _dflash_finding(
            ctx,
            "dflash-parallelism",
            "error",
            'DFLASH with --enable-dp-attention: SGLang stops ("Currently DFLASH speculative decoding does not support '
            'dp attention.")',
            "drop --enable-dp-attention",
        )
    pp = _int(ctx.flag("--pipeline-parallel-size") or ctx.flag("--pp-size"))
    if pp is not None and pp != 1:
        yield _dflash_finding(
            ctx,
            "dflash-parallelism",
            "error",
            f'DFLASH with pipeline parallel size {pp}: SGLang stops ("only supports pp_size == 1")',
            "use --pp-size 1 (tensor parallelism works)",
        )


@rule("dflash-draft-backend", "warning", "DFLASH draft attention backend other than flashinfer or fa3")
def _dflash_backend(ctx: LintContext) -> Iterable[Finding]:
    backend = ctx.flag("--speculative-draft-attention-backend")
    if _spec(ctx) == "DFLASH" and backend and backend not in ("flashinfer", "fa3"):
        yield _dflash_finding(
            ctx,
            "dflash-draft-backend",
            "warning",
            f"--speculative-draft-attention-backend {backend}: the DFLASH draft worker supports flashinfer and fa3 "
            "only and falls back to flashinfer",
            "use flashinfer or fa3",
        )


@rule("unknown-flag", "warning", "a flag SGLang 0.5.11 does not have (argparse would exit 2)")
def _unknown_flag(ctx: LintContext) -> Iterable[Finding]:
    for name in ctx.args:
        if flags.lookup(name) is not None:
            continue
        full = flags.abbreviation_of(name)
        if full:
            yield Finding(
                "unknown-flag",
                "warning",
                ctx.name,
                f"{name} is an abbreviation of {full} (argparse accepts it)",
                fix=f"write {full}",
                field="args",
            )
            continue
        near = flags.nearest(name)
        yield Finding(
            "unknown-flag",
            "warning",
            ctx.name,
            f"{name} is not a known SGLang flag" + (f"; did you mean {near}?" if near else ""),
            fix=f"use {near}" if near else "check `python -m sglang.launch_server --help` on the host",
            field="args",
        )


_CHOICE_FLAGS = ("--reasoning-parser", "--tool-call-parser", "--mamba-scheduler-strategy", "--speculative-algorithm")


@rule("invalid-choice", "error", "a value SGLang's argparse rejects (invalid choice)")
def _invalid_choice(ctx: LintContext) -> Iterable[Finding]:
    for name in _CHOICE_FLAGS:
        if not ctx.has(name):
            continue
        value = ctx.flag(name)
        choices = flags.FLAGS[name].choices or ()
        if value is None:
            yield Finding(
                "invalid-choice", "error", ctx.name, f"{name} needs a value (one of {', '.join(choices)})", field="args"
            )
        elif value not in choices:
            near = flags.nearest_choice(value, choices)
            yield Finding(
                "invalid-choice",
                "error",
                ctx.name,
                f"{name} {value!r}: invalid choice (choose from {', '.join(choices)})",
                fix=f"use {near}" if near else f"one of {', '.join(choices)}",
                field="args",
            )


@rule("mem-fraction-range", "error", "--mem-fraction-static must be a number in (0, 1)")
def _mem_fraction(ctx: LintContext) -> Iterable[Finding]:
    if not ctx.has("--mem-fraction-static"):
        return
    v = ctx.flag("--mem-fraction-static")
    try:
        f = float(v) if v is not None else None
    except ValueError:
        f = None
    if f is None or not 0.0 < f < 1.0:
        yield Finding(
            "mem-fraction-range",
            "error",
            ctx.name,
            f"--mem-fraction-static {v!r} is not in (0, 1)",
            fix="a fraction such as 0.85 (higher = bigger KV cache, lower = more room for CUDA graphs)",
            field="args",
        )


@rule("context-length-exceeds-model", "error", "--context-length above the model's max_position_embeddings")
def _context_length(ctx: LintContext) -> Iterable[Finding]:
    want = _int(ctx.flag("--context-length"))
    cfg = ctx.model_config
    if want is None or cfg is None:
        return
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    limit = cfg.get("max_position_embeddings") or (text or {}).get("max_position_embeddings")
    if not isinstance(limit, int) or want <= limit:
        return
    allowed = _env(ctx).get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "").lower() in _TRUE
    yield Finding(
        "context-length-exceeds-model",
        "warning" if allowed else "error",
        ctx.name,
        f"--context-length {want} is above the model's max_position_embeddings {limit}"
        + (
            ": allowed by SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN, outputs may degrade"
            if allowed
            else ": SGLang refuses it unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
        ),
        fix=f"--context-length {limit} or less (or use RoPE scaling via --json-model-override-args)",
        field="args",
    )


@rule("spec-v2-env", "warning", "hybrid model + speculative + extra_buffer wants SGLANG_ENABLE_SPEC_V2=1 on 0.5.11")
def _spec_v2(ctx: LintContext) -> Iterable[Finding]:
    strategy = ctx.flag("--mamba-scheduler-strategy") or ""
    if not _spec(ctx) or not strategy.startswith("extra_buffer") or _spec(ctx) == "NGRAM":
        return
    hybrid, _ = is_hybrid(ctx)
    if not hybrid:
        return
    env = _env(ctx)
    val = env.get("SGLANG_ENABLE_SPEC_V2")
    topk = _int(ctx.flag("--speculative-eagle-topk"))
    if val is not None and val.lower() not in _TRUE:
        yield Finding(
            "spec-v2-env",
            "error",
            ctx.name,
            f"SGLANG_ENABLE_SPEC_V2={val} turns spec v2 off, which extra_buffer radix caching with speculative "
            "decoding needs",
            fix="set SGLANG_ENABLE_SPEC_V2=1 in the preset's env",
            field="env",
        )
    elif topk is not None and topk > 1:
        yield Finding(
            "spec-v2-env",
            "error",
            ctx.name,
            f"--speculative-eagle-topk {topk}: spec v2 only supports topk 1, so SGLang falls back to spec v1, "
            "which extra_buffer needs v2 for",
            fix="use --speculative-eagle-topk 1",
            field="args",
        )
    elif val is None:
        yield Finding(
            "spec-v2-env",
            "warning",
            ctx.name,
            "SGLANG_ENABLE_SPEC_V2 is not set: 0.5.11 defaults it on, but SGLang's own error text for this "
            "combination asks for it explicitly",
            fix='add SGLANG_ENABLE_SPEC_V2 = "1" to the preset\'s env',
            field="env",
        )
