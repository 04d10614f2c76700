"""`dflash-console check`: validate hosts.toml, lint every preset, print each replica's command."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.config import Fleet
    from console.sglang.lint import Finding


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("check", help="validate hosts.toml, lint presets, show the exact remote commands")
    p.add_argument("--strict", action="store_true", help="exit 1 when there are warnings")
    p.add_argument(
        "--remote", action="store_true", help="also run SGLang's own argument validation on each preset's host"
    )
    p.add_argument("presets", nargs="*", help="only these presets")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.config import load_fleet
    from console.sglang.command import plan_launch
    from console.sglang.lint import lint_preset

    fleet = load_fleet(args.hosts)
    print(f"{fleet.source}: {len(fleet.hosts)} hosts, {len(fleet.presets)} presets")
    names = args.presets or list(fleet.presets)
    unknown = [n for n in names if n not in fleet.presets]
    if unknown:
        from console.commands.names import unknown as unknown_name

        for n in unknown:
            print(f"error: {unknown_name('preset', n, list(fleet.presets))}", file=sys.stderr)
        return 2
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    findings: list[Finding] = []
    for name in names:
        preset = fleet.presets[name]
        print(f"\npreset {name} (host {preset.host}){': ' + preset.description if preset.description else ''}")
        cfg, problem = _model_config(fleet, name)
        fs = lint_preset(fleet, name, cfg)
        if problem:
            from console.sglang.lint import Finding

            fs.append(Finding("model-config", "warning", name, f"{problem}; lint rules that read it were skipped"))
        findings.extend(fs)
        for f in fs:
            print(f"  {f}")
        for plan in plan_launch(fleet, name, stamp):
            print(f"  {plan.replica.name}  port {plan.replica.port}  GPUs {','.join(map(str, plan.replica.gpus))}")
            print(f"    {plan.command}")
    if not args.presets:
        from console.router.command import print_router_plans

        print_router_plans(fleet, stamp)
    if args.remote:
        from console.commands.check_remote import run_remote

        findings.extend(run_remote(fleet, names))
    errors = sum(f.severity == "error" for f in findings)
    warnings = sum(f.severity == "warning" for f in findings)
    print(f"\n{errors} errors, {warnings} warnings")
    if errors:
        return 2
    return 1 if warnings and args.strict else 0


def _model_config(fleet: Fleet, name: str) -> tuple[dict[str, Any] | None, str]:
    """The model's config.json when the host is local (remote ones are read by `check --remote`), and why not.

    Read depth-limited like any file from a host: a deeply nested one was a RecursionError traceback.
    """
    from pathlib import Path

    from console import hostjson

    preset = fleet.presets[name]
    if fleet.hosts[preset.host].transport != "local":
        return None, ""
    path = Path(preset.model).expanduser() / "config.json"
    try:
        doc = hostjson.loads(path.read_bytes(), f"model config {path}")
    except OSError:
        return None, ""
    except hostjson.HostJsonError as e:
        return None, "" if not e.too_deep else str(e)
    return (doc if isinstance(doc, dict) else None), ""
