"""Preset lint: rules with ids, severity and a fix, run by `dflash-console check` (pure).

A rule is a function `(LintContext) -> Iterable[Finding]` registered with `@rule(...)`. The
SGLang-specific rules live in `console/sglang/lint_rules.py` and register the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from console.config import Fleet, Host, Preset
from console.sglang.argflags import parse_flags

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    """One lint result for one preset."""

    rule: str
    severity: Severity
    preset: str
    message: str
    fix: str = ""
    field: str = ""

    def __str__(self) -> str:
        tail = f" (fix: {self.fix})" if self.fix else ""
        return f"{self.severity}[{self.rule}] presets.{self.preset}{'.' + self.field if self.field else ''}: {self.message}{tail}"


@dataclass(frozen=True)
class LintContext:
    """What a rule may look at: the preset, its host, and (when readable) the model's config.json."""

    name: str
    preset: Preset
    host: Host
    model_config: dict[str, Any] | None = None
    args: dict[str, list[str | None]] = field(default_factory=dict)

    def flag(self, name: str) -> str | None:
        """Last value given for `--name` (None if absent or a bare switch)."""
        vals = self.args.get(name)
        return vals[-1] if vals else None

    def has(self, name: str) -> bool:
        return name in self.args


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    summary: str
    check: Callable[[LintContext], Iterable[Finding]]


RULES: dict[str, Rule] = {}


def rule(
    id: str, severity: Severity, summary: str
) -> Callable[[Callable[[LintContext], Iterable[Finding]]], Callable[[LintContext], Iterable[Finding]]]:
    """Register a lint rule."""

    def deco(fn: Callable[[LintContext], Iterable[Finding]]) -> Callable[[LintContext], Iterable[Finding]]:
        RULES[id] = Rule(id, severity, summary, fn)
        return fn

    return deco


def lint_preset(fleet: Fleet, name: str, model_config: dict[str, Any] | None = None) -> list[Finding]:
    """Run every registered rule on one preset; a rule that raises becomes an error finding."""
    _load_rule_modules()
    p = fleet.presets[name]
    ctx = LintContext(name, p, fleet.hosts[p.host], model_config, parse_flags(p.args))
    out: list[Finding] = []
    for r in RULES.values():
        try:
            out.extend(r.check(ctx))
        except Exception as e:  # a buggy rule must not hide the others
            out.append(Finding(r.id, "error", name, f"lint rule crashed: {type(e).__name__}: {e}"))
    return out


def _load_rule_modules() -> None:
    import importlib

    for mod in ("console.sglang.lint_rules",):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise


@rule("bind-loopback-direct", "error", 'bind 127.0.0.1 with http = "direct" is unreachable')
def _bind_loopback_direct(ctx: LintContext) -> Iterable[Finding]:
    if ctx.host.http == "direct" and ctx.preset.bind in ("127.0.0.1", "localhost", "::1"):
        yield Finding(
            "bind-loopback-direct",
            "error",
            ctx.name,
            f"bind = {ctx.preset.bind!r} but host '{ctx.preset.host}' uses http = \"direct\": "
            "the console cannot reach a loopback-only server from outside",
            fix='set bind = "0.0.0.0" or http = "tunnel"',
            field="bind",
        )
